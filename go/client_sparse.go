package densewire

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"sync"
)

// arrowSparseDec is the Arrow decoder of sparse tensors, registered by package arrowipc.
var (
	arrowSparseMu  sync.RWMutex
	arrowSparseDec func([]byte) (*SparseTensor, *Meta, error)
)

// RegisterArrowSparse installs the Arrow decoder of sparse tensors used by Client.EmbedSparse; the
// arrowipc package calls it from its init function.
func RegisterArrowSparse(decode func([]byte) (*SparseTensor, *Meta, error)) {
	arrowSparseMu.Lock()
	defer arrowSparseMu.Unlock()
	arrowSparseDec = decode
}

// SparseRequest is the request body of TEI's POST /embed_sparse (sparse, SPLADE, vectors).
type SparseRequest struct {
	Inputs []string // the texts; none empty
	// Truncate true cuts texts longer than the model's maximum, false rejects them; nil means the
	// server's default (densewire serve --auto-truncate).
	Truncate *bool
	// TruncationDirection is TEI's truncation_direction, "Left" or "Right" ("" sends none: Right).
	TruncationDirection string
	// PromptName is TEI's prompt_name: a prompt of the model's configuration put before each text.
	PromptName string
	// MaxActiveDims is densewire serve's max_active_dims: keep each vector's k largest weights (0: all).
	MaxActiveDims int
	// VocabSize is the vocabulary size given to a TEI JSON answer, which has none; 0 means one past
	// the largest index. densewire's binary answers carry their own.
	VocabSize uint64
}

// EmbedSparse asks the server for sparse vectors (TEI's POST /embed_sparse, which densewire serve
// answers beside /v1): per input its non-zero vocabulary weights, as a SparseTensor whose indices
// and values are one buffer each (Vector(i) aliases them). The body is asked for in the client's
// Formats (densewire's sparse raw body first by default; SPEC.md 20) and decoded by its
// Content-Type; TEI's own JSON ([[{"index", "value"}]]) is read too. Retried as Embed; errors as
// Embed's.
func (c *Client) EmbedSparse(ctx context.Context, req *SparseRequest) (*SparseTensor, *Meta, error) {
	if len(req.Inputs) == 0 {
		return nil, nil, newError(InvalidField, "inputs", -1, "inputs is empty")
	}
	accept, err := c.Accept()
	if err != nil {
		return nil, nil, err
	}
	resp, body, err := c.postJSON(ctx, "/embed_sparse", struct {
		Inputs              []string `json:"inputs"`
		Truncate            *bool    `json:"truncate,omitempty"`
		TruncationDirection string   `json:"truncation_direction,omitempty"`
		PromptName          string   `json:"prompt_name,omitempty"`
		MaxActiveDims       int      `json:"max_active_dims,omitempty"`
	}{req.Inputs, req.Truncate, req.TruncationDirection, req.PromptName, req.MaxActiveDims}, accept)
	if err != nil {
		return nil, nil, err
	}
	t, meta, err := decodeSparse(resp.Header, body, req.VocabSize)
	if err != nil {
		return nil, nil, err
	}
	if t.N != len(req.Inputs) {
		return nil, nil, newError(ShapeMismatch, "data", -1, "the server returned "+strconv.Itoa(t.N)+" vectors for "+strconv.Itoa(len(req.Inputs))+" inputs")
	}
	return t, meta, nil
}

func decodeSparse(h http.Header, body []byte, vocab uint64) (*SparseTensor, *Meta, error) {
	f, tei, err := kindFormat(h)
	if err != nil {
		return nil, nil, err
	}
	switch {
	case tei:
		t, err := teiSparse(body, vocab)
		return t, nil, err
	case f == FormatRaw:
		return DecodeSparseRaw(h, body)
	case f == FormatMsgpack:
		return DecodeSparseMsgpack(body)
	case f == FormatProtobuf:
		return DecodeSparseProtobuf(body, true)
	}
	arrowSparseMu.RLock()
	dec := arrowSparseDec
	arrowSparseMu.RUnlock()
	if dec == nil {
		return nil, nil, arrowMissing()
	}
	return dec(body)
}

// teiSparse reads TEI's /embed_sparse JSON: per input an array of {index, value}, into one indices
// and one float32 values buffer; the vocabulary is vocab, or one past the largest index when 0.
func teiSparse(body []byte, vocab uint64) (*SparseTensor, error) {
	var doc [][]struct {
		Index *json.Number `json:"index"`
		Value *json.Number `json:"value"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return nil, newError(Malformed, "", -1, "TEI's sparse JSON is an array of arrays of {index, value}: "+err.Error())
	}
	counts := make([]int, len(doc))
	var indices []uint32
	var values []float32
	top := uint64(0)
	for i, v := range doc {
		counts[i] = len(v)
		for j, e := range v {
			field := "[" + strconv.Itoa(i) + "][" + strconv.Itoa(j) + "]"
			if e.Index == nil {
				return nil, newError(InvalidField, field+".index", -1, "missing")
			}
			idx, err := strconv.ParseUint(e.Index.String(), 10, 32)
			if err != nil {
				return nil, newError(InvalidField, field+".index", -1, "must be an integer from 0 to 2^32 - 1, got "+e.Index.String())
			}
			if e.Value == nil {
				return nil, newError(InvalidField, field+".value", -1, "missing")
			}
			val, err := strconv.ParseFloat(e.Value.String(), 32)
			if err != nil || math.IsInf(val, 0) {
				return nil, newError(InvalidField, field+".value", -1, "must be a float32 number, got "+e.Value.String())
			}
			indices = append(indices, uint32(idx))
			values = append(values, float32(val))
			top = max(top, idx+1)
		}
	}
	if vocab == 0 {
		vocab = max(top, 1)
	}
	return NewSparseTensor(Float32, vocab, offsetsOf(counts), indices, Float32Bytes(values))
}
