//! Base64 (SPEC.md section 5): standard alphabet, padded on output; strict on input with the
//! offset of the first offending character, lenient only where the spec says (unpadded input,
//! non-zero trailing bits).
//!
//! The fast path is `base64-simd`; when it rejects an input, a scalar validator finds the spec's
//! error and offset, and the few inputs that the spec accepts but `base64-simd` does not (non-zero
//! trailing bits) are decoded by a scalar tail.

use crate::dtype::{ByteOrder, DType, swap_items};
use crate::error::{Error, ErrorKind, Result, err, length_mismatch};
use crate::tensor::{AlignedBuf, Tensor, aligned_zeroed, expected_len};
use base64_simd::{AsOut, STANDARD, STANDARD_NO_PAD};

/// Encodes bytes as padded standard Base64.
///
/// ```
/// assert_eq!(densewire::encode_base64(&[0, 0, 0x80, 0x3f]), "AACAPw==");
/// ```
pub fn encode_base64(bytes: &[u8]) -> String {
    STANDARD.encode_to_string(bytes)
}

/// Appends the padded standard Base64 of `bytes` to `out`.
pub fn encode_base64_into(bytes: &[u8], out: &mut String) {
    STANDARD.encode_append(bytes, out);
}

/// Decodes a Base64 string strictly (SPEC.md section 5), with no shape check.
///
/// ```
/// use densewire::{decode_base64, ErrorKind};
/// assert_eq!(decode_base64("AACAPw==").unwrap(), vec![0, 0, 0x80, 0x3f]);
/// assert_eq!(decode_base64("AACAPw").unwrap(), vec![0, 0, 0x80, 0x3f]); // unpadded is accepted
/// let e = decode_base64("AACA*w==").unwrap_err();
/// assert_eq!((e.kind(), e.offset()), (ErrorKind::InvalidBase64, Some(4)));
/// ```
pub fn decode_base64(s: &str) -> Result<Vec<u8>> {
    let mut out = vec![0u8; decoded_len_upper(s.len())];
    let n = decode_into(s.as_bytes(), &mut out)?;
    out.truncate(n);
    Ok(out)
}

/// Encodes a tensor's bytes as one Base64 string (rows concatenated) in the given byte order.
///
/// ```
/// use densewire::{ByteOrder, Tensor, tensor_to_base64};
/// let t = Tensor::from_slice(1, 3, &[1.0f32, -2.5, 0.1]).unwrap();
/// assert_eq!(tensor_to_base64(&t, ByteOrder::Big), "P4AAAMAgAAA9zMzN"); // Elasticsearch, Jackson
/// assert_eq!(tensor_to_base64(&t, ByteOrder::Little), "AACAPwAAIMDNzMw9");
/// ```
pub fn tensor_to_base64(t: &Tensor, order: ByteOrder) -> String {
    let width = t.dtype().item_bytes();
    if order == ByteOrder::Little || width == 1 {
        return encode_base64(t.as_bytes());
    }
    let mut tmp = t.as_bytes().to_vec();
    swap_items(&mut tmp, width);
    encode_base64(&tmp)
}

/// Decodes one Base64 string holding a whole tensor of the declared dtype, shape and byte order.
/// The bytes land in an 8-byte-aligned buffer, so [`Tensor::view`] never copies.
///
/// ```
/// use densewire::{tensor_from_base64, ByteOrder, DType, ErrorKind};
/// let t = tensor_from_base64("P4AAAMAgAAA9zMzN", DType::Float32, 1, 3, ByteOrder::Big).unwrap();
/// assert_eq!(&*t.as_f32().unwrap(), &[1.0, -2.5, 0.1]);
/// let e = tensor_from_base64("AACAPwAA", DType::Float32, 1, 2, ByteOrder::Little).unwrap_err();
/// assert_eq!((e.kind(), e.offset()), (ErrorKind::LengthMismatch, Some(6)));
/// ```
pub fn tensor_from_base64(s: &str, dtype: DType, rows: usize, dims: usize, order: ByteOrder) -> Result<Tensor> {
    let expected = expected_len(dtype, rows, dims)?;
    let buf = decode_row_buf(s, expected, dtype, order)?;
    Ok(Tensor::new(dtype, rows, dims, buf.freeze())?.with_clear_padding_bits())
}

/// Decodes `s` into a fresh aligned buffer holding exactly `expected` bytes (little-endian),
/// or fails with `invalid_base64` / `length_mismatch`.
pub(crate) fn decode_row_buf(s: &str, expected: usize, dtype: DType, order: ByteOrder) -> Result<AlignedBuf> {
    let mut buf = aligned_zeroed(decoded_len_upper(s.len()));
    let n = decode_into(s.as_bytes(), buf.as_mut_slice())?;
    if n != expected {
        return Err(length_mismatch(n, expected));
    }
    buf.truncate(n);
    if order == ByteOrder::Big {
        swap_items(buf.as_mut_slice(), dtype.item_bytes());
    }
    Ok(buf)
}

/// Decodes `s` into `out[..]`, appending nothing past the decoded length, which it returns.
/// `out` must hold at least `decoded_len_upper(s.len())` bytes.
pub(crate) fn decode_into_slice(s: &str, out: &mut [u8]) -> Result<usize> {
    decode_into(s.as_bytes(), out)
}

/// An upper bound of the decoded length of `n` Base64 characters.
pub(crate) fn decoded_len_upper(n: usize) -> usize {
    n / 4 * 3 + 3
}

fn decode_into(s: &[u8], out: &mut [u8]) -> Result<usize> {
    let len = s.len();
    if len == 0 {
        return Ok(0);
    }
    // Cheap structural checks on the tail route inputs that need the spec's exact error to the
    // scalar validator; everything else goes to base64-simd, which rejects every other bad input.
    let fast = if s[len - 1] == b'=' {
        if len % 4 == 0 && !(len >= 3 && s[len - 3] == b'=') {
            STANDARD.decode(s, out.as_out()).map(|d| d.len()).ok()
        } else {
            None
        }
    } else if len % 4 != 1 {
        STANDARD_NO_PAD.decode(s, out.as_out()).map(|d| d.len()).ok()
    } else {
        None
    };
    match fast {
        Some(n) => Ok(n),
        None => decode_slow(s, out, false),
    }
}

const INVALID: u8 = 0xFF;
const PAD: u8 = 0xFE;

const fn table() -> [u8; 256] {
    let mut t = [INVALID; 256];
    let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut i = 0;
    while i < 64 {
        t[alphabet[i] as usize] = i as u8;
        i += 1;
    }
    t[b'=' as usize] = PAD;
    t
}

static TABLE: [u8; 256] = table();

fn invalid_at(s: &[u8], i: usize) -> Error {
    let shown = match std::str::from_utf8(&s[i..]).ok().and_then(|r| r.chars().next()) {
        Some(c) => format!("{c:?}"),
        None => format!("byte 0x{:02x}", s[i]),
    };
    err(ErrorKind::InvalidBase64, format!("invalid Base64 character {shown} at offset {i}")).at(i)
}

/// Validates `s` exactly as SPEC.md section 5 says, then decodes it (used when the fast path
/// refused the input: either it is invalid, or it has non-zero trailing bits).
fn decode_slow(s: &[u8], out: &mut [u8], scalar: bool) -> Result<usize> {
    let len = s.len();
    // Step 1: the first character outside the alphabet and '='.
    if let Some(i) = s.iter().position(|&c| TABLE[c as usize] == INVALID) {
        return Err(invalid_at(s, i));
    }
    // Step 2: padding.
    let data_len = if let Some(p) = s.iter().position(|&c| c == b'=') {
        let ok = s[p..].iter().all(|&c| c == b'=') && len - p <= 2 && len % 4 == 0 && (p % 4 == 2 || p % 4 == 3);
        if !ok {
            return Err(
                err(ErrorKind::InvalidBase64, format!("misplaced or excess Base64 padding at offset {p}")).at(p)
            );
        }
        p
    } else {
        // Step 3: a lone character cannot make a byte.
        if len % 4 == 1 {
            return Err(err(
                ErrorKind::InvalidBase64,
                format!("dangling Base64 character at offset {} (a lone character cannot make a byte)", len - 1),
            )
            .at(len - 1));
        }
        len
    };
    // Valid: decode the whole groups fast, the last partial group by hand (step 4: bits below the
    // last whole byte are ignored).
    let whole = data_len / 4 * 4;
    let n = if scalar {
        for (g, o) in s[..whole].chunks_exact(4).zip(out.chunks_exact_mut(3)) {
            let v = g.iter().fold(0u32, |a, &c| (a << 6) | TABLE[c as usize] as u32);
            o.copy_from_slice(&v.to_be_bytes()[1..]);
        }
        whole / 4 * 3
    } else if whole > 0 {
        STANDARD_NO_PAD
            .decode(&s[..whole], out.as_out())
            .map_err(|_| err(ErrorKind::InvalidBase64, "invalid Base64"))?
            .len()
    } else {
        0
    };
    let tail = &s[whole..data_len];
    let mut acc: u32 = 0;
    for &c in tail {
        acc = (acc << 6) | TABLE[c as usize] as u32;
    }
    let extra = match tail.len() {
        0 => 0,
        2 => {
            out[n] = (acc >> 4) as u8;
            1
        }
        3 => {
            out[n] = (acc >> 10) as u8;
            out[n + 1] = (acc >> 2) as u8;
            2
        }
        _ => unreachable!("a tail of 1 or 4 characters was rejected or decoded above"),
    };
    Ok(n + extra)
}

/// The scalar reference decoder, used by the tests and fuzz targets to cross-check the fast path.
#[doc(hidden)]
pub fn decode_base64_reference(s: &str) -> Result<Vec<u8>> {
    let mut out = vec![0u8; decoded_len_upper(s.len())];
    let n = decode_slow(s.as_bytes(), &mut out, true)?;
    out.truncate(n);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offset(s: &str) -> (ErrorKind, Option<u64>) {
        let e = decode_base64(s).unwrap_err();
        (e.kind(), e.offset())
    }

    #[test]
    fn accepts_padded_unpadded_and_empty() {
        assert_eq!(decode_base64("").unwrap(), b"");
        assert_eq!(decode_base64("TWE=").unwrap(), b"Ma");
        assert_eq!(decode_base64("TWE").unwrap(), b"Ma");
        assert_eq!(decode_base64("TQ==").unwrap(), b"M");
        assert_eq!(decode_base64("TQ").unwrap(), b"M");
    }

    #[test]
    fn ignores_non_zero_trailing_bits() {
        // 'R' = 17 = 0b010001: the low 4 bits are below the last whole byte.
        assert_eq!(decode_base64("TR==").unwrap(), b"M");
        assert_eq!(decode_base64("TWF=").unwrap(), b"Ma");
        assert_eq!(decode_base64("TWF").unwrap(), b"Ma");
        // In a long input too (the fast path refuses it, the tail decoder accepts it).
        let long = format!("{}TWF=", "AAAA".repeat(100));
        assert_eq!(decode_base64(&long).unwrap().len(), 302);
    }

    #[test]
    fn step_one_wins_over_padding_errors() {
        // A misplaced '=' at 2 and a bad character at 5: step 1 reports the character.
        assert_eq!(offset("AA=AA*=="), (ErrorKind::InvalidBase64, Some(5)));
        assert_eq!(offset("AA=A"), (ErrorKind::InvalidBase64, Some(2)));
        assert_eq!(offset("A==="), (ErrorKind::InvalidBase64, Some(1)));
        assert_eq!(offset("="), (ErrorKind::InvalidBase64, Some(0)));
        assert_eq!(offset("AAAAA"), (ErrorKind::InvalidBase64, Some(4)));
    }

    #[test]
    fn non_ascii_offsets_count_characters() {
        // Everything before the first bad character is ASCII, so byte and character offsets agree.
        let e = decode_base64("AAé=").unwrap_err();
        assert_eq!(e.offset(), Some(2));
        assert!(e.message().contains("'é'"), "{}", e.message());
    }

    #[test]
    fn big_endian_tensors_swap_each_item() {
        let t = tensor_from_base64("PAA=", DType::Float16, 1, 1, ByteOrder::Big).unwrap();
        assert_eq!(t.as_bytes(), &[0x00, 0x3c]);
        assert_eq!(tensor_to_base64(&t, ByteOrder::Big), "PAA=");
    }
}
