//! Quantized embeddings (SPEC.md section 17): the per-dimension ranges a server calibrates and
//! publishes, the exact quantize / dequantize rule (binary64 arithmetic on the float32 values
//! widened exactly, rounded to float32 ties to even), the quantization id that names the ranges,
//! and the published object of `GET /v1/quantization/{id}`.
//!
//! ```
//! use densewire::{DType, QuantizationRanges, Tensor};
//!
//! let ranges = QuantizationRanges::new(vec![-1.0, -0.5, 0.0, -0.25], vec![1.0, 0.5, 1.0, 0.75])?;
//! assert_eq!(ranges.id(), "455fc59476466b04");
//! let x = Tensor::from_slice(1, 4, &[0.0f32, 0.1, 2.0, -0.25])?;
//! let codes = ranges.quantize(&x, DType::Int8)?; // int8 = the code 0..255 minus 128
//! assert_eq!(&*codes.view::<i8>()?, &[-1, 25, 127, -128]); // 2.0 is above its range: clamped
//! let back = ranges.dequantize(&codes)?; // the middle of each code's interval
//! let step = 1.0 / 255.0;
//! assert!((back.as_f32()?[1] - 0.1).abs() <= step);
//! # Ok::<(), densewire::Error>(())
//! ```

use crate::base64::decode_base64;
use crate::dtype::DType;
use crate::error::{ErrorKind, Result, err};
use crate::tensor::{Tensor, aligned_zeroed};
use sha2::{Digest, Sha256};

/// The only method of SPEC.md section 17: per-dimension minimum and maximum over a calibration set.
pub const QUANTIZATION_METHOD: &str = "minmax-per-dimension";

/// The id of a pair of ranges (SPEC.md section 17.4): the first 16 lowercase hex digits of the
/// SHA-256 of `lower || upper || D` (float32 little-endian, then the decimal digits of `d`).
/// The slices are not checked (see [`QuantizationRanges::new`]).
pub fn quantization_id(lower: &[f32], upper: &[f32]) -> String {
    let mut h = Sha256::new();
    for x in lower.iter().chain(upper) {
        h.update(x.to_le_bytes());
    }
    h.update(lower.len().to_string().as_bytes());
    h.finalize()[..8].iter().map(|b| format!("{b:02x}")).collect()
}

/// Checked ranges: `lower` and `upper` of `d` finite float32 items with `lower[j] <= upper[j]`.
#[derive(Debug, Clone, PartialEq)]
pub struct QuantizationRanges {
    lower: Vec<f32>,
    upper: Vec<f32>,
}

impl QuantizationRanges {
    /// Checks the ranges (SPEC.md section 17.3): `shape_mismatch` when the lengths differ;
    /// `invalid_field` on `lower[j]` for a non-finite lower, on `upper[j]` for a non-finite upper
    /// or one below its lower, `j` the first such dimension.
    pub fn new(lower: Vec<f32>, upper: Vec<f32>) -> Result<QuantizationRanges> {
        if lower.len() != upper.len() {
            return Err(err(
                ErrorKind::ShapeMismatch,
                format!("lower has {} items and upper {}", lower.len(), upper.len()),
            )
            .field("upper"));
        }
        for (j, (&lo, &hi)) in lower.iter().zip(&upper).enumerate() {
            if !lo.is_finite() {
                return Err(err(ErrorKind::InvalidField, format!("the lower bound {lo} is not finite"))
                    .field(format!("lower[{j}]")));
            }
            if !hi.is_finite() {
                return Err(err(ErrorKind::InvalidField, format!("the upper bound {hi} is not finite"))
                    .field(format!("upper[{j}]")));
            }
            if lo > hi {
                return Err(err(ErrorKind::InvalidField, format!("the upper bound {hi} is below the lower {lo}"))
                    .field(format!("upper[{j}]")));
            }
        }
        Ok(QuantizationRanges { lower, upper })
    }

    /// The lower bounds.
    pub fn lower(&self) -> &[f32] {
        &self.lower
    }

    /// The upper bounds.
    pub fn upper(&self) -> &[f32] {
        &self.upper
    }

    /// `d`, the number of dimensions.
    pub fn dims(&self) -> usize {
        self.lower.len()
    }

    /// The quantization id of these ranges (SPEC.md section 17.4).
    pub fn id(&self) -> String {
        quantization_id(&self.lower, &self.upper)
    }

    fn check_dims(&self, d: usize) -> Result<()> {
        if d != self.dims() {
            return Err(err(
                ErrorKind::ShapeMismatch,
                format!("the ranges have {} dimensions, the tensor {d}", self.dims()),
            )
            .field("lower"));
        }
        Ok(())
    }

    /// Quantizes a float tensor (float32; float16 and bfloat16 widen exactly, float64 rounds to
    /// float32 first) to `int8` or `uint8` codes by the rule of SPEC.md section 17.3.
    pub fn quantize(&self, t: &Tensor, dtype: DType) -> Result<Tensor> {
        if !matches!(dtype, DType::Int8 | DType::Uint8) {
            return Err(
                err(ErrorKind::InvalidField, format!("quantization gives int8 or uint8, not {dtype}")).field("dtype")
            );
        }
        self.check_dims(t.dims())?;
        let values = t.to_f32_vec()?; // float32 as is (binary and the integer dtypes are refused below)
        if matches!(t.dtype(), DType::Int8 | DType::Uint8) {
            return Err(
                err(ErrorKind::InvalidField, format!("a {} tensor is already quantized", t.dtype())).field("dtype")
            );
        }
        let d = self.dims();
        let offset = if dtype == DType::Int8 { 128 } else { 0 };
        let mut out = aligned_zeroed(values.len());
        if d > 0 {
            let steps = self.steps();
            for (row, dst) in values.chunks_exact(d).zip(out.as_mut_slice().chunks_exact_mut(d)) {
                for j in 0..d {
                    dst[j] = code(row[j], self.lower[j], steps[j]).wrapping_sub(offset);
                }
            }
        }
        Tensor::new(dtype, t.rows(), d, out.freeze())
    }

    /// Dequantizes `int8` or `uint8` codes to float32 (SPEC.md section 17.3): the middle of each
    /// code's interval, `lower[j] + (u + 0.5) * step` in binary64 rounded to float32, or `lower[j]`
    /// where the range is empty.
    pub fn dequantize(&self, codes: &Tensor) -> Result<Tensor> {
        let offset: u8 = match codes.dtype() {
            DType::Int8 => 128,
            DType::Uint8 => 0,
            other => {
                return Err(err(ErrorKind::InvalidField, format!("dequantize takes int8 or uint8 codes, not {other}"))
                    .field("dtype"));
            }
        };
        self.check_dims(codes.dims())?;
        let d = self.dims();
        // The 256 values of each dimension, then one table lookup per item.
        let mut table = vec![0f32; 256 * d];
        let steps = self.steps();
        for j in 0..d {
            for u in 0..256usize {
                table[j * 256 + u] = value(u as u8, self.lower[j], steps[j]);
            }
        }
        let mut out = Vec::with_capacity(codes.rows() * d);
        if d > 0 {
            for row in codes.as_bytes().chunks_exact(d) {
                out.extend(row.iter().enumerate().map(|(j, &c)| table[j * 256 + c.wrapping_add(offset) as usize]));
            }
        }
        Tensor::from_vec(codes.rows(), d, out)
    }

    fn steps(&self) -> Vec<f64> {
        self.lower.iter().zip(&self.upper).map(|(&lo, &hi)| (hi as f64 - lo as f64) / 255.0).collect()
    }
}

/// The code `u` (0–255) of `x` in a dimension of lower bound `lo` and step `step` (binary64).
#[inline]
fn code(x: f32, lo: f32, step: f64) -> u8 {
    if step > 0.0 {
        let q = ((x as f64 - lo as f64) / step).floor();
        if q.is_nan() || q <= 0.0 {
            0
        } else if q >= 255.0 {
            255
        } else {
            q as u8
        }
    } else if x > lo {
        255
    } else {
        0
    }
}

/// The float32 value of code `u` in a dimension of lower bound `lo` and step `step`.
#[inline]
fn value(u: u8, lo: f32, step: f64) -> f32 {
    if step == 0.0 {
        return lo;
    }
    let prod = (u as f64 + 0.5) * step;
    (lo as f64 + prod) as f32 // Rust's `as` rounds to nearest, ties to even
}

/// Quantizes `t` with `lower`/`upper` (checked as [`QuantizationRanges::new`] does) to `dtype`
/// (`int8` or `uint8`).
pub fn quantize(t: &Tensor, lower: &[f32], upper: &[f32], dtype: DType) -> Result<Tensor> {
    ranges_for(t.dims(), lower, upper)?.quantize(t, dtype)
}

/// Dequantizes `int8` or `uint8` codes with `lower`/`upper` to a float32 tensor (SPEC.md 17.3).
pub fn dequantize(codes: &Tensor, lower: &[f32], upper: &[f32]) -> Result<Tensor> {
    ranges_for(codes.dims(), lower, upper)?.dequantize(codes)
}

/// Ranges for a tensor of `d` dimensions: the lengths first (`shape_mismatch`), then the items.
fn ranges_for(d: usize, lower: &[f32], upper: &[f32]) -> Result<QuantizationRanges> {
    for (name, r) in [("lower", lower), ("upper", upper)] {
        if r.len() != d {
            return Err(err(
                ErrorKind::ShapeMismatch,
                format!("{name} has {} items, the tensor {d} dimensions", r.len()),
            )
            .field(name));
        }
    }
    QuantizationRanges::new(lower.to_vec(), upper.to_vec())
}

/// The published quantization object of `GET /v1/models` and `GET /v1/quantization/{id}`
/// (SPEC.md section 17.6), checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Quantization {
    /// The quantization id (checked against the ranges).
    pub id: String,
    /// The model, when the object names it.
    pub model: Option<String>,
    /// The ranges.
    pub ranges: QuantizationRanges,
    /// The calibration set's description (`name`, `texts`, `sha256`), as given.
    pub calibration: Option<serde_json::Value>,
}

impl Quantization {
    /// Reads and checks a published object (SPEC.md section 17.6), in the spec's order: the keys
    /// `id`, `method` (`minmax-per-dimension`), `dimensions`, `lower`, `upper` present and of their
    /// types (`invalid_field`); `lower` then `upper` strict Base64 (`invalid_base64` with the offset)
    /// of `4 * dimensions` bytes (`length_mismatch`); the ranges valid (section 17.3); `id` the id of
    /// the ranges (`invalid_field` on `id`). Unknown keys are ignored.
    ///
    /// ```
    /// use densewire::Quantization;
    /// let q = Quantization::from_json(br#"{"object":"quantization","id":"455fc59476466b04","model":"m",
    ///   "method":"minmax-per-dimension","dimensions":4,
    ///   "lower":"AACAvwAAAL8AAAAAAACAvg==","upper":"AACAPwAAAD8AAIA/AABAPw=="}"#)?;
    /// assert_eq!(q.ranges.lower(), &[-1.0, -0.5, 0.0, -0.25]);
    /// assert_eq!(q.ranges.upper(), &[1.0, 0.5, 1.0, 0.75]);
    /// # Ok::<(), densewire::Error>(())
    /// ```
    pub fn from_json(text: &[u8]) -> Result<Quantization> {
        let v: serde_json::Value = serde_json::from_slice(text).map_err(|e| crate::json::json_error(text, &e))?;
        Quantization::from_value(&v)
    }

    /// [`Quantization::from_json`] of an already parsed JSON value (an item of `/v1/models`).
    pub fn from_value(v: &serde_json::Value) -> Result<Quantization> {
        let obj = v.as_object().ok_or_else(|| err(ErrorKind::InvalidField, "the quantization is not an object"))?;
        let bad = |k: &'static str, what: &str| err(ErrorKind::InvalidField, format!("{k} {what}")).field(k);
        let string = |k: &'static str| -> Result<&str> {
            obj.get(k).and_then(|x| x.as_str()).ok_or_else(|| bad(k, "is missing or not a string"))
        };
        let id = string("id")?;
        let method = string("method")?;
        if method != QUANTIZATION_METHOD {
            return Err(bad(
                "method",
                &format!("{method:?} is not {QUANTIZATION_METHOD:?}: it cannot be dequantized by SPEC.md section 17.3"),
            ));
        }
        let dims = obj
            .get("dimensions")
            .and_then(|x| x.as_u64())
            .and_then(|d| usize::try_from(d).ok())
            .ok_or_else(|| bad("dimensions", "is missing or not a non-negative integer"))?;
        let lower = string("lower")?;
        let upper = string("upper")?;
        let floats = |k: &'static str, s: &str| -> Result<Vec<f32>> {
            let bytes = decode_base64(s).map_err(|e| e.field(k))?;
            let expected = dims.checked_mul(4).ok_or_else(|| bad("dimensions", "is too large"))?;
            if bytes.len() != expected {
                return Err(err(
                    ErrorKind::LengthMismatch,
                    format!("{k} is {} bytes, {dims} dimensions need {expected}", bytes.len()),
                )
                .at(bytes.len().min(expected))
                .field(k));
            }
            Ok(bytes.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect())
        };
        let lower = floats("lower", lower)?;
        let upper = floats("upper", upper)?;
        let ranges = QuantizationRanges::new(lower, upper)?;
        let actual = ranges.id();
        if actual != id {
            return Err(bad("id", &format!("{id:?} is not the id of the ranges ({actual})")));
        }
        Ok(Quantization {
            id: id.to_owned(),
            model: obj.get("model").and_then(|m| m.as_str()).map(str::to_owned),
            ranges,
            calibration: obj.get("calibration").cloned(),
        })
    }
}

impl From<Quantization> for QuantizationRanges {
    fn from(q: Quantization) -> QuantizationRanges {
        q.ranges
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edges_of_the_rule() {
        // steps 1, 0 (an empty range) and 1: every division is exact
        let r = QuantizationRanges::new(vec![0.0, 1.0, -128.0], vec![255.0, 1.0, 127.0]).unwrap();
        let x = [
            0.0f32,
            1.0,
            -128.0, // lower bounds
            255.0,
            1.0,
            127.0, // upper bounds (the empty range gives 0 at its bound)
            f32::NAN,
            f32::NAN,
            f32::INFINITY,
            -f32::INFINITY,
            2.0,
            -0.0, // above the empty range: 255
            254.99998,
            0.5,
            0.0,
        ];
        let t = Tensor::from_slice(5, 3, &x).unwrap();
        let u = r.quantize(&t, DType::Uint8).unwrap();
        assert_eq!(&*u.view::<u8>().unwrap(), &[0, 0, 0, 255, 0, 255, 0, 0, 255, 0, 255, 128, 254, 0, 128]);
        let i = r.quantize(&t, DType::Int8).unwrap();
        assert!(i.as_bytes().iter().zip(u.as_bytes()).all(|(&a, &b)| a as i8 as i16 == b as i16 - 128));
        let back = r.dequantize(&u).unwrap();
        assert_eq!(&back.as_f32().unwrap()[..6], &[0.5, 1.0, -127.5, 255.5, 1.0, 127.5]);
        assert_eq!(r.dequantize(&i).unwrap(), back);
    }

    #[test]
    fn range_checks() {
        let e = QuantizationRanges::new(vec![0.0, f32::NAN], vec![1.0, 1.0]).unwrap_err();
        assert_eq!((e.kind(), e.field_name()), (ErrorKind::InvalidField, Some("lower[1]")));
        let e = QuantizationRanges::new(vec![0.0, 2.0], vec![1.0, 1.0]).unwrap_err();
        assert_eq!((e.kind(), e.field_name()), (ErrorKind::InvalidField, Some("upper[1]")));
        let t = Tensor::from_slice(1, 2, &[0u8, 1]).unwrap();
        let e = dequantize(&t, &[0.0], &[1.0]).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ShapeMismatch);
        let f = Tensor::from_slice(1, 1, &[0.5f32]).unwrap();
        assert_eq!(quantize(&f, &[0.0], &[1.0], DType::Float16).unwrap_err().field_name(), Some("dtype"));
        assert_eq!(quantize(&t, &[0.0, 0.0], &[1.0, 1.0], DType::Int8).unwrap_err().field_name(), Some("dtype"));
    }

    #[test]
    fn published_object_checks() {
        let ok = r#"{"id":"455fc59476466b04","method":"minmax-per-dimension","dimensions":4,"lower":"AACAvwAAAL8AAAAAAACAvg==","upper":"AACAPwAAAD8AAIA/AABAPw=="}"#;
        assert_eq!(Quantization::from_json(ok.as_bytes()).unwrap().id, "455fc59476466b04");
        let bad_id = ok.replace("455f", "455e");
        assert_eq!(Quantization::from_json(bad_id.as_bytes()).unwrap_err().field_name(), Some("id"));
        let bad_method = ok.replace("minmax-per-dimension", "absmax");
        assert_eq!(Quantization::from_json(bad_method.as_bytes()).unwrap_err().field_name(), Some("method"));
        let short = ok.replace("\"dimensions\":4", "\"dimensions\":5");
        let e = Quantization::from_json(short.as_bytes()).unwrap_err();
        assert_eq!((e.kind(), e.field_name(), e.offset()), (ErrorKind::LengthMismatch, Some("lower"), Some(16)));
        let b64 = ok.replace("AACAvwAAAL8A", "AACAvwAA*L8A");
        let e = Quantization::from_json(b64.as_bytes()).unwrap_err();
        assert_eq!((e.kind(), e.field_name(), e.offset()), (ErrorKind::InvalidBase64, Some("lower"), Some(8)));
        let e = Quantization::from_json(br#"{"method":"minmax-per-dimension"}"#).unwrap_err();
        assert_eq!(e.field_name(), Some("id"));
    }
}
