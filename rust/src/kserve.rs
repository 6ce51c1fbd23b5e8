//! The Open Inference Protocol (KServe v2) response reader (SPEC.md section 19): a JSON object
//! alone, or the binary tensor extension's JSON header of `Inference-Header-Content-Length` bytes
//! followed by the blobs of the outputs that have `parameters.binary_data_size`. A tensor output
//! read from a blob is a [`Tensor`] sharing the body (no copy); a `BYTES` output's elements are
//! slices of the body too.

use crate::dtype::DType;
use crate::embeddings::Embeddings;
use crate::error::{Error, ErrorKind, Result, err};
use crate::headers::Headers;
use crate::json::{json_error, put_number};
use crate::tensor::{Tensor, expected_len};
use bytes::Bytes;
use serde_json::{Map, Value};

/// `Inference-Header-Content-Length`: the byte length of the JSON header before the blobs.
pub const HEADER_INFERENCE_HEADER_CONTENT_LENGTH: &str = "Inference-Header-Content-Length";

/// The KServe datatypes with a densewire dtype (SPEC.md 19.1), `BYTES` aside.
pub const KSERVE_DATATYPES: [(&str, DType); 6] = [
    ("FP32", DType::Float32),
    ("FP16", DType::Float16),
    ("BF16", DType::BFloat16),
    ("FP64", DType::Float64),
    ("INT8", DType::Int8),
    ("UINT8", DType::Uint8),
];

/// The largest entry of a tensor output's shape (SPEC.md 19.2): 2^31 - 1 keeps `n x row_bytes`
/// within 64-bit arithmetic.
const MAX_SHAPE_ENTRY: u64 = (1 << 31) - 1;

/// KServe datatypes densewire has no dtype for: `unknown_dtype` when read.
const OTHER_DATATYPES: [&str; 7] = ["BOOL", "INT16", "INT32", "INT64", "UINT16", "UINT32", "UINT64"];

/// The KServe datatype of a dtype (`None` for `binary`, which the protocol has not).
pub fn kserve_datatype(dtype: DType) -> Option<&'static str> {
    KSERVE_DATATYPES.iter().find(|(_, d)| *d == dtype).map(|(name, _)| *name)
}

/// The values of one output: a tensor, or the elements of a `BYTES` tensor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KserveData {
    /// An output of a datatype with a densewire dtype; shape `[d]` is the tensor `(1, d)`.
    Tensor(Tensor),
    /// The elements of a `BYTES` output, in row-major order (slices of the body for binary data).
    Bytes(Vec<Bytes>),
}

/// One output of an inference response.
#[derive(Debug, Clone, PartialEq)]
pub struct KserveOutput {
    /// The output's name.
    pub name: String,
    /// Its KServe datatype (`FP32`, ..., `BYTES`).
    pub datatype: String,
    /// Its shape as sent.
    pub shape: Vec<u64>,
    /// Its parameters as sent (with `binary_data_size` for a blob).
    pub parameters: Map<String, Value>,
    /// Whether it came as a blob of the binary extension.
    pub binary: bool,
    /// Its values.
    pub data: KserveData,
}

impl KserveOutput {
    /// The tensor, unless the output is `BYTES`.
    pub fn tensor(&self) -> Option<&Tensor> {
        match &self.data {
            KserveData::Tensor(t) => Some(t),
            KserveData::Bytes(_) => None,
        }
    }

    /// The elements of a `BYTES` output.
    pub fn elements(&self) -> Option<&[Bytes]> {
        match &self.data {
            KserveData::Bytes(e) => Some(e),
            KserveData::Tensor(_) => None,
        }
    }

    /// The quantization id of an int8/uint8 embeddings output (its `quantization` parameter).
    pub fn quantization(&self) -> Option<&str> {
        self.parameters.get("quantization").and_then(Value::as_str)
    }
}

/// A KServe v2 inference response read by [`decode_kserve`].
#[derive(Debug, Clone, PartialEq)]
pub struct KserveResponse {
    /// `model_name`, when a string.
    pub model_name: Option<String>,
    /// `model_version`, when a string.
    pub model_version: Option<String>,
    /// The response's `id`, when a string.
    pub id: Option<String>,
    /// The response's `parameters` (empty when absent).
    pub parameters: Map<String, Value>,
    /// The outputs, in order.
    pub outputs: Vec<KserveOutput>,
}

impl KserveResponse {
    /// The output called `name`.
    pub fn output(&self, name: &str) -> Option<&KserveOutput> {
        self.outputs.iter().find(|o| o.name == name)
    }

    /// The tensor output `name` (a densewire server's is `embedding`) as [`Embeddings`]: the model
    /// and the quantization id with it. `invalid_field` on `outputs` when there is no such tensor.
    pub fn embeddings(&self, name: &str) -> Result<Embeddings> {
        let out = self.output(name).filter(|o| o.tensor().is_some()).ok_or_else(|| {
            let names: Vec<&str> = self.outputs.iter().map(|o| o.name.as_str()).collect();
            err(ErrorKind::InvalidField, format!("no tensor output {name:?}; the response has {names:?}"))
                .field("outputs")
        })?;
        let mut e = Embeddings::from_tensor(out.tensor().unwrap().clone());
        e.model = self.model_name.clone();
        e.quantization = out.quantization().map(str::to_owned);
        Ok(e)
    }
}

fn invalid(field: impl Into<String>, message: impl Into<String>) -> Error {
    let (field, message) = (field.into(), message.into());
    err(ErrorKind::InvalidField, format!("{field} {message}")).field(field)
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_f64() => "a number",
        Value::Number(_) => "an integer",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// `Inference-Header-Content-Length` checked against the body (SPEC.md 19.3 step 1); `None` when absent.
fn header_length<H: Headers + ?Sized>(headers: &H, body_len: usize) -> Result<Option<usize>> {
    let Some(value) = headers.header(HEADER_INFERENCE_HEADER_CONTENT_LENGTH) else { return Ok(None) };
    let text = value.trim();
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        let shown: String = value.chars().take(40).collect();
        return Err(invalid(
            HEADER_INFERENCE_HEADER_CONTENT_LENGTH,
            format!("must be a decimal byte count, not {shown:?}"),
        ));
    }
    match text.parse::<usize>() {
        Ok(n) if n <= body_len => Ok(Some(n)),
        _ => {
            Err(err(ErrorKind::Truncated, format!("the JSON header is {text} bytes but the body has only {body_len}"))
                .at(body_len)
                .field(HEADER_INFERENCE_HEADER_CONTENT_LENGTH))
        }
    }
}

/// One output's header checked (SPEC.md 19.3 step 3).
struct Spec<'a> {
    field: String,
    name: &'a str,
    datatype: &'a str,
    dtype: Option<DType>,
    shape: Vec<u64>,
    size: Option<u64>,
    object: &'a Map<String, Value>,
    parameters: Map<String, Value>,
}

fn datatype(value: &str, field: &str) -> Result<Option<DType>> {
    if value == "BYTES" {
        return Ok(None);
    }
    if let Some((_, d)) = KSERVE_DATATYPES.iter().find(|(name, _)| *name == value) {
        return Ok(Some(*d));
    }
    let expected = "expected one of FP32, FP16, BF16, FP64, INT8, UINT8 or BYTES";
    let message = if OTHER_DATATYPES.contains(&value) {
        format!("{value} has no densewire dtype; {expected}")
    } else {
        format!("unknown datatype {:?}; {expected}", value.chars().take(40).collect::<String>())
    };
    Err(err(ErrorKind::UnknownDtype, message).field(field.to_owned()))
}

fn spec(i: usize, o: &Value) -> Result<Spec<'_>> {
    let field = format!("outputs[{i}]");
    let Value::Object(object) = o else { return Err(invalid(field, format!("must be an object, not {}", kind_of(o)))) };
    let name = match object.get("name") {
        Some(Value::String(s)) => s.as_str(),
        v => {
            return Err(invalid(
                format!("{field}.name"),
                format!("must be a string, not {}", v.map_or("absent", kind_of)),
            ));
        }
    };
    let datatype_name = match object.get("datatype") {
        Some(Value::String(s)) => s.as_str(),
        v => {
            return Err(invalid(
                format!("{field}.datatype"),
                format!("must be a string, not {}", v.map_or("absent", kind_of)),
            ));
        }
    };
    let parameters = match object.get("parameters") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(p)) => p.clone(),
        Some(v) => {
            return Err(invalid(format!("{field}.parameters"), format!("must be an object, not {}", kind_of(v))));
        }
    };
    let size = match parameters.get("binary_data_size") {
        None | Some(Value::Null) => None,
        // SPEC.md 19.3: an integer from 0 to 2^53 - 1; nothing past it is capped or cut to fit
        Some(v) => Some(v.as_u64().filter(|&n| n < 1 << 53).ok_or_else(|| {
            invalid(
                format!("{field}.parameters.binary_data_size"),
                format!("must be an integer from 0 to 2^53 - 1, not {v}"),
            )
        })?),
    };
    let dtype = datatype(datatype_name, &format!("{field}.datatype"))?;
    let shape = match object.get("shape") {
        Some(Value::Array(a)) if a.iter().all(|s| s.as_u64().is_some()) => {
            a.iter().map(|s| s.as_u64().unwrap()).collect::<Vec<u64>>()
        }
        v => return Err(bad_shape(&field, dtype.is_some(), v)),
    };
    if dtype.is_some() && (!(1..=2).contains(&shape.len()) || shape.iter().any(|&s| s > MAX_SHAPE_ENTRY)) {
        return Err(bad_shape(&field, true, object.get("shape")));
    }
    match parameters.get("quantization") {
        None | Some(Value::Null) | Some(Value::String(_)) => {}
        Some(v) => {
            return Err(invalid(
                format!("{field}.parameters.quantization"),
                format!("must be a string, not {}", kind_of(v)),
            ));
        }
    }
    Ok(Spec { field, name, datatype: datatype_name, dtype, shape, size, object, parameters })
}

fn bad_shape(field: &str, tensor: bool, v: Option<&Value>) -> Error {
    let what = if tensor { "one or two (each at most 2^31 - 1) " } else { "" };
    let shown: String = v.map_or("absent".to_owned(), Value::to_string).chars().take(60).collect();
    invalid(format!("{field}.shape"), format!("must be an array of {what}non-negative integers, not {shown}"))
}

/// `[n, d]` as the tensor `(n, d)`, `[d]` as `(1, d)`.
fn nd(shape: &[u64], field: &str) -> Result<(usize, usize)> {
    let (n, d) = if shape.len() == 1 { (1, shape[0]) } else { (shape[0], shape[1]) };
    match (usize::try_from(n), usize::try_from(d)) {
        (Ok(n), Ok(d)) => Ok((n, d)),
        _ => Err(invalid(format!("{field}.shape"), "is too large for this machine")),
    }
}

/// The element count of a shape (`None` on overflow: no body holds that many).
fn count(shape: &[u64]) -> Option<u64> {
    shape.iter().try_fold(1u64, |a, &s| a.checked_mul(s))
}

/// The elements of a `BYTES` blob (a 4-byte little-endian length, then the bytes), `start` its body offset.
fn bytes_elements(body: &Bytes, start: usize, end: usize, field: &str) -> Result<Vec<Bytes>> {
    let mut out = Vec::new();
    let mut pos = start;
    while pos < end {
        let malformed = |m: String| err(ErrorKind::Malformed, m).at(pos).field(field.to_owned());
        if end - pos < 4 {
            return Err(malformed(format!("a BYTES element length needs 4 bytes, {} left in the tensor", end - pos)));
        }
        let n = u32::from_le_bytes(body[pos..pos + 4].try_into().unwrap()) as usize;
        if n > end - pos - 4 {
            return Err(malformed(format!(
                "a BYTES element of {n} bytes runs past the end of its tensor ({} bytes left)",
                end - pos - 4
            )));
        }
        out.push(body.slice(pos + 4..pos + 4 + n));
        pos += 4 + n;
    }
    Ok(out)
}

/// A JSON `data` array, flat or nested, in row-major order.
fn flatten<'a>(v: &'a Value, out: &mut Vec<&'a Value>) {
    match v {
        Value::Array(a) => a.iter().for_each(|x| flatten(x, out)),
        x => out.push(x),
    }
}

fn tensor_from_json(values: &[&Value], dtype: DType, (n, d): (usize, usize), field: &str) -> Result<Tensor> {
    let mut buf = vec![0u8; values.len() * dtype.item_bytes()];
    for (j, v) in values.iter().enumerate() {
        let bad = |m: String| invalid(format!("{field}[{j}]"), m);
        let Value::Number(num) = v else { return Err(bad(format!("must be a number, not {}", kind_of(v)))) };
        // the JSON envelope's rule (SPEC.md 3.5): 3.0 is the integer 3 for int8 and uint8
        let x = num.as_f64().ok_or_else(|| bad(format!("{num} is not a number")))?;
        put_number(dtype, x, &mut buf, j).map_err(|what| bad(format!("{num}: {what}")))?;
    }
    Tensor::new(dtype, n, d, crate::tensor::aligned_copy(&buf))
}

/// Reads a KServe v2 inference response (SPEC.md section 19.3): `headers` are the HTTP response
/// headers (`Inference-Header-Content-Length` is looked up case-insensitively), `body` the whole body.
/// Checks run in the spec's order and the first failure is returned with its category, offset and
/// field. Binary tensor outputs share `body`: no copy.
///
/// ```
/// use densewire::{Bytes, decode_kserve};
///
/// let header = br#"{"model_name":"m","outputs":[{"name":"embedding","datatype":"FP32","shape":[1,2],"parameters":{"binary_data_size":8}}]}"#;
/// let body = Bytes::from([&header[..], &1.0f32.to_le_bytes(), &(-2.5f32).to_le_bytes()].concat());
/// let len = header.len().to_string();
/// let r = decode_kserve(&[("Inference-Header-Content-Length", len.as_str())], body.clone())?;
/// let t = r.output("embedding").unwrap().tensor().unwrap();
/// assert_eq!(&*t.as_f32()?, &[1.0, -2.5]);
/// assert_eq!(t.as_bytes().as_ptr(), body[header.len()..].as_ptr()); // a view of the body
/// assert_eq!(r.embeddings("embedding")?.model.as_deref(), Some("m"));
/// # Ok::<(), densewire::Error>(())
/// ```
pub fn decode_kserve<H: Headers + ?Sized>(headers: &H, body: Bytes) -> Result<KserveResponse> {
    let h = header_length(headers, body.len())?;
    if h == Some(0) {
        return Err(err(ErrorKind::Malformed, "a response has a JSON header; Inference-Header-Content-Length is 0")
            .at(0)
            .field(HEADER_INFERENCE_HEADER_CONTENT_LENGTH));
    }
    let h = h.unwrap_or(body.len());
    let text = &body[..h];
    let doc: Value = serde_json::from_slice(text).map_err(|e| json_error(text, &e))?;
    let Value::Object(doc) = doc else {
        return Err(err(
            ErrorKind::Malformed,
            format!("the inference header must be a JSON object, not {}", kind_of(&doc)),
        )
        .at(0));
    };
    let outputs = match doc.get("outputs") {
        Some(Value::Array(a)) => a,
        v => {
            return Err(invalid(
                "outputs",
                format!("must be an array of outputs, not {}", v.map_or("absent", kind_of)),
            ));
        }
    };
    let specs = outputs.iter().enumerate().map(|(i, o)| spec(i, o)).collect::<Result<Vec<_>>>()?;
    let mut pos = h;
    let mut read = Vec::with_capacity(specs.len());
    for s in specs {
        let f = &s.field;
        let data = s.object.get("data");
        let value = match (s.size, data) {
            (Some(_), Some(_)) => {
                return Err(invalid(format!("{f}.data"), "has both data and parameters.binary_data_size"));
            }
            (None, None) => {
                return Err(invalid(format!("{f}.data"), "has neither data nor parameters.binary_data_size"));
            }
            (Some(size), None) => {
                let sfield = format!("{f}.parameters.binary_data_size");
                let left = body.len() - pos;
                let size = match usize::try_from(size) {
                    Ok(size) if size <= left => size,
                    _ => {
                        return Err(err(
                            ErrorKind::Truncated,
                            format!(
                                "a blob of {size} bytes at offset {pos} runs past the end of the {}-byte body",
                                body.len()
                            ),
                        )
                        .at(body.len())
                        .field(sfield));
                    }
                };
                let start = pos;
                pos += size;
                match s.dtype {
                    None => {
                        let elements = bytes_elements(&body, start, pos, f)?;
                        let want = count(&s.shape);
                        if want != Some(elements.len() as u64) {
                            return Err(err(
                                ErrorKind::ShapeMismatch,
                                format!("{} BYTES elements, the shape {:?} holds {want:?}", elements.len(), s.shape),
                            )
                            .field(f.clone()));
                        }
                        KserveData::Bytes(elements)
                    }
                    Some(dtype) => {
                        let (n, d) = nd(&s.shape, f)?;
                        let expected = expected_len(dtype, n, d)
                            .map_err(|_| invalid(format!("{f}.shape"), "is too large: no body holds it"))?;
                        if size != expected {
                            return Err(err(
                                ErrorKind::LengthMismatch,
                                format!(
                                    "a blob of {size} bytes, the shape {:?} of {} needs {expected}",
                                    s.shape, s.datatype
                                ),
                            )
                            .at(start + size.min(expected))
                            .field(sfield));
                        }
                        KserveData::Tensor(Tensor::new(dtype, n, d, body.slice(start..pos))?)
                    }
                }
            }
            (None, Some(data)) => {
                let dfield = format!("{f}.data");
                if !data.is_array() {
                    return Err(invalid(dfield, format!("must be an array, not {}", kind_of(data))));
                }
                let mut values = Vec::new();
                flatten(data, &mut values);
                let want = count(&s.shape);
                if want != Some(values.len() as u64) {
                    return Err(err(
                        ErrorKind::ShapeMismatch,
                        format!("{} elements, the shape {:?} holds {want:?}", values.len(), s.shape),
                    )
                    .field(dfield));
                }
                match s.dtype {
                    None => KserveData::Bytes(
                        values
                            .iter()
                            .enumerate()
                            .map(|(j, v)| match v {
                                Value::String(t) => Ok(Bytes::copy_from_slice(t.as_bytes())),
                                _ => Err(invalid(
                                    format!("{dfield}[{j}]"),
                                    format!("must be a string, not {}", kind_of(v)),
                                )),
                            })
                            .collect::<Result<_>>()?,
                    ),
                    Some(dtype) => KserveData::Tensor(tensor_from_json(&values, dtype, nd(&s.shape, f)?, &dfield)?),
                }
            }
        };
        read.push(KserveOutput {
            name: s.name.to_owned(),
            datatype: s.datatype.to_owned(),
            shape: s.shape,
            parameters: s.parameters,
            binary: s.size.is_some(),
            data: value,
        });
    }
    if pos != body.len() {
        return Err(err(ErrorKind::Malformed, format!("{} bytes after the last tensor", body.len() - pos)).at(pos));
    }
    let string = |k: &str| doc.get(k).and_then(Value::as_str).map(str::to_owned);
    Ok(KserveResponse {
        model_name: string("model_name"),
        model_version: string("model_version"),
        id: string("id"),
        parameters: doc.get("parameters").and_then(Value::as_object).cloned().unwrap_or_default(),
        outputs: read,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(header: &str, blobs: &[u8]) -> (String, Bytes) {
        (header.len().to_string(), Bytes::from([header.as_bytes(), blobs].concat()))
    }

    #[test]
    fn blobs_in_order_are_views_and_json_outputs_beside_them() {
        let header = r#"{"id":"x","outputs":[{"name":"s","datatype":"FP16","shape":[1,2],"data":[[1.0,-2.0]]},{"name":"t","datatype":"BYTES","shape":[2],"parameters":{"binary_data_size":10}},{"name":"e","datatype":"UINT8","shape":[3],"parameters":{"binary_data_size":3,"quantization":"q"}}]}"#;
        let (len, b) = body(header, &[1, 0, 0, 0, b'a', 1, 0, 0, 0, b'b', 7, 8, 9]);
        let r = decode_kserve(&[("inference-header-content-length", len.as_str())], b.clone()).unwrap();
        assert_eq!(r.id.as_deref(), Some("x"));
        let s = r.output("s").unwrap();
        assert_eq!((s.binary, s.tensor().unwrap().as_bytes()), (false, &[0x00, 0x3c, 0x00, 0xc0][..]));
        let t = r.output("t").unwrap();
        assert_eq!(t.elements().unwrap(), &[Bytes::from_static(b"a"), Bytes::from_static(b"b")]);
        assert_eq!(t.elements().unwrap()[1].as_ptr(), b[header.len() + 9..].as_ptr());
        let e = r.output("e").unwrap();
        assert_eq!((e.tensor().unwrap().shape(), e.quantization()), ((1, 3), Some("q")));
        assert_eq!(e.tensor().unwrap().as_bytes().as_ptr(), b[header.len() + 10..].as_ptr());
        let emb = r.embeddings("e").unwrap();
        assert_eq!((emb.tensor.dtype(), emb.quantization.as_deref()), (DType::Uint8, Some("q")));
        assert_eq!(r.embeddings("t").unwrap_err().field_name(), Some("outputs"));
    }

    #[test]
    fn integral_floats_are_integers_of_int8_json_data() {
        let body =
            Bytes::from_static(br#"{"outputs":[{"name":"e","datatype":"INT8","shape":[1,2],"data":[3.0,-128]}]}"#);
        let r = decode_kserve(&[("", "")], body).unwrap();
        assert_eq!(r.outputs[0].tensor().unwrap().as_bytes(), &[3, 0x80]);
        let bad = Bytes::from_static(br#"{"outputs":[{"name":"e","datatype":"UINT8","shape":[1,1],"data":[2.5]}]}"#);
        assert_eq!(decode_kserve(&[("", "")], bad).unwrap_err().field_name(), Some("outputs[0].data[0]"));
    }

    #[test]
    fn sizes_that_overflow_are_errors_not_panics() {
        for (header, kind) in [
            (
                r#"{"outputs":[{"name":"e","datatype":"FP64","shape":[4294967296,4294967296],"parameters":{"binary_data_size":0}}]}"#,
                ErrorKind::InvalidField,
            ),
            (
                // past 2^53 - 1 (SPEC.md 19.3): invalid_field, never a size cut to fit
                r#"{"outputs":[{"name":"e","datatype":"FP32","shape":[1,1],"parameters":{"binary_data_size":18446744073709551615}}]}"#,
                ErrorKind::InvalidField,
            ),
            (
                r#"{"outputs":[{"name":"t","datatype":"BYTES","shape":[4294967296,4294967296,4294967296],"parameters":{"binary_data_size":0}}]}"#,
                ErrorKind::ShapeMismatch,
            ),
        ] {
            let (len, b) = body(header, &[]);
            let e = decode_kserve(&[(HEADER_INFERENCE_HEADER_CONTENT_LENGTH, len.as_str())], b).unwrap_err();
            assert_eq!(e.kind(), kind, "{header}: {e}");
        }
    }
}
