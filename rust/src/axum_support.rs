//! axum integration (feature `axum`): content negotiation as an extractor, a response that
//! encodes in the negotiated format, an extractor for tensors in any format of the spec, and
//! OpenAI error envelopes as the rejection.

#[cfg(feature = "compression")]
use crate::compression::COMPRESSION_THRESHOLD;
use crate::compression::{ContentEncoding, negotiate_encoding};
use crate::embeddings::{Embeddings, JsonOptions};
use crate::error::{Error, ErrorKind, err};
use crate::json::EmbeddingsRequest;
use crate::media::{Format, negotiate};
use crate::tensor::realigned;
use axum::body::Body;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::response::{IntoResponse, Response};
use http::StatusCode;
use http::header::{ACCEPT, ACCEPT_ENCODING, CONTENT_ENCODING, CONTENT_TYPE, HeaderValue, VARY};
use http::request::Parts;

/// Request bodies larger than this (64 MiB) are `payload_too_large`, unless the extractor's
/// `LIMIT` parameter says otherwise.
pub const DEFAULT_BODY_LIMIT: usize = 64 << 20;

/// An error as an HTTP response: the status of its category and the OpenAI error envelope
/// (SPEC.md section 11), always JSON whatever was negotiated.
#[derive(Debug, Clone)]
pub struct ApiError(pub Error);

impl From<Error> for ApiError {
    fn from(e: Error) -> ApiError {
        ApiError(e)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.0.http_status()).unwrap_or(StatusCode::BAD_REQUEST);
        let mut r = (status, self.0.to_envelope_json()).into_response();
        r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        r
    }
}

/// The negotiated response format: `format` query parameter, else `Accept` (SPEC.md section 12).
/// Rejects with 406 `not_acceptable` listing the supported types.
///
/// ```
/// use densewire::{DenseResponse, Embeddings, Negotiated, Tensor};
/// async fn handler(fmt: Negotiated) -> DenseResponse {
///     let t = Tensor::from_slice(1, 2, &[1.0f32, 2.0]).unwrap();
///     fmt.respond(Embeddings::from_tensor(t), Default::default())
/// }
/// let _app: axum::Router = axum::Router::new().route("/v", axum::routing::get(handler));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Negotiated {
    /// The body format.
    pub format: Format,
    /// The response compression chosen from `Accept-Encoding` (identity without the
    /// `compression` feature); applied to bodies of at least
    /// [`COMPRESSION_THRESHOLD`](crate::COMPRESSION_THRESHOLD) bytes.
    pub encoding: ContentEncoding,
}

impl Negotiated {
    /// A response in this format and encoding.
    pub fn respond(self, embeddings: Embeddings, json: JsonOptions) -> DenseResponse {
        DenseResponse { embeddings, format: self.format, json, encoding: self.encoding }
    }
}

fn query_param<'a>(query: Option<&'a str>, name: &str) -> Option<&'a str> {
    query?.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        (k == name).then_some(v)
    })
}

impl<S: Send + Sync> FromRequestParts<S> for Negotiated {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        let accepts: Vec<&str> = parts.headers.get_all(ACCEPT).iter().filter_map(|v| v.to_str().ok()).collect();
        let joined = accepts.join(",");
        let accept = if accepts.is_empty() { None } else { Some(joined.as_str()) };
        let format = query_param(parts.uri.query(), "format");
        let format = negotiate(accept, format, &Format::supported())?;
        let ae = parts.headers.get(ACCEPT_ENCODING).and_then(|v| v.to_str().ok());
        Ok(Negotiated { format, encoding: negotiate_encoding(ae, ContentEncoding::offered()) })
    }
}

/// A response encoded in the negotiated format, with `Content-Type`, `Vary: Accept,
/// Accept-Encoding`, and for raw bodies the `Densewire-*` headers. An encoding failure (NaN as a
/// JSON number) becomes the error envelope.
#[derive(Debug, Clone)]
pub struct DenseResponse {
    /// What to send.
    pub embeddings: Embeddings,
    /// The negotiated format.
    pub format: Format,
    /// How JSON rows are written.
    pub json: JsonOptions,
    /// Compression for bodies of at least [`COMPRESSION_THRESHOLD`](crate::COMPRESSION_THRESHOLD) bytes.
    pub encoding: ContentEncoding,
}

impl IntoResponse for DenseResponse {
    fn into_response(self) -> Response {
        let vary = HeaderValue::from_static("Accept, Accept-Encoding");
        let enc = match self.embeddings.encode(self.format, self.json) {
            Ok(enc) => enc,
            Err(e) => {
                let mut r = ApiError(e).into_response();
                r.headers_mut().insert(VARY, vary);
                return r;
            }
        };
        #[cfg(feature = "compression")]
        let mut content_encoding = None;
        #[cfg(not(feature = "compression"))]
        let content_encoding: Option<HeaderValue> = None;
        #[cfg(feature = "compression")]
        let body = if self.encoding != ContentEncoding::Identity && enc.body.len() >= COMPRESSION_THRESHOLD {
            content_encoding = Some(HeaderValue::from_static(self.encoding.name()));
            bytes::Bytes::from(crate::compression::compress(self.encoding, &enc.body))
        } else {
            enc.body
        };
        #[cfg(not(feature = "compression"))]
        let body = enc.body;
        let mut r = Response::new(Body::from(body));
        let h = r.headers_mut();
        if let Some(ce) = content_encoding {
            h.insert(CONTENT_ENCODING, ce);
        }
        h.insert(CONTENT_TYPE, HeaderValue::from_static(enc.format.media_type()));
        h.insert(VARY, vary);
        for (name, value) in enc.headers {
            if let Ok(v) = HeaderValue::from_str(&value) {
                h.insert(name, v);
            }
        }
        r
    }
}

/// A tensor (with optional model and usage) from a request body in any format of the spec,
/// chosen by `Content-Type`; bodies over `LIMIT` bytes (before or after decompression) are 413
/// `payload_too_large`; `Content-Encoding: gzip` or `zstd` is inflated under the same limit with
/// the `compression` feature; unknown types and other encodings are 415. A Protobuf body is a bare `Tensor`
/// message; a JSON body is the envelope of SPEC.md section 6.2.
///
/// ```
/// use densewire::DenseBody;
/// async fn upsert(DenseBody(e): DenseBody) -> String {
///     format!("{} vectors of {} dims", e.tensor.rows(), e.tensor.dims())
/// }
/// // A 1 MiB limit instead of the default:
/// async fn small(DenseBody(e): DenseBody<{ 1 << 20 }>) -> String {
///     e.tensor.dtype().to_string()
/// }
/// let _app: axum::Router = axum::Router::new()
///     .route("/upsert", axum::routing::post(upsert))
///     .route("/small", axum::routing::post(small));
/// ```
#[derive(Debug, Clone)]
pub struct DenseBody<const LIMIT: usize = DEFAULT_BODY_LIMIT>(pub Embeddings);

async fn read_body(req: Request, limit: usize) -> Result<(Parts, bytes::Bytes), ApiError> {
    let (parts, body) = req.into_parts();
    let encoding = match parts.headers.get(CONTENT_ENCODING) {
        None => ContentEncoding::Identity,
        Some(v) => {
            let name = v.to_str().unwrap_or("").trim();
            match ContentEncoding::from_name(name) {
                Some(e @ (ContentEncoding::Identity | ContentEncoding::Gzip | ContentEncoding::Zstd))
                    if e == ContentEncoding::Identity || cfg!(feature = "compression") =>
                {
                    e
                }
                _ => {
                    return Err(err(
                        ErrorKind::UnsupportedMediaType,
                        format!(
                            "Content-Encoding {name:?} is not supported; send identity{}",
                            if cfg!(feature = "compression") { ", gzip or zstd" } else { "" }
                        ),
                    )
                    .field("Content-Encoding")
                    .into());
                }
            }
        }
    };
    if let Some(len) =
        parts.headers.get(http::header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok())
    {
        if len > limit as u64 {
            return Err(too_large(limit).into());
        }
    }
    let bytes = axum::body::to_bytes(body, limit).await.map_err(|_| too_large(limit))?;
    #[cfg(feature = "compression")]
    let bytes = if encoding == ContentEncoding::Identity {
        bytes
    } else {
        // Inflated under the same limit, checked while inflating.
        bytes::Bytes::from(crate::compression::decompress_bounded(encoding, &bytes, limit)?)
    };
    let _ = encoding;
    // Aligned (copied only when hyper's buffer is not), so raw and Arrow tensors are viewed in place.
    Ok((parts, realigned(bytes)))
}

fn too_large(limit: usize) -> Error {
    err(ErrorKind::PayloadTooLarge, format!("the request body is over the limit of {limit} bytes"))
}

impl<S: Send + Sync, const LIMIT: usize> FromRequest<S> for DenseBody<LIMIT> {
    type Rejection = ApiError;

    async fn from_request(req: Request, _state: &S) -> Result<Self, Self::Rejection> {
        let ct = req.headers().get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
        let format = Format::from_content_type(&ct).filter(|f| f.is_supported()).ok_or_else(|| {
            let list: Vec<&str> = Format::supported().iter().map(|f| f.media_type()).collect();
            err(ErrorKind::UnsupportedMediaType, format!("{ct:?} is not one of {}", list.join(", ")))
                .field("Content-Type")
        })?;
        let (parts, body) = read_body(req, LIMIT).await?;
        Ok(DenseBody(Embeddings::decode(format, &parts.headers, body, false)?))
    }
}

/// The `POST /v1/embeddings` request body as an extractor (JSON, at most 16 MiB), validated as
/// SPEC.md section 6.1 says; errors are the OpenAI envelope.
impl<S: Send + Sync> FromRequest<S> for EmbeddingsRequest {
    type Rejection = ApiError;

    async fn from_request(req: Request, _state: &S) -> Result<Self, Self::Rejection> {
        let ct = req.headers().get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("application/json");
        if Format::from_content_type(ct) != Some(Format::Json) {
            return Err(err(ErrorKind::UnsupportedMediaType, format!("{ct:?} is not application/json"))
                .field("Content-Type")
                .into());
        }
        let (_, body) = read_body(req, 16 << 20).await?;
        Ok(EmbeddingsRequest::parse(&body)?)
    }
}
