//! Property tests: every dtype, byte order and shape round-trips bit-exactly through every
//! format; the fast Base64 path agrees with the scalar reference; conversions agree with the
//! exact rounding reference.

use densewire::{
    ByteOrder, DType, Embeddings, EncodingFormat, ErrorKind, Format, JsonOptions, Tensor, Usage, decode_base64,
    decode_json, encode_json, f32_to_bf16, f32_to_f16, f64_to_bf16, f64_to_f16, tensor_from_base64, tensor_to_base64,
};
use proptest::prelude::*;

fn dtype() -> impl Strategy<Value = DType> {
    prop::sample::select(DType::ALL.to_vec())
}

/// A tensor of any dtype and shape (n < 6, d < 40) with arbitrary bytes (every NaN payload,
/// subnormal and signed zero included), and binary padding bits cleared as encoders write them.
fn tensor() -> impl Strategy<Value = Tensor> {
    (dtype(), 0usize..6, 0usize..40).prop_flat_map(|(dt, n, d)| {
        let len = n * dt.row_bytes(d).unwrap();
        prop::collection::vec(any::<u8>(), len).prop_map(move |bytes| {
            if dt == DType::Binary {
                Tensor::from_packed_bits(n, d, bytes).unwrap()
            } else {
                Tensor::new(dt, n, d, bytes).unwrap()
            }
        })
    })
}

fn embeddings() -> impl Strategy<Value = Embeddings> {
    (
        tensor(),
        prop::option::of("[ -~]{0,40}"),
        prop::option::of((any::<u32>(), any::<u32>())),
        prop::option::of("[0-9a-f]{16}"),
    )
        .prop_map(|(t, m, u, q)| Embeddings {
            tensor: t,
            model: m,
            usage: u.map(|(p, t)| Usage { prompt_tokens: p as u64, total_tokens: t as u64 }),
            quantization: q,
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn base64_roundtrip_every_dtype_and_byteorder(t in tensor(), big in any::<bool>()) {
        let order = if big { ByteOrder::Big } else { ByteOrder::Little };
        let s = tensor_to_base64(&t, order);
        let back = tensor_from_base64(&s, t.dtype(), t.rows(), t.dims(), order).unwrap();
        prop_assert_eq!(back, t);
    }

    #[test]
    fn binary_formats_roundtrip(e in embeddings()) {
        for format in [Format::Raw, Format::Msgpack, Format::Protobuf, Format::Arrow] {
            let enc = e.encode(format, JsonOptions::default()).unwrap();
            let response = e.model.is_some() || e.usage.is_some() || e.quantization.is_some();
            let back = Embeddings::decode(format, &enc.headers, enc.body, response).unwrap();
            prop_assert_eq!(&back.tensor, &e.tensor, "{}", format);
            prop_assert_eq!(&back.quantization, &e.quantization, "{}", format);
            if format != Format::Protobuf {
                prop_assert_eq!(&back.model, &e.model, "{}", format);
            }
            prop_assert_eq!(back.usage.unwrap_or_default(), e.usage.unwrap_or_default(), "{}", format);
        }
    }

    #[test]
    fn json_base64_roundtrip(e in embeddings(), big in any::<bool>()) {
        let order = if big { ByteOrder::Big } else { ByteOrder::Little };
        let text = encode_json(&e, JsonOptions { encoding_format: EncodingFormat::Base64, byteorder: order }).unwrap();
        let back = decode_json(text.as_bytes()).unwrap();
        prop_assert_eq!(back.quantization, e.quantization);
        prop_assert_eq!(back.tensor, e.tensor);
    }

    #[test]
    fn json_float_roundtrip_or_non_finite(e in embeddings()) {
        match encode_json(&e, JsonOptions::default()) {
            Ok(text) => prop_assert_eq!(decode_json(text.as_bytes()).unwrap().tensor, e.tensor),
            Err(err) => {
                prop_assert_eq!(err.kind(), ErrorKind::NonFinite);
                prop_assert!(e.tensor.dtype().is_float());
            }
        }
    }

    #[test]
    fn base64_fast_path_agrees_with_reference(s in "[A-Za-z0-9+/=_ -]{0,24}") {
        prop_assert_eq!(decode_base64(&s), densewire::fuzzing::decode_base64_reference(&s));
    }

    #[test]
    fn base64_fast_path_agrees_on_near_valid_input(bytes in prop::collection::vec(any::<u8>(), 0..40), cut in 0usize..4, flip in any::<u8>()) {
        // Valid encodings, cut short, with a changed last character or stray padding.
        let mut s = densewire::encode_base64(&bytes).into_bytes();
        let keep = s.len().saturating_sub(cut);
        s.truncate(keep);
        if let Some(last) = s.last_mut() {
            const ALPHA: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=";
            *last = ALPHA[flip as usize % ALPHA.len()];
        }
        let s = String::from_utf8(s).unwrap();
        prop_assert_eq!(decode_base64(&s), densewire::fuzzing::decode_base64_reference(&s));
    }

    #[test]
    fn f32_to_f16_matches_exact_rounding(bits in any::<u32>()) {
        let x = f32::from_bits(bits);
        // Widening to float64 is exact, so rounding from float64 is the exact reference.
        prop_assert_eq!(f32_to_f16(bits), f64_to_f16((x as f64).to_bits()), "{:08x}", bits);
    }

    #[test]
    fn f32_to_bf16_matches_exact_rounding(bits in any::<u32>()) {
        let x = f32::from_bits(bits);
        prop_assert_eq!(f32_to_bf16(bits), f64_to_bf16((x as f64).to_bits()), "{:08x}", bits);
    }

    #[test]
    fn views_borrow_when_aligned_and_copy_when_not(vals in prop::collection::vec(any::<f32>(), 1..64)) {
        let t = Tensor::from_slice(1, vals.len(), &vals).unwrap();
        prop_assert!(t.is_zero_copy::<f32>());
        let bits: Vec<u32> = t.as_f32().unwrap().iter().map(|v| v.to_bits()).collect();
        prop_assert_eq!(&bits, &vals.iter().map(|v| v.to_bits()).collect::<Vec<_>>());
        // The same bytes one byte into a buffer: misaligned, so the view copies, with the same bits.
        let mut shifted = vec![0u8];
        shifted.extend_from_slice(t.as_bytes());
        let b = densewire::Bytes::from(shifted).slice(1..);
        let u = Tensor::new(DType::Float32, 1, vals.len(), b).unwrap();
        prop_assert!(!u.is_zero_copy::<f32>());
        let bits2: Vec<u32> = u.as_f32().unwrap().iter().map(|v| v.to_bits()).collect();
        prop_assert_eq!(bits2, bits);
    }
}

#[test]
fn f16_conversion_exhaustive_over_exponents() {
    // Every float32 exponent with a few mantissas: ties, halfway-minus-one, and extremes.
    for exp in 0u32..256 {
        for man in [0u32, 1, 0x0fff, 0x1000, 0x1001, 0x2000, 0x3000, 0x7fffff, 0x400000] {
            for sign in [0u32, 1] {
                let bits = sign << 31 | exp << 23 | man;
                let x = f32::from_bits(bits);
                if x.is_nan() {
                    assert_eq!(f32_to_f16(bits), if sign == 1 { 0xfe00 } else { 0x7e00 });
                } else {
                    assert_eq!(f32_to_f16(bits), f64_to_f16((x as f64).to_bits()), "{bits:08x}");
                }
            }
        }
    }
}
