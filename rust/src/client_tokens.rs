//! Per-token and sparse output through the client (SPEC.md 6.4): TEI's `POST /embed_all` and
//! `POST /embed_sparse`, answered as densewire's ragged or sparse tensor in the client's format
//! (section 20), or in TEI's own JSON (`[[[f32]]]`, `[[{"index", "value"}]]`).

use crate::client::Client;
use crate::dtype::DType;
use crate::error::{ErrorKind, Result, err};
use crate::media::Format;
use crate::ragged::{Batch, RaggedEmbeddings, RaggedTensor, SparseEmbeddings, SparseTensor};
use crate::tensor::{Tensor, aligned_copy, realigned};

impl Client {
    /// The per-token embeddings of each text (the model's last hidden state of every token,
    /// special tokens included), one `(tokens, hidden)` matrix per text over one buffer: TEI's
    /// `POST /embed_all`, asked for in the client's format (a ragged raw body by default, read
    /// without copying), or TEI's `[[[f32]]]` JSON when that is what the server answers.
    /// `truncate`: cut texts longer than the model's maximum (`None`: the server's default).
    ///
    /// ```no_run
    /// # async fn demo() -> densewire::Result<()> {
    /// let client = densewire::Client::builder("http://127.0.0.1:8000").build()?;
    /// let tokens = client.embed_tokens(&["hello world"], None).await?;
    /// let first = tokens.tensor.matrix(0); // (tokens, 384) for MiniLM, a view of the body
    /// # Ok(()) }
    /// ```
    pub async fn embed_tokens<S: AsRef<str>>(&self, texts: &[S], truncate: Option<bool>) -> Result<RaggedEmbeddings> {
        let (headers, body, format) = self.post_root("embed_all", &request(texts, truncate)).await?;
        match format {
            Format::Json => tei_json(&body),
            format => RaggedEmbeddings::decode(format, &headers, body, true),
        }
    }

    /// The sparse (SPLADE) vector of each text: TEI's `POST /embed_sparse`, per text its non-zero
    /// vocabulary weights, as a [`SparseTensor`](crate::SparseTensor) whose indices and values are one
    /// buffer each (`range(i)` is text `i`'s), asked for in the client's format (a sparse raw body by
    /// default, read without copying), or TEI's `[[{"index", "value"}]]` JSON when that is what the
    /// server answers (it has no vocabulary size: [`SparseOptions::vocab_size`], else one past the
    /// largest index). The request's options are TEI's (`truncate`, `truncation_direction`,
    /// `prompt_name`) and densewire serve's `max_active_dims` ([`SparseOptions`]).
    ///
    /// ```no_run
    /// # async fn demo() -> densewire::Result<()> {
    /// use densewire::{SparseOptions, TruncationDirection};
    /// let client = densewire::Client::builder("http://127.0.0.1:8000").build()?;
    /// let sparse = client.embed_sparse(&["hello world"], &SparseOptions::default()).await?;
    /// let first = sparse.tensor.range(0); // text 0's entries in indices() and values()
    /// let options = SparseOptions {
    ///     truncate: Some(true),
    ///     truncation_direction: Some(TruncationDirection::Left),
    ///     max_active_dims: Some(64),
    ///     ..Default::default()
    /// };
    /// let top = client.embed_sparse(&["a long document"], &options).await?; // its 64 largest weights, its last tokens
    /// # Ok(()) }
    /// ```
    pub async fn embed_sparse<S: AsRef<str>>(&self, texts: &[S], options: &SparseOptions) -> Result<SparseEmbeddings> {
        let mut req = request(texts, options.truncate);
        if let Some(d) = options.truncation_direction {
            req["truncation_direction"] = d.as_str().into();
        }
        if let Some(p) = &options.prompt_name {
            req["prompt_name"] = p.as_str().into();
        }
        if let Some(k) = options.max_active_dims {
            if k == 0 {
                return Err(err(ErrorKind::InvalidField, "must be a positive integer, not 0").field("max_active_dims"));
            }
            req["max_active_dims"] = k.into();
        }
        if options.vocab_size == Some(0) {
            return Err(err(ErrorKind::InvalidField, "must be a positive integer, not 0").field("vocab_size"));
        }
        let (headers, body, format) = self.post_root("embed_sparse", &req).await?;
        let sparse = match format {
            Format::Json => tei_sparse_json(&body, options.vocab_size)?,
            format => SparseEmbeddings::decode(format, &headers, body, true)?,
        };
        if sparse.tensor.len() != texts.len() {
            return Err(err(
                ErrorKind::ShapeMismatch,
                format!("the server returned {} vectors for {} inputs", sparse.tensor.len(), texts.len()),
            )
            .field("data"));
        }
        Ok(sparse)
    }

    /// TEI's request `req` POSTed to `route` at the server's root with the client's `Accept` and
    /// retries: a 2xx answer's headers, (8-aligned) body and format.
    async fn post_root(&self, route: &str, req: &serde_json::Value) -> Result<(http::HeaderMap, bytes::Bytes, Format)> {
        let body = bytes::Bytes::from(req.to_string());
        let url = format!("{}/{route}", self.v1.trim_end_matches("/v1"));
        let reply = self
            .retry
            .send(|| {
                self.authorized(
                    self.http
                        .post(&url)
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
        let body = realigned(reply.body);
        let ct = headers.get(http::header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("application/json");
        match Format::from_content_type(ct) {
            Some(format) => Ok((headers, body, format)),
            None => Err(err(ErrorKind::UnsupportedMediaType, format!("the server answered with Content-Type {ct:?}"))
                .field("Content-Type")),
        }
    }
}

/// TEI's `truncation_direction`: which end of a text over the model's limit is kept when it is cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TruncationDirection {
    /// Keep the first tokens (TEI's default).
    #[default]
    Right,
    /// Keep the last tokens.
    Left,
}

impl TruncationDirection {
    /// TEI's spelling on the wire: `"Right"` or `"Left"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Right => "Right",
            Self::Left => "Left",
        }
    }
}

/// The options of [`Client::embed_sparse`]: TEI's `/embed_sparse` request fields, densewire serve's
/// `max_active_dims`, and the vocabulary size of a TEI JSON answer. `None` sends nothing (the
/// server's default).
///
/// ```
/// let options = densewire::SparseOptions { max_active_dims: Some(64), ..Default::default() };
/// assert_eq!((options.truncate, options.max_active_dims), (None, Some(64)));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SparseOptions {
    /// `true` cuts texts longer than the model's maximum, `false` refuses them (the server's 413);
    /// `None`: the server's default (`densewire serve --auto-truncate`).
    pub truncate: Option<bool>,
    /// Which end of a cut text is kept (TEI's `truncation_direction`; `None`: Right).
    pub truncation_direction: Option<TruncationDirection>,
    /// A prompt of the model's configuration put before each text (TEI's `prompt_name`); a server
    /// whose model defines none refuses it (422, field `prompt_name`).
    pub prompt_name: Option<String>,
    /// Keep each vector's `k` largest weights (sentence-transformers' `max_active_dims`; `None`: all).
    pub max_active_dims: Option<u32>,
    /// The vocabulary size given to a TEI JSON answer, which states none (`None`: one past the
    /// largest index); densewire's binary answers carry their own.
    pub vocab_size: Option<u64>,
}

/// TEI's request body: `inputs` and, when given, `truncate`.
fn request<S: AsRef<str>>(texts: &[S], truncate: Option<bool>) -> serde_json::Value {
    let inputs: Vec<&str> = texts.iter().map(AsRef::as_ref).collect();
    let mut req = serde_json::json!({ "inputs": inputs });
    if let Some(t) = truncate {
        req["truncate"] = t.into();
    }
    req
}

/// One entry of TEI's `/embed_sparse` answer.
#[derive(serde::Deserialize)]
struct TeiSparseEntry {
    index: serde_json::Number,
    value: f32,
}

/// TEI's `/embed_sparse` answer: `[[{"index", "value"}]]`, one array per input; the vocabulary is
/// `vocab`, else one past the largest index (the JSON has no size).
fn tei_sparse_json(body: &[u8], vocab: Option<u64>) -> Result<SparseEmbeddings> {
    let vectors: Vec<Vec<TeiSparseEntry>> =
        serde_json::from_slice(body).map_err(|e| crate::json::json_error(body, &e))?;
    let mut offsets = vec![0u32];
    let mut indices = Vec::new();
    let mut values = Vec::new();
    for (i, v) in vectors.iter().enumerate() {
        for (j, e) in v.iter().enumerate() {
            let index = e.index.as_u64().and_then(|x| u32::try_from(x).ok()).ok_or_else(|| {
                err(ErrorKind::InvalidField, format!("index {} is not an integer from 0 to 2^32 - 1", e.index))
                    .field(format!("[{i}][{j}].index"))
            })?;
            indices.push(index);
            values.push(e.value);
        }
        offsets.push(
            u32::try_from(indices.len())
                .map_err(|_| err(ErrorKind::InvalidField, "too many entries").field("offsets"))?,
        );
    }
    let top = indices.iter().max().map_or(0, |&m| u64::from(m) + 1);
    let vocab = match vocab {
        Some(v) if v < top => {
            return Err(err(
                ErrorKind::InvalidField,
                format!("index {} of the answer is past the vocabulary size {v} asked for", top - 1),
            )
            .field("vocab_size"));
        }
        Some(v) => v,
        None => top.max(1),
    };
    let k = values.len();
    let tensor = SparseTensor::from_parts(vocab, offsets, &indices, Tensor::from_vec(1, k, values)?)?;
    Ok(Batch::from_tensor(tensor))
}

/// TEI's `/embed_all` answer: `[[[f32]]]`, one array of token rows per input, every row `d` numbers.
fn tei_json(body: &[u8]) -> Result<RaggedEmbeddings> {
    let matrices: Vec<Vec<Vec<f32>>> = serde_json::from_slice(body).map_err(|e| crate::json::json_error(body, &e))?;
    let d = matrices.iter().flatten().next().map_or(0, Vec::len);
    let mut offsets = vec![0u32];
    let mut rows: Vec<u8> = Vec::new();
    for (i, m) in matrices.iter().enumerate() {
        for (r, row) in m.iter().enumerate() {
            if row.len() != d {
                return Err(err(
                    ErrorKind::ShapeMismatch,
                    format!("row {r} of input {i} has {} numbers, not {d}", row.len()),
                )
                .field(format!("[{i}][{r}]")));
            }
            rows.extend(row.iter().flat_map(|x| x.to_le_bytes()));
        }
        let total = *offsets.last().unwrap() as usize + m.len();
        offsets
            .push(u32::try_from(total).map_err(|_| err(ErrorKind::InvalidField, "too many tokens").field("offsets"))?);
    }
    let n = *offsets.last().unwrap() as usize;
    let tensor = RaggedTensor::new(offsets, Tensor::new(DType::Float32, n, d, aligned_copy(&rows))?)?;
    Ok(Batch::from_tensor(tensor))
}

#[cfg(test)]
mod tests {
    use super::tei_sparse_json;
    use crate::error::ErrorKind;

    #[test]
    fn tei_sparse_json_reads_one_indices_and_one_values_buffer() {
        let s = tei_sparse_json(br#"[[{"index":1,"value":0.5},{"index":7,"value":2}],[]]"#, None).unwrap().tensor;
        assert_eq!((s.offsets(), &*s.indices(), s.vocabulary_size()), (&[0u32, 2, 2][..], &[1u32, 7][..], 8));
        assert_eq!(s.values().to_f32_vec().unwrap(), vec![0.5, 2.0]);
        assert_eq!(tei_sparse_json(b"[]", None).unwrap().tensor.vocabulary_size(), 1);
    }

    #[test]
    fn tei_sparse_json_takes_the_vocabulary_size_asked_for() {
        let body = br#"[[{"index":1,"value":0.5},{"index":7,"value":2}]]"#;
        assert_eq!(tei_sparse_json(body, Some(30522)).unwrap().tensor.vocabulary_size(), 30522);
        assert_eq!(tei_sparse_json(body, Some(8)).unwrap().tensor.vocabulary_size(), 8);
        let e = tei_sparse_json(body, Some(7)).unwrap_err();
        assert_eq!((e.kind(), e.field_name()), (ErrorKind::InvalidField, Some("vocab_size")), "{e}");
        assert!(e.message().contains("index 7"), "{e}");
    }

    #[test]
    fn tei_sparse_json_faults_are_named() {
        for (body, kind, field) in [
            (&br#"[[{"index":-1,"value":1}]]"#[..], ErrorKind::InvalidField, Some("[0][0].index")),
            (br#"[[{"index":1.5,"value":1}]]"#, ErrorKind::InvalidField, Some("[0][0].index")),
            (br#"[[{"index":3,"value":1},{"index":2,"value":1}]]"#, ErrorKind::InvalidField, Some("indices")),
            (br#"[[{"value":1}]]"#, ErrorKind::Malformed, None), // serde names the missing field in the message
            (br#"[["#, ErrorKind::Malformed, None),
        ] {
            let e = tei_sparse_json(body, None).unwrap_err();
            assert_eq!(e.kind(), kind, "{}: {e}", String::from_utf8_lossy(body));
            if field.is_some() {
                assert_eq!(e.field_name(), field, "{}: {e}", String::from_utf8_lossy(body));
            }
        }
    }
}
