//! Reading binary COPY streams (SPEC.md section 16.1 and 16.2, "Reading"): one walk over the
//! tuples that checks every length word and value header at its offset and appends each row's
//! items, swapped from big-endian, to one growing vector that becomes the tensor without a copy.

use super::{CopyColumns, PGCOPY_SIGNATURE, PgCopyData, PgIdType, PgIds, PgVectorType};
use crate::error::{Error, ErrorKind, Result, err};
use crate::tensor::Tensor;

/// Reads a whole stream (as `COPY ... TO STDOUT (FORMAT BINARY)` sends it) of `columns` (an
/// optional id column, then the vector column) into one `(n, d)` tensor of the column type's dtype
/// (float32 for `vector`, float16 for `halfvec`, binary for `bit`, float32 for `sparsevec`,
/// scattered into zeros) and the ids. An empty stream gives `(0, columns.empty_dims)`.
///
/// Errors (SPEC.md section 16), each with the offset of the bad bytes: `truncated` (offset: the
/// stream's length), `malformed` (signature, flags, extension length, a field length below -1,
/// bytes after the trailer, a non-zero unused word, `d < 1`, a bad sparse index or value, a text id
/// that is not UTF-8), `shape_mismatch` (a tuple's field count; a row whose `d` differs from the
/// first row's), `length_mismatch` (a field length that is not what the value's header implies),
/// `invalid_field` on the vector column for a NULL vector.
pub fn decode_pgcopy(data: &[u8], columns: &CopyColumns) -> Result<PgCopyData> {
    let mut pos = header(data)?;
    let mut r = Reader::new(data, columns);
    loop {
        r.need(pos, 2)?;
        let count = i16::from_be_bytes([data[pos], data[pos + 1]]);
        if count == -1 {
            if pos + 2 != data.len() {
                return Err(
                    err(ErrorKind::Malformed, format!("{} bytes after the trailer", data.len() - pos - 2)).at(pos + 2)
                );
            }
            break;
        }
        if count as i64 != columns.count() as i64 {
            let names = match columns.id_type {
                Some(_) => format!("{}, {}", columns.id_column, columns.column),
                None => columns.column.clone(),
            };
            return Err(err(
                ErrorKind::ShapeMismatch,
                format!("a tuple of {count} fields, but the COPY has {} columns ({names})", columns.count()),
            )
            .at(pos));
        }
        pos += 2;
        if let Some(ty) = columns.id_type {
            let len = r.field(pos)?;
            r.id_value(ty, pos, len)?;
            pos += 4 + len.max(0) as usize;
        }
        let len = r.field(pos)?;
        r.vector_value(pos, len)?;
        pos += 4 + len.max(0) as usize;
    }
    r.finish()
}

/// The offset of the first tuple, after checking the signature, the flags and the header extension.
fn header(data: &[u8]) -> Result<usize> {
    let size = data.len();
    let k = size.min(11);
    if data[..k] != PGCOPY_SIGNATURE[..k] {
        return Err(err(
            ErrorKind::Malformed,
            "not a PostgreSQL binary COPY stream (the signature PGCOPY\\n\\377\\r\\n\\0 differs)",
        )
        .at(0));
    }
    if size < 19 {
        return Err(
            err(ErrorKind::Truncated, format!("the stream ends inside its 19-byte header after {size} bytes")).at(size)
        );
    }
    let flags = u32::from_be_bytes(data[11..15].try_into().unwrap());
    if flags & 0x1FFFF != 0 {
        return Err(err(
            ErrorKind::Malformed,
            format!("flags 0x{flags:08x}: tuples with OIDs (bit 16) or an unknown critical flag (bits 0 to 15)"),
        )
        .at(11));
    }
    let ext = i32::from_be_bytes(data[15..19].try_into().unwrap());
    if ext < 0 {
        return Err(err(ErrorKind::Malformed, format!("negative header extension length {ext}")).at(15));
    }
    if 19 + ext as usize > size {
        return Err(err(ErrorKind::Truncated, "the stream ends inside its header extension").at(size));
    }
    Ok(19 + ext as usize)
}

/// The vector column's items, as they are appended row by row.
enum Items {
    F32(Vec<f32>),
    F16(Vec<half::f16>),
    Bits(Vec<u8>),
}

enum Ids {
    Int(Vec<Option<i64>>),
    Text(Vec<Option<String>>),
    Uuid(Vec<Option<[u8; 16]>>),
}

struct Reader<'a> {
    data: &'a [u8],
    cols: &'a CopyColumns,
    d: Option<usize>,
    rows: usize,
    items: Items,
    ids: Option<Ids>,
}

impl<'a> Reader<'a> {
    fn new(data: &'a [u8], cols: &'a CopyColumns) -> Reader<'a> {
        let items = match cols.vector_type {
            PgVectorType::Vector | PgVectorType::Sparsevec => Items::F32(Vec::new()),
            PgVectorType::Halfvec => Items::F16(Vec::new()),
            PgVectorType::Bit => Items::Bits(Vec::new()),
        };
        let ids = cols.id_type.map(|t| match t {
            PgIdType::Int8 | PgIdType::Int4 => Ids::Int(Vec::new()),
            PgIdType::Text => Ids::Text(Vec::new()),
            PgIdType::Uuid => Ids::Uuid(Vec::new()),
        });
        Reader { data, cols, d: None, rows: 0, items, ids }
    }

    fn need(&self, at: usize, k: usize) -> Result<()> {
        let size = self.data.len();
        if at.checked_add(k).is_none_or(|end| end > size) {
            return Err(
                err(ErrorKind::Truncated, format!("the stream ends after {size} bytes, inside a tuple")).at(size)
            );
        }
        Ok(())
    }

    fn i16_at(&self, at: usize) -> i16 {
        i16::from_be_bytes([self.data[at], self.data[at + 1]])
    }

    fn i32_at(&self, at: usize) -> i32 {
        i32::from_be_bytes(self.data[at..at + 4].try_into().unwrap())
    }

    /// The field length at `at` (-1 for NULL), with its bytes present.
    fn field(&self, at: usize) -> Result<i32> {
        self.need(at, 4)?;
        let len = self.i32_at(at);
        if len < -1 {
            return Err(err(ErrorKind::Malformed, format!("field length {len}")).at(at));
        }
        if len >= 0 {
            self.need(at + 4, len as usize)?;
        }
        Ok(len)
    }

    fn id_value(&mut self, ty: PgIdType, at: usize, len: i32) -> Result<()> {
        let (data, cols) = (self.data, self.cols);
        let v = at + 4;
        let value = &data[v..v + len.max(0) as usize];
        let id_err = |kind: ErrorKind, message: String, offset: usize| -> Error {
            err(kind, message).at(offset).field(cols.id_column.clone())
        };
        if len >= 0 && ty != PgIdType::Text && len as usize != ty.width().unwrap() {
            return Err(id_err(
                ErrorKind::LengthMismatch,
                format!("an {ty} id of {len} bytes (it has {})", ty.width().unwrap()),
                at,
            ));
        }
        match self.ids.as_mut().expect("an id column") {
            Ids::Int(v) => v.push((len >= 0).then(|| match ty {
                PgIdType::Int8 => i64::from_be_bytes(value.try_into().unwrap()),
                _ => i32::from_be_bytes(value.try_into().unwrap()) as i64,
            })),
            Ids::Uuid(v) => v.push((len >= 0).then(|| value.try_into().unwrap())),
            Ids::Text(ids) => {
                if len < 0 {
                    ids.push(None);
                } else {
                    match std::str::from_utf8(value) {
                        Ok(s) => ids.push(Some(s.to_owned())),
                        Err(e) => {
                            return Err(id_err(
                                ErrorKind::Malformed,
                                "a text id that is not UTF-8".into(),
                                v + e.valid_up_to(),
                            ));
                        }
                    }
                }
            }
        }
        Ok(())
    }

    fn vector_value(&mut self, at: usize, len: i32) -> Result<()> {
        let (data, cols) = (self.data, self.cols);
        let ty = cols.vector_type;
        let v = at + 4;
        let col_err = |kind: ErrorKind, message: String, offset: usize| -> Error {
            err(kind, message).at(offset).field(cols.column.clone())
        };
        if len == -1 {
            return Err(col_err(ErrorKind::InvalidField, format!("row {} has a NULL {ty}", self.rows), at));
        }
        let head = if ty == PgVectorType::Sparsevec { 12 } else { 4 };
        if len < head {
            return Err(col_err(ErrorKind::LengthMismatch, format!("a {ty} value of {len} bytes"), at));
        }
        let (d, nnz, unused, unused_at) = match ty {
            PgVectorType::Bit => (self.i32_at(v) as i64, 0, 0, v),
            PgVectorType::Sparsevec => {
                (self.i32_at(v) as i64, self.i32_at(v + 4) as i64, self.i32_at(v + 8) as i64, v + 8)
            }
            _ => (self.i16_at(v) as i64, 0, self.i16_at(v + 2) as i64, v + 2),
        };
        if d < 1 {
            return Err(col_err(ErrorKind::Malformed, format!("a {ty} of {d} dimensions"), v));
        }
        if ty == PgVectorType::Sparsevec && !(0..=d).contains(&nnz) {
            return Err(col_err(
                ErrorKind::Malformed,
                format!("a sparsevec of {d} dimensions with {nnz} non-zero values"),
                v + 4,
            ));
        }
        let expected = match ty {
            PgVectorType::Vector => 4 + 4 * d,
            PgVectorType::Halfvec => 4 + 2 * d,
            PgVectorType::Bit => 4 + (d + 7) / 8,
            PgVectorType::Sparsevec => 12 + 8 * nnz,
        };
        if len as i64 != expected {
            return Err(col_err(
                ErrorKind::LengthMismatch,
                format!("a {ty} of {d} dimensions needs {expected} bytes, the field has {len}"),
                at,
            ));
        }
        if unused != 0 {
            return Err(col_err(
                ErrorKind::Malformed,
                format!("the unused word of a {ty} is {unused}, not 0"),
                unused_at,
            ));
        }
        let d = d as usize;
        match self.d {
            None => self.d = Some(d),
            Some(first) if first != d => {
                return Err(col_err(
                    ErrorKind::ShapeMismatch,
                    format!("row {} has {d} dimensions, the first row {first}", self.rows),
                    v,
                ));
            }
            Some(_) => {}
        }
        let body = &data[v + head as usize..v + len as usize];
        match (&mut self.items, ty) {
            (Items::F32(out), PgVectorType::Vector) => {
                out.extend(body.chunks_exact(4).map(|c| f32::from_bits(u32::from_be_bytes(c.try_into().unwrap()))));
            }
            (Items::F16(out), _) => {
                out.extend(body.chunks_exact(2).map(|c| half::f16::from_bits(u16::from_be_bytes([c[0], c[1]]))));
            }
            (Items::Bits(out), _) => out.extend_from_slice(body),
            (Items::F32(out), _) => {
                // sparsevec: the indices (ascending, within 0..d), then the non-zero values.
                let nnz = nnz as usize;
                let (indices, values) = body.split_at(4 * nnz);
                let idx_at = v + 12;
                let mut prev = -1i64;
                for (i, c) in indices.chunks_exact(4).enumerate() {
                    let j = i32::from_be_bytes(c.try_into().unwrap()) as i64;
                    if j < 0 || j >= d as i64 || j <= prev {
                        return Err(col_err(
                            ErrorKind::Malformed,
                            format!("sparsevec index {j} is out of 0..{} or not above the one before it", d - 1),
                            idx_at + 4 * i,
                        ));
                    }
                    prev = j;
                }
                if let Some(i) =
                    values.chunks_exact(4).position(|c| u32::from_be_bytes(c.try_into().unwrap()) & 0x7FFF_FFFF == 0)
                {
                    return Err(col_err(
                        ErrorKind::Malformed,
                        "a sparsevec stores no zero value".into(),
                        idx_at + 4 * (nnz + i),
                    ));
                }
                let start = out.len();
                let total = start.checked_add(d).ok_or_else(|| too_large(self.rows + 1, d))?;
                // A sparsevec of a few bytes stands for up to 4 GB of dense values: the dense tensor
                // is bounded by the stream's size (as Go's DecodeCopy), checked before any of it is
                // allocated, so that a hostile stream cannot exhaust memory.
                let limit = (MAX_SPARSE_DENSE_FACTOR * data.len()).max(MAX_SPARSE_DENSE_MIN);
                if total.saturating_mul(4) > limit {
                    return Err(col_err(
                        ErrorKind::InvalidField,
                        format!(
                            "the dense tensor of these sparsevec rows would exceed {limit} bytes \
                             ({MAX_SPARSE_DENSE_FACTOR} times the stream, at least 64 MiB)"
                        ),
                        v,
                    ));
                }
                out.try_reserve(d).map_err(|_| too_large(self.rows + 1, d))?;
                out.resize(total, 0.0);
                for (c, x) in indices.chunks_exact(4).zip(values.chunks_exact(4)) {
                    let j = i32::from_be_bytes(c.try_into().unwrap()) as usize;
                    out[start + j] = f32::from_bits(u32::from_be_bytes(x.try_into().unwrap()));
                }
            }
        }
        self.rows += 1;
        Ok(())
    }

    fn finish(self) -> Result<PgCopyData> {
        let n = self.rows;
        let d = self.d.unwrap_or(self.cols.empty_dims);
        let tensor = match self.items {
            Items::F32(v) => Tensor::from_vec(n, d, v)?,
            Items::F16(v) => Tensor::from_vec(n, d, v)?,
            Items::Bits(v) => Tensor::from_packed_bits(n, d, v)?, // pad bits are ignored: cleared
        };
        let ids = self.ids.map(|ids| match ids {
            Ids::Int(v) => PgIds::Int(v),
            Ids::Text(v) => PgIds::Text(v),
            Ids::Uuid(v) => PgIds::Uuid(v),
        });
        Ok(PgCopyData { tensor, ids })
    }
}

/// The bound of a sparsevec stream's dense tensor: this many times the stream's bytes, and at least
/// [`MAX_SPARSE_DENSE_MIN`] bytes.
const MAX_SPARSE_DENSE_FACTOR: usize = 4096;
const MAX_SPARSE_DENSE_MIN: usize = 64 << 20;

fn too_large(rows: usize, d: usize) -> Error {
    err(ErrorKind::InvalidField, format!("a dense tensor of {rows} rows of {d} dimensions does not fit in memory"))
}
