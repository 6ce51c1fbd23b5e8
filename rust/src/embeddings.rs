//! The embeddings model: a tensor with its model id and token usage, what every body format of
//! SPEC.md carries, and the options of the JSON envelope. The bottom of the graph: the format
//! modules (`json`, `raw`, `msgpack`, `protobuf`, `arrow`) import it, and [`crate::codec`] dispatches
//! to them.

use crate::dtype::ByteOrder;
use crate::error::{Error, ErrorKind, err};
use crate::tensor::Tensor;

/// Token counts of an embeddings response.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Usage {
    /// Tokens in the input.
    pub prompt_tokens: u64,
    /// Tokens billed.
    pub total_tokens: u64,
}

impl Usage {
    /// The largest count: 2^53 - 1, the largest integer every language's JSON numbers hold exactly
    /// (SPEC.md section 6.2).
    pub const MAX_COUNT: u64 = (1 << 53) - 1;

    /// The `usage` of a JSON envelope (SPEC.md section 6.2), as its raw text: `None` when absent
    /// or null, an object whose `prompt_tokens` and `total_tokens` are integers from 0 to
    /// [`Usage::MAX_COUNT`] (0 when absent); anything else is `invalid_field` on `usage`,
    /// `usage.prompt_tokens` or `usage.total_tokens`. Raw, so that a count past binary64
    /// (`1e3080`) is that field's error rather than the parser's.
    pub(crate) fn from_json(raw: Option<&serde_json::value::RawValue>) -> Result<Option<Usage>, Error> {
        let Some(raw) = raw else { return Ok(None) };
        let text = raw.get();
        if text == "null" {
            return Ok(None);
        }
        let map: std::collections::HashMap<std::borrow::Cow<'_, str>, &serde_json::value::RawValue> =
            serde_json::from_str(text).map_err(|_| Usage::not_a_map(text))?;
        let count = |key: &str, field: &'static str| match map.get(key) {
            None => Ok(0),
            Some(v) => serde_json::from_str::<serde_json::Value>(v.get())
                .ok()
                .and_then(|n| n.as_u64())
                .filter(|&n| n <= Usage::MAX_COUNT)
                .ok_or_else(|| Usage::bad_count(field, v.get())),
        };
        Ok(Some(Usage {
            prompt_tokens: count("prompt_tokens", "usage.prompt_tokens")?,
            total_tokens: count("total_tokens", "usage.total_tokens")?,
        }))
    }

    pub(crate) fn not_a_map(got: &str) -> Error {
        err(ErrorKind::InvalidField, format!("usage must be a map of token counts, got {}", clip(got))).field("usage")
    }

    /// A count that is not an integer from 0 to 2^53 - 1; `field` is `usage.prompt_tokens` or
    /// `usage.total_tokens`.
    pub(crate) fn bad_count(field: &'static str, got: &str) -> Error {
        err(ErrorKind::InvalidField, format!("{field} must be an integer from 0 to 2^53 - 1, got {}", clip(got)))
            .field(field)
    }
}

fn clip(s: &str) -> &str {
    match s.char_indices().nth(40) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

/// How the JSON envelope writes each `embedding` (SPEC.md section 6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum EncodingFormat {
    /// An array of JSON numbers (integers for int8, uint8 and binary's packed bytes).
    #[default]
    Float,
    /// A Base64 string of the row's bytes.
    Base64,
}

impl EncodingFormat {
    /// `float` or `base64`.
    pub fn name(self) -> &'static str {
        match self {
            EncodingFormat::Float => "float",
            EncodingFormat::Base64 => "base64",
        }
    }
}

/// Options of the JSON envelope encoder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct JsonOptions {
    /// `float` (default) or `base64`.
    pub encoding_format: EncodingFormat,
    /// Byte order of Base64 rows (ignored for `float`).
    pub byteorder: ByteOrder,
}

/// An embeddings response (or any tensor with optional model id and token usage): what every
/// body format of SPEC.md carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Embeddings {
    /// The vectors, one row per input.
    pub tensor: Tensor,
    /// The model id, when the body gives one.
    pub model: Option<String>,
    /// Token usage, when the body gives it.
    pub usage: Option<Usage>,
    /// The quantization id of an `int8` / `uint8` response (SPEC.md section 17.4): the name of the
    /// ranges the server quantized with, published at `GET /v1/quantization/{id}`
    /// ([`Quantization`](crate::Quantization)). Carried by every format when set.
    pub quantization: Option<String>,
}

impl Embeddings {
    /// A bare tensor with no model or usage.
    pub fn from_tensor(tensor: Tensor) -> Embeddings {
        Embeddings { tensor, model: None, usage: None, quantization: None }
    }

    /// Whether anything but the tensor is set (a model, usage or quantization id): such a response
    /// is a Protobuf `EmbeddingsResponse`, a bare tensor a `Tensor` message.
    pub(crate) fn has_envelope(&self) -> bool {
        self.model.is_some() || self.usage.is_some() || self.quantization.is_some()
    }
}
