package densewire

import (
	"encoding/binary"
	"math"
	"strconv"
	"sync"
)

// Conversions of SPEC.md section 3. Every rounding is IEEE 754 round-to-nearest, ties-to-even, and
// every NaN becomes the canonical quiet NaN of the target with the sign kept.

func f32bits(f float32) uint32     { return math.Float32bits(f) }
func f32frombits(b uint32) float32 { return math.Float32frombits(b) }
func f64bits(f float64) uint64     { return math.Float64bits(f) }
func f64frombits(b uint64) float64 { return math.Float64frombits(b) }

// Float16Bits converts a float32 to the bits of the nearest float16 (SPEC.md section 3.1): magnitudes
// that round above 65504 become infinities, results below the normal range become subnormals by the
// same rounding, float32 subnormals become signed zero, NaN becomes 0x7E00 or 0xFE00.
func Float16Bits(f float32) uint16 {
	b := f32bits(f)
	sign := uint16(b>>16) & 0x8000
	a := b & 0x7fffffff
	switch {
	case a > 0x7f800000: // NaN
		return sign | 0x7e00
	case a >= 0x477ff000: // 65520 and above round to infinity (65520 is a tie to even: infinity)
		return sign | 0x7c00
	case a >= 0x38800000: // a float16 normal: rebias the exponent, round off 13 fraction bits
		a -= 0x38000000
		return sign | uint16((a+0xfff+(a>>13)&1)>>13)
	case a >= 0x33000000: // [2^-25, 2^-14): a float16 subnormal (2^-25 itself ties to 0)
		shift := 126 - a>>23
		m := a&0x7fffff | 0x800000
		r := m >> shift
		rem, half := m&(1<<shift-1), uint32(1)<<(shift-1)
		if rem > half || rem == half && r&1 == 1 {
			r++
		}
		return sign | uint16(r)
	}
	return sign // below half the smallest subnormal, float32 subnormals included
}

// BFloat16Bits converts a float32 to bfloat16 bits (SPEC.md section 3.2): round-to-nearest-even on
// the top 16 bits, NaN to 0x7FC0 or 0xFFC0.
func BFloat16Bits(f float32) uint16 {
	b := f32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16)&0x8000 | 0x7fc0
	}
	return uint16((b + 0x7fff + (b>>16)&1) >> 16)
}

// Float64ToFloat32 rounds a float64 to the nearest float32 (SPEC.md section 3.3), overflowing to
// infinity; NaN becomes 0x7FC00000 with the sign kept.
func Float64ToFloat32(f float64) float32 {
	b := f64bits(f)
	if b&0x7fffffffffffffff > 0x7ff0000000000000 {
		return f32frombits(uint32(b>>32)&0x80000000 | 0x7fc00000)
	}
	return float32(f)
}

// float64ToFloat16Bits rounds a float64 directly to float16 (SPEC.md section 3.5, no double rounding).
func float64ToFloat16Bits(f float64) uint16 {
	b := f64bits(f)
	if b&0x7fffffffffffffff > 0x7ff0000000000000 {
		return uint16(b>>48)&0x8000 | 0x7e00
	}
	return uint16(roundFloat64(f, 5, 10))
}

// float64ToBFloat16Bits rounds a float64 directly to bfloat16 (SPEC.md section 3.5).
func float64ToBFloat16Bits(f float64) uint16 {
	b := f64bits(f)
	if b&0x7fffffffffffffff > 0x7ff0000000000000 {
		return uint16(b>>48)&0x8000 | 0x7fc0
	}
	return uint16(roundFloat64(f, 8, 7))
}

// roundFloat64 rounds a non-NaN float64 to the IEEE binary format with ebits exponent bits and
// mbits fraction bits (mbits < 52), to nearest even, overflowing to infinity.
func roundFloat64(f float64, ebits, mbits uint) uint64 {
	b := f64bits(f)
	sign := (b >> 63) << (ebits + mbits)
	exp := int(b>>52) & 0x7ff
	man := b & (1<<52 - 1)
	inf := uint64(1<<ebits-1) << mbits
	if exp == 0x7ff {
		return sign | inf
	}
	if exp == 0 { // float64 zero or subnormal: far below every target's smallest subnormal
		return sign
	}
	bias := 1<<(ebits-1) - 1
	if e := exp - 1023 + bias; e >= 1 { // a normal of the target, before rounding
		shift := 52 - mbits
		r := uint64(e)<<mbits | man>>shift
		rem, half := man&(1<<shift-1), uint64(1)<<(shift-1)
		if rem > half || rem == half && r&1 == 1 {
			r++ // may carry into the exponent, and into infinity
		}
		if r >= inf {
			return sign | inf
		}
		return sign | r
	}
	// A subnormal of the target: count units of 2^(1-bias-mbits).
	m := man | 1<<52
	shift := uint(1075 + 1 - bias - int(mbits) - exp)
	if shift > 53 {
		return sign
	}
	r := m >> shift
	rem, half := m&(1<<shift-1), uint64(1)<<(shift-1)
	if rem > half || rem == half && r&1 == 1 {
		r++ // the largest subnormal may round up to the smallest normal: same encoding
	}
	return sign | r
}

// Float16ToFloat32 widens float16 bits to float32, exactly (NaN payloads kept).
func Float16ToFloat32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	man := uint32(h) & 0x3ff
	switch exp {
	case 0x1f:
		return f32frombits(sign | 0x7f800000 | man<<13)
	case 0:
		if man == 0 {
			return f32frombits(sign)
		}
		e := uint32(113)
		for man&0x400 == 0 {
			man <<= 1
			e--
		}
		return f32frombits(sign | e<<23 | (man&0x3ff)<<13)
	}
	return f32frombits(sign | (exp+112)<<23 | man<<13)
}

// BFloat16ToFloat32 widens bfloat16 bits to float32, exactly.
func BFloat16ToFloat32(h uint16) float32 { return f32frombits(uint32(h) << 16) }

// float16Table maps every float16 to its float32 bits; built on first use (256 KiB), it makes
// widening a lookup per item (bench/go/RESULTS.md: about 4x the branchy conversion).
var float16Table = sync.OnceValue(func() *[1 << 16]uint32 {
	var t [1 << 16]uint32
	for h := range t {
		t[h] = f32bits(Float16ToFloat32(uint16(h)))
	}
	return &t
})

func float16sToFloat32(dst []float32, src []byte) {
	src = src[:2*len(dst)]
	table := float16Table()
	for i := range dst {
		dst[i] = f32frombits(table[le16(src[2*i:])])
	}
}

func bfloat16sToFloat32(dst []float32, src []byte) {
	src = src[:2*len(dst)]
	for i := range dst {
		dst[i] = f32frombits(uint32(le16(src[2*i:])) << 16)
	}
}

// PackBinary packs n rows of d float32 values into a Binary tensor's bytes (SPEC.md section 3.4):
// bit 1 if and only if the value is greater than zero, most significant bit first, each row padded
// with zero bits to a whole byte.
func PackBinary(v []float32, n, d int) []byte {
	rb := (d + 7) / 8
	out := make([]byte, n*rb)
	for i := 0; i < n; i++ {
		o := out[i*rb : (i+1)*rb]
		for j, f := range v[i*d : (i+1)*d] {
			if f > 0 {
				o[j>>3] |= 0x80 >> (j & 7)
			}
		}
	}
	return out
}

func checkValues(count, n, d int) error {
	if n < 0 || d < 0 || d > maxDim || count != n*d {
		return newError(ShapeMismatch, "", -1, strconv.Itoa(count)+" values do not make a ("+
			strconv.Itoa(n)+", "+strconv.Itoa(d)+") tensor")
	}
	return nil
}

// FromFloat32 builds an (n, d) tensor of dtype from row-major float32 values, converting as SPEC.md
// section 3 says (Float16, BFloat16, Binary; Float64 widens exactly). For Float32 on a
// little-endian host the tensor's Data aliases v: no copy. Int8 and Uint8 are never produced by
// conversion (an InvalidField error on "dtype").
func FromFloat32(v []float32, n, d int, dtype DType) (*Tensor, error) {
	if err := checkValues(len(v), n, d); err != nil {
		return nil, err
	}
	t := &Tensor{DType: dtype, N: n, D: d}
	switch dtype {
	case Float32:
		t.Data = Float32Bytes(v)
	case Float16:
		t.Data = make([]byte, 2*len(v))
		for i, f := range v {
			binary.LittleEndian.PutUint16(t.Data[2*i:], Float16Bits(f))
		}
	case BFloat16:
		t.Data = make([]byte, 2*len(v))
		for i, f := range v {
			binary.LittleEndian.PutUint16(t.Data[2*i:], BFloat16Bits(f))
		}
	case Float64:
		t.Data = make([]byte, 8*len(v))
		for i, f := range v {
			binary.LittleEndian.PutUint64(t.Data[8*i:], f64bits(float64(f)))
		}
	case Binary:
		t.Data = PackBinary(v, n, d)
	default:
		return nil, newError(InvalidField, "dtype", -1, "cannot convert float32 values to "+dtype.String())
	}
	return t, nil
}

// FromFloat64 builds an (n, d) tensor of dtype from row-major float64 values: Float32 rounds by
// section 3.3, Float16 and BFloat16 round directly from float64 (section 3.5), Binary packs by sign.
// For Float64 on a little-endian host the tensor aliases v.
func FromFloat64(v []float64, n, d int, dtype DType) (*Tensor, error) {
	if err := checkValues(len(v), n, d); err != nil {
		return nil, err
	}
	t := &Tensor{DType: dtype, N: n, D: d}
	switch dtype {
	case Float64:
		t.Data = float64Bytes(v)
	case Float32:
		t.Data = make([]byte, 4*len(v))
		for i, f := range v {
			binary.LittleEndian.PutUint32(t.Data[4*i:], f32bits(Float64ToFloat32(f)))
		}
	case Float16:
		t.Data = make([]byte, 2*len(v))
		for i, f := range v {
			binary.LittleEndian.PutUint16(t.Data[2*i:], float64ToFloat16Bits(f))
		}
	case BFloat16:
		t.Data = make([]byte, 2*len(v))
		for i, f := range v {
			binary.LittleEndian.PutUint16(t.Data[2*i:], float64ToBFloat16Bits(f))
		}
	case Binary:
		rb := (d + 7) / 8
		t.Data = make([]byte, n*rb)
		for i := 0; i < n; i++ {
			for j, f := range v[i*d : (i+1)*d] {
				if f > 0 {
					t.Data[i*rb+j>>3] |= 0x80 >> (j & 7)
				}
			}
		}
	default:
		return nil, newError(InvalidField, "dtype", -1, "cannot convert float64 values to "+dtype.String())
	}
	return t, nil
}

// FromRows builds an (len(rows), d) tensor of dtype from float32 rows, which must all have the same
// length d (a ShapeMismatch error on "rows[i]" otherwise). It copies the rows once.
func FromRows(rows [][]float32, dtype DType) (*Tensor, error) {
	d := 0
	if len(rows) > 0 {
		d = len(rows[0])
	}
	flat := make([]float32, 0, len(rows)*d)
	for i, r := range rows {
		if len(r) != d {
			return nil, newError(ShapeMismatch, "rows["+strconv.Itoa(i)+"]", -1, "row has "+
				strconv.Itoa(len(r))+" values, row 0 has "+strconv.Itoa(d))
		}
		flat = append(flat, r...)
	}
	return FromFloat32(flat, len(rows), d, dtype)
}
