//! Per-token embeddings through the client (SPEC.md 6.4): TEI's `POST /embed_all`, answered as
//! densewire's ragged tensor in the client's format (section 20), or in TEI's own `[[[f32]]]` JSON.

use crate::client::Client;
use crate::dtype::DType;
use crate::error::{ErrorKind, Result, err};
use crate::media::Format;
use crate::ragged::{Batch, RaggedEmbeddings, RaggedTensor};
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
        let inputs: Vec<&str> = texts.iter().map(AsRef::as_ref).collect();
        let mut req = serde_json::json!({ "inputs": inputs });
        if let Some(t) = truncate {
            req["truncate"] = t.into();
        }
        let body = bytes::Bytes::from(req.to_string());
        let url = format!("{}/embed_all", self.v1.trim_end_matches("/v1"));
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
            Some(Format::Json) => tei_json(&body),
            Some(format) => RaggedEmbeddings::decode(format, &headers, body, true),
            None => Err(err(ErrorKind::UnsupportedMediaType, format!("the server answered with Content-Type {ct:?}"))
                .field("Content-Type")),
        }
    }
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
