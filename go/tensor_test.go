package densewire

import (
	"encoding/binary"
	"errors"
	"math"
	"testing"
)

func TestViewFloat32(t *testing.T) {
	if !hostLittleEndian {
		t.Skip("zero-copy views exist only on little-endian hosts") // the copy path is tested below
	}
	buf := make([]float32, 5)
	b := Float32Bytes(buf)
	b[4], b[5], b[6], b[7] = 0, 0, 0x80, 0x3f // item 1 = 1.0
	v, ok := ViewFloat32(b)
	if !ok || len(v) != 5 || v[1] != 1 {
		t.Fatalf("aligned view: %v %v", v, ok)
	}
	v[2] = 2 // shares memory
	if buf[2] != 2 {
		t.Fatal("the view does not alias the bytes")
	}
	if _, ok := ViewFloat32(b[1:13]); ok {
		t.Fatal("a misaligned slice must not be viewed")
	}
	if _, ok := ViewFloat32(b[:6]); ok {
		t.Fatal("a length that is not a multiple of 4 must not be viewed")
	}
	if v, ok := ViewFloat32(nil); !ok || len(v) != 0 {
		t.Fatal("an empty slice views as empty")
	}
	if _, ok := ViewFloat64(b[4:20]); ok {
		t.Fatal("a float64 view needs 8-byte alignment")
	}
	if v, ok := ViewFloat64(Float32Bytes(buf)[:16]); !ok || len(v) != 2 {
		t.Fatal("aligned float64 view")
	}
}

func TestTensorFloat32AllDTypes(t *testing.T) {
	le := binary.LittleEndian
	tests := []struct {
		dtype DType
		data  []byte
		want  []float32
	}{
		{Float32, le.AppendUint32(le.AppendUint32(nil, math.Float32bits(1.5)), 0x80000000), []float32{1.5, float32(math.Copysign(0, -1))}},
		{Float16, []byte{0x00, 0x3c, 0x01, 0x00}, []float32{1, 0x1p-24}},
		{BFloat16, []byte{0x80, 0x3f, 0x20, 0xc0}, []float32{1, -2.5}},
		{Float64, le.AppendUint64(le.AppendUint64(nil, math.Float64bits(0.1)), math.Float64bits(1e300)), []float32{0.1, float32(math.Inf(1))}},
		{Int8, []byte{0x80, 0x7f}, []float32{-128, 127}},
		{Uint8, []byte{0xff, 0x00}, []float32{255, 0}},
	}
	for _, tt := range tests {
		tensor, err := NewTensor(tt.dtype, 1, 2, tt.data)
		if err != nil {
			t.Fatal(err)
		}
		got, err := tensor.Float32()
		if err != nil {
			t.Fatal(err)
		}
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(tt.want[i]) {
				t.Errorf("%s item %d: %g, want %g", tt.dtype, i, got[i], tt.want[i])
			}
		}
		f64, err := tensor.Float64()
		if err != nil || len(f64) != 2 {
			t.Errorf("%s Float64: %v %v", tt.dtype, f64, err)
		}
	}
	bin, _ := NewTensor(Binary, 1, 12, []byte{0xb3, 0xf0})
	if _, err := bin.Float32(); !errors.Is(err, InvalidField) {
		t.Errorf("binary Float32: %v", err)
	}
	if !bin.Bit(0, 0) || bin.Bit(0, 1) || !bin.Bit(0, 11) {
		t.Error("Bit")
	}
}

func TestNewTensor(t *testing.T) {
	if _, err := NewTensor(Float32, 2, 3, make([]byte, 23)); !isCategory(err, LengthMismatch) || err.(*Error).Offset != 23 {
		t.Errorf("short: %v", err)
	}
	if _, err := NewTensor(Float32, 2, 3, make([]byte, 25)); !isCategory(err, LengthMismatch) || err.(*Error).Offset != 24 {
		t.Errorf("long: %v", err)
	}
	if _, err := NewTensor(0, 0, 0, nil); !isCategory(err, UnknownDType) {
		t.Errorf("dtype 0: %v", err)
	}
	if _, err := NewTensor(Float32, -1, 0, nil); !isCategory(err, InvalidField) {
		t.Errorf("negative: %v", err)
	}
	if _, err := NewTensor(Binary, 2, 9, make([]byte, 4)); err != nil {
		t.Errorf("binary rows: %v", err)
	}
	tensor, _ := NewTensor(Uint8, 2, 2, []byte{1, 2, 3, 4})
	if r := tensor.Row(1); string(r) != "\x03\x04" {
		t.Errorf("Row: %x", r)
	}
	c := tensor.Clone()
	c.Data[0] = 9
	if tensor.Data[0] != 1 {
		t.Error("Clone shares data")
	}
}

func TestExpectedLenOverflow(t *testing.T) {
	if _, ok := expectedLen(Float64, 1<<62, 1<<62); ok {
		t.Error("overflow not detected")
	}
	if n, ok := expectedLen(Float64, 0, 1<<62); !ok || n != 0 {
		t.Error("n = 0 needs no bytes")
	}
	if n, ok := expectedLen(Binary, 3, 17); !ok || n != 9 {
		t.Errorf("binary: %d", n)
	}
	if n, ok := expectedLen(Binary, 1, math.MaxUint64); !ok || n != 1<<61 {
		t.Errorf("binary max d: %d %v", n, ok)
	}
	// a huge declared shape with little data is a length mismatch at the data's end
	_, e := tensorFromWire(Float32, 1<<40, 1<<40, []byte{1, 2}, "data")
	if e == nil || e.Category != LengthMismatch || e.Offset != 2 {
		t.Errorf("huge shape: %v", e)
	}
	_, e = tensorFromWire(Float32, math.MaxUint64, 0, nil, "data")
	if e == nil || e.Category != InvalidField {
		t.Errorf("n beyond int: %v", e)
	}
}

func TestDTypeAndByteOrderNames(t *testing.T) {
	for dt := Float32; dt <= Binary; dt++ {
		back, err := ParseDType(dt.String())
		if err != nil || back != dt {
			t.Errorf("%s: %v", dt, err)
		}
	}
	for _, bad := range []string{"Float32", "fp16", "float8", "", "FLOAT32", " float32"} {
		if _, err := ParseDType(bad); !isCategory(err, UnknownDType) || err.(*Error).Field != "dtype" {
			t.Errorf("%q: %v", bad, err)
		}
	}
	if DType(0).String() != "DType(0)" || DType(0).Valid() {
		t.Error("DType(0)")
	}
	for _, bad := range []string{"middle", "Little", ""} {
		if _, err := ParseByteOrder(bad); !isCategory(err, InvalidField) || err.(*Error).Field != "byteorder" {
			t.Errorf("%q: %v", bad, err)
		}
	}
}
