//! The dispatcher: [`Embeddings::encode`] and [`Embeddings::decode`] hand a body to the module
//! of its format (`json/`, `raw`, `msgpack`, `protobuf`, `arrow`), which import the model from
//! [`crate::embeddings`] and never this module.

use crate::embeddings::{Embeddings, JsonOptions};
use crate::error::{ErrorKind, Result, err};
use crate::headers::Headers;
use crate::media::Format;
use bytes::Bytes;

impl Embeddings {
    /// Encodes the response in `format`. For [`Format::Json`], `json` says how rows are written.
    /// For [`Format::Protobuf`] the message is an `EmbeddingsResponse` when a model, usage or
    /// quantization id is present and a bare `Tensor` otherwise.
    pub fn encode(&self, format: Format, json: JsonOptions) -> Result<Encoded> {
        let body: Bytes = match format {
            Format::Json => crate::json::encode_json(self, json)?.into(),
            Format::Raw => self.tensor.bytes().clone(),
            Format::Msgpack => {
                #[cfg(feature = "msgpack")]
                {
                    crate::msgpack::encode_msgpack(self).into()
                }
                #[cfg(not(feature = "msgpack"))]
                return Err(unsupported(format));
            }
            Format::Protobuf => {
                #[cfg(feature = "protobuf")]
                {
                    if self.has_envelope() {
                        crate::protobuf::encode_protobuf_response(self).into()
                    } else {
                        crate::protobuf::encode_protobuf_tensor(&self.tensor).into()
                    }
                }
                #[cfg(not(feature = "protobuf"))]
                return Err(unsupported(format));
            }
            Format::Arrow => {
                #[cfg(feature = "arrow")]
                {
                    crate::arrow::encode_arrow(self)?.into()
                }
                #[cfg(not(feature = "arrow"))]
                return Err(unsupported(format));
            }
        };
        let headers = if format == Format::Raw { crate::raw::raw_headers(self) } else { Vec::new() };
        Ok(Encoded { format, headers, body })
    }

    /// Decodes a body of `format`. `headers` are needed by [`Format::Raw`] only (pass `&[]`
    /// otherwise). A Protobuf body is read as an `EmbeddingsResponse` when `protobuf_response`
    /// is true, as a bare `Tensor` otherwise.
    pub fn decode<H: Headers + ?Sized>(
        format: Format,
        headers: &H,
        body: Bytes,
        protobuf_response: bool,
    ) -> Result<Embeddings> {
        match format {
            Format::Json => crate::json::decode_json(&body),
            Format::Raw => crate::raw::decode_raw(headers, body),
            Format::Msgpack => {
                #[cfg(feature = "msgpack")]
                return crate::msgpack::decode_msgpack(body);
                #[cfg(not(feature = "msgpack"))]
                return Err(unsupported(format));
            }
            Format::Protobuf => {
                #[cfg(feature = "protobuf")]
                return if protobuf_response {
                    crate::protobuf::decode_protobuf_response(body)
                } else {
                    crate::protobuf::decode_protobuf_tensor(body).map(Embeddings::from_tensor)
                };
                #[cfg(not(feature = "protobuf"))]
                {
                    let _ = protobuf_response;
                    return Err(unsupported(format));
                }
            }
            Format::Arrow => {
                #[cfg(feature = "arrow")]
                return crate::arrow::decode_arrow(body);
                #[cfg(not(feature = "arrow"))]
                return Err(unsupported(format));
            }
        }
    }
}

#[allow(dead_code)]
fn unsupported(format: Format) -> crate::Error {
    err(
        ErrorKind::UnsupportedMediaType,
        format!("{} support is not compiled in (enable the cargo feature {:?})", format.media_type(), format.name()),
    )
}

/// An encoded body with its media type and the headers it needs (the raw format's
/// `Densewire-*` headers).
#[derive(Debug, Clone)]
pub struct Encoded {
    /// The format; `format.media_type()` is the `Content-Type`.
    pub format: Format,
    /// Extra response headers (raw only).
    pub headers: Vec<(&'static str, String)>,
    /// The body.
    pub body: Bytes,
}
