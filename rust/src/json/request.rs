//! The `POST /v1/embeddings` request (SPEC.md section 6.1), with strict validation: unknown fields
//! and wrong types are `invalid_field` errors naming the field.

use crate::dtype::{ByteOrder, DType};
use crate::embeddings::EncodingFormat;
use crate::error::{Error, ErrorKind, Result, err};
use crate::json::decode::json_error;
use serde_json::Value;

/// At most this many inputs in one request.
pub const MAX_INPUTS: usize = 2048;

/// The `input` of an embeddings request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    /// One text.
    Text(String),
    /// Several texts.
    Texts(Vec<String>),
    /// One text as token ids.
    Tokens(Vec<u64>),
    /// Several texts as token ids.
    TokenBatches(Vec<Vec<u64>>),
}

impl Input {
    /// The number of inputs (rows of the response).
    pub fn len(&self) -> usize {
        match self {
            Input::Text(_) | Input::Tokens(_) => 1,
            Input::Texts(v) => v.len(),
            Input::TokenBatches(v) => v.len(),
        }
    }

    /// Whether there are no inputs.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// An OpenAI-compatible embeddings request with densewire's additions.
///
/// ```
/// use densewire::{DType, EmbeddingsRequest, ErrorKind};
/// let r = EmbeddingsRequest::parse(br#"{"input":["a","b"],"model":"m","dtype":"float16"}"#).unwrap();
/// assert_eq!((r.input.len(), r.dtype), (2, DType::Float16));
/// let e = EmbeddingsRequest::parse(br#"{"input":"a","dimension":3}"#).unwrap_err();
/// assert_eq!((e.kind(), e.field_name()), (ErrorKind::InvalidField, Some("dimension")));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmbeddingsRequest {
    /// The texts (or token ids).
    pub input: Input,
    /// The model id; the server's default when absent.
    pub model: Option<String>,
    /// `float` (default) or `base64`.
    pub encoding_format: EncodingFormat,
    /// Truncate each vector to this many dimensions, then L2-normalise.
    pub dimensions: Option<usize>,
    /// Accepted and ignored.
    pub user: Option<String>,
    /// The element type of the response (not float64); float32 by default.
    pub dtype: DType,
    /// Byte order of Base64 strings.
    pub byteorder: ByteOrder,
    /// Cut inputs longer than the model's maximum (default true).
    pub truncate: bool,
}

impl EmbeddingsRequest {
    /// A request for these texts with every option at its default.
    pub fn new<S: Into<String>>(texts: impl IntoIterator<Item = S>) -> EmbeddingsRequest {
        EmbeddingsRequest {
            input: Input::Texts(texts.into_iter().map(Into::into).collect()),
            model: None,
            encoding_format: EncodingFormat::Float,
            dimensions: None,
            user: None,
            dtype: DType::Float32,
            byteorder: ByteOrder::Little,
            truncate: true,
        }
    }

    /// Sets the model.
    pub fn model(mut self, model: impl Into<String>) -> Self {
        self.model = Some(model.into());
        self
    }

    /// Sets the dtype of the response.
    pub fn dtype(mut self, dtype: DType) -> Self {
        self.dtype = dtype;
        self
    }

    /// Sets `dimensions`.
    pub fn dimensions(mut self, d: usize) -> Self {
        self.dimensions = Some(d);
        self
    }

    /// Sets the JSON encoding format (used when the response is JSON).
    pub fn encoding_format(mut self, f: EncodingFormat) -> Self {
        self.encoding_format = f;
        self
    }

    /// The JSON text of the request. Fields at their defaults are left out, so that a plain
    /// request is exactly what an OpenAI client sends.
    pub fn to_json(&self) -> String {
        #[derive(serde::Serialize)]
        #[serde(untagged)]
        enum In<'a> {
            Text(&'a str),
            Texts(&'a [String]),
            Tokens(&'a [u64]),
            Batches(&'a [Vec<u64>]),
        }
        #[derive(serde::Serialize)]
        struct Req<'a> {
            input: In<'a>,
            #[serde(skip_serializing_if = "Option::is_none")]
            model: Option<&'a str>,
            #[serde(skip_serializing_if = "Option::is_none")]
            encoding_format: Option<&'static str>,
            #[serde(skip_serializing_if = "Option::is_none")]
            dimensions: Option<usize>,
            #[serde(skip_serializing_if = "Option::is_none")]
            user: Option<&'a str>,
            #[serde(skip_serializing_if = "Option::is_none")]
            dtype: Option<&'static str>,
            #[serde(skip_serializing_if = "Option::is_none")]
            byteorder: Option<&'static str>,
            #[serde(skip_serializing_if = "Option::is_none")]
            truncate: Option<bool>,
        }
        let input = match &self.input {
            Input::Text(s) => In::Text(s),
            Input::Texts(v) => In::Texts(v),
            Input::Tokens(v) => In::Tokens(v),
            Input::TokenBatches(v) => In::Batches(v),
        };
        let req = Req {
            input,
            model: self.model.as_deref(),
            encoding_format: (self.encoding_format != EncodingFormat::Float).then_some(self.encoding_format.name()),
            dimensions: self.dimensions,
            user: self.user.as_deref(),
            dtype: (self.dtype != DType::Float32).then_some(self.dtype.name()),
            byteorder: (self.byteorder != ByteOrder::Little).then_some(self.byteorder.name()),
            truncate: (!self.truncate).then_some(false),
        };
        serde_json::to_string(&req).expect("a request serializes")
    }

    /// Parses and validates a request body.
    pub fn parse(body: &[u8]) -> Result<EmbeddingsRequest> {
        let v: Value = serde_json::from_slice(body).map_err(|e| json_error(body, &e))?;
        let Value::Object(m) = v else {
            return Err(err(ErrorKind::InvalidField, "the request body is not a JSON object"));
        };
        let mut req = EmbeddingsRequest::new(Vec::<String>::new());
        let mut have_input = false;
        for (k, v) in m {
            match k.as_str() {
                "input" => {
                    req.input = parse_input(v)?;
                    have_input = true;
                }
                "model" => req.model = Some(string(v, "model")?),
                "encoding_format" => {
                    req.encoding_format = match string(v, "encoding_format")?.as_str() {
                        "float" => EncodingFormat::Float,
                        "base64" => EncodingFormat::Base64,
                        other => return Err(invalid("encoding_format", format!("{other:?} is not float or base64"))),
                    }
                }
                "dimensions" => match v.as_u64() {
                    Some(d) if d >= 1 => req.dimensions = Some(d as usize),
                    _ => return Err(invalid("dimensions", "dimensions must be an integer >= 1")),
                },
                "user" => req.user = Some(string(v, "user")?),
                "dtype" => {
                    let name = string(v, "dtype")?;
                    req.dtype = DType::from_name(&name)?;
                    if req.dtype == DType::Float64 {
                        return Err(invalid("dtype", "float64 is not an embeddings dtype"));
                    }
                }
                "byteorder" => req.byteorder = ByteOrder::from_name(&string(v, "byteorder")?)?,
                "truncate" => {
                    req.truncate = v.as_bool().ok_or_else(|| invalid("truncate", "truncate must be a boolean"))?
                }
                other => return Err(invalid(other, format!("unknown field {other:?}"))),
            }
        }
        if !have_input {
            return Err(invalid("input", "input is required"));
        }
        Ok(req)
    }
}

fn invalid(field: &str, msg: impl Into<String>) -> Error {
    err(ErrorKind::InvalidField, msg.into()).field(field.to_owned())
}

fn string(v: Value, field: &str) -> Result<String> {
    match v {
        Value::String(s) => Ok(s),
        _ => Err(invalid(field, format!("{field} must be a string"))),
    }
}

fn parse_input(v: Value) -> Result<Input> {
    let input = match v {
        Value::String(s) => {
            if s.is_empty() {
                return Err(invalid("input", "input must not be empty"));
            }
            return Ok(Input::Text(s));
        }
        Value::Array(items) => items,
        _ => return Err(invalid("input", "input must be a string, an array of strings or token ids")),
    };
    if input.is_empty() {
        return Err(invalid("input", "input must not be empty"));
    }
    if input.len() > MAX_INPUTS {
        return Err(invalid("input", format!("at most {MAX_INPUTS} inputs, got {}", input.len())));
    }
    let tokens = |v: &Value| -> Option<u64> { v.as_u64() };
    match &input[0] {
        Value::String(_) => {
            let mut out = Vec::with_capacity(input.len());
            for (i, v) in input.into_iter().enumerate() {
                match v {
                    Value::String(s) if !s.is_empty() => out.push(s),
                    Value::String(_) => return Err(invalid(&format!("input[{i}]"), "inputs must not be empty")),
                    _ => return Err(invalid(&format!("input[{i}]"), "expected a string")),
                }
            }
            Ok(Input::Texts(out))
        }
        Value::Number(_) => {
            let mut out = Vec::with_capacity(input.len());
            for (i, v) in input.iter().enumerate() {
                out.push(tokens(v).ok_or_else(|| invalid(&format!("input[{i}]"), "expected a token id"))?);
            }
            Ok(Input::Tokens(out))
        }
        Value::Array(_) => {
            let mut out = Vec::with_capacity(input.len());
            for (i, v) in input.iter().enumerate() {
                let row =
                    v.as_array().ok_or_else(|| invalid(&format!("input[{i}]"), "expected an array of token ids"))?;
                if row.is_empty() {
                    return Err(invalid(&format!("input[{i}]"), "inputs must not be empty"));
                }
                let mut r = Vec::with_capacity(row.len());
                for (j, t) in row.iter().enumerate() {
                    r.push(tokens(t).ok_or_else(|| invalid(&format!("input[{i}][{j}]"), "expected a token id"))?);
                }
                out.push(r);
            }
            Ok(Input::TokenBatches(out))
        }
        _ => Err(invalid("input[0]", "expected a string, a token id or an array of token ids")),
    }
}
