//! Columnar MessagePack tables (SPEC.md section 15.5): one map `{name, rows, columns}`, each
//! column a map `{name, type, data}` where `data` is a bin of `n * width` little-endian bytes for
//! the fixed-width types and an array of `n` str for strings. Decoding keeps every bin as a slice
//! of the body (no copy); encoding uses `rmp`'s writers (smallest representations, byte-exact).

use super::model::{Column, ColumnData, ColumnType, Table, check_bools};
use crate::error::{ErrorKind, Result, err, length_mismatch};
use crate::msgpack::Cursor;
use bytes::Bytes;
use rmp::Marker;

enum Data {
    Absent,
    Bad,
    Bin(usize, usize),
    Strings(Vec<Option<String>>),
}

struct RawColumn {
    name: Option<String>,
    name_bad: bool,
    ty: Option<String>,
    ty_bad: bool,
    data: Data,
}

fn is_str(m: Marker) -> bool {
    matches!(m, Marker::FixStr(_) | Marker::Str8 | Marker::Str16 | Marker::Str32)
}

fn is_map(m: Marker) -> bool {
    matches!(m, Marker::FixMap(_) | Marker::Map16 | Marker::Map32)
}

fn is_array(m: Marker) -> bool {
    matches!(m, Marker::FixArray(_) | Marker::Array16 | Marker::Array32)
}

/// A map key: a str, or `malformed` at its offset.
fn key<'a>(c: &mut Cursor<'a>) -> Result<&'a [u8]> {
    let (m, at) = c.marker()?;
    if !is_str(m) {
        return Err(err(ErrorKind::Malformed, "a MessagePack map key is not a string").at(at));
    }
    let n = c.len_of(m)?.unwrap();
    c.take(n)
}

fn string(c: &mut Cursor<'_>) -> Result<Option<String>> {
    Ok(c.str_value()?.and_then(|s| std::str::from_utf8(s).ok()).map(str::to_owned))
}

fn column(c: &mut Cursor<'_>) -> Result<Option<RawColumn>> {
    let save = c.pos;
    let (m, _) = c.marker()?;
    if !is_map(m) {
        c.pos = save;
        c.skip(0)?;
        return Ok(None);
    }
    let mut col = RawColumn { name: None, name_bad: false, ty: None, ty_bad: false, data: Data::Absent };
    for _ in 0..c.len_of(m)?.unwrap() {
        match key(c)? {
            b"name" => {
                col.name = string(c)?;
                col.name_bad = col.name.is_none();
            }
            b"type" => {
                col.ty = string(c)?;
                col.ty_bad = col.ty.is_none();
            }
            b"data" => {
                let save = c.pos;
                let (dm, _) = c.marker()?;
                col.data = match dm {
                    Marker::Bin8 | Marker::Bin16 | Marker::Bin32 => {
                        let n = c.len_of(dm)?.unwrap();
                        let start = c.pos;
                        c.take(n)?;
                        Data::Bin(start, n)
                    }
                    m if is_array(m) => {
                        let n = c.len_of(m)?.unwrap();
                        let mut v = Vec::with_capacity(n.min(c.buf.len()));
                        for _ in 0..n {
                            v.push(string(c)?);
                        }
                        Data::Strings(v)
                    }
                    _ => {
                        c.pos = save;
                        c.skip(0)?;
                        Data::Bad
                    }
                };
            }
            _ => c.skip(0)?,
        }
    }
    Ok(Some(col))
}

/// Decodes a columnar MessagePack table (keys in any order, integers of any width, unknown keys
/// ignored). Fixed-width columns are slices of `body`: no copy.
pub fn decode_table_msgpack(body: Bytes) -> Result<Table> {
    let mut c = Cursor { buf: &body, pos: 0 };
    let (m, at) = c.marker()?;
    if !is_map(m) {
        return Err(err(ErrorKind::Malformed, "the MessagePack body is not a map").at(at));
    }
    let mut name: Option<Option<String>> = None;
    let mut rows: Option<Option<u64>> = None;
    let mut columns: Option<Option<Vec<Option<RawColumn>>>> = None;
    for _ in 0..c.len_of(m)?.unwrap() {
        match key(&mut c)? {
            b"name" => name = Some(string(&mut c)?),
            b"rows" => rows = Some(c.uint_value()?),
            b"columns" => {
                let save = c.pos;
                let (am, _) = c.marker()?;
                if is_array(am) {
                    let n = c.len_of(am)?.unwrap();
                    let mut v = Vec::with_capacity(n.min(body.len()));
                    for _ in 0..n {
                        v.push(column(&mut c)?);
                    }
                    columns = Some(Some(v));
                } else {
                    c.pos = save;
                    c.skip(0)?;
                    columns = Some(None);
                }
            }
            _ => c.skip(0)?,
        }
    }
    if c.pos != body.len() {
        return Err(
            err(ErrorKind::Malformed, format!("{} bytes follow the MessagePack map", body.len() - c.pos)).at(c.pos)
        );
    }
    let invalid = |f: String, m: &str| err(ErrorKind::InvalidField, m.to_string()).field(f);
    let name = name.flatten().ok_or_else(|| invalid("name".into(), "name is missing or not a string"))?;
    let rows = rows
        .flatten()
        .and_then(|r| usize::try_from(r).ok())
        .ok_or_else(|| invalid("rows".into(), "rows is missing or not a non-negative integer"))?;
    let raw = columns.flatten().ok_or_else(|| invalid("columns".into(), "columns is missing or not an array"))?;
    let mut out: Vec<Column> = Vec::with_capacity(raw.len());
    let mut seen = std::collections::HashSet::new(); // not a scan of `out`: quadratic in the columns
    for (i, col) in raw.into_iter().enumerate() {
        let col = col.ok_or_else(|| invalid(format!("columns[{i}]"), "a column is not a map"))?;
        let cname = col
            .name
            .filter(|n| !n.is_empty() && !col.name_bad)
            .ok_or_else(|| invalid(format!("columns[{i}].name"), "the name is missing, empty or not a string"))?;
        if !seen.insert(cname.clone()) {
            return Err(invalid(format!("columns[{i}].name"), "the name appears twice"));
        }
        let ty = col
            .ty
            .filter(|_| !col.ty_bad)
            .ok_or_else(|| invalid(format!("columns[{i}].type"), "the type is missing or not a string"))?;
        let ty = ColumnType::from_name(&ty).map_err(|e| e.field(format!("columns[{i}].type")))?;
        let field = format!("columns[{i}].data");
        let data = match (ty.width(), col.data) {
            (Some(w), Data::Bin(start, len)) => {
                let expected = w
                    .checked_mul(rows)
                    .ok_or_else(|| invalid("rows".into(), "rows times the column width is too large"))?;
                if len != expected {
                    return Err(length_mismatch(len, expected).field(field));
                }
                let bytes = body.slice(start..start + len);
                if ty == ColumnType::Bool {
                    check_bools(&bytes, &field)?;
                }
                ColumnData::fixed(ty, bytes)
            }
            (None, Data::Strings(v)) => {
                if v.len() != rows {
                    return Err(err(
                        ErrorKind::ShapeMismatch,
                        format!("{} strings, the table has {rows} rows", v.len()),
                    )
                    .field(field));
                }
                let mut strings = Vec::with_capacity(rows);
                for (r, s) in v.into_iter().enumerate() {
                    strings.push(s.ok_or_else(|| invalid(format!("{field}[{r}]"), "not a UTF-8 string"))?);
                }
                ColumnData::String(strings)
            }
            (w, _) => {
                let want = if w.is_some() { "a bin" } else { "an array of str" };
                return Err(invalid(field, &format!("data is missing or not {want}")));
            }
        };
        out.push(Column { name: cname, ty, data });
    }
    Ok(Table { name, rows, columns: out })
}

/// Encodes a table as columnar MessagePack (byte-exact with the golden vectors).
///
/// ```
/// use densewire::{decode_table_msgpack, encode_table_msgpack, Column, ColumnData, ColumnType, Table, Values};
/// let c = Column::new("n", ColumnType::Int64, ColumnData::Int64(Values::from_slice(&[1i64, -1])), 2)?;
/// let t = Table { name: "t".into(), rows: 2, columns: vec![c] };
/// assert_eq!(decode_table_msgpack(encode_table_msgpack(&t).into())?, t);
/// # Ok::<(), densewire::Error>(())
/// ```
pub fn encode_table_msgpack(table: &Table) -> Vec<u8> {
    let size: usize =
        table.columns.iter().map(|c| c.data.fixed_bytes().map_or(table.rows * 16, |b| b.len()) + 64).sum();
    let mut out = Vec::with_capacity(size + 64);
    let w = &mut out;
    let ok = "writing to a Vec cannot fail";
    rmp::encode::write_map_len(w, 3).expect(ok);
    rmp::encode::write_str(w, "name").expect(ok);
    rmp::encode::write_str(w, &table.name).expect(ok);
    rmp::encode::write_str(w, "rows").expect(ok);
    rmp::encode::write_uint(w, table.rows as u64).expect(ok);
    rmp::encode::write_str(w, "columns").expect(ok);
    rmp::encode::write_array_len(w, table.columns.len() as u32).expect(ok);
    for c in &table.columns {
        rmp::encode::write_map_len(w, 3).expect(ok);
        rmp::encode::write_str(w, "name").expect(ok);
        rmp::encode::write_str(w, &c.name).expect(ok);
        rmp::encode::write_str(w, "type").expect(ok);
        rmp::encode::write_str(w, &c.ty.name()).expect(ok);
        rmp::encode::write_str(w, "data").expect(ok);
        match &c.data {
            ColumnData::String(v) => {
                rmp::encode::write_array_len(w, v.len() as u32).expect(ok);
                for s in v {
                    rmp::encode::write_str(w, s).expect(ok);
                }
            }
            d => rmp::encode::write_bin(w, d.fixed_bytes().expect("fixed-width")).expect(ok),
        }
    }
    out
}
