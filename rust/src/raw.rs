//! The raw body (SPEC.md section 7): the tensor's little-endian bytes, described by headers.
//! Decoding never copies: the tensor keeps the body's [`Bytes`].

use crate::dtype::DType;
use crate::embeddings::{Embeddings, Usage};
use crate::error::{ErrorKind, Result, err};
use crate::headers::{HEADER_VERSION, Headers};
use crate::tensor::Tensor;
use bytes::Bytes;

/// `Densewire-Dtype`.
pub const HEADER_DTYPE: &str = "Densewire-Dtype";
/// `Densewire-Shape`.
pub const HEADER_SHAPE: &str = "Densewire-Shape";
/// `Densewire-Byteorder`.
pub const HEADER_BYTEORDER: &str = "Densewire-Byteorder";
/// `Densewire-Model`.
pub const HEADER_MODEL: &str = "Densewire-Model";
/// `Densewire-Prompt-Tokens`.
pub const HEADER_PROMPT_TOKENS: &str = "Densewire-Prompt-Tokens";
/// `Densewire-Total-Tokens`.
pub const HEADER_TOTAL_TOKENS: &str = "Densewire-Total-Tokens";
/// `Densewire-Quantization`: the quantization id of an `int8` / `uint8` response (SPEC.md section 17.5).
pub const HEADER_QUANTIZATION: &str = "Densewire-Quantization";

/// The headers that describe a raw body, in the order of SPEC.md section 7. The body itself is
/// `e.tensor.as_bytes()`.
///
/// ```
/// use densewire::{raw_headers, Embeddings, Tensor};
/// let e = Embeddings::from_tensor(Tensor::from_slice(2, 3, &[0f32; 6]).unwrap());
/// assert_eq!(raw_headers(&e)[2], ("Densewire-Shape", "2,3".to_string()));
/// ```
pub fn raw_headers(e: &Embeddings) -> Vec<(&'static str, String)> {
    raw_header_values(e)
        .map(|(header, value)| {
            let text = match value {
                RawValue::Static(s) | RawValue::Text(s) => s.to_string(),
                RawValue::Dtype(d) => d.name().to_string(),
                RawValue::Shape(n, d) => format!("{n},{d}"),
                RawValue::Count(c) => c.to_string(),
            };
            (header.name(), text)
        })
        .collect()
}

/// The `Densewire-*` headers of a raw body, in the order of SPEC.md section 7.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RawHeader {
    Version,
    Dtype,
    Shape,
    Byteorder,
    Model,
    PromptTokens,
    TotalTokens,
    Quantization,
}

impl RawHeader {
    pub(crate) fn name(self) -> &'static str {
        match self {
            RawHeader::Version => HEADER_VERSION,
            RawHeader::Dtype => HEADER_DTYPE,
            RawHeader::Shape => HEADER_SHAPE,
            RawHeader::Byteorder => HEADER_BYTEORDER,
            RawHeader::Model => HEADER_MODEL,
            RawHeader::PromptTokens => HEADER_PROMPT_TOKENS,
            RawHeader::TotalTokens => HEADER_TOTAL_TOKENS,
            RawHeader::Quantization => HEADER_QUANTIZATION,
        }
    }
}

/// The value of one `Densewire-*` header of a raw body, before it is written as text: the axum
/// response writes each kind straight into a header value (the constant ones without copying).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RawValue<'a> {
    /// Text known when compiling (the version, the byte order).
    Static(&'static str),
    /// The dtype's name.
    Dtype(DType),
    /// `n,d`.
    Shape(usize, usize),
    /// A token count.
    Count(u64),
    /// Text of the response (the model id, the quantization id).
    Text(&'a str),
}

/// The headers of a raw body, in the order of SPEC.md section 7 (what [`raw_headers`] writes out).
pub(crate) fn raw_header_values(e: &Embeddings) -> impl Iterator<Item = (RawHeader, RawValue<'_>)> {
    let (n, d) = e.tensor.shape();
    [
        Some((RawHeader::Version, RawValue::Static("1"))),
        Some((RawHeader::Dtype, RawValue::Dtype(e.tensor.dtype()))),
        Some((RawHeader::Shape, RawValue::Shape(n, d))),
        Some((RawHeader::Byteorder, RawValue::Static("little"))),
        e.model.as_deref().map(|m| (RawHeader::Model, RawValue::Text(m))),
        e.usage.map(|u| (RawHeader::PromptTokens, RawValue::Count(u.prompt_tokens))),
        e.usage.map(|u| (RawHeader::TotalTokens, RawValue::Count(u.total_tokens))),
        e.quantization.as_deref().map(|q| (RawHeader::Quantization, RawValue::Text(q))),
    ]
    .into_iter()
    .flatten()
}

/// Decodes a raw body with its headers (names case-insensitive). The tensor shares `body`.
///
/// ```
/// use densewire::{decode_raw, ErrorKind};
/// let headers = [("densewire-dtype", "float32"), ("densewire-shape", "1,2")];
/// let e = decode_raw(&headers, vec![0, 0, 0x80, 0x3f, 0, 0, 0, 0x40].into()).unwrap();
/// assert_eq!(&*e.tensor.as_f32().unwrap(), &[1.0, 2.0]);
/// let bad = decode_raw(&headers, vec![0; 7].into()).unwrap_err();
/// assert_eq!((bad.kind(), bad.offset()), (ErrorKind::LengthMismatch, Some(7)));
/// ```
pub fn decode_raw<H: Headers + ?Sized>(headers: &H, body: Bytes) -> Result<Embeddings> {
    if headers.header(crate::ragged::HEADER_KIND).is_some() {
        return Err(crate::ragged::no_kind(crate::ragged::HEADER_KIND));
    }
    let dtype = match headers.header(HEADER_DTYPE) {
        None => return Err(err(ErrorKind::InvalidField, "the Densewire-Dtype header is missing").field(HEADER_DTYPE)),
        Some(v) => DType::from_name(v.trim()).map_err(|e| e.field(HEADER_DTYPE))?,
    };
    let shape = headers
        .header(HEADER_SHAPE)
        .ok_or_else(|| err(ErrorKind::InvalidField, "the Densewire-Shape header is missing").field(HEADER_SHAPE))?;
    let (n, d) = parse_shape(shape)?;
    if let Some(bo) = headers.header(HEADER_BYTEORDER) {
        if bo.trim() != "little" {
            return Err(err(
                ErrorKind::InvalidField,
                format!("raw bodies are little-endian; Densewire-Byteorder {bo:?} is not accepted"),
            )
            .field(HEADER_BYTEORDER));
        }
    }
    // Padding bits of binary rows are ignored (cleared; a copy only when any is set).
    let tensor = Tensor::new(dtype, n, d, body)?.with_clear_padding_bits();
    let model = headers.header(HEADER_MODEL).map(str::to_owned);
    let usage = match (headers.header(HEADER_PROMPT_TOKENS), headers.header(HEADER_TOTAL_TOKENS)) {
        (None, None) => None,
        (p, t) => Some(Usage {
            prompt_tokens: parse_count(p, HEADER_PROMPT_TOKENS)?,
            total_tokens: parse_count(t, HEADER_TOTAL_TOKENS)?,
        }),
    };
    let quantization = headers.header(HEADER_QUANTIZATION).map(|q| q.trim().to_owned());
    Ok(Embeddings { tensor, model, usage, quantization })
}

pub(crate) fn parse_count(v: Option<&str>, name: &'static str) -> Result<u64> {
    match v {
        None => Ok(0),
        Some(s) => parse_decimal(s.trim())
            .ok_or_else(|| err(ErrorKind::InvalidField, format!("{name} {s:?} is not a decimal integer")).field(name)),
    }
}

fn parse_decimal(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// Parses `n,d` (decimal, no spaces).
pub(crate) fn parse_shape(v: &str) -> Result<(usize, usize)> {
    let bad = || {
        err(ErrorKind::InvalidField, format!("Densewire-Shape {v:?} is not two non-negative integers n,d"))
            .field(HEADER_SHAPE)
    };
    let (a, b) = v.trim().split_once(',').ok_or_else(bad)?;
    let n = parse_decimal(a).and_then(|x| usize::try_from(x).ok()).ok_or_else(bad)?;
    let d = parse_decimal(b).and_then(|x| usize::try_from(x).ok()).ok_or_else(bad)?;
    Ok((n, d))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    fn dec(shape: &str, body: usize) -> Result<Embeddings> {
        decode_raw(&[("DENSEWIRE-DTYPE", "uint8"), ("densewire-shape", shape)], Bytes::from(vec![0u8; body]))
    }

    #[test]
    fn shape_header_is_strict() {
        assert_eq!(dec("2,3", 6).unwrap().tensor.shape(), (2, 3));
        assert_eq!(dec("0,0", 0).unwrap().tensor.shape(), (0, 0));
        for bad in ["2, 3", "+2,3", "2,3,4", "2", ",3", "a,b", "99999999999999999999999,1"] {
            let e = dec(bad, 6).unwrap_err();
            assert_eq!((e.kind(), e.field_name()), (ErrorKind::InvalidField, Some(HEADER_SHAPE)), "{bad}");
        }
    }

    #[test]
    fn shape_overflow_is_invalid_field_not_a_panic() {
        let e = dec("18446744073709551615,18446744073709551615", 0).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidField);
    }

    #[test]
    fn usage_headers_and_zero_copy() {
        let body = Bytes::from(vec![1u8, 2, 3, 4]);
        let h = [
            ("Densewire-Dtype", "int8"),
            ("Densewire-Shape", "2,2"),
            ("Densewire-Model", "m"),
            ("Densewire-Prompt-Tokens", "5"),
            ("Densewire-Total-Tokens", "6"),
        ];
        let e = decode_raw(&h, body.clone()).unwrap();
        assert_eq!(e.tensor.as_bytes().as_ptr(), body.as_ptr(), "the tensor shares the body");
        assert_eq!(e.usage, Some(Usage { prompt_tokens: 5, total_tokens: 6 }));
        assert_eq!(e.model.as_deref(), Some("m"));
        let bad = [("Densewire-Dtype", "int8"), ("Densewire-Shape", "2,2"), ("Densewire-Prompt-Tokens", "x")];
        assert_eq!(decode_raw(&bad, body).unwrap_err().field_name(), Some(HEADER_PROMPT_TOKENS));
    }
}
