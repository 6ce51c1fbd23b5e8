//! Ragged and sparse raw bodies (SPEC.md 20.4): the parts back to back, each padded with zeros to a
//! multiple of 8 bytes except the last (offsets · rows; offsets · indices · values), described by
//! section 7's headers and `Densewire-Kind`. The rows, indices and values share the body.

use super::{Batch, RaggedEmbeddings, RaggedTensor, SparseEmbeddings, check_kind, check_values_dtype, check_vocab};
use crate::dtype::DType;
use crate::embeddings::Usage;
use crate::error::{ErrorKind, Result, err};
use crate::headers::{HEADER_VERSION, Headers};
use crate::raw::{
    HEADER_BYTEORDER, HEADER_DTYPE, HEADER_MODEL, HEADER_PROMPT_TOKENS, HEADER_SHAPE, HEADER_TOTAL_TOKENS, parse_count,
    parse_shape,
};
use crate::tensor::aligned_copy;
use bytes::Bytes;

/// `Densewire-Kind`: `ragged` or `sparse` (absent for a tensor).
pub const HEADER_KIND: &str = "Densewire-Kind";

fn pad8(len: usize) -> usize {
    len.div_ceil(8) * 8
}

fn headers<T>(b: &Batch<T>, kind: &'static str, dtype: DType, shape: String) -> Vec<(&'static str, String)> {
    let mut h = vec![
        (HEADER_VERSION, "1".to_string()),
        (HEADER_KIND, kind.to_string()),
        (HEADER_DTYPE, dtype.name().to_string()),
        (HEADER_SHAPE, shape),
        (HEADER_BYTEORDER, "little".to_string()),
    ];
    if let Some(m) = &b.model {
        h.push((HEADER_MODEL, m.clone()));
    }
    if let Some(u) = b.usage {
        h.push((HEADER_PROMPT_TOKENS, u.prompt_tokens.to_string()));
        h.push((HEADER_TOTAL_TOKENS, u.total_tokens.to_string()));
    }
    h
}

/// The headers of a ragged raw body, in the order of SPEC.md 20.4.
pub fn ragged_raw_headers(b: &RaggedEmbeddings) -> Vec<(&'static str, String)> {
    let (n, d) = b.tensor.shape();
    headers(b, "ragged", b.tensor.dtype(), format!("{n},{d}"))
}

/// The headers of a sparse raw body, in the order of SPEC.md 20.4.
pub fn sparse_raw_headers(b: &SparseEmbeddings) -> Vec<(&'static str, String)> {
    let (n, v) = b.tensor.shape();
    headers(b, "sparse", b.tensor.dtype(), format!("{n},{v}"))
}

fn body(parts: &[&[u8]]) -> Bytes {
    let mut out = Vec::with_capacity(parts.iter().map(|p| pad8(p.len())).sum());
    for (i, p) in parts.iter().enumerate() {
        out.extend_from_slice(p);
        if i + 1 < parts.len() {
            out.resize(pad8(out.len()), 0);
        }
    }
    aligned_copy(&out)
}

pub(crate) fn ragged_body(b: &RaggedEmbeddings) -> Bytes {
    body(&[&super::offsets_bytes(b.tensor.offsets()), b.tensor.rows().as_bytes()])
}

pub(crate) fn sparse_body(b: &SparseEmbeddings) -> Bytes {
    let t = &b.tensor;
    body(&[&super::offsets_bytes(t.offsets()), t.index_bytes(), t.values().as_bytes()])
}

/// What both kinds read from the headers, in order: kind, dtype, shape, byte order.
fn common<H: Headers + ?Sized>(headers: &H, kind: &str) -> Result<(DType, usize, u64)> {
    check_kind(headers.header(HEADER_KIND).map(str::trim), kind, HEADER_KIND)?;
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
            return Err(err(ErrorKind::InvalidField, format!("raw bodies are little-endian, not {bo:?}"))
                .field(HEADER_BYTEORDER));
        }
    }
    Ok((dtype, n, d as u64))
}

fn meta<H: Headers + ?Sized>(headers: &H) -> Result<(Option<String>, Option<Usage>)> {
    let model = headers.header(HEADER_MODEL).map(str::to_owned);
    let usage = match (headers.header(HEADER_PROMPT_TOKENS), headers.header(HEADER_TOTAL_TOKENS)) {
        (None, None) => None,
        (p, t) => Some(Usage {
            prompt_tokens: parse_count(p, HEADER_PROMPT_TOKENS)?,
            total_tokens: parse_count(t, HEADER_TOTAL_TOKENS)?,
        }),
    };
    Ok((model, usage))
}

/// The offsets at the start of the body: `length_mismatch` at the body's length when it is shorter.
fn offsets(body: &Bytes, n: usize) -> Result<Vec<u32>> {
    let want = n.checked_add(1).and_then(|x| x.checked_mul(4)).ok_or_else(super::too_many)?;
    if body.len() < want {
        return Err(err(
            ErrorKind::LengthMismatch,
            format!("the body is {} bytes, its {} offsets need {want}", body.len(), n + 1),
        )
        .at(body.len()));
    }
    super::read_offsets(&body[..want], n, 0)
}

fn whole(body: &Bytes, expected: Option<usize>) -> Result<usize> {
    match expected {
        Some(e) if e == body.len() => Ok(e),
        e => {
            let e = e.unwrap_or(usize::MAX);
            Err(err(ErrorKind::LengthMismatch, format!("the body is {} bytes, its parts need {e}", body.len()))
                .at(body.len().min(e)))
        }
    }
}

/// Decodes a ragged raw body (SPEC.md 20.4); the rows share `body`.
pub fn decode_ragged_raw<H: Headers + ?Sized>(headers: &H, body: Bytes) -> Result<RaggedEmbeddings> {
    let (dtype, n, d) = common(headers, "ragged")?;
    let d = d as usize;
    let offsets = offsets(&body, n)?;
    let start = pad8(4 * (n + 1));
    let rows = *offsets.last().unwrap() as usize;
    let expected = dtype.row_bytes(d).and_then(|rb| rb.checked_mul(rows)).and_then(|r| r.checked_add(start));
    whole(&body, expected)?;
    let data = body.slice(start..);
    let rows = super::rows_tensor(dtype, d, &offsets, data, start)?;
    let (model, usage) = meta(headers)?;
    Ok(Batch { tensor: RaggedTensor { offsets, rows }, model, usage })
}

/// Decodes a sparse raw body (SPEC.md 20.4); the indices and values share `body`.
pub fn decode_sparse_raw<H: Headers + ?Sized>(headers: &H, body: Bytes) -> Result<SparseEmbeddings> {
    let (dtype, n, v) = common(headers, "sparse")?;
    check_vocab(v, HEADER_SHAPE)?;
    check_values_dtype(dtype, HEADER_DTYPE)?;
    let offsets = offsets(&body, n)?;
    let k = *offsets.last().unwrap() as usize;
    let i_start = pad8(4 * (n + 1));
    let v_start = i_start + pad8(4 * k);
    let expected = v_start + k * dtype.item_bytes();
    whole(&body, Some(expected))?;
    let (indices, values) = (body.slice(i_start..i_start + 4 * k), body.slice(v_start..));
    let tensor = super::sparse_parts(dtype, v, offsets, indices, values, i_start, v_start)?;
    let (model, usage) = meta(headers)?;
    Ok(Batch { tensor, model, usage })
}
