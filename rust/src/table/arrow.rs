//! Arrow IPC stream tables (SPEC.md section 15.7): one schema, record batches totalling `n` rows,
//! each column non-nullable with the field metadata `densewire.type`. Decoding hands the body to
//! arrow's `StreamDecoder` as one buffer: with one record batch, fixed-width columns share the
//! body's memory (bool is bit-packed in Arrow and is unpacked to bytes). Decode only: Arrow golden
//! vectors are decode-only, and this crate has no table Arrow encoder yet.

use super::model::{Column, ColumnData, ColumnType, Table};
use crate::error::{ErrorKind, Result, err};
use crate::tensor::aligned_copy;
use arrow_array::{Array, BooleanArray, FixedSizeListArray, LargeStringArray, StringArray};
use arrow_schema::{DataType, Field};
use bytes::Bytes;

/// The column type of a field: `densewire.type` when present, else inferred from the Arrow type.
fn field_type(f: &Field) -> Result<ColumnType> {
    let bad = |why: String| err(ErrorKind::InvalidField, why).field(f.name().clone());
    let declared = match f.metadata().get("densewire.type") {
        Some(name) => Some(ColumnType::from_name(name).map_err(|e| e.field(f.name().clone()))?),
        None => None,
    };
    let from_arrow = match f.data_type() {
        DataType::Boolean => Some(ColumnType::Bool),
        DataType::Int32 => Some(ColumnType::Int32),
        DataType::Int64 => Some(ColumnType::Int64),
        DataType::Float32 => Some(ColumnType::Float32),
        DataType::Float64 => Some(ColumnType::Float64),
        DataType::Utf8 | DataType::LargeUtf8 => Some(ColumnType::String),
        DataType::FixedSizeBinary(16) => Some(ColumnType::Uuid),
        DataType::FixedSizeList(item, d) if *item.data_type() == DataType::Float32 && *d >= 1 => {
            Some(ColumnType::Float32Vector(*d as usize))
        }
        _ => None,
    };
    match (declared, from_arrow) {
        (Some(t), Some(a)) if t == a => Ok(t),
        (None, Some(a)) => Ok(a),
        (Some(t), _) => Err(bad(format!("a {t} column cannot be carried as Arrow {}", f.data_type()))),
        (None, None) => Err(bad(format!("Arrow type {} is not a densewire column type", f.data_type()))),
    }
}

/// The little-endian bytes of one batch's fixed-width column, sharing arrow's buffer.
fn fixed_bytes(a: &dyn Array, ty: ColumnType) -> Result<Bytes> {
    let (data, start, len) = match ty {
        ColumnType::Float32Vector(d) => {
            let list = a.as_any().downcast_ref::<FixedSizeListArray>().expect("checked against the schema");
            // The list's values array counts floats (and carries any slicing offset).
            let values = list.values().to_data();
            let start = values.offset().checked_add(list.offset().saturating_mul(d));
            (values, start, list.len().checked_mul(d))
        }
        _ => {
            let data = a.to_data();
            let (o, l) = (data.offset(), data.len());
            (data, Some(o), Some(l))
        }
    };
    let w = ty.item_width().expect("fixed-width");
    let range = start.zip(len).and_then(|(s, l)| Some((s.checked_mul(w)?, l.checked_mul(w)?)));
    match (data.buffers().first(), range) {
        (Some(buf), Some((s, l))) if s.checked_add(l).is_some_and(|e| e <= buf.len()) => {
            Ok(Bytes::from_owner(buf.slice_with_length(s, l)))
        }
        _ => Err(err(ErrorKind::Malformed, "an Arrow buffer is shorter than its array")),
    }
}

/// Decodes an Arrow IPC stream of a table. The name comes from the schema metadata
/// `densewire.table`; column types from `densewire.type` (or the Arrow type when absent).
pub fn decode_table_arrow(body: Bytes) -> Result<Table> {
    let (schema, batches) = crate::arrow::read_stream(body)?;
    let name = schema.metadata().get("densewire.table").cloned().unwrap_or_default();
    let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
    let mut columns = Vec::with_capacity(schema.fields().len());
    let mut names = std::collections::HashSet::new();
    for (i, f) in schema.fields().iter().enumerate() {
        // Column names are non-empty and unique (SPEC.md section 15); Arrow allows either.
        if f.name().is_empty() || !names.insert(f.name().as_str()) {
            return Err(err(
                ErrorKind::InvalidField,
                format!("the column name {:?} is empty or appears twice", f.name()),
            )
            .field(format!("columns[{i}].name")));
        }
        let ty = field_type(f)?;
        let nulls = || err(ErrorKind::InvalidField, "the column holds nulls").field(f.name().clone());
        for b in &batches {
            let a = b.column(i);
            if a.null_count() > 0 {
                return Err(nulls());
            }
            if let Some(list) = a.as_any().downcast_ref::<FixedSizeListArray>() {
                if list.values().null_count() > 0 {
                    return Err(nulls());
                }
            }
        }
        let data = match ty {
            ColumnType::Bool => {
                let mut v = Vec::with_capacity(rows);
                for b in &batches {
                    let a = b.column(i).as_any().downcast_ref::<BooleanArray>().expect("checked against the schema");
                    v.extend(a.values().iter().map(u8::from));
                }
                ColumnData::Bool(crate::Values::from_slice(&v))
            }
            ColumnType::String => {
                let mut v = Vec::with_capacity(rows);
                for b in &batches {
                    let a = b.column(i);
                    if let Some(s) = a.as_any().downcast_ref::<StringArray>() {
                        v.extend(s.iter().map(|x| x.unwrap_or_default().to_owned()));
                    } else if let Some(s) = a.as_any().downcast_ref::<LargeStringArray>() {
                        v.extend(s.iter().map(|x| x.unwrap_or_default().to_owned()));
                    }
                }
                ColumnData::String(v)
            }
            _ => {
                let mut parts: Vec<Bytes> =
                    batches.iter().map(|b| fixed_bytes(b.column(i).as_ref(), ty)).collect::<Result<_>>()?;
                let bytes = if parts.len() == 1 { parts.pop().unwrap() } else { aligned_copy(&parts.concat()) };
                ColumnData::fixed(ty, bytes)
            }
        };
        columns.push(Column { name: f.name().clone(), ty, data });
    }
    Ok(Table { name, rows, columns })
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{ArrayRef, Int32Array, RecordBatch};
    use arrow_schema::Schema;
    use std::sync::Arc;

    fn stream(names: &[&str]) -> Bytes {
        let fields: Vec<Field> = names.iter().map(|n| Field::new(*n, DataType::Int32, false)).collect();
        let schema = Arc::new(Schema::new(fields));
        let columns: Vec<ArrayRef> = names.iter().map(|_| Arc::new(Int32Array::from(vec![1, 2])) as ArrayRef).collect();
        let mut out = Vec::new();
        let mut w = arrow_ipc::writer::StreamWriter::try_new(&mut out, &schema).unwrap();
        w.write(&RecordBatch::try_new(schema.clone(), columns).unwrap()).unwrap();
        w.finish().unwrap();
        drop(w);
        Bytes::from(out)
    }

    /// Found by the table_arrow fuzz target (corpus regression-duplicate-column): Arrow allows two
    /// fields of one name (and an empty name); a table does not, and such a stream decoded to a
    /// table no other format could carry.
    #[test]
    fn empty_or_duplicate_column_names_are_invalid() {
        let t = decode_table_arrow(stream(&["x", "y"])).unwrap();
        assert_eq!((t.rows, t.specs().len()), (2, 2));
        for (names, field) in [(&["x", "y", "x"][..], "columns[2].name"), (&["x", ""], "columns[1].name")] {
            let e = decode_table_arrow(stream(names)).unwrap_err();
            assert_eq!((e.kind(), e.field_name()), (ErrorKind::InvalidField, Some(field)), "{names:?}");
        }
    }
}
