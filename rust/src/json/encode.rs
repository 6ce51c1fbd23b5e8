//! Encoding the JSON embeddings response (SPEC.md section 6.2): keys in spec order, numbers as the
//! shortest decimal that reads back to the same bits in the tensor's dtype.

use crate::base64::encode_base64_into;
use crate::convert::{f64_to_bf16, f64_to_f16};
use crate::dtype::{ByteOrder, DType, swap_items};
use crate::embeddings::{Embeddings, EncodingFormat, JsonOptions};
use crate::error::{ErrorKind, Result, err};
use std::fmt::Write;

/// Encodes an embeddings response as the JSON envelope.
///
/// Float rows fail with `non_finite` (field `data[i].embedding[j]`) on NaN or ±Infinity, which
/// have no JSON number form; `base64` rows carry every bit.
///
/// ```
/// use densewire::{encode_json, EncodingFormat, Embeddings, JsonOptions, Tensor};
/// let e = Embeddings::from_tensor(Tensor::from_slice(1, 3, &[1.0f32, -2.5, 0.1]).unwrap());
/// let text = encode_json(&e, JsonOptions::default()).unwrap();
/// assert!(text.contains(r#""embedding":[1.0,-2.5,0.1]"#));
/// let b64 = encode_json(&e, JsonOptions { encoding_format: EncodingFormat::Base64, ..Default::default() }).unwrap();
/// assert!(b64.contains(r#""embedding":"AACAPwAAIMDNzMw9""#));
/// ```
pub fn encode_json(e: &Embeddings, opts: JsonOptions) -> Result<String> {
    let t = &e.tensor;
    let (n, d) = t.shape();
    let rb = t.row_bytes();
    let dtype = t.dtype();
    let per_row = match opts.encoding_format {
        EncodingFormat::Base64 => rb * 4 / 3 + 60,
        EncodingFormat::Float => d * 12 + 60,
    };
    let mut s = String::with_capacity(n * per_row + 200);
    s.push_str(r#"{"object":"list","data":["#);
    let mut scratch = Vec::new();
    let mut ryu_buf = ryu::Buffer::new();
    let mut int_buf = itoa::Buffer::new();
    for i in 0..n {
        if i > 0 {
            s.push(',');
        }
        s.push_str(r#"{"object":"embedding","index":"#);
        s.push_str(int_buf.format(i));
        s.push_str(r#","embedding":"#);
        let row = t.row(i);
        match opts.encoding_format {
            EncodingFormat::Base64 => {
                s.push('"');
                if opts.byteorder == ByteOrder::Big && dtype.item_bytes() > 1 {
                    scratch.clear();
                    scratch.extend_from_slice(row);
                    swap_items(&mut scratch, dtype.item_bytes());
                    encode_base64_into(&scratch, &mut s);
                } else {
                    encode_base64_into(row, &mut s);
                }
                s.push('"');
            }
            EncodingFormat::Float => {
                s.push('[');
                write_numbers(&mut s, dtype, row, i, &mut ryu_buf, &mut int_buf)?;
                s.push(']');
            }
        }
        s.push('}');
    }
    s.push_str(r#"],"model":"#);
    s.push_str(&serde_json::to_string(e.model.as_deref().unwrap_or("")).expect("a string serializes"));
    let u = e.usage.unwrap_or_default();
    let byteorder = match opts.encoding_format {
        EncodingFormat::Base64 => opts.byteorder,
        EncodingFormat::Float => ByteOrder::Little,
    };
    let _ = write!(
        s,
        r#","usage":{{"prompt_tokens":{},"total_tokens":{}}},"dtype":"{}","byteorder":"{}","dimensions":{}}}"#,
        u.prompt_tokens, u.total_tokens, dtype, byteorder, d
    );
    if let Some(q) = &e.quantization {
        s.pop(); // the closing brace: the id comes after dimensions (SPEC.md section 6.2)
        s.push_str(r#","quantization":"#);
        s.push_str(&serde_json::to_string(q).expect("a string serializes"));
        s.push('}');
    }
    Ok(s)
}

fn non_finite(i: usize, j: usize) -> crate::Error {
    err(ErrorKind::NonFinite, "NaN and Infinity have no JSON number form; use encoding_format base64")
        .field(format!("data[{i}].embedding[{j}]"))
}

pub(crate) fn write_numbers(
    s: &mut String,
    dtype: DType,
    row: &[u8],
    i: usize,
    ryu_buf: &mut ryu::Buffer,
    int_buf: &mut itoa::Buffer,
) -> Result<()> {
    let sep = |s: &mut String, j: usize| {
        if j > 0 {
            s.push(',')
        }
    };
    match dtype {
        DType::Float32 => {
            for (j, c) in row.chunks_exact(4).enumerate() {
                let v = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
                if !v.is_finite() {
                    return Err(non_finite(i, j));
                }
                sep(s, j);
                s.push_str(ryu_buf.format_finite(v));
            }
        }
        DType::Float64 => {
            for (j, c) in row.chunks_exact(8).enumerate() {
                let v = f64::from_le_bytes(c.try_into().unwrap());
                if !v.is_finite() {
                    return Err(non_finite(i, j));
                }
                sep(s, j);
                s.push_str(ryu_buf.format_finite(v));
            }
        }
        DType::Float16 | DType::BFloat16 => {
            for (j, c) in row.chunks_exact(2).enumerate() {
                let bits = u16::from_le_bytes([c[0], c[1]]);
                let v = if dtype == DType::Float16 {
                    half::f16::from_bits(bits).to_f64()
                } else {
                    half::bf16::from_bits(bits).to_f64()
                };
                if !v.is_finite() {
                    return Err(non_finite(i, j));
                }
                sep(s, j);
                s.push_str(&shortest_16(bits, v, dtype, ryu_buf));
            }
        }
        DType::Int8 => {
            for (j, &b) in row.iter().enumerate() {
                sep(s, j);
                s.push_str(int_buf.format(b as i8));
            }
        }
        DType::Uint8 | DType::Binary => {
            for (j, &b) in row.iter().enumerate() {
                sep(s, j);
                s.push_str(int_buf.format(b));
            }
        }
    }
    Ok(())
}

/// The shortest decimal that reads back (float64, then rounded to the 16-bit dtype) to `bits`.
fn shortest_16(bits: u16, v: f64, dtype: DType, ryu_buf: &mut ryu::Buffer) -> String {
    if v == 0.0 {
        return if v.is_sign_negative() { "-0.0".into() } else { "0.0".into() };
    }
    let round = |x: f64| if dtype == DType::Float16 { f64_to_f16(x.to_bits()) } else { f64_to_bf16(x.to_bits()) };
    for p in 0..17 {
        let candidate: f64 = format!("{v:.p$e}").parse().expect("Rust formats a parseable float");
        if round(candidate) == bits {
            // ryu writes the shortest form of the candidate, which has the same digits.
            return ryu_buf.format_finite(candidate).to_string();
        }
    }
    ryu_buf.format_finite(v).to_string()
}
