//! Arrow IPC streams (SPEC.md section 10): one non-nullable column `embedding` of
//! `FixedSizeList<item, d>` (bfloat16 as UInt16 bits) or `FixedSizeBinary(ceil(d / 8))` for binary,
//! with densewire's schema and field metadata.
//!
//! Decoding hands the body to arrow's `StreamDecoder` as one buffer, so a stream of one record
//! batch decodes without copying the tensor: the result's [`Bytes`] owns the arrow buffer.

use crate::dtype::DType;
use crate::embeddings::{Embeddings, Usage};
use crate::error::{Error, ErrorKind, Result, err, truncated};
use crate::tensor::{Tensor, aligned_copy};
use arrow_array::types::{Float16Type, Float32Type, Float64Type, Int8Type, UInt8Type, UInt16Type};
use arrow_array::{Array, ArrayRef, FixedSizeBinaryArray, FixedSizeListArray, PrimitiveArray, RecordBatch};
use arrow_buffer::{Buffer, ScalarBuffer};
use arrow_schema::{ArrowError, DataType, Field, Schema};
use bytes::Bytes;
use std::collections::HashMap;
use std::sync::Arc;

const COLUMN: &str = "embedding";

pub(crate) fn arrow_err(e: ArrowError) -> Error {
    err(ErrorKind::Malformed, format!("invalid Arrow IPC stream: {e}"))
}

pub(crate) fn item_type(dtype: DType) -> DataType {
    match dtype {
        DType::Float32 => DataType::Float32,
        DType::Float16 => DataType::Float16,
        DType::BFloat16 => DataType::UInt16,
        DType::Float64 => DataType::Float64,
        DType::Int8 => DataType::Int8,
        DType::Uint8 => DataType::UInt8,
        DType::Binary => unreachable!("binary is FixedSizeBinary"),
    }
}

fn to_i32(v: usize, what: &str) -> Result<i32> {
    i32::try_from(v)
        .map_err(|_| err(ErrorKind::InvalidField, format!("{what} {v} is too large for Arrow")).field("shape"))
}

/// Encodes an embeddings response (or a bare tensor) as an Arrow IPC stream.
///
/// ```
/// use densewire::{decode_arrow, encode_arrow, Embeddings, Tensor};
/// let e = Embeddings::from_tensor(Tensor::from_slice(2, 2, &[1.0f32, 2.0, 3.0, 4.0]).unwrap());
/// let body = encode_arrow(&e).unwrap();
/// assert_eq!(decode_arrow(body.into()).unwrap(), e);
/// ```
pub fn encode_arrow(e: &Embeddings) -> Result<Vec<u8>> {
    let t = &e.tensor;
    let (_, d) = t.shape();
    let dtype = t.dtype();
    let field_meta = HashMap::from([("densewire.dtype".to_string(), dtype.name().to_string())]);
    let (typ, array) = rows_array(t)?;
    let mut meta = HashMap::from([
        ("densewire.version".to_string(), "1".to_string()),
        ("densewire.dtype".to_string(), dtype.name().to_string()),
        ("densewire.dimensions".to_string(), d.to_string()),
    ]);
    if let Some(m) = &e.model {
        meta.insert("densewire.model".into(), m.clone());
    }
    if let Some(u) = e.usage {
        meta.insert("densewire.prompt_tokens".into(), u.prompt_tokens.to_string());
        meta.insert("densewire.total_tokens".into(), u.total_tokens.to_string());
    }
    if let Some(q) = &e.quantization {
        meta.insert("densewire.quantization".into(), q.clone());
    }
    let field = Field::new(COLUMN, typ, false).with_metadata(field_meta);
    let schema = Arc::new(Schema::new(vec![field]).with_metadata(meta));
    let batch = RecordBatch::try_new(schema.clone(), vec![array]).map_err(arrow_err)?;
    let mut out = Vec::with_capacity(t.as_bytes().len() + 1024);
    let mut w = arrow_ipc::writer::StreamWriter::try_new(&mut out, &schema).map_err(arrow_err)?;
    w.write(&batch).map_err(arrow_err)?;
    w.finish().map_err(arrow_err)?;
    drop(w);
    Ok(out)
}

/// The rows of a tensor as one Arrow array of `n` items: `FixedSizeList<item, d>` (bfloat16 as
/// UInt16 bits) or `FixedSizeBinary(ceil(d / 8))` for binary, over the tensor's buffer (no copy
/// when it is 8-byte aligned).
pub(crate) fn rows_array(t: &Tensor) -> Result<(DataType, ArrayRef)> {
    let (n, d) = t.shape();
    let dtype = t.dtype();
    let buffer = if t.as_bytes().is_empty() {
        Buffer::from(arrow_buffer::MutableBuffer::new(0)) // arrow's own (aligned) empty buffer
    } else if (t.as_bytes().as_ptr() as usize) % 8 == 0 {
        Buffer::from(t.bytes().clone()) // no copy
    } else {
        Buffer::from(aligned_copy(t.as_bytes()))
    };
    if dtype == DType::Binary {
        let width = to_i32(t.row_bytes(), "row width")?;
        let arr = FixedSizeBinaryArray::try_new_with_len(width, buffer, None, n).map_err(arrow_err)?;
        return Ok((DataType::FixedSizeBinary(width), Arc::new(arr)));
    }
    let count = n * d;
    let values: ArrayRef = match dtype {
        DType::Float32 => Arc::new(PrimitiveArray::<Float32Type>::new(ScalarBuffer::new(buffer, 0, count), None)),
        DType::Float16 => Arc::new(PrimitiveArray::<Float16Type>::new(ScalarBuffer::new(buffer, 0, count), None)),
        DType::BFloat16 => Arc::new(PrimitiveArray::<UInt16Type>::new(ScalarBuffer::new(buffer, 0, count), None)),
        DType::Float64 => Arc::new(PrimitiveArray::<Float64Type>::new(ScalarBuffer::new(buffer, 0, count), None)),
        DType::Int8 => Arc::new(PrimitiveArray::<Int8Type>::new(ScalarBuffer::new(buffer, 0, count), None)),
        DType::Uint8 => Arc::new(PrimitiveArray::<UInt8Type>::new(ScalarBuffer::new(buffer, 0, count), None)),
        DType::Binary => unreachable!(),
    };
    let item = Arc::new(Field::new("item", item_type(dtype), false));
    let size = to_i32(d, "dimensions")?;
    let arr = FixedSizeListArray::try_new_with_length(item.clone(), size, values, None, n).map_err(arrow_err)?;
    Ok((DataType::FixedSizeList(item, size), Arc::new(arr)))
}

/// Reads a whole Arrow IPC stream: its schema and record batches (sharing `body`). A stream without
/// a record batch is truncated (SPEC.md sections 10 and 15.7). arrow-ipc 60 can panic on crafted
/// streams (an unchecked buffer offset in its reader, found by our fuzz target); a panic inside the
/// reader is reported as a malformed body. This needs panic = "unwind" (the default); under
/// panic = "abort" such input aborts the process.
pub(crate) fn read_stream(body: Bytes) -> Result<(Arc<Schema>, Vec<RecordBatch>)> {
    let len = body.len();
    let decoded = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| -> Result<_> {
        let mut decoder = arrow_ipc::reader::StreamDecoder::new();
        let mut buf = Buffer::from(body);
        let mut batches = Vec::new();
        while let Some(b) = decoder.decode(&mut buf).map_err(arrow_err)? {
            batches.push(b);
        }
        decoder.finish().map_err(|_| truncated(len))?;
        let schema = decoder.schema().ok_or_else(|| truncated(len))?;
        Ok((schema, batches))
    }));
    let (schema, batches) = match decoded {
        Ok(r) => r?,
        Err(_) => return Err(err(ErrorKind::Malformed, "invalid Arrow IPC stream (the Arrow reader rejected it)")),
    };
    if batches.is_empty() {
        return Err(truncated(len));
    }
    Ok((schema, batches))
}

/// Decodes an Arrow IPC stream. The dtype comes from the `densewire.dtype` metadata (field, then
/// schema), or from the Arrow type when there is none (UInt16 then needs the metadata: it is
/// bfloat16 only by declaration). With one record batch, the tensor shares `body`.
pub fn decode_arrow(body: Bytes) -> Result<Embeddings> {
    let (schema, batches) = read_stream(body)?;
    if schema.metadata().contains_key("densewire.kind") {
        return Err(crate::ragged::no_kind("densewire.kind"));
    }
    let (col, field) = schema
        .column_with_name(COLUMN)
        .ok_or_else(|| err(ErrorKind::InvalidField, "the stream has no column named embedding").field(COLUMN))?;
    let meta = schema.metadata();
    let declared = field.metadata().get("densewire.dtype").or_else(|| meta.get("densewire.dtype"));
    let (dtype, dims) = fixed_rows_type(field.data_type(), declared, meta.get("densewire.dimensions"))?;
    let mut parts: Vec<Bytes> = Vec::with_capacity(batches.len());
    let mut rows = 0usize;
    for b in &batches {
        let a = b.column(col);
        rows += a.len();
        parts.push(column_bytes(a.as_ref(), dtype)?);
    }
    let data = match parts.len() {
        0 => Bytes::new(),
        1 => parts.pop().unwrap(),
        _ => aligned_copy(&parts.concat()),
    };
    let tensor = Tensor::new(dtype, rows, dims, data)?.with_clear_padding_bits();
    let model = meta.get("densewire.model").cloned();
    let usage = match (meta.get("densewire.prompt_tokens"), meta.get("densewire.total_tokens")) {
        (None, None) => None,
        (p, t) => Some(Usage {
            prompt_tokens: p.map(|v| count(v, "densewire.prompt_tokens")).transpose()?.unwrap_or(0),
            total_tokens: t.map(|v| count(v, "densewire.total_tokens")).transpose()?.unwrap_or(0),
        }),
    };
    let quantization = meta.get("densewire.quantization").cloned();
    Ok(Embeddings { tensor, model, usage, quantization })
}

/// The dtype and `d` of a column of rows (section 10): `FixedSizeList<item, d>` or
/// `FixedSizeBinary`, checked against the declared `densewire.dtype` (`invalid_field` on
/// `embedding` when they disagree) and, for binary, `densewire.dimensions`.
pub(crate) fn fixed_rows_type(
    typ: &DataType,
    declared: Option<&String>,
    dimensions: Option<&String>,
) -> Result<(DType, usize)> {
    let bad_type = |why: String| err(ErrorKind::InvalidField, why).field(COLUMN);
    Ok(match typ {
        DataType::FixedSizeList(item, size) => {
            let from_type = match item.data_type() {
                DataType::Float32 => Some(DType::Float32),
                DataType::Float16 => Some(DType::Float16),
                DataType::Float64 => Some(DType::Float64),
                DataType::Int8 => Some(DType::Int8),
                DataType::UInt8 => Some(DType::Uint8),
                DataType::UInt16 => None,
                other => return Err(bad_type(format!("list items of type {other} are not a densewire dtype"))),
            };
            let dtype = match (declared, from_type) {
                (Some(name), _) => DType::from_name(name)?,
                (None, Some(d)) => d,
                (None, None) => return Err(bad_type("UInt16 items without densewire.dtype metadata".into())),
            };
            if dtype == DType::Binary || item_type(dtype) != *item.data_type() {
                return Err(bad_type(format!("{dtype} is not carried as {typ}")));
            }
            (dtype, *size as usize)
        }
        DataType::FixedSizeBinary(width) => {
            if let Some(name) = declared {
                if DType::from_name(name)? != DType::Binary {
                    return Err(bad_type(format!("{name} is not carried as {typ}")));
                }
            }
            let width = *width as usize;
            let dims = match dimensions.map(|d| count(d, "densewire.dimensions")).transpose()?.map(|d| d as usize) {
                Some(d) if d.div_ceil(8) == width => d,
                Some(d) => {
                    return Err(err(
                        ErrorKind::ShapeMismatch,
                        format!("densewire.dimensions {d} needs rows of {} bytes, not {width}", d.div_ceil(8)),
                    )
                    .field("densewire.dimensions"));
                }
                None => width * 8,
            };
            (DType::Binary, dims)
        }
        other => return Err(bad_type(format!("type {other} is not a densewire column"))),
    })
}

/// A metadata value that must be a decimal count (SPEC.md section 10): anything else, `6.4e1` or
/// `many`, is `invalid_field` on its key rather than a default.
pub(crate) fn count(value: &str, key: &'static str) -> Result<u64> {
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
        return Err(err(ErrorKind::InvalidField, format!("{key} must be a decimal count, got {value:?}")).field(key));
    }
    value.parse::<u64>().map_err(|_| err(ErrorKind::InvalidField, format!("{key} {value} is out of range")).field(key))
}

/// The little-endian bytes of one batch's column, sharing arrow's buffer.
pub(crate) fn column_bytes(a: &dyn Array, dtype: DType) -> Result<Bytes> {
    let nulls = || err(ErrorKind::InvalidField, "the embedding column holds nulls").field(COLUMN);
    if a.null_count() > 0 {
        return Err(nulls());
    }
    if dtype == DType::Binary {
        let data = a.to_data();
        let width = match data.data_type() {
            DataType::FixedSizeBinary(w) => *w as usize,
            _ => unreachable!("checked against the schema"),
        };
        let buf = data.buffers()[0].slice_with_length(data.offset() * width, data.len() * width);
        return Ok(Bytes::from_owner(buf));
    }
    let list = a.as_any().downcast_ref::<FixedSizeListArray>().expect("checked against the schema");
    let values = list.values();
    if values.null_count() > 0 {
        return Err(nulls());
    }
    let data = values.to_data();
    let w = dtype.item_bytes();
    let buf = data.buffers()[0].slice_with_length(data.offset() * w, data.len() * w);
    Ok(Bytes::from_owner(buf))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_dtype_round_trips_and_single_batches_do_not_copy() {
        for dtype in DType::ALL {
            let d = 11;
            let bytes: Vec<u8> = (0..3 * dtype.row_bytes(d).unwrap()).map(|i| i as u8).collect();
            let t = Tensor::from_packed_bits(3, d, bytes.clone())
                .ok()
                .filter(|_| dtype == DType::Binary)
                .unwrap_or_else(|| Tensor::new(dtype, 3, d, crate::tensor::aligned_copy(&bytes)).unwrap());
            let e = Embeddings {
                tensor: t,
                model: Some("m".into()),
                usage: Some(Usage { prompt_tokens: 1, total_tokens: 2 }),
                quantization: matches!(dtype, DType::Int8 | DType::Uint8).then(|| "455fc59476466b04".into()),
            };
            let body = Bytes::from(encode_arrow(&e).unwrap());
            let back = decode_arrow(body.clone()).unwrap();
            assert_eq!(back, e, "{dtype}");
            let inside = body.as_ptr_range();
            assert!(inside.contains(&back.tensor.as_bytes().as_ptr()), "{dtype}: the tensor is a view of the body");
        }
    }

    #[test]
    fn several_batches_concatenate_and_bad_columns_fail() {
        let item = Arc::new(Field::new("item", DataType::Float32, false));
        let schema = Arc::new(Schema::new(vec![Field::new(COLUMN, DataType::FixedSizeList(item.clone(), 2), false)]));
        let mut out = Vec::new();
        let mut w = arrow_ipc::writer::StreamWriter::try_new(&mut out, &schema).unwrap();
        for v in [[1.0f32, 2.0], [3.0, 4.0]] {
            let values = Arc::new(PrimitiveArray::<Float32Type>::from(v.to_vec()));
            let list = FixedSizeListArray::try_new(item.clone(), 2, values, None).unwrap();
            w.write(&RecordBatch::try_new(schema.clone(), vec![Arc::new(list)]).unwrap()).unwrap();
        }
        w.finish().unwrap();
        drop(w);
        // The end-of-stream marker is optional.
        let without_eos = decode_arrow(Bytes::from(out[..out.len() - 8].to_vec())).unwrap();
        assert_eq!(without_eos.tensor.shape(), (2, 2));
        // No densewire metadata: the dtype comes from the Arrow type.
        let e = decode_arrow(Bytes::from(out.clone())).unwrap();
        assert_eq!(&*e.tensor.as_f32().unwrap(), &[1.0, 2.0, 3.0, 4.0]);
        assert_eq!(decode_arrow(Bytes::from(out[..out.len() - 5].to_vec())).unwrap_err().kind(), ErrorKind::Truncated);
        let garbage = decode_arrow(Bytes::from_static(b"not arrow at all")).unwrap_err().kind();
        assert!(matches!(garbage, ErrorKind::Malformed | ErrorKind::Truncated), "{garbage:?}");
        let mut bad = vec![0xff, 0xff, 0xff, 0xff, 8, 0, 0, 0];
        bad.extend([0xee; 8]);
        assert_eq!(decode_arrow(Bytes::from(bad)).unwrap_err().kind(), ErrorKind::Malformed);
    }
}
