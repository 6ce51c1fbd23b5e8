//! The `POST /v1/embeddings` request (SPEC.md section 6.1), with strict validation: unknown fields
//! and wrong types are `invalid_field` errors naming the field.

use crate::dtype::{ByteOrder, DType};
use crate::embeddings::EncodingFormat;
use crate::error::{Error, ErrorKind, Result, err};
use crate::json::decode::json_error;
use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use std::borrow::Cow;
use std::fmt;

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
        match serde_json::from_slice(body).map_err(|e| json_error(body, &e))? {
            Body::Object(fields) => fields.into_request(),
            Body::NotObject => Err(err(ErrorKind::InvalidField, "the request body is not a JSON object")),
        }
    }
}

// ---------------------------------------------------------------------------------- the parser
//
// The request is read in one pass into `Fields` (each known field's value kept as it came, an
// array of texts straight into a `Vec<String>`), then checked field by field in the order of the
// field names, as if read into a map first: a syntax error anywhere wins over a field error, a
// repeated field counts once (its last value), and of several bad fields the first by name is
// reported.

/// The known fields, in the order they are checked (sorted by name).
const FIELDS: [&str; 8] = ["byteorder", "dimensions", "dtype", "encoding_format", "input", "model", "truncate", "user"];
const INPUT: usize = 4;

/// The index of a field name in [`FIELDS`].
fn field_index(name: &str) -> Option<usize> {
    Some(match name {
        "byteorder" => 0,
        "dimensions" => 1,
        "dtype" => 2,
        "encoding_format" => 3,
        "input" => INPUT,
        "model" => 5,
        "truncate" => 6,
        "user" => 7,
        _ => return None,
    })
}

// One a request, moved once; a Box would cost an allocation.
#[allow(clippy::large_enum_variant)]
enum Body {
    Object(Fields),
    NotObject,
}

#[derive(Default)]
struct Fields {
    /// The value of each of [`FIELDS`] but `input`, as given.
    values: [Option<Value>; 8],
    input: Option<InputValue>,
    /// The first unknown field name (in name order).
    unknown: Option<String>,
}

/// `input` as given: texts (the usual request), else any JSON value.
enum InputValue {
    Texts(Vec<String>),
    Other(Value),
}

impl Fields {
    fn into_request(mut self) -> Result<EmbeddingsRequest> {
        let mut req = EmbeddingsRequest::new(Vec::<String>::new());
        let mut have_input = false;
        for (i, name) in FIELDS.into_iter().enumerate() {
            if let Some(u) = self.unknown.as_deref().filter(|u| *u < name) {
                return Err(invalid(u, format!("unknown field {u:?}")));
            }
            if i == INPUT {
                if let Some(input) = self.input.take() {
                    req.input = match input {
                        InputValue::Texts(texts) => texts_input(texts)?,
                        InputValue::Other(v) => parse_input(v)?,
                    };
                    have_input = true;
                }
            } else if let Some(v) = self.values[i].take() {
                set_field(&mut req, name, v)?;
            }
        }
        if let Some(u) = self.unknown {
            return Err(invalid(&u, format!("unknown field {u:?}")));
        }
        if !have_input {
            return Err(invalid("input", "input is required"));
        }
        Ok(req)
    }
}

/// Checks one known field (not `input`) and sets it.
fn set_field(req: &mut EmbeddingsRequest, name: &str, v: Value) -> Result<()> {
    match name {
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
        "truncate" => req.truncate = v.as_bool().ok_or_else(|| invalid("truncate", "truncate must be a boolean"))?,
        _ => unreachable!("only the names of FIELDS"),
    }
    Ok(())
}

impl<'de> Deserialize<'de> for Body {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Body, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Body;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<Body, A::Error> {
                let mut fields = Fields::default();
                while let Some(Key(key)) = map.next_key()? {
                    match field_index(&key) {
                        Some(INPUT) => fields.input = Some(map.next_value()?),
                        Some(i) => fields.values[i] = Some(map.next_value()?),
                        None => {
                            // Read as a value like the rest (the same nesting limit applies).
                            map.next_value::<Value>()?;
                            if fields.unknown.as_deref().is_none_or(|u| *key < *u) {
                                fields.unknown = Some(key.into_owned());
                            }
                        }
                    }
                }
                Ok(Body::Object(fields))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> std::result::Result<Body, A::Error> {
                Value::deserialize(de::value::SeqAccessDeserializer::new(seq)).map(|_| Body::NotObject)
            }
            fn visit_bool<E>(self, _: bool) -> std::result::Result<Body, E> {
                Ok(Body::NotObject)
            }
            fn visit_i64<E>(self, _: i64) -> std::result::Result<Body, E> {
                Ok(Body::NotObject)
            }
            fn visit_u64<E>(self, _: u64) -> std::result::Result<Body, E> {
                Ok(Body::NotObject)
            }
            fn visit_f64<E>(self, _: f64) -> std::result::Result<Body, E> {
                Ok(Body::NotObject)
            }
            fn visit_str<E>(self, _: &str) -> std::result::Result<Body, E> {
                Ok(Body::NotObject)
            }
            fn visit_unit<E>(self) -> std::result::Result<Body, E> {
                Ok(Body::NotObject)
            }
        }
        d.deserialize_any(V)
    }
}

/// A field name, borrowed from the body when it has no escapes.
struct Key<'de>(Cow<'de, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Key<'de>, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a field name")
            }
            fn visit_borrowed_str<E>(self, s: &'de str) -> std::result::Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(s)))
            }
            fn visit_str<E>(self, s: &str) -> std::result::Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(s.to_owned())))
            }
        }
        d.deserialize_str(V)
    }
}

impl<'de> Deserialize<'de> for InputValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<InputValue, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = InputValue;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<InputValue, A::Error> {
                // Texts straight into their Vec; from the first item that is not a text on, values.
                let mut texts: Vec<String> = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(MAX_INPUTS));
                while let Some(item) = seq.next_element::<Item>()? {
                    match item {
                        Item::Text(t) => texts.push(t),
                        Item::Other(v) => {
                            let mut values: Vec<Value> = texts.into_iter().map(Value::String).collect();
                            values.push(v);
                            while let Some(v) = seq.next_element::<Value>()? {
                                values.push(v);
                            }
                            return Ok(InputValue::Other(Value::Array(values)));
                        }
                    }
                }
                Ok(InputValue::Texts(texts))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> std::result::Result<InputValue, A::Error> {
                Value::deserialize(de::value::MapAccessDeserializer::new(map)).map(InputValue::Other)
            }
            fn visit_str<E>(self, s: &str) -> std::result::Result<InputValue, E> {
                Ok(InputValue::Other(Value::String(s.to_owned())))
            }
            fn visit_string<E>(self, s: String) -> std::result::Result<InputValue, E> {
                Ok(InputValue::Other(Value::String(s)))
            }
            fn visit_bool<E>(self, b: bool) -> std::result::Result<InputValue, E> {
                Ok(InputValue::Other(Value::Bool(b)))
            }
            fn visit_i64<E>(self, n: i64) -> std::result::Result<InputValue, E> {
                Ok(InputValue::Other(Value::from(n)))
            }
            fn visit_u64<E>(self, n: u64) -> std::result::Result<InputValue, E> {
                Ok(InputValue::Other(Value::from(n)))
            }
            fn visit_f64<E>(self, n: f64) -> std::result::Result<InputValue, E> {
                Ok(InputValue::Other(Value::from(n)))
            }
            fn visit_unit<E>(self) -> std::result::Result<InputValue, E> {
                Ok(InputValue::Other(Value::Null))
            }
        }
        d.deserialize_any(V)
    }
}

/// One item of an `input` array: a text, or any other value.
enum Item {
    Text(String),
    Other(Value),
}

impl<'de> Deserialize<'de> for Item {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Item, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Item;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_str<E>(self, s: &str) -> std::result::Result<Item, E> {
                Ok(Item::Text(s.to_owned()))
            }
            fn visit_string<E>(self, s: String) -> std::result::Result<Item, E> {
                Ok(Item::Text(s))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> std::result::Result<Item, A::Error> {
                Value::deserialize(de::value::SeqAccessDeserializer::new(seq)).map(Item::Other)
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> std::result::Result<Item, A::Error> {
                Value::deserialize(de::value::MapAccessDeserializer::new(map)).map(Item::Other)
            }
            fn visit_bool<E>(self, b: bool) -> std::result::Result<Item, E> {
                Ok(Item::Other(Value::Bool(b)))
            }
            fn visit_i64<E>(self, n: i64) -> std::result::Result<Item, E> {
                Ok(Item::Other(Value::from(n)))
            }
            fn visit_u64<E>(self, n: u64) -> std::result::Result<Item, E> {
                Ok(Item::Other(Value::from(n)))
            }
            fn visit_f64<E>(self, n: f64) -> std::result::Result<Item, E> {
                Ok(Item::Other(Value::from(n)))
            }
            fn visit_unit<E>(self) -> std::result::Result<Item, E> {
                Ok(Item::Other(Value::Null))
            }
        }
        d.deserialize_any(V)
    }
}

/// An `input` array of texts, checked as [`parse_input`] checks one.
fn texts_input(texts: Vec<String>) -> Result<Input> {
    if texts.is_empty() {
        return Err(invalid("input", "input must not be empty"));
    }
    if texts.len() > MAX_INPUTS {
        return Err(invalid("input", format!("at most {MAX_INPUTS} inputs, got {}", texts.len())));
    }
    if let Some(i) = texts.iter().position(String::is_empty) {
        return Err(invalid(&format!("input[{i}]"), "inputs must not be empty"));
    }
    Ok(Input::Texts(texts))
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The parser before the one-pass one (a `serde_json::Value` first), kept as the reference
    /// the new one must agree with: the same request, or the same error (kind, field, offset and
    /// message), for every body.
    mod reference {
        use super::super::*;

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
                            other => {
                                return Err(invalid("encoding_format", format!("{other:?} is not float or base64")));
                            }
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

    #[test]
    fn fields_are_in_name_order_and_indexed() {
        assert!(FIELDS.is_sorted());
        for (i, f) in FIELDS.iter().enumerate() {
            assert_eq!(field_index(f), Some(i));
        }
        assert_eq!(field_index("inputs"), None);
    }

    fn agree(body: &[u8]) {
        match (EmbeddingsRequest::parse(body), reference::parse(body)) {
            (Ok(a), Ok(b)) => assert_eq!(a, b, "{:?}", String::from_utf8_lossy(body)),
            (Err(a), Err(b)) => assert_eq!(
                (a.kind(), a.field_name(), a.offset(), a.message()),
                (b.kind(), b.field_name(), b.offset(), b.message()),
                "{:?}",
                String::from_utf8_lossy(body)
            ),
            (a, b) => panic!("{:?}: {a:?} but the reference gives {b:?}", String::from_utf8_lossy(body)),
        }
    }

    /// Requests valid and not (every field, wrong types, repeats, unknown fields before and after
    /// the known ones, other top-level values, deep nesting), then every prefix of each and
    /// thousands of byte-level mutations of them.
    #[test]
    fn agrees_with_the_reference_parser() {
        let deep = format!("{{\"input\":[\"a\"],\"zz\":{}1{}}}", "[".repeat(200), "]".repeat(200));
        let deep_input = format!("{{\"input\":{}\"a\"{}}}", "[".repeat(130), "]".repeat(130));
        let seeds: Vec<String> = [
            r#"{"input":["a","b"],"model":"m","encoding_format":"base64","dimensions":3,"user":"u","dtype":"float16","byteorder":"big","truncate":false}"#,
            r#"{"input":"one text"}"#,
            r#"{"input":[1,2,3]}"#,
            r#"{"input":[[1,2],[3]]}"#,
            r#"{"input":["a",1]}"#,
            r#"{"input":[1,"a"]}"#,
            r#"{"input":["a",""]}"#,
            r#"{"input":["","a",5]}"#,
            r#"{"input":[]}"#,
            r#"{"input":""}"#,
            r#"{"input":{"x":1}}"#,
            r#"{"input":null,"model":5}"#,
            r#"{"input":[[]]}"#,
            r#"{"input":[[1,-1]]}"#,
            r#"{"input":[1.5]}"#,
            r#"{"input":[true]}"#,
            r#"{"model":"m"}"#,
            r#"{"model":"m","zzz":1}"#,
            r#"{"aaa":1,"input":5}"#,
            r#"{"input":5,"zzz":1}"#,
            r#"{"input":["a"],"input":5}"#,
            r#"{"input":5,"input":["a"]}"#,
            r#"{"input":["a"],"dimensions":0}"#,
            r#"{"input":["a"],"dimensions":1e30}"#,
            r#"{"input":["a"],"dimensions":-1,"dtype":"float64"}"#,
            r#"{"input":["a"],"dtype":"float64"}"#,
            r#"{"input":["a"],"dtype":"f16"}"#,
            r#"{"input":["a"],"byteorder":"middle"}"#,
            r#"{"input":["a"],"truncate":"no"}"#,
            r#"{"input":["a"],"encoding_format":"hex"}"#,
            r#"{"input":["a\u0000\"b"],"m\u006fdel":"x"}"#,
            r#"{"input":["a"],"\u007a":1,"\u0061":2}"#,
            r#"["input"]"#,
            r#""input""#,
            "7",
            "null",
            "true",
            " {\"input\":[\"a\"]} ",
            "{\"input\":[\"a\"]} x",
        ]
        .into_iter()
        .map(str::to_owned)
        .chain([deep, deep_input])
        .collect();
        let mut seed = 0x2545f4914f6cdd1du64;
        let mut next = |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n.max(1) as u64) as usize
        };
        let alphabet = b"{}[]\":,0123456789.-e aAzZ\\tnul\xff";
        for s in &seeds {
            let b = s.as_bytes();
            for end in 0..=b.len() {
                agree(&b[..end]);
            }
            for _ in 0..300 {
                let mut m = b.to_vec();
                for _ in 0..1 + next(3) {
                    let at = next(m.len() + 1);
                    match next(3) {
                        0 if at < m.len() => {
                            m.remove(at);
                        }
                        1 if at < m.len() => m[at] = alphabet[next(alphabet.len())],
                        _ => m.insert(at, alphabet[next(alphabet.len())]),
                    }
                }
                agree(&m);
            }
        }
        let many = format!("{{\"input\":[{}]}}", vec!["\"t\""; MAX_INPUTS + 1].join(","));
        agree(many.as_bytes());
    }
}
