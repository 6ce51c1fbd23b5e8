package densewire

import (
	"strconv"

	"github.com/tinylib/msgp/msgp"
)

// kindFields are the keys of a ragged or sparse MessagePack map (SPEC.md 20.5).
type kindFields struct {
	kind, dtype []byte
	hasKind     bool
	hasDType    bool
	shape       []uint64
	hasShape    bool
	bins        map[string][]byte // offsets, indices, data
	meta        *Meta
	kindOff     int
	dtypeOffset int
}

func readKindMsgpack(body []byte) (*kindFields, *Error) {
	r := &mpReader{body: body, b: body}
	count, rest, err := msgp.ReadMapHeaderBytes(r.b)
	if err != nil {
		return nil, r.fail(err, 0, Malformed, "", "the body is not a MessagePack map")
	}
	r.b = rest
	f := &kindFields{bins: map[string][]byte{}}
	for i := uint32(0); i < count; i++ {
		keyOff := r.off()
		key, rest, err := msgp.ReadStringZC(r.b)
		if err != nil {
			return nil, r.fail(err, keyOff, Malformed, "", "map key is not a str")
		}
		r.b = rest
		valOff := r.off()
		switch k := string(key); k {
		case "kind", "dtype", "model":
			v, rest, err := msgp.ReadStringZC(r.b)
			if err != nil {
				return nil, r.fail(err, valOff, InvalidField, k, k+" is not a str")
			}
			r.b = rest
			switch k {
			case "kind":
				f.kind, f.hasKind = v, true
			case "dtype":
				f.dtype, f.hasDType, f.dtypeOffset = v, true, valOff
			default:
				if f.meta == nil {
					f.meta = &Meta{}
				}
				f.meta.Model = string(v)
			}
		case "shape":
			sz, rest, err := msgp.ReadArrayHeaderBytes(r.b)
			if err != nil {
				return nil, r.fail(err, valOff, InvalidField, "shape", "shape is not an array")
			}
			r.b = rest
			f.shape = f.shape[:0]
			for j := uint32(0); j < sz; j++ {
				itemOff := r.off()
				v, rest, err := msgp.ReadUint64Bytes(r.b)
				if err != nil {
					return nil, r.fail(err, itemOff, InvalidField, "shape", "shape entry is not a non-negative integer")
				}
				r.b = rest
				f.shape = append(f.shape, v)
			}
			f.hasShape = true
		case "offsets", "indices", "data":
			v, rest, err := msgp.ReadBytesZC(r.b)
			if err != nil {
				return nil, r.fail(err, valOff, InvalidField, k, k+" is not a bin")
			}
			f.bins[k], r.b = v, rest
		case "usage":
			if f.meta == nil {
				f.meta = &Meta{}
			}
			if e := r.usage(f.meta); e != nil {
				return nil, e
			}
		default:
			rest, err := msgp.Skip(r.b)
			if err != nil {
				return nil, r.fail(err, valOff, Malformed, "", "invalid MessagePack value")
			}
			r.b = rest
		}
	}
	if len(r.b) != 0 {
		return nil, newError(Malformed, "", r.off(), strconv.Itoa(len(r.b))+" bytes after the map")
	}
	return f, nil
}

// head checks kind, dtype, shape and the offsets, in the order of SPEC.md 20.1 and 20.2.
func (f *kindFields) head(kind string) (DType, uint64, uint64, []uint32, *Error) {
	if !f.hasKind || string(f.kind) != kind {
		return 0, 0, 0, nil, newError(InvalidField, "kind", -1, "a "+kind+" body has kind "+strconv.Quote(kind))
	}
	if !f.hasDType {
		return 0, 0, 0, nil, newError(InvalidField, "dtype", -1, "missing dtype")
	}
	dtype, err := ParseDType(string(f.dtype))
	if err != nil {
		e := err.(*Error)
		e.Field = "dtype"
		return 0, 0, 0, nil, e
	}
	if kind == "sparse" {
		if e := checkSparseDType(dtype, "dtype"); e != nil {
			return 0, 0, 0, nil, e
		}
	}
	if !f.hasShape || len(f.shape) != 2 || f.shape[0] > 1<<32 || kind == "sparse" && (f.shape[1] < 1 || f.shape[1] > 1<<32) || f.shape[1] > maxDim {
		return 0, 0, 0, nil, newError(InvalidField, "shape", -1, "shape must be [n, d] ([n, V] with V from 1 to 2^32 for sparse)")
	}
	n, d := f.shape[0], f.shape[1]
	b, ok := f.bins["offsets"]
	if !ok {
		return 0, 0, 0, nil, newError(InvalidField, "offsets", -1, "missing offsets")
	}
	offsets, e := checkOffsets(b, int(n), 0, "offsets")
	return dtype, n, d, offsets, e
}

func (f *kindFields) part(key string, want int) ([]byte, *Error) {
	b, ok := f.bins[key]
	if !ok {
		return nil, newError(InvalidField, key, -1, "missing "+key)
	}
	if len(b) != want {
		return nil, lengthMismatch(key, len(b), want)
	}
	return b, nil
}

// DecodeRaggedMsgpack decodes a ragged MessagePack body (SPEC.md 20.5); Data aliases body.
func DecodeRaggedMsgpack(body []byte) (*RaggedTensor, *Meta, error) {
	f, e := readKindMsgpack(body)
	if e != nil {
		return nil, nil, e
	}
	dtype, n, d, offsets, e := f.head("ragged")
	if e != nil {
		return nil, nil, e
	}
	want, ok := expectedLen(dtype, uint64(offsets[n]), d)
	if !ok {
		want = -1
	}
	data, e := f.part("data", want)
	if e != nil {
		return nil, nil, e
	}
	return &RaggedTensor{DType: dtype, N: int(n), D: int(d), Offsets: offsets, Data: data}, f.meta, nil
}

// DecodeSparseMsgpack decodes a sparse MessagePack body (SPEC.md 20.5); the parts alias body.
func DecodeSparseMsgpack(body []byte) (*SparseTensor, *Meta, error) {
	f, e := readKindMsgpack(body)
	if e != nil {
		return nil, nil, e
	}
	dtype, n, v, offsets, e := f.head("sparse")
	if e != nil {
		return nil, nil, e
	}
	k := int(offsets[n])
	ib, e := f.part("indices", 4*k)
	if e != nil {
		return nil, nil, e
	}
	data, e := f.part("data", k*dtype.ItemSize())
	if e != nil {
		return nil, nil, e
	}
	indices := viewUint32(ib)
	if e := checkIndices(indices, offsets, v, 0, "indices"); e != nil {
		return nil, nil, e
	}
	return &SparseTensor{DType: dtype, N: int(n), V: v, Offsets: offsets, Indices: indices, Data: data}, f.meta, nil
}

func appendKindMsgpack(dst []byte, kind string, dtype DType, n int, d uint64, offsets, indices []uint32, data []byte, meta *Meta) []byte {
	keys := uint32(5)
	if kind == "sparse" {
		keys++
	}
	if meta != nil {
		keys += 2
	}
	dst = msgp.AppendMapHeader(dst, keys)
	if meta != nil {
		dst = msgp.AppendString(dst, "model")
		dst = msgp.AppendString(dst, meta.Model)
	}
	dst = msgp.AppendString(dst, "kind")
	dst = msgp.AppendString(dst, kind)
	dst = msgp.AppendString(dst, "dtype")
	dst = msgp.AppendString(dst, dtype.String())
	dst = msgp.AppendString(dst, "shape")
	dst = msgp.AppendArrayHeader(dst, 2)
	dst = msgp.AppendUint64(dst, uint64(n))
	dst = msgp.AppendUint64(dst, d)
	dst = msgp.AppendString(dst, "offsets")
	dst = msgp.AppendBytes(dst, uint32Bytes(offsets))
	if kind == "sparse" {
		dst = msgp.AppendString(dst, "indices")
		dst = msgp.AppendBytes(dst, uint32Bytes(indices))
	}
	dst = msgp.AppendString(dst, "data")
	dst = msgp.AppendBytes(dst, data)
	if meta != nil {
		dst = msgp.AppendString(dst, "usage")
		dst = msgp.AppendMapHeader(dst, 2)
		dst = msgp.AppendString(dst, "prompt_tokens")
		dst = msgp.AppendUint64(dst, meta.PromptTokens)
		dst = msgp.AppendString(dst, "total_tokens")
		dst = msgp.AppendUint64(dst, meta.TotalTokens)
	}
	return dst
}

// EncodeRaggedMsgpack returns the MessagePack body of a ragged tensor (SPEC.md 20.5, byte-exact); a
// non-nil meta adds model and usage.
func EncodeRaggedMsgpack(t *RaggedTensor, meta *Meta) []byte {
	return appendKindMsgpack(make([]byte, 0, len(t.Data)+4*len(t.Offsets)+128), "ragged", t.DType, t.N, uint64(t.D), t.Offsets, nil, t.Data, meta)
}

// EncodeSparseMsgpack returns the MessagePack body of a sparse tensor (SPEC.md 20.5, byte-exact).
func EncodeSparseMsgpack(t *SparseTensor, meta *Meta) []byte {
	return appendKindMsgpack(make([]byte, 0, len(t.Data)+4*len(t.Offsets)+4*len(t.Indices)+128), "sparse", t.DType, t.N, t.V, t.Offsets, t.Indices, t.Data, meta)
}
