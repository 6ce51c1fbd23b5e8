//! The golden vectors of SPEC.md section 16 (testdata/golden/pgcopy.json): one test per case, named
//! by the case id. A valid case's input (tensor and ids) must encode to exactly its stream, and the
//! stream must decode to its values and ids; an invalid case must fail with its category at its
//! offset or on its field. Cases of features Rust does not claim are listed, not run.

use densewire::{
    CopyColumns, DType, Error, PgIdType, PgIds, PgVectorType, Tensor, decode_pgcopy, encode_pgcopy, format_uuid,
};
use libtest_mimic::{Arguments, Trial};
use serde_json::Value;

mod common;
use common::capabilities::{claimed_cases, planted_unclaimed_feature_is_listed};
use common::{R, check_error, fail, hex, load, s, to_hex};

fn columns(c: &Value) -> CopyColumns {
    let cols = c["columns"].as_array().expect("columns");
    let last = cols.last().unwrap();
    let vt = PgVectorType::from_name(s(last, "type")).expect("a vector type");
    assert_eq!(vt.name(), s(c, "pg_type"));
    let mut cc = CopyColumns::new(vt, s(last, "name"));
    if cols.len() == 2 {
        cc = cc.with_id(PgIdType::from_name(s(&cols[0], "type")).expect("an id type"), s(&cols[0], "name"));
    }
    if let Some(shape) = c.get("shape") {
        cc = cc.with_empty_dims(shape[1].as_u64().unwrap() as usize);
    }
    cc
}

/// A tensor from hex items in natural (big-endian) notation.
fn tensor(dtype: &str, shape: &Value, items: &Value) -> Tensor {
    let (n, d) = (shape[0].as_u64().unwrap() as usize, shape[1].as_u64().unwrap() as usize);
    let mut le = Vec::new();
    for h in items.as_array().unwrap() {
        let mut b = hex(h.as_str().unwrap());
        b.reverse();
        le.extend(b);
    }
    Tensor::new(DType::from_name(dtype).unwrap(), n, d, le).expect("case items fill the shape")
}

fn ids(c: &Value, cols: &CopyColumns) -> Option<PgIds> {
    let ty = cols.id_type?;
    let list = c["ids"].as_array().expect("ids");
    let strs = list.iter().map(|v| v.as_str().map(str::to_owned));
    Some(match ty {
        PgIdType::Int8 | PgIdType::Int4 => PgIds::Int(strs.map(|v| v.map(|v| v.parse().unwrap())).collect()),
        PgIdType::Text => PgIds::Text(strs.collect()),
        PgIdType::Uuid => PgIds::Uuid(
            strs.map(|v| {
                v.map(|v| {
                    let b = hex(&v.replace('-', ""));
                    <[u8; 16]>::try_from(b).unwrap()
                })
            })
            .collect(),
        ),
    })
}

fn run_valid(c: &Value) -> R {
    let cols = columns(c);
    let input = tensor(s(c, "dtype"), &c["shape"], &c["items"]);
    let ids = ids(c, &cols);
    let stream = hex(s(c, "encoded_hex"));
    let enc = encode_pgcopy(&input, &cols, ids.as_ref()).map_err(|e| fail("encode", e))?;
    if enc != stream {
        return Err(format!("encoded {} != golden {}", to_hex(&enc), s(c, "encoded_hex")).into());
    }
    let got = decode_pgcopy(&stream, &cols).map_err(|e| fail("decode", e))?;
    let want = tensor(s(c, "value_dtype"), &c["shape"], &c["values"]);
    if got.tensor != want {
        return Err(format!(
            "decoded {:?} {}, expected {:?} {}",
            got.tensor,
            to_hex(got.tensor.as_bytes()),
            want,
            to_hex(want.as_bytes())
        )
        .into());
    }
    if got.ids != ids {
        return Err(format!("decoded ids {:?}, expected {ids:?}", got.ids).into());
    }
    if let Some(PgIds::Uuid(u)) = &got.ids {
        let text: Vec<Option<String>> = u.iter().map(|u| u.as_ref().map(format_uuid)).collect();
        let want: Vec<Option<String>> =
            c["ids"].as_array().unwrap().iter().map(|v| v.as_str().map(Into::into)).collect();
        if text != want {
            return Err(format!("uuid texts {text:?} != {want:?}").into());
        }
    }
    Ok(())
}

fn run_invalid(c: &Value) -> R {
    let cols = columns(c);
    let result: Result<(), Error> = if s(c, "direction") == "encode" {
        let input = tensor(s(c, "dtype"), &c["shape"], &c["items"]);
        encode_pgcopy(&input, &cols, ids(c, &cols).as_ref()).map(drop)
    } else {
        decode_pgcopy(&hex(s(c, "input_hex")), &cols).map(drop)
    };
    check_error(c, result)
}

fn main() {
    let args = Arguments::from_args();
    let cases = load("pgcopy");
    assert!(!cases.is_empty(), "pgcopy.json has no cases");
    let claimed = claimed_cases(&[("pgcopy.json", cases.as_slice())], !args.list);
    let mut trials = Vec::new();
    let all = cases.clone();
    trials.push(Trial::test("capabilities.planted_unclaimed_feature_is_listed.pgcopy", move || {
        planted_unclaimed_feature_is_listed("pgcopy.json", &all, "pgcopy.sparsevec").map_err(Into::into)
    }));
    for c in cases {
        let id = s(&c, "id").to_string();
        if claimed.contains(&id) {
            let runner: fn(&Value) -> R = if id.starts_with("invalid.") { run_invalid } else { run_valid };
            trials.push(Trial::test(id, move || runner(&c)));
        }
    }
    libtest_mimic::run(&args, trials).exit();
}
