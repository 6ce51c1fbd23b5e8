//! MessagePack (SPEC.md section 8): one map `{model?, dtype, shape, data, usage?}`.
//!
//! Encoding uses `rmp`'s writers, which pick the smallest representation of every value, so the
//! output is byte-exact with the golden vectors. Decoding walks the body with `rmp`'s markers and
//! keeps `data` as a slice of the input [`Bytes`] (no copy), reporting each error with its offset.

use crate::dtype::DType;
use crate::embeddings::{Embeddings, Usage};
use crate::error::{Error, ErrorKind, Result, err, length_mismatch, truncated};
use crate::tensor::Tensor;
use bytes::Bytes;
use rmp::Marker;

/// Encodes an embeddings response (or, with no model and usage, a bare tensor) as MessagePack.
///
/// ```
/// use densewire::{decode_msgpack, encode_msgpack, Embeddings, Tensor};
/// let e = Embeddings::from_tensor(Tensor::from_slice(1, 2, &[1.0f32, 2.0]).unwrap());
/// let body = encode_msgpack(&e);
/// assert_eq!(decode_msgpack(body.into()).unwrap(), e);
/// ```
pub fn encode_msgpack(e: &Embeddings) -> Vec<u8> {
    let t = &e.tensor;
    let mut out = Vec::with_capacity(t.as_bytes().len() + 128);
    let w = &mut out;
    let fields =
        3 + usize::from(e.model.is_some()) + usize::from(e.usage.is_some()) + usize::from(e.quantization.is_some());
    let ok = "writing to a Vec cannot fail";
    rmp::encode::write_map_len(w, fields as u32).expect(ok);
    if let Some(m) = &e.model {
        rmp::encode::write_str(w, "model").expect(ok);
        rmp::encode::write_str(w, m).expect(ok);
    }
    rmp::encode::write_str(w, "dtype").expect(ok);
    rmp::encode::write_str(w, t.dtype().name()).expect(ok);
    rmp::encode::write_str(w, "shape").expect(ok);
    rmp::encode::write_array_len(w, 2).expect(ok);
    rmp::encode::write_uint(w, t.rows() as u64).expect(ok);
    rmp::encode::write_uint(w, t.dims() as u64).expect(ok);
    rmp::encode::write_str(w, "data").expect(ok);
    rmp::encode::write_bin(w, t.as_bytes()).expect(ok);
    if let Some(u) = e.usage {
        rmp::encode::write_str(w, "usage").expect(ok);
        rmp::encode::write_map_len(w, 2).expect(ok);
        rmp::encode::write_str(w, "prompt_tokens").expect(ok);
        rmp::encode::write_uint(w, u.prompt_tokens).expect(ok);
        rmp::encode::write_str(w, "total_tokens").expect(ok);
        rmp::encode::write_uint(w, u.total_tokens).expect(ok);
    }
    if let Some(q) = &e.quantization {
        rmp::encode::write_str(w, "quantization").expect(ok);
        rmp::encode::write_str(w, q).expect(ok);
    }
    out
}

const MAX_DEPTH: usize = 64;

pub(crate) struct Cursor<'a> {
    pub(crate) buf: &'a [u8],
    pub(crate) pos: usize,
}

impl<'a> Cursor<'a> {
    pub(crate) fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        match self.pos.checked_add(n) {
            Some(end) if end <= self.buf.len() => {
                let s = &self.buf[self.pos..end];
                self.pos = end;
                Ok(s)
            }
            _ => Err(truncated(self.buf.len())),
        }
    }

    pub(crate) fn marker(&mut self) -> Result<(Marker, usize)> {
        let at = self.pos;
        Ok((Marker::from_u8(self.take(1)?[0]), at))
    }

    pub(crate) fn be(&mut self, n: usize) -> Result<u64> {
        Ok(self.take(n)?.iter().fold(0u64, |a, &b| (a << 8) | b as u64))
    }

    /// The length that follows a str/bin/array/map/ext marker, if it is one.
    pub(crate) fn len_of(&mut self, m: Marker) -> Result<Option<usize>> {
        Ok(Some(match m {
            Marker::FixStr(n) | Marker::FixArray(n) | Marker::FixMap(n) => n as usize,
            Marker::Str8 | Marker::Bin8 => self.be(1)? as usize,
            Marker::Str16 | Marker::Bin16 | Marker::Array16 | Marker::Map16 => self.be(2)? as usize,
            Marker::Str32 | Marker::Bin32 | Marker::Array32 | Marker::Map32 => self.be(4)? as usize,
            _ => return Ok(None),
        }))
    }

    /// Skips one value of any kind.
    pub(crate) fn skip(&mut self, depth: usize) -> Result<()> {
        let (m, at) = self.marker()?;
        if depth > MAX_DEPTH {
            return Err(err(ErrorKind::Malformed, "MessagePack nested too deeply").at(at));
        }
        match m {
            Marker::FixPos(_) | Marker::FixNeg(_) | Marker::Null | Marker::True | Marker::False => {}
            Marker::U8 | Marker::I8 => drop(self.take(1)?),
            Marker::U16 | Marker::I16 => drop(self.take(2)?),
            Marker::U32 | Marker::I32 | Marker::F32 => drop(self.take(4)?),
            Marker::U64 | Marker::I64 | Marker::F64 => drop(self.take(8)?),
            Marker::FixExt1 => drop(self.take(2)?),
            Marker::FixExt2 => drop(self.take(3)?),
            Marker::FixExt4 => drop(self.take(5)?),
            Marker::FixExt8 => drop(self.take(9)?),
            Marker::FixExt16 => drop(self.take(17)?),
            Marker::Ext8 | Marker::Ext16 | Marker::Ext32 => {
                let n = self.be(match m {
                    Marker::Ext8 => 1,
                    Marker::Ext16 => 2,
                    _ => 4,
                })? as usize;
                self.take(n.saturating_add(1))?;
            }
            Marker::FixStr(_)
            | Marker::Str8
            | Marker::Str16
            | Marker::Str32
            | Marker::Bin8
            | Marker::Bin16
            | Marker::Bin32 => {
                let n = self.len_of(m)?.unwrap();
                self.take(n)?;
            }
            Marker::FixArray(_) | Marker::Array16 | Marker::Array32 => {
                for _ in 0..self.len_of(m)?.unwrap() {
                    self.skip(depth + 1)?;
                }
            }
            Marker::FixMap(_) | Marker::Map16 | Marker::Map32 => {
                for _ in 0..self.len_of(m)?.unwrap() {
                    self.skip(depth + 1)?;
                    self.skip(depth + 1)?;
                }
            }
            Marker::Reserved => return Err(err(ErrorKind::Malformed, "reserved MessagePack byte 0xc1").at(at)),
        }
        Ok(())
    }

    /// A string value, or `None` (after skipping) for any other kind.
    pub(crate) fn str_value(&mut self) -> Result<Option<&'a [u8]>> {
        let save = self.pos;
        let (m, _) = self.marker()?;
        if matches!(m, Marker::FixStr(_) | Marker::Str8 | Marker::Str16 | Marker::Str32) {
            let n = self.len_of(m)?.unwrap();
            return Ok(Some(self.take(n)?));
        }
        self.pos = save;
        self.skip(0)?;
        Ok(None)
    }

    /// A non-negative integer of any width, or `None` (after skipping) for any other value.
    pub(crate) fn uint_value(&mut self) -> Result<Option<u64>> {
        let save = self.pos;
        let (m, _) = self.marker()?;
        let v = match m {
            Marker::FixPos(v) => Some(v as u64),
            Marker::U8 => Some(self.be(1)?),
            Marker::U16 => Some(self.be(2)?),
            Marker::U32 => Some(self.be(4)?),
            Marker::U64 => Some(self.be(8)?),
            Marker::I8 | Marker::I16 | Marker::I32 | Marker::I64 => {
                let n = match m {
                    Marker::I8 => 1,
                    Marker::I16 => 2,
                    Marker::I32 => 4,
                    _ => 8,
                };
                let raw = self.be(n)?;
                let shift = 64 - 8 * n as u32;
                let v = ((raw << shift) as i64) >> shift;
                u64::try_from(v).ok()
            }
            _ => {
                self.pos = save;
                self.skip(0)?;
                None
            }
        };
        Ok(v)
    }
}

pub(crate) enum Field<T> {
    Absent,
    Ok(T),
    Bad,
}

/// Decodes a MessagePack body (keys in any order, integers of any width, unknown keys ignored).
/// The tensor shares `body`: no copy.
pub fn decode_msgpack(body: Bytes) -> Result<Embeddings> {
    let mut c = Cursor { buf: &body, pos: 0 };
    let (m, at) = c.marker()?;
    let entries = match m {
        Marker::FixMap(_) | Marker::Map16 | Marker::Map32 => c.len_of(m)?.unwrap(),
        _ => return Err(err(ErrorKind::Malformed, "the MessagePack body is not a map").at(at)),
    };
    let mut dtype: Field<&[u8]> = Field::Absent;
    let mut shape: Field<(u64, u64)> = Field::Absent;
    let mut data: Field<(usize, usize)> = Field::Absent;
    let mut model = None;
    let mut usage = Ok(None);
    let mut quantization: Field<&[u8]> = Field::Absent;
    let mut kind = false;
    for _ in 0..entries {
        let (km, kat) = c.marker()?;
        let key = match km {
            Marker::FixStr(_) | Marker::Str8 | Marker::Str16 | Marker::Str32 => {
                let n = c.len_of(km)?.unwrap();
                c.take(n)?
            }
            _ => return Err(err(ErrorKind::Malformed, "a MessagePack map key is not a string").at(kat)),
        };
        match key {
            b"dtype" => dtype = c.str_value()?.map_or(Field::Bad, Field::Ok),
            b"model" => model = c.str_value()?.map(|s| String::from_utf8_lossy(s).into_owned()),
            b"shape" => shape = read_shape(&mut c)?,
            b"data" => {
                let save = c.pos;
                let (dm, _) = c.marker()?;
                data = match dm {
                    Marker::Bin8 | Marker::Bin16 | Marker::Bin32 => {
                        let n = c.len_of(dm)?.unwrap();
                        let start = c.pos;
                        c.take(n)?;
                        Field::Ok((start, n))
                    }
                    _ => {
                        c.pos = save;
                        c.skip(0)?;
                        Field::Bad
                    }
                };
            }
            b"usage" => usage = read_usage(&mut c)?,
            b"quantization" => quantization = c.str_value()?.map_or(Field::Bad, Field::Ok),
            b"kind" => {
                kind = true;
                c.skip(0)?;
            }
            _ => c.skip(0)?,
        }
    }
    if c.pos != body.len() {
        return Err(
            err(ErrorKind::Malformed, format!("{} bytes follow the MessagePack map", body.len() - c.pos)).at(c.pos)
        );
    }
    if kind {
        return Err(crate::ragged::no_kind("kind"));
    }
    let dtype = match dtype {
        Field::Ok(name) => DType::from_name(std::str::from_utf8(name).unwrap_or("\u{fffd}"))?,
        Field::Absent => return Err(missing("dtype", "a string")),
        Field::Bad => return Err(missing("dtype", "a string").with_message("dtype is not a string")),
    };
    let (n, d) = match shape {
        Field::Ok((n, d)) => (to_usize(n)?, to_usize(d)?),
        _ => return Err(missing("shape", "two non-negative integers [n, d]")),
    };
    let (start, len) = match data {
        Field::Ok(x) => x,
        _ => return Err(missing("data", "bin")),
    };
    let expected = crate::tensor::expected_len(dtype, n, d)?;
    if len != expected {
        return Err(length_mismatch(len, expected).field("data"));
    }
    let tensor = Tensor::new(dtype, n, d, body.slice(start..start + len))?.with_clear_padding_bits();
    let usage = usage?;
    let quantization = match quantization {
        Field::Ok(q) => Some(String::from_utf8_lossy(q).into_owned()),
        Field::Absent => None,
        Field::Bad => return Err(missing("quantization", "a string").with_message("quantization is not a string")),
    };
    Ok(Embeddings { tensor, model, usage, quantization })
}

fn to_usize(v: u64) -> Result<usize> {
    usize::try_from(v).map_err(|_| missing("shape", "two non-negative integers [n, d]"))
}

fn missing(field: &'static str, what: &str) -> Error {
    err(ErrorKind::InvalidField, format!("{field} is missing or not {what}")).field(field)
}

trait WithMessage {
    fn with_message(self, m: &'static str) -> Self;
}

impl WithMessage for Error {
    fn with_message(self, m: &'static str) -> Error {
        let mut e = Error::new(self.kind(), m);
        if let Some(f) = self.field_name() {
            e = e.field(f.to_owned());
        }
        e
    }
}

pub(crate) fn read_shape(c: &mut Cursor<'_>) -> Result<Field<(u64, u64)>> {
    let save = c.pos;
    let (m, _) = c.marker()?;
    if !matches!(m, Marker::FixArray(_) | Marker::Array16 | Marker::Array32) {
        c.pos = save;
        c.skip(0)?;
        return Ok(Field::Bad);
    }
    let len = c.len_of(m)?.unwrap();
    let mut vals = Vec::with_capacity(2);
    let mut ok = len == 2;
    for _ in 0..len {
        match c.uint_value()? {
            Some(v) => vals.push(v),
            None => ok = false,
        }
    }
    Ok(if ok { Field::Ok((vals[0], vals[1])) } else { Field::Bad })
}

/// The `usage` value: `None` for nil, a map of non-negative integer counts (0 when absent). The
/// outer error is the cursor's (a truncated or malformed body, raised at once); the inner one is
/// `invalid_field` on `usage` or a count, raised after the tensor, as the JSON decoder does.
pub(crate) fn read_usage(c: &mut Cursor<'_>) -> Result<Result<Option<Usage>>> {
    let save = c.pos;
    let (m, _) = c.marker()?;
    if matches!(m, Marker::Null) {
        return Ok(Ok(None));
    }
    if !matches!(m, Marker::FixMap(_) | Marker::Map16 | Marker::Map32) {
        c.pos = save;
        c.skip(0)?;
        return Ok(Err(Usage::not_a_map(&format!("a MessagePack {m:?}"))));
    }
    let mut u = Usage::default();
    let mut fault = None;
    for _ in 0..c.len_of(m)?.unwrap() {
        let (slot, field) = match c.str_value()? {
            Some(b"prompt_tokens") => (&mut u.prompt_tokens, "usage.prompt_tokens"),
            Some(b"total_tokens") => (&mut u.total_tokens, "usage.total_tokens"),
            _ => {
                c.skip(0)?;
                continue;
            }
        };
        let at = c.pos;
        match c.uint_value()? {
            Some(v) if v <= Usage::MAX_COUNT => *slot = v,
            _ => {
                let kind = Marker::from_u8(c.buf[at]);
                fault.get_or_insert_with(|| Usage::bad_count(field, &format!("a MessagePack {kind:?}")));
            }
        }
    }
    Ok(fault.map_or(Ok(Some(u)), Err))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(parts: &[&[u8]]) -> Bytes {
        Bytes::from(parts.concat())
    }

    #[test]
    fn any_key_order_any_int_width_unknown_keys() {
        // {"data": bin8[2], "x": [nil, {}], "shape": [uint16 1, int8 2], "dtype": "uint8"}
        let b = body(&[
            &[0x84],
            &[0xa4],
            b"data",
            &[0xc4, 2, 7, 9],
            &[0xa1],
            b"x",
            &[0x92, 0xc0, 0x80],
            &[0xa5],
            b"shape",
            &[0x92, 0xcd, 0, 1, 0xd0, 2],
            &[0xa5],
            b"dtype",
            &[0xa5],
            b"uint8",
        ]);
        let e = decode_msgpack(b.clone()).unwrap();
        assert_eq!((e.tensor.shape(), e.tensor.as_bytes()), ((1, 2), &[7u8, 9][..]));
        // The data is a slice of the body.
        assert_eq!(e.tensor.as_bytes().as_ptr(), b[8..].as_ptr());
    }

    #[test]
    fn structural_errors_have_offsets() {
        let e = decode_msgpack(Bytes::from_static(&[0x81, 0x01, 0x02])).unwrap_err();
        assert_eq!((e.kind(), e.offset()), (ErrorKind::Malformed, Some(1)));
        let e = decode_msgpack(Bytes::from_static(&[])).unwrap_err();
        assert_eq!((e.kind(), e.offset()), (ErrorKind::Truncated, Some(0)));
        let e = decode_msgpack(Bytes::from_static(&[0x81, 0xa1, b'x', 0xc6, 0xff, 0xff, 0xff, 0xff])).unwrap_err();
        assert_eq!((e.kind(), e.offset()), (ErrorKind::Truncated, Some(8)));
        let e = decode_msgpack(Bytes::from_static(&[0x81, 0xa1, b'x', 0xc1])).unwrap_err();
        assert_eq!((e.kind(), e.offset()), (ErrorKind::Malformed, Some(3)));
        // Deep nesting is refused, not a stack overflow.
        let mut deep = vec![0x81, 0xa1, b'x'];
        deep.extend(std::iter::repeat_n(0x91, 100_000));
        deep.push(0xc0);
        assert_eq!(decode_msgpack(Bytes::from(deep)).unwrap_err().kind(), ErrorKind::Malformed);
    }

    #[test]
    fn smallest_representations() {
        let t = Tensor::new(DType::Uint8, 1, 300, vec![0u8; 300]).unwrap();
        let e = Embeddings {
            tensor: t,
            model: Some("m".repeat(40)),
            usage: Some(Usage { prompt_tokens: 70000, total_tokens: 1 }),
            quantization: None,
        };
        let b = encode_msgpack(&e);
        assert_eq!(b[0], 0x85);
        assert_eq!(&b[7..9], &[0xd9, 40]); // str8 for a 40-byte model id
        assert!(b.windows(3).any(|w| w == [0xc5, 0x01, 0x2c])); // bin16 for 300 bytes
        assert!(b.windows(3).any(|w| w == [0x92, 0x01, 0xcd])); // shape [1, uint16 300]
        assert_eq!(decode_msgpack(b.into()).unwrap(), e);
    }

    #[test]
    fn usage_counts_are_non_negative_integers() {
        // {"dtype":"uint8","shape":[1,1],"data":bin[1],"usage":USAGE}
        let with = |usage: &[u8]| {
            let b = body(&[
                &[0x84, 0xa5],
                b"dtype",
                &[0xa5],
                b"uint8",
                &[0xa5],
                b"shape",
                &[0x92, 1, 1],
                &[0xa4],
                b"data",
                &[0xc4, 1, 7],
                &[0xa5],
                b"usage",
                usage,
            ]);
            decode_msgpack(b).map(|e| e.usage)
        };
        let ok = [&[0x82, 0xad][..], b"prompt_tokens", &[0xd0, 5], &[0xac], b"total_tokens", &[0xcc, 200]].concat();
        assert_eq!(with(&ok).unwrap(), Some(Usage { prompt_tokens: 5, total_tokens: 200 }));
        assert_eq!(with(&[0xc0]).unwrap(), None);
        assert_eq!(with(&[0x80]).unwrap(), Some(Usage::default()));
        for (count, field) in [(&[0xa2, b'-', b'1'][..], "usage.prompt_tokens"), (&[0xff], "usage.prompt_tokens")] {
            let bad = [&[0x81, 0xad][..], b"prompt_tokens", count].concat();
            let e = with(&bad).unwrap_err();
            assert_eq!((e.kind(), e.field_name()), (ErrorKind::InvalidField, Some(field)), "{bad:x?}");
        }
        let bad = [&[0x81, 0xac][..], b"total_tokens", &[0xcb, 0x40, 8, 0, 0, 0, 0, 0, 0]].concat(); // 3.0
        assert_eq!(with(&bad).unwrap_err().field_name(), Some("usage.total_tokens"));
        assert_eq!(with(&[0x93, 1, 2, 3]).unwrap_err().field_name(), Some("usage"));
    }
}
