//! Ragged and sparse responses in the JSON envelope (SPEC.md 20.3): section 6.2's response with
//! `kind`, per item the matrix (`embedding` and `shape`) or the sparse vector (`indices`, `values`,
//! `nnz`), and `dimensions` required.

use super::{Batch, RaggedEmbeddings, RaggedTensor, SparseEmbeddings, SparseTensor, check_kind, check_values_dtype};
use crate::base64::{decode_base64, encode_base64_into};
use crate::dtype::{ByteOrder, DType, swap_items};
use crate::embeddings::{EncodingFormat, JsonOptions, Usage};
use crate::error::{Error, ErrorKind, Result, err};
use crate::json::{json_error, put_number, write_numbers};
use crate::tensor::{Tensor, aligned_copy};
use serde_json::Value;
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt::Write;

type Top<'a> = HashMap<Cow<'a, str>, &'a RawValue>;

fn invalid(field: impl Into<Cow<'static, str>>, message: impl Into<Cow<'static, str>>) -> Error {
    err(ErrorKind::InvalidField, message).field(field)
}

/// The envelope both kinds share, checked in SPEC.md 20.3's order: kind, data, dtype, byteorder,
/// dimensions, model, usage (then every item's index, then each item by position, in full).
struct Head<'a> {
    dtype: DType,
    order: ByteOrder,
    dims: u64,
    data: Vec<&'a RawValue>,
    model: Option<String>,
    usage: Option<Usage>,
}

fn value(raw: &RawValue) -> Result<Value> {
    serde_json::from_str(raw.get()).map_err(|e| json_error(raw.get().as_bytes(), &e))
}

fn head<'a>(text: &'a [u8], kind: &str) -> Result<Head<'a>> {
    let top: Top<'a> = match serde_json::from_slice(text) {
        Ok(top) => top,
        Err(e) if e.is_data() => return Err(err(ErrorKind::Malformed, "the JSON body is not an object").at(0)),
        Err(e) => return Err(json_error(text, &e)),
    };
    let string = |k: &str| -> Result<Option<Value>> { top.get(k).map(|r| value(r)).transpose() };
    let kind_value = string("kind")?;
    check_kind(kind_value.as_ref().map(|v| v.as_str().unwrap_or("(not a string)")), kind, "kind")?;
    let data: Vec<&RawValue> = match top.get("data") {
        None => return Err(invalid("data", "data is missing")),
        Some(raw) => serde_json::from_str(raw.get()).map_err(|_| invalid("data", "data is not an array"))?,
    };
    let dtype = match string("dtype")? {
        None | Some(Value::Null) => DType::Float32,
        Some(Value::String(s)) => DType::from_name(&s).map_err(|e| e.or_field("dtype"))?,
        Some(_) => return Err(invalid("dtype", "dtype is not a string")),
    };
    if kind == "sparse" {
        check_values_dtype(dtype, "dtype")?;
    }
    let order = match string("byteorder")? {
        None | Some(Value::Null) => ByteOrder::Little,
        Some(Value::String(s)) => ByteOrder::from_name(&s).map_err(|e| e.or_field("byteorder"))?,
        Some(_) => return Err(invalid("byteorder", "byteorder is not a string")),
    };
    let dims = string("dimensions")?.and_then(|v| v.as_u64()).ok_or_else(|| {
        invalid("dimensions", format!("dimensions is required for a {kind} response: a non-negative integer"))
    })?;
    if kind == "sparse" {
        super::check_vocab(dims, "dimensions")?;
    }
    let model = match string("model")? {
        None | Some(Value::Null) => None,
        Some(Value::String(m)) => Some(m),
        Some(_) => return Err(invalid("model", "model is not a string")),
    };
    let usage = Usage::from_json(top.get("usage").copied())?;
    Ok(Head { dtype, order, dims, data, model, usage })
}

/// Every item of `data` as an object with its `index` (section 6.2's rules), in the order of `data`:
/// all of them before any item's contents (SPEC.md 20.3).
fn placed(data: &[&RawValue]) -> Result<Vec<(serde_json::Map<String, Value>, usize)>> {
    let mut seen = vec![false; data.len()];
    data.iter().enumerate().map(|(i, raw)| item_at(raw, i, &mut seen)).collect()
}

/// Item `i` of `data` as an object, and its `index` checked (section 6.2's rule) against `seen`.
fn item_at(raw: &RawValue, i: usize, seen: &mut [bool]) -> Result<(serde_json::Map<String, Value>, usize)> {
    let n = seen.len();
    let Value::Object(item) = value(raw)? else {
        return Err(invalid(format!("data[{i}]"), "an element of data is not an object"));
    };
    let field = || format!("data[{i}].index");
    let k = match item.get("index") {
        None => return Err(invalid(field(), "index is missing")),
        Some(v) => v.as_u64().ok_or_else(|| invalid(field(), "index is not a non-negative integer"))?,
    };
    if k >= n as u64 {
        return Err(err(ErrorKind::ShapeMismatch, format!("index {k} is outside [0, {n})")).field(field()));
    }
    if seen[k as usize] {
        return Err(err(ErrorKind::ShapeMismatch, format!("index {k} occurs more than once")).field(field()));
    }
    seen[k as usize] = true;
    Ok((item, k as usize))
}

fn base64_part(s: &str, want: usize, order: ByteOrder, item: usize, field: String) -> Result<Vec<u8>> {
    let mut bytes = decode_base64(s).map_err(|e| e.field(field.clone()))?;
    if bytes.len() != want {
        return Err(err(ErrorKind::LengthMismatch, format!("{} bytes, {want} expected", bytes.len()))
            .at(bytes.len().min(want))
            .field(field));
    }
    if order == ByteOrder::Big && item > 1 {
        swap_items(&mut bytes, item);
    }
    Ok(bytes)
}

/// Decodes a ragged JSON response (SPEC.md 20.3).
pub fn decode_ragged_json(text: &[u8]) -> Result<RaggedEmbeddings> {
    let h = head(text, "ragged")?;
    let d = usize::try_from(h.dims).map_err(|_| invalid("dimensions", "dimensions is too large"))?;
    let rb = h.dtype.row_bytes(d).ok_or_else(|| invalid("dimensions", "dimensions is too large"))?;
    let mut parts: Vec<(usize, Vec<u8>)> = vec![(0, Vec::new()); h.data.len()];
    for (i, (item, k)) in placed(&h.data)?.into_iter().enumerate() {
        let sfield = || format!("data[{i}].shape");
        let shape = match item.get("shape") {
            None | Some(Value::Null) => None,
            Some(Value::Array(a)) if a.len() == 2 && a.iter().all(|v| v.as_u64().is_some()) => {
                Some((a[0].as_u64().unwrap(), a[1].as_u64().unwrap()))
            }
            Some(_) => return Err(invalid(sfield(), "shape is not two non-negative integers [m, d]")),
        };
        if let Some((_, sd)) = shape {
            if sd != h.dims {
                return Err(err(ErrorKind::ShapeMismatch, format!("shape[1] is {sd}, dimensions is {}", h.dims))
                    .field(sfield()));
            }
        }
        let efield = || format!("data[{i}].embedding");
        match item.get("embedding") {
            Some(Value::String(s)) => {
                let (m, _) = shape.ok_or_else(|| invalid(sfield(), "shape is required for a Base64 item"))?;
                let want = usize::try_from(m)
                    .ok()
                    .and_then(|m| m.checked_mul(rb))
                    .ok_or_else(|| invalid(sfield(), "shape is too large"))?;
                parts[k] = (m as usize, base64_part(s, want, h.order, h.dtype.item_bytes(), efield())?);
            }
            Some(Value::Array(rows)) => {
                if let Some((m, _)) = shape {
                    if m != rows.len() as u64 {
                        return Err(err(ErrorKind::ShapeMismatch, format!("{} rows, shape[0] is {m}", rows.len()))
                            .field(sfield()));
                    }
                }
                let want = if h.dtype == DType::Binary { rb } else { d };
                let mut buf = vec![0u8; rows.len() * rb];
                for (r, row) in rows.iter().enumerate() {
                    let rfield = || format!("data[{i}].embedding[{r}]");
                    let Some(row) = row.as_array().filter(|a| a.len() == want) else {
                        return Err(err(ErrorKind::ShapeMismatch, format!("row {r} is not an array of {want} items"))
                            .field(rfield()));
                    };
                    let slot = &mut buf[r * rb..(r + 1) * rb];
                    for (k, x) in row.iter().enumerate() {
                        let ifield = || format!("data[{i}].embedding[{r}][{k}]");
                        // a boolean or null is no number (it must not become a NaN)
                        let x = x.as_f64().ok_or_else(|| invalid(ifield(), "an item is not a number"))?;
                        put_number(h.dtype, x, slot, k).map_err(|what| invalid(ifield(), what))?;
                    }
                }
                parts[k] = (rows.len(), buf);
            }
            _ => return Err(invalid(efield(), "embedding is neither a Base64 string nor an array of rows")),
        }
    }
    let mut offsets = vec![0u32];
    let mut rows = Vec::new();
    for (m, bytes) in &parts {
        rows.extend_from_slice(bytes);
        let total = *offsets.last().unwrap() as usize + m;
        offsets.push(u32::try_from(total).map_err(|_| super::too_many())?);
    }
    let n = *offsets.last().unwrap() as usize;
    let tensor = Tensor::new(h.dtype, n, d, aligned_copy(&rows))?.with_clear_padding_bits();
    Ok(Batch { tensor: RaggedTensor { offsets, rows: tensor }, model: h.model, usage: h.usage })
}

/// Decodes a sparse JSON response (SPEC.md 20.3).
pub fn decode_sparse_json(text: &[u8]) -> Result<SparseEmbeddings> {
    let h = head(text, "sparse")?;
    let item_bytes = h.dtype.item_bytes();
    let mut parts: Vec<(Vec<u8>, Vec<u8>)> = vec![(Vec::new(), Vec::new()); h.data.len()];
    for (i, (item, k)) in placed(&h.data)?.into_iter().enumerate() {
        let field = |k: &str| format!("data[{i}].{k}");
        let nnz = match item.get("nnz") {
            None | Some(Value::Null) => None,
            Some(v) => Some(v.as_u64().ok_or_else(|| invalid(field("nnz"), "nnz is not a non-negative integer"))?),
        };
        let (idx, vals) = match (item.get("indices"), item.get("values")) {
            (Some(Value::String(si)), Some(Value::String(sv))) => {
                let k = nnz.ok_or_else(|| invalid(field("nnz"), "nnz is required for a Base64 item"))?;
                let k = usize::try_from(k)
                    .ok()
                    .filter(|k| k.checked_mul(8).is_some())
                    .ok_or_else(|| invalid(field("nnz"), "nnz is too large"))?;
                let idx = base64_part(si, 4 * k, h.order, 4, field("indices"))?;
                let vals = base64_part(sv, k * item_bytes, h.order, item_bytes, field("values"))?;
                (idx, vals)
            }
            (Some(Value::Array(ai)), Some(Value::Array(av))) => {
                let mut idx = Vec::with_capacity(4 * ai.len());
                for (j, x) in ai.iter().enumerate() {
                    let x = x.as_u64().filter(|&x| x <= u64::from(u32::MAX)).ok_or_else(|| {
                        invalid(format!("data[{i}].indices[{j}]"), "an index is not an integer from 0 to 2^32 - 1")
                    })?;
                    idx.extend_from_slice(&(x as u32).to_le_bytes());
                }
                if av.len() != ai.len() || nnz.is_some_and(|k| k != ai.len() as u64) {
                    return Err(err(
                        ErrorKind::ShapeMismatch,
                        format!("{} indices, {} values, nnz {nnz:?}", ai.len(), av.len()),
                    )
                    .field(field("values")));
                }
                let mut vals = vec![0u8; av.len() * item_bytes];
                for (j, x) in av.iter().enumerate() {
                    let vfield = || format!("data[{i}].values[{j}]");
                    let x = x.as_f64().ok_or_else(|| invalid(vfield(), "a value is not a number"))?;
                    put_number(h.dtype, x, &mut vals, j).map_err(|what| invalid(vfield(), what))?;
                }
                (idx, vals)
            }
            (Some(Value::String(_) | Value::Array(_)), _) => {
                return Err(invalid(
                    field("values"),
                    "values is not of the kind of indices (both Base64 or both arrays)",
                ));
            }
            _ => return Err(invalid(field("indices"), "indices is neither a Base64 string nor an array")),
        };
        // ascending, below V, within the item
        let at = |j: usize| u32::from_le_bytes(idx[4 * j..4 * j + 4].try_into().unwrap());
        for j in 0..idx.len() / 4 {
            if u64::from(at(j)) >= h.dims || (j > 0 && at(j) <= at(j - 1)) {
                return Err(invalid(
                    format!("data[{i}].indices[{j}]"),
                    format!("index {} is not below {} and above the one before it", at(j), h.dims),
                ));
            }
        }
        parts[k] = (idx, vals);
    }
    let mut offsets = vec![0u32];
    let (mut idx, mut vals) = (Vec::new(), Vec::new());
    for (pi, pv) in &parts {
        idx.extend_from_slice(pi);
        vals.extend_from_slice(pv);
        offsets.push(u32::try_from(idx.len() / 4).map_err(|_| super::too_many())?);
    }
    let k = idx.len() / 4;
    let values = Tensor::new(h.dtype, 1, k, aligned_copy(&vals))?;
    let usage = h.usage;
    let tensor = SparseTensor { vocab: h.dims, offsets, indices: aligned_copy(&idx), values };
    Ok(Batch { tensor, model: h.model, usage })
}

fn push_base64(s: &mut String, bytes: &[u8], order: ByteOrder, item: usize) {
    s.push('"');
    if order == ByteOrder::Big && item > 1 {
        let mut swapped = bytes.to_vec();
        swap_items(&mut swapped, item);
        encode_base64_into(&swapped, s);
    } else {
        encode_base64_into(bytes, s);
    }
    s.push('"');
}

fn tail<T>(s: &mut String, b: &Batch<T>, kind: &str, dtype: DType, opts: JsonOptions, dims: u64) {
    s.push_str(r#"],"model":"#);
    s.push_str(&serde_json::to_string(b.model.as_deref().unwrap_or("")).expect("a string serializes"));
    let u = b.usage.unwrap_or_default();
    let order = if opts.encoding_format == EncodingFormat::Base64 { opts.byteorder } else { ByteOrder::Little };
    let _ = write!(
        s,
        r#","usage":{{"prompt_tokens":{},"total_tokens":{}}},"kind":"{kind}","dtype":"{dtype}","byteorder":"{order}","dimensions":{dims}}}"#,
        u.prompt_tokens, u.total_tokens
    );
}

/// Re-fields a number writer's `non_finite` error (`data[i].embedding[j]`) as `field(j)`.
fn numbers(s: &mut String, dtype: DType, bytes: &[u8], field: impl Fn(usize) -> String) -> Result<()> {
    let (mut ryu_buf, mut int_buf) = (ryu::Buffer::new(), itoa::Buffer::new());
    s.push('[');
    let r = write_numbers(s, dtype, bytes, 0, &mut ryu_buf, &mut int_buf);
    s.push(']');
    r.map_err(|e| {
        let j = e.field_name().and_then(|f| f.rsplit('[').next()?.trim_end_matches(']').parse().ok()).unwrap_or(0);
        e.field(field(j))
    })
}

/// Encodes a ragged response as the JSON envelope (SPEC.md 20.3); float items fail with
/// `non_finite` on `data[i].embedding[r][k]` for NaN or ±Infinity.
pub fn encode_ragged_json(b: &RaggedEmbeddings, opts: JsonOptions) -> Result<String> {
    let t = &b.tensor;
    let (dtype, d) = (t.dtype(), t.dims());
    let mut s = String::with_capacity(t.rows().as_bytes().len() * 2 + 200);
    s.push_str(r#"{"object":"list","data":["#);
    for i in 0..t.len() {
        let m = t.matrix(i);
        let _ = write!(s, r#"{}{{"object":"embedding","index":{i},"embedding":"#, if i > 0 { "," } else { "" });
        match opts.encoding_format {
            EncodingFormat::Base64 => push_base64(&mut s, m.as_bytes(), opts.byteorder, dtype.item_bytes()),
            EncodingFormat::Float => {
                s.push('[');
                for r in 0..m.rows() {
                    if r > 0 {
                        s.push(',');
                    }
                    numbers(&mut s, dtype, m.row(r), |k| format!("data[{i}].embedding[{r}][{k}]"))?;
                }
                s.push(']');
            }
        }
        let _ = write!(s, r#","shape":[{},{d}]}}"#, m.rows());
    }
    tail(&mut s, b, "ragged", dtype, opts, d as u64);
    Ok(s)
}

/// Encodes a sparse response as the JSON envelope (SPEC.md 20.3); float values fail with
/// `non_finite` on `data[i].values[j]` for NaN or ±Infinity.
pub fn encode_sparse_json(b: &SparseEmbeddings, opts: JsonOptions) -> Result<String> {
    let t = &b.tensor;
    let dtype = t.dtype();
    let item = dtype.item_bytes();
    let (idx, vals) = (t.index_bytes(), t.values().as_bytes());
    let indices = t.indices();
    let mut s = String::with_capacity(idx.len() * 3 + vals.len() * 3 + 200);
    s.push_str(r#"{"object":"list","data":["#);
    for i in 0..t.len() {
        let r = t.range(i);
        let _ = write!(s, r#"{}{{"object":"sparse_embedding","index":{i},"indices":"#, if i > 0 { "," } else { "" });
        match opts.encoding_format {
            EncodingFormat::Base64 => {
                push_base64(&mut s, &idx[4 * r.start..4 * r.end], opts.byteorder, 4);
                s.push_str(r#","values":"#);
                push_base64(&mut s, &vals[item * r.start..item * r.end], opts.byteorder, item);
            }
            EncodingFormat::Float => {
                s.push('[');
                for (j, x) in indices[r.clone()].iter().enumerate() {
                    let _ = write!(s, "{}{x}", if j > 0 { "," } else { "" });
                }
                s.push_str(r#"],"values":"#);
                numbers(&mut s, dtype, &vals[item * r.start..item * r.end], |j| format!("data[{i}].values[{j}]"))?;
            }
        }
        let _ = write!(s, r#","nnz":{}}}"#, r.len());
    }
    tail(&mut s, b, "sparse", dtype, opts, t.vocabulary_size());
    Ok(s)
}
