//! densewire's axum integration against a plain axum handler that answers the same bytes (issue 16,
//! step 6). One server, two routes, the same response matrix made once at start:
//!
//! - `POST /plain/v1/embeddings`: what one writes without densewire: the body read as `Bytes`,
//!   parsed by serde's derive into `{input: Vec<String>, ...}`, and the stored body answered with
//!   the stored header values (the same `Content-Type`, `Vary` and `Densewire-*` headers as
//!   densewire's answer, made once at start: the cheapest correct plain handler).
//! - `POST /densewire/v1/embeddings`: densewire's types: `Negotiated` (Accept, `?format=`,
//!   Accept-Encoding), the `EmbeddingsRequest` extractor (its validation included), and a
//!   `DenseResponse` of the stored `Embeddings` (a clone: the tensor's `Bytes` are shared).
//!
//! Both check that the request has as many inputs as the matrix has rows. `bench/rust/raw_path.sh`
//! starts it and drives both routes side by side with `rust/examples/client.rs`:
//!
//!     raw_path --port 8000 --rows 256 --dims 1024 [--exit-after N]
//!
//! `--exit-after N` shuts the server down gracefully after N embeddings responses (for callgrind,
//! which writes its counts when the process exits).

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use densewire::{
    ApiError, DenseResponse, Embeddings, EmbeddingsRequest, Error, ErrorKind, Format, JsonOptions,
    Negotiated, Tensor, Usage,
};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::sync::Notify;

struct Fixed {
    rows: usize,
    embeddings: Embeddings,
    /// The plain handler's answer: densewire's raw body and headers, stored once.
    body: Bytes,
    headers: Vec<(HeaderName, HeaderValue)>,
    served: AtomicUsize,
    exit_after: usize,
    done: Notify,
}

impl Fixed {
    fn new(rows: usize, dims: usize, exit_after: usize) -> Fixed {
        let values: Vec<f32> = (0..rows * dims)
            .map(|i| ((i * 7919) % 2001) as f32 / 1000.0 - 1.0)
            .collect();
        let tensor = Tensor::from_vec(rows, dims, values).expect("a tensor");
        let usage = Usage {
            prompt_tokens: 8 * rows as u64,
            total_tokens: 8 * rows as u64,
        };
        let embeddings = Embeddings {
            tensor,
            model: Some("bench-model".into()),
            usage: Some(usage),
            quantization: None,
        };
        let enc = embeddings
            .encode(Format::Raw, JsonOptions::default())
            .expect("raw encodes");
        let mut headers = vec![
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/octet-stream"),
            ),
            (
                header::VARY,
                HeaderValue::from_static("Accept, Accept-Encoding"),
            ),
        ];
        for (name, value) in &enc.headers {
            headers.push((
                HeaderName::from_static_lower(name),
                HeaderValue::from_str(value).expect("a header value"),
            ));
        }
        Fixed {
            rows,
            embeddings,
            body: enc.body,
            headers,
            served: AtomicUsize::new(0),
            exit_after,
            done: Notify::new(),
        }
    }

    fn count(&self) {
        let n = self.served.fetch_add(1, Ordering::Relaxed) + 1;
        if n == self.exit_after {
            self.done.notify_one();
        }
    }
}

/// `HeaderName::from_static` wants lowercase; densewire's names are in their canonical case.
trait FromStaticLower {
    fn from_static_lower(name: &str) -> HeaderName;
}

impl FromStaticLower for HeaderName {
    fn from_static_lower(name: &str) -> HeaderName {
        HeaderName::from_bytes(name.to_ascii_lowercase().as_bytes()).expect("a header name")
    }
}

#[derive(serde::Deserialize)]
#[allow(dead_code)]
struct PlainRequest {
    input: Vec<String>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    encoding_format: Option<String>,
    #[serde(default)]
    dimensions: Option<usize>,
}

async fn plain(State(f): State<Arc<Fixed>>, body: Bytes) -> Response {
    let req: PlainRequest = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => return (StatusCode::BAD_REQUEST, e.to_string()).into_response(),
    };
    if req.input.len() != f.rows {
        return (
            StatusCode::UNPROCESSABLE_ENTITY,
            format!("this server answers {} inputs", f.rows),
        )
            .into_response();
    }
    let mut r = Response::new(Body::from(f.body.clone()));
    let h = r.headers_mut();
    for (name, value) in &f.headers {
        h.insert(name.clone(), value.clone());
    }
    f.count();
    r
}

async fn dense(
    State(f): State<Arc<Fixed>>,
    fmt: Negotiated,
    req: EmbeddingsRequest,
) -> Result<DenseResponse, ApiError> {
    if req.input.len() != f.rows {
        return Err(Error::new(
            ErrorKind::InvalidField,
            format!("this server answers {} inputs", f.rows),
        )
        .field("input")
        .into());
    }
    f.count();
    Ok(fmt.respond(
        f.embeddings.clone(),
        JsonOptions {
            encoding_format: req.encoding_format,
            byteorder: req.byteorder,
        },
    ))
}

fn arg(name: &str, default: &str) -> String {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
        .unwrap_or_else(|| default.to_string())
}

fn main() {
    if !std::env::args().any(|a| a == "--port") {
        // `cargo bench` runs every bench target: this one is a server for raw_path.sh.
        eprintln!(
            "raw_path: a server for bench/rust/raw_path.sh (--port P --rows R --dims D [--exit-after N])"
        );
        return;
    }
    let port: u16 = arg("--port", "8000").parse().expect("--port N");
    let rows: usize = arg("--rows", "256").parse().expect("--rows N");
    let dims: usize = arg("--dims", "1024").parse().expect("--dims N");
    let exit_after: usize = arg("--exit-after", "0").parse().expect("--exit-after N");
    let fixed = Arc::new(Fixed::new(rows, dims, exit_after));
    let app = Router::new()
        .route("/plain/v1/embeddings", post(plain))
        .route("/densewire/v1/embeddings", post(dense))
        .route("/health", get(|| async { "ok" }))
        .with_state(fixed.clone());
    // One thread: the server is pinned to one core, and both routes see the same runtime.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
            .await
            .expect("bind");
        let done = fixed.clone();
        axum::serve(listener, app)
            .with_graceful_shutdown(async move {
                if exit_after > 0 {
                    done.done.notified().await
                } else {
                    std::future::pending::<()>().await
                }
            })
            .await
            .expect("serve");
    });
}
