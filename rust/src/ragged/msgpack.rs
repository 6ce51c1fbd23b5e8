//! Ragged and sparse MessagePack bodies (SPEC.md 20.5): one map `{model?, kind, dtype, shape,
//! offsets, indices (sparse), data, usage?}`, smallest representations (byte-exact with the golden
//! vectors); the rows, indices and values are slices of the body.

use super::{Batch, RaggedEmbeddings, RaggedTensor, SparseEmbeddings, check_kind, check_values_dtype, check_vocab};
use crate::dtype::DType;
use crate::embeddings::Usage;
use crate::error::{ErrorKind, Result, err};
use crate::msgpack::{Cursor, Field, read_shape, read_usage};
use bytes::Bytes;
use rmp::Marker;

const OK: &str = "writing to a Vec cannot fail";

fn encode<T>(b: &Batch<T>, kind: &str, dtype: DType, shape: (u64, u64), parts: &[(&str, &[u8])]) -> Vec<u8> {
    let mut out = Vec::with_capacity(parts.iter().map(|p| p.1.len() + 16).sum::<usize>() + 128);
    let w = &mut out;
    let fields = 3 + parts.len() + usize::from(b.model.is_some()) + usize::from(b.usage.is_some());
    rmp::encode::write_map_len(w, fields as u32).expect(OK);
    if let Some(m) = &b.model {
        rmp::encode::write_str(w, "model").expect(OK);
        rmp::encode::write_str(w, m).expect(OK);
    }
    for (k, v) in [("kind", kind), ("dtype", dtype.name())] {
        rmp::encode::write_str(w, k).expect(OK);
        rmp::encode::write_str(w, v).expect(OK);
    }
    rmp::encode::write_str(w, "shape").expect(OK);
    rmp::encode::write_array_len(w, 2).expect(OK);
    rmp::encode::write_uint(w, shape.0).expect(OK);
    rmp::encode::write_uint(w, shape.1).expect(OK);
    for (k, v) in parts {
        rmp::encode::write_str(w, k).expect(OK);
        rmp::encode::write_bin(w, v).expect(OK);
    }
    if let Some(u) = b.usage {
        rmp::encode::write_str(w, "usage").expect(OK);
        rmp::encode::write_map_len(w, 2).expect(OK);
        rmp::encode::write_str(w, "prompt_tokens").expect(OK);
        rmp::encode::write_uint(w, u.prompt_tokens).expect(OK);
        rmp::encode::write_str(w, "total_tokens").expect(OK);
        rmp::encode::write_uint(w, u.total_tokens).expect(OK);
    }
    out
}

pub(crate) fn encode_ragged(b: &RaggedEmbeddings) -> Vec<u8> {
    let t = &b.tensor;
    let offsets = super::offsets_bytes(t.offsets());
    encode(
        b,
        "ragged",
        t.dtype(),
        (t.len() as u64, t.dims() as u64),
        &[("offsets", &offsets), ("data", t.rows().as_bytes())],
    )
}

pub(crate) fn encode_sparse(b: &SparseEmbeddings) -> Vec<u8> {
    let t = &b.tensor;
    let offsets = super::offsets_bytes(t.offsets());
    encode(
        b,
        "sparse",
        t.dtype(),
        (t.len() as u64, t.vocabulary_size()),
        &[("offsets", &offsets), ("indices", t.index_bytes()), ("data", t.values().as_bytes())],
    )
}

/// The map's fields as read; bins are `(start, len)` in the body.
struct Map<'a> {
    kind: Field<&'a [u8]>,
    dtype: Field<&'a [u8]>,
    shape: Field<(u64, u64)>,
    offsets: Field<(usize, usize)>,
    indices: Field<(usize, usize)>,
    data: Field<(usize, usize)>,
    model: Option<String>,
    usage: Result<Option<Usage>>,
}

fn bin(c: &mut Cursor<'_>) -> Result<Field<(usize, usize)>> {
    let save = c.pos;
    let (m, _) = c.marker()?;
    if matches!(m, Marker::Bin8 | Marker::Bin16 | Marker::Bin32) {
        let n = c.len_of(m)?.unwrap();
        let start = c.pos;
        c.take(n)?;
        return Ok(Field::Ok((start, n)));
    }
    c.pos = save;
    c.skip(0)?;
    Ok(Field::Bad)
}

fn read(body: &Bytes) -> Result<Map<'_>> {
    let mut c = Cursor { buf: body, pos: 0 };
    let (m, at) = c.marker()?;
    let entries = match m {
        Marker::FixMap(_) | Marker::Map16 | Marker::Map32 => c.len_of(m)?.unwrap(),
        _ => return Err(err(ErrorKind::Malformed, "the MessagePack body is not a map").at(at)),
    };
    let mut r = Map {
        kind: Field::Absent,
        dtype: Field::Absent,
        shape: Field::Absent,
        offsets: Field::Absent,
        indices: Field::Absent,
        data: Field::Absent,
        model: None,
        usage: Ok(None),
    };
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
            b"kind" => r.kind = c.str_value()?.map_or(Field::Bad, Field::Ok),
            b"dtype" => r.dtype = c.str_value()?.map_or(Field::Bad, Field::Ok),
            b"model" => r.model = c.str_value()?.map(|s| String::from_utf8_lossy(s).into_owned()),
            b"shape" => r.shape = read_shape(&mut c)?,
            b"offsets" => r.offsets = bin(&mut c)?,
            b"indices" => r.indices = bin(&mut c)?,
            b"data" => r.data = bin(&mut c)?,
            b"usage" => r.usage = read_usage(&mut c)?,
            _ => c.skip(0)?,
        }
    }
    if c.pos != body.len() {
        return Err(
            err(ErrorKind::Malformed, format!("{} bytes follow the MessagePack map", body.len() - c.pos)).at(c.pos)
        );
    }
    Ok(r)
}

fn invalid(field: &'static str, what: &str) -> crate::Error {
    err(ErrorKind::InvalidField, format!("{field} is missing or not {what}")).field(field)
}

/// Kind, dtype and shape (SPEC.md 20.1 step 1).
fn head(r: &Map<'_>, kind: &str) -> Result<(DType, (u64, u64))> {
    let k = match r.kind {
        Field::Ok(k) => Some(std::str::from_utf8(k).unwrap_or("\u{fffd}")),
        Field::Absent => None,
        Field::Bad => Some("(not a string)"),
    };
    check_kind(k, kind, "kind")?;
    let dtype = match r.dtype {
        Field::Ok(name) => {
            DType::from_name(std::str::from_utf8(name).unwrap_or("\u{fffd}")).map_err(|e| e.or_field("dtype"))?
        }
        _ => return Err(invalid("dtype", "a string")),
    };
    let shape = match r.shape {
        Field::Ok(s) => s,
        _ => return Err(invalid("shape", "two non-negative integers")),
    };
    Ok((dtype, shape))
}

/// The offsets (SPEC.md 20.1 steps 2 and 3).
fn offsets(r: &Map<'_>, body: &Bytes, n: u64) -> Result<Vec<u32>> {
    let n = usize::try_from(n).map_err(|_| invalid("shape", "two non-negative integers"))?;
    match r.offsets {
        Field::Ok((start, len)) => super::read_offsets(&body[start..start + len], n, 0),
        _ => Err(invalid("offsets", "a bin")),
    }
}

pub(crate) fn decode_ragged(body: Bytes) -> Result<RaggedEmbeddings> {
    let r = read(&body)?;
    let (dtype, (n, d)) = head(&r, "ragged")?;
    let offsets = offsets(&r, &body, n)?;
    let d = usize::try_from(d).map_err(|_| invalid("shape", "two non-negative integers"))?;
    let rows = match r.data {
        Field::Ok((start, len)) => super::rows_tensor(dtype, d, &offsets, body.slice(start..start + len), 0)?,
        _ => return Err(invalid("data", "a bin")),
    };
    let usage = r.usage?;
    Ok(Batch { tensor: RaggedTensor { offsets, rows }, model: r.model, usage })
}

pub(crate) fn decode_sparse(body: Bytes) -> Result<SparseEmbeddings> {
    let r = read(&body)?;
    let (dtype, (n, v)) = head(&r, "sparse")?;
    check_values_dtype(dtype, "dtype")?;
    check_vocab(v, "shape")?;
    let offsets = offsets(&r, &body, n)?;
    let indices = match r.indices {
        Field::Ok((start, len)) => body.slice(start..start + len),
        _ => return Err(invalid("indices", "a bin")),
    };
    let values = match r.data {
        Field::Ok((start, len)) => body.slice(start..start + len),
        _ => return Err(invalid("data", "a bin")),
    };
    let tensor = super::sparse_parts(dtype, v, offsets, indices, values, 0, 0)?;
    let usage = r.usage?;
    Ok(Batch { tensor, model: r.model, usage })
}
