package densewire_test

import (
	"bytes"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/tinylib/msgp/msgp"

	densewire "github.com/densewire/densewire/go"
)

func mp(parts ...func([]byte) []byte) []byte {
	var b []byte
	for _, p := range parts {
		b = p(b)
	}
	return b
}

func str(s string) func([]byte) []byte {
	return func(b []byte) []byte { return msgp.AppendString(b, s) }
}
func bin(v []byte) func([]byte) []byte {
	return func(b []byte) []byte { return msgp.AppendBytes(b, v) }
}
func mapN(n uint32) func([]byte) []byte {
	return func(b []byte) []byte { return msgp.AppendMapHeader(b, n) }
}
func arrN(n uint32) func([]byte) []byte {
	return func(b []byte) []byte { return msgp.AppendArrayHeader(b, n) }
}
func raw(h string) func([]byte) []byte {
	return func(b []byte) []byte { x, _ := hex.DecodeString(h); return append(b, x...) }
}
func i64(v int64) func([]byte) []byte { return func(b []byte) []byte { return msgp.AppendInt64(b, v) } }
func f64(v float64) func([]byte) []byte {
	return func(b []byte) []byte { return msgp.AppendFloat64(b, v) }
}
func anyv(v any) func([]byte) []byte {
	return func(b []byte) []byte { b, _ = msgp.AppendIntf(b, v); return b }
}

func TestDecodeMsgpackLenient(t *testing.T) {
	data := []byte{0, 0, 0x80, 0x3f}
	tests := []struct {
		name string
		body []byte
	}{
		{"keys in another order", mp(mapN(3), str("data"), bin(data), str("shape"), arrN(2), i64(1), i64(1), str("dtype"), str("float32"))},
		{"wide integers", mp(mapN(3), str("dtype"), str("float32"), str("shape"), arrN(2), raw("cf0000000000000001"), raw("d200000001"), str("data"), bin(data))},
		{"unknown keys skipped", mp(mapN(5), str("extra"), anyv(map[string]any{"x": []any{1, "y", nil, 2.5}}), str("dtype"), str("float32"),
			str("shape"), arrN(2), i64(1), i64(1), str("data"), bin(data), str("zzz"), f64(1))},
		{"map16 header", mp(raw("de0003"), str("dtype"), str("float32"), str("shape"), arrN(2), i64(1), i64(1), str("data"), bin(data))},
		{"usage with unknown key", mp(mapN(4), str("dtype"), str("float32"), str("shape"), arrN(2), i64(1), i64(1), str("data"), bin(data),
			str("usage"), mapN(3), str("cached"), i64(1), str("prompt_tokens"), i64(2), str("total_tokens"), i64(3))},
		{"usage count 2^53-1", mp(mapN(4), str("dtype"), str("float32"), str("shape"), arrN(2), i64(1), i64(1), str("data"), bin(data),
			str("usage"), mapN(1), str("total_tokens"), raw("cf001fffffffffffff"))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _, err := densewire.DecodeMsgpack(tt.body)
			if err != nil {
				t.Fatal(err)
			}
			if got.N != 1 || got.D != 1 || !bytes.Equal(got.Data, data) {
				t.Fatalf("%+v", got)
			}
		})
	}
}

func TestDecodeMsgpackErrors(t *testing.T) {
	data := []byte{0, 0, 0x80, 0x3f}
	head := func(more ...func([]byte) []byte) []byte {
		return mp(append([]func([]byte) []byte{mapN(3), str("dtype"), str("float32"), str("shape"), arrN(2), i64(1), i64(1)}, more...)...)
	}
	tests := []struct {
		name   string
		body   []byte
		err    densewire.Category
		field  string
		offset int
	}{
		{"empty", nil, densewire.Truncated, "", 0},
		{"bin key", mp(mapN(1), bin([]byte("dtype")), str("float32")), densewire.Malformed, "", 1},
		{"int key", mp(mapN(1), i64(1), str("float32")), densewire.Malformed, "", 1},
		{"negative shape", mp(mapN(3), str("dtype"), str("float32"), str("shape"), arrN(2), i64(-1), i64(1), str("data"), bin(data)), densewire.InvalidField, "shape", -2},
		{"float shape", mp(mapN(3), str("dtype"), str("float32"), str("shape"), arrN(2), f64(1), i64(1), str("data"), bin(data)), densewire.InvalidField, "shape", -2},
		{"shape not array", mp(mapN(3), str("dtype"), str("float32"), str("shape"), i64(1), str("data"), bin(data)), densewire.InvalidField, "shape", -2},
		{"dtype not str", mp(mapN(1), str("dtype"), i64(1)), densewire.InvalidField, "dtype", -2},
		{"missing dtype", mp(mapN(2), str("shape"), arrN(2), i64(1), i64(1), str("data"), bin(data)), densewire.InvalidField, "dtype", -2},
		{"missing shape", mp(mapN(2), str("dtype"), str("float32"), str("data"), bin(data)), densewire.InvalidField, "shape", -2},
		{"model not str", mp(mapN(1), str("model"), i64(1)), densewire.InvalidField, "model", -2},
		{"usage not map", mp(mapN(1), str("usage"), i64(1)), densewire.InvalidField, "usage", -2},
		{"usage tokens negative", mp(mapN(1), str("usage"), mapN(1), str("prompt_tokens"), i64(-5)), densewire.InvalidField, "usage.prompt_tokens", -2},
		{"usage tokens nil", mp(mapN(1), str("usage"), mapN(1), str("total_tokens"), raw("c0")), densewire.InvalidField, "usage.total_tokens", -2},
		{"usage tokens float 2.0", mp(mapN(1), str("usage"), mapN(1), str("total_tokens"), f64(2)), densewire.InvalidField, "usage.total_tokens", -2},
		{"usage tokens 2^53", mp(mapN(1), str("usage"), mapN(1), str("prompt_tokens"), raw("cf0020000000000000")), densewire.InvalidField, "usage.prompt_tokens", -2},
		{"truncated in bin", head(str("data"), raw("c410")), densewire.Truncated, "", -1},
		{"truncated in skipped value", mp(mapN(1), str("x"), raw("dc0005")), densewire.Truncated, "", -1},
		{"invalid prefix in skipped value", mp(mapN(1), str("x"), raw("c1")), densewire.Malformed, "", -2},
		{"trailing", append(head(str("data"), bin(data)), 0), densewire.Malformed, "", -2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := densewire.DecodeMsgpack(tt.body)
			e := checkErr(t, err, tt.err, tt.field)
			switch {
			case tt.offset == -1 && e.Offset != len(tt.body):
				t.Fatalf("truncated offset %d, want %d", e.Offset, len(tt.body))
			case tt.offset >= 0 && e.Offset != tt.offset:
				t.Fatalf("offset %d, want %d", e.Offset, tt.offset)
			}
		})
	}
}

// Sizes around the representation boundaries are written in their smallest form.
func TestEncodeMsgpackSmallestForms(t *testing.T) {
	for _, size := range []int{0, 255, 256, 65535, 65536} {
		tensor, _ := densewire.NewTensor(densewire.Uint8, 1, size, make([]byte, size))
		body := densewire.EncodeMsgpack(tensor, nil)
		i := bytes.Index(body, []byte("\xa4data")) + 5
		want := map[bool]byte{true: 0xc4}[size < 256]
		switch {
		case size >= 65536:
			want = 0xc6
		case size >= 256:
			want = 0xc5
		}
		if body[i] != want {
			t.Errorf("size %d: bin marker %#x, want %#x", size, body[i], want)
		}
		back, _, err := densewire.DecodeMsgpack(body)
		if err != nil || back.D != size {
			t.Errorf("size %d: %v", size, err)
		}
	}
	long := strings.Repeat("m", 40)
	tensor, _ := densewire.NewTensor(densewire.Uint8, 0, 200, nil)
	body := densewire.EncodeMsgpack(tensor, &densewire.Meta{Model: long, PromptTokens: 70000, TotalTokens: 1 << 33})
	for _, want := range []string{"\xd9\x28" + long, "\xcc\xc8", "\xce\x00\x01\x11\x70", "\xcf\x00\x00\x00\x02\x00\x00\x00\x00"} {
		if !bytes.Contains(body, []byte(want)) {
			t.Errorf("body %x lacks %x", body, want)
		}
	}
	_, meta, err := densewire.DecodeMsgpack(body)
	if err != nil || meta.Model != long || meta.PromptTokens != 70000 || meta.TotalTokens != 1<<33 {
		t.Errorf("%+v %v", meta, err)
	}
}

func TestDecodeMsgpackAliasesBody(t *testing.T) {
	tensor, _ := densewire.NewTensor(densewire.Uint8, 1, 3, []byte{1, 2, 3})
	body := densewire.EncodeMsgpack(tensor, nil)
	got, _, _ := densewire.DecodeMsgpack(body)
	body[len(body)-1] = 9
	if got.Data[2] != 9 {
		t.Fatal("data was copied; the decoder reads in place")
	}
}
