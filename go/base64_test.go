package densewire

import (
	stdb64 "encoding/base64"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestDecodeBase64Table(t *testing.T) {
	tests := []struct {
		name   string
		in     string
		n, d   int
		dtype  DType
		err    Category
		offset int
	}{
		{"padded", "AACAPwAAAEA=", 1, 2, Float32, "", 0},
		{"unpadded", "AACAPwAAAEA", 1, 2, Float32, "", 0},
		{"trailing bits ignored", "AACAPwAAAEB=", 1, 2, Float32, "", 0},
		{"two pads", "AQ==", 1, 1, Uint8, "", 0},
		{"two pads unpadded", "AQ", 1, 1, Uint8, "", 0},
		{"empty", "", 0, 3, Float32, "", 0},
		{"empty rows", "", 4, 0, Float32, "", 0},
		{"bad character", "AACA*wAAAEA=", 1, 2, Float32, InvalidBase64, 4},
		{"space", "AACAPwAA AEA=", 1, 2, Float32, InvalidBase64, 8},
		{"crlf", "AACAPwAA\r\nAEA=", 1, 2, Float32, InvalidBase64, 8},
		{"newline with matching length", "AACAPwA\nAAEA", 1, 2, Float32, InvalidBase64, 7},
		{"url alphabet", "AACAP-AAAEA=", 1, 2, Float32, InvalidBase64, 5},
		{"non-ascii", "AACAPé==", 1, 4, Uint8, InvalidBase64, 5},
		{"pad in middle", "AACA=wAAAEA=", 1, 2, Float32, InvalidBase64, 4},
		{"three pads", "AACAPwAAAE===", 1, 2, Float32, InvalidBase64, 10},
		{"pad not multiple of 4", "AACAPwAAAE=", 1, 2, Float32, InvalidBase64, 10},
		{"pad at group start", "AACA====", 1, 3, Uint8, InvalidBase64, 4},
		{"pad after one char", "AACAP===", 1, 3, Uint8, InvalidBase64, 5},
		{"only padding", "==", 0, 0, Uint8, InvalidBase64, 0},
		{"dangling", "AACAPwAAA", 1, 2, Float32, InvalidBase64, 8},
		{"dangling single", "A", 0, 1, Uint8, InvalidBase64, 0},
		{"short", "AACAPwAA", 1, 2, Float32, LengthMismatch, 6},
		{"long", "AACAPwAAAEAAAEBA", 1, 2, Float32, LengthMismatch, 8},
		{"bad char beats length", "AA*A", 1, 2, Float32, InvalidBase64, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DecodeBase64(tt.in, tt.dtype, tt.n, tt.d, LittleEndian)
			if tt.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				want, err := stdb64.RawStdEncoding.DecodeString(strings.TrimRight(tt.in, "="))
				if err != nil {
					t.Fatal(err)
				}
				if string(got.Data) != string(want) {
					t.Fatalf("got %x, want %x", got.Data, want)
				}
				return
			}
			e, ok := err.(*Error)
			if !ok || e.Category != tt.err || e.Offset != tt.offset {
				t.Fatalf("got %v, want %s at %d", err, tt.err, tt.offset)
			}
		})
	}
}

func TestDecodeBase64Arguments(t *testing.T) {
	if _, err := DecodeBase64("", 0, 0, 0, LittleEndian); !isCategory(err, UnknownDType) {
		t.Errorf("dtype 0: %v", err)
	}
	if _, err := DecodeBase64("", Float32, 0, 0, 7); !isCategory(err, InvalidField) {
		t.Errorf("byte order 7: %v", err)
	}
	if _, err := DecodeBase64("", Float32, -1, 0, LittleEndian); !isCategory(err, InvalidField) {
		t.Errorf("negative n: %v", err)
	}
}

func TestBase64ByteOrders(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, dt := range []DType{Float32, Float16, BFloat16, Float64, Int8, Uint8, Binary} {
		for _, n := range []int{0, 1, 3, 5000} { // 5000 rows of 4 items pass the 24 KiB swap chunk
			d := 4
			data := make([]byte, n*dt.RowBytes(d))
			for i := range data {
				data[i] = byte(r.Uint32())
			}
			tensor := &Tensor{DType: dt, N: n, D: d, Data: data}
			for _, order := range []ByteOrder{LittleEndian, BigEndian} {
				s := EncodeBase64(tensor, order)
				wantBytes := append([]byte(nil), data...)
				if order == BigEndian {
					swapBytes(wantBytes, dt.ItemSize())
				}
				if s != stdb64.StdEncoding.EncodeToString(wantBytes) {
					t.Fatalf("%s %s n=%d: encoding differs from the standard library", dt, order, n)
				}
				back, err := DecodeBase64(s, dt, n, d, order)
				if err != nil || string(back.Data) != string(data) {
					t.Fatalf("%s %s n=%d: round trip failed: %v", dt, order, n, err)
				}
				if got := AppendBase64([]byte("x:"), tensor, order); string(got) != "x:"+s {
					t.Fatalf("AppendBase64 lost its prefix")
				}
			}
		}
	}
}

func TestDecodeBase64Aligned(t *testing.T) {
	tensor, err := DecodeBase64("AACAPwAAAEAAAEBA", Float32, 1, 3, LittleEndian)
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := tensor.ViewFloat32(); hostLittleEndian && (!ok || v[0] != 1 || v[1] != 2 || v[2] != 3) {
		t.Fatalf("view: %v %v", v, ok)
	}
}
