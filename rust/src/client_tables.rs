//! An async client for the tables API (SPEC.md section 15.9, feature `reqwest`):
//! `GET /v1/tables` and `GET /v1/tables/{name}`, negotiating Protobuf by default (then the other
//! binary formats this build decodes, then JSON, by q-values), decompressing zstd/br/gzip
//! responses (with the `compression` feature), revalidating with `ETag` / `If-None-Match`, and
//! decoding the body without copying fixed-width columns out of it where the format allows.

use crate::error::{Error, ErrorKind, Result, err};
use crate::retry::{Reply, RetryPolicy, transport};
use crate::table::{ColumnSpec, ColumnType, HEADER_ROWS, Table, TableFormat, percent_encode};
use crate::tensor::realigned;
use futures_util::stream::{self, StreamExt};
use std::time::Duration;

/// A client of the tables API of a densewire server. Retries as [`Client`](crate::Client) does
/// (429, 503, connections that fail before an answer; [`TablesClient::max_retries`]).
///
/// ```no_run
/// # async fn demo() -> densewire::Result<()> {
/// use densewire::{ColumnData, TableFetch, TableOptions, TablesClient};
/// let client = TablesClient::new("http://127.0.0.1:8000")?;
/// for info in client.list_tables().await? {
///     println!("{} ({} rows)", info.name, info.rows);
/// }
/// let TableFetch::Table { table, etag, .. } = client.table("points", &TableOptions::default()).await? else {
///     unreachable!("no If-None-Match was sent")
/// };
/// if let ColumnData::Float64(lon) = &table.column("longitude").unwrap().data {
///     let lon: &[f64] = &lon.as_slice(); // a view into the response body where aligned
/// }
/// // Later: only a 304 if nothing changed.
/// let again = client.table("points", &TableOptions { if_none_match: etag, ..Default::default() }).await?;
/// assert!(matches!(again, TableFetch::NotModified { .. }));
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct TablesClient {
    http: reqwest::Client,
    base: String,
    api_key: Option<String>,
    concurrency: usize,
    max_body: usize,
    retry: RetryPolicy,
}

/// How to fetch one table.
#[derive(Debug, Clone, Default)]
pub struct TableOptions {
    /// The format to ask for; `None` negotiates Protobuf first (see [`TablesClient::accept`]).
    pub format: Option<TableFormat>,
    /// An `ETag` from an earlier fetch: a server that still has that version answers 304, which
    /// is [`TableFetch::NotModified`].
    pub if_none_match: Option<String>,
}

/// The answer to [`TablesClient::table`].
#[derive(Debug, Clone, PartialEq)]
pub enum TableFetch {
    /// The table, with the format it came in and its validators.
    Table {
        /// The decoded table.
        table: Table,
        /// The format the server chose.
        format: TableFormat,
        /// The `ETag` (pass it as [`TableOptions::if_none_match`] to revalidate).
        etag: Option<String>,
        /// The `Last-Modified` header.
        last_modified: Option<String>,
    },
    /// 304: the version named by `If-None-Match` is current.
    NotModified {
        /// The `ETag` the server sent with the 304, if any.
        etag: Option<String>,
    },
}

impl TableFetch {
    /// The table, `None` for [`TableFetch::NotModified`].
    pub fn into_table(self) -> Option<Table> {
        match self {
            TableFetch::Table { table, .. } => Some(table),
            TableFetch::NotModified { .. } => None,
        }
    }
}

/// One entry of `GET /v1/tables`.
#[derive(Debug, Clone, PartialEq)]
pub struct TableInfo {
    /// The table name.
    pub name: String,
    /// `n`.
    pub rows: usize,
    /// The columns' names and types.
    pub columns: Vec<ColumnSpec>,
    /// An opaque string that changes when the data does.
    pub version: String,
    /// When the table was last refreshed (RFC 3339).
    pub refreshed_at: String,
    /// The `format` parameter values the server serves for it.
    pub formats: Vec<String>,
}

fn header(h: &http::HeaderMap, name: http::header::HeaderName) -> Option<String> {
    h.get(name).and_then(|v| v.to_str().ok()).map(str::to_owned)
}

impl TablesClient {
    /// A client for a server at `base_url` (`http://127.0.0.1:8000`, or ending in `/v1`).
    pub fn new(base_url: impl AsRef<str>) -> Result<TablesClient> {
        let base = base_url.as_ref().trim_end_matches('/');
        let base = if base.ends_with("/v1") { base.to_string() } else { format!("{base}/v1") };
        let http = reqwest::Client::builder().build().map_err(transport)?;
        Ok(TablesClient { http, base, api_key: None, concurrency: 4, max_body: 1 << 30, retry: RetryPolicy::default() })
    }

    /// Sends `Authorization: Bearer KEY`.
    pub fn api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(key.into());
        self
    }

    /// Uses this reqwest client (TLS, proxies, timeouts of your own).
    pub fn http_client(mut self, c: reqwest::Client) -> Self {
        self.http = c;
        self
    }

    /// A timeout for each request (replaces the reqwest client with a new one).
    pub fn timeout(mut self, t: Duration) -> Result<Self> {
        self.http = reqwest::Client::builder().timeout(t).build().map_err(transport)?;
        Ok(self)
    }

    /// Tables fetched at once by [`TablesClient::tables`] (default 4).
    pub fn concurrency(mut self, n: usize) -> Self {
        self.concurrency = n.max(1);
        self
    }

    /// Retries of a request answered 429 or 503, or whose connection failed before an answer
    /// (default 2; 0 never retries).
    pub fn max_retries(mut self, n: u32) -> Self {
        self.retry.set_max_retries(n);
        self
    }

    /// The backoff between retries (default 0.5 s and 8 s), as
    /// [`ClientBuilder::retry_backoff`](crate::ClientBuilder::retry_backoff).
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

    /// The largest decompressed body accepted (default 1 GiB): a compressed response inflating
    /// past it fails with `payload_too_large`, checked while inflating.
    pub fn max_body(mut self, bytes: usize) -> Self {
        self.max_body = bytes;
        self
    }

    /// The `Accept` header sent for `format` (or, for `None`, the default negotiation: Protobuf,
    /// then Arrow and MessagePack, then JSON columns, CSV and JSON objects, only the formats this
    /// build decodes).
    ///
    /// ```
    /// # #[cfg(all(feature = "protobuf", feature = "arrow", feature = "msgpack"))] {
    /// use densewire::{TablesClient, TableFormat};
    /// assert_eq!(
    ///     TablesClient::accept(None),
    ///     "application/protobuf, application/vnd.apache.arrow.stream;q=0.9, application/vnd.msgpack;q=0.8, \
    ///      application/vnd.densewire.columns+json;q=0.5, text/csv;q=0.3, application/json;q=0.1"
    /// );
    /// assert_eq!(TablesClient::accept(Some(TableFormat::Csv)), "text/csv, application/json;q=0.1");
    /// # }
    /// ```
    pub fn accept(format: Option<TableFormat>) -> String {
        match format {
            Some(TableFormat::Json) => "application/json".to_string(),
            Some(f) => format!("{}, application/json;q=0.1", f.media_type()),
            None => {
                let prefs = [
                    (TableFormat::Protobuf, "1"),
                    (TableFormat::Arrow, "0.9"),
                    (TableFormat::Msgpack, "0.8"),
                    (TableFormat::JsonColumns, "0.5"),
                    (TableFormat::Csv, "0.3"),
                    (TableFormat::Json, "0.1"),
                ];
                prefs
                    .iter()
                    .filter(|(f, _)| f.is_supported())
                    .map(
                        |(f, q)| {
                            if *q == "1" { f.media_type().to_string() } else { format!("{};q={q}", f.media_type()) }
                        },
                    )
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        }
    }

    fn get(&self, url: &str) -> reqwest::RequestBuilder {
        let mut rb = self.http.get(url);
        if let Some(k) = &self.api_key {
            rb = rb.bearer_auth(k);
        }
        let accept_encoding = if cfg!(feature = "compression") { "zstd, br, gzip" } else { "identity" };
        rb.header(http::header::ACCEPT_ENCODING, accept_encoding)
    }

    /// Sends the request `make` builds (again for each retry); returns the reply with its body
    /// decompressed and 8-byte-aligned.
    async fn send(&self, make: impl Fn() -> reqwest::RequestBuilder) -> Result<Reply> {
        let mut reply = self.retry.send(make).await?;
        // A 304 (or any empty body) keeps the representation's Content-Encoding but has no body.
        if reply.status != 304 && !reply.body.is_empty() {
            reply.body = self.decompress(&reply.headers, std::mem::take(&mut reply.body))?;
        }
        reply.body = realigned(reply.body);
        Ok(reply)
    }

    fn decompress(&self, headers: &http::HeaderMap, body: bytes::Bytes) -> Result<bytes::Bytes> {
        let coding = header(headers, http::header::CONTENT_ENCODING).unwrap_or_default();
        let coding = coding.trim();
        if coding.is_empty() || coding.eq_ignore_ascii_case("identity") {
            return Ok(body);
        }
        let unsupported = || {
            err(
                ErrorKind::UnsupportedMediaType,
                format!("the response has Content-Encoding {coding:?}, which this build cannot decode"),
            )
            .field("Content-Encoding")
        };
        #[cfg(feature = "compression")]
        {
            use crate::compression::{ContentEncoding, decompress_bounded};
            match ContentEncoding::from_name(coding) {
                Some(enc) => decompress_bounded(enc, &body, self.max_body).map(bytes::Bytes::from),
                None => Err(unsupported()),
            }
        }
        #[cfg(not(feature = "compression"))]
        {
            let _ = body;
            Err(unsupported())
        }
    }

    /// `GET /v1/tables`: the tables the server has.
    pub async fn list_tables(&self) -> Result<Vec<TableInfo>> {
        let url = format!("{}/tables", self.base);
        let reply = self.send(|| self.get(&url).header(http::header::ACCEPT, "application/json")).await?;
        if !(200..300).contains(&reply.status) {
            return Err(reply.error());
        }
        parse_list(&reply.body)
    }

    /// `GET /v1/tables/{name}`: one table, decoded by its `Content-Type`. A 304 (the
    /// `If-None-Match` version is current) is [`TableFetch::NotModified`]; an error status becomes
    /// the [`Error`] of its OpenAI envelope (`not_found` on `name` for an unknown table).
    pub async fn table(&self, name: &str, options: &TableOptions) -> Result<TableFetch> {
        if let Some(f) = options.format.filter(|f| !f.is_supported()) {
            return Err(err(ErrorKind::UnsupportedMediaType, format!("{} support is not compiled in", f.media_type())));
        }
        let url = format!("{}/tables/{}", self.base, percent_encode(name));
        let accept = TablesClient::accept(options.format);
        let reply = self
            .send(|| {
                let rb = self.get(&url).header(http::header::ACCEPT, accept.as_str());
                match &options.if_none_match {
                    Some(tag) => rb.header(http::header::IF_NONE_MATCH, tag.as_str()),
                    None => rb,
                }
            })
            .await?;
        let etag = header(&reply.headers, http::header::ETAG);
        if reply.status == 304 {
            return Ok(TableFetch::NotModified { etag });
        }
        if !(200..300).contains(&reply.status) {
            return Err(reply.error());
        }
        let Reply { headers, body, .. } = reply;
        let ct = header(&headers, http::header::CONTENT_TYPE).unwrap_or_else(|| "application/json".into());
        let format = TableFormat::from_content_type(&ct).ok_or_else(|| {
            err(ErrorKind::UnsupportedMediaType, format!("the server answered with Content-Type {ct:?}"))
                .field("Content-Type")
        })?;
        let table = Table::decode(format, &headers, body)?;
        if let Some(rows) = header(&headers, http::header::HeaderName::from_static("densewire-rows")) {
            if rows.trim().parse::<usize>().ok() != Some(table.rows) {
                return Err(err(
                    ErrorKind::ShapeMismatch,
                    format!("the body has {} rows, {HEADER_ROWS} says {rows}", table.rows),
                )
                .field(HEADER_ROWS));
            }
        }
        let last_modified = header(&headers, http::header::LAST_MODIFIED);
        Ok(TableFetch::Table { table, format, etag, last_modified })
    }

    /// Fetches several tables, at most [`concurrency`](TablesClient::concurrency) at once, in the
    /// order of `names`. The first error ends the job.
    pub async fn tables(&self, names: &[&str], options: &TableOptions) -> Result<Vec<Table>> {
        let mut s = std::pin::pin!(
            stream::iter(names.iter().copied())
                .map(|n| async move {
                    let fetched = self.table(n, &TableOptions { if_none_match: None, ..options.clone() }).await?;
                    Ok::<_, Error>(fetched.into_table().expect("no If-None-Match was sent"))
                })
                .buffered(self.concurrency)
        );
        let mut out = Vec::with_capacity(names.len());
        while let Some(t) = s.next().await {
            out.push(t?);
        }
        Ok(out)
    }
}

fn parse_list(body: &[u8]) -> Result<Vec<TableInfo>> {
    let v: serde_json::Value = serde_json::from_slice(body).map_err(|e| crate::table::json::json_error(body, e))?;
    let bad = |f: String, m: &str| err(ErrorKind::InvalidField, m.to_string()).field(f);
    let data = v
        .get("data")
        .and_then(|d| d.as_array())
        .ok_or_else(|| bad("data".into(), "data is missing or not an array"))?;
    let mut out = Vec::with_capacity(data.len());
    for (i, t) in data.iter().enumerate() {
        let s = |k: &str| t.get(k).and_then(|x| x.as_str()).map(str::to_owned);
        let name = s("name").ok_or_else(|| bad(format!("data[{i}].name"), "name is missing"))?;
        let rows = t
            .get("rows")
            .and_then(|x| x.as_u64())
            .and_then(|r| usize::try_from(r).ok())
            .ok_or_else(|| bad(format!("data[{i}].rows"), "rows is missing or not an integer"))?;
        let mut columns = Vec::new();
        for (j, c) in t.get("columns").and_then(|c| c.as_array()).into_iter().flatten().enumerate() {
            let f = format!("data[{i}].columns[{j}]");
            let cname =
                c.get("name").and_then(|x| x.as_str()).ok_or_else(|| bad(f.clone(), "a column without a name"))?;
            let ty = c.get("type").and_then(|x| x.as_str()).ok_or_else(|| bad(f.clone(), "a column without a type"))?;
            columns.push(ColumnSpec::new(cname, ColumnType::from_name(ty).map_err(|e| e.field(f))?));
        }
        let formats = t
            .get("formats")
            .and_then(|x| x.as_array())
            .map(|a| a.iter().filter_map(|x| x.as_str().map(str::to_owned)).collect())
            .unwrap_or_default();
        out.push(TableInfo {
            name,
            rows,
            columns,
            version: s("version").unwrap_or_default(),
            refreshed_at: s("refreshed_at").unwrap_or_default(),
            formats,
        });
    }
    Ok(out)
}
