//! An async client for `POST /v1/embeddings` (feature `reqwest`): negotiates a binary format,
//! decodes the response without copying the tensor out of the received [`Bytes`], and runs large
//! jobs as a stream of batches with bounded concurrency (`buffer_unordered`).

use crate::embeddings::{Embeddings, Usage};
use crate::error::{ErrorKind, Result, err};
use crate::json::{EmbeddingsRequest, Input};
use crate::media::Format;
use crate::quantization::Quantization;
use crate::retry::{RetryPolicy, transport};
use crate::tensor::{Tensor, aligned_zeroed, realigned};
use futures_util::stream::{self, Stream, StreamExt};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A client of a densewire (or any OpenAI-compatible) embeddings server.
///
/// A 429, a 503 and a connection that fails before the server answers are retried (2 retries by
/// default, as the OpenAI SDKs do) after an exponential backoff with full jitter added on top of the
/// server's `Retry-After` (SPEC.md section 18, [`RetryPolicy`](crate::RetryPolicy)); other errors are
/// returned at once. The error of the last
/// attempt says how many were made ([`Error::attempts`](crate::Error::attempts)); a server at
/// capacity is [`ErrorKind::RateLimited`](crate::ErrorKind::RateLimited).
///
/// ```no_run
/// # async fn demo() -> densewire::Result<()> {
/// use densewire::{Client, EmbeddingsRequest, Format};
/// let client = Client::builder("http://127.0.0.1:8000").format(Format::Raw).concurrency(8).build()?;
/// let e = client.embed(&EmbeddingsRequest::new(["hello", "world"])).await?;
/// let vectors = e.tensor.as_f32()?; // a view into the response body when it is aligned
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Client {
    pub(crate) http: reqwest::Client,
    url: String,
    /// The base URL ending in `/v1`.
    pub(crate) v1: String,
    api_key: Option<String>,
    format: Format,
    /// The `Accept` header, made once.
    pub(crate) accept: http::HeaderValue,
    concurrency: usize,
    batch_size: usize,
    pub(crate) retry: RetryPolicy,
    /// Published quantizations fetched so far, by id (shared by the clones of this client).
    quantizations: Arc<Mutex<HashMap<String, Arc<Quantization>>>>,
}

/// Builds a [`Client`].
#[derive(Debug, Clone)]
pub struct ClientBuilder {
    base_url: String,
    api_key: Option<String>,
    format: Format,
    concurrency: usize,
    batch_size: usize,
    timeout: Option<Duration>,
    http: Option<reqwest::Client>,
    retry: RetryPolicy,
}

impl ClientBuilder {
    /// Sends `Authorization: Bearer KEY`.
    pub fn api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(key.into());
        self
    }

    /// The response format to ask for (default [`Format::Raw`]); JSON stays acceptable at a lower
    /// q-value, so OpenAI-compatible servers that know only JSON still answer.
    pub fn format(mut self, format: Format) -> Self {
        self.format = format;
        self
    }

    /// Requests in flight at once for [`Client::embed_stream`] (default 8).
    pub fn concurrency(mut self, n: usize) -> Self {
        self.concurrency = n.max(1);
        self
    }

    /// Inputs per request for [`Client::embed_stream`] (default 256, at most 2048).
    pub fn batch_size(mut self, n: usize) -> Self {
        self.batch_size = n.clamp(1, crate::json::MAX_INPUTS);
        self
    }

    /// A timeout for each request.
    pub fn timeout(mut self, t: Duration) -> Self {
        self.timeout = Some(t);
        self
    }

    /// Uses this reqwest client (for TLS, proxies, pools of your own).
    pub fn http_client(mut self, c: reqwest::Client) -> Self {
        self.http = Some(c);
        self
    }

    /// Retries of a request answered 429 or 503, or whose connection failed before an answer
    /// (default 2; 0 never retries).
    pub fn max_retries(mut self, n: u32) -> Self {
        self.retry.set_max_retries(n);
        self
    }

    /// The backoff between retries (default 0.5 s and 8 s): before retry `n` (1 for the first) the
    /// client waits a uniformly random time below `min(cap, base * 2^(n-1))`, added on top of the
    /// server's `Retry-After` when it sent one (a `Retry-After` over 60 s is not waited for: the
    /// error is returned at once, carrying it: [`Error::retry_after`](crate::Error::retry_after)).
    pub fn retry_backoff(mut self, base: Duration, cap: Duration) -> Self {
        self.retry.set_backoff(base, cap);
        self
    }

    /// The source of the backoff's random draws, numbers uniform in [0, 1) (default: 53 random bits
    /// of the standard library's randomly keyed hasher): the jitter of retry `n` is `draw * min(cap,
    /// base * 2^(n-1))` seconds (SPEC.md section 18, [`RetryPolicy`](crate::RetryPolicy)). A seeded
    /// generator behind a mutex gives a reproducible schedule, a constant tests one wait.
    pub fn retry_random(mut self, random: impl Fn() -> f64 + Send + Sync + 'static) -> Self {
        self.retry = self.retry.with_random(random);
        self
    }

    /// The client.
    pub fn build(self) -> Result<Client> {
        if !self.format.is_supported() {
            return Err(err(
                ErrorKind::UnsupportedMediaType,
                format!("{} support is not compiled in", self.format.media_type()),
            ));
        }
        let http = match self.http {
            Some(c) => c,
            None => {
                let mut b = reqwest::Client::builder().pool_max_idle_per_host(self.concurrency.max(8));
                if let Some(t) = self.timeout {
                    b = b.timeout(t);
                }
                b.build().map_err(transport)?
            }
        };
        let base = self.base_url.trim_end_matches('/');
        let v1 = if base.ends_with("/v1") { base.to_string() } else { format!("{base}/v1") };
        let url = format!("{v1}/embeddings");
        let accept = if self.format == Format::Json {
            http::HeaderValue::from_static("application/json")
        } else {
            http::HeaderValue::from_str(&format!("{}, application/json;q=0.1", self.format.media_type()))
                .expect("media types are header values")
        };
        Ok(Client {
            http,
            url,
            v1,
            api_key: self.api_key,
            format: self.format,
            accept,
            concurrency: self.concurrency,
            batch_size: self.batch_size,
            retry: self.retry,
            quantizations: Arc::default(),
        })
    }
}

impl Client {
    /// A builder for a server at `base_url` (e.g. `http://127.0.0.1:8000` or
    /// `https://api.openai.com/v1`, given a TLS-enabled reqwest client).
    pub fn builder(base_url: impl Into<String>) -> ClientBuilder {
        ClientBuilder {
            base_url: base_url.into(),
            api_key: None,
            format: Format::Raw,
            concurrency: 8,
            batch_size: 256,
            timeout: None,
            http: None,
            retry: RetryPolicy::default(),
        }
    }

    /// The format this client asks for.
    pub fn format(&self) -> Format {
        self.format
    }

    /// One request (retried as the [`Client`] says). The response is decoded by its
    /// `Content-Type`; an error status becomes the [`Error`](crate::Error) of its OpenAI error
    /// envelope (category, field and offset included).
    pub async fn embed(&self, req: &EmbeddingsRequest) -> Result<Embeddings> {
        let body = bytes::Bytes::from(req.to_json());
        let reply = self
            .retry
            .send(|| {
                self.authorized(
                    self.http
                        .post(&self.url)
                        .header(http::header::CONTENT_TYPE, "application/json")
                        .header(http::header::ACCEPT, self.accept.clone())
                        .body(body.clone()),
                )
            })
            .await?;
        if !(200..300).contains(&reply.status) {
            return Err(reply.error());
        }
        let headers = reply.headers;
        // hyper joins the received chunks into one buffer; when that buffer does not start on an
        // 8-byte boundary (a small body sliced out of the read buffer), it is copied once more into
        // one that does, so that raw and Arrow tensors are always viewed in place.
        let body = realigned(reply.body);
        let ct = headers.get(http::header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("application/json");
        let format = Format::from_content_type(ct).ok_or_else(|| {
            err(ErrorKind::UnsupportedMediaType, format!("the server answered with Content-Type {ct:?}"))
                .field("Content-Type")
        })?;
        Embeddings::decode(format, &headers, body, true)
    }

    /// `rb` with the API key as a bearer token, when the client has one.
    pub(crate) fn authorized(&self, rb: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &self.api_key {
            Some(k) => rb.bearer_auth(k),
            None => rb,
        }
    }

    /// The published ranges of quantization `id` (`GET /v1/quantization/{id}`, SPEC.md section
    /// 17.6), checked by [`Quantization::from_json`] and against `id`. Fetched once: the object is
    /// immutable, so later calls (of this client and its clones) use the cached one.
    pub async fn quantization(&self, id: &str) -> Result<Arc<Quantization>> {
        if let Some(q) = self.quantizations.lock().expect("not poisoned").get(id) {
            return Ok(q.clone());
        }
        if id.is_empty() || !id.bytes().all(|b| b.is_ascii_alphanumeric()) {
            return Err(err(ErrorKind::InvalidField, format!("{id:?} is not a quantization id")).field("quantization"));
        }
        let url = format!("{}/quantization/{id}", self.v1);
        let reply = self
            .retry
            .send(|| self.authorized(self.http.get(&url).header(http::header::ACCEPT, "application/json")))
            .await?;
        if !(200..300).contains(&reply.status) {
            return Err(reply.error());
        }
        let q = Quantization::from_json(&reply.body)?;
        if q.id != id {
            return Err(err(
                ErrorKind::InvalidField,
                format!("asked for quantization {id}, the server answered {}", q.id),
            )
            .field("id"));
        }
        let q = Arc::new(q);
        self.quantizations.lock().expect("not poisoned").insert(id.to_owned(), q.clone());
        Ok(q)
    }

    /// [`Client::embed`], then, when the answer is `int8` or `uint8` codes, their float32 values by
    /// the ranges the response names ([`Client::quantization`], fetched once per id). The result
    /// keeps the quantization id; other dtypes are returned as they came.
    ///
    /// ```no_run
    /// # async fn demo() -> densewire::Result<()> {
    /// use densewire::{Client, DType, EmbeddingsRequest};
    /// let client = Client::builder("http://127.0.0.1:8000").build()?;
    /// // 1 byte a dimension on the wire, float32 in memory
    /// let e = client.embed_dequantized(&EmbeddingsRequest::new(["hello"]).dtype(DType::Int8)).await?;
    /// assert_eq!(e.tensor.dtype(), DType::Float32);
    /// # Ok(()) }
    /// ```
    pub async fn embed_dequantized(&self, req: &EmbeddingsRequest) -> Result<Embeddings> {
        let mut e = self.embed(req).await?;
        if !matches!(e.tensor.dtype(), crate::DType::Int8 | crate::DType::Uint8) {
            return Ok(e);
        }
        let Some(id) = e.quantization.clone() else {
            return Err(err(
                ErrorKind::InvalidField,
                format!("the {} response names no quantization: its codes cannot be dequantized", e.tensor.dtype()),
            )
            .field("quantization"));
        };
        let q = self.quantization(&id).await?;
        e.tensor = q.ranges.dequantize(&e.tensor)?;
        Ok(e)
    }

    /// Embeds many texts as a stream of batches: `batch_size` texts a request, at most
    /// `concurrency` requests in flight, results in completion order. Each item is the index of the
    /// batch's first text and its embeddings. `template` supplies model, dtype, dimensions, ...
    pub fn embed_stream<'a>(
        &'a self,
        texts: Vec<String>,
        template: &'a EmbeddingsRequest,
    ) -> impl Stream<Item = Result<(usize, Embeddings)>> + 'a {
        let mut batches = Vec::with_capacity(texts.len().div_ceil(self.batch_size));
        let mut it = texts.into_iter().peekable();
        let mut start = 0;
        while it.peek().is_some() {
            let batch: Vec<String> = it.by_ref().take(self.batch_size).collect();
            let n = batch.len();
            batches.push((start, batch));
            start += n;
        }
        stream::iter(batches)
            .map(move |(start, batch)| {
                let mut req = template.clone();
                req.input = Input::Texts(batch);
                async move { self.embed(&req).await.map(|e| (start, e)) }
            })
            .buffer_unordered(self.concurrency)
    }

    /// Embeds many texts (see [`Client::embed_stream`]) into one tensor, rows in input order,
    /// usage summed.
    pub async fn embed_all(&self, texts: Vec<String>, template: &EmbeddingsRequest) -> Result<Embeddings> {
        let total = texts.len();
        let mut parts: Vec<(usize, Embeddings)> = Vec::new();
        let mut s = std::pin::pin!(self.embed_stream(texts, template));
        while let Some(item) = s.next().await {
            parts.push(item?);
        }
        parts.sort_by_key(|(start, _)| *start);
        let Some((_, first)) = parts.first() else {
            return Ok(Embeddings::from_tensor(Tensor::empty(template.dtype, template.dimensions.unwrap_or(0))));
        };
        let (dtype, dims, model) = (first.tensor.dtype(), first.tensor.dims(), first.model.clone());
        let quantization = first.quantization.clone();
        let rb = first.tensor.row_bytes();
        let mut buf = aligned_zeroed(rb * total);
        let mut usage: Option<Usage> = None;
        for (start, e) in &parts {
            if e.tensor.dtype() != dtype || e.tensor.dims() != dims {
                return Err(err(ErrorKind::ShapeMismatch, "batches came back with different dtypes or dimensions"));
            }
            if e.quantization != quantization {
                return Err(err(
                    ErrorKind::ShapeMismatch,
                    format!(
                        "batches came back quantized with different ranges ({:?}, {:?})",
                        quantization, e.quantization
                    ),
                )
                .field("quantization"));
            }
            let n = e.tensor.rows();
            buf.as_mut_slice()[start * rb..(start + n) * rb].copy_from_slice(e.tensor.as_bytes());
            if let Some(u) = e.usage {
                let acc = usage.get_or_insert_with(Usage::default);
                acc.prompt_tokens += u.prompt_tokens;
                acc.total_tokens += u.total_tokens;
            }
        }
        let tensor = Tensor::new(dtype, total, dims, buf.freeze())?;
        Ok(Embeddings { tensor, model, usage, quantization })
    }
}
