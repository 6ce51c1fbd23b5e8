//! Conversions between dtypes (SPEC.md section 3), on bit patterns so that NaN payloads, signed
//! zeros and subnormals are handled exactly as the spec says.

use crate::dtype::DType;
use crate::error::{ErrorKind, Result, err};
use crate::tensor::{Tensor, aligned_zeroed};

/// float32 bits to float16 bits: round-to-nearest-even, overflow to ±Infinity, NaN to the canonical
/// quiet NaN `0x7E00` / `0xFE00` with the sign kept (the payload is dropped).
///
/// ```
/// use densewire::f32_to_f16;
/// assert_eq!(f32_to_f16(0x3dcccccd), 0x2e66); // 0.1
/// assert_eq!(f32_to_f16(0x477ff000), 0x7c00); // 65520 rounds to infinity
/// assert_eq!(f32_to_f16(0x7f800001), 0x7e00); // a signalling NaN becomes the canonical NaN
/// ```
#[inline]
pub fn f32_to_f16(bits: u32) -> u16 {
    if bits & 0x7FFF_FFFF > 0x7F80_0000 {
        return ((bits >> 16) & 0x8000) as u16 | 0x7E00;
    }
    // half's conversion is IEEE round-to-nearest-even for every non-NaN value (checked against
    // the exact reference `round_f64` by the property tests).
    half::f16::from_f32(f32::from_bits(bits)).to_bits()
}

/// float32 bits to bfloat16 bits, exactly as SPEC.md section 3.2 writes it.
///
/// ```
/// use densewire::f32_to_bf16;
/// assert_eq!(f32_to_bf16(0x3f808000), 0x3f80); // a tie rounds to even
/// assert_eq!(f32_to_bf16(0x7f800001), 0x7fc0); // plain rounding would make this infinity
/// ```
#[inline]
pub fn f32_to_bf16(bits: u32) -> u16 {
    if bits & 0x7FFF_FFFF > 0x7F80_0000 {
        return ((bits >> 16) & 0x8000) as u16 | 0x7FC0;
    }
    (bits.wrapping_add(0x7FFF + ((bits >> 16) & 1)) >> 16) as u16
}

/// float64 bits to float32 bits: round-to-nearest-even, overflow to ±Infinity, NaN to
/// `0x7FC00000` with the sign kept.
#[inline]
pub fn f64_to_f32(bits: u64) -> u32 {
    if bits & 0x7FFF_FFFF_FFFF_FFFF > 0x7FF0_0000_0000_0000 {
        return ((bits >> 32) as u32 & 0x8000_0000) | 0x7FC0_0000;
    }
    (f64::from_bits(bits) as f32).to_bits() // Rust's `as` rounds to nearest, ties to even
}

/// float64 bits to float16 bits, rounding directly from float64 (SPEC.md section 3.5).
pub fn f64_to_f16(bits: u64) -> u16 {
    if bits & 0x7FFF_FFFF_FFFF_FFFF > 0x7FF0_0000_0000_0000 {
        return ((bits >> 48) as u16 & 0x8000) | 0x7E00;
    }
    round_f64(bits, 5, 10) as u16
}

/// float64 bits to bfloat16 bits, rounding directly from float64 (SPEC.md section 3.5).
pub fn f64_to_bf16(bits: u64) -> u16 {
    if bits & 0x7FFF_FFFF_FFFF_FFFF > 0x7FF0_0000_0000_0000 {
        return ((bits >> 48) as u16 & 0x8000) | 0x7FC0;
    }
    round_f64(bits, 8, 7) as u16
}

/// Rounds a non-NaN float64 to an IEEE binary format of `ebits` exponent and `mbits` fraction
/// bits (narrower than float64), ties to even, overflow to infinity. The exact reference used for
/// float16 and bfloat16 from JSON decimals.
pub(crate) fn round_f64(bits: u64, ebits: u32, mbits: u32) -> u64 {
    let sign = bits >> 63;
    let top = sign << (ebits + mbits);
    let exp = ((bits >> 52) & 0x7FF) as i64;
    let man = bits & ((1u64 << 52) - 1);
    let emax_field = (1u64 << ebits) - 1;
    if exp == 0x7FF {
        return top | (emax_field << mbits);
    }
    if exp == 0 && man == 0 {
        return top;
    }
    let (sig, e) = if exp == 0 { (man, -1074i64) } else { (man | (1u64 << 52), exp - 1075) };
    let bias = (1i64 << (ebits - 1)) - 1;
    let e_val = e + 63 - sig.leading_zeros() as i64; // floor(log2(value))
    let mut te = e_val.max(1 - bias);
    let shift = te - mbits as i64 - e;
    let mut q = if shift <= 0 {
        sig << (-shift)
    } else if shift > 63 {
        0 // below a quarter of the smallest subnormal: rounds to zero
    } else {
        let q = sig >> shift;
        let rem = sig & ((1u64 << shift) - 1);
        let half = 1u64 << (shift - 1);
        if rem > half || (rem == half && q & 1 == 1) { q + 1 } else { q }
    };
    if q >= 1u64 << (mbits + 1) {
        q >>= 1;
        te += 1;
    }
    if q < 1u64 << mbits {
        return top | q; // subnormal or zero
    }
    let biased = (te + bias) as u64;
    if biased >= emax_field {
        return top | (emax_field << mbits);
    }
    top | (biased << mbits) | (q - (1u64 << mbits))
}

/// Packs float rows into `binary` rows (SPEC.md section 3.4): bit `7 - j % 8` of byte `j / 8` is
/// 1 iff value `j` is greater than zero; padding bits are 0.
///
/// ```
/// use densewire::pack_binary;
/// assert_eq!(pack_binary(2, 3, &[1.0, -1.0, 1.0, -1.0, 1.0, 1.0]), vec![0xa0, 0x60]);
/// ```
pub fn pack_binary(rows: usize, dims: usize, values: &[f32]) -> Vec<u8> {
    assert_eq!(values.len(), rows * dims, "pack_binary: values do not fill the shape");
    let rb = dims.div_ceil(8);
    let mut out = vec![0u8; rows * rb];
    if dims == 0 {
        return out;
    }
    for (row, dst) in values.chunks_exact(dims).zip(out.chunks_exact_mut(rb)) {
        for (j, v) in row.iter().enumerate() {
            if *v > 0.0 {
                dst[j / 8] |= 0x80 >> (j % 8);
            }
        }
    }
    out
}

/// Unpacks one `binary` row into `dims` bits (0 or 1).
pub fn unpack_binary_row(row: &[u8], dims: usize) -> Vec<u8> {
    (0..dims).map(|j| (row[j / 8] >> (7 - j % 8)) & 1).collect()
}

pub(crate) fn convert_tensor(t: &Tensor, to: DType) -> Result<Tensor> {
    let from = t.dtype();
    if from == to {
        return Ok(t.clone());
    }
    let (rows, dims) = t.shape();
    let src = t.as_bytes();
    let out = match (from, to) {
        (DType::Float32, DType::Float16 | DType::BFloat16) => {
            let f = if to == DType::Float16 { f32_to_f16 } else { f32_to_bf16 };
            let mut buf = aligned_zeroed(src.len() / 2);
            for (s, d) in src.chunks_exact(4).zip(buf.as_mut_slice().chunks_exact_mut(2)) {
                d.copy_from_slice(&f(u32::from_le_bytes([s[0], s[1], s[2], s[3]])).to_le_bytes());
            }
            buf.freeze()
        }
        (DType::Float64, DType::Float32) => {
            let mut buf = aligned_zeroed(src.len() / 2);
            for (s, d) in src.chunks_exact(8).zip(buf.as_mut_slice().chunks_exact_mut(4)) {
                d.copy_from_slice(&f64_to_f32(u64::from_le_bytes(s.try_into().unwrap())).to_le_bytes());
            }
            buf.freeze()
        }
        (DType::Float32, DType::Binary) => pack_binary(rows, dims, &t.as_f32()?).into(),
        _ => {
            return Err(err(ErrorKind::InvalidField, format!("no conversion from {from} to {to} (SPEC.md section 3)"))
                .field("dtype"));
        }
    };
    Tensor::new(to, rows, dims, out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_f64_handles_edges() {
        // float64 subnormals and values far below the smallest float16 subnormal.
        assert_eq!(f64_to_f16(1u64), 0);
        assert_eq!(f64_to_f16(1u64 | 1 << 63), 0x8000);
        // 2^-24 and 2^-25 (tie to even: zero) and just above the tie.
        assert_eq!(f64_to_f16((2f64).powi(-24).to_bits()), 0x0001);
        assert_eq!(f64_to_f16((2f64).powi(-25).to_bits()), 0x0000);
        assert_eq!(f64_to_f16(((2f64).powi(-25) * 1.0000001).to_bits()), 0x0001);
        // Largest subnormal rounding up into the smallest normal.
        assert_eq!(f64_to_f16((2f64.powi(-14) - 2f64.powi(-26)).to_bits()), 0x0400);
        assert_eq!(f64_to_f16(65519.99f64.to_bits()), 0x7bff);
        assert_eq!(f64_to_f16(65520f64.to_bits()), 0x7c00);
        assert_eq!(f64_to_f16(f64::INFINITY.to_bits()), 0x7c00);
        assert_eq!(f64_to_f16(f64::NAN.to_bits()), 0x7e00);
        assert_eq!(f64_to_bf16((-f64::NAN).to_bits()), 0xffc0);
        assert_eq!(f64_to_f32(f64::MAX.to_bits()), 0x7f80_0000);
        // float64 to bfloat16 rounds once, directly (1 + 2^-8 + 2^-30 is above the tie).
        assert_eq!(f64_to_bf16((1.0 + 2f64.powi(-8) + 2f64.powi(-30)).to_bits()), 0x3f81);
    }

    #[test]
    fn binary_packing_and_unpacking() {
        let packed =
            pack_binary(1, 10, &[1.0, -1.0, 0.0, -0.0, f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 1e-45, 2.0, -2.0]);
        assert_eq!(packed, vec![0x85, 0x80]);
        assert_eq!(unpack_binary_row(&packed, 10), vec![1, 0, 0, 0, 0, 1, 0, 1, 1, 0]);
        assert_eq!(pack_binary(3, 0, &[]), Vec::<u8>::new());
    }

    #[test]
    fn unsupported_conversions_are_invalid_field() {
        let t = Tensor::from_slice(1, 1, &[1i8]).unwrap();
        let e = t.convert(DType::Float32).unwrap_err();
        assert_eq!((e.kind(), e.field_name()), (ErrorKind::InvalidField, Some("dtype")));
        assert_eq!(t.convert(DType::Int8).unwrap(), t);
    }
}
