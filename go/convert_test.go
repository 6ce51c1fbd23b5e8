package densewire

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestFloat16Bits(t *testing.T) {
	tests := []struct {
		name string
		in   float32
		want uint16
	}{
		{"one", 1, 0x3c00},
		{"minus two and a half", -2.5, 0xc100},
		{"zero", 0, 0x0000},
		{"negative zero", float32(math.Copysign(0, -1)), 0x8000},
		{"max", 65504, 0x7bff},
		{"rounds down to max", 65519.99, 0x7bff},
		{"first value to infinity", 65520, 0x7c00},
		{"infinity", float32(math.Inf(1)), 0x7c00},
		{"negative infinity", float32(math.Inf(-1)), 0xfc00},
		{"smallest subnormal", 0x1p-24, 0x0001},
		{"half the smallest subnormal is a tie to zero", 0x1p-25, 0x0000},
		{"just above the tie", math.Nextafter32(0x1p-25, 1), 0x0001},
		{"three halves subnormal ties to even", 0x1.8p-24, 0x0002},
		{"largest subnormal rounds up to smallest normal", 0x1.ffcp-15, 0x0400},
		{"float32 subnormal becomes signed zero", -0x1p-140, 0x8000},
		{"nan", float32(math.NaN()), 0x7e00},
		{"negative payload nan", math.Float32frombits(0xffc00123), 0xfe00},
		{"signalling nan", math.Float32frombits(0x7f800001), 0x7e00},
		{"tie to even down", math.Float32frombits(0x3f801000), 0x3c00},
		{"tie to even up", math.Float32frombits(0x3f803000), 0x3c02},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Float16Bits(tt.in); got != tt.want {
				t.Errorf("Float16Bits(%g) = %#04x, want %#04x", tt.in, got, tt.want)
			}
		})
	}
}

func TestBFloat16Bits(t *testing.T) {
	tests := []struct {
		in   uint32
		want uint16
	}{
		{0x3f800000, 0x3f80},
		{0x3f808000, 0x3f80}, // tie, even
		{0x3f818000, 0x3f82}, // tie, odd rounds up
		{0x3f808001, 0x3f81},
		{0x7f7fffff, 0x7f80}, // overflow rounds to infinity by itself
		{0xff800000, 0xff80},
		{0x00000001, 0x0000}, // subnormals round like any value
		{0x00008000, 0x0000},
		{0x00018000, 0x0002},
		{0x7fc00001, 0x7fc0},
		{0xff800001, 0xffc0},
	}
	for _, tt := range tests {
		if got := BFloat16Bits(math.Float32frombits(tt.in)); got != tt.want {
			t.Errorf("BFloat16Bits(%#08x) = %#04x, want %#04x", tt.in, got, tt.want)
		}
	}
}

// Every float16 widens exactly and narrows back to itself (NaNs to the canonical NaN).
func TestFloat16RoundTripExhaustive(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		f := Float16ToFloat32(uint16(h))
		want := uint16(h)
		if h&0x7c00 == 0x7c00 && h&0x3ff != 0 {
			want = uint16(h)&0x8000 | 0x7e00
			if b := math.Float32bits(f); b&0x7fffffff <= 0x7f800000 || b>>13&0x3ff != uint32(h)&0x3ff {
				t.Fatalf("NaN %#04x widened to %#08x, payload lost", h, b)
			}
		}
		if got := Float16Bits(f); got != want {
			t.Fatalf("float16 %#04x -> %g -> %#04x", h, f, got)
		}
		if got := float64ToFloat16Bits(float64(f)); got != want {
			t.Fatalf("float16 %#04x -> float64 -> %#04x", h, got)
		}
	}
}

func TestBFloat16RoundTripExhaustive(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		f := BFloat16ToFloat32(uint16(h))
		want := uint16(h)
		if h&0x7f80 == 0x7f80 && h&0x7f != 0 {
			want = uint16(h)&0x8000 | 0x7fc0
		}
		if got := BFloat16Bits(f); got != want {
			t.Fatalf("bfloat16 %#04x -> %g -> %#04x", h, f, got)
		}
		if got := float64ToBFloat16Bits(float64(f)); got != want {
			t.Fatalf("bfloat16 %#04x -> float64 -> %#04x", h, got)
		}
	}
}

// The generic rounder, run with float32's parameters, agrees with the hardware's float64 ->
// float32 conversion (normals, subnormals, overflow, ties): the same code rounds to float16 and
// bfloat16.
func TestRoundFloat64MatchesHardware(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	check := func(x float64) {
		if got, want := uint32(roundFloat64(x, 8, 23)), math.Float32bits(float32(x)); got != want {
			t.Fatalf("roundFloat64(%g = %#016x) = %#08x, hardware %#08x", x, math.Float64bits(x), got, want)
		}
	}
	for i := 0; i < 200000; i++ {
		// exponents around float32's range, with ties and near-ties in the low bits
		e := r.IntN(340) - 170
		m := r.Uint64() & (1<<52 - 1)
		switch i % 4 {
		case 1:
			m = m&^(1<<29-1) | 1<<28 // an exact tie at float32 precision
		case 2:
			m |= 1<<29 - 1
		}
		x := math.Float64frombits(uint64(e+1023)<<52 | m)
		if i%2 == 1 {
			x = -x
		}
		check(x)
	}
	for _, x := range []float64{0, math.Copysign(0, -1), math.Inf(1), math.Inf(-1), math.MaxFloat32, 0x1.fffffefffffffp127,
		0x1.ffffffp127, 0x1p-149, 0x1p-150, 0x1.8p-150, 0x1.0000000000001p-150, 5e-324} {
		check(x)
	}
}

// The fast float32 -> float16 path agrees with the generic rounder (one rounding from the exact
// float64 value) over a sweep of all float32 bit patterns and random ones.
func TestFloat16BitsMatchesGeneric(t *testing.T) {
	check := func(b uint32) {
		f := math.Float32frombits(b)
		want := float64ToFloat16Bits(float64(f))
		if got := Float16Bits(f); got != want {
			t.Fatalf("Float16Bits(%#08x) = %#04x, generic %#04x", b, got, want)
		}
	}
	for b := uint64(0); b < 1<<32; b += 4093 {
		check(uint32(b))
	}
	r := rand.New(rand.NewPCG(11, 12))
	for i := 0; i < 1<<20; i++ {
		check(r.Uint32())
		check(0x33000000 + r.Uint32()%0x14800000) // the subnormal..overflow band, densely
	}
}

func TestFloat64ToFloat32(t *testing.T) {
	if got := math.Float32bits(Float64ToFloat32(math.Float64frombits(0xfff8000000000123))); got != 0xffc00000 {
		t.Errorf("negative NaN -> %#08x", got)
	}
	if got := math.Float32bits(Float64ToFloat32(1e300)); got != 0x7f800000 {
		t.Errorf("1e300 -> %#08x", got)
	}
	if got := Float64ToFloat32(0.1); got != float32(0.1) {
		t.Errorf("0.1 -> %g", got)
	}
}

func TestPackBinary(t *testing.T) {
	nan := float32(math.NaN())
	inf := float32(math.Inf(1))
	tests := []struct {
		name string
		v    []float32
		n, d int
		want []byte
	}{
		{"sign threshold", []float32{0.5, -0.5, 0, float32(math.Copysign(0, -1)), nan, inf, -inf, 1e-45, 2, -2}, 1, 10, []byte{0x85, 0x80}},
		{"rows padded", []float32{1, -1, 1, -1, 1, 1}, 2, 3, []byte{0xa0, 0x60}},
		{"exact byte", []float32{1, 1, 1, 1, 1, 1, 1, 1}, 1, 8, []byte{0xff}},
		{"empty rows", nil, 3, 0, []byte{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := PackBinary(tt.v, tt.n, tt.d)
			if string(got) != string(tt.want) {
				t.Errorf("got %x, want %x", got, tt.want)
			}
			tensor, err := FromFloat32(tt.v, tt.n, tt.d, Binary)
			if err != nil || string(tensor.Data) != string(tt.want) {
				t.Errorf("FromFloat32: %x, %v", tensor.Data, err)
			}
			f64 := make([]float64, len(tt.v))
			for i, x := range tt.v {
				f64[i] = float64(x)
			}
			tensor, err = FromFloat64(f64, tt.n, tt.d, Binary)
			if err != nil || string(tensor.Data) != string(tt.want) {
				t.Errorf("FromFloat64: %x, %v", tensor.Data, err)
			}
		})
	}
}

func TestFromFloat32Errors(t *testing.T) {
	if _, err := FromFloat32([]float32{1, 2, 3}, 2, 2, Float32); !isCategory(err, ShapeMismatch) {
		t.Errorf("wrong count: %v", err)
	}
	for _, dt := range []DType{Int8, Uint8, 0, 9} {
		if _, err := FromFloat32([]float32{1}, 1, 1, dt); !isCategory(err, InvalidField) {
			t.Errorf("%s: %v", dt, err)
		}
		if _, err := FromFloat64([]float64{1}, 1, 1, dt); !isCategory(err, InvalidField) {
			t.Errorf("%s: %v", dt, err)
		}
	}
	if _, err := FromRows([][]float32{{1, 2}, {3}}, Float32); !isCategory(err, ShapeMismatch) {
		t.Errorf("ragged rows: %v", err)
	}
}

func TestFromRowsAndBack(t *testing.T) {
	rows := [][]float32{{1, -2.5, 0.1}, {3, 0.5, -1}}
	for _, dt := range []DType{Float32, Float16, BFloat16, Float64} {
		tensor, err := FromRows(rows, dt)
		if err != nil {
			t.Fatal(err)
		}
		got, err := tensor.Float32()
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range got {
			w := rows[i/3][i%3]
			switch dt {
			case Float16:
				w = Float16ToFloat32(Float16Bits(w))
			case BFloat16:
				w = BFloat16ToFloat32(BFloat16Bits(w))
			}
			if v != w {
				t.Errorf("%s item %d: %g, want %g", dt, i, v, w)
			}
		}
	}
}

func isCategory(err error, c Category) bool {
	e, ok := err.(*Error)
	return ok && e.Category == c
}
