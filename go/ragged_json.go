package densewire

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Ragged and sparse tensors in the JSON envelope (SPEC.md 20.3): `kind` beside `dtype`, per item the
// matrix (embedding and shape) or the sparse vector (indices, values, nnz). The decoder reads the
// envelope with encoding/json (numbers kept as their text), places every item by index into one
// buffer of rows (of indices and values), and checks each item in the spec's order.

type kindEnvelope struct {
	doc   map[string]any
	data  []any
	dtype DType
	order ByteOrder
	dims  uint64
	meta  *Meta
}

func parseKindEnvelope(body []byte, kind string) (*kindEnvelope, *Error) {
	if !utf8.Valid(body) {
		return nil, newError(Malformed, "", -1, "the JSON body is not UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		off := -1
		var se *json.SyntaxError
		if errors.As(err, &se) {
			off = int(se.Offset)
		}
		return nil, newError(Malformed, "", off, "not valid JSON: "+err.Error())
	}
	doc, ok := v.(map[string]any)
	if !ok {
		return nil, newError(Malformed, "", 0, "the envelope must be a JSON object")
	}
	if k, _ := doc["kind"].(string); k != kind {
		return nil, newError(InvalidField, "kind", -1, "a "+kind+` response says "kind": "`+kind+`"`)
	}
	data, ok := doc["data"].([]any)
	if !ok {
		return nil, newError(InvalidField, "data", -1, "data must be an array")
	}
	env := &kindEnvelope{doc: doc, data: data, dtype: Float32}
	// SPEC.md 20.3: the envelope's keys in the order kind, data, dtype, byteorder, dimensions, model, usage
	if v, present := doc["dtype"]; present && v != nil {
		name, ok := v.(string)
		if !ok {
			return nil, newError(InvalidField, "dtype", -1, "dtype is not a string")
		}
		dt, err := ParseDType(name)
		if err != nil {
			return nil, err.(*Error)
		}
		if kind == "sparse" {
			if e := checkSparseDType(dt, "dtype"); e != nil {
				return nil, e
			}
		}
		env.dtype = dt
	}
	if v, present := doc["byteorder"]; present && v != nil {
		bo, ok := v.(string)
		if !ok {
			return nil, newError(InvalidField, "byteorder", -1, "byteorder is not a string")
		}
		o, err := ParseByteOrder(bo)
		if err != nil {
			return nil, err.(*Error)
		}
		env.order = o
	}
	dims, ok := jsonCount(doc["dimensions"])
	if !ok {
		return nil, newError(InvalidField, "dimensions", -1, "dimensions is required for "+kind+" tensors, a non-negative integer")
	}
	env.dims = uint64(dims)
	if kind == "ragged" && env.dims > maxDim {
		return nil, newError(InvalidField, "dimensions", -1, "dimensions out of range")
	}
	if kind == "sparse" && (env.dims < 1 || env.dims > 1<<32) {
		return nil, newError(InvalidField, "dimensions", -1, "the vocabulary size (dimensions) must be from 1 to 2^32")
	}
	if v, present := doc["model"]; present && v != nil {
		m, ok := v.(string)
		if !ok {
			return nil, newError(InvalidField, "model", -1, "model is not a string")
		}
		env.meta = &Meta{Model: m}
	}
	if u, present := doc["usage"]; present && u != nil {
		raw, _ := json.Marshal(u)
		if env.meta == nil {
			env.meta = &Meta{}
		}
		if e := decodeUsage(raw, span{start: 0, end: len(raw)}, env.meta); e != nil {
			e.Offset = -1
			return nil, e
		}
	}
	return env, nil
}

// placed checks each item's index (SPEC.md 6.2) and returns the items with it, in data order.
func (env *kindEnvelope) placed() ([]map[string]any, []int, *Error) {
	n := len(env.data)
	items, index := make([]map[string]any, n), make([]int, n)
	seen := make([]bool, n)
	for i, it := range env.data {
		f := "data[" + strconv.Itoa(i) + "]"
		m, ok := it.(map[string]any)
		if !ok {
			return nil, nil, newError(InvalidField, f, -1, f+" must be an object")
		}
		num, ok := m["index"].(json.Number)
		if !ok || strings.ContainsAny(string(num), ".eE") {
			return nil, nil, newError(InvalidField, f+".index", -1, f+".index must be an integer")
		}
		x, err := strconv.Atoi(string(num))
		if err != nil || x < 0 || x >= n || seen[x] {
			return nil, nil, newError(ShapeMismatch, f+".index", -1, f+".index "+string(num)+" is outside [0, n) or occurs twice")
		}
		seen[x], items[i], index[i] = true, m, x
	}
	return items, index, nil
}

func offsetsOf(counts []int) []uint32 {
	offsets := make([]uint32, len(counts)+1)
	for i, c := range counts {
		offsets[i+1] = offsets[i] + uint32(c)
	}
	return offsets
}

// base64Part decodes s into dst (length checked: LengthMismatch on field), swapping big-endian items.
func base64Part(dst []byte, s string, width int, order ByteOrder, field string) *Error {
	if n, ok := base64DecodedLen(s); !ok || n != len(dst) {
		if e := checkBase64(s); e != nil {
			return withField(e, field)
		}
		return lengthMismatch(field, n, len(dst))
	}
	if e := decodeBase64Into(dst, s); e != nil {
		return withField(e, field)
	}
	if order == BigEndian && width > 1 {
		swapBytes(dst, width)
	}
	return nil
}

// numberItems stores JSON numbers as items of dst (SPEC.md 3.5: 3.0 is the integer 3 of an int8
// row); field[j] names a bad one.
func numberItems(dst []byte, dtype DType, values []any, field string) *Error {
	for j, v := range values {
		jf := field + "[" + strconv.Itoa(j) + "]"
		num, ok := v.(json.Number)
		if !ok {
			return newError(InvalidField, jf, -1, jf+" is not a number")
		}
		x, err := strconv.ParseFloat(string(num), 64)
		if err != nil && !isRangeErr(err) {
			return newError(InvalidField, jf, -1, jf+" is not a number")
		}
		if e := putNumber(dst, dtype, j, x); e != nil {
			e.Field, e.Message = jf, jf+": "+e.Message
			return e
		}
	}
	return nil
}

// DecodeRaggedJSON decodes a ragged JSON envelope (SPEC.md 20.3): InvalidField on kind, dimensions,
// data[i].shape, data[i].embedding and its items; ShapeMismatch on data[i].shape, data[i].index
// and a row of another length (data[i].embedding[r]); InvalidBase64 and LengthMismatch on
// data[i].embedding.
func DecodeRaggedJSON(body []byte) (*RaggedTensor, *Meta, error) {
	env, e := parseKindEnvelope(body, "ragged")
	if e != nil {
		return nil, nil, e
	}
	dtype := env.dtype
	d := int(env.dims)
	items, index, e := env.placed()
	if e != nil {
		return nil, nil, e
	}
	rb := dtype.RowBytes(d)
	items2 := dtype.rowItems(d)
	// contents decodes item i's rows into dst (its m_i rows): the second pass, once every item's
	// structure is checked and the buffer sized.
	contents := func(i int, dst []byte) *Error {
		m := items[i]
		f := "data[" + strconv.Itoa(i) + "].embedding"
		if s, ok := m["embedding"].(string); ok {
			return base64Part(dst, s, dtype.ItemSize(), env.order, f)
		}
		for r, row := range m["embedding"].([]any) {
			rf := f + "[" + strconv.Itoa(r) + "]"
			values, ok := row.([]any)
			if !ok || len(values) != items2 {
				return newError(ShapeMismatch, rf, -1, rf+" must be an array of "+strconv.Itoa(items2)+" items")
			}
			if e := numberItems(dst[r*rb:(r+1)*rb], dtype, values, rf); e != nil {
				return e
			}
		}
		return nil
	}
	counts := make([]int, len(items))
	for i, m := range items {
		if e := raggedItemShape(m, i, d, rb, counts, index); e != nil {
			// SPEC.md 20.3: one item in full before the next, so the contents of the items before i first
			for j := 0; j < i; j++ {
				if ce := contents(j, make([]byte, counts[index[j]]*rb)); ce != nil {
					return nil, nil, ce
				}
			}
			return nil, nil, e
		}
	}
	offsets := offsetsOf(counts)
	data := make([]byte, int(offsets[len(items)])*rb)
	for i := range items {
		if e := contents(i, data[int(offsets[index[i]])*rb:int(offsets[index[i]+1])*rb]); e != nil {
			return nil, nil, e
		}
	}
	return &RaggedTensor{DType: dtype, N: len(items), D: d, Offsets: offsets, Data: data}, env.meta, nil
}

// raggedItemShape checks item i's shape and embedding kind (SPEC.md 20.3 steps 1, 2 and the row
// count of 4) and records its row count in counts, by index.
func raggedItemShape(m map[string]any, i, d, rb int, counts, index []int) *Error {
	f := "data[" + strconv.Itoa(i) + "]"
	emb := m["embedding"]
	_, isStr := emb.(string)
	rows, isArr := emb.([]any)
	shape, hasShape := m["shape"]
	if !hasShape && isStr {
		return newError(InvalidField, f+".shape", -1, f+".shape is required for a Base64 item")
	}
	var sh []int
	if hasShape {
		var ok bool
		if sh, ok = kserveShape(shape, true); !ok || len(sh) != 2 {
			return newError(InvalidField, f+".shape", -1, f+".shape must be two non-negative integers")
		}
		if sh[1] != d {
			return newError(ShapeMismatch, f+".shape", -1, f+".shape disagrees with dimensions")
		}
	}
	if !isStr && !isArr {
		return newError(InvalidField, f+".embedding", -1, f+".embedding must be a Base64 string or an array of rows")
	}
	if isArr && hasShape && len(rows) != sh[0] {
		return newError(ShapeMismatch, f+".shape", -1, f+".shape disagrees with its "+strconv.Itoa(len(rows))+" rows")
	}
	if isStr {
		// the Base64 length before any buffer is sized by shape[0] (which the text may not back)
		if e := base64Sized(emb.(string), sh[0], rb, f+".embedding"); e != nil {
			return e
		}
		counts[index[i]] = sh[0]
	} else {
		counts[index[i]] = len(rows)
	}
	return nil
}

// base64Sized is nil when s decodes to count items of width bytes, else the error SPEC.md 20.3 gives
// for it (invalid_base64 first, then length_mismatch), found without decoding into a buffer: a count
// the text cannot back never sizes one. A string of the right length is checked when it is decoded.
func base64Sized(s string, count, width int, field string) *Error {
	want := math.MaxInt
	if width == 0 || count <= math.MaxInt/width {
		want = count * width
	}
	n, ok := base64DecodedLen(s)
	if ok && n == want {
		return nil
	}
	if e := checkBase64(s); e != nil {
		return withField(e, field)
	}
	return lengthMismatch(field, n, want)
}

// DecodeSparseJSON decodes a sparse JSON envelope (SPEC.md 20.3): InvalidField on kind, dimensions
// (the vocabulary size, 1 to 2^32), dtype, data[i].nnz, data[i].indices / .values and their items
// (an index not below V or not above the one before it included); ShapeMismatch on data[i].values
// and data[i].index; InvalidBase64 and LengthMismatch on data[i].indices / data[i].values.
func DecodeSparseJSON(body []byte) (*SparseTensor, *Meta, error) {
	env, e := parseKindEnvelope(body, "sparse")
	if e != nil {
		return nil, nil, e
	}
	dtype := env.dtype
	items, index, e := env.placed()
	if e != nil {
		return nil, nil, e
	}
	size := dtype.ItemSize()
	// contents decodes item i's k_i indices and values into idx and vals: the second pass.
	contents := func(i int, idx, vals []byte) *Error {
		m := items[i]
		f := "data[" + strconv.Itoa(i) + "]"
		if s, ok := m["indices"].(string); ok {
			if e := base64Part(idx, s, 4, env.order, f+".indices"); e != nil {
				return e
			}
			if e := base64Part(vals, m["values"].(string), size, env.order, f+".values"); e != nil {
				return e
			}
		} else {
			ind, vs := m["indices"].([]any), m["values"].([]any)
			for j, x := range ind {
				v, ok := jsonCount(x)
				if !ok || v > 1<<32-1 {
					jf := f + ".indices[" + strconv.Itoa(j) + "]"
					return newError(InvalidField, jf, -1, jf+" must be an integer from 0 to 2^32-1")
				}
				binary.LittleEndian.PutUint32(idx[4*j:], uint32(v))
			}
			if nnz, has := m["nnz"]; len(vs) != len(ind) || has && !jsonIs(nnz, len(ind)) {
				return newError(ShapeMismatch, f+".values", -1, f+": indices, values and nnz disagree in length")
			}
			if e := numberItems(vals, dtype, vs, f+".values"); e != nil {
				return e
			}
		}
		if e := checkIndices(viewUint32(idx), []uint32{0, uint32(len(idx) / 4)}, env.dims, 0, ""); e != nil {
			jf := f + ".indices[" + strconv.Itoa(e.Offset/4) + "]"
			return newError(InvalidField, jf, -1, jf+": "+e.Message)
		}
		return nil
	}
	counts := make([]int, len(items))
	for i, m := range items {
		if e := sparseItemShape(m, i, size, counts, index); e != nil {
			// SPEC.md 20.3: one item in full before the next, so the contents of the items before i first
			for j := 0; j < i; j++ {
				c := counts[index[j]]
				if ce := contents(j, make([]byte, 4*c), make([]byte, c*size)); ce != nil {
					return nil, nil, ce
				}
			}
			return nil, nil, e
		}
	}
	offsets := offsetsOf(counts)
	k := int(offsets[len(items)])
	indexBytes := make([]byte, 4*k)
	data := make([]byte, k*size)
	for i := range items {
		a, b := int(offsets[index[i]]), int(offsets[index[i]+1])
		if e := contents(i, indexBytes[4*a:4*b], data[a*size:b*size]); e != nil {
			return nil, nil, e
		}
	}
	return &SparseTensor{DType: dtype, N: len(items), V: env.dims, Offsets: offsets, Indices: viewUint32(indexBytes), Data: data}, env.meta, nil
}

// sparseItemShape checks item i's nnz and the kinds of its indices and values (SPEC.md 20.3 steps 1
// and 2) and records its entry count in counts, by index.
func sparseItemShape(m map[string]any, i, size int, counts, index []int) *Error {
	f := "data[" + strconv.Itoa(i) + "]"
	nnzV, hasNNZ := m["nnz"]
	ind, val := m["indices"], m["values"]
	_, indStr := ind.(string)
	indArr, isArr := ind.([]any)
	if !hasNNZ && indStr {
		return newError(InvalidField, f+".nnz", -1, f+".nnz is required for a Base64 item")
	}
	nnz := -1
	if hasNNZ {
		x, ok := jsonCount(nnzV)
		if !ok {
			return newError(InvalidField, f+".nnz", -1, f+".nnz must be a non-negative integer")
		}
		nnz = x
	}
	if !indStr && !isArr {
		return newError(InvalidField, f+".indices", -1, f+".indices must be a Base64 string or an array")
	}
	_, valStr := val.(string)
	_, valArr := val.([]any)
	if indStr != valStr || isArr != valArr {
		return newError(InvalidField, f+".values", -1, f+".values must be of the kind of indices")
	}
	if indStr {
		// the Base64 lengths before any buffer is sized by nnz (which the text may not back)
		is, vs := ind.(string), val.(string)
		if e := base64Sized(is, nnz, 4, f+".indices"); e != nil {
			return e
		}
		if e := base64Sized(vs, nnz, size, f+".values"); e != nil {
			if ie := checkBase64(is); ie != nil { // the indices' characters come before the values' length
				return withField(ie, f+".indices")
			}
			return e
		}
		counts[index[i]] = nnz
	} else {
		counts[index[i]] = len(indArr)
	}
	return nil
}

func jsonIs(v any, n int) bool {
	x, ok := jsonCount(v)
	return ok && x == n
}

func appendKindTail(dst []byte, kind string, dtype DType, dims uint64, order ByteOrder, meta *Meta) []byte {
	if meta == nil {
		meta = &Meta{}
	}
	dst = append(dst, `],"model":`...)
	dst = appendJSONString(dst, meta.Model)
	dst = append(dst, `,"usage":{"prompt_tokens":`...)
	dst = strconv.AppendUint(dst, meta.PromptTokens, 10)
	dst = append(dst, `,"total_tokens":`...)
	dst = strconv.AppendUint(dst, meta.TotalTokens, 10)
	dst = append(dst, `},"kind":"`+kind+`","dtype":"`+dtype.String()+`","byteorder":"`+order.String()+`","dimensions":`...)
	dst = strconv.AppendUint(dst, dims, 10)
	return append(dst, '}')
}

func kindJSONOptions(opts JSONOptions) (EncodingFormat, ByteOrder, *Error) {
	ef := opts.EncodingFormat
	if ef == "" {
		ef = EncodingFloat
	}
	if ef != EncodingFloat && ef != EncodingBase64 {
		return "", 0, newError(InvalidField, "encoding_format", -1, "unknown encoding_format "+strconv.Quote(string(ef)))
	}
	order := opts.ByteOrder
	if ef == EncodingFloat {
		order = LittleEndian
	}
	return ef, order, nil
}

// EncodeRaggedJSON returns the JSON envelope of a ragged tensor (SPEC.md 20.3); float rows fail
// with NonFinite on NaN and infinities.
func EncodeRaggedJSON(t *RaggedTensor, meta *Meta, opts JSONOptions) ([]byte, error) {
	ef, order, e := kindJSONOptions(opts)
	if e != nil {
		return nil, e
	}
	rb := t.DType.RowBytes(t.D)
	dst := []byte(`{"object":"list","data":[`)
	for i := 0; i < t.N; i++ {
		if i > 0 {
			dst = append(dst, ',')
		}
		a, b := int(t.Offsets[i]), int(t.Offsets[i+1])
		dst = append(dst, `{"object":"embedding","index":`...)
		dst = strconv.AppendInt(dst, int64(i), 10)
		dst = append(dst, `,"embedding":`...)
		if ef == EncodingBase64 {
			dst = append(dst, '"')
			dst = appendBase64(dst, t.Data[a*rb:b*rb], t.DType.ItemSize(), order)
			dst = append(dst, '"')
		} else {
			dst = append(dst, '[')
			for r := a; r < b; r++ {
				if r > a {
					dst = append(dst, ',')
				}
				var err *Error
				if dst, err = appendNumbers(dst, t.DType, t.Data[r*rb:(r+1)*rb], i); err != nil {
					return nil, err
				}
			}
			dst = append(dst, ']')
		}
		dst = append(dst, `,"shape":[`...)
		dst = strconv.AppendInt(dst, int64(b-a), 10)
		dst = append(dst, ',')
		dst = strconv.AppendInt(dst, int64(t.D), 10)
		dst = append(dst, "]}"...)
	}
	return appendKindTail(dst, "ragged", t.DType, uint64(t.D), order, meta), nil
}

// EncodeSparseJSON returns the JSON envelope of a sparse tensor (SPEC.md 20.3).
func EncodeSparseJSON(t *SparseTensor, meta *Meta, opts JSONOptions) ([]byte, error) {
	ef, order, e := kindJSONOptions(opts)
	if e != nil {
		return nil, e
	}
	size := t.DType.ItemSize()
	ib := uint32Bytes(t.Indices)
	dst := []byte(`{"object":"list","data":[`)
	for i := 0; i < t.N; i++ {
		if i > 0 {
			dst = append(dst, ',')
		}
		a, b := int(t.Offsets[i]), int(t.Offsets[i+1])
		dst = append(dst, `{"object":"sparse_embedding","index":`...)
		dst = strconv.AppendInt(dst, int64(i), 10)
		if ef == EncodingBase64 {
			dst = append(dst, `,"indices":"`...)
			dst = appendBase64(dst, ib[4*a:4*b], 4, order)
			dst = append(dst, `","values":"`...)
			dst = appendBase64(dst, t.Data[a*size:b*size], size, order)
			dst = append(dst, '"')
		} else {
			dst = append(dst, `,"indices":[`...)
			for j := a; j < b; j++ {
				if j > a {
					dst = append(dst, ',')
				}
				dst = strconv.AppendUint(dst, uint64(t.Indices[j]), 10)
			}
			dst = append(dst, `],"values":`...)
			var err *Error
			if dst, err = appendNumbers(dst, t.DType, t.Data[a*size:b*size], i); err != nil {
				return nil, err
			}
		}
		dst = append(dst, `,"nnz":`...)
		dst = strconv.AppendInt(dst, int64(b-a), 10)
		dst = append(dst, '}')
	}
	return appendKindTail(dst, "sparse", t.DType, t.V, order, meta), nil
}
