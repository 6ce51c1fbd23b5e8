package densewire_test

import (
	"errors"
	"math"
	"strconv"
	"testing"

	densewire "github.com/densewire/densewire/go"
)

// The golden cases of quantization.json (SPEC.md section 17.7), run by TestGolden.

// f32s reads hex float32 bits.
func f32s(t testing.TB, items []string) []float32 {
	t.Helper()
	out := make([]float32, len(items))
	for i, h := range items {
		v, err := strconv.ParseUint(h, 16, 32)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = math.Float32frombits(uint32(v))
	}
	return out
}

func checkQuantization(t *testing.T, c *goldenCase) {
	switch c.Operation {
	case "quantize":
		input, err := densewire.NewTensor(densewire.Float32, c.Shape[0], c.Shape[1], itemsLE(t, c.Input))
		if err != nil {
			t.Fatal(err)
		}
		lower, upper := f32s(t, c.Lower), f32s(t, c.Upper)
		for _, tc := range []struct {
			dtype densewire.DType
			want  []string
		}{{densewire.Uint8, c.Uint8}, {densewire.Int8, c.Int8}} {
			got, err := densewire.Quantize(input, lower, upper, tc.dtype)
			if err != nil {
				t.Fatal(err)
			}
			want, _ := densewire.NewTensor(tc.dtype, c.Shape[0], c.Shape[1], itemsLE(t, tc.want))
			sameTensor(t, tc.dtype.String(), got, want)
		}
		// the scalar function agrees
		v, _ := input.Float32()
		for i, x := range v {
			j := i % c.Shape[1]
			if u := densewire.QuantizeValue(x, lower[j], upper[j]); hexByte(u) != c.Uint8[i] {
				t.Fatalf("QuantizeValue item %d: %02x, want %s", i, u, c.Uint8[i])
			}
		}
	case "dequantize":
		codes, err := densewire.NewTensor(mustDType(t, c.DType), c.Shape[0], c.Shape[1], itemsLE(t, c.Codes))
		if err != nil {
			t.Fatal(err)
		}
		lower, upper := f32s(t, c.Lower), f32s(t, c.Upper)
		got, err := densewire.Dequantize(codes, lower, upper)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := densewire.NewTensor(densewire.Float32, c.Shape[0], c.Shape[1], itemsLE(t, c.Output))
		sameTensor(t, "dequantize", got, want)
		offset := uint8(0)
		if codes.DType == densewire.Int8 {
			offset = 128
		}
		for i, b := range codes.Data {
			j := i % c.Shape[1]
			if x := densewire.DequantizeValue(b+offset, lower[j], upper[j]); math.Float32bits(x) != uint32(le(want.Data[4*i:4*i+4])) {
				t.Fatalf("DequantizeValue item %d: %08x", i, math.Float32bits(x))
			}
		}
	case "id":
		lower, upper := f32s(t, c.Lower), f32s(t, c.Upper)
		if id := densewire.QuantizationID(lower, upper); id != c.Quantization {
			t.Fatalf("id %s, want %s", id, c.Quantization)
		}
		q, err := densewire.ParseQuantization([]byte(*c.EncodedText))
		if err != nil {
			t.Fatal(err)
		}
		if q.ID != c.Quantization || q.Dimensions != c.Dimensions || q.Method != densewire.QuantizationMethod {
			t.Fatalf("object %+v", q)
		}
		for j := range lower {
			if math.Float32bits(q.Lower[j]) != math.Float32bits(lower[j]) || math.Float32bits(q.Upper[j]) != math.Float32bits(upper[j]) {
				t.Fatalf("dimension %d: %v..%v", j, q.Lower[j], q.Upper[j])
			}
		}
		// what a server publishes is that text, key for key
		if enc, err := q.MarshalJSON(); err != nil || string(enc) != *c.EncodedText {
			t.Fatalf("MarshalJSON:\n got %s\nwant %s (%v)", enc, *c.EncodedText, err)
		}
	case "binary":
		v := f32s(t, c.Input)
		packed, err := densewire.FromFloat32(v, c.Shape[0], c.Shape[1], densewire.Binary)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := densewire.NewTensor(densewire.Binary, c.Shape[0], c.Shape[1], itemsLE(t, c.Binary))
		sameTensor(t, "binary", packed, want)
		signed, err := densewire.OffsetBinary(packed)
		if err != nil {
			t.Fatal(err)
		}
		for i, s := range signed {
			if strconv.Itoa(int(s)) != c.CohereBinary[i] {
				t.Fatalf("Cohere binary item %d: %d, want %s", i, s, c.CohereBinary[i])
			}
		}
	case "envelope":
		checkValid(t, c)
	default:
		t.Fatalf("unknown operation %q", c.Operation)
	}
}

func hexByte(b uint8) string { return strconv.FormatUint(uint64(b)|0x100, 16)[1:] }

func checkInvalidQuantization(t *testing.T, c *goldenCase) {
	var err error
	switch c.Operation {
	case "quantize":
		input, e := densewire.NewTensor(densewire.Float32, c.Shape[0], c.Shape[1], itemsLE(t, c.Input))
		if e != nil {
			t.Fatal(e)
		}
		_, err = densewire.Quantize(input, f32s(t, c.Lower), f32s(t, c.Upper), densewire.Uint8)
		_, err2 := densewire.Quantize(input, f32s(t, c.Lower), f32s(t, c.Upper), densewire.Int8)
		checkCaseError(t, c, err2)
	case "dequantize":
		codes, e := densewire.NewTensor(mustDType(t, c.DType), c.Shape[0], c.Shape[1], itemsLE(t, c.Codes))
		if e != nil {
			t.Fatal(e)
		}
		_, err = densewire.Dequantize(codes, f32s(t, c.Lower), f32s(t, c.Upper))
	case "id":
		_, err = densewire.ParseQuantization([]byte(*c.InputText))
	case "envelope":
		err = invalidCaseError(t, c)
	default:
		err = errors.New("unknown operation " + c.Operation)
	}
	checkCaseError(t, c, err)
}
