//! The tensor type: an `(n, d)` row-major matrix of one dtype, held as little-endian bytes in a
//! reference-counted [`Bytes`] so that decoders can view into a received body without copying.

use crate::convert;
use crate::dtype::{DType, Element};
use crate::error::{ErrorKind, Result, err, length_mismatch};
use bytes::Bytes;
use std::borrow::Cow;
use std::fmt;

/// A row-major `(n, d)` matrix of one [`DType`], little-endian, with no padding between rows
/// except the bit padding of `binary` rows (SPEC.md section 1).
///
/// The bytes live in a [`Bytes`]: cloning a tensor or slicing it out of a received body never
/// copies. [`Tensor::view`] (and [`Tensor::as_f32`]) borrow the bytes as a typed slice when they
/// are aligned, and copy only when they are not.
///
/// ```
/// use densewire::{DType, Tensor};
/// let t = Tensor::from_slice(2, 3, &[1.0f32, -2.5, 0.1, 3.0, 0.5, -1.0]).unwrap();
/// assert_eq!(t.dtype(), DType::Float32);
/// assert_eq!(t.shape(), (2, 3));
/// assert_eq!(t.as_f32().unwrap()[1], -2.5);
/// assert_eq!(t.row(1), &t.as_bytes()[12..24]);
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Tensor {
    dtype: DType,
    rows: usize,
    dims: usize,
    data: Bytes,
}

/// The number of bytes a tensor of this dtype and shape holds, or `invalid_field` on `shape`
/// when it overflows.
pub fn expected_len(dtype: DType, rows: usize, dims: usize) -> Result<usize> {
    dtype
        .row_bytes(dims)
        .and_then(|r| r.checked_mul(rows))
        .ok_or_else(|| err(ErrorKind::InvalidField, format!("shape [{rows}, {dims}] is too large")).field("shape"))
}

impl Tensor {
    /// A tensor over `data` (little-endian bytes). Fails with `length_mismatch` (offset: the first
    /// byte missing or in excess) unless `data` has exactly `rows * row_bytes(dtype, dims)` bytes.
    pub fn new(dtype: DType, rows: usize, dims: usize, data: impl Into<Bytes>) -> Result<Tensor> {
        let data = data.into();
        let expected = expected_len(dtype, rows, dims)?;
        if data.len() != expected {
            return Err(length_mismatch(data.len(), expected));
        }
        Ok(Tensor { dtype, rows, dims, data })
    }

    /// An empty `(0, dims)` tensor.
    pub fn empty(dtype: DType, dims: usize) -> Tensor {
        Tensor { dtype, rows: 0, dims, data: Bytes::new() }
    }

    /// A tensor holding a copy of `values` (`rows * dims` items; for `u8` this makes `uint8`).
    pub fn from_slice<T: Element>(rows: usize, dims: usize, values: &[T]) -> Result<Tensor> {
        let mut v = aligned_zeroed(std::mem::size_of_val(values));
        v.as_mut_slice().copy_from_slice(bytemuck::cast_slice(values));
        #[cfg(target_endian = "big")]
        crate::dtype::swap_items(v.as_mut_slice(), std::mem::size_of::<T>());
        Tensor::new(T::DTYPE, rows, dims, v.freeze())
    }

    /// A tensor that takes ownership of `values` without copying them (on little-endian hosts).
    pub fn from_vec<T: Element>(rows: usize, dims: usize, values: Vec<T>) -> Result<Tensor> {
        #[cfg(target_endian = "little")]
        {
            Tensor::new(T::DTYPE, rows, dims, Bytes::from_owner(PodVec(values)))
        }
        #[cfg(target_endian = "big")]
        {
            Tensor::from_slice(rows, dims, &values)
        }
    }

    /// A `binary` tensor from packed bits (`ceil(dims / 8)` bytes a row, most significant bit
    /// first). The unused low bits of each row's last byte are cleared, as encoders must.
    pub fn from_packed_bits(rows: usize, dims: usize, packed: impl Into<Bytes>) -> Result<Tensor> {
        let t = Tensor::new(DType::Binary, rows, dims, packed)?;
        Ok(t.with_clear_padding_bits())
    }

    pub(crate) fn with_clear_padding_bits(self) -> Tensor {
        if self.dtype != DType::Binary || self.dims % 8 == 0 || self.rows == 0 {
            return self;
        }
        let rb = self.row_bytes();
        let mask = 0xFFu8 << (8 - self.dims % 8);
        if self.data.chunks_exact(rb).all(|r| r[rb - 1] & !mask == 0) {
            return self;
        }
        let mut v = self.data.to_vec();
        v.chunks_exact_mut(rb).for_each(|r| r[rb - 1] &= mask);
        Tensor { data: Bytes::from(v), ..self }
    }

    /// The dtype.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// `(n, d)`.
    pub fn shape(&self) -> (usize, usize) {
        (self.rows, self.dims)
    }

    /// `n`, the number of rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// `d`, the number of dimensions of each row.
    pub fn dims(&self) -> usize {
        self.dims
    }

    /// `row_bytes(dtype, d)`.
    pub fn row_bytes(&self) -> usize {
        self.dtype.row_bytes(self.dims).expect("checked at construction")
    }

    /// The tensor's bytes, little-endian.
    pub fn as_bytes(&self) -> &[u8] {
        &self.data
    }

    /// The tensor's bytes as a cheap clone of the underlying [`Bytes`].
    pub fn bytes(&self) -> &Bytes {
        &self.data
    }

    /// Takes the bytes out.
    pub fn into_bytes(self) -> Bytes {
        self.data
    }

    /// The bytes of row `i` (panics when out of range, like slice indexing).
    pub fn row(&self, i: usize) -> &[u8] {
        let rb = self.row_bytes();
        &self.data[i * rb..(i + 1) * rb]
    }

    /// Rows `start..end` as a new tensor sharing the bytes.
    pub fn slice_rows(&self, start: usize, end: usize) -> Tensor {
        let rb = self.row_bytes();
        Tensor { dtype: self.dtype, rows: end - start, dims: self.dims, data: self.data.slice(start * rb..end * rb) }
    }

    /// Whether [`Tensor::view::<T>`](Tensor::view) would borrow rather than copy.
    pub fn is_zero_copy<T: Element>(&self) -> bool {
        cfg!(target_endian = "little") && bytemuck::try_cast_slice::<u8, T>(&self.data).is_ok()
    }

    /// The items as a `&[T]` view borrowed from the bytes when they are aligned for `T` (no copy),
    /// or as an owned copy when they are not. `T` must match the dtype (`f32` for float32, `u8`
    /// for uint8 and binary, ...); otherwise `invalid_field` on `dtype`.
    pub fn view<T: Element>(&self) -> Result<Cow<'_, [T]>> {
        if !T::matches(self.dtype) {
            return Err(err(
                ErrorKind::InvalidField,
                format!("a {} tensor cannot be viewed as {}", self.dtype, std::any::type_name::<T>()),
            )
            .field("dtype"));
        }
        #[cfg(target_endian = "little")]
        if let Ok(s) = bytemuck::try_cast_slice::<u8, T>(&self.data) {
            return Ok(Cow::Borrowed(s));
        }
        let mut out = vec![T::zeroed(); self.data.len() / std::mem::size_of::<T>()];
        let raw: &mut [u8] = bytemuck::cast_slice_mut(&mut out);
        raw.copy_from_slice(&self.data);
        #[cfg(target_endian = "big")]
        crate::dtype::swap_items(raw, std::mem::size_of::<T>());
        Ok(Cow::Owned(out))
    }

    /// A float32 tensor's items: borrowed when aligned, copied otherwise. See [`Tensor::view`].
    pub fn as_f32(&self) -> Result<Cow<'_, [f32]>> {
        self.view::<f32>()
    }

    /// The items widened (or, for float64, rounded per SPEC.md section 3.3) to `f32`.
    /// float16 and bfloat16 widen exactly; int8 and uint8 become their values. `binary` has no
    /// float value: `invalid_field` on `dtype`.
    pub fn to_f32_vec(&self) -> Result<Vec<f32>> {
        let d = &self.data;
        Ok(match self.dtype {
            DType::Float32 => self.view::<f32>()?.into_owned(),
            DType::Float16 => d.chunks_exact(2).map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f32()).collect(),
            DType::BFloat16 => d.chunks_exact(2).map(|c| half::bf16::from_le_bytes([c[0], c[1]]).to_f32()).collect(),
            DType::Float64 => d
                .chunks_exact(8)
                .map(|c| f32::from_bits(convert::f64_to_f32(u64::from_le_bytes(c.try_into().unwrap()))))
                .collect(),
            DType::Int8 => d.iter().map(|&b| b as i8 as f32).collect(),
            DType::Uint8 => d.iter().map(|&b| b as f32).collect(),
            DType::Binary => {
                return Err(err(ErrorKind::InvalidField, "a binary tensor has no float values").field("dtype"));
            }
        })
    }

    /// Converts to another dtype as a sender does when asked for it (SPEC.md section 3):
    /// float32 to float16, bfloat16 or binary; float64 to float32; any dtype to itself.
    /// Other pairs are `invalid_field` on `dtype`.
    pub fn convert(&self, to: DType) -> Result<Tensor> {
        convert::convert_tensor(self, to)
    }
}

impl fmt::Debug for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tensor")
            .field("dtype", &self.dtype)
            .field("shape", &(self.rows, self.dims))
            .field("bytes", &self.data.len())
            .finish()
    }
}

/// A `Vec<T>` exposed as its bytes, so that `Bytes::from_owner` can own it without copying.
struct PodVec<T>(Vec<T>);

impl<T: bytemuck::Pod> AsRef<[u8]> for PodVec<T> {
    fn as_ref(&self) -> &[u8] {
        bytemuck::cast_slice(&self.0)
    }
}

/// A zeroed byte buffer aligned to 8 bytes (so that any dtype can be viewed in place),
/// frozen into [`Bytes`] without copying.
pub(crate) struct AlignedBuf {
    words: Vec<u64>,
    len: usize,
}

pub(crate) fn aligned_zeroed(len: usize) -> AlignedBuf {
    AlignedBuf { words: vec![0u64; len.div_ceil(8)], len }
}

impl AlignedBuf {
    pub(crate) fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut bytemuck::cast_slice_mut(&mut self.words)[..self.len]
    }

    /// An empty buffer with room for `cap` bytes (to be filled with [`AlignedBuf::extend`]).
    #[allow(dead_code)]
    pub(crate) fn with_capacity(cap: usize) -> AlignedBuf {
        AlignedBuf { words: vec![0u64; cap.div_ceil(8)], len: 0 }
    }

    /// Appends bytes, growing the buffer (amortised doubling) when needed.
    #[allow(dead_code)]
    pub(crate) fn extend(&mut self, data: &[u8]) {
        let new_len = self.len + data.len();
        if new_len > self.words.len() * 8 {
            let words = new_len.div_ceil(8).max(self.words.len() * 2);
            self.words.resize(words, 0);
        }
        bytemuck::cast_slice_mut(&mut self.words)[self.len..new_len].copy_from_slice(data);
        self.len = new_len;
    }

    #[allow(dead_code)]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
    }

    pub(crate) fn freeze(self) -> Bytes {
        if self.len == 0 {
            return Bytes::new();
        }
        Bytes::from_owner(self)
    }
}

impl AsRef<[u8]> for AlignedBuf {
    fn as_ref(&self) -> &[u8] {
        &bytemuck::cast_slice(&self.words)[..self.len]
    }
}

/// Copies `src` into a fresh 8-byte-aligned buffer.
/// `b` itself when it starts on an 8-byte boundary (or is empty), else an aligned copy.
#[allow(dead_code)]
pub(crate) fn realigned(b: Bytes) -> Bytes {
    if b.is_empty() || (b.as_ptr() as usize) % 8 == 0 { b } else { aligned_copy(&b) }
}

#[allow(dead_code)]
pub(crate) fn aligned_copy(src: &[u8]) -> Bytes {
    let mut b = aligned_zeroed(src.len());
    b.as_mut_slice().copy_from_slice(src);
    b.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn from_vec_does_not_copy_and_views_borrow() {
        let v = vec![1.0f32, 2.0, 3.0, 4.0];
        let ptr = v.as_ptr() as *const u8;
        let t = Tensor::from_vec(2, 2, v).unwrap();
        assert_eq!(t.as_bytes().as_ptr(), ptr);
        assert!(matches!(t.as_f32().unwrap(), Cow::Borrowed(_)));
        assert_eq!(t.slice_rows(1, 2).as_f32().unwrap()[..], [3.0, 4.0]);
    }

    #[test]
    fn wrong_view_type_and_lengths_are_errors() {
        let t = Tensor::from_slice(1, 2, &[1.0f64, 2.0]).unwrap();
        assert_eq!(t.as_f32().unwrap_err().kind(), ErrorKind::InvalidField);
        assert_eq!(t.to_f32_vec().unwrap(), vec![1.0, 2.0]);
        let e = Tensor::new(DType::Float32, 2, 2, vec![0u8; 15]).unwrap_err();
        assert_eq!((e.kind(), e.offset()), (ErrorKind::LengthMismatch, Some(15)));
        let e = Tensor::new(DType::Float32, usize::MAX, 2, vec![]).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidField);
    }

    #[test]
    fn binary_padding_bits_are_cleared() {
        let t = Tensor::from_packed_bits(2, 12, vec![0xff, 0xff, 0x00, 0x1f]).unwrap();
        assert_eq!(t.as_bytes(), &[0xff, 0xf0, 0x00, 0x10]);
    }

    #[test]
    fn widening_is_exact() {
        let t =
            Tensor::from_slice(1, 3, &[half::f16::from_bits(0x0001), half::f16::MAX, half::f16::NEG_INFINITY]).unwrap();
        assert_eq!(t.to_f32_vec().unwrap(), vec![2f32.powi(-24), 65504.0, f32::NEG_INFINITY]);
        let b = Tensor::from_slice(1, 1, &[half::bf16::from_bits(0x3f81)]).unwrap();
        assert_eq!(b.to_f32_vec().unwrap(), vec![f32::from_bits(0x3f81_0000)]);
    }
}
