package densewire

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math"
	"strconv"
)

// Quantized embeddings (SPEC.md section 17): int8 and uint8 tensors a server produces with
// per-dimension ranges calibrated on a fixed set of texts and published as a quantization object
// under an id. Every computation is in IEEE binary64 from the float32 ranges widened exactly.

// QuantizationMethod is the method of the quantization objects densewire servers publish.
const QuantizationMethod = "minmax-per-dimension"

// Quantization is a server's published quantization object (GET /v1/quantization/{id}, and the
// "quantization" of each GET /v1/models item): the per-dimension ranges Lower and Upper (d values
// each) and what they were calibrated on.
type Quantization struct {
	ID          string
	Model       string // informative: the model the server calibrated
	Method      string
	Calibration QuantizationCalibration
	Dimensions  int
	Lower       []float32
	Upper       []float32
}

// QuantizationCalibration names the calibration set of a Quantization.
type QuantizationCalibration struct {
	Name   string `json:"name"`
	Texts  int    `json:"texts"`
	SHA256 string `json:"sha256"`
}

type wireQuantization struct {
	Object      string                  `json:"object"`
	ID          string                  `json:"id"`
	Model       string                  `json:"model,omitempty"`
	Method      string                  `json:"method"`
	Calibration QuantizationCalibration `json:"calibration"`
	Dimensions  int                     `json:"dimensions"`
	Lower       string                  `json:"lower"`
	Upper       string                  `json:"upper"`
}

// ParseQuantization reads a published quantization object (SPEC.md section 17.6) and checks it in
// the spec's order: id (a string), method (QuantizationMethod), dimensions (an integer >= 0), lower
// and upper (strings) present and of those types, else InvalidField naming the first bad key; lower
// then upper the Base64 of dimensions little-endian float32 values (InvalidBase64 or LengthMismatch
// on that key); the ranges valid (as Dequantize checks them); id the QuantizationID of the ranges
// (InvalidField on "id"). object, model and calibration are informative; unknown keys are ignored.
func ParseQuantization(body []byte) (*Quantization, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil || raw == nil {
		e := &Error{Category: Malformed, Offset: 0, Message: "the quantization object is not a JSON object", Err: err}
		var syn *json.SyntaxError
		if errors.As(err, &syn) {
			e.Offset = int(syn.Offset)
		}
		return nil, e
	}
	str := func(key string) (string, *Error) {
		var v string
		if r, ok := raw[key]; !ok || json.Unmarshal(r, &v) != nil || bytes.Equal(bytes.TrimSpace(r), []byte("null")) {
			return "", newError(InvalidField, key, -1, "the quantization object's "+key+" is missing or not a string")
		}
		return v, nil
	}
	q := &Quantization{}
	var err *Error
	if q.ID, err = str("id"); err != nil {
		return nil, err
	}
	if q.Method, err = str("method"); err != nil {
		return nil, err
	}
	if q.Method != QuantizationMethod {
		return nil, newError(InvalidField, "method", -1, "quantization method "+strconv.Quote(q.Method)+
			" cannot be dequantized by the rule of "+QuantizationMethod)
	}
	dims, ok := raw["dimensions"]
	d, perr := strconv.ParseInt(string(bytes.TrimSpace(dims)), 10, 64)
	if !ok || perr != nil || d < 0 || d > maxDim/4 {
		return nil, newError(InvalidField, "dimensions", -1, "the quantization object's dimensions is missing or not an integer >= 0")
	}
	q.Dimensions = int(d)
	var lower, upper string
	if lower, err = str("lower"); err != nil {
		return nil, err
	}
	if upper, err = str("upper"); err != nil {
		return nil, err
	}
	if c, ok := raw["calibration"]; ok {
		_ = json.Unmarshal(c, &q.Calibration) // informative
	}
	if m, ok := raw["model"]; ok {
		_ = json.Unmarshal(m, &q.Model)
	}
	if q.Lower, err = quantizationRange(lower, "lower", q.Dimensions); err != nil {
		return nil, err
	}
	if q.Upper, err = quantizationRange(upper, "upper", q.Dimensions); err != nil {
		return nil, err
	}
	if err := checkRanges(q.Lower, q.Upper, q.Dimensions); err != nil {
		return nil, err
	}
	if id := QuantizationID(q.Lower, q.Upper); id != q.ID {
		return nil, newError(InvalidField, "id", -1, "the quantization object's id "+strconv.Quote(q.ID)+
			" is not the id of its ranges ("+id+")")
	}
	return q, nil
}

func quantizationRange(s, key string, d int) ([]float32, *Error) {
	t, err := DecodeBase64(s, Float32, 1, d, LittleEndian)
	if err != nil {
		return nil, withField(err.(*Error), key)
	}
	v := make([]float32, d)
	float32sFromLE(v, t.Data)
	return v, nil
}

// checkRanges checks lower and upper for a tensor of d dimensions (SPEC.md sections 17.2 and
// 17.3): d values each (ShapeMismatch), every value finite and lower[j] <= upper[j] (InvalidField
// on lower[j] or upper[j], j the first bad dimension).
func checkRanges(lower, upper []float32, d int) *Error {
	if len(lower) != d || len(upper) != d {
		field := "lower"
		if len(lower) == d {
			field = "upper"
		}
		return newError(ShapeMismatch, field, -1, "the ranges have "+strconv.Itoa(len(lower))+" and "+
			strconv.Itoa(len(upper))+" values for "+strconv.Itoa(d)+" dimensions")
	}
	for j := range d {
		lo, hi := float64(lower[j]), float64(upper[j])
		at := "[" + strconv.Itoa(j) + "]"
		switch {
		case math.IsNaN(lo) || math.IsInf(lo, 0):
			return newError(InvalidField, "lower"+at, -1, "lower"+at+" is "+strconv.FormatFloat(lo, 'g', -1, 32)+", not a finite value")
		case math.IsNaN(hi) || math.IsInf(hi, 0):
			return newError(InvalidField, "upper"+at, -1, "upper"+at+" is "+strconv.FormatFloat(hi, 'g', -1, 32)+", not a finite value")
		case hi < lo:
			return newError(InvalidField, "upper"+at, -1, "upper"+at+" "+strconv.FormatFloat(hi, 'g', -1, 32)+
				" is below lower"+at+" "+strconv.FormatFloat(lo, 'g', -1, 32))
		}
	}
	return nil
}

// QuantizationID is the id of a pair of ranges: the first 16 hex digits of the SHA-256 of the
// lower values (little-endian float32), the upper values, and d in decimal.
func QuantizationID(lower, upper []float32) string {
	h := sha256.New()
	var b [4]byte
	for _, v := range lower {
		binary.LittleEndian.PutUint32(b[:], math.Float32bits(v))
		h.Write(b[:])
	}
	for _, v := range upper {
		binary.LittleEndian.PutUint32(b[:], math.Float32bits(v))
		h.Write(b[:])
	}
	h.Write([]byte(strconv.Itoa(len(lower))))
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// MarshalJSON writes the quantization object as servers publish it (SPEC.md section 17.6: keys in
// its order, Base64 ranges).
func (q *Quantization) MarshalJSON() ([]byte, error) {
	enc := func(v []float32) string { return base64.StdEncoding.EncodeToString(Float32Bytes(v)) }
	return json.Marshal(wireQuantization{Object: "quantization", ID: q.ID, Model: q.Model, Method: q.Method,
		Calibration: q.Calibration, Dimensions: q.Dimensions, Lower: enc(q.Lower), Upper: enc(q.Upper)})
}

// quantStep is step[j] = (upper[j] - lower[j]) / 255 in binary64.
func quantStep(lo, hi float32) float64 {
	return (float64(hi) - float64(lo)) / 255
}

// QuantizeValue is the code u in 0..255 of one value x for the range [lower, upper] (SPEC.md
// section 17): floor((x - lower) / step) clamped to 0..255, with step = (upper - lower) / 255 in
// binary64; NaN gives 0, and when step is 0, 0 for x <= lower and 255 above.
func QuantizeValue(x, lower, upper float32) uint8 {
	return quantize64(float64(x), lower, upper)
}

func quantize64(xv float64, lower, upper float32) uint8 {
	lo := float64(lower)
	if xv != xv {
		return 0
	}
	step := quantStep(lower, upper)
	if step == 0 {
		if xv > lo {
			return 255
		}
		return 0
	}
	u := math.Floor((xv - lo) / step)
	switch {
	case u <= 0:
		return 0
	case u >= 255:
		return 255
	}
	return uint8(u)
}

// DequantizeValue is float32(lower + (u + 0.5) * step) computed in binary64 and rounded to
// float32 to nearest even, or lower when step is 0 (SPEC.md section 17).
func DequantizeValue(u uint8, lower, upper float32) float32 {
	step := quantStep(lower, upper)
	if step == 0 {
		return lower
	}
	// the explicit conversion keeps the compiler from fusing the multiply and add into one FMA
	return float32(float64(lower) + float64((float64(u)+0.5)*step))
}

// Quantize quantizes a float tensor (float32, float16, bfloat16 or float64, each value widened to
// binary64 exactly) into an int8 or uint8 tensor with the ranges lower and upper (d values each):
// the uint8 item is the code u of QuantizeValue, the int8 item u - 128.
func Quantize(t *Tensor, lower, upper []float32, dtype DType) (*Tensor, error) {
	if dtype != Int8 && dtype != Uint8 {
		return nil, newError(InvalidField, "dtype", -1, "quantization produces int8 or uint8, not "+dtype.String())
	}
	if err := checkTensorData(t); err != nil {
		return nil, err
	}
	if t.DType == Int8 || t.DType == Uint8 || t.DType == Binary {
		return nil, newError(InvalidField, "dtype", -1, "quantization reads float values, not "+t.DType.String())
	}
	if err := checkRanges(lower, upper, t.D); err != nil {
		return nil, err
	}
	v, err := t.Float64()
	if err != nil {
		return nil, err
	}
	d := t.D
	var offset uint8
	if dtype == Int8 {
		offset = 128
	}
	out := make([]byte, len(v))
	for i := range t.N {
		for j, x := range v[i*d : (i+1)*d] {
			out[i*d+j] = quantize64(x, lower[j], upper[j]) - offset
		}
	}
	return &Tensor{DType: dtype, N: t.N, D: d, Data: out}, nil
}

// Dequantize turns an int8 or uint8 tensor of codes back into float32 values with the ranges
// lower and upper (d values each): x' = float32(lower[j] + (u + 0.5) * step[j]), u the uint8 item
// or the int8 item + 128 (SPEC.md section 17).
func Dequantize(codes *Tensor, lower, upper []float32) (*Tensor, error) {
	if codes.DType != Int8 && codes.DType != Uint8 {
		return nil, newError(InvalidField, "dtype", -1, "only int8 and uint8 tensors are dequantized, not "+codes.DType.String())
	}
	if err := checkTensorData(codes); err != nil {
		return nil, err
	}
	if err := checkRanges(lower, upper, codes.D); err != nil {
		return nil, err
	}
	d := codes.D
	steps := make([]float64, d)
	for j := range d {
		steps[j] = quantStep(lower[j], upper[j])
	}
	var offset uint8
	if codes.DType == Int8 {
		offset = 128
	}
	out := make([]float32, codes.N*d)
	for i := range codes.N {
		row, dst := codes.Data[i*d:(i+1)*d], out[i*d:(i+1)*d]
		for j, c := range row {
			if steps[j] == 0 {
				dst[j] = lower[j]
				continue
			}
			// the explicit conversion keeps the compiler from fusing the multiply and add (FMA)
			dst[j] = float32(float64(lower[j]) + float64((float64(c+offset)+0.5)*steps[j]))
		}
	}
	return &Tensor{DType: Float32, N: codes.N, D: d, Data: Float32Bytes(out)}, nil
}

// OffsetBinary returns the packed bytes of a Binary tensor as Cohere's and sentence-transformers'
// "binary" embedding type reads them: each byte as a signed int8, byte - 128 (offset binary;
// their "ubinary" is the bytes as they are). SPEC.md section 17.1. The result has N rows of
// ceil(D/8) values.
func OffsetBinary(t *Tensor) ([]int8, error) {
	if t.DType != Binary {
		return nil, newError(InvalidField, "dtype", -1, "offset binary is read from binary tensors, not "+t.DType.String())
	}
	if err := checkTensorData(t); err != nil {
		return nil, err
	}
	out := make([]int8, len(t.Data))
	for i, b := range t.Data {
		out[i] = int8(b - 128)
	}
	return out, nil
}

// Dequantize dequantizes codes with q's ranges (see the function Dequantize); the codes must
// have q.Dimensions columns.
func (q *Quantization) Dequantize(codes *Tensor) (*Tensor, error) {
	return Dequantize(codes, q.Lower, q.Upper)
}
