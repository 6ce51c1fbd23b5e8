package densewire_test

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	densewire "github.com/densewire/densewire/go"
)

func envelope(rows string, extra string) string {
	return `{"object":"list","data":[` + rows + `],"model":"m"` + extra + `}`
}

func TestDecodeJSONCases(t *testing.T) {
	tests := []struct {
		name   string
		body   string
		err    densewire.Category
		field  string
		offset int
		check  func(t *testing.T, tensor *densewire.Tensor, meta *densewire.Meta)
	}{
		{name: "escaped slash in base64", body: envelope(`{"index":0,"embedding":"AAAAAAAAAAAA\/\/\/\/"}`, ``),
			check: func(t *testing.T, x *densewire.Tensor, _ *densewire.Meta) {
				if x.D != 3 || x.Data[11] != 0xff || x.Data[9] != 0xff || x.Data[8] != 0 {
					t.Fatalf("%+v", x)
				}
			}},
		{name: "escape moves the offset to the unescaped string", body: envelope(`{"index":0,"embedding":"\u0041ACA*wAAAEA="}`, ``),
			err: densewire.InvalidBase64, field: "data[0].embedding", offset: 4},
		{name: "int8 numbers", body: envelope(`{"index":0,"embedding":[-128,127,0.0,3e1]}`, `,"dtype":"int8"`),
			check: func(t *testing.T, x *densewire.Tensor, _ *densewire.Meta) {
				if string(x.Data) != "\x80\x7f\x00\x1e" {
					t.Fatalf("%x", x.Data)
				}
			}},
		{name: "int8 out of range", body: envelope(`{"index":0,"embedding":[1,128]}`, `,"dtype":"int8"`), err: densewire.InvalidField, field: "data[0].embedding[1]"},
		{name: "uint8 fraction", body: envelope(`{"index":0,"embedding":[1.5]}`, `,"dtype":"uint8"`), err: densewire.InvalidField, field: "data[0].embedding[0]"},
		{name: "binary d from first row", body: envelope(`{"index":0,"embedding":[179,240]}`, `,"dtype":"binary"`),
			check: func(t *testing.T, x *densewire.Tensor, _ *densewire.Meta) {
				if x.D != 16 || string(x.Data) != "\xb3\xf0" {
					t.Fatalf("%+v", x)
				}
			}},
		{name: "binary base64 d from first row", body: envelope(`{"index":0,"embedding":"s/A="}`, `,"dtype":"binary"`),
			check: func(t *testing.T, x *densewire.Tensor, _ *densewire.Meta) {
				if x.D != 16 {
					t.Fatalf("%+v", x)
				}
			}},
		{name: "empty data", body: envelope(``, ``), check: func(t *testing.T, x *densewire.Tensor, _ *densewire.Meta) {
			if x.N != 0 || x.D != 0 || x.DType != densewire.Float32 {
				t.Fatalf("%+v", x)
			}
		}},
		{name: "nulls mean absent", body: envelope(`{"index":0,"embedding":[1]}`, `,"dtype":null,"byteorder":null,"dimensions":null,"usage":null`)},
		{name: "big-endian base64 rows", body: envelope(`{"index":0,"embedding":"P4AAAA=="}`, `,"byteorder":"big"`),
			check: func(t *testing.T, x *densewire.Tensor, _ *densewire.Meta) {
				if v, _ := x.Float32(); v[0] != 1 {
					t.Fatalf("%v", v)
				}
			}},
		{name: "huge exponent is infinity", body: envelope(`{"index":0,"embedding":[1e400,-1e400,1e-400]}`, ``),
			check: func(t *testing.T, x *densewire.Tensor, _ *densewire.Meta) {
				v, _ := x.Float32()
				if !math.IsInf(float64(v[0]), 1) || !math.IsInf(float64(v[1]), -1) || v[2] != 0 {
					t.Fatalf("%v", v)
				}
			}},
		{name: "usage count 2^53-1, a missing count 0", body: envelope(`{"index":0,"embedding":[1]}`, `,"usage":{"total_tokens":9007199254740991}`),
			check: func(t *testing.T, _ *densewire.Tensor, m *densewire.Meta) {
				if m.PromptTokens != 0 || m.TotalTokens != 1<<53-1 {
					t.Fatalf("%+v", m)
				}
			}},
		{name: "usage and model", body: envelope(`{"index":0,"embedding":[1]}`, `,"usage":{"prompt_tokens":5,"total_tokens":6,"other":[1]}`),
			check: func(t *testing.T, _ *densewire.Tensor, m *densewire.Meta) {
				if m.Model != "m" || m.PromptTokens != 5 || m.TotalTokens != 6 {
					t.Fatalf("%+v", m)
				}
			}},
		{name: "absurd dimensions do not allocate", body: envelope(`{"index":0,"embedding":[1]},{"index":1,"embedding":"AAAA"}`, `,"dimensions":1000000000000000`),
			err: densewire.ShapeMismatch, field: "data[0].embedding"},
		{name: "absurd dimensions, base64 rows", body: envelope(`{"index":0,"embedding":"AAAA"}`, `,"dimensions":100000000000000`),
			err: densewire.LengthMismatch, field: "data[0].embedding", offset: 3},
		{name: "top-level array", body: `[1,2]`, err: densewire.Malformed, offset: 0},
		{name: "trailing data", body: envelope(``, ``) + ` x`, err: densewire.Malformed, offset: 40},
		{name: "two values", body: `{}{}`, err: densewire.Malformed, offset: 2},
		{name: "NUL byte after the value", body: envelope(``, ``) + "\x00", err: densewire.Malformed, offset: 39}, // found by go test -fuzz
		{name: "infinity token", body: envelope(`{"index":0,"embedding":[Infinity]}`, ``), err: densewire.Malformed, offset: 49},
		{name: "minus infinity token", body: envelope(`{"index":0,"embedding":[-Infinity]}`, ``), err: densewire.Malformed, offset: 50},
		{name: "leading zero", body: envelope(`{"index":0,"embedding":[01]}`, ``), err: densewire.Malformed},
		{name: "control character in string", body: envelope(`{"index":0,"embedding":"AA`+"\x01"+`A"}`, ``), err: densewire.Malformed},
		{name: "deep nesting", body: `{"x":` + strings.Repeat("[", 5000) + strings.Repeat("]", 5000) + `}`, err: densewire.Malformed},
		{name: "string element", body: envelope(`{"index":0,"embedding":[1,"2"]}`, ``), err: densewire.InvalidField, field: "data[0].embedding[1]"},
		{name: "row not object", body: envelope(`[1]`, ``), err: densewire.InvalidField, field: "data[0]"},
		{name: "missing index", body: envelope(`{"embedding":[1]}`, ``), err: densewire.InvalidField, field: "data[0].index"},
		{name: "index not integer", body: envelope(`{"index":"0","embedding":[1]}`, ``), err: densewire.InvalidField, field: "data[0].index"},
		{name: "negative index", body: envelope(`{"index":-1,"embedding":[1]}`, ``), err: densewire.ShapeMismatch, field: "data[0].index"},
		{name: "null embedding", body: envelope(`{"index":0,"embedding":null}`, ``), err: densewire.InvalidField, field: "data[0].embedding"},
		{name: "data not array", body: `{"data":{}}`, err: densewire.InvalidField, field: "data"},
		{name: "dtype not string", body: envelope(`{"index":0,"embedding":[1]}`, `,"dtype":1`), err: densewire.InvalidField, field: "dtype"},
		{name: "dimensions negative", body: envelope(`{"index":0,"embedding":[1]}`, `,"dimensions":-1`), err: densewire.InvalidField, field: "dimensions"},
		{name: "dimensions fraction", body: envelope(`{"index":0,"embedding":[1]}`, `,"dimensions":1.5`), err: densewire.InvalidField, field: "dimensions"},
		{name: "usage tokens string", body: envelope(`{"index":0,"embedding":[1]}`, `,"usage":{"prompt_tokens":"5"}`), err: densewire.InvalidField, field: "usage.prompt_tokens"},
		{name: "usage tokens null", body: envelope(`{"index":0,"embedding":[1]}`, `,"usage":{"total_tokens":null}`), err: densewire.InvalidField, field: "usage.total_tokens"},
		{name: "usage tokens 2^53", body: envelope(`{"index":0,"embedding":[1]}`, `,"usage":{"total_tokens":9007199254740992}`), err: densewire.InvalidField, field: "usage.total_tokens"},
		{name: "model not string", body: `{"data":[],"model":5}`, err: densewire.InvalidField, field: "model"},
		{name: "dangling base64 in first row", body: envelope(`{"index":0,"embedding":"AAAAA"}`, ``), err: densewire.InvalidBase64, field: "data[0].embedding", offset: 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tensor, meta, err := densewire.DecodeJSON([]byte(tt.body))
			e := checkErr(t, err, tt.err, tt.field)
			if e != nil && tt.offset != 0 && e.Offset != tt.offset {
				t.Fatalf("offset %d, want %d (%v)", e.Offset, tt.offset, e)
			}
			if e == nil && tt.check != nil {
				tt.check(t, tensor, meta)
			}
		})
	}
}

// Every finite float16 and bfloat16 value, written as its shortest JSON number, reads back to the
// same bits; the text is valid JSON and the numbers are short.
func TestJSONNumbers16BitExhaustive(t *testing.T) {
	for _, dt := range []densewire.DType{densewire.Float16, densewire.BFloat16} {
		var data []byte
		for h := 0; h < 1<<16; h++ {
			var f float32
			if dt == densewire.Float16 {
				f = densewire.Float16ToFloat32(uint16(h))
			} else {
				f = densewire.BFloat16ToFloat32(uint16(h))
			}
			if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
				continue
			}
			data = binary.LittleEndian.AppendUint16(data, uint16(h))
		}
		n := len(data) / 2
		tensor, _ := densewire.NewTensor(dt, n/64, 64, data[:n/64*128])
		body, err := densewire.EncodeJSON(tensor, nil, densewire.JSONOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !json.Valid(body) {
			t.Fatalf("%s: invalid JSON", dt)
		}
		back, _, err := densewire.DecodeJSON(body)
		if err != nil {
			t.Fatal(err)
		}
		if back.DType != dt || string(back.Data) != string(tensor.Data) {
			t.Fatalf("%s: numbers do not read back to the same bits", dt)
		}
		if dt == densewire.Float16 && !strings.Contains(string(body), "[0.0,6e-08,1e-07,2e-07,2.4e-07,") {
			t.Errorf("float16 numbers are not the shortest: %.80s", body[strings.Index(string(body), "[0"):])
		}
	}
}

func TestJSONNumbersFloat32AndFloat64(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	f32 := make([]float32, 4096)
	f64 := make([]float64, 4096)
	for i := range f32 {
		for {
			f32[i] = math.Float32frombits(r.Uint32())
			f64[i] = math.Float64frombits(r.Uint64())
			if !math.IsNaN(float64(f32[i])) && !math.IsInf(float64(f32[i]), 0) && !math.IsNaN(f64[i]) && !math.IsInf(f64[i], 0) {
				break
			}
		}
	}
	f32[0], f32[1], f32[2] = 0.1, float32(math.Copysign(0, -1)), 3
	a, _ := densewire.FromFloat32(f32, 64, 64, densewire.Float32)
	b, _ := densewire.FromFloat64(f64, 64, 64, densewire.Float64)
	for _, tensor := range []*densewire.Tensor{a, b} {
		body, err := densewire.EncodeJSON(tensor, nil, densewire.JSONOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if tensor.DType == densewire.Float32 && !strings.Contains(string(body), `"embedding":[0.1,-0.0,3.0,`) {
			t.Errorf("float32 numbers: %.120s", body)
		}
		back, _, err := densewire.DecodeJSON(body)
		if err != nil || string(back.Data) != string(tensor.Data) {
			t.Fatalf("%s: round trip: %v", tensor.DType, err)
		}
	}
}

func TestEncodeJSON(t *testing.T) {
	tensor, _ := densewire.FromFloat32([]float32{1, -2.5}, 1, 2, densewire.Float32)
	meta := &densewire.Meta{Model: "a \"quoted\"\nmodel é \x01", PromptTokens: 1, TotalTokens: 2}
	body, err := densewire.EncodeJSON(tensor, meta, densewire.JSONOptions{EncodingFormat: densewire.EncodingBase64, ByteOrder: densewire.BigEndian})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"object":"list","data":[{"object":"embedding","index":0,"embedding":"P4AAAMAgAAA="}],"model":"a \"quoted\"\u000amodel é \u0001","usage":{"prompt_tokens":1,"total_tokens":2},"dtype":"float32","byteorder":"big","dimensions":2}`
	if string(body) != want {
		t.Fatalf("\n got %s\nwant %s", body, want)
	}
	var generic map[string]any
	if err := json.Unmarshal(body, &generic); err != nil || generic["model"] != meta.Model {
		t.Fatalf("encoding/json reads %v (%v)", generic["model"], err)
	}
	_, gotMeta, err := densewire.DecodeJSON(body)
	if err != nil || *gotMeta != *meta {
		t.Fatalf("%+v %v", gotMeta, err)
	}
	if _, err := densewire.EncodeJSON(tensor, nil, densewire.JSONOptions{EncodingFormat: "hex"}); err == nil {
		t.Fatal("unknown encoding format accepted")
	}
	nan, _ := densewire.FromFloat32([]float32{1, 2, 3, float32(math.Inf(1))}, 2, 2, densewire.BFloat16)
	_, err = densewire.EncodeJSON(nan, nil, densewire.JSONOptions{})
	checkErr(t, err, densewire.NonFinite, "data[1].embedding[1]")
	// base64 carries what numbers cannot
	if _, err := densewire.EncodeJSON(nan, nil, densewire.JSONOptions{EncodingFormat: densewire.EncodingBase64}); err != nil {
		t.Fatal(err)
	}
	ints, _ := densewire.NewTensor(densewire.Int8, 1, 3, []byte{0x80, 0x7f, 0})
	body, _ = densewire.EncodeJSON(ints, nil, densewire.JSONOptions{})
	if !strings.Contains(string(body), `"embedding":[-128,127,0]`) {
		t.Fatalf("%s", body)
	}
}
