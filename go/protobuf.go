package densewire

import (
	"io"
	"strconv"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
)

// Protobuf (SPEC.md section 9), schema proto/densewire/v1/tensor.proto. The codec works on the wire
// format directly with google.golang.org/protobuf/encoding/protowire: encoding writes what the
// official proto3 serializers write (fields in number order, defaults omitted, shape packed), so
// the output is byte-exact with the golden vectors and with proto.Marshal of the generated
// densewirepb messages; decoding reads in place (the data field is not copied) and reports the byte
// offsets the spec asks for, which proto.Unmarshal cannot. The generated message types are in the
// subpackage densewirepb for code that wants them.

// Field numbers of tensor.proto.
const (
	pbTensorDType    protowire.Number = 1
	pbTensorShape    protowire.Number = 2
	pbTensorData     protowire.Number = 3
	pbRespModel      protowire.Number = 1
	pbRespEmbeddings protowire.Number = 2
	pbRespUsage      protowire.Number = 3
	pbRespQuant      protowire.Number = 4
	pbUsagePrompt    protowire.Number = 1
	pbUsageTotal     protowire.Number = 2
)

func pbTensorSize(t *Tensor) (size, shapeSize int) {
	shapeSize = protowire.SizeVarint(uint64(t.N)) + protowire.SizeVarint(uint64(t.D))
	size = 1 + protowire.SizeVarint(uint64(t.DType)) + 1 + protowire.SizeBytes(shapeSize)
	if len(t.Data) > 0 {
		size += 1 + protowire.SizeBytes(len(t.Data))
	}
	return size, shapeSize
}

func pbUsageSize(meta *Meta) int {
	size := 0
	if meta.PromptTokens != 0 {
		size += 1 + protowire.SizeVarint(meta.PromptTokens)
	}
	if meta.TotalTokens != 0 {
		size += 1 + protowire.SizeVarint(meta.TotalTokens)
	}
	return size
}

// EncodeProtobuf returns the Protobuf body of a densewire.v1.Tensor message, or with a non-nil meta
// of a densewire.v1.EmbeddingsResponse (its quantization field 4 written when the meta has one).
func EncodeProtobuf(t *Tensor, meta *Meta) []byte {
	tsize, _ := pbTensorSize(t)
	size := tsize
	if meta != nil {
		size = 2*(1+protowire.SizeBytes(0)) + protowire.SizeBytes(tsize) + protowire.SizeBytes(len(meta.Model)) +
			protowire.SizeBytes(len(meta.Quantization)) + 24
	}
	return AppendProtobuf(make([]byte, 0, size), t, meta)
}

// AppendProtobuf appends the Protobuf body of EncodeProtobuf to dst.
func AppendProtobuf(dst []byte, t *Tensor, meta *Meta) []byte {
	if meta == nil {
		return appendPBTensor(dst, t)
	}
	if meta.Model != "" {
		dst = protowire.AppendTag(dst, pbRespModel, protowire.BytesType)
		dst = protowire.AppendString(dst, meta.Model)
	}
	tsize, _ := pbTensorSize(t)
	dst = protowire.AppendTag(dst, pbRespEmbeddings, protowire.BytesType)
	dst = protowire.AppendVarint(dst, uint64(tsize))
	dst = appendPBTensor(dst, t)
	dst = protowire.AppendTag(dst, pbRespUsage, protowire.BytesType)
	dst = protowire.AppendVarint(dst, uint64(pbUsageSize(meta)))
	if meta.PromptTokens != 0 {
		dst = protowire.AppendTag(dst, pbUsagePrompt, protowire.VarintType)
		dst = protowire.AppendVarint(dst, meta.PromptTokens)
	}
	if meta.TotalTokens != 0 {
		dst = protowire.AppendTag(dst, pbUsageTotal, protowire.VarintType)
		dst = protowire.AppendVarint(dst, meta.TotalTokens)
	}
	if meta.Quantization != "" {
		dst = protowire.AppendTag(dst, pbRespQuant, protowire.BytesType)
		dst = protowire.AppendString(dst, meta.Quantization)
	}
	return dst
}

func appendPBTensor(dst []byte, t *Tensor) []byte {
	_, shapeSize := pbTensorSize(t)
	dst = protowire.AppendTag(dst, pbTensorDType, protowire.VarintType)
	dst = protowire.AppendVarint(dst, uint64(t.DType))
	dst = protowire.AppendTag(dst, pbTensorShape, protowire.BytesType)
	dst = protowire.AppendVarint(dst, uint64(shapeSize))
	dst = protowire.AppendVarint(dst, uint64(t.N))
	dst = protowire.AppendVarint(dst, uint64(t.D))
	if len(t.Data) > 0 {
		dst = protowire.AppendTag(dst, pbTensorData, protowire.BytesType)
		dst = protowire.AppendBytes(dst, t.Data)
	}
	return dst
}

// DecodeProtobufTensor decodes the body of a densewire.v1.Tensor message. Unknown fields are
// skipped and shape is accepted packed or unpacked. Errors: a wire-format error (wrong wire type for
// a known field, a varint over 10 bytes, an invalid tag): Malformed at the offset of the field's tag
// or of the varint; the body ends early (also a length past its end): Truncated at len(body); dtype
// absent or 0: InvalidField on "dtype"; an enum value outside SPEC.md section 2: UnknownDType;
// shape not two entries: InvalidField on "shape"; data of the wrong length: LengthMismatch on
// "data". The tensor's Data aliases body.
func DecodeProtobufTensor(body []byte) (*Tensor, error) {
	p := pbParser{body: body}
	var acc pbTensor
	if e := p.tensor(body, 0, true, &acc); e != nil {
		return nil, e
	}
	t, e := acc.build()
	if e != nil {
		return nil, e
	}
	return t, nil
}

// DecodeProtobuf decodes the body of a densewire.v1.EmbeddingsResponse: the tensor (errors as
// DecodeProtobufTensor; a missing embeddings field is InvalidField on "embeddings") and its meta.
// A length inside the message that runs past its enclosing field, while the body itself is
// complete, is Malformed.
func DecodeProtobuf(body []byte) (*Tensor, *Meta, error) {
	p := pbParser{body: body}
	var (
		acc    pbTensor
		hasEmb bool
		meta   Meta
	)
	b, base := body, 0
	for len(b) > 0 {
		tagOff := base
		num, typ, n := consumeTag(b)
		if n < 0 {
			return nil, nil, p.wireError(n, tagOff, tagOff, true, "invalid tag")
		}
		b, base = b[n:], base+n
		if num >= pbRespModel && num <= pbRespQuant {
			if typ != protowire.BytesType {
				return nil, nil, p.wrongType(num, typ, tagOff)
			}
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return nil, nil, p.wireError(n, lengthErrOff(n, tagOff, base), tagOff, true, "invalid length")
			}
			vOff := base + n - len(v)
			switch num {
			case pbRespModel:
				if !utf8.Valid(v) {
					return nil, nil, newError(Malformed, "model", tagOff, "model is not valid UTF-8")
				}
				meta.Model = string(v)
			case pbRespQuant:
				if !utf8.Valid(v) {
					return nil, nil, newError(Malformed, "quantization", tagOff, "quantization is not valid UTF-8")
				}
				meta.Quantization = string(v)
			case pbRespEmbeddings:
				hasEmb = true
				if e := p.tensor(v, vOff, false, &acc); e != nil {
					return nil, nil, e
				}
			case pbRespUsage:
				if e := p.usage(v, vOff, false, &meta); e != nil {
					return nil, nil, e
				}
			}
			b, base = b[n:], base+n
			continue
		}
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			return nil, nil, p.wireError(m, tagOff, tagOff, true, "invalid field value")
		}
		b, base = b[m:], base+m
	}
	if !hasEmb {
		return nil, nil, newError(InvalidField, "embeddings", -1, "missing field embeddings")
	}
	t, e := acc.build()
	if e != nil {
		return nil, nil, e
	}
	return t, &meta, nil
}

// consumeTag is protowire.ConsumeTag that also rejects field numbers above 2^29-1, as the
// official parsers do.
func consumeTag(b []byte) (protowire.Number, protowire.Type, int) {
	num, typ, n := protowire.ConsumeTag(b)
	if n >= 0 && num > protowire.MaxValidNumber {
		return 0, 0, -2 // protowire's code for an invalid field number
	}
	return num, typ, n
}

// lengthErrOff is where a bad length-delimited field is reported: at its length varint when that
// overflows, at the field's tag when the length runs past the end.
func lengthErrOff(code, tagOff, varintOff int) int {
	if protowire.ParseError(code) == io.ErrUnexpectedEOF {
		return tagOff
	}
	return varintOff
}

type pbParser struct {
	body []byte
}

// wireError maps a protowire error code at offset off (in the field whose tag is at tagOff): a
// field that runs past the end of the body is Truncated at len(body); one that runs past the end of
// its embedded message (not top) is Malformed at its tag; anything else (an overflowing varint, a
// bad tag) is Malformed at off.
func (p *pbParser) wireError(code, off, tagOff int, top bool, what string) *Error {
	err := protowire.ParseError(code)
	if err == io.ErrUnexpectedEOF {
		if top {
			return newError(Truncated, "", len(p.body), "Protobuf body ends early at offset "+strconv.Itoa(len(p.body)))
		}
		off, what = tagOff, "a field runs past the end of its embedded message"
	}
	e := newError(Malformed, "", off, what+" at offset "+strconv.Itoa(off)+": "+err.Error())
	e.Err = err
	return e
}

func (p *pbParser) wrongType(num protowire.Number, typ protowire.Type, off int) *Error {
	return newError(Malformed, "", off, "wrong wire type "+strconv.Itoa(int(typ))+" for field "+
		strconv.Itoa(int(num))+" at offset "+strconv.Itoa(off))
}

// pbTensor accumulates the fields of a Tensor message (repeated occurrences merge, as in protobuf).
type pbTensor struct {
	dtype    uint64
	hasDType bool
	shape    []uint64
	data     []byte
}

// tensor parses the fields of a Tensor message held in b, which starts at offset base of the body.
func (p *pbParser) tensor(b []byte, base int, top bool, acc *pbTensor) *Error {
	for len(b) > 0 {
		tagOff := base
		num, typ, n := consumeTag(b)
		if n < 0 {
			return p.wireError(n, tagOff, tagOff, top, "invalid tag")
		}
		b, base = b[n:], base+n
		switch {
		case num == pbTensorDType && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return p.wireError(n, base, tagOff, top, "invalid varint")
			}
			acc.dtype, acc.hasDType = v, true
			b, base = b[n:], base+n
		case num == pbTensorShape && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return p.wireError(n, base, tagOff, top, "invalid varint")
			}
			acc.shape = append(acc.shape, v)
			b, base = b[n:], base+n
		case num == pbTensorShape && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return p.wireError(n, lengthErrOff(n, tagOff, base), tagOff, top, "invalid length")
			}
			vOff := base + n - len(v)
			for len(v) > 0 {
				x, m := protowire.ConsumeVarint(v)
				if m < 0 {
					// a packed run is complete by its length: a varint cut at its end, like one too
					// long, makes the field malformed, reported at its tag
					return newError(Malformed, "shape", tagOff, "invalid varint at offset "+strconv.Itoa(vOff)+
						" in the packed shape at offset "+strconv.Itoa(tagOff))
				}
				acc.shape = append(acc.shape, x)
				v, vOff = v[m:], vOff+m
			}
			b, base = b[n:], base+n
		case num == pbTensorData && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return p.wireError(n, lengthErrOff(n, tagOff, base), tagOff, top, "invalid length")
			}
			acc.data = v
			b, base = b[n:], base+n
		case num >= pbTensorDType && num <= pbTensorData:
			return p.wrongType(num, typ, tagOff)
		default:
			m := protowire.ConsumeFieldValue(num, typ, b)
			if m < 0 {
				return p.wireError(m, tagOff, tagOff, top, "invalid field value")
			}
			b, base = b[m:], base+m
		}
	}
	return nil
}

func (p *pbParser) usage(b []byte, base int, top bool, meta *Meta) *Error {
	for len(b) > 0 {
		tagOff := base
		num, typ, n := consumeTag(b)
		if n < 0 {
			return p.wireError(n, tagOff, tagOff, top, "invalid tag")
		}
		b, base = b[n:], base+n
		if num == pbUsagePrompt || num == pbUsageTotal {
			if typ != protowire.VarintType {
				return p.wrongType(num, typ, tagOff)
			}
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return p.wireError(n, base, tagOff, top, "invalid varint")
			}
			if num == pbUsagePrompt {
				meta.PromptTokens = v
			} else {
				meta.TotalTokens = v
			}
			b, base = b[n:], base+n
			continue
		}
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			return p.wireError(m, tagOff, tagOff, top, "invalid field value")
		}
		b, base = b[m:], base+m
	}
	return nil
}

func (acc *pbTensor) build() (*Tensor, *Error) {
	// An enum is an int32 on the wire: official parsers keep the low 32 bits, and so does this one.
	v := int32(uint32(acc.dtype))
	if !acc.hasDType || v == 0 {
		return nil, newError(InvalidField, "dtype", -1, "missing dtype (absent or 0)")
	}
	if v < int32(Float32) || v > int32(Binary) {
		return nil, newError(UnknownDType, "dtype", -1, "unknown dtype enum value "+strconv.Itoa(int(v)))
	}
	if len(acc.shape) != 2 {
		return nil, newError(InvalidField, "shape", -1, "shape has "+strconv.Itoa(len(acc.shape))+" entries, want 2 (n, d)")
	}
	return tensorFromWire(DType(v), acc.shape[0], acc.shape[1], acc.data, "data")
}
