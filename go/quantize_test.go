package densewire_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	densewire "github.com/densewire/densewire/go"
)

// Quantized embeddings (SPEC.md section 17): unit tests beside the golden cases of
// quantization.json.

func ranges(d int, seed uint64) (lower, upper []float32) {
	rng := rand.New(rand.NewPCG(seed, 2))
	lower, upper = make([]float32, d), make([]float32, d)
	for j := range d {
		a, b := rng.Float32()*2-1, rng.Float32()*2-1
		lower[j], upper[j] = min(a, b), max(a, b)
	}
	return lower, upper
}

// A dequantized code is the middle of its interval: it quantizes back to the same code, and int8
// codes are the uint8 ones less 128, in both directions.
func TestQuantizeDequantizeRoundTrip(t *testing.T) {
	const n, d = 50, 33
	lower, upper := ranges(d, 1)
	src := randomVectors(t, n, d, 3)
	u8, err := densewire.Quantize(src, lower, upper, densewire.Uint8)
	if err != nil {
		t.Fatal(err)
	}
	i8, err := densewire.Quantize(src, lower, upper, densewire.Int8)
	if err != nil {
		t.Fatal(err)
	}
	for i := range u8.Data {
		if i8.Data[i] != u8.Data[i]-128 {
			t.Fatalf("item %d: int8 %d, uint8 %d", i, int8(i8.Data[i]), u8.Data[i])
		}
	}
	back8, err := densewire.Dequantize(u8, lower, upper)
	if err != nil {
		t.Fatal(err)
	}
	backI, err := densewire.Dequantize(i8, lower, upper)
	if err != nil {
		t.Fatal(err)
	}
	sameTensor(t, "int8 and uint8 dequantize alike", backI, back8)
	again, err := densewire.Quantize(back8, lower, upper, densewire.Uint8)
	if err != nil {
		t.Fatal(err)
	}
	sameTensor(t, "requantized", again, u8)
	// and the error is at most half a step (plus float32 rounding) inside the ranges
	v, _ := src.Float32()
	w, _ := back8.Float32()
	for i, x := range v {
		j := i % d
		lo, hi := float64(lower[j]), float64(upper[j])
		if float64(x) < lo || float64(x) > hi {
			continue
		}
		if diff := math.Abs(float64(x) - float64(w[i])); diff > (hi-lo)/255/2+1e-6 {
			t.Fatalf("item %d: %v dequantized to %v", i, x, w[i])
		}
	}
}

func TestQuantizeValueEdges(t *testing.T) {
	nan := float32(math.NaN())
	inf := float32(math.Inf(1))
	for _, tc := range []struct {
		x, lo, hi float32
		want      uint8
	}{
		{0, -1, 1, 127},       // (0 + 1) / (2/255) = 127.5
		{-1, -1, 1, 0},        // x == lower
		{1, -1, 1, 255},       // x == upper: 255 exactly, clamped
		{-2, -1, 1, 0},        // below
		{2, -1, 1, 255},       // above
		{nan, -1, 1, 0},       // NaN
		{inf, -1, 1, 255},     // +Inf
		{-inf, -1, 1, 0},      // -Inf
		{0.5, 0.5, 0.5, 0},    // step 0, x == lower
		{0.75, 0.5, 0.5, 255}, // step 0, x above
		{nan, 0.5, 0.5, 0},    // step 0, NaN
		{float32(math.Copysign(0, -1)), -1, 1, 127},
	} {
		if got := densewire.QuantizeValue(tc.x, tc.lo, tc.hi); got != tc.want {
			t.Errorf("QuantizeValue(%v, %v, %v) = %d, want %d", tc.x, tc.lo, tc.hi, got, tc.want)
		}
	}
	if got := densewire.DequantizeValue(200, 0.5, 0.5); got != 0.5 {
		t.Errorf("step 0 dequantizes to %v", got)
	}
	if got := densewire.DequantizeValue(0, 0, 255); got != 0.5 {
		t.Errorf("code 0 of [0, 255] dequantizes to %v", got)
	}
}

func TestQuantizeErrors(t *testing.T) {
	src := randomVectors(t, 2, 3, 4)
	lower, upper := ranges(3, 5)
	for _, tc := range []struct {
		name  string
		err   error
		cat   densewire.Category
		field string
	}{
		{"binary output", second(densewire.Quantize(src, lower, upper, densewire.Binary)), densewire.InvalidField, "dtype"},
		{"short lower", second(densewire.Quantize(src, lower[:2], upper, densewire.Int8)), densewire.ShapeMismatch, "lower"},
		{"short upper", second(densewire.Dequantize(&densewire.Tensor{DType: densewire.Int8, N: 1, D: 3, Data: make([]byte, 3)}, lower, upper[:1])), densewire.ShapeMismatch, "upper"},
		{"float codes", second(densewire.Dequantize(src, lower, upper)), densewire.InvalidField, "dtype"},
		{"inverted", second(densewire.Quantize(src, []float32{0, 1, 0}, []float32{1, 0, 1}, densewire.Uint8)), densewire.InvalidField, "upper[1]"},
		{"nan lower", second(densewire.Quantize(src, []float32{0, 0, float32(math.NaN())}, []float32{1, 1, 1}, densewire.Uint8)), densewire.InvalidField, "lower[2]"},
	} {
		var e *densewire.Error
		if !errors.As(tc.err, &e) || e.Category != tc.cat || e.Field != tc.field {
			t.Errorf("%s: %v, want %s on %q", tc.name, tc.err, tc.cat, tc.field)
		}
	}
}

func second[T any](_ T, err error) error { return err }

func TestQuantizationObjectRoundTrip(t *testing.T) {
	lower, upper := ranges(5, 6)
	q := &densewire.Quantization{ID: densewire.QuantizationID(lower, upper), Model: "m", Method: densewire.QuantizationMethod,
		Calibration: densewire.QuantizationCalibration{Name: "python-docs-v1", Texts: 1000, SHA256: strings.Repeat("ab", 32)},
		Dimensions:  5, Lower: lower, Upper: upper}
	body, err := json.Marshal(q)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(body), `{"object":"quantization","id":"`+q.ID+`","model":"m","method":"minmax-per-dimension","calibration":{`) {
		t.Fatalf("keys out of the spec's order: %s", body)
	}
	back, err := densewire.ParseQuantization(body)
	if err != nil {
		t.Fatal(err)
	}
	if back.ID != q.ID || back.Model != "m" || back.Calibration != q.Calibration || back.Dimensions != 5 {
		t.Fatalf("%+v", back)
	}
	for j := range 5 {
		if math.Float32bits(back.Lower[j]) != math.Float32bits(lower[j]) || math.Float32bits(back.Upper[j]) != math.Float32bits(upper[j]) {
			t.Fatalf("dimension %d: %v..%v", j, back.Lower[j], back.Upper[j])
		}
	}
	for _, tc := range []struct{ body, field string }{
		{`{"method":"minmax-per-dimension"}`, "id"},
		{`{"id":"x","method":"other"}`, "method"},
		{`{"id":"x","method":"minmax-per-dimension","dimensions":-1}`, "dimensions"},
		{`{"id":"x","method":"minmax-per-dimension","dimensions":1.5}`, "dimensions"},
		{`{"id":"x","method":"minmax-per-dimension","dimensions":0,"lower":""}`, "upper"},
		{`{"id":null,"method":"minmax-per-dimension"}`, "id"},
	} {
		_, err := densewire.ParseQuantization([]byte(tc.body))
		var e *densewire.Error
		if !errors.As(err, &e) || e.Category != densewire.InvalidField || e.Field != tc.field {
			t.Errorf("%s: %v, want invalid_field on %s", tc.body, err, tc.field)
		}
	}
	if _, err := densewire.ParseQuantization([]byte(`[1]`)); !errors.Is(err, densewire.Malformed) {
		t.Errorf("an array: %v", err)
	}
}

// quantServer answers /v1/embeddings with int8 codes (or uint8 for the second model) and the
// quantization id of its ranges, and /v1/quantization/{id} with the object, counting its fetches.
type quantServer struct {
	q       *densewire.Quantization
	fetches atomic.Int32
	id      func(batch int) string // the id each answer names
	calls   atomic.Int32
}

func newQuantServer(t *testing.T, d int, seed uint64) (*quantServer, *httptest.Server) {
	lower, upper := ranges(d, seed)
	s := &quantServer{q: &densewire.Quantization{ID: densewire.QuantizationID(lower, upper), Method: densewire.QuantizationMethod,
		Dimensions: d, Lower: lower, Upper: upper}}
	s.id = func(int) string { return s.q.ID }
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if id, ok := strings.CutPrefix(r.URL.Path, "/v1/quantization/"); ok {
			if id != s.q.ID {
				densewire.WriteError(w, &densewire.Error{Category: densewire.NotFound, Field: "id", Offset: -1, Message: "unknown id"})
				return
			}
			s.fetches.Add(1)
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(s.q)
			return
		}
		var req struct {
			Input []string `json:"input"`
			DType string   `json:"dtype"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		call := int(s.calls.Add(1)) - 1
		dtype, _ := densewire.ParseDType(req.DType)
		codes := make([]byte, len(req.Input)*d)
		for i := range codes {
			codes[i] = byte(i * 37)
		}
		tensor, _ := densewire.NewTensor(dtype, len(req.Input), d, codes)
		densewire.WriteTensor(w, r, tensor, &densewire.Meta{Model: "m", Quantization: s.id(call)}, nil)
	}))
	t.Cleanup(srv.Close)
	return s, srv
}

func TestClientDequantizes(t *testing.T) {
	s, srv := newQuantServer(t, 6, 7)
	for _, format := range []densewire.Format{densewire.FormatRaw, densewire.FormatMsgpack, densewire.FormatProtobuf, densewire.FormatJSON} {
		client := &densewire.Client{BaseURL: srv.URL, Formats: []densewire.Format{format}, BatchSize: 2}
		for _, dtype := range []densewire.DType{densewire.Int8, densewire.Uint8} {
			codes, meta, err := client.Embed(context.Background(), &densewire.EmbeddingsRequest{Input: []string{"a", "b", "c"}, DType: dtype})
			if err != nil {
				t.Fatal(err)
			}
			if codes.DType != dtype || meta.Quantization != s.q.ID {
				t.Fatalf("%s: %s answer, quantization %q", format, codes.DType, meta.Quantization)
			}
			got, meta, err := client.Embed(context.Background(), &densewire.EmbeddingsRequest{Input: []string{"a", "b", "c"}, DType: dtype, Dequantize: true})
			if err != nil {
				t.Fatal(err)
			}
			want, err := densewire.Dequantize(codes, s.q.Lower, s.q.Upper)
			if err != nil {
				t.Fatal(err)
			}
			sameTensor(t, format.String(), got, want)
			if meta.Quantization != s.q.ID {
				t.Fatalf("meta %+v", meta)
			}
		}
	}
	if n := s.fetches.Load(); n != 1 { // one fetch for every request, batch and format: cached by id
		t.Fatalf("the quantization object was fetched %d times", n)
	}
}

func TestClientDequantizeErrors(t *testing.T) {
	s, srv := newQuantServer(t, 4, 8)
	client := &densewire.Client{BaseURL: srv.URL, BatchSize: 1, Concurrency: 1}
	ctx := context.Background()
	check := func(what string, err error, cat densewire.Category, field string) {
		t.Helper()
		var e *densewire.Error
		if !errors.As(err, &e) || e.Category != cat || e.Field != field {
			t.Errorf("%s: %v, want %s on %q", what, err, cat, field)
		}
	}
	_, _, err := client.Embed(ctx, &densewire.EmbeddingsRequest{Input: []string{"a"}, Dequantize: true})
	check("Dequantize of float32", err, densewire.InvalidField, "dtype")

	s.id = func(int) string { return "" }
	_, _, err = client.Embed(ctx, &densewire.EmbeddingsRequest{Input: []string{"a"}, DType: densewire.Int8, Dequantize: true})
	check("no id", err, densewire.InvalidField, "quantization")

	s.id = func(int) string { return "0123456789abcdef" }
	_, _, err = client.Embed(ctx, &densewire.EmbeddingsRequest{Input: []string{"a"}, DType: densewire.Int8, Dequantize: true})
	check("unknown id", err, densewire.NotFound, "id")

	s.id = func(call int) string { // batches quantized with different ranges cannot be one tensor
		if call%2 == 0 {
			return s.q.ID
		}
		return "fedcba9876543210"
	}
	_, _, err = client.Embed(ctx, &densewire.EmbeddingsRequest{Input: []string{"a", "b"}, DType: densewire.Int8})
	check("batches differ", err, densewire.InvalidField, "quantization")
}

// Against the real server (scripts/test.sh starts one and sets DENSEWIRE_SERVER_URL): its int8 and
// uint8 answers are exactly our Quantize of its float32 answer with the ranges it publishes, and
// Dequantize: true gives their dequantized values.
func TestLiveQuantized(t *testing.T) {
	base := os.Getenv("DENSEWIRE_SERVER_URL")
	if base == "" {
		t.Skip("DENSEWIRE_SERVER_URL is not set (scripts/test.sh sets it): the live quantization test needs a running densewire serve")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	client := &densewire.Client{BaseURL: base, APIKey: os.Getenv("DENSEWIRE_API_KEY"), BatchSize: 3}
	input := []string{"the first text", "a second one", "quantized embeddings", "one byte per dimension", "and a fifth"}
	floats, _, err := client.Embed(ctx, &densewire.EmbeddingsRequest{Input: input})
	if err != nil {
		t.Fatal(err)
	}
	for _, dtype := range []densewire.DType{densewire.Int8, densewire.Uint8} {
		for _, format := range []densewire.Format{densewire.FormatRaw, densewire.FormatMsgpack, densewire.FormatProtobuf, densewire.FormatJSON} {
			client.Formats = []densewire.Format{format}
			codes, meta, err := client.Embed(ctx, &densewire.EmbeddingsRequest{Input: input, DType: dtype})
			if err != nil {
				t.Fatalf("%s %s: %v", dtype, format, err)
			}
			if codes.DType != dtype || meta.Quantization == "" {
				t.Fatalf("%s %s: a %s answer with quantization %q", dtype, format, codes.DType, meta.Quantization)
			}
			q, err := client.Quantization(ctx, meta.Quantization)
			if err != nil {
				t.Fatal(err)
			}
			want, err := densewire.Quantize(floats, q.Lower, q.Upper, dtype)
			if err != nil {
				t.Fatal(err)
			}
			sameTensor(t, dtype.String()+" "+format.String(), codes, want)
			got, _, err := client.Embed(ctx, &densewire.EmbeddingsRequest{Input: input, DType: dtype, Dequantize: true})
			if err != nil {
				t.Fatal(err)
			}
			back, _ := densewire.Dequantize(codes, q.Lower, q.Upper)
			sameTensor(t, "dequantized", got, back)
		}
	}
}
