//! Ragged and sparse tensors (SPEC.md section 20 "Ragged and sparse tensors"): a batch of `n`
//! per-input matrices over one rows buffer plus `n + 1` offsets (token embeddings, ColBERT
//! multi-vectors), and a batch of `n` sparse vectors (strictly ascending uint32 indices and their
//! values, with the vocabulary size; SPLADE). The model and the checks every format shares are
//! here; the format modules (`json`, `raw`, `msgpack`, `protobuf`, `arrow`) read and write the parts.

#[cfg(feature = "arrow")]
mod arrow;
mod json;
#[cfg(feature = "msgpack")]
mod msgpack;
#[cfg(feature = "protobuf")]
mod protobuf;
mod raw;

use crate::codec::Encoded;
use crate::dtype::DType;
use crate::embeddings::{JsonOptions, Usage};
use crate::error::{Error, ErrorKind, Result, err};
use crate::headers::Headers;
use crate::media::Format;
use crate::tensor::{Tensor, aligned_copy};
use bytes::Bytes;
use std::borrow::Cow;
use std::ops::Range;

pub use json::{decode_ragged_json, decode_sparse_json, encode_ragged_json, encode_sparse_json};
#[cfg(feature = "protobuf")]
pub(crate) use protobuf::pb_ragged;
pub use raw::{HEADER_KIND, decode_ragged_raw, decode_sparse_raw, ragged_raw_headers, sparse_raw_headers};

/// `n` matrices of `m_i x d` rows of one dtype: one `(N, d)` rows tensor and `n + 1` offsets.
/// Matrix `i` is a view of the rows (no copy).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RaggedTensor {
    offsets: Vec<u32>,
    rows: Tensor,
}

impl RaggedTensor {
    /// A ragged tensor over `rows` (`N x d`); `offsets` are `n + 1` non-decreasing row numbers
    /// from 0 to `N`. `invalid_field` on `offsets` (offset `4k` of the entry that breaks the rule)
    /// or `length_mismatch` on `data` when they do not fit the rows.
    pub fn new(offsets: Vec<u32>, rows: Tensor) -> Result<RaggedTensor> {
        check_offsets(&offsets, 0)?;
        let last = *offsets.last().unwrap() as usize;
        if last != rows.rows() {
            let (actual, expected) = (rows.as_bytes().len(), last.saturating_mul(rows.row_bytes()));
            return Err(crate::error::length_mismatch(actual, expected).field("data"));
        }
        Ok(RaggedTensor { offsets, rows })
    }

    /// From per-input matrices of the same dtype and `d` (copied once into one buffer).
    pub fn from_matrices(dtype: DType, dims: usize, matrices: &[Tensor]) -> Result<RaggedTensor> {
        let mut offsets = vec![0u32];
        let mut buf = Vec::new();
        for (i, m) in matrices.iter().enumerate() {
            if m.dtype() != dtype || m.dims() != dims {
                return Err(err(ErrorKind::ShapeMismatch, format!("matrix {i} is not {dtype} x {dims}")).field("data"));
            }
            let total = *offsets.last().unwrap() as usize + m.rows();
            offsets.push(u32::try_from(total).map_err(|_| too_many())?);
            buf.extend_from_slice(m.as_bytes());
        }
        let n = *offsets.last().unwrap() as usize;
        RaggedTensor::new(offsets, Tensor::new(dtype, n, dims, aligned_copy(&buf))?)
    }

    /// The number of matrices `n`.
    pub fn len(&self) -> usize {
        self.offsets.len() - 1
    }

    /// Whether there is no matrix.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The dtype.
    pub fn dtype(&self) -> DType {
        self.rows.dtype()
    }

    /// `d`, the columns of every matrix.
    pub fn dims(&self) -> usize {
        self.rows.dims()
    }

    /// `(n, d)`.
    pub fn shape(&self) -> (usize, usize) {
        (self.len(), self.dims())
    }

    /// The `n + 1` offsets.
    pub fn offsets(&self) -> &[u32] {
        &self.offsets
    }

    /// All rows, `(N, d)`.
    pub fn rows(&self) -> &Tensor {
        &self.rows
    }

    /// The rows of matrix `i`.
    pub fn range(&self, i: usize) -> Range<usize> {
        self.offsets[i] as usize..self.offsets[i + 1] as usize
    }

    /// Matrix `i`, `(m_i, d)`: a view of the rows.
    pub fn matrix(&self, i: usize) -> Tensor {
        let r = self.range(i);
        self.rows.slice_rows(r.start, r.end)
    }
}

/// `n` sparse vectors of vocabulary size `V`: `K` strictly ascending (per vector) uint32 indices,
/// `K` values of a float dtype, and `n + 1` offsets into them. The indices and values keep the
/// body's bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SparseTensor {
    vocab: u64,
    offsets: Vec<u32>,
    indices: Bytes,
    values: Tensor,
}

/// The largest vocabulary size: 2^32 (indices are uint32).
pub const MAX_VOCABULARY: u64 = 1 << 32;

impl SparseTensor {
    /// A sparse tensor: `indices` the `K` little-endian uint32 indices, `values` a `(1, K)` tensor of
    /// a float dtype. Checked as SPEC.md 20.2 says (offsets, lengths, then the indices: `invalid_field`
    /// on `indices` with offset `4j` of the first index out of order or not below `vocab`).
    pub fn new(vocab: u64, offsets: Vec<u32>, indices: Bytes, values: Tensor) -> Result<SparseTensor> {
        check_vocab(vocab, "shape")?;
        check_values_dtype(values.dtype(), "dtype")?;
        check_offsets(&offsets, 0)?;
        let k = *offsets.last().unwrap() as usize;
        let want = k.saturating_mul(4);
        if indices.len() != want {
            return Err(crate::error::length_mismatch(indices.len(), want).field("indices"));
        }
        let item = values.dtype().item_bytes();
        if values.as_bytes().len() != k * item {
            return Err(crate::error::length_mismatch(values.as_bytes().len(), k * item).field("data"));
        }
        check_indices(&indices, &offsets, vocab, 0)?;
        let values =
            if values.shape() == (1, k) { values } else { Tensor::new(values.dtype(), 1, k, values.into_bytes())? };
        Ok(SparseTensor { vocab, offsets, indices, values })
    }

    /// From index and value slices (copied).
    pub fn from_parts(vocab: u64, offsets: Vec<u32>, indices: &[u32], values: Tensor) -> Result<SparseTensor> {
        let bytes: Vec<u8> = indices.iter().flat_map(|i| i.to_le_bytes()).collect();
        SparseTensor::new(vocab, offsets, aligned_copy(&bytes), values)
    }

    /// The number of vectors `n`.
    pub fn len(&self) -> usize {
        self.offsets.len() - 1
    }

    /// Whether there is no vector.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The values' dtype.
    pub fn dtype(&self) -> DType {
        self.values.dtype()
    }

    /// The vocabulary size `V`.
    pub fn vocabulary_size(&self) -> u64 {
        self.vocab
    }

    /// `(n, V)`.
    pub fn shape(&self) -> (usize, u64) {
        (self.len(), self.vocab)
    }

    /// The `n + 1` offsets.
    pub fn offsets(&self) -> &[u32] {
        &self.offsets
    }

    /// The `K` indices, borrowed when the bytes are aligned (copied otherwise).
    pub fn indices(&self) -> Cow<'_, [u32]> {
        match bytemuck::try_cast_slice::<u8, u32>(&self.indices) {
            Ok(s) if cfg!(target_endian = "little") => Cow::Borrowed(s),
            _ => Cow::Owned(self.indices.chunks_exact(4).map(|c| u32::from_le_bytes(c.try_into().unwrap())).collect()),
        }
    }

    /// The indices' little-endian bytes.
    pub fn index_bytes(&self) -> &Bytes {
        &self.indices
    }

    /// The `K` values as a `(1, K)` tensor.
    pub fn values(&self) -> &Tensor {
        &self.values
    }

    /// The entries of vector `i`.
    pub fn range(&self, i: usize) -> Range<usize> {
        self.offsets[i] as usize..self.offsets[i + 1] as usize
    }
}

/// A ragged or sparse response with its model id and token usage (what every format carries).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Batch<T> {
    /// The tensor.
    pub tensor: T,
    /// The model id, when the body gives one.
    pub model: Option<String>,
    /// Token usage, when the body gives it.
    pub usage: Option<Usage>,
}

/// A ragged embeddings response (token embeddings, multi-vectors).
pub type RaggedEmbeddings = Batch<RaggedTensor>;
/// A sparse embeddings response.
pub type SparseEmbeddings = Batch<SparseTensor>;

impl<T> Batch<T> {
    /// A bare tensor, no model or usage.
    pub fn from_tensor(tensor: T) -> Batch<T> {
        Batch { tensor, model: None, usage: None }
    }

    /// Whether a model or usage is set: the Protobuf body is then the response message.
    #[cfg_attr(not(feature = "protobuf"), allow(dead_code))]
    pub(crate) fn has_envelope(&self) -> bool {
        self.model.is_some() || self.usage.is_some()
    }
}

macro_rules! dispatch {
    ($ty:ty, $json_dec:path, $json_enc:path, $raw_dec:path, $raw_headers:path, $raw_body:path,
     $mp_dec:ident, $mp_enc:ident, $pb_dec:ident, $pb_enc:ident, $ar_dec:ident, $ar_enc:ident) => {
        impl Batch<$ty> {
            /// Encodes in `format` (`json` says how the JSON envelope writes items); a Protobuf body
            /// is the response message when a model or usage is set, the bare tensor message otherwise.
            pub fn encode(&self, format: Format, json: JsonOptions) -> Result<Encoded> {
                let body: Bytes = match format {
                    Format::Json => $json_enc(self, json)?.into(),
                    Format::Raw => $raw_body(self),
                    #[cfg(feature = "msgpack")]
                    Format::Msgpack => msgpack::$mp_enc(self).into(),
                    #[cfg(feature = "protobuf")]
                    Format::Protobuf => protobuf::$pb_enc(self, self.has_envelope()).into(),
                    #[cfg(feature = "arrow")]
                    Format::Arrow => arrow::$ar_enc(self)?.into(),
                    #[allow(unreachable_patterns)]
                    _ => return Err(unsupported(format)),
                };
                let headers = if format == Format::Raw { $raw_headers(self) } else { Vec::new() };
                Ok(Encoded { format, headers, body })
            }

            /// Decodes a body of `format`; `headers` are read by [`Format::Raw`] only, and a Protobuf
            /// body is the response message when `protobuf_response`, the bare tensor otherwise.
            pub fn decode<H: Headers + ?Sized>(
                format: Format,
                headers: &H,
                body: Bytes,
                protobuf_response: bool,
            ) -> Result<Batch<$ty>> {
                let _ = protobuf_response;
                match format {
                    Format::Json => $json_dec(&body),
                    Format::Raw => $raw_dec(headers, body),
                    #[cfg(feature = "msgpack")]
                    Format::Msgpack => msgpack::$mp_dec(body),
                    #[cfg(feature = "protobuf")]
                    Format::Protobuf => protobuf::$pb_dec(body, protobuf_response),
                    #[cfg(feature = "arrow")]
                    Format::Arrow => arrow::$ar_dec(body),
                    #[allow(unreachable_patterns)]
                    _ => Err(unsupported(format)),
                }
            }
        }
    };
}

dispatch!(
    RaggedTensor,
    decode_ragged_json,
    encode_ragged_json,
    decode_ragged_raw,
    ragged_raw_headers,
    raw::ragged_body,
    decode_ragged,
    encode_ragged,
    decode_ragged,
    encode_ragged,
    decode_ragged,
    encode_ragged
);
dispatch!(
    SparseTensor,
    decode_sparse_json,
    encode_sparse_json,
    decode_sparse_raw,
    sparse_raw_headers,
    raw::sparse_body,
    decode_sparse,
    encode_sparse,
    decode_sparse,
    encode_sparse,
    decode_sparse,
    encode_sparse
);

fn unsupported(format: Format) -> Error {
    err(
        ErrorKind::UnsupportedMediaType,
        format!("{} support is not compiled in (enable the cargo feature {:?})", format.media_type(), format.name()),
    )
}

fn too_many() -> Error {
    err(ErrorKind::InvalidField, "more than 2^32 - 1 rows or entries: offsets are uint32").field("offsets")
}

/// The kinds a body can say it is (SPEC.md 20: `kind`, `Densewire-Kind`, `densewire.kind`).
pub(crate) fn check_kind(got: Option<&str>, want: &str, field: &'static str) -> Result<()> {
    match got {
        Some(k) if k == want => Ok(()),
        Some(k) => {
            Err(err(ErrorKind::InvalidField, format!("{field} is {k:?}; this decoder reads {want:?}")).field(field))
        }
        None => {
            Err(err(ErrorKind::InvalidField, format!("{field} is missing; a {want} body says its kind")).field(field))
        }
    }
}

/// SPEC.md 20: a tensor body says no kind; the error of a tensor decoder given a body with the marker
/// `field` (`kind`, `Densewire-Kind`, `densewire.kind`), whatever its value.
pub(crate) fn no_kind(field: &'static str) -> Error {
    err(
        ErrorKind::InvalidField,
        format!("a tensor body says no kind, this one has {field}: decode it with the ragged or sparse decoder"),
    )
    .field(field)
}

/// `V` from 1 to 2^32, else `invalid_field` on `field`.
pub(crate) fn check_vocab(v: u64, field: &'static str) -> Result<()> {
    if (1..=MAX_VOCABULARY).contains(&v) {
        Ok(())
    } else {
        Err(err(ErrorKind::InvalidField, format!("the vocabulary size {v} is not from 1 to 2^32")).field(field))
    }
}

/// Sparse values are of a float dtype.
pub(crate) fn check_values_dtype(d: DType, field: &'static str) -> Result<()> {
    if d.is_float() {
        Ok(())
    } else {
        Err(err(ErrorKind::InvalidField, format!("sparse values are float32, float16, bfloat16 or float64, not {d}"))
            .field(field))
    }
}

/// Offsets bytes (`4 (n + 1)` of them, else `length_mismatch` on `offsets` at `base + min`) as values.
pub(crate) fn read_offsets(bytes: &[u8], n: usize, base: usize) -> Result<Vec<u32>> {
    let want = n.checked_add(1).and_then(|x| x.checked_mul(4)).ok_or_else(too_many)?;
    if bytes.len() != want {
        return Err(err(
            ErrorKind::LengthMismatch,
            format!("offsets are {} bytes, {} offsets need {want}", bytes.len(), n + 1),
        )
        .at(base + bytes.len().min(want))
        .field("offsets"));
    }
    let offsets: Vec<u32> = bytes.chunks_exact(4).map(|c| u32::from_le_bytes(c.try_into().unwrap())).collect();
    check_offsets(&offsets, base)?;
    Ok(offsets)
}

/// `offsets[0] == 0` and non-decreasing, else `invalid_field` on `offsets` at `base + 4k`.
pub(crate) fn check_offsets(offsets: &[u32], base: usize) -> Result<()> {
    let bad = |k: usize, m: String| err(ErrorKind::InvalidField, m).at(base + 4 * k).field("offsets");
    match offsets.first() {
        None => return Err(bad(0, "there are no offsets: n + 1 are needed".into())),
        Some(&first) if first != 0 => return Err(bad(0, format!("the first offset is {first}, not 0"))),
        _ => {}
    }
    if let Some(k) = offsets.windows(2).position(|w| w[1] < w[0]) {
        return Err(bad(
            k + 1,
            format!("offset {} is {}, below the one before it ({})", k + 1, offsets[k + 1], offsets[k]),
        ));
    }
    Ok(())
}

/// Each index below `vocab` and above the one before it in its vector, else `invalid_field` on
/// `indices` at `base + 4j`.
pub(crate) fn check_indices(indices: &[u8], offsets: &[u32], vocab: u64, base: usize) -> Result<()> {
    let at = |j: usize| u32::from_le_bytes(indices[4 * j..4 * j + 4].try_into().unwrap());
    for w in offsets.windows(2) {
        for j in w[0] as usize..w[1] as usize {
            let x = at(j);
            let message = if u64::from(x) >= vocab {
                format!("index {x} is not below the vocabulary size {vocab}")
            } else if j > w[0] as usize && x <= at(j - 1) {
                format!("index {x} does not follow {} in ascending order", at(j - 1))
            } else {
                continue;
            };
            return Err(err(ErrorKind::InvalidField, message).at(base + 4 * j).field("indices"));
        }
    }
    Ok(())
}

/// The rows part of a ragged body: `offsets[n] x row_bytes` bytes, else `length_mismatch` on `data`.
pub(crate) fn rows_tensor(dtype: DType, dims: usize, offsets: &[u32], data: Bytes, base: usize) -> Result<Tensor> {
    let n = *offsets.last().unwrap() as usize;
    let want = crate::tensor::expected_len(dtype, n, dims)?;
    if data.len() != want {
        return Err(err(ErrorKind::LengthMismatch, format!("the rows are {} bytes, {n} rows need {want}", data.len()))
            .at(base + data.len().min(want))
            .field("data"));
    }
    Ok(Tensor::new(dtype, n, dims, data)?.with_clear_padding_bits())
}

/// The indices and values of a sparse body, checked as SPEC.md 20.2 steps 4 and 5 (`base_*` the
/// parts' offsets for the errors).
pub(crate) fn sparse_parts(
    dtype: DType,
    vocab: u64,
    offsets: Vec<u32>,
    indices: Bytes,
    values: Bytes,
    base_indices: usize,
    base_values: usize,
) -> Result<SparseTensor> {
    let k = *offsets.last().unwrap() as usize;
    if indices.len() != 4 * k {
        return Err(err(
            ErrorKind::LengthMismatch,
            format!("the indices are {} bytes, {k} need {}", indices.len(), 4 * k),
        )
        .at(base_indices + indices.len().min(4 * k))
        .field("indices"));
    }
    let want = k * dtype.item_bytes();
    if values.len() != want {
        return Err(err(ErrorKind::LengthMismatch, format!("the values are {} bytes, {k} need {want}", values.len()))
            .at(base_values + values.len().min(want))
            .field("data"));
    }
    check_indices(&indices, &offsets, vocab, base_indices)?;
    Ok(SparseTensor { vocab, offsets, indices, values: Tensor::new(dtype, 1, k, values)? })
}

/// The little-endian bytes of offsets.
pub(crate) fn offsets_bytes(offsets: &[u32]) -> Vec<u8> {
    offsets.iter().flat_map(|o| o.to_le_bytes()).collect()
}

#[cfg(test)]
mod tests;
