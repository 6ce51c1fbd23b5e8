//! The golden vectors of SPEC.md 20.8 (testdata/golden/ragged.json and sparse.json): one test per
//! case, named by the case id. A valid body must decode to its parts (dtype, shape, offsets, the
//! rows or the indices and values bit for bit, model and usage), binary bodies with the rows,
//! indices and values as views of the body; where byte-exact, encoding the parts gives exactly the
//! body (JSON: the same JSON value), and what we encode decodes to the same parts. An invalid body
//! must fail with its category, offset and field.

use densewire::{
    Batch, ByteOrder, Bytes, DType, EncodingFormat, Error, Format, JsonOptions, RaggedEmbeddings, RaggedTensor,
    SparseEmbeddings, SparseTensor, Tensor, Usage,
};
use libtest_mimic::{Arguments, Trial};
use serde_json::Value;
use std::collections::BTreeMap;

mod common;
use common::capabilities::claimed_cases;
use common::{R, check_error, fail, hex, load, s, to_hex};

fn items_le(c: &Value) -> Vec<u8> {
    c["items"].as_array().unwrap().iter().flat_map(|h| hex(h.as_str().unwrap()).into_iter().rev()).collect()
}

fn u64s(c: &Value, k: &str) -> Vec<u64> {
    c[k].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).collect()
}

fn headers(c: &Value) -> Vec<(String, String)> {
    c.get("headers")
        .and_then(Value::as_object)
        .map(|h| h.iter().map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string())).collect())
        .unwrap_or_default()
}

fn body(c: &Value) -> Bytes {
    match (c.get("encoded_text").or(c.get("input_text")), c.get("encoded_hex").or(c.get("input_hex"))) {
        (Some(t), _) => Bytes::from(t.as_str().unwrap().as_bytes().to_vec()),
        (None, Some(h)) => Bytes::from(hex(h.as_str().unwrap())),
        _ => Bytes::new(),
    }
}

fn opts(c: &Value) -> JsonOptions {
    let encoding_format = match c.get("encoding_format").and_then(Value::as_str) {
        Some("base64") => EncodingFormat::Base64,
        _ => EncodingFormat::Float,
    };
    let byteorder = ByteOrder::from_name(c.get("byteorder").and_then(Value::as_str).unwrap_or("little")).unwrap();
    JsonOptions { encoding_format, byteorder }
}

fn response(c: &Value) -> bool {
    c.get("message").and_then(Value::as_str).is_some_and(|m| m.ends_with("Response"))
}

fn meta<T>(c: &Value, tensor: T) -> Batch<T> {
    let mut b = Batch::from_tensor(tensor);
    b.model = c.get("model").and_then(Value::as_str).map(str::to_owned);
    b.usage = c.get("usage").filter(|u| u.is_object()).map(|u| Usage {
        prompt_tokens: u["prompt_tokens"].as_u64().unwrap(),
        total_tokens: u["total_tokens"].as_u64().unwrap(),
    });
    b
}

fn expected_ragged(c: &Value) -> RaggedEmbeddings {
    let dtype = DType::from_name(s(c, "dtype")).unwrap();
    let offsets: Vec<u32> = u64s(c, "offsets").into_iter().map(|o| o as u32).collect();
    let d = u64s(c, "shape")[1] as usize;
    let rows = Tensor::new(dtype, *offsets.last().unwrap() as usize, d, items_le(c)).expect("items fill the rows");
    meta(c, RaggedTensor::new(offsets, rows).expect("a valid ragged case"))
}

fn expected_sparse(c: &Value) -> SparseEmbeddings {
    let dtype = DType::from_name(s(c, "dtype")).unwrap();
    let offsets: Vec<u32> = u64s(c, "offsets").into_iter().map(|o| o as u32).collect();
    let indices: Vec<u32> = u64s(c, "indices").into_iter().map(|i| i as u32).collect();
    let values = Tensor::new(dtype, 1, indices.len(), items_le(c)).expect("items are the values");
    meta(c, SparseTensor::from_parts(u64s(c, "shape")[1], offsets, &indices, values).expect("a valid sparse case"))
}

fn same_meta<T>(got: &Batch<T>, want: &Batch<T>) -> R {
    if want.model.is_some() && got.model != want.model || want.usage.is_some() && got.usage != want.usage {
        return Err(format!("model/usage {:?} {:?} != {:?} {:?}", got.model, got.usage, want.model, want.usage).into());
    }
    Ok(())
}

fn inside(body: &Bytes, part: &[u8]) -> bool {
    part.is_empty() || body.as_ptr_range().contains(&part.as_ptr())
}

/// The shared part of a valid case: decode, compare, zero copy, encode (byte-exact where the case
/// is), decode our encoding.
fn run_valid<T: PartialEq + std::fmt::Debug>(
    c: &Value,
    want: Batch<T>,
    decode: impl Fn(Format, &[(String, String)], Bytes, bool) -> Result<Batch<T>, Error>,
    encode: impl Fn(&Batch<T>, Format, JsonOptions) -> Result<densewire::Encoded, Error>,
    views: impl Fn(&Batch<T>) -> Vec<Vec<u8>>,
    parts: impl Fn(&Batch<T>) -> Vec<&[u8]>,
) -> R {
    let format = Format::from_name(s(c, "format")).unwrap();
    let b = body(c);
    let got = decode(format, &headers(c), b.clone(), response(c)).map_err(|e| fail("decode", e))?;
    if got.tensor != want.tensor {
        return Err(format!("decoded {:?}\n expected {:?}", got.tensor, want.tensor).into());
    }
    same_meta(&got, &want)?;
    if format != Format::Json && !parts(&got).iter().all(|p| inside(&b, p)) {
        return Err("a decoded part is a copy, not a view of the body".into());
    }
    let _ = views;
    let enc = encode(&want, format, opts(c)).map_err(|e| fail("encode", e))?;
    if c["byte_exact"].as_bool().unwrap_or(false) {
        if enc.body != b {
            return Err(format!("encoded {} != golden {}", to_hex(&enc.body), to_hex(&b)).into());
        }
        if format == Format::Raw {
            let ours: BTreeMap<String, String> = enc.headers.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
            let theirs: BTreeMap<String, String> = headers(c).into_iter().collect();
            if ours != theirs {
                return Err(format!("headers {ours:?} != golden {theirs:?}").into());
            }
        }
    }
    if format == Format::Json {
        let ours: Value = serde_json::from_slice(&enc.body).unwrap();
        let theirs: Value = serde_json::from_slice(&b).unwrap();
        if ours != theirs {
            return Err(format!(
                "our JSON {} differs from the golden {}",
                String::from_utf8_lossy(&enc.body),
                String::from_utf8_lossy(&b)
            )
            .into());
        }
    }
    let back = decode(
        format,
        &enc.headers.iter().map(|(k, v)| (k.to_string(), v.clone())).collect::<Vec<_>>(),
        enc.body,
        response(c) || format != Format::Protobuf && want.model.is_some(),
    )
    .map_err(|e| fail("decode of our encoding", e))?;
    if back.tensor != want.tensor {
        return Err("our encoding decodes to other parts".into());
    }
    Ok(())
}

fn run_ragged(c: &Value) -> R {
    if s(c, "id").starts_with("invalid.") {
        let r = RaggedEmbeddings::decode(Format::from_name(s(c, "format")).unwrap(), &headers(c), body(c), response(c));
        return check_error(c, r.map(drop));
    }
    run_valid(
        c,
        expected_ragged(c),
        |f, h, b, r| RaggedEmbeddings::decode(f, h, b, r),
        |e, f, o| e.encode(f, o),
        |_| vec![],
        |e| vec![e.tensor.rows().as_bytes()],
    )
}

fn run_sparse(c: &Value) -> R {
    if s(c, "id").starts_with("invalid.") {
        let r = SparseEmbeddings::decode(Format::from_name(s(c, "format")).unwrap(), &headers(c), body(c), response(c));
        return check_error(c, r.map(drop));
    }
    run_valid(
        c,
        expected_sparse(c),
        |f, h, b, r| SparseEmbeddings::decode(f, h, b, r),
        |e, f, o| e.encode(f, o),
        |_| vec![],
        |e| vec![e.tensor.index_bytes(), e.tensor.values().as_bytes()],
    )
}

fn main() {
    let args = Arguments::from_args();
    let ragged = load("ragged");
    let sparse = load("sparse");
    assert!(!ragged.is_empty() && !sparse.is_empty(), "ragged.json or sparse.json has no cases");
    let claimed = claimed_cases(&[("ragged.json", ragged.as_slice()), ("sparse.json", sparse.as_slice())], !args.list);
    let mut trials = Vec::new();
    for (cases, runner) in [(ragged, run_ragged as fn(&Value) -> R), (sparse, run_sparse)] {
        for c in cases {
            let id = s(&c, "id").to_string();
            if claimed.contains(&id) {
                trials.push(Trial::test(id, move || runner(&c)));
            }
        }
    }
    libtest_mimic::run(&args, trials).exit();
}
