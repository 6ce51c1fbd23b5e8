//! An embeddings server on axum with a deterministic `hash` backend: each text's vector comes from
//! a hash of the text (no model weights), L2-normalised. Serves the API of SPEC.md sections 6 and
//! 12: POST /v1/embeddings with the OpenAI request, the response format negotiated by `Accept`
//! (or `?format=`), errors as OpenAI envelopes.
//!
//!     cargo run --release --example server --features full -- --port 8000 --dims 1024
//!
//! `--no-cache` computes every row for every request (by default rows already computed are served
//! from an in-process cache, like `densewire serve`'s).
//!
//! Then, e.g.:
//!
//!     curl -s localhost:8000/v1/embeddings -H 'Content-Type: application/json' \
//!          -H 'Accept: application/octet-stream' -d '{"input":["hello"]}' -D - -o /dev/null

use axum::Router;
use axum::extract::State;
use axum::routing::{get, post};
use densewire::{
    ApiError, DType, DenseResponse, Embeddings, EmbeddingsRequest, Error, ErrorKind, Input, JsonOptions, Negotiated,
    Tensor, Usage,
};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The hash model: `dims` dimensions, at most `max_tokens` tokens an input.
struct Model {
    id: String,
    dims: usize,
    max_tokens: usize,
    /// Rows already computed, by input and dimensions (cleared when it reaches 65,536 rows), so
    /// that repeated texts measure transport rather than hashing, like densewire serve's cache;
    /// `None` with `--no-cache`.
    cache: Option<Mutex<HashMap<(Vec<u8>, usize), Arc<[f32]>>>>,
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf29ce484222325u64, |h, &b| (h ^ b as u64).wrapping_mul(0x100000001b3))
}

fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e3779b97f4a7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d049bb133111eb);
    z ^ (z >> 31)
}

impl Model {
    /// The pseudo-embedding of one input: `dims` values in [-1, 1) from the input's hash,
    /// truncated to `out` dimensions, then L2-normalised.
    fn embed_into(&self, key: &[u8], out: &mut [f32]) {
        let mut state = fnv1a(key);
        for v in out.iter_mut() {
            *v = (splitmix(&mut state) >> 40) as f32 / (1u64 << 23) as f32 - 1.0;
        }
        let norm = out.iter().map(|v| v * v).sum::<f32>().sqrt();
        if norm > 0.0 {
            out.iter_mut().for_each(|v| *v /= norm);
        }
    }

    fn run(&self, req: &EmbeddingsRequest) -> Result<Embeddings, Error> {
        if let Some(m) = &req.model {
            if m != &self.id {
                return Err(Error::new(
                    ErrorKind::NotFound,
                    format!("model {m:?} does not exist; this server has {:?}", self.id),
                )
                .field("model"));
            }
        }
        let dims = req.dimensions.unwrap_or(self.dims);
        if dims > self.dims {
            return Err(Error::new(ErrorKind::InvalidField, format!("dimensions must be at most {}", self.dims))
                .field("dimensions"));
        }
        if matches!(req.dtype, DType::Int8 | DType::Uint8) {
            return Err(
                Error::new(ErrorKind::InvalidField, "the hash model does not quantize to int8 or uint8").field("dtype")
            );
        }
        let keys: Vec<Vec<u8>> = match &req.input {
            Input::Text(s) => vec![s.as_bytes().to_vec()],
            Input::Texts(v) => v.iter().map(|s| s.as_bytes().to_vec()).collect(),
            Input::Tokens(t) => vec![t.iter().flat_map(|x| x.to_le_bytes()).collect()],
            Input::TokenBatches(b) => b.iter().map(|t| t.iter().flat_map(|x| x.to_le_bytes()).collect()).collect(),
        };
        let tokens: Vec<usize> = match &req.input {
            Input::Text(s) => vec![s.split_whitespace().count().max(1)],
            Input::Texts(v) => v.iter().map(|s| s.split_whitespace().count().max(1)).collect(),
            Input::Tokens(t) => vec![t.len()],
            Input::TokenBatches(b) => b.iter().map(Vec::len).collect(),
        };
        if !req.truncate {
            if let Some(i) = tokens.iter().position(|&t| t > self.max_tokens) {
                return Err(Error::new(ErrorKind::InvalidField, format!("input is over {} tokens", self.max_tokens))
                    .field(format!("input[{i}]")));
            }
        }
        let rows = keys.len();
        let values: Vec<f32> = match &self.cache {
            _ if dims == 0 => Vec::new(),
            None => {
                let mut values = vec![0f32; keys.len() * dims];
                for (key, row) in keys.iter().zip(values.chunks_exact_mut(dims)) {
                    self.embed_into(key, row);
                }
                values
            }
            Some(cache) => {
                let mut values = Vec::with_capacity(keys.len() * dims);
                let mut cache = cache.lock().unwrap();
                if cache.len() + keys.len() > 65_536 {
                    cache.clear();
                }
                for key in keys {
                    let k = (key, dims);
                    if let Some(row) = cache.get(&k) {
                        values.extend_from_slice(row);
                    } else {
                        let mut v = vec![0f32; dims];
                        self.embed_into(&k.0, &mut v);
                        values.extend_from_slice(&v);
                        cache.insert(k, v.into());
                    }
                }
                values
            }
        };
        let tensor = Tensor::from_vec(rows, dims, values)?.convert(req.dtype)?;
        let total: u64 = tokens.iter().map(|&t| t.min(self.max_tokens) as u64).sum();
        Ok(Embeddings {
            tensor,
            model: Some(self.id.clone()),
            usage: Some(Usage { prompt_tokens: total, total_tokens: total }),
            quantization: None,
        })
    }
}

async fn embeddings(
    State(model): State<Arc<Model>>,
    fmt: Negotiated,
    req: EmbeddingsRequest,
) -> Result<DenseResponse, ApiError> {
    let e = model.run(&req)?;
    Ok(fmt.respond(e, JsonOptions { encoding_format: req.encoding_format, byteorder: req.byteorder }))
}

async fn models(State(model): State<Arc<Model>>) -> impl axum::response::IntoResponse {
    let body = serde_json::json!({
        "object": "list",
        "data": [{"id": model.id, "object": "model", "owned_by": "densewire", "dimensions": model.dims}],
    });
    ([(axum::http::header::CONTENT_TYPE, "application/json")], body.to_string())
}

async fn not_found() -> ApiError {
    ApiError(Error::new(ErrorKind::NotFound, "no such route"))
}

/// The app, for the example and for tests.
fn app(dims: usize, cache: bool) -> Router {
    let model = Arc::new(Model {
        id: format!("densewire-hash-{dims}"),
        dims,
        max_tokens: 8192,
        cache: cache.then(|| Mutex::new(HashMap::new())),
    });
    Router::new()
        .route("/v1/embeddings", post(embeddings))
        .route("/v1/models", get(models))
        .route("/health", get(|| async { "ok" }))
        .fallback(not_found)
        .with_state(model)
}

fn arg(name: &str, default: &str) -> String {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1).cloned()).unwrap_or_else(|| default.to_string())
}

#[tokio::main]
async fn main() {
    let port: u16 = arg("--port", "8000").parse().expect("--port N");
    let dims: usize = arg("--dims", "1024").parse().expect("--dims N");
    let host = arg("--host", "127.0.0.1");
    let cache = !std::env::args().any(|a| a == "--no-cache");
    let listener = tokio::net::TcpListener::bind((host.as_str(), port)).await.expect("bind");
    eprintln!(
        "densewire example server (hash model, {dims} dims, cache {}) on http://{}",
        if cache { "on" } else { "off" },
        listener.local_addr().unwrap()
    );
    axum::serve(listener, app(dims, cache)).await.expect("serve");
}
