//! Helpers shared by the golden-vector tests (golden.rs, tables_golden.rs): loading a golden file,
//! the cases this library claims (capabilities), reading case fields, hex, and checking an expected
//! error against a case.
#![allow(dead_code)] // each test binary uses its own part

use densewire::Error;
use libtest_mimic::Failed;
use serde_json::Value;
use std::path::PathBuf;

pub type R = Result<(), Failed>;

pub mod capabilities;

/// testdata/golden/NAME.json, found by walking up from this crate to the repository root.
pub fn golden_doc(name: &str) -> Value {
    let mut dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let rel = format!("testdata/golden/{name}.json");
    while !dir.join(&rel).exists() {
        assert!(dir.pop(), "{rel} not found above {}", env!("CARGO_MANIFEST_DIR"));
    }
    let path = dir.join(&rel);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).expect("golden JSON parses")
}

/// The cases of testdata/golden/NAME.json.
pub fn load(name: &str) -> Vec<Value> {
    golden_doc(name)["cases"].as_array().expect("cases").clone()
}

pub fn s<'a>(c: &'a Value, k: &str) -> &'a str {
    c[k].as_str().unwrap_or_else(|| panic!("case field {k} is not a string"))
}

pub fn hex(h: &str) -> Vec<u8> {
    (0..h.len()).step_by(2).map(|i| u8::from_str_radix(&h[i..i + 2], 16).unwrap()).collect()
}

pub fn to_hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

pub fn fail(what: &str, e: Error) -> Failed {
    format!("{what} failed: {e} ({:?}, offset {:?}, field {:?})", e.kind(), e.offset(), e.field_name()).into()
}

/// An invalid case passes when `result` is an error of the case's category, with its offset and
/// field where the case gives them.
pub fn check_error(c: &Value, result: Result<(), Error>) -> R {
    let e = match result {
        Ok(()) => return Err(format!("accepted; expected {}", s(c, "error")).into()),
        Err(e) => e,
    };
    if e.kind().code() != s(c, "error") {
        return Err(fail(&format!("expected {}, got {}", s(c, "error"), e.kind()), e));
    }
    if let Some(o) = c.get("offset").and_then(Value::as_u64) {
        if e.offset() != Some(o) {
            return Err(fail(&format!("expected offset {o}"), e));
        }
    }
    if let Some(f) = c.get("field").and_then(Value::as_str) {
        if e.field_name() != Some(f) {
            return Err(fail(&format!("expected field {f}"), e));
        }
    }
    Ok(())
}
