package densewire_test

import (
	"encoding/hex"
	"net/http"
	"reflect"
	"testing"
	"unsafe"

	densewire "github.com/densewire/densewire/go"
	"github.com/densewire/densewire/go/arrowipc"
)

// kindParts is what a ragged or sparse golden case decodes to, whatever the format.
type kindParts struct {
	dtype   densewire.DType
	n       int
	d       uint64
	offsets []uint32
	indices []uint32
	data    []byte
	meta    *densewire.Meta
	ragged  *densewire.RaggedTensor
	sparse  *densewire.SparseTensor
}

func kindDecode(c *goldenCase, body []byte, h http.Header) (*kindParts, error) {
	var (
		r    *densewire.RaggedTensor
		s    *densewire.SparseTensor
		meta *densewire.Meta
		err  error
	)
	resp := c.Message == "RaggedEmbeddingsResponse" || c.Message == "SparseEmbeddingsResponse"
	if c.Kind == "ragged" {
		switch c.Format {
		case "raw":
			r, meta, err = densewire.DecodeRaggedRaw(h, body)
		case "msgpack":
			r, meta, err = densewire.DecodeRaggedMsgpack(body)
		case "protobuf":
			r, meta, err = densewire.DecodeRaggedProtobuf(body, resp)
		case "json":
			r, meta, err = densewire.DecodeRaggedJSON(body)
		case "arrow":
			r, meta, err = arrowipc.DecodeRagged(body)
		}
		if err != nil {
			return nil, err
		}
		return &kindParts{dtype: r.DType, n: r.N, d: uint64(r.D), offsets: r.Offsets, data: r.Data, meta: meta, ragged: r}, nil
	}
	switch c.Format {
	case "raw":
		s, meta, err = densewire.DecodeSparseRaw(h, body)
	case "msgpack":
		s, meta, err = densewire.DecodeSparseMsgpack(body)
	case "protobuf":
		s, meta, err = densewire.DecodeSparseProtobuf(body, resp)
	case "json":
		s, meta, err = densewire.DecodeSparseJSON(body)
	case "arrow":
		s, meta, err = arrowipc.DecodeSparse(body)
	}
	if err != nil {
		return nil, err
	}
	return &kindParts{dtype: s.DType, n: s.N, d: s.V, offsets: s.Offsets, indices: s.Indices, data: s.Data, meta: meta, sparse: s}, nil
}

func kindEncode(t *testing.T, c *goldenCase, p *kindParts, meta *densewire.Meta) ([]byte, http.Header) {
	h := http.Header{}
	var (
		out []byte
		err error
	)
	order := densewire.LittleEndian
	if c.ByteOrder == "big" {
		order = densewire.BigEndian
	}
	opts := densewire.JSONOptions{EncodingFormat: densewire.EncodingFormat(c.EncodingFormat), ByteOrder: order}
	if c.Kind == "ragged" {
		r := p.ragged
		switch c.Format {
		case "raw":
			out = densewire.EncodeRaggedRaw(h, r, meta)
		case "msgpack":
			out = densewire.EncodeRaggedMsgpack(r, meta)
		case "protobuf":
			out = densewire.EncodeRaggedProtobuf(r, meta)
		case "json":
			out, err = densewire.EncodeRaggedJSON(r, meta, opts)
		case "arrow":
			out, err = arrowipc.EncodeRagged(r, meta)
		}
	} else {
		s := p.sparse
		switch c.Format {
		case "raw":
			out = densewire.EncodeSparseRaw(h, s, meta)
		case "msgpack":
			out = densewire.EncodeSparseMsgpack(s, meta)
		case "protobuf":
			out = densewire.EncodeSparseProtobuf(s, meta)
		case "json":
			out, err = densewire.EncodeSparseJSON(s, meta, opts)
		case "arrow":
			out, err = arrowipc.EncodeSparse(s, meta)
		}
	}
	if err != nil {
		t.Fatalf("encode: %v", err)
	}
	return out, h
}

func kindHeaders(c *goldenCase) http.Header {
	h := http.Header{}
	for k, v := range c.Headers {
		h.Set(k, v)
	}
	return h
}

func checkKindParts(t *testing.T, c *goldenCase, p *kindParts, what string) {
	t.Helper()
	want := itemsLE(t, c.Items)
	if p.dtype.String() != c.DType || p.n != c.Shape[0] || p.d != uint64(c.Shape[1]) {
		t.Fatalf("%s: %s (%d, %d), want %s %v", what, p.dtype, p.n, p.d, c.DType, c.Shape)
	}
	if !reflect.DeepEqual(p.offsets, c.Offsets) || hex.EncodeToString(p.data) != hex.EncodeToString(want) {
		t.Fatalf("%s: offsets %v data %x, want %v %x", what, p.offsets, p.data, c.Offsets, want)
	}
	if c.Kind == "sparse" && !reflect.DeepEqual(p.indices, c.Indices) && !(len(p.indices) == 0 && len(c.Indices) == 0) {
		t.Fatalf("%s: indices %v, want %v", what, p.indices, c.Indices)
	}
	if c.Model != nil && (p.meta == nil || p.meta.Model != *c.Model) {
		t.Fatalf("%s: meta %+v, want model %q", what, p.meta, *c.Model)
	}
	if c.Usage != nil && (p.meta.PromptTokens != c.Usage.PromptTokens || p.meta.TotalTokens != c.Usage.TotalTokens) {
		t.Fatalf("%s: usage %+v, want %+v", what, p.meta, *c.Usage)
	}
	if r := p.ragged; r != nil {
		for i := 0; i < r.N; i++ {
			m := r.Matrix(i)
			if m.N != int(r.Offsets[i+1]-r.Offsets[i]) || len(m.Data) > 0 && unsafe.SliceData(m.Data) != &r.Data[int(r.Offsets[i])*r.DType.RowBytes(r.D)] {
				t.Fatalf("matrix %d is not a view of the rows", i)
			}
		}
	}
}

// checkKind runs a case of ragged.json or sparse.json (SPEC.md 20.8).
func checkKind(t *testing.T, c *goldenCase) {
	if c.Direction != "" {
		input := []byte(nil)
		if c.InputHex != nil {
			input = mustHex(t, *c.InputHex)
		} else {
			input = []byte(*c.InputText)
		}
		_, err := kindDecode(c, input, kindHeaders(c))
		checkCaseError(t, c, err)
		return
	}
	var body []byte
	if c.Format == "json" {
		body = []byte(*c.EncodedText)
	} else {
		body = mustHex(t, *c.EncodedHex)
	}
	p, err := kindDecode(c, body, kindHeaders(c))
	if err != nil {
		t.Fatal(err)
	}
	checkKindParts(t, c, p, "decoded")
	var meta *densewire.Meta
	if c.Model != nil {
		meta = &densewire.Meta{Model: *c.Model}
		if c.Usage != nil {
			meta.PromptTokens, meta.TotalTokens = c.Usage.PromptTokens, c.Usage.TotalTokens
		}
	}
	out, h := kindEncode(t, c, p, meta)
	if c.ByteExact {
		if got := hex.EncodeToString(out); got != *c.EncodedHex {
			t.Fatalf("encoded %s\nwant    %s", got, *c.EncodedHex)
		}
		if c.Format == "raw" && !reflect.DeepEqual(h, kindHeaders(c)) {
			t.Fatalf("headers %v, want %v", h, kindHeaders(c))
		}
	}
	if c.Format != "raw" {
		h = kindHeaders(c)
	}
	back, err := kindDecode(c, out, h)
	if err != nil {
		t.Fatalf("our encoding does not decode: %v", err)
	}
	checkKindParts(t, c, back, "ours")
}

// FuzzDecodeKinds: any body (with its case's headers) decodes to a ragged or sparse tensor whose
// parts fit its shape, or fails with a decoder error of the spec's categories inside the body.
func FuzzDecodeKinds(f *testing.F) {
	formats := []string{"raw", "msgpack", "protobuf", "json"}
	for _, c := range loadGolden(f) {
		if c.file != "ragged" && c.file != "sparse" || c.Format == "arrow" {
			continue
		}
		body := c.EncodedHex
		if body == nil {
			body = c.InputHex
		}
		var b []byte
		if body != nil {
			b, _ = hex.DecodeString(*body)
		} else if c.EncodedText != nil {
			b = []byte(*c.EncodedText)
		} else {
			b = []byte(*c.InputText)
		}
		for i, fm := range formats {
			if fm == c.Format {
				f.Add(uint8(i), c.Kind == "sparse", c.Headers["Densewire-Shape"], c.Headers["Densewire-Dtype"], b)
			}
		}
	}
	f.Fuzz(func(t *testing.T, format uint8, sparse bool, shape, dtype string, body []byte) {
		kind := "ragged"
		if sparse {
			kind = "sparse"
		}
		c := &goldenCase{Kind: kind, Format: formats[int(format)%len(formats)], Message: "RaggedTensor"}
		h := http.Header{}
		h.Set("Densewire-Kind", kind)
		h.Set("Densewire-Shape", shape)
		h.Set("Densewire-Dtype", dtype)
		p, err := kindDecode(c, body, h)
		if err != nil {
			checkDecodeError(t, err, len(body))
			return
		}
		items := int(p.offsets[p.n])
		size := p.dtype.ItemSize()
		if p.ragged != nil {
			size = p.dtype.RowBytes(int(p.d))
		} else if len(p.indices) != items {
			t.Fatalf("%d indices, offsets say %d", len(p.indices), items)
		}
		if len(p.offsets) != p.n+1 || len(p.data) != items*size {
			t.Fatalf("%d offsets for %d items, %d bytes for %d entries", len(p.offsets), p.n, len(p.data), items)
		}
	})
}
