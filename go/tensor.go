package densewire

import (
	"math"
	"math/bits"
	"strconv"
)

// Tensor is a row-major (N, D) matrix of one dtype (SPEC.md section 1). Data holds the N*RowBytes(D)
// bytes, little-endian, rows back to back; for Binary each row is ceil(D/8) packed bytes.
//
// Decoders return tensors whose Data aliases the input where they can (raw, MessagePack, Protobuf):
// do not modify the input while the tensor is in use, or Clone it.
type Tensor struct {
	DType DType
	N, D  int
	Data  []byte
}

// Meta is the metadata of an embeddings response: the model, the token usage and, for int8 and
// uint8 responses of a server, the quantization id of the ranges the codes were quantized with
// (SPEC.md section 17.4; see Dequantize and Client.Quantization). Encoders given a nil *Meta write
// a bare tensor, and write Quantization when it is not ""; decoders return a nil *Meta when the
// body carried none.
type Meta struct {
	Model        string
	PromptTokens uint64
	TotalTokens  uint64
	Quantization string // "" when the response names no quantization id
}

// NewTensor checks that data holds exactly n rows of d dimensions of dtype and returns the tensor
// (which aliases data). A wrong length is a LengthMismatch error at the first missing or excess byte.
func NewTensor(dtype DType, n, d int, data []byte) (*Tensor, error) {
	if !dtype.Valid() {
		return nil, newError(UnknownDType, "dtype", -1, "invalid dtype "+dtype.String())
	}
	if n < 0 || d < 0 || d > maxDim {
		return nil, newError(InvalidField, "shape", -1, "invalid shape ("+strconv.Itoa(n)+", "+strconv.Itoa(d)+")")
	}
	want, ok := expectedLen(dtype, uint64(n), uint64(d))
	if !ok || want != len(data) {
		return nil, lengthMismatch("", len(data), want)
	}
	return &Tensor{DType: dtype, N: n, D: d, Data: data}, nil
}

// maxDim keeps d * 8 (the widest item) within an int.
const maxDim = math.MaxInt / 8

// expectedLen is n * row_bytes(dtype, d), saturated at MaxInt with ok false when it overflows.
func expectedLen(dtype DType, n, d uint64) (int, bool) {
	var rb uint64
	if dtype == Binary {
		rb = d/8 + (d%8+7)/8
	} else {
		hi, lo := bits.Mul64(d, uint64(dtype.ItemSize()))
		if hi != 0 {
			if n == 0 {
				return 0, true
			}
			return math.MaxInt, false
		}
		rb = lo
	}
	hi, lo := bits.Mul64(n, rb)
	if hi != 0 || lo > math.MaxInt {
		return math.MaxInt, false
	}
	return int(lo), true
}

// tensorFromWire builds a tensor from a shape and data read off the wire, checking the length first
// (LengthMismatch at min(actual, expected), on lengthField) and then that the shape fits in ints.
func tensorFromWire(dtype DType, n, d uint64, data []byte, lengthField string) (*Tensor, *Error) {
	want, ok := expectedLen(dtype, n, d)
	if !ok || want != len(data) {
		return nil, lengthMismatch(lengthField, len(data), want)
	}
	if n > math.MaxInt || d > maxDim {
		return nil, newError(InvalidField, "shape", -1, "shape ("+strconv.FormatUint(n, 10)+", "+
			strconv.FormatUint(d, 10)+") is too large")
	}
	return &Tensor{DType: dtype, N: int(n), D: int(d), Data: data}, nil
}

// RowBytes is the byte length of one row.
func (t *Tensor) RowBytes() int { return t.DType.RowBytes(t.D) }

// Row returns the bytes of row i (aliasing Data).
func (t *Tensor) Row(i int) []byte {
	rb := t.RowBytes()
	return t.Data[i*rb : (i+1)*rb : (i+1)*rb]
}

// Bit returns dimension j of row i of a Binary tensor (SPEC.md section 3.4).
func (t *Tensor) Bit(i, j int) bool {
	if j < 0 || j >= t.D {
		panic("densewire: Bit index out of range")
	}
	return t.Row(i)[j/8]&(0x80>>(j%8)) != 0
}

// Clone returns a deep copy of t.
func (t *Tensor) Clone() *Tensor {
	c := *t
	c.Data = append([]byte(nil), t.Data...)
	return &c
}

// ViewFloat32 returns the data of a Float32 tensor as a []float32 without copying, when that is
// sound (see the function ViewFloat32). Otherwise it returns nil, false: use Float32.
func (t *Tensor) ViewFloat32() ([]float32, bool) {
	if t.DType != Float32 {
		return nil, false
	}
	return ViewFloat32(t.Data)
}

// Float32 returns the elements as a new []float32 of length N*D: float16, bfloat16, int8 and uint8
// widen exactly, float64 rounds to nearest even (SPEC.md section 3.3), float32 is copied in one bulk
// move. Binary tensors have no float view: use Data or Bit (an InvalidField error on "dtype").
func (t *Tensor) Float32() ([]float32, error) {
	n := t.N * t.D
	if t.DType == Binary || !t.DType.Valid() {
		return nil, newError(InvalidField, "dtype", -1, "a "+t.DType.String()+" tensor has no float32 view")
	}
	if len(t.Data) != n*t.DType.ItemSize() {
		return nil, lengthMismatch("", len(t.Data), n*t.DType.ItemSize())
	}
	out := make([]float32, n)
	switch t.DType {
	case Float32:
		float32sFromLE(out, t.Data)
	case Float16:
		float16sToFloat32(out, t.Data)
	case BFloat16:
		bfloat16sToFloat32(out, t.Data)
	case Float64:
		for i := range out {
			out[i] = Float64ToFloat32(math.Float64frombits(le64(t.Data[8*i:])))
		}
	case Int8:
		for i, b := range t.Data {
			out[i] = float32(int8(b))
		}
	case Uint8:
		for i, b := range t.Data {
			out[i] = float32(b)
		}
	}
	return out, nil
}

// Float64 returns the elements as a new []float64 of length N*D; every dtype but Binary widens
// exactly.
func (t *Tensor) Float64() ([]float64, error) {
	if t.DType == Float64 {
		n := t.N * t.D
		if len(t.Data) != 8*n {
			return nil, lengthMismatch("", len(t.Data), 8*n)
		}
		out := make([]float64, n)
		float64sFromLE(out, t.Data)
		return out, nil
	}
	f, err := t.Float32()
	if err != nil {
		return nil, err
	}
	out := make([]float64, len(f))
	for i, v := range f {
		out[i] = float64(v)
	}
	return out, nil
}
