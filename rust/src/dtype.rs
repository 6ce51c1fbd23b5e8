//! Dtypes (SPEC.md section 2) and byte orders (section 4).

use crate::error::{Error, ErrorKind, Result, err};
use std::fmt;
use std::str::FromStr;

/// The element type of a tensor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DType {
    /// IEEE 754 binary32, the default everywhere.
    Float32,
    /// IEEE 754 binary16.
    Float16,
    /// The top 16 bits of a binary32.
    BFloat16,
    /// IEEE 754 binary64.
    Float64,
    /// Two's complement bytes, carried as given.
    Int8,
    /// Bytes, carried as given.
    Uint8,
    /// Packed bits, most significant bit first, each row padded to a whole byte.
    Binary,
}

impl DType {
    /// Every dtype, in the order of SPEC.md section 2.
    pub const ALL: [DType; 7] =
        [DType::Float32, DType::Float16, DType::BFloat16, DType::Float64, DType::Int8, DType::Uint8, DType::Binary];

    /// The exact lowercase name (`float32`, ...).
    pub fn name(self) -> &'static str {
        match self {
            DType::Float32 => "float32",
            DType::Float16 => "float16",
            DType::BFloat16 => "bfloat16",
            DType::Float64 => "float64",
            DType::Int8 => "int8",
            DType::Uint8 => "uint8",
            DType::Binary => "binary",
        }
    }

    /// Parses an exact dtype name; anything else (`Float32`, `fp16`) is `unknown_dtype` on `dtype`.
    pub fn from_name(name: &str) -> Result<DType> {
        DType::ALL
            .into_iter()
            .find(|d| d.name() == name)
            .ok_or_else(|| err(ErrorKind::UnknownDtype, format!("unknown dtype {name:?}")).field("dtype"))
    }

    /// The Protobuf enum value (1..=7).
    pub fn proto_value(self) -> i32 {
        match self {
            DType::Float32 => 1,
            DType::Float16 => 2,
            DType::BFloat16 => 3,
            DType::Float64 => 4,
            DType::Int8 => 5,
            DType::Uint8 => 6,
            DType::Binary => 7,
        }
    }

    /// The dtype of a Protobuf enum value; 0 and unknown values fail.
    pub fn from_proto_value(v: u64) -> Result<DType> {
        match v {
            0 => Err(err(ErrorKind::InvalidField, "dtype is absent or DTYPE_UNSPECIFIED").field("dtype")),
            1..=7 => Ok(DType::ALL[(v - 1) as usize]),
            _ => Err(err(ErrorKind::UnknownDtype, format!("unknown dtype enum value {v}")).field("dtype")),
        }
    }

    /// Bytes per stored item: 4, 2, 2, 8, 1, 1, and 1 for `binary` (one packed byte).
    pub fn item_bytes(self) -> usize {
        match self {
            DType::Float32 => 4,
            DType::Float16 | DType::BFloat16 => 2,
            DType::Float64 => 8,
            DType::Int8 | DType::Uint8 | DType::Binary => 1,
        }
    }

    /// `row_bytes(dtype, d)`: `ceil(d / 8)` for `binary`, `d * item_bytes` otherwise.
    /// `None` on overflow.
    pub fn row_bytes(self, d: usize) -> Option<usize> {
        match self {
            DType::Binary => Some(d / 8 + usize::from(d % 8 != 0)),
            _ => d.checked_mul(self.item_bytes()),
        }
    }

    /// Whether this is a floating-point dtype.
    pub fn is_float(self) -> bool {
        matches!(self, DType::Float32 | DType::Float16 | DType::BFloat16 | DType::Float64)
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for DType {
    type Err = Error;
    fn from_str(s: &str) -> Result<DType> {
        DType::from_name(s)
    }
}

/// The byte order of items wider than one byte. Little-endian is canonical; big-endian exists for
/// the Base64 codec and the JSON envelope only (SPEC.md section 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ByteOrder {
    /// Little-endian (canonical).
    #[default]
    Little,
    /// Big-endian (Elasticsearch, Jackson, pgvector).
    Big,
}

impl ByteOrder {
    /// `little` or `big`.
    pub fn name(self) -> &'static str {
        match self {
            ByteOrder::Little => "little",
            ByteOrder::Big => "big",
        }
    }

    /// Parses `little` or `big`; anything else is `invalid_field` on `byteorder`.
    pub fn from_name(name: &str) -> Result<ByteOrder> {
        match name {
            "little" => Ok(ByteOrder::Little),
            "big" => Ok(ByteOrder::Big),
            _ => {
                Err(err(ErrorKind::InvalidField, format!("unknown byte order {name:?} (little or big)"))
                    .field("byteorder"))
            }
        }
    }
}

impl fmt::Display for ByteOrder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for ByteOrder {
    type Err = Error;
    fn from_str(s: &str) -> Result<ByteOrder> {
        ByteOrder::from_name(s)
    }
}

/// Reverses each `width`-byte item of `data` in place (little- to big-endian and back).
pub(crate) fn swap_items(data: &mut [u8], width: usize) {
    match width {
        2 => data.chunks_exact_mut(2).for_each(|c| c.swap(0, 1)),
        4 => data.chunks_exact_mut(4).for_each(|c| {
            let v = u32::from_ne_bytes([c[0], c[1], c[2], c[3]]).swap_bytes();
            c.copy_from_slice(&v.to_ne_bytes());
        }),
        8 => data.chunks_exact_mut(8).for_each(|c| c.reverse()),
        _ => {}
    }
}

/// A Rust element type that a tensor of one dtype can be viewed as.
///
/// Implemented for `f32` (float32), `f64` (float64), [`half::f16`] (float16), [`half::bf16`]
/// (bfloat16), `i8` (int8) and `u8` (uint8 and binary's packed bytes).
pub trait Element: bytemuck::Pod + Send + Sync + 'static {
    /// The dtypes whose bytes are this type's little-endian representation.
    fn matches(dtype: DType) -> bool;
    /// The dtype a slice of this type becomes.
    const DTYPE: DType;
}

impl Element for f32 {
    const DTYPE: DType = DType::Float32;
    fn matches(d: DType) -> bool {
        d == DType::Float32
    }
}
impl Element for f64 {
    const DTYPE: DType = DType::Float64;
    fn matches(d: DType) -> bool {
        d == DType::Float64
    }
}
impl Element for half::f16 {
    const DTYPE: DType = DType::Float16;
    fn matches(d: DType) -> bool {
        d == DType::Float16
    }
}
impl Element for half::bf16 {
    const DTYPE: DType = DType::BFloat16;
    fn matches(d: DType) -> bool {
        d == DType::BFloat16
    }
}
impl Element for i8 {
    const DTYPE: DType = DType::Int8;
    fn matches(d: DType) -> bool {
        d == DType::Int8
    }
}
impl Element for u8 {
    const DTYPE: DType = DType::Uint8;
    fn matches(d: DType) -> bool {
        matches!(d, DType::Uint8 | DType::Binary)
    }
}
