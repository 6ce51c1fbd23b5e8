//! The three JSON layouts of a table (SPEC.md section 15.3): objects (`application/json`), rows
//! (`application/vnd.densewire.rows+json`) and columns (`application/vnd.densewire.columns+json`).
//! Numbers are read as the nearest float64 and then rounded to float32 where the column is float32
//! (section 3.5); integers must be integers in range. Encoding writes the shortest decimal that
//! reads back to the same bits, and fails with `non_finite` on NaN and ±Infinity.

use super::media::TableFormat;
use super::model::{Builder, Column, ColumnData, ColumnSpec, ColumnType, Table, format_uuid, parse_uuid};
use crate::error::{Error, ErrorKind, Result, err, truncated};
use serde_json::{Map, Value};

/// serde_json's error as a densewire error: a body cut short is `truncated`, anything else
/// `malformed` at the byte offset of the error.
pub(crate) fn json_error(text: &[u8], e: serde_json::Error) -> Error {
    if e.is_eof() {
        return truncated(text.len());
    }
    // serde_json reports lines and columns (1-based); find the byte offset.
    let mut offset = 0;
    for (i, line) in text.split(|&b| b == b'\n').enumerate() {
        if i + 1 == e.line() {
            offset += e.column().saturating_sub(1).min(line.len());
            break;
        }
        offset += line.len() + 1;
    }
    err(ErrorKind::Malformed, format!("invalid JSON: {e}")).at(offset.min(text.len()))
}

fn parse(text: &[u8]) -> Result<Value> {
    serde_json::from_slice(text).map_err(|e| json_error(text, e))
}

fn invalid(path: impl Into<String>, what: impl Into<String>) -> Error {
    err(ErrorKind::InvalidField, what.into()).field(path.into())
}

fn number(v: &Value, path: &dyn Fn() -> String) -> Result<f64> {
    v.as_f64().ok_or_else(|| invalid(path(), format!("{} is not a number", kind(v))))
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A number that rounds beyond the largest finite float32: out of the type's range, since JSON has
/// no infinities (SPEC.md section 15.3). A float64 column needs no such check: serde_json refuses
/// numbers beyond binary64 itself (`malformed`, as the spec allows).
fn beyond_float32(v: &Value, path: String) -> Error {
    invalid(path, format!("{v} is beyond the float32 range (largest finite 3.4028235e38)"))
}

/// Appends one JSON value of column type `ty` to `b`; errors name `path()`.
pub(crate) fn push_json(b: &mut Builder, ty: ColumnType, v: &Value, path: &dyn Fn() -> String) -> Result<()> {
    match b {
        Builder::Strings(out) => match v {
            Value::String(s) => out.push(s.clone()),
            _ => return Err(invalid(path(), format!("{} is not a string", kind(v)))),
        },
        Builder::Fixed(_, out) => match ty {
            ColumnType::Bool => match v {
                Value::Bool(x) => out.push(*x as u8),
                _ => return Err(invalid(path(), format!("{} is not a boolean", kind(v)))),
            },
            ColumnType::Int32 => {
                let x = v
                    .as_i64()
                    .filter(|_| v.is_i64() || v.is_u64())
                    .ok_or_else(|| invalid(path(), format!("{v} is not an int64 integer")))?;
                let x = i32::try_from(x).map_err(|_| invalid(path(), format!("{x} is out of the int32 range")))?;
                out.extend_from_slice(&x.to_le_bytes());
            }
            ColumnType::Int64 => {
                let x = v.as_i64().ok_or_else(|| invalid(path(), format!("{v} is not an int64 integer")))?;
                out.extend_from_slice(&x.to_le_bytes());
            }
            ColumnType::Float64 => out.extend_from_slice(&number(v, path)?.to_le_bytes()),
            ColumnType::Float32 => {
                let x = number(v, path)? as f32;
                if x.is_infinite() {
                    return Err(beyond_float32(v, path()));
                }
                out.extend_from_slice(&x.to_le_bytes());
            }
            ColumnType::Uuid => {
                let u = v
                    .as_str()
                    .and_then(parse_uuid)
                    .ok_or_else(|| invalid(path(), format!("{v} is not a UUID in canonical text")))?;
                out.extend_from_slice(&u);
            }
            ColumnType::Float32Vector(d) => {
                let a = v.as_array().ok_or_else(|| invalid(path(), format!("{} is not an array", kind(v))))?;
                if a.len() != d {
                    return Err(
                        err(ErrorKind::ShapeMismatch, format!("a vector of {} items, not {d}", a.len())).field(path())
                    );
                }
                for (j, x) in a.iter().enumerate() {
                    let item = || format!("{}[{j}]", path());
                    let f = number(x, &item)? as f32;
                    if f.is_infinite() {
                        return Err(beyond_float32(x, item()));
                    }
                    out.extend_from_slice(&f.to_le_bytes());
                }
            }
            ColumnType::String => unreachable!(),
        },
    }
    Ok(())
}

fn finish(name: String, rows: usize, specs: &[ColumnSpec], builders: Vec<Builder>) -> Table {
    let columns =
        specs.iter().zip(builders).map(|(s, b)| Column { name: s.name.clone(), ty: s.ty, data: b.finish() }).collect();
    Table { name, rows, columns }
}

/// Decodes the objects layout (an array of one object a row). It has no types: `columns` gives
/// them (from `Densewire-Columns`, see [`parse_columns_header`](crate::parse_columns_header)).
/// Every object must have exactly the columns' keys: `invalid_field` on `[ROW].KEY` otherwise.
pub fn decode_table_json_objects(text: &[u8], name: &str, columns: &[ColumnSpec]) -> Result<Table> {
    let v = parse(text)?;
    let rows = match v {
        Value::Array(a) => a,
        other => return Err(err(ErrorKind::Malformed, format!("the body is {}, not an array of rows", kind(&other)))),
    };
    let mut builders: Vec<Builder> = columns.iter().map(|c| Builder::new(c.ty, rows.len())).collect();
    for (r, row) in rows.iter().enumerate() {
        let obj =
            row.as_object().ok_or_else(|| invalid(format!("[{r}]"), format!("{} is not an object", kind(row))))?;
        for (c, spec) in columns.iter().enumerate() {
            let path = || format!("[{r}].{}", spec.name);
            let v = obj.get(&spec.name).ok_or_else(|| invalid(path(), "the key is missing"))?;
            push_json(&mut builders[c], spec.ty, v, &path)?;
        }
        if obj.len() != columns.len() {
            let extra = obj.keys().find(|k| !columns.iter().any(|c| &c.name == *k)).cloned().unwrap_or_default();
            return Err(invalid(format!("[{r}].{extra}"), "an unknown key"));
        }
    }
    Ok(finish(name.to_string(), rows.len(), columns, builders))
}

fn top_object(v: Value) -> Result<Map<String, Value>> {
    match v {
        Value::Object(o) => Ok(o),
        other => Err(err(ErrorKind::Malformed, format!("the body is {}, not an object", kind(&other)))),
    }
}

fn table_name(o: &Map<String, Value>) -> Result<String> {
    match o.get("name") {
        Some(Value::String(s)) => Ok(s.clone()),
        _ => Err(invalid("name", "name is missing or not a string")),
    }
}

/// The `columns` array of the rows and columns layouts: `(name, type)` of each, checked.
fn column_specs(o: &Map<String, Value>) -> Result<(Vec<ColumnSpec>, &Vec<Value>)> {
    let cols = o
        .get("columns")
        .and_then(Value::as_array)
        .ok_or_else(|| invalid("columns", "columns is missing or not an array"))?;
    let mut specs: Vec<ColumnSpec> = Vec::with_capacity(cols.len());
    let mut seen = std::collections::HashSet::new(); // not a scan of `specs`: quadratic in the columns
    for (i, c) in cols.iter().enumerate() {
        let name = c
            .get("name")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .ok_or_else(|| invalid(format!("columns[{i}].name"), "the name is missing, empty or not a string"))?;
        if !seen.insert(name) {
            return Err(invalid(format!("columns[{i}].name"), format!("column {name:?} appears twice")));
        }
        let ty = c
            .get("type")
            .and_then(Value::as_str)
            .ok_or_else(|| invalid(format!("columns[{i}].type"), "the type is missing or not a string"))?;
        let ty = ColumnType::from_name(ty).map_err(|e| e.field(format!("columns[{i}].type")))?;
        specs.push(ColumnSpec { name: name.to_string(), ty });
    }
    Ok((specs, cols))
}

/// Decodes the rows layout: `{"name", "columns": [{"name", "type"}], "rows": [[...], ...]}`.
pub fn decode_table_json_rows(text: &[u8]) -> Result<Table> {
    let o = top_object(parse(text)?)?;
    let name = table_name(&o)?;
    let (specs, _) = column_specs(&o)?;
    let rows =
        o.get("rows").and_then(Value::as_array).ok_or_else(|| invalid("rows", "rows is missing or not an array"))?;
    let mut builders: Vec<Builder> = specs.iter().map(|c| Builder::new(c.ty, rows.len())).collect();
    for (r, row) in rows.iter().enumerate() {
        let a =
            row.as_array().ok_or_else(|| invalid(format!("rows[{r}]"), format!("{} is not an array", kind(row))))?;
        if a.len() != specs.len() {
            return Err(err(
                ErrorKind::ShapeMismatch,
                format!("a row of {} values, the table has {} columns", a.len(), specs.len()),
            )
            .field(format!("rows[{r}]")));
        }
        for (c, v) in a.iter().enumerate() {
            push_json(&mut builders[c], specs[c].ty, v, &|| format!("rows[{r}][{c}]"))?;
        }
    }
    Ok(finish(name, rows.len(), &specs, builders))
}

/// Decodes the columns layout: `{"name", "rows": n, "columns": [{"name", "type", "values"}]}`.
pub fn decode_table_json_columns(text: &[u8]) -> Result<Table> {
    let o = top_object(parse(text)?)?;
    let name = table_name(&o)?;
    let n = o
        .get("rows")
        .and_then(Value::as_u64)
        .ok_or_else(|| invalid("rows", "rows is missing or not a non-negative integer"))?;
    let n = usize::try_from(n).map_err(|_| invalid("rows", "rows is too large"))?;
    let (specs, cols) = column_specs(&o)?;
    let mut builders = Vec::with_capacity(specs.len());
    for (c, spec) in specs.iter().enumerate() {
        let values = cols[c]
            .get("values")
            .and_then(Value::as_array)
            .ok_or_else(|| invalid(format!("columns[{c}].values"), "values is missing or not an array"))?;
        if values.len() != n {
            return Err(err(ErrorKind::ShapeMismatch, format!("{} values, the table has {n} rows", values.len()))
                .field(format!("columns[{c}].values")));
        }
        let mut b = Builder::new(spec.ty, n);
        for (r, v) in values.iter().enumerate() {
            push_json(&mut b, spec.ty, v, &|| format!("columns[{c}].values[{r}]"))?;
        }
        builders.push(b);
    }
    Ok(finish(name, n, &specs, builders))
}

// ------------------------------------------------------------------ encoding

/// Writes value `row` of `col` as JSON (`csv`: as a CSV field's text, unquoted, with non-finite
/// floats spelled `NaN`, `Infinity`, `-Infinity`). Non-finite floats in JSON are `non_finite` on
/// `COLUMN[ROW]`.
pub(crate) fn write_value(out: &mut String, col: &Column, row: usize, csv: bool) -> Result<()> {
    let mut ryu_buf = ryu::Buffer::new();
    let non_finite =
        || err(ErrorKind::NonFinite, "NaN and Infinity have no JSON form").field(format!("{}[{row}]", col.name));
    let special = |x: f64| {
        if x.is_nan() {
            "NaN"
        } else if x > 0.0 {
            "Infinity"
        } else {
            "-Infinity"
        }
    };
    match &col.data {
        ColumnData::Bool(v) => out.push_str(if v.get(row) != 0 { "true" } else { "false" }),
        ColumnData::Int32(v) => out.push_str(itoa::Buffer::new().format(v.get(row))),
        ColumnData::Int64(v) => out.push_str(itoa::Buffer::new().format(v.get(row))),
        ColumnData::Float32(v) => {
            let x = v.get(row);
            if x.is_finite() {
                out.push_str(ryu_buf.format_finite(x));
            } else if csv {
                out.push_str(special(x as f64));
            } else {
                return Err(non_finite());
            }
        }
        ColumnData::Float64(v) => {
            let x = v.get(row);
            if x.is_finite() {
                out.push_str(ryu_buf.format_finite(x));
            } else if csv {
                out.push_str(special(x));
            } else {
                return Err(non_finite());
            }
        }
        ColumnData::String(v) => {
            if csv {
                out.push_str(&v[row]);
            } else {
                out.push_str(&serde_json::to_string(&v[row]).expect("a string serializes"));
            }
        }
        ColumnData::Uuid(v) => {
            let u = format_uuid(&v.get(row));
            if csv {
                out.push_str(&u);
            } else {
                out.push('"');
                out.push_str(&u);
                out.push('"');
            }
        }
        ColumnData::Float32Vector(v) => {
            let d = match col.ty {
                ColumnType::Float32Vector(d) => d,
                _ => unreachable!("checked by Column::new and the decoders"),
            };
            out.push('[');
            for j in 0..d {
                if j > 0 {
                    out.push(',');
                }
                let x = v.get(row * d + j);
                if x.is_finite() {
                    out.push_str(ryu_buf.format_finite(x));
                } else if csv {
                    out.push_str(special(x as f64));
                } else {
                    return Err(non_finite());
                }
            }
            out.push(']');
        }
    }
    Ok(())
}

fn json_str(s: &str) -> String {
    serde_json::to_string(s).expect("a string serializes")
}

/// Encodes a table in one of the JSON layouts (`layout`: [`TableFormat::Json`],
/// [`TableFormat::JsonRows`] or [`TableFormat::JsonColumns`]; others are `invalid_field`).
/// NaN and ±Infinity fail with `non_finite` on `COLUMN[ROW]`.
///
/// ```
/// use densewire::{encode_table_json, Column, ColumnData, ColumnType, ErrorKind, Table, TableFormat, Values};
/// let x = Column::new("x", ColumnType::Float64, ColumnData::Float64(Values::from_slice(&[0.1, f64::NAN])), 2)?;
/// let t = Table { name: "t".into(), rows: 2, columns: vec![x] };
/// let e = encode_table_json(&t, TableFormat::Json).unwrap_err();
/// assert_eq!((e.kind(), e.field_name()), (ErrorKind::NonFinite, Some("x[1]")));
/// # Ok::<(), densewire::Error>(())
/// ```
pub fn encode_table_json(table: &Table, layout: TableFormat) -> Result<String> {
    let mut out = String::with_capacity(64 + table.rows * table.columns.len() * 20);
    let header = |out: &mut String| {
        out.push('[');
        for (i, c) in table.columns.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(&format!(r#"{{"name":{},"type":"{}""#, json_str(&c.name), c.ty));
            if layout == TableFormat::JsonRows {
                out.push('}');
            }
        }
    };
    match layout {
        TableFormat::Json => {
            let keys: Vec<String> = table.columns.iter().map(|c| json_str(&c.name)).collect();
            out.push('[');
            for r in 0..table.rows {
                if r > 0 {
                    out.push(',');
                }
                out.push('{');
                for (i, c) in table.columns.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&keys[i]);
                    out.push(':');
                    write_value(&mut out, c, r, false)?;
                }
                out.push('}');
            }
            out.push(']');
        }
        TableFormat::JsonRows => {
            out.push_str(&format!(r#"{{"name":{},"columns":"#, json_str(&table.name)));
            header(&mut out);
            out.push_str(r#"],"rows":["#);
            for r in 0..table.rows {
                if r > 0 {
                    out.push(',');
                }
                out.push('[');
                for (i, c) in table.columns.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write_value(&mut out, c, r, false)?;
                }
                out.push(']');
            }
            out.push_str("]}");
        }
        TableFormat::JsonColumns => {
            out.push_str(&format!(r#"{{"name":{},"rows":{},"columns":["#, json_str(&table.name), table.rows));
            for (i, c) in table.columns.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&format!(r#"{{"name":{},"type":"{}","values":["#, json_str(&c.name), c.ty));
                for r in 0..table.rows {
                    if r > 0 {
                        out.push(',');
                    }
                    write_value(&mut out, c, r, false)?;
                }
                out.push_str("]}");
            }
            out.push_str("]}");
        }
        other => {
            return Err(invalid("format", format!("{} is not a JSON layout", other.name())));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SPEC.md section 15.3: JSON has no infinities, so a number that rounds beyond float32 is out
    /// of a float32 column's range (a vector item's error names the item); float64 numbers beyond
    /// binary64 are refused by the JSON parser itself.
    #[test]
    fn numbers_beyond_the_float32_range_are_invalid() {
        let rows =
            |v: &str, ty: &str| format!(r#"{{"name":"t","columns":[{{"name":"a","type":"{ty}"}}],"rows":[[{v}]]}}"#);
        let t = decode_table_json_rows(rows("3.4028235e38", "float32").as_bytes()).unwrap();
        assert_eq!(t.columns[0].data, ColumnData::Float32(crate::Values::from_slice(&[f32::MAX])));
        for (v, ty, field) in [("-1e39", "float32", "rows[0][0]"), ("[1,4e38]", "float32[2]", "rows[0][0][1]")] {
            let e = decode_table_json_rows(rows(v, ty).as_bytes()).unwrap_err();
            assert_eq!((e.kind(), e.field_name()), (ErrorKind::InvalidField, Some(field)), "{v}");
        }
        let e = decode_table_json_rows(rows("1e309", "float64").as_bytes()).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Malformed);
        let specs = [ColumnSpec::new("x", ColumnType::Float32)];
        let e = decode_table_json_objects(br#"[{"x":1},{"x":1e39}]"#, "t", &specs).unwrap_err();
        assert_eq!((e.kind(), e.field_name()), (ErrorKind::InvalidField, Some("[1].x")));
    }
}
