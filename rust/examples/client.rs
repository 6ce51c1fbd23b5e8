//! Drives the benchmark workload against an embeddings server: N requests of a batch of texts
//! (256 by default; the server's dims, 1024 float32 for the example server), C in flight at once,
//! decoding each response either as a zero-copy `&[f32]` view of the body or by copying it out
//! into a `Vec<f32>` (what a client without views does). Prints requests/s and MB/s.
//!
//!     cargo run --release --example client --features full -- \
//!         --url http://127.0.0.1:8000 --requests 100 --concurrency 10 --batch 256 --format raw --mode both
//!
//! `--format headerless-raw` talks to a server that answers bare float32 bytes without densewire's
//! headers (FastAPI's raw `Response`), taking the shape from `--batch` and `--dims`.

use densewire::{Client, DType, EmbeddingsRequest, EncodingFormat, Format, Tensor};
use futures_util::StreamExt;
use std::hint::black_box;
use std::time::Instant;

/// CPU time of this process (all threads, user + system), in seconds; NaN off Linux.
#[cfg(not(target_os = "linux"))]
fn cpu_seconds() -> f64 {
    f64::NAN
}

/// CPU time of this process (all threads, user + system), in seconds.
#[cfg(target_os = "linux")]
fn cpu_seconds() -> f64 {
    #[repr(C)]
    struct Timespec {
        sec: i64,
        nsec: i64,
    }
    unsafe extern "C" {
        fn clock_gettime(clock: i32, ts: *mut Timespec) -> i32;
    }
    const CLOCK_PROCESS_CPUTIME_ID: i32 = 2;
    let mut ts = Timespec { sec: 0, nsec: 0 };
    if unsafe { clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &mut ts) } != 0 {
        return f64::NAN;
    }
    ts.sec as f64 + ts.nsec as f64 * 1e-9
}

fn arg(name: &str, default: &str) -> String {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1).cloned()).unwrap_or_else(|| default.to_string())
}

/// Touches every row of the response the way an application would: through a view, or through
/// a copied-out Vec<f32>.
fn consume(t: &Tensor, zero_copy: bool) -> (f32, bool) {
    let d = t.dims().max(1);
    if zero_copy {
        let v = t.as_f32().expect("a float32 response");
        let borrowed = matches!(v, std::borrow::Cow::Borrowed(_));
        (v.iter().step_by(d).sum(), borrowed)
    } else {
        let v: Vec<f32> = t.as_bytes().chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
        (black_box(&v).iter().step_by(d).sum(), false)
    }
}

fn texts(requests: usize, batch: usize, same: bool) -> Vec<String> {
    (0..requests * batch)
        .map(|i| {
            if same {
                format!("benchmark sentence number {} about moving embeddings", i % batch)
            } else {
                format!("document {i} about densewire")
            }
        })
        .collect()
}

async fn run(client: &Client, requests: usize, batch: usize, zero_copy: bool, same: bool) -> (f64, usize, usize) {
    let mut template = EmbeddingsRequest::new(Vec::<String>::new());
    template.encoding_format = EncodingFormat::Base64;
    let inputs = texts(requests, batch, same);
    let start = Instant::now();
    let mut bytes = 0usize;
    let mut borrowed = 0usize;
    let mut checksum = 0f32;
    let mut s = std::pin::pin!(client.embed_stream(inputs, &template));
    while let Some(item) = s.next().await {
        let (_, e) = item.expect("request failed");
        bytes += e.tensor.as_bytes().len();
        let (sum, b) = consume(&e.tensor, zero_copy);
        checksum += sum;
        borrowed += b as usize;
    }
    black_box(checksum);
    (start.elapsed().as_secs_f64(), bytes, borrowed)
}

/// A server that answers bare float32 bytes with no densewire headers (FastAPI's raw `Response`):
/// the shape comes from the request, as such clients do.
async fn run_headerless(
    url: &str,
    requests: usize,
    batch: usize,
    dims: usize,
    concurrency: usize,
    zero_copy: bool,
) -> (f64, usize, usize) {
    let http = reqwest::Client::new();
    let body = EmbeddingsRequest::new(texts(1, batch, true)).to_json();
    let start = Instant::now();
    let mut out = futures_util::stream::iter(0..requests)
        .map(|_| {
            let rb = http.post(url).header("content-type", "application/json").body(body.clone());
            async move {
                let bytes = rb.send().await.expect("request").bytes().await.expect("body");
                Tensor::new(DType::Float32, batch, dims, bytes).expect("a (batch, dims) float32 body")
            }
        })
        .buffer_unordered(concurrency);
    let (mut total, mut borrowed, mut checksum) = (0usize, 0usize, 0f32);
    while let Some(t) = out.next().await {
        total += t.as_bytes().len();
        let (sum, b) = consume(&t, zero_copy);
        checksum += sum;
        borrowed += b as usize;
    }
    black_box(checksum);
    (start.elapsed().as_secs_f64(), total, borrowed)
}

fn main() {
    // One thread by default: on a small machine shared with the server, a multi-threaded runtime
    // only adds cross-thread wake-ups (measured: see bench/rust/RESULTS.md). --threads N for more.
    let threads: usize = arg("--threads", "1").parse().expect("--threads N");
    let rt = if threads <= 1 {
        tokio::runtime::Builder::new_current_thread().enable_all().build()
    } else {
        tokio::runtime::Builder::new_multi_thread().worker_threads(threads).enable_all().build()
    };
    rt.expect("tokio runtime").block_on(async_main());
}

async fn async_main() {
    let url = arg("--url", "http://127.0.0.1:8000");
    let requests: usize = arg("--requests", "100").parse().expect("--requests N");
    let concurrency: usize = arg("--concurrency", "10").parse().expect("--concurrency N");
    let batch: usize = arg("--batch", "256").parse().expect("--batch N");
    let dims: usize = arg("--dims", "1024").parse().expect("--dims N");
    let format_name = arg("--format", "raw");
    let mode = arg("--mode", "both");
    let rounds: usize = arg("--rounds", "1").parse().expect("--rounds N");
    // Same 256 texts in every request (the published workload; servers may cache them), or all
    // texts different.
    let same = arg("--texts", "same") == "same";
    let label = arg("--label", &url);
    let threads = arg("--threads", "1");
    let modes: &[bool] = match mode.as_str() {
        "zero-copy" => &[true],
        "copy" => &[false],
        _ => &[true, false],
    };
    let headerless = format_name == "headerless-raw";
    let client = if headerless {
        None
    } else {
        let format = Format::from_name(&format_name).expect("--format json|raw|msgpack|protobuf|arrow|headerless-raw");
        Some(Client::builder(&url).format(format).concurrency(concurrency).batch_size(batch).build().expect("client"))
    };
    let go = |zero_copy: bool, n: usize| {
        let client = client.clone();
        let url = url.clone();
        async move {
            match &client {
                Some(c) => run(c, n, batch, zero_copy, same).await,
                None => run_headerless(&format!("{url}/v1/embeddings"), n, batch, dims, concurrency, zero_copy).await,
            }
        }
    };
    go(true, concurrency.min(requests)).await; // warm up the connection pool (and server caches)
    for &zero_copy in modes {
        let mut best: Option<((f64, usize, usize), f64)> = None;
        for _ in 0..rounds {
            let cpu0 = cpu_seconds();
            let r = go(zero_copy, requests).await;
            let cpu = cpu_seconds() - cpu0;
            if best.is_none_or(|(b, _)| r.0 < b.0) {
                best = Some((r, cpu));
            }
        }
        let ((secs, bytes, borrowed), cpu) = best.unwrap();
        println!(
            "target={label} format={format_name} threads={threads} mode={} requests={requests} concurrency={concurrency} batch={batch} \
             seconds={secs:.3} req_per_s={:.1} vectors_per_s={:.0} MB_per_s={:.1} Gbit_per_s={:.2} views_borrowed={borrowed}/{requests} cpu_us_per_req={:.0}",
            if zero_copy { "zero-copy" } else { "copy" },
            requests as f64 / secs,
            (requests * batch) as f64 / secs,
            bytes as f64 / secs / 1e6,
            bytes as f64 * 8.0 / secs / 1e9,
            cpu / requests as f64 * 1e6,
        );
    }
}
