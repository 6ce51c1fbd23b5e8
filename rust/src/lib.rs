//! # densewire
//!
//! Embeddings and numeric tensors on the wire at memory speed: the codecs of the densewire 1.4
//! wire spec (Base64, raw bodies, the OpenAI-compatible JSON envelope, MessagePack, Protobuf and
//! Arrow), conversions between dtypes with the spec's exact rounding, content negotiation, an
//! axum response and extractor, a reqwest client with bounded concurrency, and PostgreSQL binary
//! COPY streams of pgvector columns ([`encode_pgcopy`], [`decode_pgcopy`]).
//!
//! Everything public is re-exported here; the modules are private.
//!
//! ```
//! use densewire::{decode_json, tensor_from_base64, ByteOrder, DType};
//!
//! // Elasticsearch's pack_dense_vector([1.0, -2.5, 0.1]) is big-endian float32 in Base64.
//! let t = tensor_from_base64("P4AAAMAgAAA9zMzN", DType::Float32, 1, 3, ByteOrder::Big)?;
//! assert_eq!(&*t.as_f32()?, &[1.0, -2.5, 0.1]);
//!
//! // An OpenAI response with encoding_format=base64 decodes to a tensor viewed without copying.
//! let body = br#"{"object":"list","data":[{"object":"embedding","index":0,"embedding":"AACAPwAAIMDNzMw9"}],"model":"m"}"#;
//! let e = decode_json(body)?;
//! assert!(e.tensor.is_zero_copy::<f32>());
//! # Ok::<(), densewire::Error>(())
//! ```
//!
//! Cargo features: `msgpack`, `protobuf`, `arrow` (formats), `axum` (server side), `reqwest`
//! (client), `compression` (gzip, deflate, br and zstd request bodies; zstd/br/gzip responses), `full` (all).
//! The default build has Base64, raw and JSON.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod base64;
mod codec;
mod compression;
mod convert;
mod dtype;
mod embeddings;
mod error;
mod headers;
mod json;
mod kserve;
mod media;
mod pgcopy;
mod quantization;
mod ragged;
mod raw;
mod table;
mod tensor;

#[cfg(feature = "arrow")]
mod arrow;
#[cfg(feature = "msgpack")]
mod msgpack;
#[cfg(feature = "protobuf")]
mod protobuf;

#[cfg(feature = "axum")]
mod axum_support;
#[cfg(feature = "reqwest")]
mod client;
#[cfg(feature = "reqwest")]
mod client_tables;
#[cfg(feature = "reqwest")]
mod client_tokens;
#[cfg(feature = "reqwest")]
mod retry;

#[doc(hidden)]
pub mod fuzzing;

/// The README's examples, run as doc tests.
#[cfg(all(doctest, feature = "full"))]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

pub use crate::base64::{decode_base64, encode_base64, encode_base64_into, tensor_from_base64, tensor_to_base64};
#[cfg(feature = "reqwest")]
pub use crate::client_tables::{TableFetch, TableInfo, TableOptions, TablesClient};
pub use crate::codec::Encoded;
pub use crate::compression::{COMPRESSION_THRESHOLD, ContentEncoding, negotiate_encoding};
#[cfg(feature = "compression")]
pub use crate::compression::{compress, decompress_bounded};
pub use crate::convert::{
    f32_to_bf16, f32_to_f16, f64_to_bf16, f64_to_f16, f64_to_f32, pack_binary, unpack_binary_row,
};
pub use crate::dtype::{ByteOrder, DType, Element};
pub use crate::embeddings::{Embeddings, EncodingFormat, JsonOptions, Usage};
pub use crate::error::{Error, ErrorKind, Result};
pub use crate::headers::{HEADER_VERSION, Headers};
pub use crate::json::{EmbeddingsRequest, Input, MAX_INPUTS, decode_json, encode_json};
pub use crate::kserve::{
    HEADER_INFERENCE_HEADER_CONTENT_LENGTH, KSERVE_DATATYPES, KserveData, KserveOutput, KserveResponse, decode_kserve,
    kserve_datatype,
};
pub use crate::media::{Format, negotiate};
pub use crate::pgcopy::{
    CopyColumns, PGCOPY_HEADER, PGCOPY_SIGNATURE, PGCOPY_TRAILER, PgCopyChunks, PgCopyData, PgIdType, PgIds,
    PgVectorType, SPARSEVEC_MAX_NNZ, decode_pgcopy, encode_pgcopy, encode_pgcopy_rows, pgcopy_chunks,
};
pub use crate::quantization::{
    QUANTIZATION_METHOD, Quantization, QuantizationRanges, dequantize, quantization_id, quantize,
};
pub use crate::ragged::{
    Batch, HEADER_KIND, MAX_VOCABULARY, RaggedEmbeddings, RaggedTensor, SparseEmbeddings, SparseTensor,
    decode_ragged_json, decode_ragged_raw, decode_sparse_json, decode_sparse_raw, encode_ragged_json,
    encode_sparse_json, ragged_raw_headers, sparse_raw_headers,
};
pub use crate::raw::{
    HEADER_BYTEORDER, HEADER_DTYPE, HEADER_MODEL, HEADER_PROMPT_TOKENS, HEADER_SHAPE, HEADER_TOTAL_TOKENS, decode_raw,
    raw_headers,
};
#[cfg(feature = "reqwest")]
pub use crate::retry::{MAX_RETRY_AFTER, RetryPolicy, parse_retry_after};
#[cfg(feature = "arrow")]
pub use crate::table::decode_table_arrow;
pub use crate::table::{
    Column, ColumnData, ColumnSpec, ColumnType, HEADER_COLUMNS, HEADER_ROWS, HEADER_TABLE, Table, TableFormat,
    TableItem, Values, columns_header, decode_table_csv, decode_table_json_columns, decode_table_json_objects,
    decode_table_json_rows, encode_table_csv, encode_table_json, format_uuid, parse_columns_header, percent_encode,
};
#[cfg(feature = "msgpack")]
pub use crate::table::{decode_table_msgpack, encode_table_msgpack};
#[cfg(feature = "protobuf")]
pub use crate::table::{decode_table_protobuf, encode_table_protobuf};
pub use crate::tensor::Tensor;
pub use bytes::Bytes;
pub use half::{bf16, f16};

#[cfg(feature = "arrow")]
pub use crate::arrow::{decode_arrow, encode_arrow};
#[cfg(feature = "msgpack")]
pub use crate::msgpack::{decode_msgpack, encode_msgpack};
#[cfg(feature = "protobuf")]
pub use crate::protobuf::{
    decode_protobuf_response, decode_protobuf_tensor, encode_protobuf_response, encode_protobuf_tensor, pb,
};

#[cfg(feature = "axum")]
pub use crate::axum_support::{ApiError, DEFAULT_BODY_LIMIT, DenseBody, DenseResponse, Negotiated};
#[cfg(feature = "reqwest")]
pub use crate::client::{Client, ClientBuilder};
#[cfg(feature = "reqwest")]
pub use crate::client_tokens::{SparseOptions, TruncationDirection};
