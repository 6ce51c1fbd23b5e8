//! Typed errors: one [`ErrorKind`] per category of SPEC.md section 11, with the offset and field.

use std::borrow::Cow;
use std::fmt;

/// The error categories of SPEC.md section 11. Every implementation of densewire uses the same
/// names ([`ErrorKind::code`]) and HTTP statuses ([`ErrorKind::http_status`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// A character outside the Base64 alphabet, misplaced or excess padding, a dangling character.
    InvalidBase64,
    /// The data's byte length is not `n * row_bytes(dtype, d)`.
    LengthMismatch,
    /// Rows of different lengths, a row count or index that disagrees with the shape.
    ShapeMismatch,
    /// A dtype name or enum value not in section 2.
    UnknownDtype,
    /// A structured body ended before it was complete (`offset` = its length).
    Truncated,
    /// The body is not valid in its format.
    Malformed,
    /// A field or header is missing, of the wrong type, or out of range; or an unknown field.
    InvalidField,
    /// NaN or ±Infinity asked to be written as a JSON number.
    NonFinite,
    /// Missing or wrong API key.
    Unauthorized,
    /// Unknown route, model or table.
    NotFound,
    /// Request body (or its decompressed size) over the limit.
    PayloadTooLarge,
    /// Request `Content-Type` or `Content-Encoding` not supported.
    UnsupportedMediaType,
    /// Nothing in `Accept` can be served.
    NotAcceptable,
    /// The model or an upstream is not ready or failed (also: the HTTP transport failed).
    Unavailable,
    /// The server is at capacity and refused the request for now (HTTP 429, with `Retry-After`);
    /// the clients retry it.
    RateLimited,
}

impl ErrorKind {
    /// All categories, in the order of SPEC.md section 11.
    pub const ALL: [ErrorKind; 15] = [
        ErrorKind::InvalidBase64,
        ErrorKind::LengthMismatch,
        ErrorKind::ShapeMismatch,
        ErrorKind::UnknownDtype,
        ErrorKind::Truncated,
        ErrorKind::Malformed,
        ErrorKind::InvalidField,
        ErrorKind::NonFinite,
        ErrorKind::Unauthorized,
        ErrorKind::NotFound,
        ErrorKind::PayloadTooLarge,
        ErrorKind::UnsupportedMediaType,
        ErrorKind::NotAcceptable,
        ErrorKind::Unavailable,
        ErrorKind::RateLimited,
    ];

    /// The category name used on the wire (`code` of the OpenAI error envelope).
    pub fn code(self) -> &'static str {
        match self {
            ErrorKind::InvalidBase64 => "invalid_base64",
            ErrorKind::LengthMismatch => "length_mismatch",
            ErrorKind::ShapeMismatch => "shape_mismatch",
            ErrorKind::UnknownDtype => "unknown_dtype",
            ErrorKind::Truncated => "truncated",
            ErrorKind::Malformed => "malformed",
            ErrorKind::InvalidField => "invalid_field",
            ErrorKind::NonFinite => "non_finite",
            ErrorKind::Unauthorized => "unauthorized",
            ErrorKind::NotFound => "not_found",
            ErrorKind::PayloadTooLarge => "payload_too_large",
            ErrorKind::UnsupportedMediaType => "unsupported_media_type",
            ErrorKind::NotAcceptable => "not_acceptable",
            ErrorKind::Unavailable => "unavailable",
            ErrorKind::RateLimited => "rate_limited",
        }
    }

    /// Parses a category name (`code`); `None` for anything else.
    pub fn from_code(code: &str) -> Option<ErrorKind> {
        ErrorKind::ALL.into_iter().find(|k| k.code() == code)
    }

    /// The HTTP status of SPEC.md section 11.
    pub fn http_status(self) -> u16 {
        match self {
            ErrorKind::InvalidField | ErrorKind::NonFinite => 422,
            ErrorKind::Unauthorized => 401,
            ErrorKind::NotFound => 404,
            ErrorKind::PayloadTooLarge => 413,
            ErrorKind::UnsupportedMediaType => 415,
            ErrorKind::NotAcceptable => 406,
            ErrorKind::Unavailable => 503,
            ErrorKind::RateLimited => 429,
            _ => 400,
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

/// A densewire error: its category, a message, and where it happened.
///
/// `offset` counts characters of a Base64 string or bytes of a binary body; `field` is a JSON path
/// (`data[3].embedding`), a MessagePack/Protobuf field name, or an HTTP header name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.display())]
pub struct Error {
    kind: ErrorKind,
    message: Cow<'static, str>,
    offset: Option<u64>,
    field: Option<Cow<'static, str>>,
    attempts: Option<u32>,
    /// The answer's `Retry-After` in seconds, as f64 bits (so that the error stays `Eq`).
    retry_after: Option<u64>,
}

/// `Result<T, densewire::Error>`.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// A new error of `kind` with a message.
    pub fn new(kind: ErrorKind, message: impl Into<Cow<'static, str>>) -> Error {
        Error { kind, message: message.into(), offset: None, field: None, attempts: None, retry_after: None }
    }

    /// Sets the offset.
    pub fn at(mut self, offset: usize) -> Error {
        self.offset = Some(offset as u64);
        self
    }

    /// Sets the field.
    pub fn field(mut self, field: impl Into<Cow<'static, str>>) -> Error {
        self.field = Some(field.into());
        self
    }

    /// Sets the field only if none is set yet (used when an inner decoder knows better).
    pub fn or_field(self, field: impl Into<Cow<'static, str>>) -> Error {
        if self.field.is_some() { self } else { self.field(field) }
    }

    /// The category.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The message, without the field prefix.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The offset (characters of a Base64 string, bytes of a binary body), if known.
    pub fn offset(&self) -> Option<u64> {
        self.offset
    }

    /// The field (JSON path, field name or header name), if known.
    pub fn field_name(&self) -> Option<&str> {
        self.field.as_deref()
    }

    /// How many HTTP requests a client ([`Client`](crate::Client), [`TablesClient`](crate::TablesClient))
    /// made before it gave up with this error (`Some(1)` when it was not retried); `None` for
    /// errors that did not come from a request.
    pub fn attempts(&self) -> Option<u32> {
        self.attempts
    }

    /// Records how many requests were made; the message of an error the clients retry (429, 503,
    /// a failed connection) says it, since it is the last of them.
    #[allow(dead_code)] // used by the clients (feature)
    pub(crate) fn after_attempts(mut self, attempts: u32) -> Error {
        self.attempts = Some(attempts);
        if matches!(self.kind, ErrorKind::RateLimited | ErrorKind::Unavailable) {
            let s = if attempts == 1 { "" } else { "s" };
            self.message = format!("{} (gave up after {attempts} attempt{s})", self.message).into();
        }
        self
    }

    /// The `Retry-After` of the answer this error came from, in seconds (SPEC.md 18.2:
    /// delay-seconds or an HTTP date), `None` when it had none: after a 429 or 503 that was not
    /// retried because it asked for more than a minute, when to come back.
    pub fn retry_after(&self) -> Option<f64> {
        self.retry_after.map(f64::from_bits)
    }

    /// Records the answer's `Retry-After`; the message says it when the clients did not wait for
    /// it (more than a minute).
    #[allow(dead_code)] // used by the clients (feature)
    pub(crate) fn with_retry_after(mut self, seconds: Option<f64>) -> Error {
        self.retry_after = seconds.map(f64::to_bits);
        if let Some(s) = seconds.filter(|s| *s > 60.0) {
            self.message = format!("{} (the server asks to come back in {s} s)", self.message).into();
        }
        self
    }

    /// The HTTP status of this error's category.
    pub fn http_status(&self) -> u16 {
        self.kind.http_status()
    }

    fn display(&self) -> String {
        match &self.field {
            Some(f) => format!("{f}: {}", self.message),
            None => self.message.to_string(),
        }
    }

    /// The OpenAI error envelope of SPEC.md section 11, as JSON text.
    ///
    /// ```
    /// use densewire::{Error, ErrorKind};
    /// let e = Error::new(ErrorKind::InvalidBase64, "invalid Base64 character '*' at offset 4")
    ///     .at(4)
    ///     .field("data[1].embedding");
    /// assert_eq!(
    ///     e.to_envelope_json(),
    ///     r#"{"error":{"message":"data[1].embedding: invalid Base64 character '*' at offset 4","type":"invalid_request_error","param":"data[1].embedding","code":"invalid_base64","offset":4}}"#
    /// );
    /// ```
    pub fn to_envelope_json(&self) -> String {
        #[derive(serde::Serialize)]
        struct Inner<'a> {
            message: String,
            #[serde(rename = "type")]
            kind: &'static str,
            param: Option<&'a str>,
            code: &'static str,
            #[serde(skip_serializing_if = "Option::is_none")]
            offset: Option<u64>,
        }
        #[derive(serde::Serialize)]
        struct Envelope<'a> {
            error: Inner<'a>,
        }
        let kind = if self.http_status() >= 500 { "server_error" } else { "invalid_request_error" };
        let env = Envelope {
            error: Inner {
                message: self.display(),
                kind,
                param: self.field.as_deref(),
                code: self.kind.code(),
                offset: self.offset,
            },
        };
        serde_json::to_string(&env).expect("the envelope serializes")
    }

    /// Parses an error answer into an error: OpenAI's envelope (as sent by a densewire server, or by
    /// OpenAI), or the `{"error": "<field>: <message>"}` of TEI's routes (`error_type` beside it),
    /// KServe's and Ollama's, the field read from the text; an unknown `code` maps by HTTP `status`.
    ///
    /// ```
    /// let tei = br#"{"error":"prompt_name: 'query' is not a prompt of the model","error_type":"Validation"}"#;
    /// let e = densewire::Error::from_envelope(422, tei);
    /// assert_eq!((e.kind(), e.field_name()), (densewire::ErrorKind::InvalidField, Some("prompt_name")));
    /// assert_eq!(e.message(), "'query' is not a prompt of the model");
    /// let plain = densewire::Error::from_envelope(429, br#"{"error":"model is overloaded","error_type":"Overloaded"}"#);
    /// assert_eq!((plain.kind(), plain.field_name()), (densewire::ErrorKind::RateLimited, None));
    /// ```
    pub fn from_envelope(status: u16, body: &[u8]) -> Error {
        let parsed: Option<serde_json::Value> = serde_json::from_slice(body).ok();
        let error = parsed.as_ref().and_then(|v| v.get("error"));
        // OpenAI's envelope holds code, param, message and offset in its `error` object; TEI's
        // (`{"error": "<field>: <message>", "error_type"}`), KServe's and Ollama's make `error` the
        // text, densewire's keys (when sent) beside it, and the field the text's leading path.
        let text = error.and_then(serde_json::Value::as_str);
        let err = if text.is_some() { parsed.as_ref() } else { error };
        let code = err.and_then(|e| e.get("code")).and_then(|c| c.as_str());
        // A 429 is "rate limited" whatever code the server gave it (OpenAI's `rate_limit_exceeded`,
        // TEI's `overloaded`, ...).
        let code_kind = if status == 429 { Some(ErrorKind::RateLimited) } else { code.and_then(ErrorKind::from_code) };
        let kind = code_kind.unwrap_or(match status {
            401 | 403 => ErrorKind::Unauthorized,
            404 => ErrorKind::NotFound,
            406 => ErrorKind::NotAcceptable,
            413 => ErrorKind::PayloadTooLarge,
            415 => ErrorKind::UnsupportedMediaType,
            422 => ErrorKind::InvalidField,
            400..=499 => ErrorKind::Malformed,
            _ => ErrorKind::Unavailable,
        });
        let field = err
            .and_then(|e| e.get("param"))
            .and_then(|p| p.as_str())
            .or_else(|| text.and_then(leading_field))
            .map(str::to_owned);
        let mut message = err
            .and_then(|e| e.get("message"))
            .and_then(|m| m.as_str())
            .or(text)
            .map(str::to_owned)
            .unwrap_or_else(|| format!("HTTP {status}: {}", String::from_utf8_lossy(&body[..body.len().min(200)])));
        // The server's message already starts with "field: "; do not say it twice.
        if let Some(f) = &field {
            if let Some(rest) = message.strip_prefix(&format!("{f}: ")) {
                message = rest.to_owned();
            }
        }
        let mut e = Error::new(kind, message);
        if let Some(f) = field {
            e = e.field(f);
        }
        if let Some(o) = err.and_then(|e| e.get("offset")).and_then(|o| o.as_u64()) {
            e.offset = Some(o);
        }
        e
    }
}

/// The field a dialect's error text starts with (`"prompt_name: ..."`, `"inputs[0]: ..."`): a JSON
/// path (letters, digits, `_`, `.`, `[`, `]`, starting with a letter or `_`) before the first `": "`.
fn leading_field(text: &str) -> Option<&str> {
    let (path, _) = text.split_once(": ")?;
    let first = path.chars().next()?;
    let path_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '[' | ']');
    ((first.is_ascii_alphabetic() || first == '_') && path.chars().all(path_char)).then_some(path)
}

/// Shorthand constructors used by the codecs.
pub(crate) fn err(kind: ErrorKind, message: impl Into<Cow<'static, str>>) -> Error {
    Error::new(kind, message)
}

#[allow(dead_code)]
pub(crate) fn truncated(len: usize) -> Error {
    err(ErrorKind::Truncated, format!("body ended early after {len} bytes")).at(len)
}

pub(crate) fn length_mismatch(actual: usize, expected: usize) -> Error {
    err(ErrorKind::LengthMismatch, format!("data is {actual} bytes, the shape needs {expected}"))
        .at(actual.min(expected))
}
