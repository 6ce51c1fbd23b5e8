//! PostgreSQL binary COPY streams of pgvector columns (SPEC.md section 16).
//!
//! [`encode_pgcopy`] writes the stream of `COPY table (id, embedding) FROM STDIN (FORMAT BINARY)` from
//! one `(n, d)` [`Tensor`] and optional ids; [`decode_pgcopy`] reads the stream of
//! `COPY ... TO STDOUT (FORMAT BINARY)` back into one tensor of the column type's dtype. Every number
//! of the stream is big-endian: the writer byte-swaps whole rows of the tensor's little-endian bytes
//! into one buffer (a loop the compiler vectorises), the reader swaps them back the same way.
//!
//! ```
//! use densewire::{decode_pgcopy, encode_pgcopy, CopyColumns, PgIdType, PgIds, PgVectorType, Tensor};
//!
//! let cols = CopyColumns::new(PgVectorType::Vector, "embedding").with_id(PgIdType::Int8, "id");
//! let t = Tensor::from_slice(1, 2, &[1.0f32, -2.5])?;
//! let stream = encode_pgcopy(&t, &cols, Some(&PgIds::from(vec![7i64])))?;
//! assert_eq!(stream.len(), 51);
//! let back = decode_pgcopy(&stream, &cols)?;
//! assert_eq!(back.tensor, t);
//! assert_eq!(back.ids, Some(PgIds::Int(vec![Some(7)])));
//! # Ok::<(), densewire::Error>(())
//! ```

mod decode;
mod encode;

pub use decode::decode_pgcopy;
pub use encode::{PgCopyChunks, encode_pgcopy, encode_pgcopy_rows, pgcopy_chunks};

use crate::dtype::DType;
use crate::error::{ErrorKind, Result, err};
use crate::tensor::Tensor;
use std::fmt;

/// The 11-byte signature that starts every binary COPY stream: `PGCOPY\n\377\r\n\0`.
pub const PGCOPY_SIGNATURE: &[u8; 11] = b"PGCOPY\n\xff\r\n\x00";
/// The 19 bytes a writer starts a stream with: the signature, flags 0, no header extension.
pub const PGCOPY_HEADER: &[u8; 19] = b"PGCOPY\n\xff\r\n\x00\x00\x00\x00\x00\x00\x00\x00\x00";
/// The 2 bytes that end a stream (a field count of -1).
pub const PGCOPY_TRAILER: &[u8; 2] = b"\xff\xff";

/// The most non-zero values pgvector stores in one `sparsevec`.
pub const SPARSEVEC_MAX_NNZ: usize = 16_000;

/// A pgvector column type (SPEC.md section 16.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PgVectorType {
    /// `vector(d)`: float32 items; read as a float32 tensor.
    Vector,
    /// `halfvec(d)`: float16 items; read as a float16 tensor.
    Halfvec,
    /// `bit(d)`: packed bits; read as a binary tensor.
    Bit,
    /// `sparsevec(d)`: the non-zero float32 items and their indices; read as a dense float32 tensor.
    Sparsevec,
}

impl PgVectorType {
    /// All four, in the order of SPEC.md section 16.2.
    pub const ALL: [PgVectorType; 4] =
        [PgVectorType::Vector, PgVectorType::Halfvec, PgVectorType::Bit, PgVectorType::Sparsevec];

    /// The PostgreSQL type name (`vector`, `halfvec`, `bit`, `sparsevec`).
    pub fn name(self) -> &'static str {
        match self {
            PgVectorType::Vector => "vector",
            PgVectorType::Halfvec => "halfvec",
            PgVectorType::Bit => "bit",
            PgVectorType::Sparsevec => "sparsevec",
        }
    }

    /// Parses a type name; anything else is `invalid_field` on `type`.
    pub fn from_name(name: &str) -> Result<PgVectorType> {
        PgVectorType::ALL.into_iter().find(|t| t.name() == name).ok_or_else(|| {
            err(
                ErrorKind::InvalidField,
                format!("unknown vector type {name:?}; expected vector, halfvec, bit or sparsevec"),
            )
            .field("type")
        })
    }

    /// The dtype a reader returns for this column type.
    pub fn dtype(self) -> DType {
        match self {
            PgVectorType::Vector | PgVectorType::Sparsevec => DType::Float32,
            PgVectorType::Halfvec => DType::Float16,
            PgVectorType::Bit => DType::Binary,
        }
    }

    /// The most dimensions a value of this type has (pgvector 0.8.6; PostgreSQL's bit strings).
    pub fn max_dims(self) -> usize {
        match self {
            PgVectorType::Vector | PgVectorType::Halfvec => 16_000,
            PgVectorType::Bit => i32::MAX as usize,
            PgVectorType::Sparsevec => 1_000_000_000,
        }
    }
}

impl fmt::Display for PgVectorType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The PostgreSQL type of an id column (SPEC.md section 16.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PgIdType {
    /// `int8` (`bigint`): 8 bytes.
    Int8,
    /// `int4` (`integer`): 4 bytes.
    Int4,
    /// `text`: UTF-8 bytes.
    Text,
    /// `uuid`: 16 bytes.
    Uuid,
}

impl PgIdType {
    /// All four.
    pub const ALL: [PgIdType; 4] = [PgIdType::Int8, PgIdType::Int4, PgIdType::Text, PgIdType::Uuid];

    /// The PostgreSQL type name (`int8`, `int4`, `text`, `uuid`).
    pub fn name(self) -> &'static str {
        match self {
            PgIdType::Int8 => "int8",
            PgIdType::Int4 => "int4",
            PgIdType::Text => "text",
            PgIdType::Uuid => "uuid",
        }
    }

    /// Parses a type name (`bigint` and `integer` too); anything else is `invalid_field` on `type`.
    pub fn from_name(name: &str) -> Result<PgIdType> {
        Ok(match name {
            "int8" | "bigint" => PgIdType::Int8,
            "int4" | "integer" => PgIdType::Int4,
            "text" => PgIdType::Text,
            "uuid" => PgIdType::Uuid,
            _ => {
                return Err(err(
                    ErrorKind::InvalidField,
                    format!("unknown id type {name:?}; expected int8, int4, text or uuid"),
                )
                .field("type"));
            }
        })
    }

    /// The byte width of a value, `None` for `text`.
    pub fn width(self) -> Option<usize> {
        match self {
            PgIdType::Int8 => Some(8),
            PgIdType::Int4 => Some(4),
            PgIdType::Uuid => Some(16),
            PgIdType::Text => None,
        }
    }
}

impl fmt::Display for PgIdType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The columns of one COPY: an optional id column, then one vector column of a pgvector type, in
/// the order of the COPY's column list.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CopyColumns {
    /// The vector column's type.
    pub vector_type: PgVectorType,
    /// The vector column's name (used in error fields: `embedding[1][2]`).
    pub column: String,
    /// The id column's type, when there is one (it comes first).
    pub id_type: Option<PgIdType>,
    /// The id column's name (used in error fields: `id[3]`).
    pub id_column: String,
    /// The `d` a reader gives the tensor of an empty stream (which has no value to say it); 0 unless set.
    pub empty_dims: usize,
}

impl CopyColumns {
    /// One vector column of `vector_type` named `column`, no id column.
    pub fn new(vector_type: PgVectorType, column: impl Into<String>) -> CopyColumns {
        CopyColumns { vector_type, column: column.into(), id_type: None, id_column: "id".into(), empty_dims: 0 }
    }

    /// With an id column of `id_type` named `id_column` before the vector column.
    pub fn with_id(mut self, id_type: PgIdType, id_column: impl Into<String>) -> CopyColumns {
        self.id_type = Some(id_type);
        self.id_column = id_column.into();
        self
    }

    /// The `d` of the tensor read from an empty stream (the column's declared dimensions).
    pub fn with_empty_dims(mut self, d: usize) -> CopyColumns {
        self.empty_dims = d;
        self
    }

    /// The number of fields of every tuple (1 or 2).
    pub fn count(&self) -> usize {
        if self.id_type.is_some() { 2 } else { 1 }
    }

    /// The column list of the COPY statement, quoted as identifiers: `"id", "embedding"`.
    ///
    /// ```
    /// use densewire::{CopyColumns, PgIdType, PgVectorType};
    /// let cols = CopyColumns::new(PgVectorType::Halfvec, "Emb").with_id(PgIdType::Text, "doc");
    /// assert_eq!(cols.column_list(), r#""doc", "Emb""#);
    /// ```
    pub fn column_list(&self) -> String {
        let quote = |s: &str| format!("\"{}\"", s.replace('"', "\"\""));
        match self.id_type {
            Some(_) => format!("{}, {}", quote(&self.id_column), quote(&self.column)),
            None => quote(&self.column),
        }
    }
}

/// The ids of an id column, one per row, `None` for NULL.
///
/// A reader returns `Int` for `int8` and `int4` columns, `Text` for `text` and `Uuid` for `uuid`.
/// A writer takes any of them for any id type when each value converts: `Int` to `text` as
/// decimal, `Text` to `int8`/`int4` as decimal and to `uuid` as its canonical text, `Uuid` to
/// `text` as canonical text; an `int4` outside its range or a value that does not convert is
/// `invalid_field` on `ID_COLUMN[ROW]`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum PgIds {
    /// `int8` or `int4` ids.
    Int(Vec<Option<i64>>),
    /// `text` ids.
    Text(Vec<Option<String>>),
    /// `uuid` ids: the 16 bytes in the order of the canonical text.
    Uuid(Vec<Option<[u8; 16]>>),
}

impl PgIds {
    /// The number of ids.
    pub fn len(&self) -> usize {
        match self {
            PgIds::Int(v) => v.len(),
            PgIds::Text(v) => v.len(),
            PgIds::Uuid(v) => v.len(),
        }
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether id `i` is NULL (panics when out of range).
    pub fn is_null(&self, i: usize) -> bool {
        match self {
            PgIds::Int(v) => v[i].is_none(),
            PgIds::Text(v) => v[i].is_none(),
            PgIds::Uuid(v) => v[i].is_none(),
        }
    }
}

impl From<Vec<i64>> for PgIds {
    fn from(v: Vec<i64>) -> PgIds {
        PgIds::Int(v.into_iter().map(Some).collect())
    }
}

impl From<Vec<i32>> for PgIds {
    fn from(v: Vec<i32>) -> PgIds {
        PgIds::Int(v.into_iter().map(|x| Some(x as i64)).collect())
    }
}

impl From<Vec<String>> for PgIds {
    fn from(v: Vec<String>) -> PgIds {
        PgIds::Text(v.into_iter().map(Some).collect())
    }
}

impl From<Vec<[u8; 16]>> for PgIds {
    fn from(v: Vec<[u8; 16]>) -> PgIds {
        PgIds::Uuid(v.into_iter().map(Some).collect())
    }
}

/// A decoded COPY stream: the vector column as one `(n, d)` tensor of the type's dtype (a
/// `sparsevec` scattered into zeros), and the ids when the COPY has an id column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PgCopyData {
    /// The vectors.
    pub tensor: Tensor,
    /// The ids (`Int` for int8/int4, `Text`, `Uuid`), `None` without an id column.
    pub ids: Option<PgIds>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    fn vec_cols() -> CopyColumns {
        CopyColumns::new(PgVectorType::Vector, "embedding").with_id(PgIdType::Int8, "id")
    }

    #[test]
    fn a_sparsevec_dense_tensor_is_bounded_by_the_stream() {
        // one row of sparsevec(1e9) with no non-zero value: 26 bytes for 4 GB of zeros
        let mut b = PGCOPY_HEADER.to_vec();
        b.extend_from_slice(&1i16.to_be_bytes());
        b.extend_from_slice(&12i32.to_be_bytes());
        b.extend_from_slice(&1_000_000_000i32.to_be_bytes());
        b.extend_from_slice(&[0; 8]);
        b.extend_from_slice(PGCOPY_TRAILER);
        let cols = CopyColumns::new(PgVectorType::Sparsevec, "embedding");
        let e = decode_pgcopy(&b, &cols).unwrap_err();
        assert_eq!(
            (e.kind(), e.field_name(), e.offset()),
            (ErrorKind::InvalidField, Some("embedding"), Some(25)),
            "{e}"
        );
        // a sparsevec(30522) row, SPLADE's vocabulary, is within the bound
        b[25..29].copy_from_slice(&30_522i32.to_be_bytes());
        let back = decode_pgcopy(&b, &cols).unwrap();
        assert_eq!(back.tensor.shape(), (1, 30_522));
    }

    #[test]
    fn chunks_concatenate_to_the_whole_stream() {
        let t = Tensor::from_vec(5, 3, (0..15).map(|i| i as f32 - 7.5).collect::<Vec<f32>>()).unwrap();
        let ids = PgIds::Int(vec![Some(1), None, Some(-3), Some(i64::MAX), Some(i64::MIN)]);
        let whole = encode_pgcopy(&t, &vec_cols(), Some(&ids)).unwrap();
        for per in [1, 2, 4, 5, 100] {
            let pieces: Vec<_> = pgcopy_chunks(&t, &vec_cols(), Some(&ids), per).collect::<Result<_>>().unwrap();
            assert_eq!(pieces.len(), 2 + 5usize.div_ceil(per));
            assert_eq!(pieces.concat(), whole, "{per} rows a chunk");
        }
        let back = decode_pgcopy(&whole, &vec_cols()).unwrap();
        assert_eq!((back.tensor, back.ids), (t, Some(ids)));
    }

    #[test]
    fn a_failed_chunk_leaves_the_buffer_unchanged_and_names_the_whole_tensor_row() {
        let mut v = vec![1.0f32; 12];
        v[10] = f32::INFINITY;
        let t = Tensor::from_vec(4, 3, v).unwrap();
        let cols = CopyColumns::new(PgVectorType::Vector, "e");
        let mut out = b"kept".to_vec();
        encode_pgcopy_rows(&t, &cols, None, 0..2, &mut out).unwrap();
        let len = out.len();
        let e = encode_pgcopy_rows(&t, &cols, None, 2..4, &mut out).unwrap_err();
        assert_eq!((e.kind(), e.field_name()), (ErrorKind::NonFinite, Some("e[3][1]")));
        assert_eq!(out.len(), len);
        let e = encode_pgcopy_rows(&t, &cols, None, 3..5, &mut out).unwrap_err();
        assert_eq!((e.kind(), e.field_name()), (ErrorKind::InvalidField, Some("rows")));
        let mut it = pgcopy_chunks(&t, &cols, None, 3);
        assert_eq!(&it.next().unwrap().unwrap()[..], PGCOPY_HEADER);
        assert_eq!(it.next().unwrap().unwrap().len(), 3 * (2 + 4 + 4 + 12)); // rows 0..3
        assert_eq!(it.next().unwrap().unwrap_err().kind(), ErrorKind::NonFinite); // row 3
        assert!(it.next().is_none(), "the iterator ends after an error");
    }

    #[test]
    fn column_and_id_checks() {
        let t = Tensor::from_slice(2, 1, &[1.0f32, 2.0]).unwrap();
        let e = encode_pgcopy(&t, &vec_cols(), None).unwrap_err();
        assert_eq!((e.kind(), e.field_name()), (ErrorKind::InvalidField, Some("id")));
        let e = encode_pgcopy(&t, &vec_cols(), Some(&PgIds::from(vec![1i64]))).unwrap_err();
        assert_eq!((e.kind(), e.field_name()), (ErrorKind::ShapeMismatch, Some("id")));
        let e = encode_pgcopy(&t, &CopyColumns::new(PgVectorType::Vector, "v"), Some(&PgIds::from(vec![1i64, 2])))
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidField);
        let ints = Tensor::from_slice(1, 2, &[1i8, -1]).unwrap();
        let e = encode_pgcopy(&ints, &CopyColumns::new(PgVectorType::Halfvec, "h"), None).unwrap_err();
        assert_eq!((e.kind(), e.field_name()), (ErrorKind::InvalidField, Some("h")));
        // int8 values fill a bit column by sign
        let s = encode_pgcopy(&ints, &CopyColumns::new(PgVectorType::Bit, "b"), None).unwrap();
        assert_eq!(&s[s.len() - 3..], &[0x80, 0xff, 0xff]);
        let big = Tensor::new(crate::DType::Float32, 1, 16_001, vec![0u8; 4 * 16_001]).unwrap();
        let e = encode_pgcopy(&big, &CopyColumns::new(PgVectorType::Vector, "v"), None).unwrap_err();
        assert_eq!((e.kind(), e.field_name()), (ErrorKind::InvalidField, Some("v")));
        assert!(encode_pgcopy(&big, &CopyColumns::new(PgVectorType::Sparsevec, "v"), None).is_ok());
    }

    #[test]
    fn ids_convert_between_kinds() {
        let t = Tensor::from_slice(3, 1, &[1.0f32, 2.0, 3.0]).unwrap();
        let text_cols = CopyColumns::new(PgVectorType::Vector, "v").with_id(PgIdType::Text, "doc");
        let back = decode_pgcopy(
            &encode_pgcopy(&t, &text_cols, Some(&PgIds::Int(vec![Some(-5), None, Some(7)]))).unwrap(),
            &text_cols,
        )
        .unwrap();
        assert_eq!(back.ids, Some(PgIds::Text(vec![Some("-5".into()), None, Some("7".into())])));
        let int4 = CopyColumns::new(PgVectorType::Vector, "v").with_id(PgIdType::Int4, "n");
        let texts = PgIds::Text(vec![Some("12".into()), Some("-2147483648".into()), None]);
        let back = decode_pgcopy(&encode_pgcopy(&t, &int4, Some(&texts)).unwrap(), &int4).unwrap();
        assert_eq!(back.ids, Some(PgIds::Int(vec![Some(12), Some(-2147483648), None])));
        let e = encode_pgcopy(&t, &int4, Some(&PgIds::Text(vec![None, Some("x".into()), None]))).unwrap_err();
        assert_eq!((e.kind(), e.field_name()), (ErrorKind::InvalidField, Some("n[1]")));
        let uuid_cols = CopyColumns::new(PgVectorType::Vector, "v").with_id(PgIdType::Uuid, "u");
        let e = encode_pgcopy(&t, &uuid_cols, Some(&PgIds::Int(vec![None, None, Some(1)]))).unwrap_err();
        assert_eq!((e.kind(), e.field_name()), (ErrorKind::InvalidField, Some("u[2]")));
        let texts = PgIds::Text(vec![Some("F47AC10B-58CC-4372-A567-0E02B2C3D479".into()), None, None]);
        let back = decode_pgcopy(&encode_pgcopy(&t, &uuid_cols, Some(&texts)).unwrap(), &uuid_cols).unwrap();
        let Some(PgIds::Uuid(u)) = back.ids else { panic!() };
        assert_eq!(crate::format_uuid(&u[0].unwrap()), "f47ac10b-58cc-4372-a567-0e02b2c3d479");
        let e = encode_pgcopy(&t, &uuid_cols, Some(&PgIds::Text(vec![Some("nope".into()), None, None]))).unwrap_err();
        assert_eq!(e.field_name(), Some("u[0]"));
    }

    #[test]
    fn reader_edges() {
        let t = Tensor::from_packed_bits(1, 3, vec![0xe0]).unwrap();
        let cols = CopyColumns::new(PgVectorType::Bit, "b");
        let mut s = encode_pgcopy(&t, &cols, None).unwrap();
        // pad bits sent by a peer are ignored
        let at = s.len() - 3;
        s[at] |= 0x1f;
        assert_eq!(decode_pgcopy(&s, &cols).unwrap().tensor, t);
        // a header extension is skipped
        let mut ext = PGCOPY_HEADER.to_vec();
        ext[18] = 3;
        ext.extend_from_slice(b"abc");
        ext.extend_from_slice(&s[19..]);
        assert_eq!(decode_pgcopy(&ext, &cols).unwrap().tensor, t);
        // flags bits 17..31 are ignored
        let mut hi = s.clone();
        hi[11] = 0x80;
        assert!(decode_pgcopy(&hi, &cols).is_ok());
        // an empty stream has the declared dimensions
        let empty = [&PGCOPY_HEADER[..], &PGCOPY_TRAILER[..]].concat();
        let back = decode_pgcopy(&empty, &CopyColumns::new(PgVectorType::Halfvec, "h").with_empty_dims(384)).unwrap();
        assert_eq!((back.tensor.dtype(), back.tensor.shape()), (crate::DType::Float16, (0, 384)));
        assert_eq!(decode_pgcopy(b"", &cols).unwrap_err().kind(), ErrorKind::Truncated);
        // every strict prefix of a stream is truncated at its length
        let whole = encode_pgcopy(
            &Tensor::from_slice(2, 2, &[1.0f32, 0.0, 0.0, -3.0]).unwrap(),
            &CopyColumns::new(PgVectorType::Sparsevec, "s").with_id(PgIdType::Text, "doc"),
            Some(&PgIds::Text(vec![Some("é".into()), None])),
        )
        .unwrap();
        let cols = CopyColumns::new(PgVectorType::Sparsevec, "s").with_id(PgIdType::Text, "doc");
        for k in 0..whole.len() {
            let e = decode_pgcopy(&whole[..k], &cols).unwrap_err();
            assert_eq!((e.kind(), e.offset()), (ErrorKind::Truncated, Some(k as u64)), "prefix of {k} bytes");
        }
        assert_eq!(decode_pgcopy(&whole, &cols).unwrap().tensor.as_f32().unwrap()[..], [1.0, 0.0, 0.0, -3.0]);
    }
}
