//! CSV tables (SPEC.md section 15.4): RFC 4180, a header line of the column names, CRLF (LF
//! accepted), `"` quoting with doubled quotes; vectors in pgvector's `[v1,v2,...]` text form;
//! non-finite floats as `NaN`, `Infinity`, `-Infinity`. A hand-written reader: line numbers count
//! records (the header is line 1), so a quoted field holding line breaks does not advance them.

use super::model::{Builder, Column, ColumnSpec, ColumnType, Table, parse_uuid};
use crate::error::{Error, ErrorKind, Result, err, truncated};

/// Reads one record starting at `*pos`; `None` at the end of the input. Fields are unquoted.
fn record(text: &[u8], pos: &mut usize) -> Result<Option<Vec<String>>> {
    if *pos >= text.len() {
        return Ok(None);
    }
    let mut fields = Vec::new();
    let mut field = Vec::new();
    let mut i = *pos;
    loop {
        // At the start of a field.
        if i < text.len() && text[i] == b'"' {
            i += 1;
            loop {
                match text.get(i) {
                    None => return Err(truncated(text.len()).with_message("an unterminated quoted field")),
                    Some(b'"') if text.get(i + 1) == Some(&b'"') => {
                        field.push(b'"');
                        i += 2;
                    }
                    Some(b'"') => {
                        i += 1;
                        break;
                    }
                    Some(&b) => {
                        field.push(b);
                        i += 1;
                    }
                }
            }
            // After a closing quote: a separator, a line end or the end.
            match text.get(i) {
                None | Some(b',') | Some(b'\n') => {}
                Some(b'\r') if text.get(i + 1) == Some(&b'\n') => {}
                Some(_) => {
                    return Err(err(ErrorKind::Malformed, "a character follows a closing quote").at(i));
                }
            }
        } else {
            while i < text.len()
                && !matches!(text[i], b',' | b'\n')
                && !(text[i] == b'\r' && text.get(i + 1) == Some(&b'\n'))
            {
                if text[i] == b'"' {
                    return Err(err(ErrorKind::Malformed, "a quote inside an unquoted field").at(i));
                }
                field.push(text[i]);
                i += 1;
            }
        }
        let s = String::from_utf8(std::mem::take(&mut field))
            .map_err(|_| err(ErrorKind::Malformed, "the CSV is not UTF-8").at(i))?;
        fields.push(s);
        match text.get(i) {
            Some(b',') => i += 1,
            Some(b'\r') => {
                i += 2;
                break;
            }
            Some(b'\n') => {
                i += 1;
                break;
            }
            None => break,
            Some(_) => unreachable!(),
        }
    }
    *pos = i;
    Ok(Some(fields))
}

trait WithMessage {
    fn with_message(self, m: &'static str) -> Self;
}

impl WithMessage for Error {
    fn with_message(self, m: &'static str) -> Error {
        let mut e = Error::new(self.kind(), m);
        if let Some(o) = self.offset() {
            e = e.at(o as usize);
        }
        e
    }
}

/// A decimal number as CSV and JSON write it, or `NaN`, `Infinity`, `-Infinity`.
pub(crate) fn parse_float(s: &str) -> Option<f64> {
    match s {
        "NaN" => return Some(f64::NAN),
        "Infinity" => return Some(f64::INFINITY),
        "-Infinity" => return Some(f64::NEG_INFINITY),
        _ => {}
    }
    // Only decimal numbers: Rust's parser would also take "inf", "nan", "infinity".
    let b = s.as_bytes();
    let mut i = usize::from(matches!(b.first(), Some(b'-' | b'+')));
    let int_start = i;
    while i < b.len() && b[i].is_ascii_digit() {
        i += 1;
    }
    let mut digits = i - int_start;
    if i < b.len() && b[i] == b'.' {
        i += 1;
        let f = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        digits += i - f;
    }
    if digits == 0 {
        return None;
    }
    if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
        i += 1;
        if i < b.len() && (b[i] == b'-' || b[i] == b'+') {
            i += 1;
        }
        let e = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i == e {
            return None;
        }
    }
    if i != b.len() {
        return None;
    }
    s.parse().ok()
}

/// A float64 field: a decimal within the float64 range, or `NaN`, `Infinity`, `-Infinity` (the only
/// spellings of non-finite values, SPEC.md section 15.4: `1e400` is out of range).
fn csv_float(s: &str) -> std::result::Result<f64, String> {
    let x = parse_float(s).ok_or_else(|| format!("{s:?} is not a number"))?;
    if x.is_infinite() && !matches!(s, "Infinity" | "-Infinity") {
        return Err(format!("{s:?} is beyond the float64 range"));
    }
    Ok(x)
}

/// A float32 field (or vector item): as [`csv_float`], within the float32 range.
fn csv_float32(s: &str) -> std::result::Result<f32, String> {
    let x = csv_float(s)?;
    if x.is_finite() && (x as f32).is_infinite() {
        return Err(format!("{s:?} is beyond the float32 range (largest finite 3.4028235e38)"));
    }
    Ok(x as f32)
}

fn push_field(b: &mut Builder, ty: ColumnType, s: &str) -> std::result::Result<(), String> {
    match b {
        Builder::Strings(v) => v.push(s.to_string()),
        Builder::Fixed(_, out) => match ty {
            ColumnType::Bool => out.push(match s {
                "true" => 1,
                "false" => 0,
                _ => return Err(format!("{s:?} is not true or false")),
            }),
            ColumnType::Int32 => {
                out.extend_from_slice(&s.parse::<i32>().map_err(|_| format!("{s:?} is not an int32"))?.to_le_bytes())
            }
            ColumnType::Int64 => {
                out.extend_from_slice(&s.parse::<i64>().map_err(|_| format!("{s:?} is not an int64"))?.to_le_bytes())
            }
            ColumnType::Float64 => out.extend_from_slice(&csv_float(s)?.to_le_bytes()),
            ColumnType::Float32 => out.extend_from_slice(&csv_float32(s)?.to_le_bytes()),
            ColumnType::Uuid => out.extend_from_slice(&parse_uuid(s).ok_or_else(|| format!("{s:?} is not a UUID"))?),
            ColumnType::Float32Vector(d) => {
                let inner = s
                    .strip_prefix('[')
                    .and_then(|r| r.strip_suffix(']'))
                    .ok_or_else(|| format!("{s:?} is not a vector [v1,v2,...]"))?;
                let items: Vec<&str> = if inner.trim().is_empty() { Vec::new() } else { inner.split(',').collect() };
                if items.len() != d {
                    return Err(format!("a vector of {} items, not {d}", items.len()));
                }
                for it in items {
                    out.extend_from_slice(&csv_float32(it.trim())?.to_le_bytes());
                }
            }
            ColumnType::String => unreachable!(),
        },
    }
    Ok(())
}

/// Decodes a CSV table. CSV has no types: `columns` gives them (from `Densewire-Columns`). The
/// header line must name the columns in order (`shape_mismatch` on `header`); a record with
/// another number of fields is `shape_mismatch` on `line L`; a field that does not parse is
/// `invalid_field` on `line L, COLUMN`; an unterminated quoted field is `truncated`.
pub fn decode_table_csv(text: &[u8], name: &str, columns: &[ColumnSpec]) -> Result<Table> {
    let mut pos = 0;
    // A UTF-8 byte order mark is not part of the first name.
    if text.starts_with(&[0xEF, 0xBB, 0xBF]) {
        pos = 3;
    }
    if columns.is_empty() {
        return without_columns(text, pos, name);
    }
    let header = record(text, &mut pos)?.unwrap_or_default();
    let names: Vec<&str> = columns.iter().map(|c| c.name.as_str()).collect();
    if header != names {
        return Err(err(
            ErrorKind::ShapeMismatch,
            format!("the header line names {header:?}, the table has {names:?}"),
        )
        .field("header"));
    }
    let mut builders: Vec<Builder> = columns.iter().map(|c| Builder::new(c.ty, 0)).collect();
    let mut rows = 0;
    let mut line = 1;
    while let Some(fields) = record(text, &mut pos)? {
        line += 1;
        if fields.len() != columns.len() {
            return Err(err(
                ErrorKind::ShapeMismatch,
                format!("{} fields, the table has {} columns", fields.len(), columns.len()),
            )
            .field(format!("line {line}")));
        }
        for ((b, spec), f) in builders.iter_mut().zip(columns).zip(&fields) {
            push_field(b, spec.ty, f)
                .map_err(|m| err(ErrorKind::InvalidField, m).field(format!("line {line}, {}", spec.name)))?;
        }
        rows += 1;
    }
    let columns = columns
        .iter()
        .zip(builders)
        .map(|(s, b)| Column { name: s.name.clone(), ty: s.ty, data: b.finish() })
        .collect();
    Ok(Table { name: name.to_string(), rows, columns })
}

/// A table without columns, as [`encode_table_csv`] writes it (and Python's decoder reads it): an
/// empty header line, then one empty line a row (no text at all is no rows). The general reader
/// would take an empty line for one empty field.
fn without_columns(text: &[u8], mut pos: usize, name: &str) -> Result<Table> {
    let mut line = 0usize;
    while pos < text.len() {
        line += 1;
        let end = match text[pos..].iter().position(|&b| b == b'\n') {
            Some(i) if i == 0 || (i == 1 && text[pos] == b'\r') => pos + i + 1,
            _ => {
                let field = if line == 1 { "header".to_string() } else { format!("line {line}") };
                return Err(err(ErrorKind::ShapeMismatch, "a table without columns has empty lines only").field(field));
            }
        };
        pos = end;
    }
    Ok(Table { name: name.to_string(), rows: line.saturating_sub(1), columns: Vec::new() })
}

/// Writes a field, quoted when SPEC.md section 15.4 says so, and also when it starts with U+FEFF:
/// unquoted at the start of the body, decoders (this one, Python's) take it for a byte order mark
/// and drop it from the first column's name.
fn push_quoted(out: &mut String, s: &str) {
    let needs =
        s.is_empty() || s.starts_with([' ', '\u{feff}']) || s.ends_with(' ') || s.contains([',', '"', '\r', '\n']);
    if needs {
        out.push('"');
        out.push_str(&s.replace('"', "\"\""));
        out.push('"');
    } else {
        out.push_str(s);
    }
}

/// Encodes a table as CSV (header line, CRLF after every line, quoting as SPEC.md section 15.4).
pub fn encode_table_csv(table: &Table) -> Result<String> {
    let mut out = String::with_capacity(64 + table.rows * table.columns.len() * 16);
    for (i, c) in table.columns.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        push_quoted(&mut out, &c.name);
    }
    out.push_str("\r\n");
    let mut field = String::new();
    for r in 0..table.rows {
        for (i, c) in table.columns.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            field.clear();
            super::json::write_value(&mut field, c, r, true)?;
            push_quoted(&mut out, &field);
        }
        out.push_str("\r\n");
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::{ColumnData, ColumnSpec, Values};

    fn round_trip(t: &Table) -> Table {
        let text = encode_table_csv(t).unwrap();
        decode_table_csv(text.as_bytes(), &t.name, &t.specs()).unwrap_or_else(|e| panic!("{text:?}: {e}"))
    }

    /// Found by the table_csv fuzz target (corpus regression-no-columns): a table without columns
    /// encodes as an empty header line and an empty line a row, which failed to decode
    /// (`shape_mismatch` on `header`: the empty line was read as one empty name).
    #[test]
    fn a_table_without_columns_round_trips() {
        for rows in [0, 1, 3] {
            let t = Table { name: "t".into(), rows, columns: vec![] };
            assert_eq!(encode_table_csv(&t).unwrap(), "\r\n".repeat(rows + 1));
            assert_eq!(round_trip(&t), t);
        }
        for (text, rows) in [("", 0), ("\n", 0), ("\u{feff}\r\n\n\r\n", 2)] {
            assert_eq!(decode_table_csv(text.as_bytes(), "t", &[]).unwrap().rows, rows, "{text:?}");
        }
        for (text, field) in
            [("a\r\n", "header"), ("\r\n\r\nx\r\n", "line 3"), ("\r\n\"\"\r\n", "line 2"), ("\r", "header")]
        {
            let e = decode_table_csv(text.as_bytes(), "t", &[]).unwrap_err();
            assert_eq!((e.kind(), e.field_name()), (ErrorKind::ShapeMismatch, Some(field)), "{text:?}");
        }
        // With a column, an empty line is still one empty field.
        let one = [ColumnSpec::new("s", ColumnType::String)];
        let t = decode_table_csv(b"s\r\n\r\n", "t", &one).unwrap();
        assert_eq!(t.columns[0].data, ColumnData::String(vec![String::new()]));
    }

    /// Found by the table_json and table_msgpack fuzz targets (corpus regression-bom-column-name): a
    /// first column name starting with U+FEFF was written unquoted at the start of the body, where
    /// the decoder takes it for a byte order mark and drops it.
    #[test]
    fn a_first_name_starting_with_a_byte_order_mark_is_quoted() {
        let c = Column::new("\u{feff}a", ColumnType::Bool, ColumnData::Bool(Values::from_slice(&[1u8])), 1).unwrap();
        let t = Table { name: "t".into(), rows: 1, columns: vec![c] };
        assert_eq!(encode_table_csv(&t).unwrap(), "\"\u{feff}a\"\r\ntrue\r\n");
        assert_eq!(round_trip(&t), t);
        // A real byte order mark before it is still dropped.
        let body = "\u{feff}\u{feff}a\r\ntrue\r\n";
        assert_eq!(decode_table_csv(body.as_bytes(), "t", &t.specs()).unwrap(), t);
    }

    /// SPEC.md section 15.4: `NaN`, `Infinity` and `-Infinity` are the only spellings of
    /// non-finite values; a decimal beyond the column's range is `invalid_field`.
    #[test]
    fn decimals_beyond_the_range_are_invalid() {
        let cols = [
            ColumnSpec::new("d", ColumnType::Float64),
            ColumnSpec::new("f", ColumnType::Float32),
            ColumnSpec::new("v", ColumnType::Float32Vector(2)),
        ];
        let ok = "d,f,v\r\n-Infinity,Infinity,\"[NaN,-Infinity]\"\r\n1.7976931348623157e308,3.4028235e38,\"[-3.4028235e38,1e-46]\"\r\n";
        let t = decode_table_csv(ok.as_bytes(), "t", &cols).unwrap();
        let ColumnData::Float32(f) = &t.columns[1].data else { panic!("float32") };
        assert_eq!(&*f.as_slice(), &[f32::INFINITY, f32::MAX]);
        for (row, column) in [("1e309,0,\"[0,0]\"", "d"), ("0,3.5e38,\"[0,0]\"", "f"), ("0,0,\"[0,-1e39]\"", "v")] {
            let text = format!("d,f,v\r\n0,0,\"[0,0]\"\r\n{row}\r\n");
            let e = decode_table_csv(text.as_bytes(), "t", &cols).unwrap_err();
            let field = format!("line 3, {column}");
            assert_eq!((e.kind(), e.field_name()), (ErrorKind::InvalidField, Some(field.as_str())), "{row}");
        }
    }
}
