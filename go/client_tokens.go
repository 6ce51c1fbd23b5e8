package densewire

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
)

// arrowRaggedDec is the Arrow decoder of ragged tensors, registered by package arrowipc.
var (
	arrowRaggedMu  sync.RWMutex
	arrowRaggedDec func([]byte) (*RaggedTensor, *Meta, error)
)

// RegisterArrowRagged installs the Arrow decoder of ragged tensors used by Client.EmbedTokens; the
// arrowipc package calls it from its init function.
func RegisterArrowRagged(decode func([]byte) (*RaggedTensor, *Meta, error)) {
	arrowRaggedMu.Lock()
	defer arrowRaggedMu.Unlock()
	arrowRaggedDec = decode
}

// TokensRequest is the request body of TEI's POST /embed_all (per-token embeddings).
type TokensRequest struct {
	Inputs []string // the texts; none empty
	// Truncate true cuts texts longer than the model's maximum, false rejects them; nil means the
	// server's default (densewire serve --auto-truncate).
	Truncate *bool
}

// EmbedTokens asks the server for per-token embeddings (TEI's POST /embed_all, which densewire
// serve answers beside /v1): one tokens x d matrix per input, special tokens included, as a
// RaggedTensor whose rows are one buffer (Matrix(i) aliases it). The body is asked for in the
// client's Formats (densewire's ragged raw body first by default; SPEC.md 20) and decoded by its
// Content-Type; TEI's own JSON ([[[f32]]]) is read too. Retried as Embed; errors as Embed's.
func (c *Client) EmbedTokens(ctx context.Context, req *TokensRequest) (*RaggedTensor, *Meta, error) {
	if len(req.Inputs) == 0 {
		return nil, nil, newError(InvalidField, "inputs", -1, "inputs is empty")
	}
	accept, err := c.Accept()
	if err != nil {
		return nil, nil, err
	}
	resp, body, err := c.postJSON(ctx, "/embed_all", struct {
		Inputs   []string `json:"inputs"`
		Truncate *bool    `json:"truncate,omitempty"`
	}{req.Inputs, req.Truncate}, accept)
	if err != nil {
		return nil, nil, err
	}
	t, meta, err := decodeTokens(resp.Header, body)
	if err != nil {
		return nil, nil, err
	}
	if t.N != len(req.Inputs) {
		return nil, nil, newError(ShapeMismatch, "data", -1, "the server returned "+strconv.Itoa(t.N)+" matrices for "+strconv.Itoa(len(req.Inputs))+" inputs")
	}
	return t, meta, nil
}

func decodeTokens(h http.Header, body []byte) (*RaggedTensor, *Meta, error) {
	f, tei, err := kindFormat(h)
	if err != nil {
		return nil, nil, err
	}
	switch {
	case tei:
		return teiTokens(body)
	case f == FormatRaw:
		return DecodeRaggedRaw(h, body)
	case f == FormatMsgpack:
		return DecodeRaggedMsgpack(body)
	case f == FormatProtobuf:
		return DecodeRaggedProtobuf(body, true)
	}
	arrowRaggedMu.RLock()
	dec := arrowRaggedDec
	arrowRaggedMu.RUnlock()
	if dec == nil {
		return nil, nil, arrowMissing()
	}
	return dec(body)
}

// teiTokens reads TEI's /embed_all JSON: an array of matrices of float rows, into one float32 buffer.
func teiTokens(body []byte) (*RaggedTensor, *Meta, error) {
	var doc [][][]json.Number
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return nil, nil, newError(Malformed, "", -1, "TEI's per-token JSON is an array of matrices of numbers: "+err.Error())
	}
	counts := make([]int, len(doc))
	d := -1
	for i, m := range doc {
		counts[i] = len(m)
		for r, row := range m {
			if d < 0 {
				d = len(row)
			}
			if len(row) != d {
				return nil, nil, newError(ShapeMismatch, "["+strconv.Itoa(i)+"]["+strconv.Itoa(r)+"]", -1, "rows of different lengths")
			}
		}
	}
	d = max(d, 0)
	offsets := offsetsOf(counts)
	data := make([]byte, 4*int(offsets[len(doc)])*d)
	at := 0
	for i, m := range doc {
		for r, row := range m {
			values := make([]any, len(row))
			for j, v := range row {
				values[j] = v
			}
			if e := numberItems(data[at:at+4*d], Float32, values, "["+strconv.Itoa(i)+"]["+strconv.Itoa(r)+"]"); e != nil {
				return nil, nil, e
			}
			at += 4 * d
		}
	}
	return &RaggedTensor{DType: Float32, N: len(doc), D: d, Offsets: offsets, Data: data}, nil, nil
}
