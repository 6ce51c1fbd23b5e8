//! axum integration (feature `axum`): content negotiation as an extractor, a response that
//! encodes in the negotiated format, an extractor for tensors in any format of the spec, and
//! OpenAI error envelopes as the rejection.

#[cfg(feature = "compression")]
use crate::compression::COMPRESSION_THRESHOLD;
use crate::compression::{ContentEncoding, negotiate_encoding};
use crate::dtype::DType;
use crate::embeddings::{Embeddings, JsonOptions};
use crate::error::{Error, ErrorKind, err};
use crate::json::EmbeddingsRequest;
use crate::media::{Format, SUPPORTED, negotiate};
use crate::raw::{RawHeader, RawValue, raw_header_values};
use crate::tensor::realigned;
use axum::body::Body;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::response::{IntoResponse, Response};
use http::StatusCode;
use http::header::{ACCEPT, ACCEPT_ENCODING, CONTENT_ENCODING, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue, VARY};
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
        // One Accept header (the usual case) is read in place; several are joined with commas.
        let mut accepts = parts.headers.get_all(ACCEPT).iter().filter_map(|v| v.to_str().ok());
        let joined: String;
        let accept = match (accepts.next(), accepts.next()) {
            (None, _) => None,
            (Some(one), None) => Some(one),
            (Some(a), Some(b)) => {
                joined = [a, b].into_iter().chain(accepts).collect::<Vec<_>>().join(",");
                Some(joined.as_str())
            }
        };
        let format = match query_param(parts.uri.query(), "format") {
            Some(name) => negotiate(accept, Some(name), SUPPORTED)?,
            None => negotiate_supported(accept)?,
        };
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

/// The raw format's header names, made when compiling (a `&str` name would be parsed and
/// lowercased into a new buffer for every response).
fn raw_header_name(header: RawHeader) -> HeaderName {
    const VERSION: HeaderName = HeaderName::from_static("densewire-version");
    const DTYPE: HeaderName = HeaderName::from_static("densewire-dtype");
    const SHAPE: HeaderName = HeaderName::from_static("densewire-shape");
    const BYTEORDER: HeaderName = HeaderName::from_static("densewire-byteorder");
    const MODEL: HeaderName = HeaderName::from_static("densewire-model");
    const PROMPT_TOKENS: HeaderName = HeaderName::from_static("densewire-prompt-tokens");
    const TOTAL_TOKENS: HeaderName = HeaderName::from_static("densewire-total-tokens");
    const QUANTIZATION: HeaderName = HeaderName::from_static("densewire-quantization");
    let name = match header {
        RawHeader::Version => VERSION,
        RawHeader::Dtype => DTYPE,
        RawHeader::Shape => SHAPE,
        RawHeader::Byteorder => BYTEORDER,
        RawHeader::Model => MODEL,
        RawHeader::PromptTokens => PROMPT_TOKENS,
        RawHeader::TotalTokens => TOTAL_TOKENS,
        RawHeader::Quantization => QUANTIZATION,
    };
    debug_assert!(name.as_str().eq_ignore_ascii_case(header.name()));
    name
}

/// A dtype's name as a header value, made when compiling.
fn dtype_value(dtype: DType) -> HeaderValue {
    const NAMES: [HeaderValue; 7] = [
        HeaderValue::from_static("float32"),
        HeaderValue::from_static("float16"),
        HeaderValue::from_static("bfloat16"),
        HeaderValue::from_static("float64"),
        HeaderValue::from_static("int8"),
        HeaderValue::from_static("uint8"),
        HeaderValue::from_static("binary"),
    ];
    let v = NAMES[dtype.proto_value() as usize - 1].clone();
    debug_assert_eq!(v, dtype.name());
    v
}

/// `Vary` of every response, made when compiling.
const VARY_VALUE: HeaderValue = HeaderValue::from_static("Accept, Accept-Encoding");

/// The `Content-Type` of a format, made when compiling.
fn content_type(format: Format) -> HeaderValue {
    const JSON: HeaderValue = HeaderValue::from_static("application/json");
    const RAW: HeaderValue = HeaderValue::from_static("application/octet-stream");
    const MSGPACK: HeaderValue = HeaderValue::from_static("application/vnd.msgpack");
    const PROTOBUF: HeaderValue = HeaderValue::from_static("application/protobuf");
    const ARROW: HeaderValue = HeaderValue::from_static("application/vnd.apache.arrow.stream");
    let v = match format {
        Format::Json => JSON,
        Format::Raw => RAW,
        Format::Msgpack => MSGPACK,
        Format::Protobuf => PROTOBUF,
        Format::Arrow => ARROW,
    };
    debug_assert_eq!(v, format.media_type());
    v
}

/// The format for an `Accept` value among the [`SUPPORTED`] ones, remembering the last value
/// negotiated on this thread: a client sends the same `Accept` with every request, and parsing it
/// again was the largest cost of this integration per request. Errors are not remembered.
fn negotiate_supported(accept: Option<&str>) -> Result<Format, Error> {
    thread_local! {
        static LAST: std::cell::RefCell<Option<(String, Format)>> = const { std::cell::RefCell::new(None) };
    }
    let Some(accept) = accept.filter(|a| a.len() <= 512) else { return negotiate(accept, None, SUPPORTED) };
    LAST.with(|last| {
        let mut last = last.borrow_mut();
        if let Some((seen, format)) = last.as_ref() {
            if seen == accept {
                return Ok(*format);
            }
        }
        let format = negotiate(Some(accept), None, SUPPORTED)?;
        match last.as_mut() {
            Some((seen, f)) => {
                seen.clear();
                seen.push_str(accept);
                *f = format;
            }
            None => *last = Some((accept.to_owned(), format)),
        }
        Ok(format)
    })
}

/// A constant header value of a raw body, made when compiling for the common ones.
fn static_value(s: &'static str) -> HeaderValue {
    const ONE: HeaderValue = HeaderValue::from_static("1");
    const LITTLE: HeaderValue = HeaderValue::from_static("little");
    match s {
        "1" => ONE,
        "little" => LITTLE,
        other => HeaderValue::from_static(other),
    }
}

/// The `Densewire-*` headers of a raw body (what [`crate::raw_headers`] lists), written straight
/// into `h`: constant values without a copy, numbers without a `String`. A model id that is not a
/// valid header value is left out.
fn insert_raw_headers(h: &mut HeaderMap, e: &Embeddings) {
    for (header, value) in raw_header_values(e) {
        let value = match value {
            RawValue::Static(s) => static_value(s),
            RawValue::Dtype(d) => dtype_value(d),
            RawValue::Count(c) => HeaderValue::from_bytes(itoa::Buffer::new().format(c).as_bytes()).expect("digits"),
            RawValue::Shape(n, d) => {
                let (mut a, mut b) = (itoa::Buffer::new(), itoa::Buffer::new());
                let (n, d) = (a.format(n).as_bytes(), b.format(d).as_bytes());
                let mut text = [0u8; 41];
                text[..n.len()].copy_from_slice(n);
                text[n.len()] = b',';
                text[n.len() + 1..n.len() + 1 + d.len()].copy_from_slice(d);
                HeaderValue::from_bytes(&text[..n.len() + 1 + d.len()]).expect("digits and a comma")
            }
            RawValue::Text(t) => match HeaderValue::from_str(t) {
                Ok(v) => v,
                Err(_) => continue,
            },
        };
        h.insert(raw_header_name(header), value);
    }
}

impl IntoResponse for DenseResponse {
    fn into_response(self) -> Response {
        let vary = VARY_VALUE;
        // A raw body is the tensor's bytes (shared, not copied); its headers are written below
        // without the `Encoded` list of Strings that `encode` would make.
        let body = match self.format {
            Format::Raw => Ok(self.embeddings.tensor.bytes().clone()),
            format => self.embeddings.encode(format, self.json).map(|enc| enc.body),
        };
        let body = match body {
            Ok(body) => body,
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
        let body = if self.encoding != ContentEncoding::Identity && body.len() >= COMPRESSION_THRESHOLD {
            content_encoding = Some(HeaderValue::from_static(self.encoding.name()));
            bytes::Bytes::from(crate::compression::compress(self.encoding, &body))
        } else {
            body
        };
        let mut r = Response::new(Body::from(body));
        let h = r.headers_mut();
        h.reserve(10);
        if let Some(ce) = content_encoding {
            h.insert(CONTENT_ENCODING, ce);
        }
        h.insert(CONTENT_TYPE, content_type(self.format));
        h.insert(VARY, vary);
        if self.format == Format::Raw {
            insert_raw_headers(h, &self.embeddings);
        }
        r
    }
}

/// A tensor (with optional model and usage) from a request body in any format of the spec,
/// chosen by `Content-Type`; bodies over `LIMIT` bytes (before or after decompression) are 413
/// `payload_too_large`; `Content-Encoding: gzip` (or `x-gzip`), `deflate` (zlib or bare), `br` or
/// `zstd` is inflated under the same limit with the `compression` feature, a block at a time (a
/// corrupt, cut or overlong stream is 400 `malformed` on `Content-Encoding`); unknown types, other
/// encodings and more than one coding are 415. A Protobuf body is a bare `Tensor`
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
            // An empty value names no coding (identity), as in the Python server; a value that is
            // not visible ASCII names none that exists.
            let name = v.to_str().map(str::trim).unwrap_or("\u{fffd}");
            let known =
                if name.is_empty() { Some(ContentEncoding::Identity) } else { ContentEncoding::from_name(name) };
            match known {
                Some(e) if e == ContentEncoding::Identity || cfg!(feature = "compression") => e,
                _ => {
                    return Err(err(
                        ErrorKind::UnsupportedMediaType,
                        format!(
                            "Content-Encoding {name:?} is not supported; send identity{}",
                            if cfg!(feature = "compression") { ", gzip, deflate, br or zstd" } else { "" }
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
    Ok((parts, bytes))
}

fn too_large(limit: usize) -> Error {
    err(ErrorKind::PayloadTooLarge, format!("the request body is over the limit of {limit} bytes"))
}

impl<S: Send + Sync, const LIMIT: usize> FromRequest<S> for DenseBody<LIMIT> {
    type Rejection = ApiError;

    async fn from_request(req: Request, _state: &S) -> Result<Self, Self::Rejection> {
        let ct = req.headers().get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
        let format = Format::from_content_type(&ct).filter(|f| f.is_supported()).ok_or_else(|| {
            let list: Vec<&str> = SUPPORTED.iter().map(|f| f.media_type()).collect();
            err(ErrorKind::UnsupportedMediaType, format!("{ct:?} is not one of {}", list.join(", ")))
                .field("Content-Type")
        })?;
        let (parts, body) = read_body(req, LIMIT).await?;
        // Aligned (copied only when hyper's buffer is not), so raw and Arrow tensors are viewed in place.
        Ok(DenseBody(Embeddings::decode(format, &parts.headers, realigned(body), false)?))
    }
}

/// The `POST /v1/embeddings` request body as an extractor (JSON, at most 16 MiB), validated as
/// SPEC.md section 6.1 says; errors are the OpenAI envelope.
impl<S: Send + Sync> FromRequest<S> for EmbeddingsRequest {
    type Rejection = ApiError;

    async fn from_request(req: Request, _state: &S) -> Result<Self, Self::Rejection> {
        let ct = req.headers().get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("application/json");
        if ct != "application/json" && Format::from_content_type(ct) != Some(Format::Json) {
            return Err(err(ErrorKind::UnsupportedMediaType, format!("{ct:?} is not application/json"))
                .field("Content-Type")
                .into());
        }
        let (_, body) = read_body(req, 16 << 20).await?;
        Ok(EmbeddingsRequest::parse(&body)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Tensor, Usage, raw_headers};

    /// The headers written straight into the response are the ones `raw_headers` lists, in the
    /// same order, for every dtype, with and without model and usage; a model id that is not a
    /// header value is left out, as before.
    #[test]
    fn raw_headers_in_the_response_are_raw_headers() {
        for dtype in DType::ALL {
            let zeros = bytes::Bytes::from(vec![0u8; 3 * dtype.row_bytes(2).unwrap()]);
            let t = Tensor::new(dtype, 3, 2, zeros).unwrap();
            for (model, usage, quantization) in [
                (None, None, None),
                (Some("m-1"), Some(Usage { prompt_tokens: 7, total_tokens: 12345678901 }), Some("455fc59476466b04")),
                (Some("bad\nmodel"), None, None),
            ] {
                let e = Embeddings {
                    tensor: t.clone(),
                    model: model.map(str::to_owned),
                    usage,
                    quantization: quantization.map(str::to_owned),
                };
                let mut h = HeaderMap::new();
                insert_raw_headers(&mut h, &e);
                let got: Vec<(String, String)> =
                    h.iter().map(|(k, v)| (k.as_str().to_owned(), v.to_str().unwrap().to_owned())).collect();
                let want: Vec<(String, String)> = raw_headers(&e)
                    .into_iter()
                    .filter(|(_, v)| HeaderValue::from_str(v).is_ok())
                    .map(|(k, v)| (k.to_ascii_lowercase(), v))
                    .collect();
                assert_eq!(got, want, "{dtype} {model:?}");
            }
        }
    }

    #[test]
    fn content_types_are_the_media_types() {
        for f in Format::ALL {
            assert_eq!(content_type(f), f.media_type());
        }
    }
}
