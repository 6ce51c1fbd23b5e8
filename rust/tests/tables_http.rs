//! The tables client over real HTTP on loopback, against an in-process axum server that answers
//! like SPEC.md section 15.9 says: the golden bodies of tables.json chosen by `Accept` (q-values,
//! the server's order at equal q), the section 15.2 headers, `Vary`, a strong `ETag` per format and
//! content coding with 304 on `If-None-Match`, compressed bodies by `Accept-Encoding`, and errors
//! in the OpenAI envelope.

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::routing::get;
use densewire::{
    Bytes, ColumnData, ContentEncoding, Error, ErrorKind, Table, TableFetch, TableFormat, TableOptions, TablesClient,
    compress,
};
use serde_json::Value;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

fn golden(id: &str) -> Value {
    let mut dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    while !dir.join("testdata/golden/tables.json").exists() {
        assert!(dir.pop(), "testdata/golden not found");
    }
    let text = std::fs::read_to_string(dir.join("testdata/golden/tables.json")).unwrap();
    let v: Value = serde_json::from_str(&text).unwrap();
    v["cases"].as_array().unwrap().iter().find(|c| c["id"] == id).unwrap_or_else(|| panic!("no case {id}")).clone()
}

fn hex(h: &str) -> Vec<u8> {
    (0..h.len()).step_by(2).map(|i| u8::from_str_radix(&h[i..i + 2], 16).unwrap()).collect()
}

fn case_id(format: TableFormat, name: &str) -> String {
    match format {
        TableFormat::Protobuf => format!("table.protobuf.bss.{name}"),
        f => format!("table.{}.{name}", f.name()),
    }
}

fn golden_body(format: TableFormat, name: &str) -> (Vec<u8>, Value) {
    let c = golden(&case_id(format, name));
    let body = match c.get("encoded_hex").and_then(Value::as_str) {
        Some(h) => hex(h),
        None => c["encoded_text"].as_str().unwrap().as_bytes().to_vec(),
    };
    (body, c)
}

/// The all_types table, from the golden plain Protobuf body (checked by tests/tables_golden.rs).
fn all_types() -> Table {
    let c = golden("table.protobuf.plain.all_types");
    Table::decode(TableFormat::Protobuf, &[("", "")], Bytes::from(hex(c["encoded_hex"].as_str().unwrap()))).unwrap()
}

/// RFC 9110 negotiation over the seven table media types, ties in the server's order.
fn negotiate(accept: Option<&str>) -> Option<TableFormat> {
    let Some(accept) = accept else { return Some(TableFormat::Json) };
    let mut best: Option<(TableFormat, f32)> = None;
    for f in TableFormat::ALL {
        let mut q_for: Option<f32> = None;
        for part in accept.split(',') {
            let mut it = part.split(';');
            let mt = it.next().unwrap().trim();
            let q =
                it.filter_map(|p| p.trim().strip_prefix("q=")).next().map(|q| q.parse::<f32>().unwrap()).unwrap_or(1.0);
            if f.media_types().contains(&mt) || mt == "*/*" {
                q_for = Some(q_for.map_or(q, |x: f32| x.max(q)));
            }
        }
        if let Some(q) = q_for.filter(|&q| q > 0.0) {
            if best.is_none_or(|(_, bq)| q > bq) {
                best = Some((f, q));
            }
        }
    }
    best.map(|(f, _)| f)
}

fn envelope(status: StatusCode, e: Error) -> Response {
    let mut r = Response::new(Body::from(e.to_envelope_json()));
    *r.status_mut() = status;
    r.headers_mut().insert("content-type", "application/json".parse().unwrap());
    r
}

#[derive(Default)]
struct Seen {
    accept: Mutex<Vec<String>>,
    now: AtomicUsize,
    max: AtomicUsize,
}

/// GET /v1/tables/{name}: `all_types` and `points` from the golden files; a suffix `.zstd`, `.br`
/// or `.gzip` compresses the body with that coding when the client accepts it; `corrupt` answers
/// a truncated Protobuf body; `slow` waits (for the concurrency test); anything else is 404.
async fn table_route(State(seen): State<Arc<Seen>>, Path(name): Path<String>, headers: HeaderMap) -> Response {
    let h = |k: &str| headers.get(k).and_then(|v| v.to_str().ok()).map(str::to_owned);
    let accept = h("accept");
    seen.accept.lock().unwrap().push(accept.clone().unwrap_or_default());
    let now = seen.now.fetch_add(1, Ordering::SeqCst) + 1;
    seen.max.fetch_max(now, Ordering::SeqCst);
    let _guard = scopeguard(seen.clone());
    let (base, coding) = match name.rsplit_once('.') {
        Some((b, c)) => (b.to_string(), ContentEncoding::from_name(c)),
        None => (name.clone(), None),
    };
    let base = match base.strip_prefix("slow-") {
        Some(rest) => {
            tokio::time::sleep(Duration::from_millis(30)).await;
            rest.to_string()
        }
        None => base,
    };
    if !["all_types", "points", "corrupt"].contains(&base.as_str()) {
        return envelope(
            StatusCode::NOT_FOUND,
            Error::new(ErrorKind::NotFound, format!("no table {name:?}")).field("name"),
        );
    }
    let Some(format) = negotiate(accept.as_deref()) else {
        return envelope(StatusCode::NOT_ACCEPTABLE, Error::new(ErrorKind::NotAcceptable, "nothing acceptable"));
    };
    let (mut body, case) = golden_body(format, if base == "corrupt" { "all_types" } else { &base });
    if base == "corrupt" {
        body.truncate(body.len() - 3);
    }
    let accepts = h("accept-encoding").unwrap_or_default();
    let coding = coding.filter(|c| accepts.contains(c.name())).unwrap_or(ContentEncoding::Identity);
    let etag = format!("\"v1-{}-{}\"", format.name(), coding.name());
    let mut r = Response::new(Body::empty());
    let hm = r.headers_mut();
    for (k, v) in case["headers"].as_object().unwrap() {
        hm.insert(k.parse::<axum::http::HeaderName>().unwrap(), v.as_str().unwrap().parse().unwrap());
    }
    hm.insert("densewire-version", "1".parse().unwrap());
    hm.insert("vary", "Accept, Accept-Encoding".parse().unwrap());
    hm.insert("etag", etag.parse().unwrap());
    hm.insert("last-modified", "Tue, 03 Jun 2025 10:00:00 GMT".parse().unwrap());
    hm.insert("cache-control", "max-age=60".parse().unwrap());
    let content_type =
        if format == TableFormat::Csv { "text/csv; charset=utf-8; header=present" } else { format.media_type() };
    hm.insert("content-type", content_type.parse().unwrap());
    if coding != ContentEncoding::Identity {
        // Also on a 304, as real servers do: the header describes the representation.
        hm.insert("content-encoding", coding.name().parse().unwrap());
    }
    if h("if-none-match").is_some_and(|t| t == etag || t == "*") {
        *r.status_mut() = StatusCode::NOT_MODIFIED;
        return r;
    }
    if coding != ContentEncoding::Identity {
        body = compress(coding, &body);
    }
    *r.body_mut() = Body::from(body);
    r
}

struct Guard(Arc<Seen>);
impl Drop for Guard {
    fn drop(&mut self) {
        self.0.now.fetch_sub(1, Ordering::SeqCst);
    }
}
fn scopeguard(s: Arc<Seen>) -> Guard {
    Guard(s)
}

async fn list_route() -> Response {
    let body = r#"{"object":"list","data":[{"object":"table","name":"points","rows":3,"columns":[{"name":"uuid","type":"uuid"},{"name":"status","type":"int32"},{"name":"longitude","type":"float64"},{"name":"latitude","type":"float64"}],"version":"abc","refreshed_at":"2025-06-03T10:00:00Z","formats":["json","protobuf"]},{"object":"table","name":"v","rows":0,"columns":[{"name":"e","type":"float32[3]"}],"version":"x","refreshed_at":"2025-06-03T10:00:00Z","formats":[]}]}"#;
    let mut r = Response::new(Body::from(body));
    r.headers_mut().insert("content-type", "application/json".parse().unwrap());
    r
}

async fn serve() -> (String, Arc<Seen>) {
    let seen = Arc::new(Seen::default());
    let app = Router::new()
        .route("/v1/tables", get(list_route))
        .route("/v1/tables/{name}", get(table_route))
        .with_state(seen.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}"), seen)
}

fn fetched(f: TableFetch) -> (Table, TableFormat, Option<String>) {
    match f {
        TableFetch::Table { table, format, etag, last_modified } => {
            assert!(last_modified.is_some(), "Last-Modified is passed on");
            (table, format, etag)
        }
        TableFetch::NotModified { .. } => panic!("a 304 where a table was expected"),
    }
}

#[tokio::test]
async fn every_format_decodes_to_the_same_table() {
    let (base, seen) = serve().await;
    let client = TablesClient::new(&base).unwrap();
    let want = all_types();
    for format in TableFormat::ALL {
        let opts = TableOptions { format: Some(format), ..Default::default() };
        let (got, chosen, _) =
            fetched(client.table("all_types", &opts).await.unwrap_or_else(|e| panic!("{format}: {e}")));
        assert_eq!(chosen, format);
        assert_eq!(got, want, "{format}");
    }
    // Default negotiation: Protobuf first, by q-values.
    let (got, chosen, _) = fetched(client.table("all_types", &TableOptions::default()).await.unwrap());
    assert_eq!((chosen, &got), (TableFormat::Protobuf, &want));
    let accept = seen.accept.lock().unwrap().last().cloned().unwrap();
    assert!(accept.starts_with("application/protobuf, "), "{accept}");
    assert!(accept.contains("application/json;q=0.1"), "{accept}");
}

#[tokio::test]
async fn etag_revalidation_answers_not_modified() {
    let (base, _) = serve().await;
    let client = TablesClient::new(format!("{base}/v1/")).unwrap();
    let (t, _, etag) = fetched(client.table("points", &TableOptions::default()).await.unwrap());
    assert_eq!((t.name.as_str(), t.rows), ("points", 3));
    let etag = etag.expect("an ETag");
    let revalidate = TableOptions { if_none_match: Some(etag.clone()), ..Default::default() };
    assert_eq!(
        client.table("points", &revalidate).await.unwrap(),
        TableFetch::NotModified { etag: Some(etag.clone()) }
    );
    // The ETag differs per format: asking for CSV with the Protobuf tag gets the table.
    let csv = TableOptions { format: Some(TableFormat::Csv), if_none_match: Some(etag) };
    let (t, f, csv_tag) = fetched(client.table("points", &csv).await.unwrap());
    assert_eq!((f, t.rows), (TableFormat::Csv, 3));
    assert_ne!(csv_tag.as_deref(), Some("\"v1-protobuf-identity\""));
    let star = TableOptions { if_none_match: Some("*".into()), ..Default::default() };
    assert!(matches!(client.table("points", &star).await.unwrap(), TableFetch::NotModified { .. }));
    // A 304 of a compressed representation carries Content-Encoding and no body.
    let (_, _, zstd_tag) = fetched(client.table("points.zstd", &TableOptions::default()).await.unwrap());
    assert_eq!(zstd_tag.as_deref(), Some("\"v1-protobuf-zstd\""));
    let revalidate = TableOptions { if_none_match: zstd_tag, ..Default::default() };
    assert!(matches!(client.table("points.zstd", &revalidate).await.unwrap(), TableFetch::NotModified { .. }));
}

#[tokio::test]
async fn compressed_responses_are_inflated() {
    let (base, _) = serve().await;
    let client = TablesClient::new(&base).unwrap();
    let want = all_types();
    for coding in ["zstd", "br", "gzip"] {
        for format in [TableFormat::Protobuf, TableFormat::Csv, TableFormat::Arrow] {
            let opts = TableOptions { format: Some(format), ..Default::default() };
            let (got, _, etag) = fetched(client.table(&format!("all_types.{coding}"), &opts).await.unwrap());
            assert_eq!(got, want, "{coding} {format}");
            assert_eq!(etag.unwrap(), format!("\"v1-{}-{coding}\"", format.name()), "the body really was {coding}");
        }
    }
    // A body that inflates past the limit is refused while inflating.
    let small = TablesClient::new(&base).unwrap().max_body(100);
    let opts = TableOptions { format: Some(TableFormat::Arrow), ..Default::default() };
    for coding in ["zstd", "br", "gzip"] {
        let e = small.table(&format!("all_types.{coding}"), &opts).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::PayloadTooLarge, "{coding}");
    }
}

#[tokio::test]
async fn errors_are_typed() {
    let (base, _) = serve().await;
    let client = TablesClient::new(&base).unwrap();
    let e = client.table("nope", &TableOptions::default()).await.unwrap_err();
    assert_eq!((e.kind(), e.field_name(), e.http_status()), (ErrorKind::NotFound, Some("name"), 404));
    let e = client.table("corrupt", &TableOptions::default()).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Truncated, "{e}");
    let dead = TablesClient::new("http://127.0.0.1:9").unwrap().timeout(Duration::from_secs(5)).unwrap();
    assert_eq!(dead.list_tables().await.unwrap_err().kind(), ErrorKind::Unavailable);
}

#[tokio::test]
async fn list_tables_parses_the_catalogue() {
    let (base, _) = serve().await;
    let tables = TablesClient::new(&base).unwrap().list_tables().await.unwrap();
    assert_eq!(tables.len(), 2);
    assert_eq!((tables[0].name.as_str(), tables[0].rows, tables[0].columns.len()), ("points", 3, 4));
    assert_eq!(tables[0].formats, ["json", "protobuf"]);
    assert_eq!(tables[1].columns[0].ty, densewire::ColumnType::Float32Vector(3));
}

#[tokio::test]
async fn many_tables_with_bounded_concurrency_in_order() {
    let (base, seen) = serve().await;
    let client = TablesClient::new(&base).unwrap().concurrency(3);
    let names: Vec<String> =
        (0..12).map(|i| if i % 2 == 0 { "slow-points" } else { "slow-all_types" }.to_string()).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let got = client.tables(&refs, &TableOptions::default()).await.unwrap();
    assert_eq!(got.len(), 12);
    for (i, t) in got.iter().enumerate() {
        assert_eq!(t.name, if i % 2 == 0 { "points" } else { "every type" }, "order is kept");
    }
    let max = seen.max.load(Ordering::SeqCst);
    assert!(max <= 3, "at most 3 requests in flight, saw {max}");
    assert!(max >= 2, "requests overlapped (saw {max} at most)");
    // The points columns are typed.
    let ColumnData::Float64(lon) = &got[0].column("longitude").unwrap().data else { panic!("float64") };
    assert_eq!(lon.len(), 3);
}
