package densewire

import (
	"strconv"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
)

// The fields of RaggedTensor (offsets 3, data 4) and SparseTensor (offsets 3, indices 4, data 5)
// in proto/densewire/v1/tensor.proto (SPEC.md 20.6); dtype 1 and shape 2 as in Tensor.

// pbKind accumulates a RaggedTensor or SparseTensor message.
type pbKind struct {
	pbTensor
	bytes map[protowire.Number][]byte
}

// kindTensor parses a RaggedTensor / SparseTensor held in b (offset base of the body); names are
// its bytes fields beyond dtype and shape.
func (p *pbParser) kindTensor(b []byte, base int, top bool, acc *pbKind, last protowire.Number) *Error {
	for len(b) > 0 {
		tagOff := base
		num, typ, n := consumeTag(b)
		if n < 0 {
			return p.wireError(n, tagOff, tagOff, top, "invalid tag")
		}
		if num >= 3 && num <= last {
			if typ != protowire.BytesType {
				return p.wrongType(num, typ, tagOff)
			}
			v, m := protowire.ConsumeBytes(b[n:])
			if m < 0 {
				return p.wireError(m, lengthErrOff(m, tagOff, base+n), tagOff, top, "invalid length")
			}
			acc.bytes[num] = v
			b, base = b[n+m:], base+n+m
			continue
		}
		// dtype, shape and unknown fields: the Tensor parser, one field at a time
		size := n + protowire.ConsumeFieldValue(num, typ, b[n:])
		if size < n {
			return p.wireError(size-n, tagOff, tagOff, top, "invalid field value")
		}
		if num == pbTensorDType || num == pbTensorShape {
			if e := p.tensor(b[:size], base, top, &acc.pbTensor); e != nil {
				return e
			}
		}
		b, base = b[size:], base+size
	}
	return nil
}

// kindResponse parses a Ragged/SparseEmbeddingsResponse: model 1, embeddings 2, usage 3.
func (p *pbParser) kindResponse(body []byte, acc *pbKind, last protowire.Number) (*Meta, *Error) {
	meta := &Meta{}
	hasEmb := false
	b, base := body, 0
	for len(b) > 0 {
		tagOff := base
		num, typ, n := consumeTag(b)
		if n < 0 {
			return nil, p.wireError(n, tagOff, tagOff, true, "invalid tag")
		}
		b, base = b[n:], base+n
		if num >= pbRespModel && num <= pbRespUsage {
			if typ != protowire.BytesType {
				return nil, p.wrongType(num, typ, tagOff)
			}
			v, m := protowire.ConsumeBytes(b)
			if m < 0 {
				return nil, p.wireError(m, lengthErrOff(m, tagOff, base), tagOff, true, "invalid length")
			}
			vOff := base + m - len(v)
			switch num {
			case pbRespModel:
				if !utf8.Valid(v) {
					return nil, newError(Malformed, "model", tagOff, "model is not valid UTF-8")
				}
				meta.Model = string(v)
			case pbRespEmbeddings:
				hasEmb = true
				if e := p.kindTensor(v, vOff, false, acc, last); e != nil {
					return nil, e
				}
			case pbRespUsage:
				if e := p.usage(v, vOff, false, meta); e != nil {
					return nil, e
				}
			}
			b, base = b[m:], base+m
			continue
		}
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			return nil, p.wireError(m, tagOff, tagOff, true, "invalid field value")
		}
		b, base = b[m:], base+m
	}
	if !hasEmb {
		return nil, newError(InvalidField, "embeddings", -1, "missing field embeddings")
	}
	return meta, nil
}

func decodeKindProtobuf(body []byte, response bool, last protowire.Number) (*pbKind, *Meta, *Error) {
	p := pbParser{body: body}
	acc := &pbKind{bytes: map[protowire.Number][]byte{}}
	if !response {
		return acc, nil, p.kindTensor(body, 0, true, acc, last)
	}
	meta, e := p.kindResponse(body, acc, last)
	return acc, meta, e
}

// head checks dtype, shape and offsets (SPEC.md 20.1, 20.2).
func (acc *pbKind) head(sparse bool) (DType, uint64, uint64, []uint32, *Error) {
	v := int32(uint32(acc.dtype))
	if !acc.hasDType || v == 0 {
		return 0, 0, 0, nil, newError(InvalidField, "dtype", -1, "missing dtype (absent or 0)")
	}
	if v < int32(Float32) || v > int32(Binary) {
		return 0, 0, 0, nil, newError(UnknownDType, "dtype", -1, "unknown dtype enum value "+strconv.Itoa(int(v)))
	}
	dtype := DType(v)
	if sparse {
		if e := checkSparseDType(dtype, "dtype"); e != nil {
			return 0, 0, 0, nil, e
		}
	}
	if len(acc.shape) != 2 || acc.shape[0] > 1<<32 || acc.shape[1] > maxDim || sparse && (acc.shape[1] < 1 || acc.shape[1] > 1<<32) {
		return 0, 0, 0, nil, newError(InvalidField, "shape", -1, "shape must be two entries [n, d] ([n, V], V from 1 to 2^32)")
	}
	offsets, e := checkOffsets(acc.bytes[3], int(acc.shape[0]), 0, "offsets")
	return dtype, acc.shape[0], acc.shape[1], offsets, e
}

// DecodeRaggedProtobuf decodes a RaggedTensor, or with response true a RaggedEmbeddingsResponse
// (its meta), by section 9's rules and errors (SPEC.md 20.6); Data aliases body.
func DecodeRaggedProtobuf(body []byte, response bool) (*RaggedTensor, *Meta, error) {
	acc, meta, e := decodeKindProtobuf(body, response, 4)
	if e != nil {
		return nil, nil, e
	}
	dtype, n, d, offsets, e := acc.head(false)
	if e != nil {
		return nil, nil, e
	}
	want, _ := expectedLen(dtype, uint64(offsets[n]), d)
	if data := acc.bytes[4]; len(data) != want {
		return nil, nil, lengthMismatch("data", len(data), want)
	}
	return &RaggedTensor{DType: dtype, N: int(n), D: int(d), Offsets: offsets, Data: acc.bytes[4]}, meta, nil
}

// DecodeSparseProtobuf decodes a SparseTensor, or with response true a SparseEmbeddingsResponse
// (SPEC.md 20.6); the parts alias body where aligned.
func DecodeSparseProtobuf(body []byte, response bool) (*SparseTensor, *Meta, error) {
	acc, meta, e := decodeKindProtobuf(body, response, 5)
	if e != nil {
		return nil, nil, e
	}
	dtype, n, v, offsets, e := acc.head(true)
	if e != nil {
		return nil, nil, e
	}
	k := int(offsets[n])
	if ib := acc.bytes[4]; len(ib) != 4*k {
		return nil, nil, lengthMismatch("indices", len(ib), 4*k)
	}
	if data := acc.bytes[5]; len(data) != k*dtype.ItemSize() {
		return nil, nil, lengthMismatch("data", len(data), k*dtype.ItemSize())
	}
	indices := viewUint32(acc.bytes[4])
	if e := checkIndices(indices, offsets, v, 0, "indices"); e != nil {
		return nil, nil, e
	}
	return &SparseTensor{DType: dtype, N: int(n), V: v, Offsets: offsets, Indices: indices, Data: acc.bytes[5]}, meta, nil
}

func appendKindTensor(dst []byte, dtype DType, n int, d uint64, parts ...[]byte) []byte {
	dst = protowire.AppendTag(dst, pbTensorDType, protowire.VarintType)
	dst = protowire.AppendVarint(dst, uint64(dtype))
	dst = protowire.AppendTag(dst, pbTensorShape, protowire.BytesType)
	dst = protowire.AppendVarint(dst, uint64(protowire.SizeVarint(uint64(n))+protowire.SizeVarint(d)))
	dst = protowire.AppendVarint(dst, uint64(n))
	dst = protowire.AppendVarint(dst, d)
	for i, p := range parts {
		if len(p) > 0 || i == 0 { // offsets are never empty; empty indices and data are omitted
			dst = protowire.AppendTag(dst, protowire.Number(3+i), protowire.BytesType)
			dst = protowire.AppendBytes(dst, p)
		}
	}
	return dst
}

func appendKindResponse(dst []byte, tensor []byte, meta *Meta) []byte {
	if meta.Model != "" {
		dst = protowire.AppendTag(dst, pbRespModel, protowire.BytesType)
		dst = protowire.AppendString(dst, meta.Model)
	}
	dst = protowire.AppendTag(dst, pbRespEmbeddings, protowire.BytesType)
	dst = protowire.AppendBytes(dst, tensor)
	var usage []byte
	if meta.PromptTokens != 0 {
		usage = protowire.AppendTag(usage, pbUsagePrompt, protowire.VarintType)
		usage = protowire.AppendVarint(usage, meta.PromptTokens)
	}
	if meta.TotalTokens != 0 {
		usage = protowire.AppendTag(usage, pbUsageTotal, protowire.VarintType)
		usage = protowire.AppendVarint(usage, meta.TotalTokens)
	}
	dst = protowire.AppendTag(dst, pbRespUsage, protowire.BytesType)
	return protowire.AppendBytes(dst, usage)
}

// EncodeRaggedProtobuf returns a RaggedTensor, or with a non-nil meta a RaggedEmbeddingsResponse
// (SPEC.md 20.6; byte-exact with the official serializers).
func EncodeRaggedProtobuf(t *RaggedTensor, meta *Meta) []byte {
	tensor := appendKindTensor(nil, t.DType, t.N, uint64(t.D), uint32Bytes(t.Offsets), t.Data)
	if meta == nil {
		return tensor
	}
	return appendKindResponse(nil, tensor, meta)
}

// EncodeSparseProtobuf returns a SparseTensor, or with a non-nil meta a SparseEmbeddingsResponse.
func EncodeSparseProtobuf(t *SparseTensor, meta *Meta) []byte {
	tensor := appendKindTensor(nil, t.DType, t.N, t.V, uint32Bytes(t.Offsets), uint32Bytes(t.Indices), t.Data)
	if meta == nil {
		return tensor
	}
	return appendKindResponse(nil, tensor, meta)
}
