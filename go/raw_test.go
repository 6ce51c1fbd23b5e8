package densewire_test

import (
	"net/http"
	"testing"

	densewire "github.com/densewire/densewire/go"
)

func TestDecodeRawHeaders(t *testing.T) {
	body := []byte{0, 0, 0x80, 0x3f, 0, 0, 0, 0x40}
	tests := []struct {
		name    string
		headers http.Header
		err     densewire.Category
		field   string
	}{
		{"canonical", http.Header{"Densewire-Dtype": {"float32"}, "Densewire-Shape": {"1,2"}}, "", ""},
		{"lower-case names from a raw map", http.Header{"densewire-dtype": {"float32"}, "densewire-shape": {"2,1"}, "densewire-byteorder": {"little"}}, "", ""},
		{"no byteorder header is fine", http.Header{"Densewire-Dtype": {"uint8"}, "Densewire-Shape": {"2,4"}}, "", ""},
		{"missing shape", http.Header{"Densewire-Dtype": {"float32"}}, densewire.InvalidField, "Densewire-Shape"},
		{"shape with space", http.Header{"Densewire-Dtype": {"float32"}, "Densewire-Shape": {"1, 2"}}, densewire.InvalidField, "Densewire-Shape"},
		{"shape with plus", http.Header{"Densewire-Dtype": {"float32"}, "Densewire-Shape": {"+1,2"}}, densewire.InvalidField, "Densewire-Shape"},
		{"shape three numbers", http.Header{"Densewire-Dtype": {"float32"}, "Densewire-Shape": {"1,2,1"}}, densewire.InvalidField, "Densewire-Shape"},
		{"shape overflow", http.Header{"Densewire-Dtype": {"float32"}, "Densewire-Shape": {"99999999999999999999,1"}}, densewire.InvalidField, "Densewire-Shape"},
		{"huge shape", http.Header{"Densewire-Dtype": {"float32"}, "Densewire-Shape": {"4294967296,4294967296"}}, densewire.LengthMismatch, ""},
		{"upper-case dtype", http.Header{"Densewire-Dtype": {"FLOAT32"}, "Densewire-Shape": {"1,2"}}, densewire.UnknownDType, "Densewire-Dtype"},
		{"bad tokens", http.Header{"Densewire-Dtype": {"float32"}, "Densewire-Shape": {"1,2"}, "Densewire-Prompt-Tokens": {"x"}}, densewire.InvalidField, "Densewire-Prompt-Tokens"},
		{"length", http.Header{"Densewire-Dtype": {"float32"}, "Densewire-Shape": {"1,3"}}, densewire.LengthMismatch, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := densewire.DecodeRaw(tt.headers, body)
			checkErr(t, err, tt.err, tt.field)
		})
	}
}

func TestRawRoundTripWithMeta(t *testing.T) {
	tensor, _ := densewire.FromFloat32([]float32{1, 2, 3, 4}, 2, 2, densewire.Float16)
	h := http.Header{}
	meta := &densewire.Meta{Model: "m", PromptTokens: 3, TotalTokens: 4}
	densewire.SetRawHeaders(h, tensor, meta)
	got, gotMeta, err := densewire.DecodeRaw(h, tensor.Data)
	if err != nil {
		t.Fatal(err)
	}
	if got.N != 2 || got.D != 2 || got.DType != densewire.Float16 || *gotMeta != *meta {
		t.Fatalf("%+v %+v", got, gotMeta)
	}
}

// checkErr checks an error's category and field ("" category: no error).
func checkErr(t *testing.T, err error, c densewire.Category, field string) *densewire.Error {
	t.Helper()
	if c == "" {
		if err != nil {
			t.Fatalf("unexpected error %v", err)
		}
		return nil
	}
	e, ok := err.(*densewire.Error)
	if !ok {
		t.Fatalf("got %T %v, want %s", err, err, c)
	}
	if e.Category != c || e.Field != field {
		t.Fatalf("got %s on %q (%v), want %s on %q", e.Category, e.Field, e, c, field)
	}
	return e
}
