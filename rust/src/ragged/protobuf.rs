//! Ragged and sparse Protobuf bodies (SPEC.md 20.6): `RaggedTensor`, `SparseTensor` and their
//! responses in `proto/densewire/v1/tensor.proto`. prost writes them (byte-exact with the golden
//! vectors); the reader walks the wire format so that errors carry offsets, and keeps the rows,
//! indices and values as slices of the body.

use super::{Batch, RaggedEmbeddings, RaggedTensor, SparseEmbeddings, check_values_dtype, check_vocab};
use crate::dtype::DType;
use crate::error::{ErrorKind, Result, err};
use crate::protobuf::{Reader, pb, wrong_wire_type};
use bytes::Bytes;
use prost::Message;

/// The prost messages of SPEC.md 20.6 (re-exported in [`crate::pb`]).
pub mod pb_ragged {
    /// `n` matrices over one rows buffer: `offsets` are `n + 1` little-endian uint32.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct RaggedTensor {
        /// The dtype (`densewire.v1.DType`).
        #[prost(enumeration = "crate::pb::DType", tag = "1")]
        pub dtype: i32,
        /// `n, d`.
        #[prost(uint64, repeated, tag = "2")]
        pub shape: Vec<u64>,
        /// `n + 1` little-endian uint32.
        #[prost(bytes = "bytes", tag = "3")]
        pub offsets: bytes::Bytes,
        /// The `(N, d)` rows.
        #[prost(bytes = "bytes", tag = "4")]
        pub data: bytes::Bytes,
    }

    /// `n` sparse vectors: offsets, `K` little-endian uint32 indices, `K` values.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct SparseTensor {
        /// The values' dtype.
        #[prost(enumeration = "crate::pb::DType", tag = "1")]
        pub dtype: i32,
        /// `n, V`.
        #[prost(uint64, repeated, tag = "2")]
        pub shape: Vec<u64>,
        /// `n + 1` little-endian uint32.
        #[prost(bytes = "bytes", tag = "3")]
        pub offsets: bytes::Bytes,
        /// `K` little-endian uint32.
        #[prost(bytes = "bytes", tag = "4")]
        pub indices: bytes::Bytes,
        /// `K` values.
        #[prost(bytes = "bytes", tag = "5")]
        pub data: bytes::Bytes,
    }

    /// A ragged embeddings response.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct RaggedEmbeddingsResponse {
        /// The model id.
        #[prost(string, tag = "1")]
        pub model: String,
        /// The matrices.
        #[prost(message, optional, tag = "2")]
        pub embeddings: Option<RaggedTensor>,
        /// Token usage.
        #[prost(message, optional, tag = "3")]
        pub usage: Option<crate::pb::Usage>,
    }

    /// A sparse embeddings response.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct SparseEmbeddingsResponse {
        /// The model id.
        #[prost(string, tag = "1")]
        pub model: String,
        /// The vectors.
        #[prost(message, optional, tag = "2")]
        pub embeddings: Option<SparseTensor>,
        /// Token usage.
        #[prost(message, optional, tag = "3")]
        pub usage: Option<crate::pb::Usage>,
    }
}

fn usage_pb<T>(b: &Batch<T>) -> Option<pb::Usage> {
    let u = b.usage.unwrap_or_default();
    Some(pb::Usage { prompt_tokens: u.prompt_tokens, total_tokens: u.total_tokens })
}

pub(crate) fn encode_ragged(b: &RaggedEmbeddings, response: bool) -> Vec<u8> {
    let t = &b.tensor;
    let m = pb_ragged::RaggedTensor {
        dtype: t.dtype().proto_value(),
        shape: vec![t.len() as u64, t.dims() as u64],
        offsets: super::offsets_bytes(t.offsets()).into(),
        data: t.rows().bytes().clone(),
    };
    if !response {
        return m.encode_to_vec();
    }
    pb_ragged::RaggedEmbeddingsResponse {
        model: b.model.clone().unwrap_or_default(),
        embeddings: Some(m),
        usage: usage_pb(b),
    }
    .encode_to_vec()
}

pub(crate) fn encode_sparse(b: &SparseEmbeddings, response: bool) -> Vec<u8> {
    let t = &b.tensor;
    let m = pb_ragged::SparseTensor {
        dtype: t.dtype().proto_value(),
        shape: vec![t.len() as u64, t.vocabulary_size()],
        offsets: super::offsets_bytes(t.offsets()).into(),
        indices: t.index_bytes().clone(),
        data: t.values().bytes().clone(),
    };
    if !response {
        return m.encode_to_vec();
    }
    pb_ragged::SparseEmbeddingsResponse {
        model: b.model.clone().unwrap_or_default(),
        embeddings: Some(m),
        usage: usage_pb(b),
    }
    .encode_to_vec()
}

/// The fields of a `RaggedTensor` or `SparseTensor` message in `body[start..end]`.
struct Parts {
    dtype: u64,
    shape: Vec<u64>,
    /// Fields 3, 4, 5 (offsets, then data or indices, then data) as body ranges.
    bytes: [(usize, usize); 3],
}

fn parts(body: &[u8], start: usize, end: usize, last: u64) -> Result<Parts> {
    let r = Reader { buf: body, end };
    let mut p = Parts { dtype: 0, shape: Vec::with_capacity(2), bytes: [(start, start); 3] };
    let mut pos = start;
    while pos < end {
        let tag_at = pos;
        let (field, wt) = r.key(&mut pos)?;
        match (field, wt) {
            (1, 0) => p.dtype = r.varint(&mut pos)?,
            (2, 0) => p.shape.push(r.varint(&mut pos)?),
            (2, 2) => r.packed_shape(&mut pos, tag_at, &mut p.shape)?,
            (3.., 2) if field <= last => p.bytes[(field - 3) as usize] = r.len_delimited(&mut pos, tag_at)?,
            (f, _) if f <= last => return Err(wrong_wire_type(field, wt, tag_at)),
            _ => r.skip(&mut pos, field, wt, tag_at)?,
        }
    }
    Ok(p)
}

impl Parts {
    fn head(&self) -> Result<(DType, u64, u64)> {
        let dtype = DType::from_proto_value(self.dtype)?;
        if self.shape.len() != 2 {
            return Err(
                err(ErrorKind::InvalidField, format!("shape has {} entries, not 2", self.shape.len())).field("shape")
            );
        }
        Ok((dtype, self.shape[0], self.shape[1]))
    }

    fn offsets(&self, body: &Bytes, n: u64) -> Result<Vec<u32>> {
        let n = usize::try_from(n).map_err(|_| err(ErrorKind::InvalidField, "shape is too large").field("shape"))?;
        let (s, e) = self.bytes[0];
        super::read_offsets(&body[s..e], n, 0)
    }
}

/// A response's fields: the model, the embedded tensor's range and the usage.
fn response(body: &Bytes) -> Result<(Option<String>, (usize, usize), Option<crate::Usage>)> {
    let r = Reader { buf: body, end: body.len() };
    let (mut pos, mut model, mut tensor, mut usage) = (0, None, None, None);
    while pos < r.end {
        let tag_at = pos;
        let (field, wt) = r.key(&mut pos)?;
        match (field, wt) {
            (1, 2) => {
                let (s, e) = r.len_delimited(&mut pos, tag_at)?;
                model = Some(String::from_utf8_lossy(&body[s..e]).into_owned());
            }
            (2, 2) => tensor = Some(r.len_delimited(&mut pos, tag_at)?),
            (3, 2) => {
                let (s, e) = r.len_delimited(&mut pos, tag_at)?;
                usage = Some(Reader { buf: body, end: e }.usage(s)?);
            }
            (1..=3, _) => return Err(wrong_wire_type(field, wt, tag_at)),
            _ => r.skip(&mut pos, field, wt, tag_at)?,
        }
    }
    let tensor = tensor.ok_or_else(|| err(ErrorKind::InvalidField, "embeddings is missing").field("embeddings"))?;
    Ok((model, tensor, usage))
}

fn message(body: &Bytes, response_message: bool) -> Result<(Option<String>, (usize, usize), Option<crate::Usage>)> {
    if response_message { response(body) } else { Ok((None, (0, body.len()), None)) }
}

pub(crate) fn decode_ragged(body: Bytes, response_message: bool) -> Result<RaggedEmbeddings> {
    let (model, (s, e), usage) = message(&body, response_message)?;
    let p = parts(&body, s, e, 4)?;
    let (dtype, n, d) = p.head()?;
    let offsets = p.offsets(&body, n)?;
    let d = usize::try_from(d).map_err(|_| err(ErrorKind::InvalidField, "shape is too large").field("shape"))?;
    let (ds, de) = p.bytes[1];
    let rows = super::rows_tensor(dtype, d, &offsets, body.slice(ds..de), 0)?;
    Ok(Batch { tensor: RaggedTensor { offsets, rows }, model, usage })
}

pub(crate) fn decode_sparse(body: Bytes, response_message: bool) -> Result<SparseEmbeddings> {
    let (model, (s, e), usage) = message(&body, response_message)?;
    let p = parts(&body, s, e, 5)?;
    let (dtype, n, v) = p.head()?;
    check_values_dtype(dtype, "dtype")?;
    check_vocab(v, "shape")?;
    let offsets = p.offsets(&body, n)?;
    let ((is, ie), (vs, ve)) = (p.bytes[1], p.bytes[2]);
    let tensor = super::sparse_parts(dtype, v, offsets, body.slice(is..ie), body.slice(vs..ve), 0, 0)?;
    Ok(Batch { tensor, model, usage })
}
