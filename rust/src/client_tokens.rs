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
        let (headers, body, format) = self.post_root("embed_all", texts, truncate).await?;
        match format {
            Format::Json => tei_json(&body),
            format => RaggedEmbeddings::decode(format, &headers, body, true),
        }
    }

    /// The sparse (SPLADE) vector of each text: TEI's `POST /embed_sparse`, per text its non-zero
    /// vocabulary weights, as a [`SparseTensor`](crate::SparseTensor) whose indices and values are one
    /// buffer each (`range(i)` is text `i`'s), asked for in the client's format (a sparse raw body by
    /// default, read without copying), or TEI's `[[{"index", "value"}]]` JSON when that is what the
    /// server answers (it has no vocabulary size: one past the largest index). `truncate` as
    /// [`embed_tokens`](Client::embed_tokens).
    ///
    /// ```no_run
    /// # async fn demo() -> densewire::Result<()> {
    /// let client = densewire::Client::builder("http://127.0.0.1:8000").build()?;
    /// let sparse = client.embed_sparse(&["hello world"], None).await?;
    /// let first = sparse.tensor.range(0); // text 0's entries in indices() and values()
    /// # Ok(()) }
    /// ```
    pub async fn embed_sparse<S: AsRef<str>>(&self, texts: &[S], truncate: Option<bool>) -> Result<SparseEmbeddings> {
        let (headers, body, format) = self.post_root("embed_sparse", texts, truncate).await?;
        let sparse = match format {
            Format::Json => tei_sparse_json(&body)?,
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

    /// TEI's request (`inputs`, `truncate`) POSTed to `route` at the server's root with the client's
    /// `Accept` and retries: a 2xx answer's headers, (8-aligned) body and format.
    async fn post_root<S: AsRef<str>>(
        &self,
        route: &str,
        texts: &[S],
        truncate: Option<bool>,
    ) -> Result<(http::HeaderMap, bytes::Bytes, Format)> {
        let inputs: Vec<&str> = texts.iter().map(AsRef::as_ref).collect();
        let mut req = serde_json::json!({ "inputs": inputs });
        if let Some(t) = truncate {
            req["truncate"] = t.into();
        }
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

/// One entry of TEI's `/embed_sparse` answer.
#[derive(serde::Deserialize)]
struct TeiSparseEntry {
    index: serde_json::Number,
    value: f32,
}

/// TEI's `/embed_sparse` answer: `[[{"index", "value"}]]`, one array per input; the vocabulary is one
/// past the largest index (the JSON has no size).
fn tei_sparse_json(body: &[u8]) -> Result<SparseEmbeddings> {
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
    let vocab = indices.iter().max().map_or(1, |&m| u64::from(m) + 1);
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
        let s = tei_sparse_json(br#"[[{"index":1,"value":0.5},{"index":7,"value":2}],[]]"#).unwrap().tensor;
        assert_eq!((s.offsets(), &*s.indices(), s.vocabulary_size()), (&[0u32, 2, 2][..], &[1u32, 7][..], 8));
        assert_eq!(s.values().to_f32_vec().unwrap(), vec![0.5, 2.0]);
        assert_eq!(tei_sparse_json(b"[]").unwrap().tensor.vocabulary_size(), 1);
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
            let e = tei_sparse_json(body).unwrap_err();
            assert_eq!(e.kind(), kind, "{}: {e}", String::from_utf8_lossy(body));
            if field.is_some() {
                assert_eq!(e.field_name(), field, "{}: {e}", String::from_utf8_lossy(body));
            }
        }
    }
}
