package densewire

import (
	"encoding/binary"
	"math"
	"strconv"
)

// The JSON embeddings envelope (SPEC.md section 6): the OpenAI-compatible response of
// POST /v1/embeddings with densewire's dtype, byteorder and dimensions.

// EncodingFormat is how the embedding of each row is written in JSON.
type EncodingFormat string

// The two encoding formats of the OpenAI API.
const (
	EncodingFloat  EncodingFormat = "float"  // an array of JSON numbers (the default)
	EncodingBase64 EncodingFormat = "base64" // one Base64 string of the row's bytes
)

// JSONOptions chooses how EncodeJSON writes the rows.
type JSONOptions struct {
	EncodingFormat EncodingFormat // "" means EncodingFloat
	ByteOrder      ByteOrder      // byte order of Base64 rows; numbers are always "little"
}

// EncodeJSON returns the JSON embeddings response for the tensor: keys in the spec's order,
// compact. With EncodingFloat each row is an array of numbers, written as the shortest decimal that
// reads back to the same bits in the tensor's dtype (integers for int8 and uint8, the packed bytes
// for binary); a NaN or infinity is a NonFinite error naming the element (data[i].embedding[j]).
// With EncodingBase64 each row is the Base64 of its bytes in opts.ByteOrder. A nil meta writes an
// empty model and zero usage; a meta's Quantization, when not "", is written after dimensions.
func EncodeJSON(t *Tensor, meta *Meta, opts JSONOptions) ([]byte, error) {
	size := 256
	if opts.EncodingFormat == EncodingBase64 {
		size += t.N * (48 + (t.RowBytes()+2)/3*4)
	} else {
		size += t.N*48 + t.N*t.DType.rowItems(t.D)*12
	}
	if meta != nil {
		size += len(meta.Model) + len(meta.Quantization)
	}
	return AppendJSON(make([]byte, 0, size), t, meta, opts)
}

// AppendJSON appends the JSON of EncodeJSON to dst.
func AppendJSON(dst []byte, t *Tensor, meta *Meta, opts JSONOptions) ([]byte, error) {
	if !t.DType.Valid() {
		return nil, newError(UnknownDType, "dtype", -1, "invalid dtype "+t.DType.String())
	}
	ef := opts.EncodingFormat
	if ef == "" {
		ef = EncodingFloat
	}
	if ef != EncodingFloat && ef != EncodingBase64 {
		return nil, newError(InvalidField, "encoding_format", -1, "unknown encoding_format "+strconv.Quote(string(ef)))
	}
	if opts.ByteOrder > BigEndian {
		return nil, newError(InvalidField, "byteorder", -1, "invalid byte order "+opts.ByteOrder.String())
	}
	if want, ok := expectedLen(t.DType, uint64(t.N), uint64(t.D)); !ok || want != len(t.Data) || t.N < 0 || t.D < 0 {
		return nil, lengthMismatch("", len(t.Data), want)
	}
	if meta == nil {
		meta = &Meta{}
	}
	order := opts.ByteOrder
	if ef == EncodingFloat {
		order = LittleEndian
	}
	rb := t.RowBytes()
	width := t.DType.ItemSize()
	dst = append(dst, `{"object":"list","data":[`...)
	for i := 0; i < t.N; i++ {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"object":"embedding","index":`...)
		dst = strconv.AppendInt(dst, int64(i), 10)
		dst = append(dst, `,"embedding":`...)
		row := t.Data[i*rb : (i+1)*rb]
		if ef == EncodingBase64 {
			dst = append(dst, '"')
			dst = appendBase64(dst, row, width, order)
			dst = append(dst, '"')
		} else {
			var err *Error
			if dst, err = appendNumbers(dst, t.DType, row, i); err != nil {
				return nil, err
			}
		}
		dst = append(dst, '}')
	}
	dst = append(dst, `],"model":`...)
	dst = appendJSONString(dst, meta.Model)
	dst = append(dst, `,"usage":{"prompt_tokens":`...)
	dst = strconv.AppendUint(dst, meta.PromptTokens, 10)
	dst = append(dst, `,"total_tokens":`...)
	dst = strconv.AppendUint(dst, meta.TotalTokens, 10)
	dst = append(dst, `},"dtype":"`...)
	dst = append(dst, t.DType.String()...)
	dst = append(dst, `","byteorder":"`...)
	dst = append(dst, order.String()...)
	dst = append(dst, `","dimensions":`...)
	dst = strconv.AppendInt(dst, int64(t.D), 10)
	if meta.Quantization != "" {
		dst = append(dst, `,"quantization":`...)
		dst = appendJSONString(dst, meta.Quantization)
	}
	return append(dst, '}'), nil
}

func appendNumbers(dst []byte, dtype DType, row []byte, i int) ([]byte, *Error) {
	dst = append(dst, '[')
	items := len(row) / dtype.ItemSize()
	for j := 0; j < items; j++ {
		if j > 0 {
			dst = append(dst, ',')
		}
		var (
			x    float64
			bits int
		)
		switch dtype {
		case Int8:
			dst = strconv.AppendInt(dst, int64(int8(row[j])), 10)
			continue
		case Uint8, Binary:
			dst = strconv.AppendUint(dst, uint64(row[j]), 10)
			continue
		case Float32:
			x, bits = float64(f32frombits(binary.LittleEndian.Uint32(row[4*j:]))), 32
		case Float64:
			x, bits = f64frombits(le64(row[8*j:])), 64
		case Float16:
			x = float64(Float16ToFloat32(le16(row[2*j:])))
		case BFloat16:
			x = float64(BFloat16ToFloat32(le16(row[2*j:])))
		}
		if math.IsNaN(x) || math.IsInf(x, 0) {
			field := "data[" + strconv.Itoa(i) + "].embedding[" + strconv.Itoa(j) + "]"
			return nil, newError(NonFinite, field, -1, field+": "+strconv.FormatFloat(x, 'g', -1, 64)+
				" has no JSON number form (use encoding_format base64)")
		}
		start := len(dst)
		if bits != 0 {
			dst = strconv.AppendFloat(dst, x, 'g', -1, bits)
		} else {
			dst = appendShortest16(dst, x, dtype, le16(row[2*j:]))
		}
		dst = fixNumber(dst, start)
	}
	return append(dst, ']'), nil
}

// appendShortest16 writes the shortest decimal that reads back (float64, then rounded to dtype) to
// the same 16 bits.
func appendShortest16(dst []byte, x float64, dtype DType, want uint16) []byte {
	start := len(dst)
	for p := 1; p < 17; p++ {
		dst = strconv.AppendFloat(dst[:start], x, 'g', p, 64)
		y, _ := strconv.ParseFloat(stringView(dst[start:]), 64)
		var got uint16
		if dtype == Float16 {
			got = float64ToFloat16Bits(y)
		} else {
			got = float64ToBFloat16Bits(y)
		}
		if got == want {
			return dst
		}
	}
	return strconv.AppendFloat(dst[:start], x, 'g', -1, 32)
}

// fixNumber makes the number written from start read as a float everywhere: "-0" becomes "-0.0"
// (an integer -0 is 0 to many readers) and integral values get ".0" like the golden vectors.
func fixNumber(dst []byte, start int) []byte {
	for _, c := range dst[start:] {
		if c == '.' || c == 'e' || c == 'E' {
			return dst
		}
	}
	return append(dst, ".0"...)
}
