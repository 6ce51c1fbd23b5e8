package densewire

import (
	"errors"
	"strconv"

	"github.com/tinylib/msgp/msgp"
)

// MessagePack (SPEC.md section 8), on the runtime of github.com/tinylib/msgp: its Append functions
// always pick the smallest representation (positive fixint, uint8..uint64, fixstr..str32,
// bin8..bin32, fixmap/map16, fixarray/array16), which is exactly the byte-exact form the spec
// requires, and its Read...Bytes functions read in place (no copy of the data bin) and hand back
// the remaining input, from which the byte offsets of errors follow.

// EncodeMsgpack returns the MessagePack body of a tensor: a map of dtype, shape and data, or with a
// non-nil meta the embeddings response of model, dtype, shape, data, usage and (when the meta has
// one) quantization.
func EncodeMsgpack(t *Tensor, meta *Meta) []byte {
	size := len(t.Data) + 64
	if meta != nil {
		size += len(meta.Model) + len(meta.Quantization) + 80
	}
	return AppendMsgpack(make([]byte, 0, size), t, meta)
}

// AppendMsgpack appends the MessagePack body of EncodeMsgpack to dst.
func AppendMsgpack(dst []byte, t *Tensor, meta *Meta) []byte {
	if meta != nil {
		keys := uint32(5)
		if meta.Quantization != "" {
			keys++
		}
		dst = msgp.AppendMapHeader(dst, keys)
		dst = msgp.AppendString(dst, "model")
		dst = msgp.AppendString(dst, meta.Model)
	} else {
		dst = msgp.AppendMapHeader(dst, 3)
	}
	dst = msgp.AppendString(dst, "dtype")
	dst = msgp.AppendString(dst, t.DType.String())
	dst = msgp.AppendString(dst, "shape")
	dst = msgp.AppendArrayHeader(dst, 2)
	dst = msgp.AppendUint64(dst, uint64(t.N))
	dst = msgp.AppendUint64(dst, uint64(t.D))
	dst = msgp.AppendString(dst, "data")
	dst = msgp.AppendBytes(dst, t.Data)
	if meta != nil {
		dst = msgp.AppendString(dst, "usage")
		dst = msgp.AppendMapHeader(dst, 2)
		dst = msgp.AppendString(dst, "prompt_tokens")
		dst = msgp.AppendUint64(dst, meta.PromptTokens)
		dst = msgp.AppendString(dst, "total_tokens")
		dst = msgp.AppendUint64(dst, meta.TotalTokens)
		if meta.Quantization != "" {
			dst = msgp.AppendString(dst, "quantization")
			dst = msgp.AppendString(dst, meta.Quantization)
		}
	}
	return dst
}

// DecodeMsgpack decodes a MessagePack body (SPEC.md section 8). Keys may come in any order,
// integers in any width, unknown keys are skipped. The tensor's Data aliases body. The meta is
// non-nil when the body has a model, usage or quantization key.
//
// Errors: the body is not a map, a key is not a str, or bytes follow the map: Malformed at the
// offending offset; the body ends early: Truncated at len(body); data missing or not bin:
// InvalidField on "data"; quantization not a str (nor nil): InvalidField on "quantization"; shape missing or not two non-negative integers: InvalidField on "shape";
// dtype missing or not a str: InvalidField on "dtype", an unknown name: UnknownDType; data of the
// wrong length: LengthMismatch on "data".
func DecodeMsgpack(body []byte) (*Tensor, *Meta, error) {
	t, meta, err := decodeMsgpack(body)
	if err != nil {
		return nil, nil, err
	}
	return t, meta, nil
}

type mpReader struct {
	body []byte
	b    []byte // the unread rest of body
}

func (r *mpReader) off() int { return len(r.body) - len(r.b) }

// fail turns a msgp error at offset off into the spec's error: Truncated when the input ended,
// else the given category on field (Malformed with no field for structural errors).
func (r *mpReader) fail(err error, off int, c Category, field, what string) *Error {
	if errors.Is(err, msgp.ErrShortBytes) {
		return newError(Truncated, "", len(r.body), "MessagePack body ends early at offset "+strconv.Itoa(len(r.body)))
	}
	e := newError(c, field, off, what+" at offset "+strconv.Itoa(off)+": "+err.Error())
	e.Err = err
	return e
}

func decodeMsgpack(body []byte) (*Tensor, *Meta, *Error) {
	if mpHasTopKey(body, "kind") { // SPEC.md 20: a tensor body says no kind, checked first once the body parses
		return nil, nil, newError(InvalidField, "kind", -1, "a tensor body says no kind, this one has the key kind: decode it with that kind's decoder")
	}
	r := &mpReader{body: body, b: body}
	count, rest, err := msgp.ReadMapHeaderBytes(r.b)
	if err != nil {
		return nil, nil, r.fail(err, 0, Malformed, "", "the body is not a MessagePack map")
	}
	r.b = rest
	var (
		dtypeName []byte
		hasDType  bool
		n, d      uint64
		hasShape  bool
		data      []byte
		hasData   bool
		meta      *Meta
		dtypeOff  int
	)
	for i := uint32(0); i < count; i++ {
		keyOff := r.off()
		key, rest, err := msgp.ReadStringZC(r.b)
		if err != nil {
			return nil, nil, r.fail(err, keyOff, Malformed, "", "map key is not a str")
		}
		r.b = rest
		valOff := r.off()
		switch string(key) {
		case "dtype":
			v, rest, err := msgp.ReadStringZC(r.b)
			if err != nil {
				return nil, nil, r.fail(err, valOff, InvalidField, "dtype", "dtype is not a str")
			}
			dtypeName, hasDType, dtypeOff, r.b = v, true, valOff, rest
		case "shape":
			sz, rest, err := msgp.ReadArrayHeaderBytes(r.b)
			if err != nil {
				return nil, nil, r.fail(err, valOff, InvalidField, "shape", "shape is not an array")
			}
			r.b = rest
			var dims [2]uint64
			for j := uint32(0); j < sz; j++ {
				itemOff := r.off()
				v, rest, err := msgp.ReadUint64Bytes(r.b)
				if err != nil {
					return nil, nil, r.fail(err, itemOff, InvalidField, "shape", "shape entry is not a non-negative integer")
				}
				r.b = rest
				if j < 2 {
					dims[j] = v
				}
			}
			if sz != 2 {
				return nil, nil, newError(InvalidField, "shape", valOff, "shape has "+strconv.Itoa(int(sz))+" entries, want 2 [n, d]")
			}
			n, d, hasShape = dims[0], dims[1], true
		case "data":
			v, rest, err := msgp.ReadBytesZC(r.b)
			if err != nil {
				return nil, nil, r.fail(err, valOff, InvalidField, "data", "data is not a bin")
			}
			data, hasData, r.b = v, true, rest
		case "model":
			v, rest, err := msgp.ReadStringZC(r.b)
			if err != nil {
				return nil, nil, r.fail(err, valOff, InvalidField, "model", "model is not a str")
			}
			if meta == nil {
				meta = &Meta{}
			}
			meta.Model, r.b = string(v), rest
		case "quantization":
			if msgp.IsNil(r.b) { // nil: no id, as when the key is absent
				rest, err := msgp.ReadNilBytes(r.b)
				if err != nil {
					return nil, nil, r.fail(err, valOff, InvalidField, "quantization", "quantization is not a str")
				}
				r.b = rest
				break
			}
			v, rest, err := msgp.ReadStringZC(r.b)
			if err != nil {
				return nil, nil, r.fail(err, valOff, InvalidField, "quantization", "quantization is not a str")
			}
			if meta == nil {
				meta = &Meta{}
			}
			meta.Quantization, r.b = string(v), rest
		case "usage":
			if meta == nil {
				meta = &Meta{}
			}
			if e := r.usage(meta); e != nil {
				return nil, nil, e
			}
		default:
			rest, err := msgp.Skip(r.b)
			if err != nil {
				return nil, nil, r.fail(err, valOff, Malformed, "", "invalid MessagePack value")
			}
			r.b = rest
		}
	}
	if len(r.b) != 0 {
		return nil, nil, newError(Malformed, "", r.off(), strconv.Itoa(len(r.b))+" bytes follow the map at offset "+strconv.Itoa(r.off()))
	}
	if !hasDType {
		return nil, nil, newError(InvalidField, "dtype", -1, "missing key dtype")
	}
	dtype, err := ParseDType(string(dtypeName))
	if err != nil {
		e := err.(*Error)
		e.Offset = dtypeOff
		return nil, nil, e
	}
	if !hasShape {
		return nil, nil, newError(InvalidField, "shape", -1, "missing key shape")
	}
	if !hasData {
		return nil, nil, newError(InvalidField, "data", -1, "missing key data")
	}
	t, e := tensorFromWire(dtype, n, d, data, "data")
	if e != nil {
		return nil, nil, e
	}
	return t, meta, nil
}

// usage reads the usage map {"prompt_tokens": int, "total_tokens": int}; unknown keys are skipped.
func (r *mpReader) usage(meta *Meta) *Error {
	off := r.off()
	count, rest, err := msgp.ReadMapHeaderBytes(r.b)
	if err != nil {
		return r.fail(err, off, InvalidField, "usage", "usage is not a map")
	}
	r.b = rest
	for i := uint32(0); i < count; i++ {
		keyOff := r.off()
		key, rest, err := msgp.ReadStringZC(r.b)
		if err != nil {
			return r.fail(err, keyOff, Malformed, "", "map key is not a str")
		}
		r.b = rest
		valOff := r.off()
		var dst *uint64
		switch string(key) {
		case "prompt_tokens":
			dst = &meta.PromptTokens
		case "total_tokens":
			dst = &meta.TotalTokens
		default:
			rest, err := msgp.Skip(r.b)
			if err != nil {
				return r.fail(err, valOff, Malformed, "", "invalid MessagePack value")
			}
			r.b = rest
			continue
		}
		v, rest, err := msgp.ReadUint64Bytes(r.b)
		if err == nil && v > maxTokenCount {
			return newError(InvalidField, "usage."+string(key), valOff, "token count "+strconv.FormatUint(v, 10)+" is past 2^53-1 at offset "+strconv.Itoa(valOff))
		}
		if err != nil {
			return r.fail(err, valOff, InvalidField, "usage."+string(key), "token count is not an integer from 0 to 2^53-1")
		}
		*dst, r.b = v, rest
	}
	return nil
}

// mpHasTopKey reports whether body is exactly one well-formed MessagePack map with the str key
// (false for any other body: the decoder then reports what is wrong with it). Values are skipped,
// a bin by its length, so the scan costs a few steps per key.
func mpHasTopKey(body []byte, key string) bool {
	count, b, err := msgp.ReadMapHeaderBytes(body)
	if err != nil {
		return false
	}
	found := false
	for i := uint32(0); i < count; i++ {
		k, rest, err := msgp.ReadStringZC(b)
		if err != nil {
			return false
		}
		found = found || string(k) == key
		if b, err = msgp.Skip(rest); err != nil {
			return false
		}
	}
	return found && len(b) == 0
}
