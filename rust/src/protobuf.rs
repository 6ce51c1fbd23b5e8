//! Protobuf (SPEC.md section 9): `densewire.v1.Tensor` and `densewire.v1.EmbeddingsResponse`.
//!
//! The message types in [`pb`] are prost messages derived by hand from
//! `proto/densewire/v1/tensor.proto` (no protoc at build time); prost encodes them byte-exact with
//! the golden vectors. Decoding walks the wire format directly so that every error carries the
//! spec's offset, and `data` stays a slice of the input [`Bytes`] (no copy).

use crate::dtype::DType;
use crate::embeddings::{Embeddings, Usage};
use crate::error::{Error, ErrorKind, Result, err, length_mismatch, truncated};
use crate::tensor::{Tensor, expected_len};
use bytes::Bytes;
use prost::Message;

/// The prost message types of `densewire/v1/tensor.proto`, for embedding in your own messages.
pub mod pb {
    /// Element type of a tensor. Values are fixed by the spec; 0 is never valid on the wire.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
    #[repr(i32)]
    pub enum DType {
        /// Never valid on the wire.
        Unspecified = 0,
        /// float32
        Float32 = 1,
        /// float16
        Float16 = 2,
        /// bfloat16
        Bfloat16 = 3,
        /// float64
        Float64 = 4,
        /// int8
        Int8 = 5,
        /// uint8
        Uint8 = 6,
        /// binary (packed bits)
        Binary = 7,
    }

    /// A row-major (n, d) matrix. `data` holds `n * row_bytes(dtype, d)` bytes, little-endian.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Tensor {
        /// The dtype.
        #[prost(enumeration = "DType", tag = "1")]
        pub dtype: i32,
        /// Exactly two entries: n, d (packed on the wire).
        #[prost(uint64, repeated, tag = "2")]
        pub shape: Vec<u64>,
        /// The tensor bytes.
        #[prost(bytes = "bytes", tag = "3")]
        pub data: bytes::Bytes,
    }

    /// Token usage.
    #[derive(Clone, Copy, PartialEq, prost::Message)]
    pub struct Usage {
        /// Tokens in the input.
        #[prost(uint64, tag = "1")]
        pub prompt_tokens: u64,
        /// Tokens billed.
        #[prost(uint64, tag = "2")]
        pub total_tokens: u64,
    }

    pub use crate::ragged::pb_ragged::{
        RaggedEmbeddingsResponse, RaggedTensor, SparseEmbeddingsResponse, SparseTensor,
    };
    pub use crate::table::protobuf::pb_table::{Column, ColumnEncoding, ColumnType, Table};

    /// The body of `POST /v1/embeddings` when `application/protobuf` is negotiated.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct EmbeddingsResponse {
        /// The model id.
        #[prost(string, tag = "1")]
        pub model: String,
        /// The vectors.
        #[prost(message, optional, tag = "2")]
        pub embeddings: Option<Tensor>,
        /// Token usage.
        #[prost(message, optional, tag = "3")]
        pub usage: Option<Usage>,
        /// The quantization id of an int8 / uint8 response (SPEC.md section 17.4); empty otherwise.
        #[prost(string, tag = "4")]
        pub quantization: String,
    }
}

fn to_pb(t: &Tensor) -> pb::Tensor {
    pb::Tensor {
        dtype: t.dtype().proto_value(),
        shape: vec![t.rows() as u64, t.dims() as u64],
        data: t.bytes().clone(),
    }
}

/// Encodes a bare `Tensor` message.
///
/// ```
/// use densewire::{encode_protobuf_tensor, Tensor};
/// let t = Tensor::from_slice(1, 1, &[1.0f32]).unwrap();
/// assert_eq!(encode_protobuf_tensor(&t), [0x08, 1, 0x12, 2, 1, 1, 0x1a, 4, 0, 0, 0x80, 0x3f]);
/// ```
pub fn encode_protobuf_tensor(t: &Tensor) -> Vec<u8> {
    to_pb(t).encode_to_vec()
}

/// Encodes an `EmbeddingsResponse` message (usage is always written, zero counts omitted inside).
pub fn encode_protobuf_response(e: &Embeddings) -> Vec<u8> {
    let u = e.usage.unwrap_or_default();
    pb::EmbeddingsResponse {
        model: e.model.clone().unwrap_or_default(),
        embeddings: Some(to_pb(&e.tensor)),
        usage: Some(pb::Usage { prompt_tokens: u.prompt_tokens, total_tokens: u.total_tokens }),
        quantization: e.quantization.clone().unwrap_or_default(),
    }
    .encode_to_vec()
}

/// Decodes a bare `Tensor` message. The tensor shares `body`.
pub fn decode_protobuf_tensor(body: Bytes) -> Result<Tensor> {
    let mut r = Reader { buf: &body, end: body.len() };
    let raw = r.tensor(0)?;
    raw.into_tensor(&body)
}

/// Decodes an `EmbeddingsResponse` message. The tensor shares `body`.
pub fn decode_protobuf_response(body: Bytes) -> Result<Embeddings> {
    let r = Reader { buf: &body, end: body.len() };
    let mut pos = 0;
    let mut model = None;
    let mut tensor = None;
    let mut usage = None;
    let mut quantization = None;
    while pos < r.end {
        let tag_at = pos;
        let (field, wt) = r.key(&mut pos)?;
        match (field, wt) {
            (1, 2) => {
                let (s, e) = r.len_delimited(&mut pos, tag_at)?;
                model = Some(String::from_utf8_lossy(&body[s..e]).into_owned());
            }
            (2, 2) => {
                let (s, e) = r.len_delimited(&mut pos, tag_at)?;
                let mut inner = Reader { buf: &body, end: e };
                tensor = Some(inner.tensor(s)?);
            }
            (3, 2) => {
                let (s, e) = r.len_delimited(&mut pos, tag_at)?;
                let mut inner = Reader { buf: &body, end: e };
                usage = Some(inner.usage(s)?);
            }
            (4, 2) => {
                let (s, e) = r.len_delimited(&mut pos, tag_at)?;
                let q = std::str::from_utf8(&body[s..e]).map_err(|_| {
                    err(ErrorKind::Malformed, "quantization is not UTF-8").at(tag_at).field("quantization")
                })?;
                // proto3: an empty string is the field's absence
                quantization = (!q.is_empty()).then(|| q.to_owned());
            }
            (1..=4, _) => return Err(wrong_wire_type(field, wt, tag_at)),
            _ => r.skip(&mut pos, field, wt, tag_at)?,
        }
    }
    let tensor = tensor
        .ok_or_else(|| err(ErrorKind::InvalidField, "embeddings is missing").field("embeddings"))?
        .into_tensor(&body)?;
    Ok(Embeddings { tensor, model, usage, quantization })
}

pub(crate) fn wrong_wire_type(field: u64, wt: u64, at: usize) -> Error {
    err(ErrorKind::Malformed, format!("field {field} has the wrong wire type {wt}")).at(at)
}

struct RawTensor {
    dtype: Option<u64>,
    shape: Vec<u64>,
    data: Option<(usize, usize)>,
}

impl RawTensor {
    fn into_tensor(self, body: &Bytes) -> Result<Tensor> {
        let dtype = DType::from_proto_value(self.dtype.unwrap_or(0))?;
        if self.shape.len() != 2 {
            return Err(
                err(ErrorKind::InvalidField, format!("shape has {} entries, not 2", self.shape.len())).field("shape")
            );
        }
        let bad = || err(ErrorKind::InvalidField, "shape is too large").field("shape");
        let n = usize::try_from(self.shape[0]).map_err(|_| bad())?;
        let d = usize::try_from(self.shape[1]).map_err(|_| bad())?;
        let expected = expected_len(dtype, n, d)?;
        let (s, e) = self.data.unwrap_or((0, 0));
        if e - s != expected {
            return Err(length_mismatch(e - s, expected).field("data"));
        }
        Ok(Tensor::new(dtype, n, d, body.slice(s..e))?.with_clear_padding_bits())
    }
}

/// Unknown groups nested deeper than this are malformed ("groups nested too deeply").
pub(crate) const MAX_GROUP_DEPTH: usize = 64;

/// A wire-format reader over `buf[..end]`, where `end` is the end of the body or of an embedded
/// message.
pub(crate) struct Reader<'a> {
    pub(crate) buf: &'a [u8],
    pub(crate) end: usize,
}

impl Reader<'_> {
    /// A field that needs bytes up to `need` (exclusive) when its message ends at `self.end`:
    /// past the end of the body it is `truncated`; past an embedded message's end but inside the
    /// body, `malformed` at `at` (SPEC.md section 9).
    pub(crate) fn past_end(&self, at: usize, need: Option<usize>) -> Error {
        // `need`: the end of a length-delimited or fixed-size field; `None` for a tag or varint
        // that reached the end of its message.
        let beyond_body = match need {
            Some(n) => n > self.buf.len(),
            None => self.end == self.buf.len(),
        };
        if beyond_body {
            truncated(self.buf.len())
        } else {
            err(ErrorKind::Malformed, "a field runs past the end of its enclosing message").at(at)
        }
    }

    pub(crate) fn varint(&self, pos: &mut usize) -> Result<u64> {
        let start = *pos;
        let mut v: u64 = 0;
        for i in 0..10 {
            if *pos >= self.end {
                return Err(self.past_end(start, None));
            }
            let b = self.buf[*pos];
            *pos += 1;
            if i == 9 && b > 1 && b & 0x80 == 0 {
                // The 10th byte holds bit 63 only: more overflows 64 bits, which Protobuf parsers
                // (prost, Go's protowire) refuse rather than drop.
                return Err(err(ErrorKind::Malformed, "a varint overflows 64 bits").at(start));
            }
            v |= ((b & 0x7F) as u64) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(err(ErrorKind::Malformed, "a varint is longer than 10 bytes").at(start))
    }

    pub(crate) fn key(&self, pos: &mut usize) -> Result<(u64, u64)> {
        let at = *pos;
        let k = self.varint(pos)?;
        let (field, wt) = (k >> 3, k & 7);
        if field == 0 || field > (1 << 29) - 1 {
            return Err(err(ErrorKind::Malformed, format!("invalid field number {field}")).at(at));
        }
        Ok((field, wt))
    }

    pub(crate) fn len_delimited(&self, pos: &mut usize, tag_at: usize) -> Result<(usize, usize)> {
        let len = self.varint(pos)?;
        let start = *pos;
        let end = usize::try_from(len).ok().and_then(|l| start.checked_add(l));
        match end {
            Some(e) if e <= self.end => {
                *pos = e;
                Ok((start, e))
            }
            _ => Err(self.past_end(tag_at, Some(end.unwrap_or(usize::MAX)))),
        }
    }

    pub(crate) fn fixed(&self, pos: &mut usize, n: usize, tag_at: usize) -> Result<()> {
        if self.end - *pos < n {
            return Err(self.past_end(tag_at, Some(*pos + n)));
        }
        *pos += n;
        Ok(())
    }

    /// Skips the value of unknown field `field` (wire type `wt`, tag at `tag_at`). A group
    /// (deprecated wire type 3) is skipped up to the end-group tag (wire type 4) of the same field
    /// number, its fields (nested groups included, at most [`MAX_GROUP_DEPTH`] deep) skipped alike;
    /// an end-group tag anywhere else is malformed at that tag (SPEC.md section 9).
    pub(crate) fn skip(&self, pos: &mut usize, field: u64, wt: u64, tag_at: usize) -> Result<()> {
        self.skip_at_depth(pos, field, wt, tag_at, 0)
    }

    fn skip_at_depth(&self, pos: &mut usize, field: u64, wt: u64, tag_at: usize, depth: usize) -> Result<()> {
        match wt {
            0 => self.varint(pos).map(drop),
            1 => self.fixed(pos, 8, tag_at),
            2 => self.len_delimited(pos, tag_at).map(drop),
            3 => {
                if depth >= MAX_GROUP_DEPTH {
                    return Err(err(ErrorKind::Malformed, "groups nested too deeply").at(tag_at));
                }
                loop {
                    if *pos >= self.end {
                        return Err(self.past_end(tag_at, None));
                    }
                    let inner_at = *pos;
                    let (inner, inner_wt) = self.key(pos)?;
                    if inner_wt == 4 {
                        if inner != field {
                            return Err(err(
                                ErrorKind::Malformed,
                                format!("end-group tag {inner} does not match start group {field}"),
                            )
                            .at(inner_at));
                        }
                        return Ok(());
                    }
                    self.skip_at_depth(pos, inner, inner_wt, inner_at, depth + 1)?;
                }
            }
            4 => Err(err(ErrorKind::Malformed, "end-group tag without a matching start group").at(tag_at)),
            5 => self.fixed(pos, 4, tag_at),
            _ => Err(err(ErrorKind::Malformed, format!("unsupported wire type {wt}")).at(tag_at)),
        }
    }

    /// A packed `repeated uint64 shape` field. An entry running past the end of its packed field is
    /// malformed at the field's tag, even where the body ends with it (SPEC.md section 9); an
    /// over-long varint is malformed at the varint.
    pub(crate) fn packed_shape(&self, pos: &mut usize, tag_at: usize, shape: &mut Vec<u64>) -> Result<()> {
        let (s, e) = self.len_delimited(pos, tag_at)?;
        let packed = Reader { buf: self.buf, end: e };
        let mut p = s;
        while p < e {
            let entry = p;
            match packed.varint(&mut p) {
                Ok(v) => shape.push(v),
                Err(over_long) if p - entry == 10 => return Err(over_long),
                Err(_) => {
                    return Err(
                        err(ErrorKind::Malformed, "a packed shape entry runs past the end of its field").at(tag_at)
                    );
                }
            }
        }
        Ok(())
    }

    fn tensor(&mut self, mut pos: usize) -> Result<RawTensor> {
        let mut t = RawTensor { dtype: None, shape: Vec::with_capacity(2), data: None };
        while pos < self.end {
            let tag_at = pos;
            let (field, wt) = self.key(&mut pos)?;
            match (field, wt) {
                (1, 0) => t.dtype = Some(self.varint(&mut pos)?),
                (2, 0) => t.shape.push(self.varint(&mut pos)?),
                (2, 2) => self.packed_shape(&mut pos, tag_at, &mut t.shape)?,
                (3, 2) => t.data = Some(self.len_delimited(&mut pos, tag_at)?),
                (1..=3, _) => return Err(wrong_wire_type(field, wt, tag_at)),
                _ => self.skip(&mut pos, field, wt, tag_at)?,
            }
        }
        Ok(t)
    }

    pub(crate) fn usage(&mut self, mut pos: usize) -> Result<Usage> {
        let mut u = Usage::default();
        while pos < self.end {
            let tag_at = pos;
            let (field, wt) = self.key(&mut pos)?;
            match (field, wt) {
                (1, 0) => u.prompt_tokens = self.varint(&mut pos)?,
                (2, 0) => u.total_tokens = self.varint(&mut pos)?,
                (1..=2, _) => return Err(wrong_wire_type(field, wt, tag_at)),
                _ => self.skip(&mut pos, field, wt, tag_at)?,
            }
        }
        Ok(u)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn unpacked_shape_and_unknown_fields() {
        // dtype uint8, shape unpacked 1 then 2, an unknown fixed32 field 9, data [5, 6].
        let b = Bytes::from_static(&[0x08, 6, 0x10, 1, 0x10, 2, 0x4d, 1, 2, 3, 4, 0x1a, 2, 5, 6]);
        let t = decode_protobuf_tensor(b).unwrap();
        assert_eq!((t.shape(), t.as_bytes()), ((1, 2), &[5u8, 6][..]));
    }

    #[test]
    fn nested_length_past_its_message_is_malformed() {
        // EmbeddingsResponse.embeddings of 4 bytes whose data field claims 3, inside the body.
        let b = Bytes::from_static(&[0x12, 4, 0x1a, 3, 0, 0, 0x08, 1]);
        let e = decode_protobuf_response(b).unwrap_err();
        assert_eq!((e.kind(), e.offset()), (ErrorKind::Malformed, Some(2)));
        // Past the body: truncated, nested or not.
        let e = decode_protobuf_response(Bytes::from_static(&[0x12, 4, 0x1a, 9, 0, 0])).unwrap_err();
        assert_eq!((e.kind(), e.offset()), (ErrorKind::Truncated, Some(6)));
        // The same at the top level is truncated.
        let e = decode_protobuf_tensor(Bytes::from_static(&[0x1a, 9, 0, 0])).unwrap_err();
        assert_eq!((e.kind(), e.offset()), (ErrorKind::Truncated, Some(4)));
        // A missing embeddings field.
        let e = decode_protobuf_response(Bytes::from_static(&[0x0a, 1, b'm'])).unwrap_err();
        assert_eq!(e.field_name(), Some("embeddings"));
        // dtype (a known field) as a group, and field 0, are wire errors.
        assert_eq!(decode_protobuf_tensor(Bytes::from_static(&[0x0b])).unwrap_err().kind(), ErrorKind::Malformed);
        assert_eq!(decode_protobuf_tensor(Bytes::from_static(&[0x00, 0])).unwrap_err().kind(), ErrorKind::Malformed);
    }

    #[test]
    fn prost_messages_round_trip_with_our_decoder() {
        let t = Tensor::from_slice(2, 1, &[1.5f64, -2.0]).unwrap();
        let e = Embeddings {
            tensor: t,
            model: Some("m".into()),
            usage: Some(Usage { prompt_tokens: 3, total_tokens: 4 }),
            quantization: Some("455fc59476466b04".into()),
        };
        let b = encode_protobuf_response(&e);
        assert_eq!(decode_protobuf_response(b.clone().into()).unwrap(), e);
        let via_prost = pb::EmbeddingsResponse::decode(&b[..]).unwrap();
        assert_eq!(via_prost.embeddings.unwrap().shape, vec![2, 1]);
    }

    /// Found by the table_protobuf fuzz target (corpus regression-varint-overflow): a 10-byte
    /// varint whose last byte carries more than bit 63 was accepted with the excess dropped; prost
    /// and Go's protowire refuse it, so it is malformed at the varint.
    #[test]
    fn a_varint_beyond_64_bits_is_malformed() {
        let max = [0x10, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]; // rows = 2^64 - 1
        let r = Reader { buf: &max, end: max.len() };
        let mut pos = 1;
        assert_eq!((r.varint(&mut pos).unwrap(), pos), (u64::MAX, max.len()));
        let mut over = max;
        over[10] = 0x02;
        assert!(crate::pb::Table::decode(&over[..]).is_err(), "prost refuses it");
        let mut pos = 1;
        let e = Reader { buf: &over, end: over.len() }.varint(&mut pos).unwrap_err();
        assert_eq!((e.kind(), e.offset()), (ErrorKind::Malformed, Some(1)));
        assert!(e.to_string().contains("overflows 64 bits"), "{e}");
        let e = crate::decode_table_protobuf(Bytes::copy_from_slice(&over)).unwrap_err();
        assert_eq!((e.kind(), e.offset()), (ErrorKind::Malformed, Some(1)));
        // In a tensor's packed shape too, at the entry.
        let packed = [0x08, 1, 0x12, 11, 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f];
        let e = decode_protobuf_tensor(Bytes::copy_from_slice(&packed)).unwrap_err();
        assert_eq!((e.kind(), e.offset()), (ErrorKind::Malformed, Some(5)));
    }

    /// Field 11 as a group (wire types 3/4) holding a varint and a nested group 12.
    pub(crate) const GROUP: [u8; 8] = [0x5b, 0x08, 0x07, 0x63, 0x10, 0x01, 0x64, 0x5c];

    /// The group errors of SPEC.md section 9, through `decode`, with `plain` a valid body.
    pub(crate) fn assert_group_errors(plain: &[u8], decode: impl Fn(Vec<u8>) -> Result<()>) {
        let cat = |a: &[u8], b: &[u8]| [a, b].concat();
        let deep = cat(&[0x5b; 100], &[0x5c; 100]);
        let cases: [(Vec<u8>, ErrorKind, usize, &str); 6] = [
            (cat(&[0x5b, 0x08, 0x07, 0x64], plain), ErrorKind::Malformed, 3, "does not match"), // end of group 12
            (vec![0x5b, 0x08, 0x07], ErrorKind::Truncated, 3, ""),                              // no end tag
            (deep, ErrorKind::Malformed, 64, "nested too deeply"),                              // the 65th start tag
            (cat(&[0x5c], plain), ErrorKind::Malformed, 0, "end-group"),                        // a lone end-group tag
            (cat(plain, &[0x5e]), ErrorKind::Malformed, plain.len(), "wire type 6"),
            (cat(plain, &[0x5f]), ErrorKind::Malformed, plain.len(), "wire type 7"),
        ];
        for (body, kind, offset, text) in cases {
            let e = decode(body.clone()).unwrap_err();
            assert_eq!((e.kind(), e.offset()), (kind, Some(offset as u64)), "{body:02x?}: {e}");
            assert!(e.to_string().contains(text), "{e}");
        }
        // 64 levels are fine.
        decode(cat(&cat(&[0x5b; 64], &[0x5c; 64]), plain)).unwrap();
    }

    #[test]
    fn unknown_groups_are_skipped_as_the_protobuf_runtime_does() {
        let t = Tensor::from_slice(2, 3, &[1.0f32, -2.5, 0.1, 3.0, 0.5, -1.0]).unwrap();
        let plain = encode_protobuf_tensor(&t);
        let body = [&GROUP[..], &plain].concat();
        // prost (the Rust protobuf runtime) skips the group too.
        let runtime = pb::Tensor::decode(&body[..]).unwrap();
        assert_eq!((runtime.dtype, runtime.shape.clone(), &runtime.data[..]), (1, vec![2, 3], t.as_bytes()));
        assert_eq!(decode_protobuf_tensor(body.into()).unwrap(), t);
        assert_group_errors(&plain, |b| decode_protobuf_tensor(b.into()).map(drop));
        // A known field sent as a group stays a wrong wire type.
        let e = decode_protobuf_tensor([&plain[..], &[0x1b, 0x1c]].concat().into()).unwrap_err();
        assert_eq!((e.kind(), e.offset()), (ErrorKind::Malformed, Some(plain.len() as u64)));
        assert!(e.to_string().contains("wrong wire type 3"), "{e}");

        // In a response, its embedded Tensor and Usage.
        let emb = Embeddings {
            tensor: t.clone(),
            model: Some("m".into()),
            usage: Some(Usage { prompt_tokens: 3, total_tokens: 4 }),
            quantization: None,
        };
        let response = encode_protobuf_response(&emb);
        assert_eq!(decode_protobuf_response([&GROUP[..], &response].concat().into()).unwrap(), emb);
        let inner = [&GROUP[..], &plain].concat();
        let usage = [&GROUP[..], &[0x08, 5]].concat();
        let body = [&[0x12, inner.len() as u8][..], &inner, &[0x1a, usage.len() as u8], &usage].concat();
        let back = decode_protobuf_response(body.into()).unwrap();
        assert_eq!((back.tensor, back.usage), (t, Some(Usage { prompt_tokens: 5, total_tokens: 0 })));
        // A group running past its embedded message (inside the body) is malformed at its start tag.
        let body = [&[0x12, 3, 0x5b, 0x08, 0x07][..], &plain].concat();
        let e = decode_protobuf_response(body.into()).unwrap_err();
        assert_eq!((e.kind(), e.offset()), (ErrorKind::Malformed, Some(2)));
    }
}
