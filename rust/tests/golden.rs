//! The golden vectors of SPEC.md section 13: one test per case, named by the case id.
//! Loads testdata/golden/{tensors,conversions,invalid,interop,quantization}.json found by walking up from this
//! crate to the repository root. Every case Rust claims (capabilities.json) runs: one whose format is
//! not supported fails; the cases of unclaimed features are listed in the output, not run.

use densewire::{
    ByteOrder, DType, Embeddings, EncodingFormat, Error, Format, JsonOptions, Quantization, QuantizationRanges, Tensor,
    Usage, decode_json, decode_raw, dequantize, encode_json, f32_to_bf16, f32_to_f16, f64_to_f32, quantization_id,
    quantize, raw_headers, tensor_from_base64, tensor_to_base64,
};
use libtest_mimic::{Arguments, Trial};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::PathBuf;

mod common;
use common::capabilities::{claimed_cases, planted_unclaimed_feature_is_listed};
use common::{R, check_error, fail, hex, load, s, to_hex};

fn shape(c: &Value) -> (usize, usize) {
    let a = c["shape"].as_array().expect("shape");
    (a[0].as_u64().unwrap() as usize, a[1].as_u64().unwrap() as usize)
}

/// The items (hex, natural big-endian notation) as little-endian tensor bytes.
fn items_le(c: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    for h in c["items"].as_array().unwrap() {
        let mut b = hex(h.as_str().unwrap());
        b.reverse();
        out.extend(b);
    }
    out
}

fn expected_tensor(c: &Value) -> Tensor {
    let (n, d) = shape(c);
    Tensor::new(DType::from_name(s(c, "dtype")).unwrap(), n, d, items_le(c)).expect("case items fill the shape")
}

fn expected_embeddings(c: &Value) -> Embeddings {
    let mut e = Embeddings::from_tensor(expected_tensor(c));
    if let Some(m) = c.get("model").and_then(Value::as_str) {
        e.model = Some(m.to_string());
    }
    if let Some(u) = c.get("usage").filter(|u| u.is_object()) {
        e.usage = Some(Usage {
            prompt_tokens: u["prompt_tokens"].as_u64().unwrap(),
            total_tokens: u["total_tokens"].as_u64().unwrap(),
        });
    }
    e.quantization = c.get("quantization").and_then(Value::as_str).map(str::to_owned);
    e
}

fn check_tensor(got: &Tensor, want: &Tensor) -> R {
    if got.dtype() != want.dtype() || got.shape() != want.shape() {
        return Err(format!(
            "decoded {:?} {:?}, expected {:?} {:?}",
            got.dtype(),
            got.shape(),
            want.dtype(),
            want.shape()
        )
        .into());
    }
    if got.as_bytes() != want.as_bytes() {
        return Err(format!("decoded bytes {} != expected {}", to_hex(got.as_bytes()), to_hex(want.as_bytes())).into());
    }
    Ok(())
}

fn check_meta(got: &Embeddings, want: &Embeddings) -> R {
    if want.model.is_some() && got.model != want.model {
        return Err(format!("model {:?} != {:?}", got.model, want.model).into());
    }
    if want.usage.is_some() && got.usage != want.usage {
        return Err(format!("usage {:?} != {:?}", got.usage, want.usage).into());
    }
    if got.quantization != want.quantization {
        return Err(format!("quantization {:?} != {:?}", got.quantization, want.quantization).into());
    }
    Ok(())
}

fn byteorder(c: &Value) -> ByteOrder {
    ByteOrder::from_name(c.get("byteorder").and_then(Value::as_str).unwrap_or("little")).unwrap()
}

fn bytes_equal(what: &str, got: &[u8], want: &[u8]) -> R {
    if got != want {
        return Err(format!("{what}: encoded {} != golden {}", to_hex(got), to_hex(want)).into());
    }
    Ok(())
}

// ------------------------------------------------------------------ valid tensors

fn run_tensor_case(c: &Value) -> R {
    let want = expected_embeddings(c);
    let exact = c["byte_exact"].as_bool().unwrap_or(false);
    match s(c, "format") {
        "base64" => {
            let (n, d) = shape(c);
            let order = byteorder(c);
            let got = tensor_from_base64(s(c, "encoded_text"), want.tensor.dtype(), n, d, order)
                .map_err(|e| fail("decode", e))?;
            check_tensor(&got, &want.tensor)?;
            if exact {
                let enc = tensor_to_base64(&want.tensor, order);
                if enc != s(c, "encoded_text") {
                    return Err(format!("encoded {enc} != golden {}", s(c, "encoded_text")).into());
                }
            }
        }
        "raw" => {
            let headers: Vec<(String, String)> = c["headers"]
                .as_object()
                .unwrap()
                .iter()
                .map(|(k, v)| (k.to_ascii_lowercase(), v.as_str().unwrap().to_string()))
                .collect();
            let body = hex(s(c, "encoded_hex"));
            let got = decode_raw(&headers, body.clone().into()).map_err(|e| fail("decode", e))?;
            check_tensor(&got.tensor, &want.tensor)?;
            check_meta(&got, &want)?;
            if exact {
                let enc = want.encode(Format::Raw, JsonOptions::default()).map_err(|e| fail("encode", e))?;
                bytes_equal("raw body", &enc.body, &body)?;
                let ours: BTreeMap<String, String> =
                    raw_headers(&want).into_iter().map(|(k, v)| (k.to_string(), v)).collect();
                let theirs: BTreeMap<String, String> = c["headers"]
                    .as_object()
                    .unwrap()
                    .iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap().into()))
                    .collect();
                if ours != theirs {
                    return Err(format!("raw headers {ours:?} != golden {theirs:?}").into());
                }
            }
        }
        "msgpack" | "protobuf" | "arrow" => {
            let format = Format::from_name(s(c, "format")).unwrap();
            let body = hex(s(c, "encoded_hex"));
            let response = c.get("message").and_then(Value::as_str) == Some("EmbeddingsResponse");
            let got = Embeddings::decode(format, &[("", "")], body.clone().into(), response)
                .map_err(|e| fail("decode", e))?;
            check_tensor(&got.tensor, &want.tensor)?;
            check_meta(&got, &want)?;
            let enc = want.encode(format, JsonOptions::default()).map_err(|e| fail("encode", e))?;
            // Our Arrow encodings, for tests/pyarrow_check.py (SPEC.md section 10: pyarrow must
            // decode them to the same tensor); rust/ci.sh sets this when pyarrow is available.
            if let (Format::Arrow, Some(dir)) = (format, std::env::var_os("DENSEWIRE_ARROW_OUT")) {
                std::fs::write(PathBuf::from(dir).join(format!("{}.arrow", s(c, "id"))), &enc.body).unwrap();
            }
            if exact {
                bytes_equal(format.name(), &enc.body, &body)?;
            }
            let back = Embeddings::decode(format, &[("", "")], enc.body, response)
                .map_err(|e| fail("decode of our encoding", e))?;
            check_tensor(&back.tensor, &want.tensor)?;
            check_meta(&back, &want)?;
        }
        "json" => json_case(c, &want)?,
        other => return Err(format!("unknown format {other}").into()),
    }
    Ok(())
}

fn json_case(c: &Value, want: &Embeddings) -> R {
    let got = decode_json(s(c, "encoded_text").as_bytes()).map_err(|e| fail("decode", e))?;
    check_tensor(&got.tensor, &want.tensor)?;
    check_meta(&got, want)?;
    let encoding_format = match c.get("encoding_format").and_then(Value::as_str) {
        Some("float") => EncodingFormat::Float,
        _ => EncodingFormat::Base64,
    };
    let opts = JsonOptions { encoding_format, byteorder: byteorder(c) };
    let text = encode_json(want, opts).map_err(|e| fail("encode", e))?;
    let back = decode_json(text.as_bytes()).map_err(|e| fail("decode of our encoding", e))?;
    check_tensor(&back.tensor, &want.tensor)?;
    // Our encoder writes the canonical envelope: same keys, same Base64, same numbers as the
    // reference (compared as JSON values, since number spelling may vary).
    let ours: Value = serde_json::from_str(&text).unwrap();
    let theirs: Value = serde_json::from_str(s(c, "encoded_text")).unwrap();
    if c.get("source").is_none() && ours != theirs {
        return Err(format!("our JSON {text} differs from the golden {}", s(c, "encoded_text")).into());
    }
    Ok(())
}

// ------------------------------------------------------------------ conversions

fn run_conversion_case(c: &Value) -> R {
    let from = s(c, "from");
    let to = s(c, "to");
    let input: Vec<&str> = c["input"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    let want: Vec<&str> = c["output"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    let got: Vec<String> = match (from, to) {
        ("float32", "float16") => {
            input.iter().map(|h| format!("{:04x}", f32_to_f16(u32::from_str_radix(h, 16).unwrap()))).collect()
        }
        ("float32", "bfloat16") => {
            input.iter().map(|h| format!("{:04x}", f32_to_bf16(u32::from_str_radix(h, 16).unwrap()))).collect()
        }
        ("float64", "float32") => {
            input.iter().map(|h| format!("{:08x}", f64_to_f32(u64::from_str_radix(h, 16).unwrap()))).collect()
        }
        ("float32", "binary") => {
            let (n, d) = shape(c);
            let vals: Vec<f32> = input.iter().map(|h| f32::from_bits(u32::from_str_radix(h, 16).unwrap())).collect();
            let t = Tensor::from_slice(n, d, &vals).unwrap().convert(DType::Binary).map_err(|e| fail("convert", e))?;
            t.as_bytes().iter().map(|b| format!("{b:02x}")).collect()
        }
        _ => return Err(format!("no conversion {from} -> {to}").into()),
    };
    // The tensor-level conversion must agree with the scalar one.
    if from != "float32" || to != "binary" {
        let src = DType::from_name(from).unwrap();
        let mut le = Vec::new();
        for h in &input {
            let mut b = hex(h);
            b.reverse();
            le.extend(b);
        }
        let t = Tensor::new(src, 1, input.len(), le)
            .unwrap()
            .convert(DType::from_name(to).unwrap())
            .map_err(|e| fail("convert", e))?;
        let tensor_hex: Vec<String> = t
            .as_bytes()
            .chunks(DType::from_name(to).unwrap().item_bytes())
            .map(|c| c.iter().rev().map(|b| format!("{b:02x}")).collect())
            .collect();
        if tensor_hex != got {
            return Err(format!("Tensor::convert gives {tensor_hex:?}, the scalar conversion {got:?}").into());
        }
    }
    if got != want {
        return Err(format!("converted {got:?}, expected {want:?}").into());
    }
    Ok(())
}

// ------------------------------------------------------------------ invalid inputs

fn decode_invalid(c: &Value) -> Result<(), Error> {
    let body = || hex(c.get("input_hex").and_then(Value::as_str).unwrap_or(""));
    match s(c, "format") {
        "base64" => {
            let dtype = DType::from_name(s(c, "dtype"))?;
            let order = ByteOrder::from_name(s(c, "byteorder"))?;
            let (n, d) = shape(c);
            tensor_from_base64(s(c, "input_text"), dtype, n, d, order).map(drop)
        }
        "raw" => {
            let headers: Vec<(String, String)> = c["headers"]
                .as_object()
                .unwrap()
                .iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
                .collect();
            decode_raw(&headers, body().into()).map(drop)
        }
        "msgpack" => Embeddings::decode(Format::Msgpack, &[("", "")], body().into(), false).map(drop),
        "protobuf" => {
            let response = c.get("message").and_then(Value::as_str) == Some("EmbeddingsResponse");
            Embeddings::decode(Format::Protobuf, &[("", "")], body().into(), response).map(drop)
        }
        "json" => match c.get("input_hex") {
            Some(_) => decode_json(&body()).map(drop), // bytes that are not UTF-8 text
            None => decode_json(s(c, "input_text").as_bytes()).map(drop),
        },
        "arrow" => Embeddings::decode(Format::Arrow, &[("", "")], body().into(), false).map(drop),
        other => panic!("unknown invalid format {other}"),
    }
}

fn encode_invalid(c: &Value) -> Result<(), Error> {
    assert_eq!(s(c, "format"), "json");
    let e = Embeddings::from_tensor(expected_tensor(c));
    let encoding_format =
        if s(c, "encoding_format") == "float" { EncodingFormat::Float } else { EncodingFormat::Base64 };
    encode_json(&e, JsonOptions { encoding_format, byteorder: ByteOrder::Little }).map(drop)
}

fn run_invalid_case(c: &Value) -> R {
    check_error(c, if s(c, "direction") == "encode" { encode_invalid(c) } else { decode_invalid(c) })
}

// ------------------------------------------------------------------ interop

fn run_interop_case(c: &Value) -> R {
    let want = expected_tensor(c);
    match s(c, "format") {
        "base64" => {
            let (n, d) = shape(c);
            let order = byteorder(c);
            let got =
                tensor_from_base64(s(c, "encoded_text"), want.dtype(), n, d, order).map_err(|e| fail("decode", e))?;
            check_tensor(&got, &want)?;
            if c["byte_exact"].as_bool().unwrap_or(false) {
                let enc = tensor_to_base64(&want, order);
                if enc != s(c, "encoded_text") {
                    return Err(format!("encoded {enc} != peer's {}", s(c, "encoded_text")).into());
                }
            }
            Ok(())
        }
        "json" => {
            let got = decode_json(s(c, "encoded_text").as_bytes()).map_err(|e| fail("decode", e))?;
            check_tensor(&got.tensor, &want)
        }
        other => Err(format!("unknown interop format {other}").into()),
    }
}

// ------------------------------------------------------------------ quantization (SPEC.md section 17)

fn f32_list(c: &Value, k: &str) -> Vec<f32> {
    c[k].as_array()
        .unwrap_or_else(|| panic!("case field {k}"))
        .iter()
        .map(|h| f32::from_bits(u32::from_str_radix(h.as_str().unwrap(), 16).unwrap()))
        .collect()
}

fn byte_list(c: &Value, k: &str) -> Vec<u8> {
    c[k].as_array().unwrap_or_else(|| panic!("case field {k}")).iter().map(|h| hex(h.as_str().unwrap())[0]).collect()
}

fn quant_input(c: &Value) -> Tensor {
    let (n, d) = shape(c);
    Tensor::from_vec(n, d, f32_list(c, "input")).expect("input fills the shape")
}

fn quant_codes(c: &Value) -> Tensor {
    let (n, d) = shape(c);
    Tensor::new(DType::from_name(s(c, "dtype")).unwrap(), n, d, byte_list(c, "codes")).expect("codes fill the shape")
}

fn bits_of(t: &Tensor) -> Vec<String> {
    t.as_f32().unwrap().iter().map(|x| format!("{:08x}", x.to_bits())).collect()
}

fn run_quantization_case(c: &Value) -> R {
    if s(c, "id").starts_with("invalid.") {
        let result = match s(c, "operation") {
            "quantize" => {
                quantize(&quant_input(c), &f32_list(c, "lower"), &f32_list(c, "upper"), DType::Int8).map(drop)
            }
            "dequantize" => dequantize(&quant_codes(c), &f32_list(c, "lower"), &f32_list(c, "upper")).map(drop),
            "id" => Quantization::from_json(s(c, "input_text").as_bytes()).map(drop),
            _ => decode_invalid(c),
        };
        return check_error(c, result);
    }
    let ranges = || (f32_list(c, "lower"), f32_list(c, "upper"));
    match s(c, "operation") {
        "quantize" => {
            let (lower, upper) = ranges();
            let x = quant_input(c);
            let ranges = QuantizationRanges::new(lower.clone(), upper.clone()).map_err(|e| fail("ranges", e))?;
            for (dtype, key) in [(DType::Uint8, "uint8"), (DType::Int8, "int8")] {
                let got = quantize(&x, &lower, &upper, dtype).map_err(|e| fail("quantize", e))?;
                bytes_equal(key, got.as_bytes(), &byte_list(c, key))?;
                if ranges.quantize(&x, dtype).map_err(|e| fail("quantize", e))? != got {
                    return Err("QuantizationRanges::quantize differs from quantize".into());
                }
            }
        }
        "dequantize" => {
            let (lower, upper) = ranges();
            let got = dequantize(&quant_codes(c), &lower, &upper).map_err(|e| fail("dequantize", e))?;
            let want: Vec<String> =
                c["output"].as_array().unwrap().iter().map(|h| h.as_str().unwrap().into()).collect();
            if bits_of(&got) != want {
                return Err(format!("dequantized {:?}, expected {want:?}", bits_of(&got)).into());
            }
        }
        "id" => {
            let (lower, upper) = ranges();
            let id = quantization_id(&lower, &upper);
            if id != s(c, "quantization") {
                return Err(format!("id {id}, expected {}", s(c, "quantization")).into());
            }
            let q =
                Quantization::from_json(s(c, "encoded_text").as_bytes()).map_err(|e| fail("published object", e))?;
            let same = |a: &[f32], b: &[f32]| a.iter().map(|x| x.to_bits()).eq(b.iter().map(|x| x.to_bits()));
            if q.id != id || !same(q.ranges.lower(), &lower) || !same(q.ranges.upper(), &upper) {
                return Err(format!("the published object read as {q:?}").into());
            }
            if q.ranges.dims() as u64 != c["dimensions"].as_u64().unwrap() {
                return Err("dimensions differ".into());
            }
        }
        "binary" => {
            let packed = quant_input(c).convert(DType::Binary).map_err(|e| fail("convert", e))?;
            bytes_equal("binary", packed.as_bytes(), &byte_list(c, "binary"))?;
            // Cohere's `binary`: the same bytes as offset binary (byte - 128)
            let cohere: Vec<String> = packed.as_bytes().iter().map(|&b| (b as i16 - 128).to_string()).collect();
            let want: Vec<String> =
                c["cohere_binary"].as_array().unwrap().iter().map(|v| v.as_str().unwrap().into()).collect();
            if cohere != want {
                return Err(format!("Cohere binary {cohere:?}, expected {want:?}").into());
            }
        }
        "envelope" => run_tensor_case(c)?,
        other => return Err(format!("unknown quantization operation {other}").into()),
    }
    Ok(())
}

fn main() {
    let args = Arguments::from_args();
    let mut trials = Vec::new();
    let files: [(&str, fn(&Value) -> R); 5] = [
        ("tensors", run_tensor_case),
        ("conversions", run_conversion_case),
        ("invalid", run_invalid_case),
        ("interop", run_interop_case),
        ("quantization", run_quantization_case),
    ];
    let loaded: Vec<(String, Vec<Value>, fn(&Value) -> R)> =
        files.iter().map(|(file, runner)| (format!("{file}.json"), load(file), *runner)).collect();
    let claimed = claimed_cases(
        &loaded.iter().map(|(name, cases, _)| (name.as_str(), cases.as_slice())).collect::<Vec<_>>(),
        !args.list,
    );
    let tensors = loaded[0].1.clone();
    trials.push(Trial::test("capabilities.planted_unclaimed_feature_is_listed", move || {
        planted_unclaimed_feature_is_listed("tensors.json", &tensors, "dtype.bfloat16").map_err(Into::into)
    }));
    for (name, cases, runner) in loaded {
        assert!(!cases.is_empty(), "{name} has no cases");
        for c in cases {
            let id = s(&c, "id").to_string();
            if claimed.contains(&id) {
                trials.push(Trial::test(id, move || runner(&c)));
            }
        }
    }
    libtest_mimic::run(&args, trials).exit();
}
