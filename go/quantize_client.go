package densewire

import (
	"context"
	"net/url"
	"strconv"
	"sync"
)

// The published ranges of quantization ids (SPEC.md section 17.6), cached for the process: an id
// is the SHA-256 of its ranges, checked by ParseQuantization, so an object stays valid forever and
// whatever server answered it. Concurrent requests for one id share one fetch. The cache holds at
// most quantCacheSize objects (a few KiB each).
var quantCache struct {
	sync.Mutex
	m map[string]*quantEntry
}

type quantEntry struct {
	done chan struct{} // closed when q or err is set
	q    *Quantization
	err  error
}

const quantCacheSize = 1024

// Quantization returns the quantization object id (GET {BaseURL}/v1/quantization/{id}, SPEC.md
// section 17.6), checked by ParseQuantization and against id. Each id is fetched once and cached
// for the life of the process (the object is immutable and its id is the hash of its ranges);
// concurrent calls for one id wait for the same fetch. A failed fetch is not cached.
func (c *Client) Quantization(ctx context.Context, id string) (*Quantization, error) {
	if id == "" {
		return nil, newError(InvalidField, "quantization", -1, "no quantization id")
	}
	quantCache.Lock()
	e := quantCache.m[id]
	if e == nil {
		if quantCache.m == nil || len(quantCache.m) >= quantCacheSize {
			quantCache.m = map[string]*quantEntry{}
		}
		e = &quantEntry{done: make(chan struct{})}
		quantCache.m[id] = e
		quantCache.Unlock()
		e.q, e.err = c.fetchQuantization(ctx, id)
		if e.err != nil {
			quantCache.Lock()
			if quantCache.m[id] == e {
				delete(quantCache.m, id)
			}
			quantCache.Unlock()
		}
		close(e.done)
		return e.q, e.err
	}
	quantCache.Unlock()
	select {
	case <-e.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if e.err != nil { // the fetch this call waited for failed: try once more on its own
		return c.fetchQuantization(ctx, id)
	}
	return e.q, nil
}

func (c *Client) fetchQuantization(ctx context.Context, id string) (*Quantization, error) {
	body, err := c.getJSON(ctx, "/v1/quantization/"+url.PathEscape(id))
	if err != nil {
		return nil, err
	}
	q, err := ParseQuantization(body)
	if err != nil {
		return nil, err
	}
	if q.ID != id {
		return nil, newError(InvalidField, "id", -1, "GET /v1/quantization/"+id+" answered the object of id "+strconv.Quote(q.ID))
	}
	return q, nil
}

// dequantizeAnswer turns an int8 or uint8 answer into float32 with the ranges its quantization id
// names (EmbeddingsRequest.Dequantize). Float answers (a server that does not quantize) pass.
func (c *Client) dequantizeAnswer(ctx context.Context, t *Tensor, meta *Meta) (*Tensor, error) {
	if t.DType != Int8 && t.DType != Uint8 {
		return t, nil
	}
	if meta == nil || meta.Quantization == "" {
		return nil, newError(InvalidField, "quantization", -1, "the server answered "+t.DType.String()+
			" codes without a quantization id: they cannot be dequantized")
	}
	q, err := c.Quantization(ctx, meta.Quantization)
	if err != nil {
		return nil, err
	}
	if q.Dimensions != t.D {
		return nil, newError(ShapeMismatch, "quantization", -1, "quantization "+q.ID+" has "+strconv.Itoa(q.Dimensions)+
			" dimensions, the answer "+strconv.Itoa(t.D))
	}
	return Dequantize(t, q.Lower, q.Upper)
}
