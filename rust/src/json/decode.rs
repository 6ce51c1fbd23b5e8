//! Decoding the JSON embeddings response (SPEC.md section 6.2) with serde visitors that keep
//! Base64 rows borrowed from the input and report every error with its JSON path.

use crate::base64::{decode_into_slice, decoded_len_upper};
use crate::convert::{f64_to_bf16, f64_to_f16};
use crate::dtype::{ByteOrder, DType, swap_items};
use crate::embeddings::{Embeddings, Usage};
use crate::error::{Error, ErrorKind, Result, err, length_mismatch};
use crate::tensor::{Tensor, aligned_zeroed};
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use std::borrow::Cow;
use std::fmt;

/// A value that may have the wrong JSON type (kept so that the error can name the field).
enum Loose<T> {
    Absent,
    Null,
    Ok(T),
    WrongType,
}

impl<T> Default for Loose<T> {
    fn default() -> Self {
        Loose::Absent
    }
}

/// A string, or the fact that the value was something else.
struct LooseStr<'a>(Loose<Cow<'a, str>>);

impl<'de> de::Deserialize<'de> for LooseStr<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        d.deserialize_any(AnyVisitor(|v: Any<'de>| match v {
            Any::Str(s) => Loose::Ok(s),
            Any::Null => Loose::Null,
            _ => Loose::WrongType,
        }))
        .map(LooseStr)
    }
}

/// A non-negative integer, or the fact that the value was something else.
struct LooseU64(Loose<u64>);

impl<'de> de::Deserialize<'de> for LooseU64 {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        d.deserialize_any(AnyVisitor(|v: Any<'de>| match v {
            Any::U64(n) => Loose::Ok(n),
            Any::Null => Loose::Null,
            _ => Loose::WrongType,
        }))
        .map(LooseU64)
    }
}

/// What a scalar visitor saw; compound values are skipped.
enum Any<'a> {
    Str(Cow<'a, str>),
    U64(u64),
    Null,
    Other,
}

struct AnyVisitor<F>(F);

impl<'de, T, F: FnOnce(Any<'de>) -> T> Visitor<'de> for AnyVisitor<F> {
    type Value = T;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> std::result::Result<T, E> {
        Ok((self.0)(Any::Str(Cow::Borrowed(v))))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> std::result::Result<T, E> {
        Ok((self.0)(Any::Str(Cow::Owned(v.to_owned()))))
    }
    fn visit_string<E: de::Error>(self, v: String) -> std::result::Result<T, E> {
        Ok((self.0)(Any::Str(Cow::Owned(v))))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> std::result::Result<T, E> {
        Ok((self.0)(Any::U64(v)))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> std::result::Result<T, E> {
        Ok((self.0)(if v >= 0 { Any::U64(v as u64) } else { Any::Other }))
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> std::result::Result<T, E> {
        Ok((self.0)(Any::Other))
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> std::result::Result<T, E> {
        Ok((self.0)(Any::Other))
    }
    fn visit_unit<E: de::Error>(self) -> std::result::Result<T, E> {
        Ok((self.0)(Any::Null))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<T, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok((self.0)(Any::Other))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<T, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok((self.0)(Any::Other))
    }
}

/// One `embedding`: a Base64 string, an array of numbers, or something else.
/// Numbers are kept as float64 (SPEC.md section 3.5); a non-number element is stored as NaN,
/// which no JSON number can produce.
enum Embedding<'a> {
    Str(Cow<'a, str>),
    Nums(Vec<f64>),
    WrongType,
}

impl<'de> de::Deserialize<'de> for Embedding<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Embedding<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a Base64 string or an array of numbers")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> std::result::Result<Self::Value, E> {
                Ok(Embedding::Str(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> std::result::Result<Self::Value, E> {
                Ok(Embedding::Str(Cow::Owned(v.to_owned())))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<Self::Value, A::Error> {
                let mut v = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1 << 16));
                while let Some(x) = seq.next_element::<Num>()? {
                    v.push(x.0);
                }
                Ok(Embedding::Nums(v))
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> std::result::Result<Self::Value, E> {
                Ok(Embedding::WrongType)
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> std::result::Result<Self::Value, E> {
                Ok(Embedding::WrongType)
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> std::result::Result<Self::Value, E> {
                Ok(Embedding::WrongType)
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> std::result::Result<Self::Value, E> {
                Ok(Embedding::WrongType)
            }
            fn visit_unit<E: de::Error>(self) -> std::result::Result<Self::Value, E> {
                Ok(Embedding::WrongType)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<Self::Value, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Embedding::WrongType)
            }
        }
        d.deserialize_any(V)
    }
}

struct Num(f64);

impl<'de> de::Deserialize<'de> for Num {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Num;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a number")
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> std::result::Result<Num, E> {
                Ok(Num(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> std::result::Result<Num, E> {
                Ok(Num(v as f64))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> std::result::Result<Num, E> {
                Ok(Num(v as f64))
            }
            fn visit_str<E: de::Error>(self, _: &str) -> std::result::Result<Num, E> {
                Ok(Num(f64::NAN))
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> std::result::Result<Num, E> {
                Ok(Num(f64::NAN))
            }
            fn visit_unit<E: de::Error>(self) -> std::result::Result<Num, E> {
                Ok(Num(f64::NAN))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<Num, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Num(f64::NAN))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<Num, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Num(f64::NAN))
            }
        }
        d.deserialize_any(V)
    }
}

/// One element of `data`.
#[derive(Default)]
struct Row<'a> {
    index: Loose<u64>,
    embedding: Option<Embedding<'a>>,
    not_an_object: bool,
}

impl<'de> de::Deserialize<'de> for Row<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Row<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an embedding object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<Row<'de>, A::Error> {
                let mut row = Row::default();
                while let Some(key) = map.next_key::<Cow<'de, str>>()? {
                    match &*key {
                        "index" => row.index = map.next_value::<LooseU64>()?.0,
                        "embedding" => row.embedding = Some(map.next_value()?),
                        _ => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(row)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<Row<'de>, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Row { not_an_object: true, ..Row::default() })
            }
            fn visit_str<E: de::Error>(self, _: &str) -> std::result::Result<Row<'de>, E> {
                Ok(Row { not_an_object: true, ..Row::default() })
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> std::result::Result<Row<'de>, E> {
                Ok(Row { not_an_object: true, ..Row::default() })
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> std::result::Result<Row<'de>, E> {
                Ok(Row { not_an_object: true, ..Row::default() })
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> std::result::Result<Row<'de>, E> {
                Ok(Row { not_an_object: true, ..Row::default() })
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> std::result::Result<Row<'de>, E> {
                Ok(Row { not_an_object: true, ..Row::default() })
            }
            fn visit_unit<E: de::Error>(self) -> std::result::Result<Row<'de>, E> {
                Ok(Row { not_an_object: true, ..Row::default() })
            }
        }
        d.deserialize_any(V)
    }
}

/// `data`: an array of rows, or something else.
struct Data<'a>(Loose<Vec<Row<'a>>>);

impl<'de> de::Deserialize<'de> for Data<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Data<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an array of embeddings")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<Data<'de>, A::Error> {
                let mut v = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
                while let Some(r) = seq.next_element()? {
                    v.push(r);
                }
                Ok(Data(Loose::Ok(v)))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<Data<'de>, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Data(Loose::WrongType))
            }
            fn visit_unit<E: de::Error>(self) -> std::result::Result<Data<'de>, E> {
                Ok(Data(Loose::Null))
            }
            fn visit_str<E: de::Error>(self, _: &str) -> std::result::Result<Data<'de>, E> {
                Ok(Data(Loose::WrongType))
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> std::result::Result<Data<'de>, E> {
                Ok(Data(Loose::WrongType))
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> std::result::Result<Data<'de>, E> {
                Ok(Data(Loose::WrongType))
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> std::result::Result<Data<'de>, E> {
                Ok(Data(Loose::WrongType))
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> std::result::Result<Data<'de>, E> {
                Ok(Data(Loose::WrongType))
            }
        }
        d.deserialize_any(V)
    }
}

#[derive(Default)]
struct Response<'a> {
    data: Loose<Vec<Row<'a>>>,
    model: Loose<Cow<'a, str>>,
    usage: Option<&'a serde_json::value::RawValue>,
    dtype: Loose<Cow<'a, str>>,
    byteorder: Loose<Cow<'a, str>>,
    dimensions: Loose<u64>,
    quantization: Loose<Cow<'a, str>>,
    kind: bool,
    not_an_object: bool,
}

impl<'de> de::Deserialize<'de> for Response<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Response<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an embeddings response object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<Response<'de>, A::Error> {
                let mut r = Response::default();
                while let Some(key) = map.next_key::<Cow<'de, str>>()? {
                    match &*key {
                        "data" => r.data = map.next_value::<Data>()?.0,
                        "model" => r.model = map.next_value::<LooseStr>()?.0,
                        "usage" => r.usage = Some(map.next_value()?),
                        "dtype" => r.dtype = map.next_value::<LooseStr>()?.0,
                        "byteorder" => r.byteorder = map.next_value::<LooseStr>()?.0,
                        "dimensions" => r.dimensions = map.next_value::<LooseU64>()?.0,
                        "quantization" => r.quantization = map.next_value::<LooseStr>()?.0,
                        "kind" => {
                            map.next_value::<IgnoredAny>()?;
                            r.kind = true;
                        }
                        _ => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(r)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<Response<'de>, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Response { not_an_object: true, ..Response::default() })
            }
            fn visit_str<E: de::Error>(self, _: &str) -> std::result::Result<Response<'de>, E> {
                Ok(Response { not_an_object: true, ..Response::default() })
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> std::result::Result<Response<'de>, E> {
                Ok(Response { not_an_object: true, ..Response::default() })
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> std::result::Result<Response<'de>, E> {
                Ok(Response { not_an_object: true, ..Response::default() })
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> std::result::Result<Response<'de>, E> {
                Ok(Response { not_an_object: true, ..Response::default() })
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> std::result::Result<Response<'de>, E> {
                Ok(Response { not_an_object: true, ..Response::default() })
            }
            fn visit_unit<E: de::Error>(self) -> std::result::Result<Response<'de>, E> {
                Ok(Response { not_an_object: true, ..Response::default() })
            }
        }
        d.deserialize_any(V)
    }
}

/// A serde_json error as `malformed`, with the byte offset of its line and column.
pub(crate) fn json_error(text: &[u8], e: &serde_json::Error) -> Error {
    let mut offset = 0usize;
    let mut line = 1usize;
    if e.line() > 0 {
        for (i, &b) in text.iter().enumerate() {
            if line == e.line() {
                offset = i;
                break;
            }
            if b == b'\n' {
                line += 1;
            }
        }
        offset = (offset + e.column().saturating_sub(1)).min(text.len());
    }
    let kind = ErrorKind::Malformed;
    err(kind, format!("invalid JSON: {e}")).at(offset)
}

/// Decodes a JSON embeddings response (SPEC.md section 6.2). Rows are placed by `index`; absent
/// `dtype`, `byteorder` and `dimensions` default as the spec says, so OpenAI responses decode.
///
/// ```
/// use densewire::decode_json;
/// let text = br#"{"object":"list","data":[{"object":"embedding","index":0,"embedding":"AACAPwAAIMDNzMw9"}],
///   "model":"m","usage":{"prompt_tokens":3,"total_tokens":3}}"#;
/// let e = decode_json(text).unwrap();
/// assert_eq!(&*e.tensor.as_f32().unwrap(), &[1.0, -2.5, 0.1]);
/// assert_eq!(e.model.as_deref(), Some("m"));
/// ```
pub fn decode_json(text: &[u8]) -> Result<Embeddings> {
    let r: Response<'_> = serde_json::from_slice(text).map_err(|e| json_error(text, &e))?;
    if r.not_an_object {
        return Err(err(ErrorKind::Malformed, "the JSON body is not an object").at(0));
    }
    if r.kind {
        return Err(crate::ragged::no_kind("kind"));
    }
    let dtype = match r.dtype {
        Loose::Absent | Loose::Null => DType::Float32,
        Loose::Ok(s) => DType::from_name(&s)?,
        Loose::WrongType => return Err(err(ErrorKind::InvalidField, "dtype is not a string").field("dtype")),
    };
    let order = match r.byteorder {
        Loose::Absent | Loose::Null => ByteOrder::Little,
        Loose::Ok(s) => ByteOrder::from_name(&s)?,
        Loose::WrongType => return Err(err(ErrorKind::InvalidField, "byteorder is not a string").field("byteorder")),
    };
    let rows = match r.data {
        Loose::Ok(rows) => rows,
        Loose::Absent => return Err(err(ErrorKind::InvalidField, "data is missing").field("data")),
        _ => return Err(err(ErrorKind::InvalidField, "data is not an array").field("data")),
    };
    let dims_field = match r.dimensions {
        Loose::Absent | Loose::Null => None,
        Loose::Ok(d) => Some(usize::try_from(d).map_err(|_| dims_error())?),
        Loose::WrongType => return Err(dims_error()),
    };
    let model = match r.model {
        Loose::Ok(m) => Some(m.into_owned()),
        _ => None,
    };
    let quantization = match r.quantization {
        Loose::Absent => None,
        Loose::Ok(q) => Some(q.into_owned()),
        Loose::Null | Loose::WrongType => {
            return Err(err(ErrorKind::InvalidField, "quantization is not a string").field("quantization"));
        }
    };
    let tensor = assemble(dtype, order, dims_field, rows)?;
    let usage = Usage::from_json(r.usage)?;
    Ok(Embeddings { tensor, model, usage, quantization })
}

fn dims_error() -> Error {
    err(ErrorKind::InvalidField, "dimensions is not a non-negative integer").field("dimensions")
}

fn emb_field(i: usize) -> String {
    format!("data[{i}].embedding")
}

/// Places the rows by index into one tensor, checking every row against the shape.
fn assemble(dtype: DType, order: ByteOrder, dims_field: Option<usize>, rows: Vec<Row<'_>>) -> Result<Tensor> {
    let n = rows.len();
    for (i, row) in rows.iter().enumerate() {
        if row.not_an_object {
            return Err(err(ErrorKind::InvalidField, "an element of data is not an object").field(format!("data[{i}]")));
        }
        match row.embedding {
            None => return Err(err(ErrorKind::InvalidField, "embedding is missing").field(emb_field(i))),
            Some(Embedding::WrongType) => {
                return Err(err(
                    ErrorKind::InvalidField,
                    "embedding is neither a Base64 string nor an array of numbers",
                )
                .field(emb_field(i)));
            }
            _ => {}
        }
    }
    // d: the dimensions field, else the first row (SPEC.md section 6.2).
    let item = dtype.item_bytes();
    let mut first_decoded: Option<Vec<u8>> = None;
    let dims = match (dims_field, rows.first()) {
        (Some(d), _) => d,
        (None, None) => 0,
        (None, Some(row)) => match row.embedding.as_ref().unwrap() {
            Embedding::Nums(v) if dtype == DType::Binary => v.len() * 8,
            Embedding::Nums(v) => v.len(),
            Embedding::Str(s) => {
                let bytes = crate::base64::decode_base64(s).map_err(|e| e.field(emb_field(0)))?;
                if bytes.len() % item != 0 {
                    let whole = bytes.len() - bytes.len() % item;
                    return Err(length_mismatch(bytes.len(), whole).field(emb_field(0)));
                }
                let d = if dtype == DType::Binary { bytes.len() * 8 } else { bytes.len() / item };
                first_decoded = Some(bytes);
                d
            }
            _ => unreachable!(),
        },
    };
    let rb = dtype.row_bytes(dims).ok_or_else(dims_error)?;
    let total = rb.checked_mul(n).ok_or_else(dims_error)?;
    check_rows_can_fill(dtype, dims, rb, &rows)?;
    let mut buf = aligned_zeroed(total);
    let out = buf.as_mut_slice();
    let mut seen = vec![false; n];
    let mut scratch = Vec::new();
    for (i, row) in rows.iter().enumerate() {
        let k = match row.index {
            Loose::Ok(k) if (k as u128) < n as u128 && !seen[k as usize] => k as usize,
            Loose::Ok(k) if (k as u128) < n as u128 => {
                return Err(err(ErrorKind::ShapeMismatch, format!("index {k} occurs more than once"))
                    .field(format!("data[{i}].index")));
            }
            Loose::Ok(k) => {
                return Err(err(ErrorKind::ShapeMismatch, format!("index {k} is outside [0, {n})"))
                    .field(format!("data[{i}].index")));
            }
            Loose::Absent => {
                return Err(err(ErrorKind::InvalidField, "index is missing").field(format!("data[{i}].index")));
            }
            _ => {
                return Err(err(ErrorKind::InvalidField, "index is not a non-negative integer")
                    .field(format!("data[{i}].index")));
            }
        };
        seen[k] = true;
        let slot = &mut out[k * rb..(k + 1) * rb];
        match row.embedding.as_ref().unwrap() {
            Embedding::Str(s) => {
                let decoded: &[u8] = match (i, &first_decoded) {
                    (0, Some(b)) => b,
                    _ => {
                        scratch.resize(decoded_len_upper(s.len()), 0);
                        let m = decode_into_slice(s, &mut scratch).map_err(|e| e.field(emb_field(i)))?;
                        &scratch[..m]
                    }
                };
                if decoded.len() != rb {
                    return Err(length_mismatch(decoded.len(), rb).field(emb_field(i)));
                }
                slot.copy_from_slice(decoded);
                if order == ByteOrder::Big {
                    swap_items(slot, item);
                }
            }
            Embedding::Nums(v) => fill_numbers(dtype, dims, v, slot, i)?,
            _ => unreachable!(),
        }
    }
    Ok(Tensor::new(dtype, n, dims, buf.freeze())?.with_clear_padding_bits())
}

/// Fails on the first row that cannot hold `rb` bytes, before the tensor is allocated: a declared
/// `dimensions` far beyond what the rows carry (fuzzing found `2222222222222220`) must be a row error,
/// not an allocation of petabytes. Rows that can hold `rb` bytes are checked in full later.
fn check_rows_can_fill(dtype: DType, dims: usize, rb: usize, rows: &[Row<'_>]) -> Result<()> {
    for (i, row) in rows.iter().enumerate() {
        match row.embedding.as_ref() {
            Some(Embedding::Nums(v)) => {
                let want = if dtype == DType::Binary { rb } else { dims };
                if v.len() != want {
                    return Err(row_count_error(v.len(), want, i));
                }
            }
            Some(Embedding::Str(s)) if crate::base64::decoded_len_upper(s.len()) < rb => {
                let decoded = crate::base64::decode_base64(s).map_err(|e| e.field(emb_field(i)))?;
                return Err(length_mismatch(decoded.len(), rb).field(emb_field(i)));
            }
            _ => {}
        }
    }
    Ok(())
}

fn row_count_error(got: usize, want: usize, i: usize) -> Error {
    err(ErrorKind::ShapeMismatch, format!("row has {got} numbers, the shape needs {want}")).field(emb_field(i))
}

fn fill_numbers(dtype: DType, dims: usize, v: &[f64], slot: &mut [u8], i: usize) -> Result<()> {
    let want = if dtype == DType::Binary { slot.len() } else { dims };
    if v.len() != want {
        return Err(row_count_error(v.len(), want, i));
    }
    let bad = |j: usize, what: &str| {
        err(ErrorKind::InvalidField, what.to_string()).field(format!("data[{i}].embedding[{j}]"))
    };
    for (j, &x) in v.iter().enumerate() {
        put_number(dtype, x, slot, j).map_err(|what| bad(j, what))?;
    }
    Ok(())
}

/// One JSON number (NaN: an element that was not a number) as item `j` of a row of `dtype` in
/// `slot` (binary: packed byte `j`); the error says why it cannot be.
pub(crate) fn put_number(dtype: DType, x: f64, slot: &mut [u8], j: usize) -> std::result::Result<(), &'static str> {
    if x.is_nan() {
        return Err("not a number");
    }
    match dtype {
        DType::Float32 => slot[4 * j..4 * j + 4].copy_from_slice(&(x as f32).to_le_bytes()),
        DType::Float64 => slot[8 * j..8 * j + 8].copy_from_slice(&x.to_le_bytes()),
        DType::Float16 => slot[2 * j..2 * j + 2].copy_from_slice(&f64_to_f16(x.to_bits()).to_le_bytes()),
        DType::BFloat16 => slot[2 * j..2 * j + 2].copy_from_slice(&f64_to_bf16(x.to_bits()).to_le_bytes()),
        DType::Int8 => {
            if x.fract() != 0.0 || !(-128.0..=127.0).contains(&x) {
                return Err("not an int8 value (an integer in -128..=127)");
            }
            slot[j] = x as i8 as u8;
        }
        DType::Uint8 | DType::Binary => {
            if x.fract() != 0.0 || !(0.0..=255.0).contains(&x) {
                return Err("not a byte value (an integer in 0..=255)");
            }
            slot[j] = x as u8;
        }
    }
    Ok(())
}
