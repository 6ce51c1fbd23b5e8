//! Columnar Protobuf tables (SPEC.md section 15.6): the `densewire.v1.Table` message of
//! `proto/densewire/v1/table.proto`. As for tensors, the prost types ([`pb::Table`](crate::pb::Table),
//! derived by hand, no protoc) encode byte-exact, and decoding walks the wire format directly so that
//! errors carry the spec's offsets and PLAIN fixed-width `data` stays a slice of the body.
//! BYTE_STREAM_SPLIT columns are reassembled into an aligned buffer in one pass.

use super::model::{Column, ColumnData, ColumnType, Table, check_bools};
use crate::error::{Error, ErrorKind, Result, err, length_mismatch};
use crate::protobuf::{Reader, wrong_wire_type};
use crate::tensor::aligned_zeroed;
use bytes::Bytes;
use prost::Message;

/// The prost messages of `densewire/v1/table.proto` (re-exported in [`pb`](crate::pb)).
pub mod pb_table {
    /// The type of a table column (SPEC.md section 15.1). 0 is never valid on the wire.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
    #[repr(i32)]
    pub enum ColumnType {
        /// Never valid on the wire.
        Unspecified = 0,
        /// bool
        Bool = 1,
        /// int32
        Int32 = 2,
        /// int64
        Int64 = 3,
        /// float32
        Float32 = 4,
        /// float64
        Float64 = 5,
        /// string
        String = 6,
        /// uuid
        Uuid = 7,
        /// float32[d]
        Float32Vector = 8,
    }

    /// How the bytes of a fixed-width column are laid out in `data`.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
    #[repr(i32)]
    pub enum ColumnEncoding {
        /// Value after value.
        Plain = 0,
        /// Byte k of every item, then byte k+1 (Parquet's BYTE_STREAM_SPLIT).
        ByteStreamSplit = 1,
    }

    /// A column.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Column {
        /// The name.
        #[prost(string, tag = "1")]
        pub name: String,
        /// The type.
        #[prost(enumeration = "ColumnType", tag = "2")]
        pub r#type: i32,
        /// FLOAT32_VECTOR only, >= 1.
        #[prost(uint32, tag = "3")]
        pub dimensions: u32,
        /// Fixed-width types only; PLAIN for bool and string.
        #[prost(enumeration = "ColumnEncoding", tag = "4")]
        pub encoding: i32,
        /// `rows * width` bytes; for strings, the UTF-8 of every value, concatenated.
        #[prost(bytes = "bytes", tag = "5")]
        pub data: bytes::Bytes,
        /// STRING only: the byte length of each value (packed).
        #[prost(uint32, repeated, tag = "6")]
        pub lengths: Vec<u32>,
    }

    /// The body of `GET /v1/tables/{name}` when `application/protobuf` is negotiated.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Table {
        /// The table name.
        #[prost(string, tag = "1")]
        pub name: String,
        /// The number of rows.
        #[prost(uint64, tag = "2")]
        pub rows: u64,
        /// The columns.
        #[prost(message, repeated, tag = "3")]
        pub columns: Vec<Column>,
    }
}

#[derive(Default)]
struct RawColumn {
    name: String,
    ty: u64,
    dimensions: u64,
    encoding: u64,
    data: (usize, usize),
    lengths: Vec<u64>,
}

fn packed_varints(r: &Reader<'_>, s: usize, e: usize, tag_at: usize, out: &mut Vec<u64>) -> Result<()> {
    let packed = Reader { buf: r.buf, end: e };
    let mut p = s;
    while p < e {
        let entry = p;
        match packed.varint(&mut p) {
            Ok(v) => out.push(v),
            Err(over_long) if p - entry == 10 => return Err(over_long),
            Err(_) => {
                return Err(err(ErrorKind::Malformed, "a packed entry runs past the end of its field").at(tag_at));
            }
        }
    }
    Ok(())
}

/// Reads column `i`'s message. Its name is checked as UTF-8 at each occurrence, as Protobuf parsers
/// do (the last occurrence wins, but an invalid earlier one makes the message invalid).
fn read_column(r: &Reader<'_>, mut pos: usize, i: usize) -> Result<RawColumn> {
    let mut c = RawColumn::default();
    while pos < r.end {
        let tag_at = pos;
        let (field, wt) = r.key(&mut pos)?;
        match (field, wt) {
            (1, 2) => c.name = utf8(r.buf, r.len_delimited(&mut pos, tag_at)?, format!("columns[{i}].name"))?,
            (2, 0) => c.ty = r.varint(&mut pos)?,
            (3, 0) => c.dimensions = r.varint(&mut pos)?,
            (4, 0) => c.encoding = r.varint(&mut pos)?,
            (5, 2) => c.data = r.len_delimited(&mut pos, tag_at)?,
            (6, 0) => c.lengths.push(r.varint(&mut pos)?),
            (6, 2) => {
                let (s, e) = r.len_delimited(&mut pos, tag_at)?;
                packed_varints(r, s, e, tag_at, &mut c.lengths)?;
            }
            (1..=6, _) => return Err(wrong_wire_type(field, wt, tag_at)),
            _ => r.skip(&mut pos, field, wt, tag_at)?,
        }
    }
    Ok(c)
}

fn utf8(body: &[u8], (s, e): (usize, usize), field: String) -> Result<String> {
    std::str::from_utf8(&body[s..e])
        .map(str::to_owned)
        .map_err(|_| err(ErrorKind::Malformed, "a string is not valid UTF-8").at(s).field(field))
}

fn invalid(field: String, m: impl Into<std::borrow::Cow<'static, str>>) -> Error {
    err(ErrorKind::InvalidField, m).field(field)
}

fn column_type(v: u64, dimensions: u64, i: usize) -> Result<ColumnType> {
    let f = |k: &str| format!("columns[{i}].{k}");
    let ty = match v {
        0 => return Err(invalid(f("type"), "the column type is missing (0)")),
        1 => ColumnType::Bool,
        2 => ColumnType::Int32,
        3 => ColumnType::Int64,
        4 => ColumnType::Float32,
        5 => ColumnType::Float64,
        6 => ColumnType::String,
        7 => ColumnType::Uuid,
        8 => {
            if dimensions == 0 || dimensions > u32::MAX as u64 {
                return Err(invalid(f("dimensions"), "a vector column needs dimensions >= 1"));
            }
            return Ok(ColumnType::Float32Vector(dimensions as usize));
        }
        other => return Err(err(ErrorKind::UnknownDtype, format!("unknown column type {other}")).field(f("type"))),
    };
    if dimensions != 0 {
        return Err(invalid(f("dimensions"), format!("dimensions {dimensions} on a {ty} column")));
    }
    Ok(ty)
}

/// Decodes a `Table` message. PLAIN fixed-width columns are slices of `body` (no copy);
/// BYTE_STREAM_SPLIT columns are reassembled into 8-byte-aligned buffers.
pub fn decode_table_protobuf(body: Bytes) -> Result<Table> {
    let r = Reader { buf: &body, end: body.len() };
    let mut pos = 0;
    let mut name = String::new();
    let mut rows = 0u64;
    let mut raw: Vec<RawColumn> = Vec::new();
    while pos < r.end {
        let tag_at = pos;
        let (field, wt) = r.key(&mut pos)?;
        match (field, wt) {
            (1, 2) => name = utf8(&body, r.len_delimited(&mut pos, tag_at)?, "name".into())?,
            (2, 0) => rows = r.varint(&mut pos)?,
            (3, 2) => {
                let (s, e) = r.len_delimited(&mut pos, tag_at)?;
                raw.push(read_column(&Reader { buf: &body, end: e }, s, raw.len())?);
            }
            (1..=3, _) => return Err(wrong_wire_type(field, wt, tag_at)),
            _ => r.skip(&mut pos, field, wt, tag_at)?,
        }
    }
    let rows = usize::try_from(rows).map_err(|_| invalid("rows".into(), "rows is too large"))?;
    let mut columns: Vec<Column> = Vec::with_capacity(raw.len());
    let mut seen = std::collections::HashSet::new(); // not a scan of `columns`: quadratic in the columns
    for (i, c) in raw.into_iter().enumerate() {
        let f = |k: &str| format!("columns[{i}].{k}");
        let cname = c.name;
        if cname.is_empty() || !seen.insert(cname.clone()) {
            return Err(invalid(f("name"), "the column name is empty or appears twice"));
        }
        let ty = column_type(c.ty, c.dimensions, i)?;
        let split_bytes = match c.encoding {
            0 => false,
            1 if matches!(ty, ColumnType::Bool | ColumnType::String) => {
                return Err(invalid(f("encoding"), format!("BYTE_STREAM_SPLIT is not valid for {ty}")));
            }
            1 => true,
            other => return Err(invalid(f("encoding"), format!("unknown column encoding {other}"))),
        };
        let (s, e) = c.data;
        let data = match ty.width() {
            Some(w) => {
                let expected = w
                    .checked_mul(rows)
                    .ok_or_else(|| invalid("rows".into(), "rows times the column width is too large"))?;
                if e - s != expected {
                    return Err(length_mismatch(e - s, expected).field(f("data")));
                }
                let bytes = if split_bytes { unsplit(&body[s..e], ty.item_width().unwrap()) } else { body.slice(s..e) };
                if ty == ColumnType::Bool {
                    check_bools(&bytes, &f("data"))?;
                }
                ColumnData::fixed(ty, bytes)
            }
            None => {
                if c.lengths.len() != rows {
                    return Err(err(
                        ErrorKind::ShapeMismatch,
                        format!("{} lengths, the table has {rows} rows", c.lengths.len()),
                    )
                    .field(f("lengths")));
                }
                let total = c.lengths.iter().try_fold(0u64, |a, &l| a.checked_add(l));
                if total != Some((e - s) as u64) {
                    let t = total.map_or("more than 2^64".to_string(), |t| t.to_string());
                    return Err(err(
                        ErrorKind::LengthMismatch,
                        format!("the lengths add up to {t} bytes, data is {}", e - s),
                    )
                    .at(s)
                    .field(f("data")));
                }
                let text = std::str::from_utf8(&body[s..e]).map_err(|u| {
                    err(ErrorKind::Malformed, "string data is not valid UTF-8").at(s + u.valid_up_to()).field(f("data"))
                })?;
                let mut strings = Vec::with_capacity(rows);
                let mut at = 0usize;
                for &l in &c.lengths {
                    let end = at + l as usize;
                    let v = text.get(at..end).ok_or_else(|| {
                        err(ErrorKind::Malformed, "a string length splits a UTF-8 character")
                            .at(s + at)
                            .field(f("data"))
                    })?;
                    strings.push(v.to_owned());
                    at = end;
                }
                ColumnData::String(strings)
            }
        };
        columns.push(Column { name: cname, ty, data });
    }
    Ok(Table { name, rows, columns })
}

/// Encodes a table as a `Table` message: fixed-width columns of width >= 2 (and vectors) in
/// BYTE_STREAM_SPLIT when `byte_stream_split` is true (what densewire's server sends), PLAIN
/// otherwise; bool and strings are always PLAIN. Byte-exact with the golden vectors.
///
/// ```
/// use densewire::{decode_table_protobuf, encode_table_protobuf, Column, ColumnData, ColumnType, Table, Values};
/// let c = Column::new("x", ColumnType::Float64, ColumnData::Float64(Values::from_slice(&[1.5, -2.0])), 2)?;
/// let t = Table { name: "t".into(), rows: 2, columns: vec![c] };
/// for split in [false, true] {
///     assert_eq!(decode_table_protobuf(encode_table_protobuf(&t, split).into())?, t);
/// }
/// # Ok::<(), densewire::Error>(())
/// ```
pub fn encode_table_protobuf(table: &Table, byte_stream_split: bool) -> Vec<u8> {
    let columns = table
        .columns
        .iter()
        .map(|c| {
            let dimensions = match c.ty {
                ColumnType::Float32Vector(d) => d as u32,
                _ => 0,
            };
            let mut col = pb_table::Column {
                name: c.name.clone(),
                r#type: c.ty.proto_value(),
                dimensions,
                encoding: 0,
                data: Bytes::new(),
                lengths: Vec::new(),
            };
            match &c.data {
                ColumnData::String(v) => {
                    col.data = Bytes::from(v.concat());
                    col.lengths = v.iter().map(|s| s.len() as u32).collect();
                }
                d => {
                    let bytes = d.fixed_bytes().expect("fixed-width").clone();
                    let w = c.ty.item_width().expect("fixed-width");
                    if byte_stream_split && w >= 2 {
                        col.encoding = pb_table::ColumnEncoding::ByteStreamSplit as i32;
                        col.data = Bytes::from(split(&bytes, w));
                    } else {
                        col.data = bytes;
                    }
                }
            }
            col
        })
        .collect();
    pb_table::Table { name: table.name.clone(), rows: table.rows as u64, columns }.encode_to_vec()
}

/// Undoes byte-stream-split: `m` items of `w` bytes, byte `k` of item `i` at `src[k * m + i]`,
/// into an 8-byte-aligned buffer.
fn unsplit(src: &[u8], w: usize) -> Bytes {
    let m = src.len() / w;
    let mut buf = aligned_zeroed(src.len());
    let out = buf.as_mut_slice();
    match w {
        4 => {
            let (s0, rest) = src.split_at(m);
            let (s1, rest) = rest.split_at(m);
            let (s2, s3) = rest.split_at(m);
            for (i, o) in out.chunks_exact_mut(4).enumerate() {
                o.copy_from_slice(&[s0[i], s1[i], s2[i], s3[i]]);
            }
        }
        8 => {
            let s: [&[u8]; 8] = std::array::from_fn(|k| &src[k * m..(k + 1) * m]);
            for (i, o) in out.chunks_exact_mut(8).enumerate() {
                o.copy_from_slice(&[s[0][i], s[1][i], s[2][i], s[3][i], s[4][i], s[5][i], s[6][i], s[7][i]]);
            }
        }
        _ => {
            for (k, stream) in src.chunks_exact(m.max(1)).enumerate().take(w) {
                for (i, &b) in stream.iter().enumerate() {
                    out[i * w + k] = b;
                }
            }
        }
    }
    buf.freeze()
}

/// Byte-stream-splits `m` items of `w` bytes (the encoder's side of [`unsplit`]).
fn split(src: &[u8], w: usize) -> Vec<u8> {
    let m = src.len() / w;
    let mut out = vec![0u8; src.len()];
    for (i, item) in src.chunks_exact(w).enumerate() {
        for (k, &b) in item.iter().enumerate() {
            out[k * m + i] = b;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protobuf::tests::{GROUP, assert_group_errors};
    use crate::table::{ColumnData, Values};

    #[test]
    fn unknown_groups_are_skipped_in_tables_and_columns() {
        let id = Column::new("id", ColumnType::Int64, ColumnData::Int64(Values::from_slice(&[1i64, 2])), 2).unwrap();
        let s = Column::new("s", ColumnType::String, ColumnData::String(vec!["a".into(), "bc".into()]), 2).unwrap();
        let t = Table { name: "t".into(), rows: 2, columns: vec![id.clone(), s] };
        let plain = encode_table_protobuf(&t, true);
        assert_eq!(decode_table_protobuf([&GROUP[..], &plain].concat().into()).unwrap(), t);
        // A group inside a Column message, before and after its fields.
        let one = Table { name: String::new(), rows: 2, columns: vec![id] };
        let body = encode_table_protobuf(&one, false);
        let (head, column) = body.split_at(4); // rows (0x10 2), then the column's tag and length
        assert_eq!(&head[..3], &[0x10, 2, 0x1a]);
        let column = [&GROUP[..], column, &GROUP].concat();
        let body = [&head[..3], &[column.len() as u8], &column].concat();
        assert_eq!(decode_table_protobuf(body.into()).unwrap(), one);
        assert_group_errors(&plain, |b| decode_table_protobuf(b.into()).map(drop));
        // A known field (name) sent as a group stays a wrong wire type.
        let e = decode_table_protobuf([&plain[..], &[0x0b, 0x0c]].concat().into()).unwrap_err();
        assert_eq!((e.kind(), e.offset()), (ErrorKind::Malformed, Some(plain.len() as u64)));
        assert!(e.to_string().contains("wrong wire type 3"), "{e}");
    }

    /// Found by the table_protobuf fuzz target (corpus regression-utf8-name-after-bad-column): a
    /// column name that is not UTF-8 makes the body one a Protobuf parser rejects, so it is
    /// `malformed` even when an earlier column is wrong too (it was that column's
    /// `length_mismatch`).
    #[test]
    fn invalid_utf8_in_a_later_column_name_is_malformed() {
        // {columns: [{name: "a", type: INT32, data: 1 byte}, {name: "\xff", type: INT32}]}
        let body =
            [0x1a, 0x08, 0x0a, 0x01, b'a', 0x10, 0x02, 0x2a, 0x01, 0x00, 0x1a, 0x05, 0x0a, 0x01, 0xff, 0x10, 0x02];
        assert!(<pb_table::Table as Message>::decode(&body[..]).is_err(), "prost rejects it");
        let e = decode_table_protobuf(Bytes::copy_from_slice(&body)).unwrap_err();
        assert_eq!((e.kind(), e.field_name(), e.offset()), (ErrorKind::Malformed, Some("columns[1].name"), Some(14)));
        // With a valid second name, the first column's error stands.
        let mut ok = body;
        ok[14] = b'b';
        let e = decode_table_protobuf(Bytes::copy_from_slice(&ok)).unwrap_err();
        assert_eq!((e.kind(), e.field_name()), (ErrorKind::LengthMismatch, Some("columns[0].data")));
    }

    /// Found by the table_protobuf fuzz target (corpus regression-invalid-name-then-valid): a string
    /// field sent twice keeps the last value, but Protobuf parsers check every occurrence; an
    /// invalid first name was accepted.
    #[test]
    fn every_occurrence_of_a_name_must_be_utf8() {
        // name "\xc7l", name "t", rows 0; then the same inside a column.
        let body = [0x0a, 0x02, 0xc7, b'l', 0x0a, 0x01, b't'];
        assert!(<pb_table::Table as Message>::decode(&body[..]).is_err(), "prost rejects it");
        let e = decode_table_protobuf(Bytes::copy_from_slice(&body)).unwrap_err();
        assert_eq!((e.kind(), e.field_name(), e.offset()), (ErrorKind::Malformed, Some("name"), Some(2)));
        let column = [0x1a, 0x09, 0x0a, 0x02, 0xc7, b'l', 0x0a, 0x01, b'c', 0x10, 0x02];
        assert!(<pb_table::Table as Message>::decode(&column[..]).is_err(), "prost rejects it");
        let e = decode_table_protobuf(Bytes::copy_from_slice(&column)).unwrap_err();
        assert_eq!((e.kind(), e.field_name(), e.offset()), (ErrorKind::Malformed, Some("columns[0].name"), Some(4)));
        // Valid both times: the last one wins.
        let body = [0x0a, 0x01, b's', 0x0a, 0x01, b't'];
        assert_eq!(decode_table_protobuf(Bytes::copy_from_slice(&body)).unwrap().name, "t");
    }

    #[test]
    fn split_and_unsplit_are_inverse() {
        for w in [2usize, 4, 8, 16] {
            let src: Vec<u8> = (0..w * 7).map(|i| (i * 37 % 251) as u8).collect();
            let s = split(&src, w);
            assert_eq!(&unsplit(&s, w)[..], &src[..], "w = {w}");
            assert_eq!(unsplit(&s, w).as_ptr() as usize % 8, 0);
        }
        assert!(unsplit(&[], 8).is_empty());
    }
}
