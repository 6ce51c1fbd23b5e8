//! CSV tables (SPEC.md section 15.4): RFC 4180, a header line of the column names, CRLF (LF
//! accepted), `"` quoting with doubled quotes; vectors in pgvector's `[v1,v2,...]` text form;
//! non-finite floats as `NaN`, `Infinity`, `-Infinity`. A hand-written reader: line numbers count
//! records (the header is line 1), so a quoted field holding line breaks does not advance them.

use crate::error::{Error, ErrorKind, Result, err, truncated};
use crate::table::{Builder, Column, ColumnSpec, ColumnType, Table, parse_uuid};

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
            ColumnType::Float64 => {
                out.extend_from_slice(&parse_float(s).ok_or_else(|| format!("{s:?} is not a number"))?.to_le_bytes())
            }
            ColumnType::Float32 => out.extend_from_slice(
                &(parse_float(s).ok_or_else(|| format!("{s:?} is not a number"))? as f32).to_le_bytes(),
            ),
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
                    let x = parse_float(it.trim()).ok_or_else(|| format!("{it:?} is not a number"))?;
                    out.extend_from_slice(&(x as f32).to_le_bytes());
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

fn push_quoted(out: &mut String, s: &str) {
    let needs = s.is_empty() || s.starts_with(' ') || s.ends_with(' ') || s.contains([',', '"', '\r', '\n']);
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
            crate::table_json::write_value(&mut field, c, r, true)?;
            push_quoted(&mut out, &field);
        }
        out.push_str("\r\n");
    }
    Ok(out)
}
