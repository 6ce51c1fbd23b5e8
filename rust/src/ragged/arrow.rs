//! Ragged and sparse Arrow IPC streams (SPEC.md 20.7): one non-nullable column `embedding` of
//! `List<FixedSizeList<T, d>>` (ragged) or `Struct<indices: List<UInt32>, values: List<T>>`
//! (sparse, `densewire.vocabulary_size` in the field metadata), `densewire.kind` in the schema
//! metadata. One record batch decodes without copying the rows, indices or values.

use super::{Batch, RaggedEmbeddings, RaggedTensor, SparseEmbeddings, check_kind, check_values_dtype, check_vocab};
use crate::arrow::{arrow_err, column_bytes, count, fixed_rows_type, item_type, read_stream, rows_array};
use crate::dtype::DType;
use crate::embeddings::Usage;
use crate::error::{ErrorKind, Result, err};
use crate::tensor::{Tensor, aligned_copy};
use arrow_array::types::{Float16Type, Float32Type, Float64Type, UInt16Type, UInt32Type};
use arrow_array::{Array, ArrayRef, ListArray, PrimitiveArray, RecordBatch, StructArray};
use arrow_buffer::{Buffer, OffsetBuffer, ScalarBuffer};
use arrow_schema::{DataType, Field, Fields, Schema};
use bytes::Bytes;
use std::collections::HashMap;
use std::sync::Arc;

const COLUMN: &str = "embedding";

fn list_offsets(offsets: &[u32]) -> Result<OffsetBuffer<i32>> {
    let v: Vec<i32> = offsets
        .iter()
        .map(|&o| i32::try_from(o))
        .collect::<std::result::Result<_, _>>()
        .map_err(|_| err(ErrorKind::InvalidField, "an Arrow list holds fewer than 2^31 items").field("offsets"))?;
    Ok(OffsetBuffer::new(ScalarBuffer::from(v)))
}

fn write<T>(b: &Batch<T>, kind: &str, dtype: DType, dims: u64, field: Field, array: ArrayRef) -> Result<Vec<u8>> {
    let mut meta = HashMap::from([
        ("densewire.version".to_string(), "1".to_string()),
        ("densewire.kind".to_string(), kind.to_string()),
        ("densewire.dtype".to_string(), dtype.name().to_string()),
        ("densewire.dimensions".to_string(), dims.to_string()),
    ]);
    if let Some(m) = &b.model {
        meta.insert("densewire.model".into(), m.clone());
    }
    if let Some(u) = b.usage {
        meta.insert("densewire.prompt_tokens".into(), u.prompt_tokens.to_string());
        meta.insert("densewire.total_tokens".into(), u.total_tokens.to_string());
    }
    let schema = Arc::new(Schema::new(vec![field]).with_metadata(meta));
    let batch = RecordBatch::try_new(schema.clone(), vec![array]).map_err(arrow_err)?;
    let mut out = Vec::new();
    let mut w = arrow_ipc::writer::StreamWriter::try_new(&mut out, &schema).map_err(arrow_err)?;
    w.write(&batch).map_err(arrow_err)?;
    w.finish().map_err(arrow_err)?;
    drop(w);
    Ok(out)
}

pub(crate) fn encode_ragged(b: &RaggedEmbeddings) -> Result<Vec<u8>> {
    let t = &b.tensor;
    let (typ, rows) = rows_array(t.rows())?;
    let item = Arc::new(Field::new("item", typ, false));
    let list = ListArray::try_new(item.clone(), list_offsets(t.offsets())?, rows, None).map_err(arrow_err)?;
    let meta = HashMap::from([("densewire.dtype".to_string(), t.dtype().name().to_string())]);
    let field = Field::new(COLUMN, DataType::List(item), false).with_metadata(meta);
    write(b, "ragged", t.dtype(), t.dims() as u64, field, Arc::new(list))
}

fn values_array(t: &Tensor) -> ArrayRef {
    let buffer = if t.as_bytes().is_empty() {
        Buffer::from(arrow_buffer::MutableBuffer::new(0))
    } else {
        Buffer::from(aligned_copy(t.as_bytes()))
    };
    let k = t.dims();
    match t.dtype() {
        DType::Float32 => Arc::new(PrimitiveArray::<Float32Type>::new(ScalarBuffer::new(buffer, 0, k), None)),
        DType::Float16 => Arc::new(PrimitiveArray::<Float16Type>::new(ScalarBuffer::new(buffer, 0, k), None)),
        DType::BFloat16 => Arc::new(PrimitiveArray::<UInt16Type>::new(ScalarBuffer::new(buffer, 0, k), None)),
        _ => Arc::new(PrimitiveArray::<Float64Type>::new(ScalarBuffer::new(buffer, 0, k), None)),
    }
}

fn sparse_fields(dtype: DType) -> Fields {
    let idx_item = Arc::new(Field::new("item", DataType::UInt32, false));
    let val_item = Arc::new(Field::new("item", item_type(dtype), false));
    Fields::from(vec![
        Field::new("indices", DataType::List(idx_item), false),
        Field::new("values", DataType::List(val_item), false),
    ])
}

pub(crate) fn encode_sparse(b: &SparseEmbeddings) -> Result<Vec<u8>> {
    let t = &b.tensor;
    let fields = sparse_fields(t.dtype());
    let offsets = list_offsets(t.offsets())?;
    let indices: ArrayRef =
        Arc::new(PrimitiveArray::<UInt32Type>::new(ScalarBuffer::from(t.indices().into_owned()), None));
    let item = |i: usize| match fields[i].data_type() {
        DataType::List(f) => f.clone(),
        _ => unreachable!(),
    };
    let il = ListArray::try_new(item(0), offsets.clone(), indices, None).map_err(arrow_err)?;
    let vl = ListArray::try_new(item(1), offsets, values_array(t.values()), None).map_err(arrow_err)?;
    let st = StructArray::try_new(fields.clone(), vec![Arc::new(il), Arc::new(vl)], None).map_err(arrow_err)?;
    let meta = HashMap::from([
        ("densewire.dtype".to_string(), t.dtype().name().to_string()),
        ("densewire.vocabulary_size".to_string(), t.vocabulary_size().to_string()),
    ]);
    let field = Field::new(COLUMN, DataType::Struct(fields), false).with_metadata(meta);
    write(b, "sparse", t.dtype(), t.vocabulary_size(), field, Arc::new(st))
}

/// The stream, its `embedding` column (checked for the kind), and the model and usage.
struct Stream {
    field: Arc<Field>,
    meta: HashMap<String, String>,
    columns: Vec<ArrayRef>,
}

fn stream(body: Bytes, kind: &str) -> Result<Stream> {
    let (schema, batches) = read_stream(body)?;
    let meta: HashMap<String, String> = schema.metadata().iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    check_kind(meta.get("densewire.kind").map(String::as_str), kind, "densewire.kind")?;
    let (col, field) = schema
        .column_with_name(COLUMN)
        .ok_or_else(|| err(ErrorKind::InvalidField, "the stream has no column named embedding").field(COLUMN))?;
    let columns = batches.iter().map(|b| b.column(col).clone()).collect();
    Ok(Stream { field: Arc::new(field.clone()), meta, columns })
}

impl Stream {
    fn declared(&self) -> Option<&String> {
        self.field.metadata().get("densewire.dtype").or_else(|| self.meta.get("densewire.dtype"))
    }

    fn model_usage(&self) -> Result<(Option<String>, Option<Usage>)> {
        let m = &self.meta;
        let usage = match (m.get("densewire.prompt_tokens"), m.get("densewire.total_tokens")) {
            (None, None) => None,
            (p, t) => Some(Usage {
                prompt_tokens: p.map(|v| count(v, "densewire.prompt_tokens")).transpose()?.unwrap_or(0),
                total_tokens: t.map(|v| count(v, "densewire.total_tokens")).transpose()?.unwrap_or(0),
            }),
        };
        Ok((m.get("densewire.model").cloned(), usage))
    }
}

fn bad(why: String) -> crate::Error {
    err(ErrorKind::InvalidField, why).field(COLUMN)
}

/// A non-nullable list column's rebased offsets (appended to `offsets`) and its values sliced to them.
fn list_parts(a: &dyn Array, offsets: &mut Vec<u32>) -> Result<ArrayRef> {
    let list = a.as_any().downcast_ref::<ListArray>().ok_or_else(|| bad("the column is not a list".into()))?;
    if list.null_count() > 0 {
        return Err(bad("the embedding column holds nulls".into()));
    }
    let o = list.value_offsets();
    let (first, last) = (o[0], o[o.len() - 1]);
    let base = *offsets.last().unwrap();
    for &x in &o[1..] {
        offsets.push(base + (x - first) as u32);
    }
    Ok(list.values().slice(first as usize, (last - first) as usize))
}

fn joined(parts: Vec<Bytes>) -> Bytes {
    match parts.len() {
        0 => Bytes::new(),
        1 => parts.into_iter().next().unwrap(),
        _ => aligned_copy(&parts.concat()),
    }
}

pub(crate) fn decode_ragged(body: Bytes) -> Result<RaggedEmbeddings> {
    let s = stream(body, "ragged")?;
    let DataType::List(item) = s.field.data_type() else {
        return Err(bad(format!("a ragged column is a List, not {}", s.field.data_type())));
    };
    let (dtype, dims) = fixed_rows_type(item.data_type(), s.declared(), s.meta.get("densewire.dimensions"))?;
    let mut offsets = vec![0u32];
    let mut parts = Vec::with_capacity(s.columns.len());
    for c in &s.columns {
        let rows = list_parts(c.as_ref(), &mut offsets)?;
        parts.push(column_bytes(rows.as_ref(), dtype)?);
    }
    let n = *offsets.last().unwrap() as usize;
    let rows = Tensor::new(dtype, n, dims, joined(parts))?.with_clear_padding_bits();
    let (model, usage) = s.model_usage()?;
    Ok(Batch { tensor: RaggedTensor { offsets, rows }, model, usage })
}

/// The values of a sparse column as little-endian bytes (sharing arrow's buffer).
fn value_bytes(a: &dyn Array, dtype: DType) -> Result<Bytes> {
    if a.null_count() > 0 {
        return Err(bad("the values hold nulls".into()));
    }
    let data = a.to_data();
    let w = dtype.item_bytes();
    Ok(Bytes::from_owner(data.buffers()[0].slice_with_length(data.offset() * w, data.len() * w)))
}

pub(crate) fn decode_sparse(body: Bytes) -> Result<SparseEmbeddings> {
    let s = stream(body, "sparse")?;
    let DataType::Struct(fields) = s.field.data_type() else {
        return Err(bad(format!("a sparse column is a Struct, not {}", s.field.data_type())));
    };
    let name = s.declared().ok_or_else(|| bad("densewire.dtype is missing".into()))?;
    let dtype = DType::from_name(name)?;
    check_values_dtype(dtype, "dtype")?;
    let list_of = |f: &Field, t: &DataType| matches!(f.data_type(), DataType::List(i) if i.data_type() == t);
    let shaped = fields.len() == 2
        && fields[0].name() == "indices"
        && fields[1].name() == "values"
        && list_of(&fields[0], &DataType::UInt32)
        && list_of(&fields[1], &item_type(dtype));
    if !shaped {
        return Err(bad(format!(
            "a sparse {dtype} column is Struct<indices: List<UInt32>, values: List<{}>>",
            item_type(dtype)
        )));
    }
    let vocab = match s.field.metadata().get("densewire.vocabulary_size") {
        Some(v) => {
            count(v, "densewire.vocabulary_size").ok().filter(|v| check_vocab(*v, "densewire.vocabulary_size").is_ok())
        }
        None => None,
    }
    .ok_or_else(|| {
        err(ErrorKind::InvalidField, "densewire.vocabulary_size is missing or not a decimal from 1 to 2^32")
            .field("densewire.vocabulary_size")
    })?;
    let mut offsets = vec![0u32];
    let (mut idx_parts, mut val_parts) = (Vec::new(), Vec::new());
    for c in &s.columns {
        let st = c.as_any().downcast_ref::<StructArray>().ok_or_else(|| bad("the column is not a struct".into()))?;
        if st.null_count() > 0 {
            return Err(bad("the embedding column holds nulls".into()));
        }
        let mut value_offsets = vec![*offsets.last().unwrap()];
        let before = offsets.len();
        let idx = list_parts(st.column(0).as_ref(), &mut offsets)?;
        let vals = list_parts(st.column(1).as_ref(), &mut value_offsets)?;
        if offsets[before - 1..] != value_offsets[..] {
            return Err(err(ErrorKind::ShapeMismatch, "a row's indices and values differ in length").field(COLUMN));
        }
        idx_parts.push(value_bytes(idx.as_ref(), DType::Float32)?); // 4-byte items
        val_parts.push(value_bytes(vals.as_ref(), dtype)?);
    }
    let tensor = super::sparse_parts(dtype, vocab, offsets, joined(idx_parts), joined(val_parts), 0, 0)?;
    let (model, usage) = s.model_usage()?;
    Ok(Batch { tensor, model, usage })
}
