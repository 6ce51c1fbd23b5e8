package densewire

import (
	"encoding/binary"
	"net/http"
	"strconv"
	"unsafe"
)

// RaggedTensor is n matrices of m_i x D of one dtype (SPEC.md section 20, "Ragged and sparse
// tensors", 20.1): token embeddings, multi-vectors. Data holds the N = Offsets[N] rows back to back
// (one buffer, little-endian), and matrix i is rows Offsets[i] to Offsets[i+1]-1 ([RaggedTensor.Matrix]
// gives it as a Tensor aliasing Data). Decoders alias the body where they can.
type RaggedTensor struct {
	DType   DType
	N, D    int
	Offsets []uint32 // N+1 entries, Offsets[0] = 0, never decreasing
	Data    []byte
}

// Matrix returns matrix i as a Tensor whose Data is a sub-slice of t.Data (no copy).
func (t *RaggedTensor) Matrix(i int) *Tensor {
	rb := t.DType.RowBytes(t.D)
	a, b := int(t.Offsets[i]), int(t.Offsets[i+1])
	return &Tensor{DType: t.DType, N: b - a, D: t.D, Data: t.Data[a*rb : b*rb : b*rb]}
}

// SparseTensor is n sparse vectors over a vocabulary of V dimensions (20.2): vector i's non-zero
// entries are Indices[Offsets[i]:Offsets[i+1]] (strictly ascending, each below V) and as many values
// of a float dtype in Data (little-endian).
type SparseTensor struct {
	DType   DType // Float32, Float16, BFloat16 or Float64
	N       int
	V       uint64 // the vocabulary size, 1 to 2^32
	Offsets []uint32
	Indices []uint32
	Data    []byte
}

// Vector returns vector i's indices and value bytes as sub-slices (no copy).
func (t *SparseTensor) Vector(i int) ([]uint32, []byte) {
	a, b := int(t.Offsets[i]), int(t.Offsets[i+1])
	size := t.DType.ItemSize()
	return t.Indices[a:b:b], t.Data[a*size : b*size : b*size]
}

// NewRaggedTensor checks the parts of a ragged tensor (offsets, then the rows' length).
func NewRaggedTensor(dtype DType, d int, offsets []uint32, data []byte) (*RaggedTensor, error) {
	if !dtype.Valid() {
		return nil, newError(UnknownDType, "dtype", -1, "invalid dtype "+dtype.String())
	}
	if len(offsets) == 0 {
		return nil, newError(LengthMismatch, "offsets", 0, "a batch of n has n+1 offsets")
	}
	if e := checkOffsetValues(offsets, 0, "offsets"); e != nil {
		return nil, e
	}
	want, ok := expectedLen(dtype, uint64(offsets[len(offsets)-1]), uint64(d))
	if !ok || want != len(data) {
		return nil, lengthMismatch("data", len(data), want)
	}
	return &RaggedTensor{DType: dtype, N: len(offsets) - 1, D: d, Offsets: offsets, Data: data}, nil
}

// NewSparseTensor checks the parts of a sparse tensor (dtype, vocabulary, offsets, lengths, indices).
func NewSparseTensor(dtype DType, v uint64, offsets, indices []uint32, data []byte) (*SparseTensor, error) {
	if e := checkSparseDType(dtype, "dtype"); e != nil {
		return nil, e
	}
	if v < 1 || v > 1<<32 {
		return nil, newError(InvalidField, "shape", -1, "the vocabulary size must be from 1 to 2^32")
	}
	if len(offsets) == 0 {
		return nil, newError(LengthMismatch, "offsets", 0, "a batch of n has n+1 offsets")
	}
	if e := checkOffsetValues(offsets, 0, "offsets"); e != nil {
		return nil, e
	}
	k := int(offsets[len(offsets)-1])
	if len(indices) != k {
		return nil, lengthMismatch("indices", 4*len(indices), 4*k)
	}
	if len(data) != k*dtype.ItemSize() {
		return nil, lengthMismatch("data", len(data), k*dtype.ItemSize())
	}
	if e := checkIndices(indices, offsets, v, 0, "indices"); e != nil {
		return nil, e
	}
	return &SparseTensor{DType: dtype, N: len(offsets) - 1, V: v, Offsets: offsets, Indices: indices, Data: data}, nil
}

func checkSparseDType(dt DType, field string) *Error {
	switch dt {
	case Float32, Float16, BFloat16, Float64:
		return nil
	}
	if !dt.Valid() {
		return newError(UnknownDType, field, -1, "invalid dtype "+dt.String())
	}
	return newError(InvalidField, field, -1, "a sparse tensor's values are float32, float16, bfloat16 or float64, not "+dt.String())
}

// viewUint32 reads little-endian uint32s: b itself on a little-endian host when aligned, else a copy.
func viewUint32(b []byte) []uint32 {
	n := len(b) / 4
	if n == 0 {
		return []uint32{}
	}
	p := unsafe.Pointer(unsafe.SliceData(b))
	if hostLittleEndian && uintptr(p)%4 == 0 {
		return unsafe.Slice((*uint32)(p), n)
	}
	out := make([]uint32, n)
	for i := range out {
		out[i] = binary.LittleEndian.Uint32(b[4*i:])
	}
	return out
}

// uint32Bytes is v's little-endian bytes (v's own memory on a little-endian host).
func uint32Bytes(v []uint32) []byte {
	if len(v) == 0 {
		return []byte{}
	}
	if hostLittleEndian {
		return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), 4*len(v))
	}
	out := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(out[4*i:], x)
	}
	return out
}

// checkOffsets is 20.1's checks 2 and 3 on the offsets' bytes of a batch of n: 4(n+1) bytes
// (LengthMismatch), Offsets[0] = 0 and never decreasing (InvalidField at base + 4k).
func checkOffsets(b []byte, n int, base int, field string) ([]uint32, *Error) {
	want := 4 * (n + 1)
	if len(b) != want {
		return nil, newError(LengthMismatch, field, base+min(len(b), want), strconv.Itoa(len(b))+" bytes of offsets, a batch of "+strconv.Itoa(n)+" needs "+strconv.Itoa(want))
	}
	offsets := viewUint32(b)
	return offsets, checkOffsetValues(offsets, base, field)
}

func checkOffsetValues(offsets []uint32, base int, field string) *Error {
	if offsets[0] != 0 {
		return newError(InvalidField, field, base, "the first offset must be 0, got "+strconv.FormatUint(uint64(offsets[0]), 10))
	}
	for k := 1; k < len(offsets); k++ {
		if offsets[k] < offsets[k-1] {
			return newError(InvalidField, field, base+4*k, "offset "+strconv.Itoa(k)+" is below the one before it")
		}
	}
	return nil
}

// checkIndices is 20.2's check 5: each index below v and above the one before it in its vector
// (InvalidField on field at base + 4j).
func checkIndices(indices, offsets []uint32, v uint64, base int, field string) *Error {
	vec := 0
	for j, x := range indices {
		for int(offsets[vec+1]) <= j {
			vec++
		}
		if uint64(x) >= v {
			return newError(InvalidField, field, base+4*j, "index "+strconv.FormatUint(uint64(x), 10)+" is not below the vocabulary size "+strconv.FormatUint(v, 10))
		}
		if j > int(offsets[vec]) && x <= indices[j-1] {
			return newError(InvalidField, field, base+4*j, "index "+strconv.FormatUint(uint64(x), 10)+" is not above the index before it")
		}
	}
	return nil
}

// ------------------------------------------------------------------------- raw body (20.4)

// HeaderKind is the raw body's header naming a ragged or sparse tensor (SPEC.md 20.4).
const HeaderKind = "Densewire-Kind"

func pad8(x int) int { return (x + 7) &^ 7 }

func rawKindHead(h http.Header, kind string) (DType, uint64, uint64, *Meta, *Error) {
	if k, ok := headerValue(h, HeaderKind); !ok || k != kind {
		return 0, 0, 0, nil, newError(InvalidField, HeaderKind, -1, "a "+kind+" body says "+HeaderKind+": "+kind)
	}
	name, ok := headerValue(h, HeaderDType)
	if !ok {
		return 0, 0, 0, nil, newError(InvalidField, HeaderDType, -1, "missing header "+HeaderDType)
	}
	dtype, err := ParseDType(name)
	if err != nil {
		e := err.(*Error)
		e.Field = HeaderDType
		return 0, 0, 0, nil, e
	}
	if kind == "sparse" {
		if e := checkSparseDType(dtype, HeaderDType); e != nil {
			return 0, 0, 0, nil, e
		}
	}
	shape, _ := headerValue(h, HeaderShape)
	n, d, ok := parseShape(shape)
	if !ok || n > 1<<32 || kind == "sparse" && (d < 1 || d > 1<<32) {
		return 0, 0, 0, nil, newError(InvalidField, HeaderShape, -1, "header "+HeaderShape+" must be n,d (n,V with V from 1 to 2^32 for sparse), got "+strconv.Quote(shape))
	}
	if bo, ok := headerValue(h, HeaderByteorder); ok && bo != "little" {
		return 0, 0, 0, nil, newError(InvalidField, HeaderByteorder, -1, "raw bodies are little-endian, got "+strconv.Quote(bo))
	}
	meta, e := rawKindMeta(h)
	if e != nil {
		return 0, 0, 0, nil, e
	}
	return dtype, n, d, meta, nil
}

// rawKindMeta reads Densewire-Model and the token counts (nil when none is present).
func rawKindMeta(h http.Header) (*Meta, *Error) {
	model, hasModel := headerValue(h, HeaderModel)
	pt, hasPT := headerValue(h, HeaderPromptTokens)
	tt, hasTT := headerValue(h, HeaderTotalTokens)
	if !hasModel && !hasPT && !hasTT {
		return nil, nil
	}
	meta := &Meta{Model: model}
	for _, c := range []struct {
		name, v string
		has     bool
		dst     *uint64
	}{{HeaderPromptTokens, pt, hasPT, &meta.PromptTokens}, {HeaderTotalTokens, tt, hasTT, &meta.TotalTokens}} {
		if !c.has {
			continue
		}
		x, err := strconv.ParseUint(c.v, 10, 64)
		if err != nil {
			return nil, newError(InvalidField, c.name, -1, "header "+c.name+" is not a count: "+strconv.Quote(c.v))
		}
		*c.dst = x
	}
	return meta, nil
}

func rawKindOffsets(body []byte, n int) ([]uint32, *Error) {
	size := 4 * (n + 1)
	if len(body) < size {
		return nil, newError(LengthMismatch, "", len(body), "the body of "+strconv.Itoa(len(body))+" bytes is shorter than its "+strconv.Itoa(size)+" bytes of offsets")
	}
	return checkOffsets(body[:size], n, 0, "offsets")
}

// DecodeRaggedRaw decodes a ragged raw body (SPEC.md 20.4): Densewire-Kind: ragged, the offsets,
// then the rows from the next 8-byte boundary. The tensor's Data (and Offsets, when aligned) alias body.
func DecodeRaggedRaw(h http.Header, body []byte) (*RaggedTensor, *Meta, error) {
	dtype, n, d, meta, e := rawKindHead(h, "ragged")
	if e != nil {
		return nil, nil, e
	}
	offsets, e := rawKindOffsets(body, int(n))
	if e != nil {
		return nil, nil, e
	}
	start := pad8(4 * (int(n) + 1))
	rows, ok := expectedLen(dtype, uint64(offsets[n]), d)
	if !ok || start+rows != len(body) {
		return nil, nil, lengthMismatch("", len(body), start+rows)
	}
	return &RaggedTensor{DType: dtype, N: int(n), D: int(d), Offsets: offsets, Data: body[start:]}, meta, nil
}

// DecodeSparseRaw decodes a sparse raw body (SPEC.md 20.4): offsets, indices and values, each from
// an 8-byte boundary. The parts alias body (the indices when aligned).
func DecodeSparseRaw(h http.Header, body []byte) (*SparseTensor, *Meta, error) {
	dtype, n, v, meta, e := rawKindHead(h, "sparse")
	if e != nil {
		return nil, nil, e
	}
	offsets, e := rawKindOffsets(body, int(n))
	if e != nil {
		return nil, nil, e
	}
	k := int(offsets[n])
	indicesAt := pad8(4 * (int(n) + 1))
	valuesAt := indicesAt + pad8(4*k)
	if want := valuesAt + k*dtype.ItemSize(); want != len(body) {
		return nil, nil, lengthMismatch("", len(body), want)
	}
	indices := viewUint32(body[indicesAt : indicesAt+4*k])
	if e := checkIndices(indices, offsets, v, indicesAt, "indices"); e != nil {
		return nil, nil, e
	}
	return &SparseTensor{DType: dtype, N: int(n), V: v, Offsets: offsets, Indices: indices, Data: body[valuesAt:]}, meta, nil
}

func setKindHeaders(h http.Header, kind string, dtype DType, n int, d uint64, meta *Meta) {
	h.Set(HeaderVersion, "1")
	h.Set(HeaderKind, kind)
	h.Set(HeaderDType, dtype.String())
	h.Set(HeaderShape, strconv.Itoa(n)+","+strconv.FormatUint(d, 10))
	h.Set(HeaderByteorder, "little")
	if meta != nil {
		h.Set(HeaderModel, meta.Model)
		h.Set(HeaderPromptTokens, strconv.FormatUint(meta.PromptTokens, 10))
		h.Set(HeaderTotalTokens, strconv.FormatUint(meta.TotalTokens, 10))
	}
}

// appendPadded appends parts, each but the last padded with zeros to a multiple of 8 bytes.
func appendPadded(dst []byte, parts ...[]byte) []byte {
	for i, p := range parts {
		dst = append(dst, p...)
		if i < len(parts)-1 {
			for len(dst)%8 != 0 {
				dst = append(dst, 0)
			}
		}
	}
	return dst
}

// EncodeRaggedRaw sets the headers of a ragged raw body on h (the meta's model and usage when meta
// is non-nil) and returns the body: offsets, padding, rows (SPEC.md 20.4).
func EncodeRaggedRaw(h http.Header, t *RaggedTensor, meta *Meta) []byte {
	setKindHeaders(h, "ragged", t.DType, t.N, uint64(t.D), meta)
	return appendPadded(make([]byte, 0, pad8(4*len(t.Offsets))+len(t.Data)), uint32Bytes(t.Offsets), t.Data)
}

// EncodeSparseRaw sets the headers of a sparse raw body on h and returns the body: offsets,
// padding, indices, padding, values (SPEC.md 20.4).
func EncodeSparseRaw(h http.Header, t *SparseTensor, meta *Meta) []byte {
	setKindHeaders(h, "sparse", t.DType, t.N, t.V, meta)
	size := pad8(4*len(t.Offsets)) + pad8(4*len(t.Indices)) + len(t.Data)
	return appendPadded(make([]byte, 0, size), uint32Bytes(t.Offsets), uint32Bytes(t.Indices), t.Data)
}
