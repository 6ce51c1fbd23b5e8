package densewire

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"
)

// HeaderInferenceHeaderContentLength is the HTTP header of the KServe v2 binary tensor extension
// that gives the byte length of the JSON header at the start of the body.
const HeaderInferenceHeaderContentLength = "Inference-Header-Content-Length"

// KServeDTypes maps the KServe v2 datatypes that have a densewire dtype to it (SPEC.md section 19,
// "Open Inference Protocol", 19.1). BYTES (text) has none: a reader gives its elements instead.
var KServeDTypes = map[string]DType{"FP32": Float32, "FP16": Float16, "BF16": BFloat16, "FP64": Float64, "INT8": Int8, "UINT8": Uint8}

// kserveOther are KServe datatypes without a densewire dtype (UnknownDType when read).
var kserveOther = map[string]bool{"BOOL": true, "INT16": true, "INT32": true, "INT64": true, "UINT16": true, "UINT32": true, "UINT64": true}

// KServeOutput is one output of a KServe v2 inference response.
type KServeOutput struct {
	Name       string
	Datatype   string         // FP32, FP16, BF16, FP64, INT8, UINT8 or BYTES
	Shape      []int          // as sent: [n, d] or [d] for a tensor (then the tensor is (1, d)), any rank for BYTES
	Parameters map[string]any // as sent (numbers as json.Number), binary_data_size included
	Binary     bool           // it came as a blob (parameters.binary_data_size), not as JSON data
	// Tensor is the output for every datatype but BYTES; for a blob its Data aliases the body.
	Tensor *Tensor
	// Elements are the elements of a BYTES output (sub-slices of the body for a blob).
	Elements [][]byte
	// Quantization is parameters.quantization: the id of an INT8/UINT8 output's ranges ("" if none).
	Quantization string
}

// KServeResponse is a KServe v2 inference response: its outputs in order, and the model name,
// version, id and parameters as sent ("" / nil when absent).
type KServeResponse struct {
	Outputs      []KServeOutput
	ModelName    string
	ModelVersion string
	ID           string
	Parameters   map[string]any
}

// Output returns the output called name, or nil.
func (r *KServeResponse) Output(name string) *KServeOutput {
	for i := range r.Outputs {
		if r.Outputs[i].Name == name {
			return &r.Outputs[i]
		}
	}
	return nil
}

// Embeddings returns the tensor output called name (usually "embedding") with a Meta of the
// response's model name and the output's quantization id; InvalidField on "outputs" when the
// response has no tensor output of that name.
func (r *KServeResponse) Embeddings(name string) (*Tensor, *Meta, error) {
	out := r.Output(name)
	if out == nil || out.Tensor == nil {
		names := make([]string, len(r.Outputs))
		for i, o := range r.Outputs {
			names[i] = o.Name
		}
		return nil, nil, newError(InvalidField, "outputs", -1, "no tensor output "+strconv.Quote(name)+"; the response has "+strings.Join(names, ", "))
	}
	return out.Tensor, &Meta{Model: r.ModelName, Quantization: out.Quantization}, nil
}

// KServeDType returns the densewire dtype of a KServe datatype; UnknownDType on field for BYTES
// (text, not a tensor), the KServe datatypes densewire has no dtype for, and any other string.
func KServeDType(datatype, field string) (DType, error) {
	if dt, ok := KServeDTypes[datatype]; ok {
		return dt, nil
	}
	return 0, unknownDatatype(datatype, field)
}

func unknownDatatype(datatype, field string) *Error {
	if kserveOther[datatype] {
		return newError(UnknownDType, field, -1, datatype+" has no densewire dtype; expected FP32, FP16, BF16, FP64, INT8, UINT8 or BYTES")
	}
	return newError(UnknownDType, field, -1, "unknown datatype "+strconv.Quote(datatype)+"; expected FP32, FP16, BF16, FP64, INT8, UINT8 or BYTES")
}

// DecodeKServe reads a KServe v2 inference response (SPEC.md section 19, "Open Inference Protocol",
// 19.3): a JSON object alone, or the JSON header of Inference-Header-Content-Length bytes followed by
// the blobs of the outputs that have parameters.binary_data_size. A blob's tensor (or BYTES
// elements) aliases body: no copy.
//
// Errors, the first in the spec's order: InvalidField, Truncated or Malformed on
// Inference-Header-Content-Length; Malformed when the header is not a UTF-8 JSON object;
// InvalidField on outputs, outputs[i].name, .datatype, .parameters, .parameters.binary_data_size,
// .shape, .parameters.quantization, .data and .data[j]; UnknownDType on outputs[i].datatype;
// Truncated and LengthMismatch (body offsets) on outputs[i].parameters.binary_data_size; Malformed
// for a BYTES element past its blob (on outputs[i]) and for bytes after the last blob;
// ShapeMismatch for an element count other than the shape's.
func DecodeKServe(h http.Header, body []byte) (*KServeResponse, error) {
	r, err := decodeKServe(h, body)
	if err != nil {
		return nil, err
	}
	return r, nil
}

type kserveSpec struct {
	field string
	out   KServeOutput
	size  int // binary_data_size, -1 without
	doc   map[string]any
}

func decodeKServe(h http.Header, body []byte) (*KServeResponse, *Error) {
	hl := len(body)
	if v, ok := headerValue(h, HeaderInferenceHeaderContentLength); ok {
		text := strings.TrimSpace(v)
		if text == "" || strings.Trim(text, "0123456789") != "" {
			return nil, newError(InvalidField, HeaderInferenceHeaderContentLength, -1, "not a decimal byte count: "+strconv.Quote(v))
		}
		n, err := strconv.ParseUint(text, 10, 63)
		if err != nil || n > uint64(len(body)) {
			return nil, newError(Truncated, HeaderInferenceHeaderContentLength, len(body), "the JSON header is "+text+" bytes but the body has only "+strconv.Itoa(len(body)))
		}
		if n == 0 {
			return nil, newError(Malformed, HeaderInferenceHeaderContentLength, 0, "a response has a JSON header; Inference-Header-Content-Length is 0")
		}
		hl = int(n)
	}
	header := body[:hl]
	if !utf8.Valid(header) {
		return nil, newError(Malformed, "", -1, "the inference header is not UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(header))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		off := -1
		var se *json.SyntaxError
		if errors.As(err, &se) {
			off = int(se.Offset)
		}
		return nil, newError(Malformed, "", off, "the inference header is not valid JSON: "+err.Error())
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, newError(Malformed, "", int(dec.InputOffset()), "the inference header has more than one JSON value")
	}
	top, ok := doc.(map[string]any)
	if !ok {
		return nil, newError(Malformed, "", 0, "the inference header must be a JSON object, got "+jsonKind(doc))
	}
	specs, e := kserveSpecs(top["outputs"])
	if e != nil {
		return nil, e
	}
	resp := &KServeResponse{Outputs: make([]KServeOutput, 0, len(specs))}
	pos := hl
	for _, s := range specs {
		_, hasData := s.doc["data"]
		if s.size >= 0 && hasData {
			return nil, newError(InvalidField, s.field+".data", -1, "has both data and parameters.binary_data_size")
		}
		if s.size < 0 && !hasData {
			return nil, newError(InvalidField, s.field+".data", -1, "has neither data nor parameters.binary_data_size")
		}
		out := s.out
		if s.size >= 0 {
			if e := kserveBlob(&out, s.field, body, pos, s.size); e != nil {
				return nil, e
			}
			pos += s.size
		} else if e := kserveJSONData(&out, s.field+".data", s.doc["data"]); e != nil {
			return nil, e
		}
		resp.Outputs = append(resp.Outputs, out)
	}
	if pos != len(body) {
		return nil, newError(Malformed, "", pos, strconv.Itoa(len(body)-pos)+" bytes after the last tensor")
	}
	resp.ModelName, _ = top["model_name"].(string)
	resp.ModelVersion, _ = top["model_version"].(string)
	resp.ID, _ = top["id"].(string)
	resp.Parameters, _ = top["parameters"].(map[string]any)
	return resp, nil
}

// kserveSpecs checks every output's name, datatype, parameters, shape and quantization (SPEC 19.3 step 3).
func kserveSpecs(outputs any) ([]kserveSpec, *Error) {
	list, ok := outputs.([]any)
	if !ok {
		return nil, newError(InvalidField, "outputs", -1, "must be an array of outputs, got "+jsonKind(outputs))
	}
	specs := make([]kserveSpec, len(list))
	for i, o := range list {
		f := "outputs[" + strconv.Itoa(i) + "]"
		m, ok := o.(map[string]any)
		if !ok {
			return nil, newError(InvalidField, f, -1, "must be an object, got "+jsonKind(o))
		}
		name, ok := m["name"].(string)
		if !ok {
			return nil, newError(InvalidField, f+".name", -1, "must be a string, got "+jsonKind(m["name"]))
		}
		datatype, ok := m["datatype"].(string)
		if !ok {
			return nil, newError(InvalidField, f+".datatype", -1, "must be a string, got "+jsonKind(m["datatype"]))
		}
		params := map[string]any{}
		if p, present := m["parameters"]; present && p != nil {
			if params, ok = p.(map[string]any); !ok {
				return nil, newError(InvalidField, f+".parameters", -1, "must be an object, got "+jsonKind(p))
			}
		}
		size := -1
		if v, present := params["binary_data_size"]; present && v != nil {
			n, ok := jsonSizeCount(v)
			if !ok {
				return nil, newError(InvalidField, f+".parameters.binary_data_size", -1, "must be a non-negative integer, got "+jsonKind(v))
			}
			size = n
		}
		if _, known := KServeDTypes[datatype]; !known && datatype != "BYTES" {
			return nil, unknownDatatype(datatype, f+".datatype")
		}
		shape, ok := kserveShape(m["shape"], datatype != "BYTES")
		if !ok {
			return nil, newError(InvalidField, f+".shape", -1, "must be an array of non-negative integers up to 2^31-1 (one or two for a tensor)")
		}
		var q string
		if v, present := params["quantization"]; present && v != nil {
			if q, ok = v.(string); !ok {
				return nil, newError(InvalidField, f+".parameters.quantization", -1, "must be a string, got "+jsonKind(v))
			}
		}
		specs[i] = kserveSpec{field: f, size: size, doc: m,
			out: KServeOutput{Name: name, Datatype: datatype, Shape: shape, Parameters: params, Binary: size >= 0, Quantization: q}}
	}
	return specs, nil
}

// kserveBlob reads the output's blob at body[pos:pos+size].
func kserveBlob(out *KServeOutput, f string, body []byte, pos, size int) *Error {
	sizeField := f + ".parameters.binary_data_size"
	if size > len(body)-pos {
		return newError(Truncated, sizeField, len(body), "a blob of "+strconv.Itoa(size)+" bytes at offset "+strconv.Itoa(pos)+" runs past the end of the "+strconv.Itoa(len(body))+"-byte body")
	}
	blob := body[pos : pos+size : pos+size]
	if out.Datatype == "BYTES" {
		for p := 0; p < len(blob); {
			left := len(blob) - p
			if left < 4 {
				return newError(Malformed, f, pos+p, "a BYTES element length needs 4 bytes, "+strconv.Itoa(left)+" left in the tensor")
			}
			n := binary.LittleEndian.Uint32(blob[p:])
			if uint64(n) > uint64(left-4) {
				return newError(Malformed, f, pos+p, "a BYTES element of "+strconv.FormatUint(uint64(n), 10)+" bytes runs past the end of its tensor")
			}
			out.Elements = append(out.Elements, blob[p+4:p+4+int(n):p+4+int(n)])
			p += 4 + int(n)
		}
		if want := shapeCount(out.Shape); uint64(len(out.Elements)) != want {
			return newError(ShapeMismatch, f, -1, strconv.Itoa(len(out.Elements))+" BYTES elements, the shape holds "+strconv.FormatUint(want, 10))
		}
		return nil
	}
	dtype := KServeDTypes[out.Datatype]
	n, d := kserveND(out.Shape)
	want, ok := expectedLen(dtype, uint64(n), uint64(d))
	if !ok || want != size {
		return newError(LengthMismatch, sizeField, pos+min(size, want), "a blob of "+strconv.Itoa(size)+" bytes where the shape of "+out.Datatype+" needs "+strconv.Itoa(want))
	}
	out.Tensor = &Tensor{DType: dtype, N: n, D: d, Data: blob}
	return nil
}

// kserveJSONData reads an output's JSON data, flat or nested, in row-major order.
func kserveJSONData(out *KServeOutput, f string, data any) *Error {
	if _, ok := data.([]any); !ok {
		return newError(InvalidField, f, -1, "must be an array, got "+jsonKind(data))
	}
	values := flattenJSON(data, nil)
	if want := shapeCount(out.Shape); uint64(len(values)) != want {
		return newError(ShapeMismatch, f, -1, strconv.Itoa(len(values))+" elements, the shape holds "+strconv.FormatUint(want, 10))
	}
	if out.Datatype == "BYTES" {
		out.Elements = make([][]byte, len(values))
		for j, v := range values {
			s, ok := v.(string)
			if !ok {
				return newError(InvalidField, f+"["+strconv.Itoa(j)+"]", -1, "must be a string, got "+jsonKind(v))
			}
			out.Elements[j] = []byte(s)
		}
		return nil
	}
	dtype := KServeDTypes[out.Datatype]
	n, d := kserveND(out.Shape)
	dst := make([]byte, len(values)*dtype.ItemSize())
	for j, v := range values {
		jf := f + "[" + strconv.Itoa(j) + "]"
		num, ok := v.(json.Number)
		if !ok {
			return newError(InvalidField, jf, -1, "must be a number, got "+jsonKind(v))
		}
		x, err := strconv.ParseFloat(string(num), 64)
		if err != nil && !isRangeErr(err) {
			return newError(InvalidField, jf, -1, "not a number: "+string(num))
		}
		if e := putNumber(dst, dtype, j, x); e != nil {
			e.Field, e.Message = jf, jf+": "+e.Message
			return e
		}
	}
	out.Tensor = &Tensor{DType: dtype, N: n, D: d, Data: dst}
	return nil
}

func flattenJSON(v any, dst []any) []any {
	list, ok := v.([]any)
	if !ok {
		return append(dst, v)
	}
	for _, x := range list {
		dst = flattenJSON(x, dst)
	}
	return dst
}

// kserveShape checks a shape: non-negative integers, one or two of them for a tensor.
func kserveShape(v any, tensor bool) ([]int, bool) {
	list, ok := v.([]any)
	if !ok || (tensor && len(list) != 1 && len(list) != 2) {
		return nil, false
	}
	shape := make([]int, len(list))
	for i, x := range list {
		if shape[i], ok = jsonCount(x); !ok || tensor && shape[i] > math.MaxInt32 {
			return nil, false // a tensor's entry is at most 2^31-1 (SPEC.md 19.2)
		}
	}
	return shape, true
}

func kserveND(shape []int) (n, d int) {
	if len(shape) == 1 {
		return 1, shape[0]
	}
	return shape[0], shape[1]
}

// shapeCount is the product of a shape, saturated past 2^63.
func shapeCount(shape []int) uint64 {
	c := uint64(1)
	for _, s := range shape {
		if s != 0 && c > (1<<63)/uint64(s) {
			return 1 << 63
		}
		c *= uint64(s)
	}
	return c
}

// jsonCount reads a JSON integer literal from 0 to 2^63-1 (a json.Number without sign, fraction or exponent).
func jsonCount(v any) (int, bool) {
	num, ok := v.(json.Number)
	if !ok || strings.ContainsAny(string(num), ".eE-") {
		return 0, false
	}
	n, err := strconv.ParseInt(string(num), 10, 63)
	return int(n), err == nil
}

// jsonSizeCount reads binary_data_size (SPEC.md 19.3): an integer from 0 to 2^53 - 1, nothing past it
// wrapped or cut; a size past the body is then the blob's truncated.
func jsonSizeCount(v any) (int, bool) {
	num, ok := v.(json.Number)
	if !ok || strings.ContainsAny(string(num), ".eE-") {
		return 0, false
	}
	n, err := strconv.ParseInt(string(num), 10, 64)
	return int(n), err == nil && n < 1<<53
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return "a value"
}
