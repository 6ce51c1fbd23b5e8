//! The golden vectors of SPEC.md section 19 (testdata/golden/kserve.json): one test per case, named
//! by the case id. A response body must read to its outputs (name, datatype, shape, whether binary,
//! parameters, the items bit for bit or the BYTES elements), binary tensors as views of the body; an
//! invalid body must fail with its category, offset and field. Cases of features Rust does not claim
//! (`kserve.request`: a server's request parser) are listed, not run.

use densewire::{Bytes, DType, Error, decode_kserve};
use libtest_mimic::{Arguments, Trial};
use serde_json::Value;

mod common;
use common::capabilities::claimed_cases;
use common::{R, check_error, fail, hex, load, s, to_hex};

fn headers(c: &Value) -> Vec<(String, String)> {
    c["headers"].as_object().unwrap().iter().map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string())).collect()
}

fn run_response(c: &Value) -> R {
    // An 8-byte-aligned copy of the body, as the client collects bodies: the views can then be
    // checked for zero copy (as_f32 borrows).
    let body = Bytes::from(hex(s(c, "encoded_hex")));
    let got = decode_kserve(&headers(c), body.clone()).map_err(|e| fail("decode", e))?;
    let want_outputs = c["outputs"].as_array().unwrap();
    let names: Vec<&str> = got.outputs.iter().map(|o| o.name.as_str()).collect();
    let want_names: Vec<&str> = want_outputs.iter().map(|o| s(o, "name")).collect();
    if names != want_names {
        return Err(format!("outputs {names:?} != {want_names:?}").into());
    }
    for (k, key) in [("model_name", &got.model_name), ("model_version", &got.model_version), ("response_id", &got.id)] {
        if c.get(k).and_then(Value::as_str) != key.as_deref() {
            return Err(format!("{k} {key:?} != {:?}", c.get(k)).into());
        }
    }
    for (out, want) in got.outputs.iter().zip(want_outputs) {
        let shape: Vec<u64> = want["shape"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).collect();
        if (out.datatype.as_str(), &out.shape, out.binary)
            != (s(want, "datatype"), &shape, want["binary"].as_bool().unwrap())
        {
            return Err(
                format!("{}: {} {:?} binary={} != {want}", out.name, out.datatype, out.shape, out.binary).into()
            );
        }
        let mut params = out.parameters.clone();
        params.remove("binary_data_size");
        if Value::Object(params.clone()) != want["parameters"] {
            return Err(format!("{}: parameters {params:?} != {}", out.name, want["parameters"]).into());
        }
        if out.quantization() != want["parameters"].get("quantization").and_then(Value::as_str) {
            return Err(format!("{}: quantization {:?}", out.name, out.quantization()).into());
        }
        if s(want, "datatype") == "BYTES" {
            let got_hex: Vec<String> = out.elements().ok_or("no elements")?.iter().map(|e| to_hex(e)).collect();
            let want_hex: Vec<&str> =
                want["elements_hex"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
            if got_hex != want_hex {
                return Err(format!("{}: elements {got_hex:?} != {want_hex:?}", out.name).into());
            }
            if out.binary
                && !out.elements().unwrap().iter().all(|e| e.is_empty() || body.as_ptr_range().contains(&e.as_ptr()))
            {
                return Err(format!("{}: BYTES elements are copies, not slices of the body", out.name).into());
            }
            continue;
        }
        let t = out.tensor().ok_or("no tensor")?;
        let (n, d) = if shape.len() == 1 { (1, shape[0]) } else { (shape[0], shape[1]) };
        let dtype = DType::from_name(s(want, "dtype")).unwrap();
        if (t.dtype(), t.shape()) != (dtype, (n as usize, d as usize)) {
            return Err(format!("{}: tensor {:?} {:?}", out.name, t.dtype(), t.shape()).into());
        }
        let items: Vec<String> = t
            .as_bytes()
            .chunks(dtype.item_bytes())
            .map(|item| item.iter().rev().map(|b| format!("{b:02x}")).collect())
            .collect();
        let want_items: Vec<&str> = want["items"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
        if items != want_items {
            return Err(format!("{}: items {items:?} != {want_items:?} ({})", out.name, want["decimal"]).into());
        }
        if out.binary && t.rows() > 0 && !body.as_ptr_range().contains(&t.as_bytes().as_ptr()) {
            return Err(format!("{}: the tensor is a copy, not a view of the body", out.name).into());
        }
    }
    if let Some(first) = got.outputs.iter().find(|o| o.tensor().is_some()) {
        let e = got.embeddings(&first.name).map_err(|e| fail("embeddings", e))?;
        if e.model != got.model_name || e.quantization.as_deref() != first.quantization() {
            return Err(format!("embeddings(): model {:?}, quantization {:?}", e.model, e.quantization).into());
        }
    }
    Ok(())
}

fn run_invalid(c: &Value) -> R {
    let result: Result<(), Error> = decode_kserve(&headers(c), Bytes::from(hex(s(c, "input_hex")))).map(drop);
    check_error(c, result)
}

fn main() {
    let args = Arguments::from_args();
    let cases = load("kserve");
    assert!(!cases.is_empty(), "kserve.json has no cases");
    let claimed = claimed_cases(&[("kserve.json", cases.as_slice())], !args.list);
    // (The planted-feature check of the listing runs in tests/golden.rs: here `kserve.request` is
    // unclaimed as well, so the listing has two features.)
    let mut trials = Vec::new();
    for c in cases {
        let id = s(&c, "id").to_string();
        if claimed.contains(&id) {
            let runner: fn(&Value) -> R = if id.starts_with("invalid.") { run_invalid } else { run_response };
            trials.push(Trial::test(id, move || runner(&c)));
        }
    }
    libtest_mimic::run(&args, trials).exit();
}
