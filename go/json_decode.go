package densewire

import (
	"bytes"
	"encoding/binary"
	"math"
	"strconv"
	"unicode/utf8"
)

// Decoding the JSON embeddings envelope (SPEC.md section 6.2). The text is validated and its
// values located in one pass (jsonscan.go); the rows are then decoded straight into the tensor.

// DecodeJSON decodes a JSON embeddings response (SPEC.md section 6.2): rows placed by index, each
// an array of numbers or a Base64 string (in the response's byteorder). Absent densewire fields
// default as OpenAI implies (dtype float32, byteorder little, d from the first row). Unknown keys are
// ignored. The meta is never nil; its Quantization is the quantization key (SPEC.md section 17.5).
//
// Errors: text that is not JSON, or NaN/Infinity tokens: Malformed at the byte offset; data missing
// or not an array, an embedding of the wrong type, dimensions not a non-negative integer:
// InvalidField; an unknown dtype: UnknownDType on "dtype"; an index repeated or outside
// [0, len(data)): ShapeMismatch on data[i].index; a number row of another length: ShapeMismatch on
// data[i].embedding; a Base64 row: the errors of DecodeBase64 on data[i].embedding, offsets within
// that string.
func DecodeJSON(body []byte) (*Tensor, *Meta, error) {
	t, meta, err := decodeJSON(body)
	if err != nil {
		return nil, nil, err
	}
	return t, meta, nil
}

type jsonRow struct {
	obj       span // the element of data
	isObject  bool
	index     span
	embedding span
}

type jsonEnvelope struct {
	data                                       span
	isArray                                    bool
	rows                                       []jsonRow
	model, usage, dtype, byteorder, dimensions span
	quantization, kind                         span
}

// scanEnvelope validates the text and records the spans of the values DecodeJSON needs.
func scanEnvelope(body []byte) (*jsonEnvelope, *Error) {
	p := &jsonScanner{b: body}
	env := &jsonEnvelope{data: noSpan, model: noSpan, usage: noSpan, dtype: noSpan, byteorder: noSpan, dimensions: noSpan, quantization: noSpan, kind: noSpan}
	if c := p.peek(); c != '{' {
		if _, err := p.value(0); err != nil {
			return nil, err
		}
		return nil, newError(Malformed, "", 0, "the body is not a JSON object")
	}
	err := p.object(0, func(key string, depth int) *Error {
		var err *Error
		switch key {
		case "data":
			if p.peek() != '[' {
				env.isArray = false
				env.rows = nil
				env.data, err = p.value(depth)
				return err
			}
			env.isArray = true
			env.rows = env.rows[:0]
			start := p.i
			_, err = p.array(depth, func(j int) *Error {
				row := jsonRow{index: noSpan, embedding: noSpan}
				if p.peek() != '{' {
					var e *Error
					row.obj, e = p.value(depth + 1)
					env.rows = append(env.rows, row)
					return e
				}
				row.isObject = true
				rs := p.i
				e := p.object(depth+1, func(k string, d int) *Error {
					var e *Error
					switch k {
					case "index":
						row.index, e = p.value(d)
					case "embedding":
						row.embedding, e = p.value(d)
					default:
						_, e = p.value(d)
					}
					return e
				})
				row.obj = span{rs, p.i}
				env.rows = append(env.rows, row)
				return e
			})
			env.data = span{start, p.i}
		case "model":
			env.model, err = p.value(depth)
		case "usage":
			env.usage, err = p.value(depth)
		case "dtype":
			env.dtype, err = p.value(depth)
		case "byteorder":
			env.byteorder, err = p.value(depth)
		case "dimensions":
			env.dimensions, err = p.value(depth)
		case "quantization":
			env.quantization, err = p.value(depth)
		case "kind":
			env.kind, err = p.value(depth)
		default:
			_, err = p.value(depth)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if !p.atEnd() {
		return nil, p.syntax("data after the JSON value")
	}
	return env, nil
}

func isNull(body []byte, s span) bool { return !s.ok() || string(body[s.start:s.end]) == "null" }

// jsonString returns the string value at s (ok false when it is not a string). Invalid UTF-8 is
// replaced by U+FFFD, byte by byte, as encoding/json does.
func jsonString(body []byte, s span) (string, bool) {
	if body[s.start] != '"' {
		return "", false
	}
	raw := body[s.start+1 : s.end-1]
	str := string(raw)
	if bytes.IndexByte(raw, '\\') >= 0 {
		var ok bool
		if str, ok = unquoteJSON(body[s.start:s.end]); !ok {
			return "", false
		}
	}
	if !utf8.ValidString(str) {
		str = string([]rune(str))
	}
	return str, true
}

// jsonStringView is jsonString without a copy when the string has no escapes (and without the
// UTF-8 repair: its callers read Base64, where any non-ASCII byte is an error anyway).
func jsonStringView(body []byte, s span) (string, bool) {
	raw := body[s.start+1 : s.end-1]
	if bytes.IndexByte(raw, '\\') >= 0 {
		return unquoteJSON(body[s.start:s.end])
	}
	return stringView(raw), true
}

// jsonUint returns the non-negative integer at s: a JSON number written as an integer (no
// fraction or exponent, as the other implementations read integers), ok false otherwise.
func jsonUint(body []byte, s span) (uint64, bool) {
	tok := body[s.start:s.end]
	for _, c := range tok {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	v, err := strconv.ParseUint(stringView(tok), 10, 64)
	return v, err == nil
}

// isJSONInteger reports whether the value at s is a number written as an integer (maybe negative).
func isJSONInteger(body []byte, s span) bool {
	tok := body[s.start:s.end]
	if len(tok) > 0 && tok[0] == '-' {
		tok = tok[1:]
	}
	for _, c := range tok {
		if c < '0' || c > '9' {
			return false
		}
	}
	return len(tok) > 0
}

func decodeJSON(body []byte) (*Tensor, *Meta, *Error) {
	env, err := scanEnvelope(body)
	if err != nil {
		return nil, nil, err
	}
	if env.kind.ok() { // SPEC.md 20: a tensor body says no kind, whatever the value
		return nil, nil, newError(InvalidField, "kind", -1, "a tensor body says no kind, this one says "+
			string(body[env.kind.start:env.kind.end])+": decode it with that kind's decoder")
	}
	meta := &Meta{}
	if !isNull(body, env.model) {
		s, ok := jsonString(body, env.model)
		if !ok {
			return nil, nil, newError(InvalidField, "model", env.model.start, "model is not a string")
		}
		meta.Model = s
	}
	if !isNull(body, env.usage) {
		if err := decodeUsage(body, env.usage, meta); err != nil {
			return nil, nil, err
		}
	}
	if !isNull(body, env.quantization) {
		s, ok := jsonString(body, env.quantization)
		if !ok {
			return nil, nil, newError(InvalidField, "quantization", env.quantization.start, "quantization is not a string")
		}
		meta.Quantization = s
	}
	dtype := Float32
	if !isNull(body, env.dtype) {
		s, ok := jsonString(body, env.dtype)
		if !ok {
			return nil, nil, newError(InvalidField, "dtype", env.dtype.start, "dtype is not a string")
		}
		var e error
		if dtype, e = ParseDType(s); e != nil {
			return nil, nil, e.(*Error)
		}
	}
	order := LittleEndian
	if !isNull(body, env.byteorder) {
		s, ok := jsonString(body, env.byteorder)
		if !ok {
			return nil, nil, newError(InvalidField, "byteorder", env.byteorder.start, "byteorder is not a string")
		}
		var e error
		if order, e = ParseByteOrder(s); e != nil {
			return nil, nil, e.(*Error)
		}
	}
	d, hasD := -1, false
	if !isNull(body, env.dimensions) {
		v, ok := jsonUint(body, env.dimensions)
		if !ok || v > maxDim {
			return nil, nil, newError(InvalidField, "dimensions", env.dimensions.start, "dimensions is not a non-negative integer")
		}
		d, hasD = int(v), true
	}
	if !env.data.ok() {
		return nil, nil, newError(InvalidField, "data", -1, "missing field data")
	}
	if !env.isArray {
		return nil, nil, newError(InvalidField, "data", env.data.start, "data is not an array")
	}
	n := len(env.rows)
	if !hasD {
		d = 0
		if n > 0 {
			var e *Error
			if d, e = firstRowDims(body, &env.rows[0], dtype); e != nil {
				return nil, nil, e
			}
		}
	}
	rb := dtype.RowBytes(d)
	if n > 0 && rb > math.MaxInt/n {
		return nil, nil, newError(InvalidField, "dimensions", env.dimensions.start, "the tensor is too large")
	}
	// A declared dimensions value cannot make us allocate more than the body can fill: rows of
	// numbers take at least a character per item, Base64 rows 4 characters per 3 bytes. Beyond
	// that bound some row must fail, and the rows are only checked, without a buffer.
	var data []byte
	if n*rb <= 4*len(body)+1024 {
		data = make([]byte, n*rb)
	}
	seen := make([]bool, n)
	for i := range env.rows {
		row := &env.rows[i]
		prefix := "data[" + strconv.Itoa(i) + "]"
		if !row.isObject {
			return nil, nil, newError(InvalidField, prefix, row.obj.start, prefix+" is not an object")
		}
		if isNull(body, row.index) {
			return nil, nil, newError(InvalidField, prefix+".index", row.obj.start, prefix+".index is missing")
		}
		idx, ok := jsonUint(body, row.index)
		if !isJSONInteger(body, row.index) {
			return nil, nil, newError(InvalidField, prefix+".index", row.index.start, prefix+".index is not an integer")
		}
		if !ok || idx >= uint64(n) || seen[idx] {
			what := " is outside [0, " + strconv.Itoa(n) + ")"
			if ok && idx < uint64(n) {
				what = " repeats an earlier index"
			}
			return nil, nil, newError(ShapeMismatch, prefix+".index", row.index.start,
				prefix+".index "+string(body[row.index.start:row.index.end])+what)
		}
		seen[idx] = true
		var dst []byte
		if data != nil {
			dst = data[int(idx)*rb : (int(idx)+1)*rb]
		}
		if e := decodeRow(body, row.embedding, dtype, d, order, dst, prefix+".embedding"); e != nil {
			return nil, nil, e
		}
	}
	if data == nil {
		return nil, nil, newError(Malformed, "", -1, "the rows cannot hold the declared shape") // not reached, see above
	}
	return &Tensor{DType: dtype, N: n, D: d, Data: data}, meta, nil
}

// maxTokenCount is the largest usage count a decoder accepts, 2^53-1 (SPEC.md sections 6.2 and 8):
// the largest integer every language's JSON numbers hold exactly.
const maxTokenCount = 1<<53 - 1

// decodeUsage reads the usage object: an absent count is 0, any count but an integer from 0 to
// maxTokenCount (null included) is InvalidField on usage.prompt_tokens or usage.total_tokens.
func decodeUsage(body []byte, s span, meta *Meta) *Error {
	if body[s.start] != '{' {
		return newError(InvalidField, "usage", s.start, "usage is not an object")
	}
	p := &jsonScanner{b: body[:s.end], i: s.start}
	var bad *Error
	err := p.object(0, func(key string, depth int) *Error {
		v, err := p.value(depth)
		if err != nil {
			return err
		}
		var dst *uint64
		switch key {
		case "prompt_tokens":
			dst = &meta.PromptTokens
		case "total_tokens":
			dst = &meta.TotalTokens
		default:
			return nil
		}
		x, ok := jsonUint(body, v)
		if (!ok || x > maxTokenCount) && bad == nil {
			bad = newError(InvalidField, "usage."+key, v.start, "usage."+key+" is not an integer from 0 to 2^53-1")
		}
		*dst = x
		return nil
	})
	if err != nil {
		return err
	}
	return bad
}

// firstRowDims derives d from the first row when dimensions is absent (SPEC.md section 6.2).
func firstRowDims(body []byte, row *jsonRow, dtype DType) (int, *Error) {
	field := "data[0].embedding"
	if !row.isObject {
		return 0, newError(InvalidField, "data[0]", row.obj.start, "data[0] is not an object")
	}
	if isNull(body, row.embedding) {
		return 0, newError(InvalidField, field, -1, field+" is missing")
	}
	s := row.embedding
	switch body[s.start] {
	case '"':
		str, _ := jsonStringView(body, s)
		nb, ok := base64DecodedLen(str)
		if !ok {
			if e := checkBase64(str); e != nil {
				return 0, withField(e, field)
			}
		}
		if dtype == Binary {
			return 8 * nb, nil
		}
		return nb / dtype.ItemSize(), nil
	case '[':
		p := &jsonScanner{b: body[:s.end], i: s.start}
		count, err := p.array(0, func(int) *Error { _, e := p.value(1); return e })
		if err != nil {
			return 0, err
		}
		if dtype == Binary {
			return 8 * count, nil
		}
		return count, nil
	}
	return 0, newError(InvalidField, field, s.start, field+" is neither an array of numbers nor a Base64 string")
}

// decodeRow decodes one embedding (numbers or Base64) into dst, which is row_bytes long, or only
// checks it when dst is nil.
func decodeRow(body []byte, s span, dtype DType, d int, order ByteOrder, dst []byte, field string) *Error {
	rb := dtype.RowBytes(d)
	if isNull(body, s) {
		return newError(InvalidField, field, -1, field+" is missing")
	}
	switch body[s.start] {
	case '"':
		str, _ := jsonStringView(body, s)
		got, ok := base64DecodedLen(str)
		if !ok || got != rb || dst == nil {
			if e := checkBase64(str); e != nil {
				return withField(e, field)
			}
			if ok && got == rb {
				return nil
			}
			return lengthMismatch(field, got, rb)
		}
		if e := decodeBase64Into(dst, str); e != nil {
			return withField(e, field)
		}
		if order == BigEndian {
			swapBytes(dst, dtype.ItemSize())
		}
		return nil
	case '[':
		return decodeNumberRow(body, s, dtype, d, dst, field)
	}
	return newError(InvalidField, field, s.start, field+" is neither an array of numbers nor a Base64 string")
}

// decodeNumberRow parses an array of numbers (validated by the scanner) into dst.
func decodeNumberRow(body []byte, s span, dtype DType, d int, dst []byte, field string) *Error {
	want := dtype.rowItems(d)
	b := body[:s.end]
	i := s.start + 1
	j := 0
	for {
		for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\r' || b[i] == '\t' || b[i] == ',') {
			i++
		}
		if i >= len(b) || b[i] == ']' {
			break
		}
		start := i
		c := b[i]
		if c != '-' && (c < '0' || c > '9') {
			// not a number: skip the value to report the element precisely
			p := &jsonScanner{b: b, i: i}
			v, _ := p.value(0)
			return newError(InvalidField, field+"["+strconv.Itoa(j)+"]", v.start,
				field+"["+strconv.Itoa(j)+"] is not a number: "+string(b[v.start:v.end]))
		}
		for i < len(b) && (b[i] >= '0' && b[i] <= '9' || b[i] == '-' || b[i] == '+' || b[i] == '.' || b[i] == 'e' || b[i] == 'E') {
			i++
		}
		if j >= want || dst == nil {
			j++
			continue // count the rest for the message
		}
		x, err := strconv.ParseFloat(stringView(b[start:i]), 64)
		if err != nil && !isRangeErr(err) {
			return newError(Malformed, field, start, "invalid number at offset "+strconv.Itoa(start))
		}
		if e := putNumber(dst, dtype, j, x); e != nil {
			e.Field = field + "[" + strconv.Itoa(j) + "]"
			e.Offset = start
			e.Message = e.Field + ": " + e.Message
			return e
		}
		j++
	}
	if j != want {
		return newError(ShapeMismatch, field, s.start, field+" has "+strconv.Itoa(j)+" items, the shape needs "+strconv.Itoa(want))
	}
	return nil
}

func isRangeErr(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

// putNumber stores JSON number x as item j of dst (SPEC.md section 3.5).
func putNumber(dst []byte, dtype DType, j int, x float64) *Error {
	switch dtype {
	case Float32:
		binary.LittleEndian.PutUint32(dst[4*j:], f32bits(Float64ToFloat32(x)))
	case Float64:
		binary.LittleEndian.PutUint64(dst[8*j:], f64bits(x))
	case Float16:
		binary.LittleEndian.PutUint16(dst[2*j:], float64ToFloat16Bits(x))
	case BFloat16:
		binary.LittleEndian.PutUint16(dst[2*j:], float64ToBFloat16Bits(x))
	case Int8:
		if x != math.Trunc(x) || x < -128 || x > 127 {
			return newError(InvalidField, "", -1, strconv.FormatFloat(x, 'g', -1, 64)+" is not an int8")
		}
		dst[j] = byte(int8(x))
	case Uint8, Binary:
		if x != math.Trunc(x) || x < 0 || x > 255 {
			return newError(InvalidField, "", -1, strconv.FormatFloat(x, 'g', -1, 64)+" is not a byte (0-255)")
		}
		dst[j] = byte(x)
	}
	return nil
}
