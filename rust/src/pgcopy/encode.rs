//! Writing binary COPY streams (SPEC.md section 16.2, "Writing"): every check on the whole input (or
//! the whole chunk) first, then one pass that lays the tuples into a buffer sized exactly, each row's
//! items byte-swapped to big-endian in one slice operation.

use super::{CopyColumns, PGCOPY_HEADER, PGCOPY_TRAILER, PgIdType, PgIds, PgVectorType, SPARSEVEC_MAX_NNZ};
use crate::convert::{f32_to_f16, f64_to_f16, f64_to_f32};
use crate::dtype::DType;
use crate::error::{ErrorKind, Result, err};
use crate::table::{format_uuid, parse_uuid};
use crate::tensor::Tensor;
use bytes::Bytes;
use std::borrow::Cow;
use std::ops::Range;

/// The whole stream (header, one tuple per row, trailer) of `tensor` for a column of
/// `columns.vector_type`, with `ids` in the id column when `columns` has one.
///
/// The input is checked before any byte is written: NaN or ±Infinity after conversion to the
/// column's type (`vector`, `halfvec`, `sparsevec`) is `non_finite` on `COLUMN[ROW][DIM]`; `d`
/// outside the type's range, or a dtype that cannot fill the column (int8, uint8 and binary fill
/// only `bit`), is `invalid_field` on the column; a `sparsevec` row with more than 16,000 non-zero
/// values is `invalid_field` on `COLUMN[ROW]`; an id that does not fit its type on `ID_COLUMN[ROW]`.
///
/// Conversions (SPEC.md section 16.2): `vector` widens float16 and bfloat16 exactly and rounds
/// float64; `halfvec` rounds float32 and float64 to float16 (ties to even), bfloat16 through float32;
/// `bit` packs `value > 0`; `sparsevec` leaves out ±0.0.
pub fn encode_pgcopy(tensor: &Tensor, columns: &CopyColumns, ids: Option<&PgIds>) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    out.extend_from_slice(PGCOPY_HEADER);
    encode_pgcopy_rows(tensor, columns, ids, 0..tensor.rows(), &mut out)?;
    out.extend_from_slice(PGCOPY_TRAILER);
    Ok(out)
}

/// Appends the tuples of rows `rows` of `tensor` (no header, no trailer) to `out`, for a stream
/// written in pieces. `ids` are the ids of all of the tensor's rows (the same ones for every call);
/// errors name rows by their index in the whole tensor. The rows are checked before anything is
/// appended: on an error `out` is unchanged.
pub fn encode_pgcopy_rows(
    tensor: &Tensor,
    columns: &CopyColumns,
    ids: Option<&PgIds>,
    rows: Range<usize>,
    out: &mut Vec<u8>,
) -> Result<()> {
    if rows.start > rows.end || rows.end > tensor.rows() {
        return Err(err(
            ErrorKind::InvalidField,
            format!("rows {}..{} are not within the tensor's {} rows", rows.start, rows.end, tensor.rows()),
        )
        .field("rows"));
    }
    check_columns(tensor, columns, ids)?;
    let values = column_values(tensor, columns, rows.clone())?;
    let id_col = match (columns.id_type, ids) {
        (Some(ty), Some(ids)) => Some(prepare_ids(ids, ty, &columns.id_column, rows.clone())?),
        _ => None,
    };
    let n = rows.len();
    let d = tensor.dims();
    let sparse_nnz = match columns.vector_type {
        PgVectorType::Sparsevec => Some(sparse_counts(&values, n, d, &columns.column, rows.start)?),
        _ => None,
    };

    // The exact length of the tuples, then one pass that fills them.
    let value_len = |r: usize| -> usize {
        match columns.vector_type {
            PgVectorType::Vector => 4 + 4 * d,
            PgVectorType::Halfvec => 4 + 2 * d,
            PgVectorType::Bit => 4 + d.div_ceil(8),
            PgVectorType::Sparsevec => 12 + 8 * sparse_nnz.as_ref().unwrap()[r],
        }
    };
    let mut total = 0usize;
    for r in 0..n {
        total += 2 + 4 + value_len(r) + id_col.as_ref().map_or(0, |c| 4 + c.len(r));
    }
    let start = out.len();
    out.resize(start + total, 0);
    let mut w = Writer { buf: &mut out[start..], pos: 0 };
    let count = columns.count() as i16;
    match columns.vector_type {
        PgVectorType::Vector | PgVectorType::Halfvec => {
            let item = if columns.vector_type == PgVectorType::Vector { 4 } else { 2 };
            let row_bytes = item * d;
            let head: [u8; 8] = {
                let mut h = [0u8; 8];
                h[..4].copy_from_slice(&(value_len(0) as i32).to_be_bytes());
                h[4..6].copy_from_slice(&(d as i16).to_be_bytes()); // d <= 16,000
                h
            };
            for (r, src) in values.chunks_exact(row_bytes).enumerate() {
                w.put(&count.to_be_bytes());
                if let Some(c) = &id_col {
                    c.write(&mut w, r);
                }
                w.put(&head);
                w.put_swapped(src, item);
            }
        }
        PgVectorType::Bit => {
            let row_bytes = d.div_ceil(8);
            let mut head = [0u8; 8];
            head[..4].copy_from_slice(&(value_len(0) as i32).to_be_bytes());
            head[4..].copy_from_slice(&(d as i32).to_be_bytes());
            for (r, src) in values.chunks_exact(row_bytes).enumerate() {
                w.put(&count.to_be_bytes());
                if let Some(c) = &id_col {
                    c.write(&mut w, r);
                }
                w.put(&head);
                w.put(src);
            }
        }
        PgVectorType::Sparsevec => {
            let nnz = sparse_nnz.as_ref().unwrap();
            for (r, src) in values.chunks_exact(4 * d).enumerate() {
                w.put(&count.to_be_bytes());
                if let Some(c) = &id_col {
                    c.write(&mut w, r);
                }
                w.put(&(value_len(r) as i32).to_be_bytes());
                w.put(&(d as i32).to_be_bytes());
                w.put(&(nnz[r] as i32).to_be_bytes());
                w.put(&0i32.to_be_bytes());
                let items = || src.chunks_exact(4).map(|c| u32::from_le_bytes(c.try_into().unwrap())).enumerate();
                for (j, _) in items().filter(|(_, b)| b & 0x7FFF_FFFF != 0) {
                    w.put(&(j as i32).to_be_bytes());
                }
                for (_, b) in items().filter(|(_, b)| b & 0x7FFF_FFFF != 0) {
                    w.put(&b.to_be_bytes());
                }
            }
        }
    }
    debug_assert_eq!(w.pos, total);
    Ok(())
}

/// The stream of `tensor` in pieces: the header, then the tuples of `rows_per_chunk` rows at a time
/// (each piece checked before it is produced, see [`encode_pgcopy`]), then the trailer. Memory stays
/// bounded by one chunk whatever the number of rows. Feed the pieces to a COPY (for tokio-postgres,
/// `CopyInSink::send`); after an error the iterator ends, and the COPY must be aborted (a
/// tokio-postgres sink dropped without `finish` aborts it), so that PostgreSQL keeps no row of it.
pub fn pgcopy_chunks<'a>(
    tensor: &'a Tensor,
    columns: &'a CopyColumns,
    ids: Option<&'a PgIds>,
    rows_per_chunk: usize,
) -> PgCopyChunks<'a> {
    PgCopyChunks { tensor, columns, ids, rows_per_chunk: rows_per_chunk.max(1), next: 0, state: State::Header }
}

/// The iterator of [`pgcopy_chunks`].
#[derive(Debug)]
pub struct PgCopyChunks<'a> {
    tensor: &'a Tensor,
    columns: &'a CopyColumns,
    ids: Option<&'a PgIds>,
    rows_per_chunk: usize,
    next: usize,
    state: State,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Header,
    Rows,
    Done,
}

impl Iterator for PgCopyChunks<'_> {
    type Item = Result<Bytes>;

    fn next(&mut self) -> Option<Result<Bytes>> {
        match self.state {
            State::Done => None,
            State::Header => {
                if let Err(e) = check_columns(self.tensor, self.columns, self.ids) {
                    self.state = State::Done;
                    return Some(Err(e));
                }
                self.state = State::Rows;
                Some(Ok(Bytes::from_static(PGCOPY_HEADER)))
            }
            State::Rows => {
                let n = self.tensor.rows();
                if self.next >= n {
                    self.state = State::Done;
                    return Some(Ok(Bytes::from_static(PGCOPY_TRAILER)));
                }
                let end = n.min(self.next + self.rows_per_chunk);
                let mut out = Vec::new();
                match encode_pgcopy_rows(self.tensor, self.columns, self.ids, self.next..end, &mut out) {
                    Ok(()) => {
                        self.next = end;
                        Some(Ok(Bytes::from(out)))
                    }
                    Err(e) => {
                        self.state = State::Done;
                        Some(Err(e))
                    }
                }
            }
        }
    }
}

// ------------------------------------------------------------------ checks and conversions

/// What is wrong whatever the rows: `d`, the dtype, the ids' presence and count.
fn check_columns(t: &Tensor, cols: &CopyColumns, ids: Option<&PgIds>) -> Result<()> {
    let ty = cols.vector_type;
    let d = t.dims();
    if d < 1 || d > ty.max_dims() {
        return Err(err(ErrorKind::InvalidField, format!("a {ty} has 1 to {} dimensions, not {d}", ty.max_dims()))
            .field(cols.column.clone()));
    }
    if ty != PgVectorType::Bit && matches!(t.dtype(), DType::Int8 | DType::Uint8 | DType::Binary) {
        return Err(err(ErrorKind::InvalidField, format!("a {} tensor cannot fill a {ty} column", t.dtype()))
            .field(cols.column.clone()));
    }
    match (cols.id_type, ids) {
        (None, Some(_)) => {
            Err(err(ErrorKind::InvalidField, "ids were given but the COPY has no id column")
                .field(cols.id_column.clone()))
        }
        (Some(_), None) => Err(err(ErrorKind::InvalidField, "the COPY has an id column but no ids were given")
            .field(cols.id_column.clone())),
        (Some(_), Some(ids)) if ids.len() != t.rows() => {
            Err(err(ErrorKind::ShapeMismatch, format!("{} ids for {} vectors", ids.len(), t.rows()))
                .field(cols.id_column.clone()))
        }
        _ => Ok(()),
    }
}

/// The vector column's values for `rows`, little-endian in the column's item type (float32 for
/// vector and sparsevec, float16 for halfvec, packed bits for bit), checked for NaN and infinities.
fn column_values<'a>(t: &'a Tensor, cols: &CopyColumns, rows: Range<usize>) -> Result<Cow<'a, [u8]>> {
    let rb = t.row_bytes();
    let src = &t.as_bytes()[rows.start * rb..rows.end * rb];
    let (n, d) = (rows.len(), t.dims());
    let ty = cols.vector_type;
    if ty == PgVectorType::Bit {
        return Ok(to_bits(t.dtype(), src, n, d));
    }
    let (values, item) =
        if ty == PgVectorType::Halfvec { (to_f16(t.dtype(), src), 2) } else { (to_f32(t.dtype(), src), 4) };
    if let Some(i) = first_non_finite(&values, item) {
        let (r, c) = (i / d, i % d);
        let shown = if item == 4 {
            f32::from_bits(u32::from_le_bytes(values[4 * i..4 * i + 4].try_into().unwrap())).to_string()
        } else {
            half::f16::from_bits(u16::from_le_bytes([values[2 * i], values[2 * i + 1]])).to_string()
        };
        let after =
            if t.dtype() == ty.dtype() { String::new() } else { format!(" (after conversion to {})", ty.dtype()) };
        return Err(err(
            ErrorKind::NonFinite,
            format!("{shown}{after} cannot be stored in a {ty}: pgvector refuses NaN and infinity"),
        )
        .field(format!("{}[{}][{c}]", cols.column, rows.start + r)));
    }
    Ok(values)
}

fn map_items<const W: usize, const V: usize>(src: &[u8], f: impl Fn([u8; W]) -> [u8; V]) -> Vec<u8> {
    let mut out = vec![0u8; src.len() / W * V];
    for (s, o) in src.chunks_exact(W).zip(out.chunks_exact_mut(V)) {
        o.copy_from_slice(&f(s.try_into().unwrap()));
    }
    out
}

fn to_f32(dtype: DType, src: &[u8]) -> Cow<'_, [u8]> {
    match dtype {
        DType::Float32 => Cow::Borrowed(src),
        DType::Float16 => Cow::Owned(map_items(src, |b: [u8; 2]| half::f16::from_le_bytes(b).to_f32().to_le_bytes())),
        DType::BFloat16 => Cow::Owned(map_items(src, |b: [u8; 2]| half::bf16::from_le_bytes(b).to_f32().to_le_bytes())),
        DType::Float64 => Cow::Owned(map_items(src, |b: [u8; 8]| f64_to_f32(u64::from_le_bytes(b)).to_le_bytes())),
        _ => unreachable!("checked by check_columns"),
    }
}

fn to_f16(dtype: DType, src: &[u8]) -> Cow<'_, [u8]> {
    match dtype {
        DType::Float16 => Cow::Borrowed(src),
        DType::Float32 => Cow::Owned(map_items(src, |b: [u8; 4]| f32_to_f16(u32::from_le_bytes(b)).to_le_bytes())),
        DType::BFloat16 => Cow::Owned(map_items(src, |b: [u8; 2]| {
            f32_to_f16(half::bf16::from_le_bytes(b).to_f32().to_bits()).to_le_bytes()
        })),
        DType::Float64 => Cow::Owned(map_items(src, |b: [u8; 8]| f64_to_f16(u64::from_le_bytes(b)).to_le_bytes())),
        _ => unreachable!("checked by check_columns"),
    }
}

/// Packed bits of `n` rows: binary as is with its pad bits cleared, anything else `value > 0`.
fn to_bits(dtype: DType, src: &[u8], n: usize, d: usize) -> Cow<'_, [u8]> {
    let rb = d.div_ceil(8);
    if dtype == DType::Binary {
        if d % 8 == 0 {
            return Cow::Borrowed(src);
        }
        let mask = 0xFFu8 << (8 - d % 8);
        if src.chunks_exact(rb).all(|r| r[rb - 1] & !mask == 0) {
            return Cow::Borrowed(src);
        }
        let mut v = src.to_vec();
        v.chunks_exact_mut(rb).for_each(|r| r[rb - 1] &= mask);
        return Cow::Owned(v);
    }
    let w = dtype.item_bytes();
    let positive = |c: &[u8]| -> bool {
        match dtype {
            DType::Float32 => f32::from_le_bytes(c.try_into().unwrap()) > 0.0,
            DType::Float64 => f64::from_le_bytes(c.try_into().unwrap()) > 0.0,
            DType::Float16 => half::f16::from_le_bytes([c[0], c[1]]).to_f32() > 0.0,
            DType::BFloat16 => half::bf16::from_le_bytes([c[0], c[1]]).to_f32() > 0.0,
            DType::Int8 => (c[0] as i8) > 0,
            _ => c[0] > 0, // uint8
        }
    };
    let mut out = vec![0u8; n * rb];
    for (row, dst) in src.chunks_exact(w * d).zip(out.chunks_exact_mut(rb)) {
        for (j, c) in row.chunks_exact(w).enumerate() {
            if positive(c) {
                dst[j / 8] |= 0x80 >> (j % 8);
            }
        }
    }
    Cow::Owned(out)
}

/// The index of the first NaN or ±Infinity among little-endian float32 (`item` 4) or float16
/// (`item` 2) values. Blocks are scanned with a branch-free fold first.
fn first_non_finite(values: &[u8], item: usize) -> Option<usize> {
    const BLOCK: usize = 4096;
    let bad = |c: &[u8]| -> bool {
        if item == 4 {
            u32::from_le_bytes(c.try_into().unwrap()) & 0x7F80_0000 == 0x7F80_0000
        } else {
            u16::from_le_bytes([c[0], c[1]]) & 0x7C00 == 0x7C00
        }
    };
    for (b, block) in values.chunks(BLOCK * item).enumerate() {
        if block.chunks_exact(item).fold(false, |acc, c| acc | bad(c)) {
            return Some(b * BLOCK + block.chunks_exact(item).position(bad).unwrap());
        }
    }
    None
}

/// The number of non-zero values of each row of little-endian float32 values (±0.0 are zero),
/// checked against pgvector's limit.
fn sparse_counts(values: &[u8], n: usize, d: usize, column: &str, row0: usize) -> Result<Vec<usize>> {
    let mut counts = Vec::with_capacity(n);
    for (r, row) in values.chunks_exact(4 * d).enumerate() {
        let nnz =
            row.chunks_exact(4).filter(|c| u32::from_le_bytes((*c).try_into().unwrap()) & 0x7FFF_FFFF != 0).count();
        if nnz > SPARSEVEC_MAX_NNZ {
            return Err(err(
                ErrorKind::InvalidField,
                format!("a sparsevec holds at most {SPARSEVEC_MAX_NNZ} non-zero values, row {} has {nnz}", row0 + r),
            )
            .field(format!("{column}[{}]", row0 + r)));
        }
        counts.push(nnz);
    }
    Ok(counts)
}

// ------------------------------------------------------------------ ids

/// An id column's values for the rows being written, converted to the column's type and checked.
enum IdColumn<'a> {
    /// int8 (width 8) or int4 (width 4, range checked).
    Int(Cow<'a, [Option<i64>]>, usize),
    Text(Vec<Option<Cow<'a, str>>>),
    Uuid(Cow<'a, [Option<[u8; 16]>]>),
}

impl IdColumn<'_> {
    /// The value's byte length (0 for NULL: the tuple has only the length word -1).
    fn len(&self, r: usize) -> usize {
        match self {
            IdColumn::Int(v, w) => v[r].map_or(0, |_| *w),
            IdColumn::Text(v) => v[r].as_ref().map_or(0, |s| s.len()),
            IdColumn::Uuid(v) => v[r].map_or(0, |_| 16),
        }
    }

    fn write(&self, w: &mut Writer<'_>, r: usize) {
        const NULL: [u8; 4] = (-1i32).to_be_bytes();
        match self {
            IdColumn::Int(v, 8) => match v[r] {
                Some(x) => {
                    w.put(&8i32.to_be_bytes());
                    w.put(&x.to_be_bytes());
                }
                None => w.put(&NULL),
            },
            IdColumn::Int(v, _) => match v[r] {
                Some(x) => {
                    w.put(&4i32.to_be_bytes());
                    w.put(&(x as i32).to_be_bytes()); // range checked by prepare_ids
                }
                None => w.put(&NULL),
            },
            IdColumn::Text(v) => match &v[r] {
                Some(s) => {
                    w.put(&(s.len() as i32).to_be_bytes());
                    w.put(s.as_bytes());
                }
                None => w.put(&NULL),
            },
            IdColumn::Uuid(v) => match &v[r] {
                Some(u) => {
                    w.put(&16i32.to_be_bytes());
                    w.put(u);
                }
                None => w.put(&NULL),
            },
        }
    }
}

fn prepare_ids<'a>(ids: &'a PgIds, ty: PgIdType, name: &str, rows: Range<usize>) -> Result<IdColumn<'a>> {
    let (row0, n) = (rows.start, rows.len());
    let bad = |i: usize, message: String| err(ErrorKind::InvalidField, message).field(format!("{name}[{}]", row0 + i));
    // Ids of a kind that cannot convert: an error at the first that is not NULL.
    let wrong_kind = |kind: &str, first_not_null: Option<usize>| -> Result<IdColumn<'a>> {
        match first_not_null {
            Some(i) => Err(bad(i, format!("a {kind} id cannot fill a {ty} column"))),
            None if ty == PgIdType::Uuid => Ok(IdColumn::Uuid(Cow::Owned(vec![None; n]))),
            None => Ok(IdColumn::Int(Cow::Owned(vec![None; n]), ty.width().unwrap_or(8))),
        }
    };
    match ty {
        PgIdType::Int8 | PgIdType::Int4 => {
            let ints: Cow<'a, [Option<i64>]> = match ids {
                PgIds::Int(v) => Cow::Borrowed(&v[rows.clone()]),
                PgIds::Text(v) => {
                    let mut out = Vec::with_capacity(rows.len());
                    for (i, s) in v[rows.clone()].iter().enumerate() {
                        out.push(match s {
                            None => None,
                            Some(s) => Some(s.parse::<i64>().map_err(|_| bad(i, format!("id {s:?} is not an {ty}")))?),
                        });
                    }
                    Cow::Owned(out)
                }
                PgIds::Uuid(v) => return wrong_kind("uuid", v[rows.clone()].iter().position(Option::is_some)),
            };
            if ty == PgIdType::Int4 {
                if let Some(i) = ints.iter().position(|x| x.is_some_and(|x| i32::try_from(x).is_err())) {
                    return Err(bad(i, format!("id {} is out of the int4 range", ints[i].unwrap())));
                }
            }
            Ok(IdColumn::Int(ints, ty.width().unwrap()))
        }
        PgIdType::Text => Ok(IdColumn::Text(match ids {
            PgIds::Text(v) => v[rows].iter().map(|s| s.as_deref().map(Cow::Borrowed)).collect(),
            PgIds::Int(v) => v[rows].iter().map(|x| x.map(|x| Cow::Owned(x.to_string()))).collect(),
            PgIds::Uuid(v) => v[rows].iter().map(|u| u.as_ref().map(|u| Cow::Owned(format_uuid(u)))).collect(),
        })),
        PgIdType::Uuid => match ids {
            PgIds::Uuid(v) => Ok(IdColumn::Uuid(Cow::Borrowed(&v[rows]))),
            PgIds::Text(v) => {
                let mut out = Vec::with_capacity(rows.len());
                for (i, s) in v[rows].iter().enumerate() {
                    out.push(match s {
                        None => None,
                        Some(s) => Some(parse_uuid(s).ok_or_else(|| bad(i, format!("id {s:?} is not a uuid")))?),
                    });
                }
                Ok(IdColumn::Uuid(Cow::Owned(out)))
            }
            PgIds::Int(v) => wrong_kind("integer", v[rows].iter().position(Option::is_some)),
        },
    }
}

// ------------------------------------------------------------------ the output buffer

/// Fills a buffer of exactly the tuples' length.
struct Writer<'a> {
    buf: &'a mut [u8],
    pos: usize,
}

impl Writer<'_> {
    #[inline]
    fn put(&mut self, b: &[u8]) {
        self.buf[self.pos..self.pos + b.len()].copy_from_slice(b);
        self.pos += b.len();
    }

    /// Little-endian items of `item` bytes, written big-endian: the whole row in one loop that the
    /// compiler turns into vector byte shuffles.
    #[inline]
    fn put_swapped(&mut self, src: &[u8], item: usize) {
        let dst = &mut self.buf[self.pos..self.pos + src.len()];
        match item {
            4 => {
                for (d, s) in dst.chunks_exact_mut(4).zip(src.chunks_exact(4)) {
                    d.copy_from_slice(&[s[3], s[2], s[1], s[0]]);
                }
            }
            2 => {
                for (d, s) in dst.chunks_exact_mut(2).zip(src.chunks_exact(2)) {
                    d.copy_from_slice(&[s[1], s[0]]);
                }
            }
            _ => unreachable!("items of 2 or 4 bytes"),
        }
        self.pos += src.len();
    }
}
