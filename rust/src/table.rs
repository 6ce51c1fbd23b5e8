//! Tables (SPEC.md section 15): named, typed columns of `n` rows, the `Densewire-Columns` header,
//! the table formats and one entry point to decode any of them ([`Table::decode`]).
//!
//! Fixed-width columns hold their little-endian bytes in a [`Bytes`]: binary decoders (MessagePack,
//! plain Protobuf, Arrow) slice the received body without copying, and [`Values::as_slice`] borrows
//! those bytes as a typed slice when they are aligned (bytemuck, no `unsafe`), copying only when
//! they are not. The format modules are `table_json`, `table_csv`, `table_msgpack`,
//! `table_protobuf` and `table_arrow`.

use crate::error::{ErrorKind, Result, err};
use crate::format::Headers;
use crate::tensor::aligned_zeroed;
use bytes::Bytes;
use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

/// A column type of SPEC.md section 15.1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ColumnType {
    /// `bool`: one byte a value, 0 or 1.
    Bool,
    /// `int32`.
    Int32,
    /// `int64`.
    Int64,
    /// `float32`.
    Float32,
    /// `float64`.
    Float64,
    /// `string`: UTF-8 text.
    String,
    /// `uuid`: 16 bytes in RFC 9562 order.
    Uuid,
    /// `float32[d]`: a vector of `d >= 1` float32 items.
    Float32Vector(usize),
}

impl ColumnType {
    /// The type name (`float32[384]` for vectors).
    pub fn name(self) -> Cow<'static, str> {
        Cow::Borrowed(match self {
            ColumnType::Bool => "bool",
            ColumnType::Int32 => "int32",
            ColumnType::Int64 => "int64",
            ColumnType::Float32 => "float32",
            ColumnType::Float64 => "float64",
            ColumnType::String => "string",
            ColumnType::Uuid => "uuid",
            ColumnType::Float32Vector(d) => return Cow::Owned(format!("float32[{d}]")),
        })
    }

    /// Parses a type name: exact lowercase ASCII, `d` in decimal without leading zeros and at
    /// least 1. Anything else is `unknown_dtype`.
    ///
    /// ```
    /// use densewire::ColumnType;
    /// assert_eq!(ColumnType::from_name("float32[384]").unwrap(), ColumnType::Float32Vector(384));
    /// assert!(ColumnType::from_name("float32[0384]").is_err());
    /// assert!(ColumnType::from_name("Int32").is_err());
    /// ```
    pub fn from_name(name: &str) -> Result<ColumnType> {
        Ok(match name {
            "bool" => ColumnType::Bool,
            "int32" => ColumnType::Int32,
            "int64" => ColumnType::Int64,
            "float32" => ColumnType::Float32,
            "float64" => ColumnType::Float64,
            "string" => ColumnType::String,
            "uuid" => ColumnType::Uuid,
            _ => {
                let d = name
                    .strip_prefix("float32[")
                    .and_then(|r| r.strip_suffix(']'))
                    .filter(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()) && !d.starts_with('0'))
                    .and_then(|d| d.parse::<usize>().ok())
                    .filter(|&d| d >= 1 && d <= u32::MAX as usize);
                match d {
                    Some(d) => ColumnType::Float32Vector(d),
                    None => {
                        let shown: String = name.chars().take(64).collect();
                        return Err(err(ErrorKind::UnknownDtype, format!("unknown column type {shown:?}")));
                    }
                }
            }
        })
    }

    /// The byte width of one value, `None` for `string`; a vector's is `4 * d`.
    pub fn width(self) -> Option<usize> {
        Some(match self {
            ColumnType::Bool => 1,
            ColumnType::Int32 | ColumnType::Float32 => 4,
            ColumnType::Int64 | ColumnType::Float64 => 8,
            ColumnType::Uuid => 16,
            ColumnType::Float32Vector(d) => d.checked_mul(4)?,
            ColumnType::String => return None,
        })
    }

    /// The byte width of one item (a vector's items are float32), `None` for `string`. This is
    /// the `w` of byte-stream-split.
    pub fn item_width(self) -> Option<usize> {
        match self {
            ColumnType::Float32Vector(_) => Some(4),
            t => t.width(),
        }
    }

    /// The `ColumnType` enum value of `table.proto` (vectors are 8, with `dimensions = d`).
    pub fn proto_value(self) -> i32 {
        match self {
            ColumnType::Bool => 1,
            ColumnType::Int32 => 2,
            ColumnType::Int64 => 3,
            ColumnType::Float32 => 4,
            ColumnType::Float64 => 5,
            ColumnType::String => 6,
            ColumnType::Uuid => 7,
            ColumnType::Float32Vector(_) => 8,
        }
    }
}

impl fmt::Display for ColumnType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

/// A fixed-width item type a column can be viewed as: `u8` (bool), `i32`, `i64`, `f32`, `f64`,
/// `[u8; 16]` (uuid).
pub trait TableItem: bytemuck::Pod + Send + Sync + 'static {}
impl TableItem for u8 {}
impl TableItem for i32 {}
impl TableItem for i64 {}
impl TableItem for f32 {}
impl TableItem for f64 {}
impl TableItem for [u8; 16] {}

/// The values of a fixed-width column: little-endian bytes, often a slice of the received body.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Values<T> {
    bytes: Bytes,
    _item: PhantomData<T>,
}

impl<T: TableItem> Values<T> {
    /// Values over little-endian bytes (a whole number of items; checked by the decoders).
    pub(crate) fn from_bytes(bytes: Bytes) -> Values<T> {
        debug_assert_eq!(bytes.len() % std::mem::size_of::<T>(), 0);
        Values { bytes, _item: PhantomData }
    }

    /// Values holding a copy of `items`, in an 8-byte-aligned buffer.
    pub fn from_slice(items: &[T]) -> Values<T> {
        let mut buf = aligned_zeroed(std::mem::size_of_val(items));
        buf.as_mut_slice().copy_from_slice(bytemuck::cast_slice(items));
        #[cfg(target_endian = "big")]
        crate::dtype::swap_items(buf.as_mut_slice(), std::mem::size_of::<T>());
        Values::from_bytes(buf.freeze())
    }

    /// The number of items (for vectors: `n * d` floats).
    pub fn len(&self) -> usize {
        self.bytes.len() / std::mem::size_of::<T>()
    }

    /// Whether there are no items.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// The little-endian bytes.
    pub fn bytes(&self) -> &Bytes {
        &self.bytes
    }

    /// Whether [`Values::as_slice`] borrows rather than copies.
    pub fn is_zero_copy(&self) -> bool {
        cfg!(target_endian = "little") && bytemuck::try_cast_slice::<u8, T>(&self.bytes).is_ok()
    }

    /// The items, borrowed from the bytes when they are aligned for `T`, copied when not.
    pub fn as_slice(&self) -> Cow<'_, [T]> {
        #[cfg(target_endian = "little")]
        if let Ok(s) = bytemuck::try_cast_slice::<u8, T>(&self.bytes) {
            return Cow::Borrowed(s);
        }
        let mut out = vec![T::zeroed(); self.len()];
        let raw: &mut [u8] = bytemuck::cast_slice_mut(&mut out);
        raw.copy_from_slice(&self.bytes);
        #[cfg(target_endian = "big")]
        crate::dtype::swap_items(raw, std::mem::size_of::<T>());
        Cow::Owned(out)
    }

    /// Item `i` (panics when out of range, like slice indexing).
    pub fn get(&self, i: usize) -> T {
        let w = std::mem::size_of::<T>();
        let mut v = T::zeroed();
        let raw: &mut [u8] = bytemuck::bytes_of_mut(&mut v);
        raw.copy_from_slice(&self.bytes[i * w..(i + 1) * w]);
        #[cfg(target_endian = "big")]
        crate::dtype::swap_items(raw, w);
        v
    }
}

impl<T> fmt::Debug for Values<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Values<{}>({} bytes)", std::any::type_name::<T>(), self.bytes.len())
    }
}

/// The values of one column, in columnar form (SPEC.md section 15.8).
#[derive(Debug, Clone, PartialEq)]
pub enum ColumnData {
    /// `bool`: one byte a value, 0 or 1 (checked by every decoder).
    Bool(Values<u8>),
    /// `int32`.
    Int32(Values<i32>),
    /// `int64`.
    Int64(Values<i64>),
    /// `float32`, every bit kept.
    Float32(Values<f32>),
    /// `float64`, every bit kept.
    Float64(Values<f64>),
    /// `string`.
    String(Vec<String>),
    /// `uuid`: 16 bytes a value, RFC 9562 order (always a view: its alignment is 1).
    Uuid(Values<[u8; 16]>),
    /// `float32[d]`: `n * d` floats, row-major.
    Float32Vector(Values<f32>),
}

impl ColumnData {
    /// Column data of `ty` over `n * width` little-endian bytes (the caller checked the length and,
    /// for bool, the bytes).
    pub(crate) fn fixed(ty: ColumnType, bytes: Bytes) -> ColumnData {
        match ty {
            ColumnType::Bool => ColumnData::Bool(Values::from_bytes(bytes)),
            ColumnType::Int32 => ColumnData::Int32(Values::from_bytes(bytes)),
            ColumnType::Int64 => ColumnData::Int64(Values::from_bytes(bytes)),
            ColumnType::Float32 => ColumnData::Float32(Values::from_bytes(bytes)),
            ColumnType::Float64 => ColumnData::Float64(Values::from_bytes(bytes)),
            ColumnType::Uuid => ColumnData::Uuid(Values::from_bytes(bytes)),
            ColumnType::Float32Vector(_) => ColumnData::Float32Vector(Values::from_bytes(bytes)),
            ColumnType::String => unreachable!("string columns are not fixed-width"),
        }
    }

    /// The little-endian bytes of a fixed-width column; `None` for strings.
    pub fn fixed_bytes(&self) -> Option<&Bytes> {
        Some(match self {
            ColumnData::Bool(v) => v.bytes(),
            ColumnData::Int32(v) => v.bytes(),
            ColumnData::Int64(v) => v.bytes(),
            ColumnData::Float32(v) => v.bytes(),
            ColumnData::Float64(v) => v.bytes(),
            ColumnData::Uuid(v) => v.bytes(),
            ColumnData::Float32Vector(v) => v.bytes(),
            ColumnData::String(_) => return None,
        })
    }
}

/// A named, typed column.
#[derive(Debug, Clone, PartialEq)]
pub struct Column {
    /// The column name (non-empty UTF-8).
    pub name: String,
    /// The type.
    pub ty: ColumnType,
    /// The values.
    pub data: ColumnData,
}

impl Column {
    /// A column, checked: the data's variant must be `ty`'s and hold `rows` values (`rows * d`
    /// floats for a vector). `shape_mismatch` on the column name otherwise.
    pub fn new(name: impl Into<String>, ty: ColumnType, data: ColumnData, rows: usize) -> Result<Column> {
        let name = name.into();
        let ok = match (&data, ty) {
            (ColumnData::String(v), ColumnType::String) => v.len() == rows,
            (d, t) => {
                let kind_ok = matches!(
                    (d, t),
                    (ColumnData::Bool(_), ColumnType::Bool)
                        | (ColumnData::Int32(_), ColumnType::Int32)
                        | (ColumnData::Int64(_), ColumnType::Int64)
                        | (ColumnData::Float32(_), ColumnType::Float32)
                        | (ColumnData::Float64(_), ColumnType::Float64)
                        | (ColumnData::Uuid(_), ColumnType::Uuid)
                        | (ColumnData::Float32Vector(_), ColumnType::Float32Vector(_))
                );
                kind_ok
                    && t.width().and_then(|w| w.checked_mul(rows)) == d.fixed_bytes().map(|b| b.len())
                    && match d {
                        ColumnData::Bool(v) => v.bytes().iter().all(|&b| b <= 1),
                        _ => true,
                    }
            }
        };
        if !ok {
            return Err(err(ErrorKind::ShapeMismatch, format!("the data is not {rows} values of type {ty}"))
                .field(name.clone()));
        }
        Ok(Column { name, ty, data })
    }

    /// The column's (name, type), as in `Densewire-Columns`.
    pub fn spec(&self) -> ColumnSpec {
        ColumnSpec { name: self.name.clone(), ty: self.ty }
    }
}

/// A column's name and type: what `Densewire-Columns` carries, and what the JSON objects and CSV
/// decoders are handed.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ColumnSpec {
    /// The name.
    pub name: String,
    /// The type.
    pub ty: ColumnType,
}

impl ColumnSpec {
    /// A column spec.
    pub fn new(name: impl Into<String>, ty: ColumnType) -> ColumnSpec {
        ColumnSpec { name: name.into(), ty }
    }
}

/// A table: a name, `rows`, and columns of `rows` values each (SPEC.md section 15).
///
/// ```
/// use densewire::{Bytes, ColumnData, Table, TableFormat};
///
/// // A Protobuf table body (SPEC.md section 15.6): {name: "t", rows: 2, columns: [x float64 PLAIN]}.
/// let mut body = vec![0x0a, 1, b't', 0x10, 2, 0x1a, 23, 0x0a, 1, b'x', 0x10, 5, 0x2a, 16];
/// body.extend(1.5f64.to_le_bytes());
/// body.extend((-2.0f64).to_le_bytes());
/// # #[cfg(feature = "protobuf")] {
/// let t = Table::decode(TableFormat::Protobuf, &[("", "")], Bytes::from(body))?;
/// assert_eq!((t.name.as_str(), t.rows), ("t", 2));
/// let ColumnData::Float64(x) = &t.columns[0].data else { panic!("float64") };
/// assert_eq!(&*x.as_slice(), &[1.5, -2.0]);
/// # }
///
/// // JSON objects carry no types: they come from the Densewire-Columns header.
/// let headers = [("Densewire-Table", "t"), ("Densewire-Columns", "id=uuid,ok=bool")];
/// let body = r#"[{"id":"7c9e6679-7425-40de-944b-e07fc1f90ae7","ok":true}]"#;
/// let t = Table::decode(TableFormat::Json, &headers, Bytes::from(body))?;
/// assert_eq!(t.column("ok").unwrap().data, ColumnData::Bool(densewire::Values::from_slice(&[1u8])));
/// # Ok::<(), densewire::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    /// The table name.
    pub name: String,
    /// `n`, the number of rows.
    pub rows: usize,
    /// The columns, in order.
    pub columns: Vec<Column>,
}

impl Table {
    /// The column named `name`.
    pub fn column(&self, name: &str) -> Option<&Column> {
        self.columns.iter().find(|c| c.name == name)
    }

    /// The (name, type) of every column.
    pub fn specs(&self) -> Vec<ColumnSpec> {
        self.columns.iter().map(Column::spec).collect()
    }

    /// The headers of SPEC.md section 15.2 for this table.
    pub fn headers(&self) -> Vec<(&'static str, String)> {
        vec![
            (crate::raw::HEADER_VERSION, "1".to_string()),
            (HEADER_TABLE, self.name.clone()),
            (HEADER_ROWS, self.rows.to_string()),
            (HEADER_COLUMNS, columns_header(&self.specs())),
        ]
    }

    /// Decodes a table body of `format`. JSON objects and CSV take their column types from the
    /// `Densewire-Columns` header (and the name from `Densewire-Table`); the other formats carry
    /// their own schema and need no headers. A format whose cargo feature is off is
    /// `unsupported_media_type`.
    pub fn decode<H: Headers + ?Sized>(format: TableFormat, headers: &H, body: Bytes) -> Result<Table> {
        let schema = || -> Result<(String, Vec<ColumnSpec>)> {
            let cols = headers.header(HEADER_COLUMNS).ok_or_else(|| {
                err(ErrorKind::InvalidField, format!("{} carries no types: the header is missing", format.name()))
                    .field(HEADER_COLUMNS)
            })?;
            let name = headers.header(HEADER_TABLE).map(percent_decode_lossy).unwrap_or_default();
            Ok((name, parse_columns_header(cols)?))
        };
        match format {
            TableFormat::Json => {
                let (name, cols) = schema()?;
                crate::table_json::decode_table_json_objects(&body, &name, &cols)
            }
            TableFormat::JsonRows => crate::table_json::decode_table_json_rows(&body),
            TableFormat::JsonColumns => crate::table_json::decode_table_json_columns(&body),
            TableFormat::Csv => {
                let (name, cols) = schema()?;
                crate::table_csv::decode_table_csv(&body, &name, &cols)
            }
            TableFormat::Msgpack => {
                #[cfg(feature = "msgpack")]
                return crate::table_msgpack::decode_table_msgpack(body);
                #[cfg(not(feature = "msgpack"))]
                return Err(unsupported(format));
            }
            TableFormat::Protobuf => {
                #[cfg(feature = "protobuf")]
                return crate::table_protobuf::decode_table_protobuf(body);
                #[cfg(not(feature = "protobuf"))]
                return Err(unsupported(format));
            }
            TableFormat::Arrow => {
                #[cfg(feature = "arrow")]
                return crate::table_arrow::decode_table_arrow(body);
                #[cfg(not(feature = "arrow"))]
                return Err(unsupported(format));
            }
        }
    }
}

#[allow(dead_code)]
fn unsupported(format: TableFormat) -> crate::Error {
    err(
        ErrorKind::UnsupportedMediaType,
        format!("{} support is not compiled in (enable the cargo feature {:?})", format.media_type(), format.name()),
    )
}

/// `Densewire-Table`: the table name.
pub const HEADER_TABLE: &str = "Densewire-Table";
/// `Densewire-Rows`: `n` in decimal.
pub const HEADER_ROWS: &str = "Densewire-Rows";
/// `Densewire-Columns`: `name=type,...`, names percent-encoded.
pub const HEADER_COLUMNS: &str = "Densewire-Columns";

/// The seven table formats of SPEC.md section 15.9, in the server's order of preference.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TableFormat {
    /// `application/json`: an array of objects, one a row (section 15.3).
    Json,
    /// `application/vnd.densewire.rows+json`.
    JsonRows,
    /// `application/vnd.densewire.columns+json`.
    JsonColumns,
    /// `text/csv` (section 15.4).
    Csv,
    /// `application/vnd.msgpack`, columnar (section 15.5).
    Msgpack,
    /// `application/protobuf`, the `Table` message (section 15.6).
    Protobuf,
    /// `application/vnd.apache.arrow.stream` (section 15.7).
    Arrow,
}

impl TableFormat {
    /// Every format, in the server's order of preference.
    pub const ALL: [TableFormat; 7] = [
        TableFormat::Json,
        TableFormat::JsonRows,
        TableFormat::JsonColumns,
        TableFormat::Csv,
        TableFormat::Msgpack,
        TableFormat::Protobuf,
        TableFormat::Arrow,
    ];

    /// The canonical media type.
    pub fn media_type(self) -> &'static str {
        self.media_types()[0]
    }

    /// The canonical media type and its aliases.
    pub fn media_types(self) -> &'static [&'static str] {
        match self {
            TableFormat::Json => &["application/json"],
            TableFormat::JsonRows => &["application/vnd.densewire.rows+json"],
            TableFormat::JsonColumns => &["application/vnd.densewire.columns+json"],
            TableFormat::Csv => &["text/csv"],
            TableFormat::Msgpack => &["application/vnd.msgpack", "application/msgpack", "application/x-msgpack"],
            TableFormat::Protobuf => &["application/protobuf", "application/x-protobuf"],
            TableFormat::Arrow => &["application/vnd.apache.arrow.stream"],
        }
    }

    /// The value of the `format` query parameter (`json`, `json-rows`, `json-columns`, `csv`,
    /// `msgpack`, `protobuf`, `arrow`); also the format of the golden cases.
    pub fn name(self) -> &'static str {
        match self {
            TableFormat::Json => "json",
            TableFormat::JsonRows => "json-rows",
            TableFormat::JsonColumns => "json-columns",
            TableFormat::Csv => "csv",
            TableFormat::Msgpack => "msgpack",
            TableFormat::Protobuf => "protobuf",
            TableFormat::Arrow => "arrow",
        }
    }

    /// The format of a `format` parameter value.
    pub fn from_name(name: &str) -> Option<TableFormat> {
        TableFormat::ALL.into_iter().find(|f| f.name() == name)
    }

    /// The format of a `Content-Type` value (aliases and parameters accepted, case-insensitive).
    ///
    /// ```
    /// use densewire::TableFormat;
    /// assert_eq!(TableFormat::from_content_type("text/csv; charset=utf-8; header=present"), Some(TableFormat::Csv));
    /// ```
    pub fn from_content_type(value: &str) -> Option<TableFormat> {
        let essence = value.split(';').next().unwrap_or("").trim();
        TableFormat::ALL.into_iter().find(|f| f.media_types().iter().any(|m| m.eq_ignore_ascii_case(essence)))
    }

    /// Whether this build can decode the format (MessagePack, Protobuf and Arrow are features).
    pub fn is_supported(self) -> bool {
        match self {
            TableFormat::Msgpack => cfg!(feature = "msgpack"),
            TableFormat::Protobuf => cfg!(feature = "protobuf"),
            TableFormat::Arrow => cfg!(feature = "arrow"),
            _ => true,
        }
    }
}

impl fmt::Display for TableFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.media_type())
    }
}

fn is_unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}

/// Percent-encodes a column name as `Densewire-Columns` does (RFC 3986 unreserved bytes kept,
/// every other byte `%XX`, uppercase hex).
pub fn percent_encode(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for &b in name.as_bytes() {
        if is_unreserved(b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn percent_decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let h = b.get(i + 1..i + 3)?;
            let h = std::str::from_utf8(h).ok()?;
            if !h.bytes().all(|c| c.is_ascii_hexdigit()) {
                return None;
            }
            out.push(u8::from_str_radix(h, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

fn percent_decode_lossy(s: &str) -> String {
    percent_decode(s).unwrap_or_else(|| s.to_string())
}

/// The `Densewire-Columns` value for these columns.
///
/// ```
/// use densewire::{columns_header, ColumnSpec, ColumnType};
/// let cols = [ColumnSpec::new("id", ColumnType::Uuid), ColumnSpec::new("a b/é", ColumnType::Float32Vector(3))];
/// assert_eq!(columns_header(&cols), "id=uuid,a%20b%2F%C3%A9=float32[3]");
/// ```
pub fn columns_header(columns: &[ColumnSpec]) -> String {
    columns.iter().map(|c| format!("{}={}", percent_encode(&c.name), c.ty)).collect::<Vec<_>>().join(",")
}

/// Parses a `Densewire-Columns` header (SPEC.md section 15.2). An entry without `=`, an empty or
/// duplicate name, or a bad percent escape is `invalid_field` on `Densewire-Columns`; an unknown
/// type is `unknown_dtype` (on the same field).
///
/// ```
/// use densewire::{parse_columns_header, ColumnType, ErrorKind};
/// let cols = parse_columns_header("uuid=uuid,name%20x=float32[2]")?;
/// assert_eq!((cols[1].name.as_str(), cols[1].ty), ("name x", ColumnType::Float32Vector(2)));
/// let e = parse_columns_header("a=int32,b").unwrap_err();
/// assert_eq!((e.kind(), e.field_name()), (ErrorKind::InvalidField, Some("Densewire-Columns")));
/// # Ok::<(), densewire::Error>(())
/// ```
pub fn parse_columns_header(value: &str) -> Result<Vec<ColumnSpec>> {
    let bad = |m: String| err(ErrorKind::InvalidField, m).field(HEADER_COLUMNS);
    let value = value.trim();
    if value.is_empty() {
        return Ok(Vec::new());
    }
    let mut out: Vec<ColumnSpec> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for (i, entry) in value.split(',').enumerate() {
        let (name, ty) = entry.split_once('=').ok_or_else(|| bad(format!("entry {i} ({entry:?}) has no '='")))?;
        let name = percent_decode(name).ok_or_else(|| bad(format!("entry {i}: bad percent escape in {name:?}")))?;
        if name.is_empty() {
            return Err(bad(format!("entry {i} has an empty name")));
        }
        if !seen.insert(name.clone()) {
            return Err(bad(format!("column {name:?} appears twice")));
        }
        let ty = ColumnType::from_name(ty).map_err(|e| e.field(HEADER_COLUMNS))?;
        out.push(ColumnSpec { name, ty });
    }
    Ok(out)
}

// ------------------------------------------------------------------ helpers shared by the formats

/// Checks that a bool column's bytes are 0 or 1: `invalid_field` on `{field}[ROW]` otherwise.
#[allow(dead_code)] // used by the binary formats (features)
pub(crate) fn check_bools(bytes: &[u8], field: &str) -> Result<()> {
    match bytes.iter().position(|&b| b > 1) {
        None => Ok(()),
        Some(row) => Err(err(ErrorKind::InvalidField, format!("bool byte 0x{:02x} is neither 0 nor 1", bytes[row]))
            .field(format!("{field}[{row}]"))),
    }
}

/// Undoes byte-stream-split: `m` items of `w` bytes, byte `k` of item `i` at `src[k * m + i]`,
/// into an 8-byte-aligned buffer.
#[allow(dead_code)] // used by the Protobuf decoder (feature)
pub(crate) fn unsplit(src: &[u8], w: usize) -> Bytes {
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
#[allow(dead_code)]
pub(crate) fn split(src: &[u8], w: usize) -> Vec<u8> {
    let m = src.len() / w;
    let mut out = vec![0u8; src.len()];
    for (i, item) in src.chunks_exact(w).enumerate() {
        for (k, &b) in item.iter().enumerate() {
            out[k * m + i] = b;
        }
    }
    out
}

/// Parses a UUID's text (canonical 8-4-4-4-12 form, either case) into its 16 bytes.
pub(crate) fn parse_uuid(s: &str) -> Option<[u8; 16]> {
    let b = s.as_bytes();
    if b.len() != 36 || b[8] != b'-' || b[13] != b'-' || b[18] != b'-' || b[23] != b'-' {
        return None;
    }
    let mut out = [0u8; 16];
    let mut j = 0;
    let mut i = 0;
    while i < 36 {
        if matches!(i, 8 | 13 | 18 | 23) {
            i += 1;
            continue;
        }
        let hi = (b[i] as char).to_digit(16)?;
        let lo = (b[i + 1] as char).to_digit(16)?;
        out[j] = (hi * 16 + lo) as u8;
        j += 1;
        i += 2;
    }
    Some(out)
}

/// The canonical lowercase text of a UUID.
pub fn format_uuid(u: &[u8; 16]) -> String {
    let mut s = String::with_capacity(36);
    for (i, b) in u.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            s.push('-');
        }
        s.push_str(&format!("{b:02x}"));
    }
    s
}

/// Builds the columns of a text format (JSON, CSV) value by value.
pub(crate) enum Builder {
    Fixed(ColumnType, Vec<u8>),
    Strings(Vec<String>),
}

impl Builder {
    pub(crate) fn new(ty: ColumnType, rows: usize) -> Builder {
        match ty.width() {
            None => Builder::Strings(Vec::with_capacity(rows)),
            Some(w) => Builder::Fixed(ty, Vec::with_capacity(w.saturating_mul(rows).min(1 << 26))),
        }
    }

    pub(crate) fn finish(self) -> ColumnData {
        match self {
            Builder::Strings(v) => ColumnData::String(v),
            Builder::Fixed(ty, v) => {
                let mut buf = aligned_zeroed(v.len());
                buf.as_mut_slice().copy_from_slice(&v);
                ColumnData::fixed(ty, buf.freeze())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn uuid_text() {
        let u = parse_uuid("7C9E6679-7425-40de-944b-e07fc1f90ae7").unwrap();
        assert_eq!(format_uuid(&u), "7c9e6679-7425-40de-944b-e07fc1f90ae7");
        assert!(parse_uuid("7c9e6679742540de944be07fc1f90ae7").is_none());
        assert!(parse_uuid("7c9e6679-7425-40de-944b-e07fc1f90ag7").is_none());
    }

    #[test]
    fn columns_header_round_trips_and_rejects() {
        let cols =
            vec![ColumnSpec::new("ü x,=", ColumnType::Int64), ColumnSpec::new("v", ColumnType::Float32Vector(7))];
        assert_eq!(parse_columns_header(&columns_header(&cols)).unwrap(), cols);
        for bad in ["a", "a=int32,a=int32", "%zz=int32", "%ff=int32", "=int32"] {
            let e = parse_columns_header(bad).unwrap_err();
            assert_eq!((e.kind(), e.field_name()), (ErrorKind::InvalidField, Some(HEADER_COLUMNS)), "{bad}");
        }
        assert_eq!(parse_columns_header("a=int16").unwrap_err().kind(), ErrorKind::UnknownDtype);
        assert_eq!(parse_columns_header("a=float32[0]").unwrap_err().kind(), ErrorKind::UnknownDtype);
    }

    #[test]
    fn views_borrow_when_aligned() {
        let v = Values::<f64>::from_slice(&[1.0, 2.0]);
        assert!(v.is_zero_copy());
        assert!(matches!(v.as_slice(), Cow::Borrowed(_)));
        let mut raw = vec![0u8; 17];
        raw[1..9].copy_from_slice(&3.5f64.to_le_bytes());
        raw[9..].copy_from_slice(&(-1.0f64).to_le_bytes());
        let b = Bytes::from(raw).slice(1..);
        let v = Values::<f64>::from_bytes(b);
        assert_eq!((v.get(0), v.get(1)), (3.5, -1.0));
        assert_eq!(&*v.as_slice(), &[3.5, -1.0]);
    }
}
