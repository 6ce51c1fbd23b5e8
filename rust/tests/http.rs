//! The axum integration and the reqwest client, over real HTTP on loopback, against small
//! in-process servers that answer like SPEC.md says (golden bodies with their headers).

use axum::Router;
use axum::body::Body;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use densewire::{
    ByteOrder, Client, DType, DenseBody, DenseResponse, Embeddings, EmbeddingsRequest, EncodingFormat, Error,
    ErrorKind, Format, JsonOptions, Negotiated, Tensor, Usage, negotiate,
};
use serde_json::Value;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

fn golden(id: &str) -> Value {
    let mut dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    while !dir.join("testdata/golden/tensors.json").exists() {
        assert!(dir.pop(), "testdata/golden not found");
    }
    let text = std::fs::read_to_string(dir.join("testdata/golden/tensors.json")).unwrap();
    let v: Value = serde_json::from_str(&text).unwrap();
    v["cases"].as_array().unwrap().iter().find(|c| c["id"] == id).unwrap_or_else(|| panic!("no case {id}")).clone()
}

fn hex(h: &str) -> Vec<u8> {
    (0..h.len()).step_by(2).map(|i| u8::from_str_radix(&h[i..i + 2], 16).unwrap()).collect()
}

fn expected() -> Embeddings {
    let t = Tensor::from_slice(2, 3, &[1.0f32, -2.5, 0.1, 3.0, 0.5, -1.0]).unwrap();
    Embeddings {
        tensor: t,
        model: Some("sentence-transformers/all-MiniLM-L6-v2".into()),
        usage: Some(Usage { prompt_tokens: 7, total_tokens: 7 }),
        quantization: None,
    }
}

async fn serve(app: Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}")
}

/// Answers POST /v1/embeddings with the golden bodies of the `with_model_and_usage` case, in the
/// format negotiated from Accept, as a densewire server would.
async fn golden_server(headers: HeaderMap, body: axum::body::Bytes) -> Response {
    let req = match EmbeddingsRequest::parse(&body) {
        Ok(r) => r,
        Err(e) => return densewire::ApiError(e).into_response(),
    };
    if req.input.len() != 2 {
        return densewire::ApiError(
            Error::new(ErrorKind::InvalidField, "this test server embeds 2 inputs").field("input"),
        )
        .into_response();
    }
    let accept = headers.get("accept").and_then(|v| v.to_str().ok());
    let format = match negotiate(accept, None, &Format::ALL) {
        Ok(f) => f,
        Err(e) => return densewire::ApiError(e).into_response(),
    };
    let (id, body) = match format {
        Format::Json => {
            let id = "json.base64.f32le.with_model_and_usage";
            (id, golden(id)["encoded_text"].as_str().unwrap().as_bytes().to_vec())
        }
        f => {
            let id = format!("{}.f32.with_model_and_usage", f.name());
            let b = hex(golden(&id)["encoded_hex"].as_str().unwrap());
            (Box::leak(id.into_boxed_str()) as &str, b)
        }
    };
    let mut r = Response::new(Body::from(body));
    r.headers_mut().insert("content-type", format.media_type().parse().unwrap());
    r.headers_mut().insert("vary", "Accept, Accept-Encoding".parse().unwrap());
    if format == Format::Raw {
        for (k, v) in golden(id)["headers"].as_object().unwrap() {
            r.headers_mut()
                .insert(k.as_str().parse::<axum::http::HeaderName>().unwrap(), v.as_str().unwrap().parse().unwrap());
        }
    }
    r
}

#[tokio::test]
async fn client_decodes_every_format_from_golden_bodies() {
    let base = serve(Router::new().route("/v1/embeddings", post(golden_server))).await;
    for format in Format::ALL {
        let client = Client::builder(&base).format(format).build().unwrap();
        let got = client.embed(&EmbeddingsRequest::new(["a", "b"])).await.unwrap_or_else(|e| panic!("{format}: {e}"));
        assert_eq!(got, expected(), "{format}");
        if format == Format::Raw {
            // A raw body is aligned in reqwest's buffer: the view borrows it.
            assert!(got.tensor.is_zero_copy::<f32>(), "raw responses should be viewed without copying");
        }
    }
}

#[tokio::test]
async fn client_reports_error_envelopes() {
    let base = serve(Router::new().route("/v1/embeddings", post(golden_server))).await;
    let client = Client::builder(&base).build().unwrap();
    let e = client.embed(&EmbeddingsRequest::new(["only one"])).await.unwrap_err();
    assert_eq!((e.kind(), e.field_name()), (ErrorKind::InvalidField, Some("input")));
    assert_eq!(e.message(), "this test server embeds 2 inputs");
    // Transport failure: nothing listens there.
    let dead = Client::builder("http://127.0.0.1:9").timeout(Duration::from_secs(5)).build().unwrap();
    assert_eq!(dead.embed(&EmbeddingsRequest::new(["a"])).await.unwrap_err().kind(), ErrorKind::Unavailable);
}

/// A server whose row i holds the number in text "t{i}", that records the most requests it had
/// in flight at once.
#[derive(Default)]
struct Counting {
    now: AtomicUsize,
    max: AtomicUsize,
    calls: AtomicUsize,
}

#[tokio::test]
async fn embed_stream_bounds_concurrency_and_embed_all_keeps_order() {
    let state = Arc::new(Counting::default());
    let s2 = state.clone();
    let app = Router::new().route(
        "/v1/embeddings",
        post(move |fmt: Negotiated, req: EmbeddingsRequest| {
            let st = s2.clone();
            async move {
                let n = st.now.fetch_add(1, Ordering::SeqCst) + 1;
                st.max.fetch_max(n, Ordering::SeqCst);
                st.calls.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(30)).await;
                let densewire::Input::Texts(texts) = req.input else { panic!("texts") };
                let vals: Vec<f32> = texts
                    .iter()
                    .flat_map(|t| {
                        let i: f32 = t[1..].parse().unwrap();
                        [i, -i]
                    })
                    .collect();
                let e = Embeddings::from_tensor(Tensor::from_slice(texts.len(), 2, &vals).unwrap());
                st.now.fetch_sub(1, Ordering::SeqCst);
                fmt.respond(e, JsonOptions::default())
            }
        }),
    );
    let base = serve(app).await;
    let client = Client::builder(&base).format(Format::Raw).concurrency(3).batch_size(10).build().unwrap();
    let texts: Vec<String> = (0..95).map(|i| format!("t{i}")).collect();
    let all = client.embed_all(texts, &EmbeddingsRequest::new(Vec::<String>::new())).await.unwrap();
    assert_eq!(all.tensor.shape(), (95, 2));
    let v = all.tensor.as_f32().unwrap();
    for i in 0..95 {
        assert_eq!((v[2 * i], v[2 * i + 1]), (i as f32, -(i as f32)));
    }
    assert_eq!(state.calls.load(Ordering::SeqCst), 10);
    let max = state.max.load(Ordering::SeqCst);
    assert!((2..=3).contains(&max), "in flight at once: {max}");
}

async fn echo(DenseBody(e): DenseBody<4096>) -> String {
    format!("{} {} {}x{}", e.tensor.dtype(), e.tensor.as_bytes().len(), e.tensor.rows(), e.tensor.dims())
}

async fn respond(fmt: Negotiated) -> DenseResponse {
    let t = Tensor::from_slice(1, 3, &[1.0f32, -2.5, 0.1]).unwrap();
    fmt.respond(
        Embeddings::from_tensor(t),
        JsonOptions { encoding_format: EncodingFormat::Base64, byteorder: ByteOrder::Little },
    )
}

async fn respond_nan(fmt: Negotiated) -> DenseResponse {
    let t = Tensor::from_slice(1, 1, &[f32::NAN]).unwrap();
    fmt.respond(Embeddings::from_tensor(t), JsonOptions::default())
}

fn app() -> Router {
    Router::new()
        .route("/echo", post(echo))
        .route("/vectors", post(respond).get(respond))
        .route("/nan", axum::routing::get(respond_nan))
}

async fn envelope(r: reqwest::Response) -> (u16, Value) {
    let status = r.status().as_u16();
    assert_eq!(r.headers()["content-type"], "application/json");
    (status, serde_json::from_slice(&r.bytes().await.unwrap()).unwrap())
}

#[tokio::test]
async fn axum_response_negotiates_with_vary() {
    let base = serve(app()).await;
    let http = reqwest::Client::new();
    let cases = [
        (None, "application/json"),
        (Some("*/*"), "application/json"),
        (Some("application/octet-stream"), "application/octet-stream"),
        (Some("application/x-msgpack"), "application/vnd.msgpack"),
        (Some("application/*;q=0.5, application/protobuf"), "application/protobuf"),
        (
            Some("application/vnd.apache.arrow.stream;q=0.9, application/json;q=0.8"),
            "application/vnd.apache.arrow.stream",
        ),
        (Some("*/*;q=0.5, application/json;q=0"), "application/octet-stream"),
    ];
    for (accept, want) in cases {
        let mut rb = http.get(format!("{base}/vectors"));
        if let Some(a) = accept {
            rb = rb.header("accept", a);
        }
        let r = rb.send().await.unwrap();
        assert_eq!(r.status(), 200, "{accept:?}");
        assert_eq!(r.headers()["content-type"], want, "{accept:?}");
        assert_eq!(r.headers()["vary"], "Accept, Accept-Encoding");
        let format = Format::from_content_type(want).unwrap();
        let headers = r.headers().clone();
        let e = Embeddings::decode(format, &headers, r.bytes().await.unwrap(), false).unwrap();
        assert_eq!(&*e.tensor.as_f32().unwrap(), &[1.0, -2.5, 0.1]);
    }
    // The query parameter overrides Accept.
    let r = http.get(format!("{base}/vectors?format=raw")).header("accept", "application/json").send().await.unwrap();
    assert_eq!(r.headers()["content-type"], "application/octet-stream");
    assert_eq!(r.headers()["densewire-shape"], "1,3");
    // Nothing acceptable: 406 with the supported types listed.
    let (status, v) =
        envelope(http.get(format!("{base}/vectors")).header("accept", "text/html").send().await.unwrap()).await;
    assert_eq!(status, 406);
    assert_eq!(v["error"]["code"], "not_acceptable");
    assert!(v["error"]["message"].as_str().unwrap().contains("application/vnd.msgpack"));
    // NaN as a JSON number: 422 non_finite with the field.
    let (status, v) = envelope(http.get(format!("{base}/nan")).send().await.unwrap()).await;
    assert_eq!(
        (status, v["error"]["code"].as_str(), v["error"]["param"].as_str()),
        (422, Some("non_finite"), Some("data[0].embedding[0]"))
    );
}

#[tokio::test]
async fn axum_extractor_accepts_every_format_and_rejects_with_envelopes() {
    let base = serve(app()).await;
    let http = reqwest::Client::new();
    let e = Embeddings::from_tensor(Tensor::from_slice(2, 3, &[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap());
    for format in Format::ALL {
        let enc = e.encode(format, JsonOptions::default()).unwrap();
        let mut rb = http.post(format!("{base}/echo")).header("content-type", format.media_type()).body(enc.body);
        for (k, v) in enc.headers {
            rb = rb.header(k, v);
        }
        let r = rb.send().await.unwrap();
        assert_eq!(r.status(), 200, "{format}");
        assert_eq!(r.text().await.unwrap(), "float32 24 2x3", "{format}");
    }
    // Bad Base64 inside a JSON body: 400 with code, field and offset.
    let body = r#"{"data":[{"index":0,"embedding":"AACA*wAAAEA="}]}"#;
    let r =
        http.post(format!("{base}/echo")).header("content-type", "application/json").body(body).send().await.unwrap();
    let (status, v) = envelope(r).await;
    assert_eq!(status, 400);
    assert_eq!(v["error"]["code"], "invalid_base64");
    assert_eq!(v["error"]["param"], "data[0].embedding");
    assert_eq!(v["error"]["offset"], 4);
    assert_eq!(v["error"]["type"], "invalid_request_error");
    // Raw body without its shape header: 422 invalid_field naming the header.
    let r = http
        .post(format!("{base}/echo"))
        .header("content-type", "application/octet-stream")
        .header("densewire-dtype", "float32")
        .body(vec![0u8; 8])
        .send()
        .await
        .unwrap();
    let (status, v) = envelope(r).await;
    assert_eq!((status, v["error"]["param"].as_str()), (422, Some("Densewire-Shape")));
    // Unknown type: 415; an unknown encoding: 415; too large: 413.
    let r = http.post(format!("{base}/echo")).header("content-type", "text/csv").body("1,2").send().await.unwrap();
    assert_eq!(envelope(r).await.0, 415);
    let r = http
        .post(format!("{base}/echo"))
        .header("content-type", "application/octet-stream")
        .header("content-encoding", "compress")
        .body(vec![0u8; 4])
        .send()
        .await
        .unwrap();
    assert_eq!(envelope(r).await.0, 415);
    let r = http
        .post(format!("{base}/echo"))
        .header("content-type", "application/octet-stream")
        .header("densewire-dtype", "uint8")
        .header("densewire-shape", "1,5000")
        .body(vec![0u8; 5000])
        .send()
        .await
        .unwrap();
    let (status, v) = envelope(r).await;
    assert_eq!((status, v["error"]["code"].as_str()), (413, Some("payload_too_large")));
}

#[tokio::test]
async fn request_extractor_validates_fields() {
    let app =
        Router::new().route("/v1/embeddings", post(|r: EmbeddingsRequest| async move { format!("{}", r.input.len()) }));
    let base = serve(app).await;
    let http = reqwest::Client::new();
    let send = |body: &'static str| {
        http.post(format!("{base}/v1/embeddings")).header("content-type", "application/json").body(body).send()
    };
    assert_eq!(
        send(r#"{"input":["a","b"],"dtype":"bfloat16","truncate":false}"#).await.unwrap().text().await.unwrap(),
        "2"
    );
    for (body, code, param) in [
        (r#"{"input":"a","dimensoins":3}"#, "invalid_field", "dimensoins"),
        (r#"{"input":"a","dtype":"fp16"}"#, "unknown_dtype", "dtype"),
        (r#"{"input":"a","dtype":"float64"}"#, "invalid_field", "dtype"),
        (r#"{"input":["a",""]}"#, "invalid_field", "input[1]"),
        (r#"{"input":"a","byteorder":"middle"}"#, "invalid_field", "byteorder"),
        (r#"{"input":"a","dimensions":0}"#, "invalid_field", "dimensions"),
    ] {
        let (_, v) = envelope(send(body).await.unwrap()).await;
        assert_eq!((v["error"]["code"].as_str(), v["error"]["param"].as_str()), (Some(code), Some(param)), "{body}");
    }
    let (status, v) = envelope(send(r#"{"input":"#).await.unwrap()).await;
    assert_eq!((status, v["error"]["code"].as_str()), (400, Some("malformed")));
}

#[test]
fn dtype_of_conversion_in_server_path() {
    // What the example server does for dtype=float16: convert, then serve.
    let t = Tensor::from_slice(1, 2, &[0.1f32, 65520.0]).unwrap().convert(DType::Float16).unwrap();
    assert_eq!(&*t.view::<densewire::f16>().unwrap(), &[densewire::f16::from_bits(0x2e66), densewire::f16::INFINITY]);
}

#[tokio::test]
async fn compression_of_responses_and_request_bodies() {
    use densewire::{ContentEncoding, compress, decompress_bounded};
    let base = serve(app()).await;
    let http = reqwest::Client::new();
    // A body over the threshold: 64 x 16 float32 = 4 KiB.
    let e = Embeddings::from_tensor(Tensor::from_slice(64, 16, &vec![0.25f32; 1024]).unwrap());
    let raw = e.encode(Format::Raw, JsonOptions::default()).unwrap();
    let mut rb = http.post(format!("{base}/echo")).header("content-type", "application/octet-stream");
    for (k, v) in &raw.headers {
        rb = rb.header(*k, v);
    }
    // Request bodies: every coding of SPEC.md section 12 is inflated (limit 4096 bytes).
    let zlib = compress(ContentEncoding::Deflate, &raw.body);
    let bare = {
        use std::io::Write;
        let mut e = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(&raw.body).unwrap();
        e.finish().unwrap()
    };
    for (coding, body) in [
        ("gzip", compress(ContentEncoding::Gzip, &raw.body)),
        ("x-gzip", compress(ContentEncoding::Gzip, &raw.body)),
        ("deflate", zlib.clone()),
        ("deflate", bare),
        ("br", compress(ContentEncoding::Br, &raw.body)),
        ("zstd", compress(ContentEncoding::Zstd, &raw.body)),
        ("identity", raw.body.to_vec()),
        ("", raw.body.to_vec()),
    ] {
        let r = rb.try_clone().unwrap().header("content-encoding", coding).body(body).send().await.unwrap();
        assert_eq!(r.status(), 200, "{coding}");
        assert_eq!(r.text().await.unwrap(), "float32 4096 64x16", "{coding}");
    }
    // Bombs are 413, whatever the coding (deflate cannot pass about 1000:1: 2 MiB at its best level).
    let zeros = vec![0u8; 8 << 20];
    let best = |gzip: bool| {
        use std::io::Write;
        let best = flate2::Compression::best();
        if gzip {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), best);
            e.write_all(&zeros[..2 << 20]).unwrap();
            e.finish().unwrap()
        } else {
            let mut e = flate2::write::ZlibEncoder::new(Vec::new(), best);
            e.write_all(&zeros[..2 << 20]).unwrap();
            e.finish().unwrap()
        }
    };
    for (enc, bomb) in [
        (ContentEncoding::Zstd, compress(ContentEncoding::Zstd, &zeros)),
        (ContentEncoding::Br, compress(ContentEncoding::Br, &zeros)),
        (ContentEncoding::Gzip, best(true)),
        (ContentEncoding::Deflate, best(false)),
    ] {
        assert!(bomb.len() < 4096, "the compressed bomb itself is under the limit: {enc:?} {}", bomb.len());
        let r = rb.try_clone().unwrap().header("content-encoding", enc.name()).body(bomb).send().await.unwrap();
        let (status, v) = envelope(r).await;
        assert_eq!((status, v["error"]["code"].as_str()), (413, Some("payload_too_large")), "{enc:?}");
    }
    // Bytes after the stream, or a cut one: 400 malformed on Content-Encoding.
    for body in [[&zlib[..], b"trailing"].concat(), zlib[..zlib.len() - 4].to_vec()] {
        let r = rb.try_clone().unwrap().header("content-encoding", "deflate").body(body).send().await.unwrap();
        let (status, v) = envelope(r).await;
        assert_eq!(
            (status, v["error"]["code"].as_str(), v["error"]["param"].as_str()),
            (400, Some("malformed"), Some("Content-Encoding"))
        );
    }
    // Other codings, and more than one, are 415 on Content-Encoding.
    for coding in ["compress", "gzip, br", "x-deflate"] {
        let r = rb.try_clone().unwrap().header("content-encoding", coding).body(zlib.clone()).send().await.unwrap();
        let (status, v) = envelope(r).await;
        assert_eq!((status, v["error"]["param"].as_str()), (415, Some("Content-Encoding")), "{coding}");
    }
    // Responses: compressed by Accept-Encoding above the threshold, zstd preferred at equal q.
    let r = http.get(format!("{base}/vectors")).header("accept-encoding", "gzip, zstd").send().await.unwrap();
    assert_eq!(r.headers().get("content-encoding"), None, "a 3-vector body is under the threshold");
    let app2 = Router::new().route(
        "/big",
        axum::routing::get(|fmt: Negotiated| async move {
            fmt.respond(
                Embeddings::from_tensor(Tensor::from_slice(64, 16, &vec![0.25f32; 1024]).unwrap()),
                JsonOptions::default(),
            )
        }),
    );
    let base2 = serve(app2).await;
    for (ae, want) in [("gzip, zstd", "zstd"), ("gzip;q=1, zstd;q=0.5", "gzip"), ("br", "br")] {
        let r = http.get(format!("{base2}/big?format=raw")).header("accept-encoding", ae).send().await.unwrap();
        assert_eq!(r.headers()["content-encoding"], want, "{ae}");
        assert_eq!(r.headers()["vary"], "Accept, Accept-Encoding");
        let headers = r.headers().clone();
        let body = r.bytes().await.unwrap();
        let plain = match want {
            "br" => {
                let mut out = Vec::new();
                brotli::BrotliDecompress(&mut &body[..], &mut out).unwrap();
                out
            }
            w => decompress_bounded(ContentEncoding::from_name(w).unwrap(), &body, 1 << 20).unwrap(),
        };
        let back = Embeddings::decode(Format::Raw, &headers, plain.into(), false).unwrap();
        assert_eq!(back.tensor, Tensor::from_slice(64, 16, &vec![0.25f32; 1024]).unwrap());
    }
}

/// The ranges of quantization.id.basic (SPEC.md section 17.6), as a server publishes them.
const PUBLISHED: &str = r#"{"object":"quantization","id":"455fc59476466b04","model":"m","method":"minmax-per-dimension","calibration":{"name":"python-docs-v1","texts":1000,"sha256":"81929a2d3728bde37f0c0e1316befb814dae9cafa3050c6fb3a84c4fd112a6d4"},"dimensions":4,"lower":"AACAvwAAAL8AAAAAAACAvg==","upper":"AACAPwAAAD8AAIA/AABAPw=="}"#;

#[tokio::test]
async fn client_dequantizes_with_the_published_ranges_fetched_once() {
    use axum::extract::{Path, State};
    use axum::routing::get;
    let fetches = Arc::new(AtomicUsize::new(0));
    async fn embeddings(fmt: Negotiated, req: EmbeddingsRequest) -> Result<DenseResponse, densewire::ApiError> {
        let x = Tensor::from_slice(2, 4, &[0.0f32, 0.1, 2.0, -0.25, -1.0, 0.5, 0.5, 0.75])?;
        let ranges = densewire::Quantization::from_json(PUBLISHED.as_bytes())?.ranges;
        let mut e = if matches!(req.dtype, DType::Int8 | DType::Uint8) {
            let mut e = Embeddings::from_tensor(ranges.quantize(&x, req.dtype)?);
            e.quantization = Some(ranges.id());
            e
        } else {
            Embeddings::from_tensor(x)
        };
        e.model = Some("m".into()); // a server names its model (and Protobuf answers are then responses)
        let json = JsonOptions { encoding_format: req.encoding_format, byteorder: req.byteorder };
        Ok(fmt.respond(e, json))
    }
    async fn quantization(State(fetches): State<Arc<AtomicUsize>>, Path(id): Path<String>) -> Response {
        fetches.fetch_add(1, Ordering::SeqCst);
        if id == "455fc59476466b04" {
            ([("content-type", "application/json")], PUBLISHED).into_response()
        } else {
            densewire::ApiError(Error::new(ErrorKind::NotFound, "no such quantization").field("id")).into_response()
        }
    }
    let app = Router::new()
        .route("/v1/embeddings", post(embeddings))
        .route("/v1/quantization/{id}", get(quantization))
        .with_state(fetches.clone());
    let url = serve(app).await;
    let ranges = densewire::Quantization::from_json(PUBLISHED.as_bytes()).unwrap().ranges;
    let x = Tensor::from_slice(2, 4, &[0.0f32, 0.1, 2.0, -0.25, -1.0, 0.5, 0.5, 0.75]).unwrap();
    for format in Format::ALL {
        let client = Client::builder(&url).format(format).build().unwrap();
        for dtype in [DType::Int8, DType::Uint8] {
            let req = EmbeddingsRequest::new(["a", "b"]).dtype(dtype).encoding_format(EncodingFormat::Base64);
            let codes = client.embed(&req).await.unwrap();
            assert_eq!(codes.tensor.dtype(), dtype, "{format}");
            assert_eq!(codes.quantization.as_deref(), Some("455fc59476466b04"), "{format}: the id travels");
            let e = client.embed_dequantized(&req).await.unwrap();
            assert_eq!(e.tensor, ranges.dequantize(&ranges.quantize(&x, dtype).unwrap()).unwrap(), "{format}");
            assert_eq!(e.quantization.as_deref(), Some("455fc59476466b04"));
        }
        // float32 answers pass through
        let e = client.embed_dequantized(&EmbeddingsRequest::new(["a", "b"])).await.unwrap();
        assert_eq!((e.tensor, e.quantization), (x.clone(), None), "{format}");
    }
    // one fetch per client: the clones of a client share its cache, a new client fetches again
    assert_eq!(fetches.load(Ordering::SeqCst), Format::ALL.len());
    let client = Client::builder(&url).build().unwrap();
    let q = client.quantization("455fc59476466b04").await.unwrap();
    let again = client.clone().quantization("455fc59476466b04").await.unwrap();
    assert!(Arc::ptr_eq(&q, &again));
    assert_eq!(fetches.load(Ordering::SeqCst), Format::ALL.len() + 1);
    let e = client.quantization("0000000000000000").await.unwrap_err();
    assert_eq!((e.kind(), e.field_name()), (ErrorKind::NotFound, Some("id")));
    let e = client.quantization("../models").await.unwrap_err();
    assert_eq!((e.kind(), e.field_name()), (ErrorKind::InvalidField, Some("quantization")));
}
