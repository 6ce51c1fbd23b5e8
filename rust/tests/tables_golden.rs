//! The table golden vectors of SPEC.md sections 13 and 15: one test per case of
//! testdata/golden/tables.json, named by the case id. Floats are compared by their bits. Valid
//! cases decode to their columns; MessagePack and Protobuf cases re-encode byte-exact; every case
//! of a format this crate encodes also round-trips through our encoder. Invalid cases fail with
//! their category, field and offset. Every case Rust claims (capabilities.json) runs, the others are
//! listed in the output; the test needs the msgpack, protobuf and arrow features (Cargo.toml
//! `required-features`).

use densewire::{
    Bytes, Column, ColumnData, ColumnSpec, ColumnType, Table, TableFormat, Values, columns_header, encode_table_csv,
    encode_table_json,
};
use libtest_mimic::{Arguments, Trial};
use serde_json::Value;

mod common;
use common::capabilities::{claimed_cases, planted_unclaimed_feature_is_listed};
use common::{R, check_error, fail, hex, load, s, to_hex};

fn format_of(c: &Value) -> TableFormat {
    TableFormat::from_name(s(c, "format")).unwrap_or_else(|| panic!("unknown table format {}", s(c, "format")))
}

fn specs(c: &Value) -> Vec<ColumnSpec> {
    c["columns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|col| ColumnSpec::new(s(col, "name"), ColumnType::from_name(s(col, "type")).unwrap()))
        .collect()
}

/// The case's columns as a Table (floats from their hex bits, big-endian natural notation).
fn expected(c: &Value) -> Table {
    let rows = c["rows"].as_u64().unwrap() as usize;
    let mut columns = Vec::new();
    for col in c["columns"].as_array().unwrap() {
        let ty = ColumnType::from_name(s(col, "type")).unwrap();
        let vals = col["values"].as_array().unwrap();
        let strs = || vals.iter().map(|v| v.as_str().unwrap());
        let data = match ty {
            ColumnType::Bool => ColumnData::Bool(Values::from_slice(
                &vals.iter().map(|v| u8::from(v.as_bool().unwrap())).collect::<Vec<_>>(),
            )),
            ColumnType::Int32 => {
                ColumnData::Int32(Values::from_slice(&strs().map(|v| v.parse().unwrap()).collect::<Vec<i32>>()))
            }
            ColumnType::Int64 => {
                ColumnData::Int64(Values::from_slice(&strs().map(|v| v.parse().unwrap()).collect::<Vec<i64>>()))
            }
            ColumnType::Float32 => ColumnData::Float32(Values::from_slice(
                &strs().map(|h| f32::from_bits(u32::from_str_radix(h, 16).unwrap())).collect::<Vec<_>>(),
            )),
            ColumnType::Float64 => ColumnData::Float64(Values::from_slice(
                &strs().map(|h| f64::from_bits(u64::from_str_radix(h, 16).unwrap())).collect::<Vec<_>>(),
            )),
            ColumnType::String => ColumnData::String(strs().map(str::to_owned).collect()),
            ColumnType::Uuid => ColumnData::Uuid(Values::from_slice(
                &strs()
                    .map(|u| {
                        let b = hex(&u.replace('-', ""));
                        <[u8; 16]>::try_from(b).unwrap()
                    })
                    .collect::<Vec<_>>(),
            )),
            ColumnType::Float32Vector(_) => ColumnData::Float32Vector(Values::from_slice(
                &vals
                    .iter()
                    .flat_map(|row| row.as_array().unwrap().iter())
                    .map(|h| f32::from_bits(u32::from_str_radix(h.as_str().unwrap(), 16).unwrap()))
                    .collect::<Vec<_>>(),
            )),
        };
        columns.push(Column::new(s(col, "name"), ty, data, rows).expect("the case's values fill the column"));
    }
    Table { name: c.get("table").and_then(Value::as_str).unwrap_or("").to_string(), rows, columns }
}

/// Compares two tables; fixed-width data by bytes (so floats by bits).
fn check_table(what: &str, got: &Table, want: &Table) -> R {
    if got.name != want.name || got.rows != want.rows || got.columns.len() != want.columns.len() {
        return Err(format!(
            "{what}: got table {:?} of {} rows and {} columns, expected {:?} of {} rows and {} columns",
            got.name,
            got.rows,
            got.columns.len(),
            want.name,
            want.rows,
            want.columns.len()
        )
        .into());
    }
    for (g, w) in got.columns.iter().zip(&want.columns) {
        if g.name != w.name || g.ty != w.ty {
            return Err(format!("{what}: column {:?} {} != expected {:?} {}", g.name, g.ty, w.name, w.ty).into());
        }
        match (&g.data, &w.data) {
            (ColumnData::String(a), ColumnData::String(b)) if a == b => {}
            (a, b) if a.fixed_bytes().is_some() && a == b => {}
            (a, b) => {
                let show = |d: &ColumnData| match d.fixed_bytes() {
                    Some(bytes) => to_hex(bytes),
                    None => format!("{d:?}"),
                };
                return Err(format!("{what}: column {:?}: {} != expected {}", g.name, show(a), show(b)).into());
            }
        }
    }
    Ok(())
}

fn headers(c: &Value) -> Vec<(String, String)> {
    c["headers"].as_object().unwrap().iter().map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string())).collect()
}

fn body(c: &Value) -> Bytes {
    match c.get("encoded_hex").or_else(|| c.get("input_hex")).and_then(Value::as_str) {
        Some(h) => Bytes::from(hex(h)),
        None => Bytes::from(
            c.get("encoded_text").or_else(|| c.get("input_text")).and_then(Value::as_str).unwrap().to_string(),
        ),
    }
}

/// Whether every fixed-width column (but bool, bit-packed in Arrow) is a view into `body`.
fn check_views(got: &Table, body: &Bytes, bool_too: bool) -> R {
    let range = body.as_ptr_range();
    for col in &got.columns {
        if col.ty == ColumnType::Bool && !bool_too {
            continue;
        }
        if let Some(b) = col.data.fixed_bytes().filter(|b| !b.is_empty()) {
            if !range.contains(&b.as_ptr()) {
                return Err(format!("column {:?} was copied out of the body, not sliced", col.name).into());
            }
        }
    }
    Ok(())
}

fn run_valid(c: &Value) -> R {
    let want = expected(c);
    let format = format_of(c);
    let hdrs = headers(c);
    // The Densewire-* headers we would send are the golden ones.
    for (k, v) in want.headers() {
        if let Some((_, theirs)) = hdrs.iter().find(|(hk, _)| hk.eq_ignore_ascii_case(k)) {
            if *theirs != v {
                return Err(format!("our {k} is {v:?}, the golden header {theirs:?}").into());
            }
        }
    }
    let body = body(c);
    let got = Table::decode(format, &hdrs, body.clone()).map_err(|e| fail("decode", e))?;
    check_table("decode", &got, &want)?;
    let split = c.get("column_encoding").and_then(Value::as_str) == Some("byte_stream_split");
    match format {
        TableFormat::Msgpack => check_views(&got, &body, true)?,
        TableFormat::Protobuf if !split => check_views(&got, &body, true)?,
        TableFormat::Arrow => check_views(&got, &body, false)?,
        _ => {}
    }
    // Our encoding: byte-exact where the case says so, and always decoding to the same table.
    let ours: Option<Vec<u8>> = match format {
        TableFormat::Json | TableFormat::JsonRows | TableFormat::JsonColumns => {
            Some(encode_table_json(&want, format).map_err(|e| fail("encode", e))?.into_bytes())
        }
        TableFormat::Csv => Some(encode_table_csv(&want).map_err(|e| fail("encode", e))?.into_bytes()),
        TableFormat::Msgpack => Some(densewire::encode_table_msgpack(&want)),
        TableFormat::Protobuf => Some(densewire::encode_table_protobuf(&want, split)),
        TableFormat::Arrow => None, // decode-only (SPEC.md section 15.7); no table Arrow encoder here
    };
    if c["byte_exact"].as_bool().unwrap_or(false) {
        let ours = ours.as_ref().ok_or("byte_exact case of a format we do not encode")?;
        if ours[..] != body[..] {
            return Err(format!("encoded {} != golden {}", to_hex(ours), to_hex(&body)).into());
        }
    }
    if let Some(ours) = ours {
        let back = Table::decode(format, &want.headers(), Bytes::from(ours)).map_err(|e| fail("decode of ours", e))?;
        check_table("decode of our encoding", &back, &want)?;
    }
    Ok(())
}

fn run_invalid(c: &Value) -> R {
    let result = if s(c, "direction") == "encode" {
        // The only encode case: a JSON objects encoding of a non-finite float.
        let layout = TableFormat::from_name(s(c, "format")).expect("a JSON layout");
        encode_table_json(&expected(c), layout).map(drop)
    } else {
        let mut hdrs: Vec<(String, String)> = Vec::new();
        if c.get("columns").is_some() {
            hdrs.push(("Densewire-Columns".into(), columns_header(&specs(c))));
            hdrs.push(("Densewire-Table".into(), "t".into()));
        }
        Table::decode(format_of(c), &hdrs, body(c)).map(drop)
    };
    check_error(c, result)
}

/// Every prefix of every golden body (and a few byte flips), in every format: decoding returns an
/// error or a table, never panics; and no strict prefix of a MessagePack or Arrow body decodes.
fn prefixes_never_panic(cases: &[Value]) -> R {
    // arrow-ipc 60 panics inside its reader on some corrupt streams; decode_table_arrow catches
    // that and answers `malformed`. Keep those caught panics off stderr; one that escaped the
    // decoder would still fail this test.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let r = std::panic::catch_unwind(|| prefixes(cases));
    std::panic::set_hook(hook);
    r.unwrap_or_else(|_| Err("a decoder panicked".into()))
}

fn prefixes(cases: &[Value]) -> R {
    let mut tried = 0;
    for c in cases.iter().filter(|c| s(c, "id").starts_with("table.")) {
        let format = format_of(c);
        let hdrs = headers(c);
        let full = body(c);
        for cut in 0..full.len() {
            let r = Table::decode(format, &hdrs, full.slice(..cut));
            if r.is_ok() && matches!(format, TableFormat::Msgpack | TableFormat::Arrow) && cut + 8 < full.len() {
                return Err(format!("{}: a prefix of {cut} bytes decoded", s(c, "id")).into());
            }
            tried += 1;
        }
        for i in (0..full.len()).step_by(7) {
            let mut flipped = full.to_vec();
            flipped[i] ^= 0x5a;
            let _ = Table::decode(format, &hdrs, Bytes::from(flipped));
            tried += 1;
        }
    }
    println!("{tried} prefixes and flips decoded without a panic");
    Ok(())
}

fn main() {
    let args = Arguments::from_args();
    let cases = load("tables");
    let all = cases.clone();
    assert!(cases.len() >= 81, "tables.json has {} cases, expected at least 81", cases.len());
    let claimed = claimed_cases(&[("tables.json", &cases)], !args.list);
    let planted = cases.clone();
    let trials = cases
        .into_iter()
        .filter(|c| claimed.contains(s(c, "id")))
        .map(|c| {
            let id = s(&c, "id").to_string();
            if id.starts_with("invalid.") {
                Trial::test(id, move || run_invalid(&c))
            } else {
                Trial::test(id, move || run_valid(&c))
            }
        })
        .chain(std::iter::once(Trial::test("tables.prefixes_and_flips_never_panic", move || {
            prefixes_never_panic(&all)
        })))
        .chain(std::iter::once(Trial::test("capabilities.planted_unclaimed_table_format_is_listed", move || {
            planted_unclaimed_feature_is_listed("tables.json", &planted, "table.csv").map_err(Into::into)
        })))
        .collect();
    libtest_mimic::run(&args, trials).exit();
}
