//! The HTTP face of a table (SPEC.md sections 15.2 and 15.9): the table formats and their media
//! types, and the `Densewire-Table`, `Densewire-Rows` and `Densewire-Columns` headers.

use super::model::{ColumnSpec, ColumnType, Table};
use crate::error::{ErrorKind, Result, err};
use crate::headers::HEADER_VERSION;
use std::fmt;

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

pub(super) fn percent_decode_lossy(s: &str) -> String {
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

impl Table {
    /// The headers of SPEC.md section 15.2 for this table.
    pub fn headers(&self) -> Vec<(&'static str, String)> {
        vec![
            (HEADER_VERSION, "1".to_string()),
            (HEADER_TABLE, self.name.clone()),
            (HEADER_ROWS, self.rows.to_string()),
            (HEADER_COLUMNS, columns_header(&self.specs())),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
