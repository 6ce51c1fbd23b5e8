//! The table model (SPEC.md section 15): named, typed columns of `n` rows. The bottom of the
//! tables' graph: the format modules (`json`, `csv`, `msgpack`, `protobuf`, `arrow`) import it, and
//! [`super`] dispatches to them.
//!
//! Fixed-width columns hold their little-endian bytes in a [`Bytes`]: binary decoders (MessagePack,
//! plain Protobuf, Arrow) slice the received body without copying, and [`Values::as_slice`] borrows
//! those bytes as a typed slice when they are aligned (bytemuck, no `unsafe`), copying only when
//! they are not.

use crate::error::{ErrorKind, Result, err};
use crate::tensor::aligned_zeroed;
use bytes::Bytes;
use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

/// A column type of SPEC.md section 15.1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ColumnType {
    /// `bool`: one byte a value, 0 or 1.
    Bool,
    /// `int32`.
    Int32,
    /// `int64`.
    Int64,
    /// `float32`.
    Float32,
    /// `float64`.
    Float64,
    /// `string`: UTF-8 text.
    String,
    /// `uuid`: 16 bytes in RFC 9562 order.
    Uuid,
    /// `float32[d]`: a vector of `d >= 1` float32 items.
    Float32Vector(usize),
}

impl ColumnType {
    /// The type name (`float32[384]` for vectors).
    pub fn name(self) -> Cow<'static, str> {
        Cow::Borrowed(match self {
            ColumnType::Bool => "bool",
            ColumnType::Int32 => "int32",
            ColumnType::Int64 => "int64",
            ColumnType::Float32 => "float32",
            ColumnType::Float64 => "float64",
            ColumnType::String => "string",
            ColumnType::Uuid => "uuid",
            ColumnType::Float32Vector(d) => return Cow::Owned(format!("float32[{d}]")),
        })
    }

    /// Parses a type name: exact lowercase ASCII, `d` in decimal without leading zeros and at
    /// least 1. Anything else is `unknown_dtype`.
    ///
    /// ```
    /// use densewire::ColumnType;
    /// assert_eq!(ColumnType::from_name("float32[384]").unwrap(), ColumnType::Float32Vector(384));
    /// assert!(ColumnType::from_name("float32[0384]").is_err());
    /// assert!(ColumnType::from_name("Int32").is_err());
    /// ```
    pub fn from_name(name: &str) -> Result<ColumnType> {
        Ok(match name {
            "bool" => ColumnType::Bool,
            "int32" => ColumnType::Int32,
            "int64" => ColumnType::Int64,
            "float32" => ColumnType::Float32,
            "float64" => ColumnType::Float64,
            "string" => ColumnType::String,
            "uuid" => ColumnType::Uuid,
            _ => {
                let d = name
                    .strip_prefix("float32[")
                    .and_then(|r| r.strip_suffix(']'))
                    .filter(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()) && !d.starts_with('0'))
                    .and_then(|d| d.parse::<usize>().ok())
                    .filter(|&d| d >= 1 && d <= u32::MAX as usize);
                match d {
                    Some(d) => ColumnType::Float32Vector(d),
                    None => {
                        let shown: String = name.chars().take(64).collect();
                        return Err(err(ErrorKind::UnknownDtype, format!("unknown column type {shown:?}")));
                    }
                }
            }
        })
    }

    /// The byte width of one value, `None` for `string`; a vector's is `4 * d`.
    pub fn width(self) -> Option<usize> {
        Some(match self {
            ColumnType::Bool => 1,
            ColumnType::Int32 | ColumnType::Float32 => 4,
            ColumnType::Int64 | ColumnType::Float64 => 8,
            ColumnType::Uuid => 16,
            ColumnType::Float32Vector(d) => d.checked_mul(4)?,
            ColumnType::String => return None,
        })
    }

    /// The byte width of one item (a vector's items are float32), `None` for `string`. This is
    /// the `w` of byte-stream-split.
    pub fn item_width(self) -> Option<usize> {
        match self {
            ColumnType::Float32Vector(_) => Some(4),
            t => t.width(),
        }
    }

    /// The `ColumnType` enum value of `table.proto` (vectors are 8, with `dimensions = d`).
    pub fn proto_value(self) -> i32 {
        match self {
            ColumnType::Bool => 1,
            ColumnType::Int32 => 2,
            ColumnType::Int64 => 3,
            ColumnType::Float32 => 4,
            ColumnType::Float64 => 5,
            ColumnType::String => 6,
            ColumnType::Uuid => 7,
            ColumnType::Float32Vector(_) => 8,
        }
    }
}

impl fmt::Display for ColumnType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

/// A fixed-width item type a column can be viewed as: `u8` (bool), `i32`, `i64`, `f32`, `f64`,
/// `[u8; 16]` (uuid).
pub trait TableItem: bytemuck::Pod + Send + Sync + 'static {}
impl TableItem for u8 {}
impl TableItem for i32 {}
impl TableItem for i64 {}
impl TableItem for f32 {}
impl TableItem for f64 {}
impl TableItem for [u8; 16] {}

/// The values of a fixed-width column: little-endian bytes, often a slice of the received body.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Values<T> {
    bytes: Bytes,
    _item: PhantomData<T>,
}

impl<T: TableItem> Values<T> {
    /// Values over little-endian bytes (a whole number of items; checked by the decoders).
    pub(crate) fn from_bytes(bytes: Bytes) -> Values<T> {
        debug_assert_eq!(bytes.len() % std::mem::size_of::<T>(), 0);
        Values { bytes, _item: PhantomData }
    }

    /// Values holding a copy of `items`, in an 8-byte-aligned buffer.
    pub fn from_slice(items: &[T]) -> Values<T> {
        let mut buf = aligned_zeroed(std::mem::size_of_val(items));
        buf.as_mut_slice().copy_from_slice(bytemuck::cast_slice(items));
        #[cfg(target_endian = "big")]
        crate::dtype::swap_items(buf.as_mut_slice(), std::mem::size_of::<T>());
        Values::from_bytes(buf.freeze())
    }

    /// The number of items (for vectors: `n * d` floats).
    pub fn len(&self) -> usize {
        self.bytes.len() / std::mem::size_of::<T>()
    }

    /// Whether there are no items.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// The little-endian bytes.
    pub fn bytes(&self) -> &Bytes {
        &self.bytes
    }

    /// Whether [`Values::as_slice`] borrows rather than copies.
    pub fn is_zero_copy(&self) -> bool {
        cfg!(target_endian = "little") && bytemuck::try_cast_slice::<u8, T>(&self.bytes).is_ok()
    }

    /// The items, borrowed from the bytes when they are aligned for `T`, copied when not.
    pub fn as_slice(&self) -> Cow<'_, [T]> {
        #[cfg(target_endian = "little")]
        if let Ok(s) = bytemuck::try_cast_slice::<u8, T>(&self.bytes) {
            return Cow::Borrowed(s);
        }
        let mut out = vec![T::zeroed(); self.len()];
        let raw: &mut [u8] = bytemuck::cast_slice_mut(&mut out);
        raw.copy_from_slice(&self.bytes);
        #[cfg(target_endian = "big")]
        crate::dtype::swap_items(raw, std::mem::size_of::<T>());
        Cow::Owned(out)
    }

    /// Item `i` (panics when out of range, like slice indexing).
    pub fn get(&self, i: usize) -> T {
        let w = std::mem::size_of::<T>();
        let mut v = T::zeroed();
        let raw: &mut [u8] = bytemuck::bytes_of_mut(&mut v);
        raw.copy_from_slice(&self.bytes[i * w..(i + 1) * w]);
        #[cfg(target_endian = "big")]
        crate::dtype::swap_items(raw, w);
        v
    }
}

impl<T> fmt::Debug for Values<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Values<{}>({} bytes)", std::any::type_name::<T>(), self.bytes.len())
    }
}

/// The values of one column, in columnar form (SPEC.md section 15.8).
#[derive(Debug, Clone, PartialEq)]
pub enum ColumnData {
    /// `bool`: one byte a value, 0 or 1 (checked by every decoder).
    Bool(Values<u8>),
    /// `int32`.
    Int32(Values<i32>),
    /// `int64`.
    Int64(Values<i64>),
    /// `float32`, every bit kept.
    Float32(Values<f32>),
    /// `float64`, every bit kept.
    Float64(Values<f64>),
    /// `string`.
    String(Vec<String>),
    /// `uuid`: 16 bytes a value, RFC 9562 order (always a view: its alignment is 1).
    Uuid(Values<[u8; 16]>),
    /// `float32[d]`: `n * d` floats, row-major.
    Float32Vector(Values<f32>),
}

impl ColumnData {
    /// Column data of `ty` over `n * width` little-endian bytes (the caller checked the length and,
    /// for bool, the bytes).
    pub(crate) fn fixed(ty: ColumnType, bytes: Bytes) -> ColumnData {
        match ty {
            ColumnType::Bool => ColumnData::Bool(Values::from_bytes(bytes)),
            ColumnType::Int32 => ColumnData::Int32(Values::from_bytes(bytes)),
            ColumnType::Int64 => ColumnData::Int64(Values::from_bytes(bytes)),
            ColumnType::Float32 => ColumnData::Float32(Values::from_bytes(bytes)),
            ColumnType::Float64 => ColumnData::Float64(Values::from_bytes(bytes)),
            ColumnType::Uuid => ColumnData::Uuid(Values::from_bytes(bytes)),
            ColumnType::Float32Vector(_) => ColumnData::Float32Vector(Values::from_bytes(bytes)),
            ColumnType::String => unreachable!("string columns are not fixed-width"),
        }
    }

    /// The little-endian bytes of a fixed-width column; `None` for strings.
    pub fn fixed_bytes(&self) -> Option<&Bytes> {
        Some(match self {
            ColumnData::Bool(v) => v.bytes(),
            ColumnData::Int32(v) => v.bytes(),
            ColumnData::Int64(v) => v.bytes(),
            ColumnData::Float32(v) => v.bytes(),
            ColumnData::Float64(v) => v.bytes(),
            ColumnData::Uuid(v) => v.bytes(),
            ColumnData::Float32Vector(v) => v.bytes(),
            ColumnData::String(_) => return None,
        })
    }
}

/// A named, typed column.
#[derive(Debug, Clone, PartialEq)]
pub struct Column {
    /// The column name (non-empty UTF-8).
    pub name: String,
    /// The type.
    pub ty: ColumnType,
    /// The values.
    pub data: ColumnData,
}

impl Column {
    /// A column, checked: the data's variant must be `ty`'s and hold `rows` values (`rows * d`
    /// floats for a vector). `shape_mismatch` on the column name otherwise.
    pub fn new(name: impl Into<String>, ty: ColumnType, data: ColumnData, rows: usize) -> Result<Column> {
        let name = name.into();
        let ok = match (&data, ty) {
            (ColumnData::String(v), ColumnType::String) => v.len() == rows,
            (d, t) => {
                let kind_ok = matches!(
                    (d, t),
                    (ColumnData::Bool(_), ColumnType::Bool)
                        | (ColumnData::Int32(_), ColumnType::Int32)
                        | (ColumnData::Int64(_), ColumnType::Int64)
                        | (ColumnData::Float32(_), ColumnType::Float32)
                        | (ColumnData::Float64(_), ColumnType::Float64)
                        | (ColumnData::Uuid(_), ColumnType::Uuid)
                        | (ColumnData::Float32Vector(_), ColumnType::Float32Vector(_))
                );
                kind_ok
                    && t.width().and_then(|w| w.checked_mul(rows)) == d.fixed_bytes().map(|b| b.len())
                    && match d {
                        ColumnData::Bool(v) => v.bytes().iter().all(|&b| b <= 1),
                        _ => true,
                    }
            }
        };
        if !ok {
            return Err(err(ErrorKind::ShapeMismatch, format!("the data is not {rows} values of type {ty}"))
                .field(name.clone()));
        }
        Ok(Column { name, ty, data })
    }

    /// The column's (name, type), as in `Densewire-Columns`.
    pub fn spec(&self) -> ColumnSpec {
        ColumnSpec { name: self.name.clone(), ty: self.ty }
    }
}

/// A column's name and type: what `Densewire-Columns` carries, and what the JSON objects and CSV
/// decoders are handed.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ColumnSpec {
    /// The name.
    pub name: String,
    /// The type.
    pub ty: ColumnType,
}

impl ColumnSpec {
    /// A column spec.
    pub fn new(name: impl Into<String>, ty: ColumnType) -> ColumnSpec {
        ColumnSpec { name: name.into(), ty }
    }
}

/// A table: a name, `rows`, and columns of `rows` values each (SPEC.md section 15).
///
/// ```
/// use densewire::{Bytes, ColumnData, Table, TableFormat};
///
/// // A Protobuf table body (SPEC.md section 15.6): {name: "t", rows: 2, columns: [x float64 PLAIN]}.
/// let mut body = vec![0x0a, 1, b't', 0x10, 2, 0x1a, 23, 0x0a, 1, b'x', 0x10, 5, 0x2a, 16];
/// body.extend(1.5f64.to_le_bytes());
/// body.extend((-2.0f64).to_le_bytes());
/// # #[cfg(feature = "protobuf")] {
/// let t = Table::decode(TableFormat::Protobuf, &[("", "")], Bytes::from(body))?;
/// assert_eq!((t.name.as_str(), t.rows), ("t", 2));
/// let ColumnData::Float64(x) = &t.columns[0].data else { panic!("float64") };
/// assert_eq!(&*x.as_slice(), &[1.5, -2.0]);
/// # }
///
/// // JSON objects carry no types: they come from the Densewire-Columns header.
/// let headers = [("Densewire-Table", "t"), ("Densewire-Columns", "id=uuid,ok=bool")];
/// let body = r#"[{"id":"7c9e6679-7425-40de-944b-e07fc1f90ae7","ok":true}]"#;
/// let t = Table::decode(TableFormat::Json, &headers, Bytes::from(body))?;
/// assert_eq!(t.column("ok").unwrap().data, ColumnData::Bool(densewire::Values::from_slice(&[1u8])));
/// # Ok::<(), densewire::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    /// The table name.
    pub name: String,
    /// `n`, the number of rows.
    pub rows: usize,
    /// The columns, in order.
    pub columns: Vec<Column>,
}

impl Table {
    /// The column named `name`.
    pub fn column(&self, name: &str) -> Option<&Column> {
        self.columns.iter().find(|c| c.name == name)
    }

    /// The (name, type) of every column.
    pub fn specs(&self) -> Vec<ColumnSpec> {
        self.columns.iter().map(Column::spec).collect()
    }
}

// ------------------------------------------------------------------ helpers shared by the formats

/// Checks that a bool column's bytes are 0 or 1: `invalid_field` on `{field}[ROW]` otherwise.
#[allow(dead_code)] // used by the binary formats (features)
pub(crate) fn check_bools(bytes: &[u8], field: &str) -> Result<()> {
    match bytes.iter().position(|&b| b > 1) {
        None => Ok(()),
        Some(row) => Err(err(ErrorKind::InvalidField, format!("bool byte 0x{:02x} is neither 0 nor 1", bytes[row]))
            .field(format!("{field}[{row}]"))),
    }
}
/// Parses a UUID's text (canonical 8-4-4-4-12 form, either case) into its 16 bytes.
pub(crate) fn parse_uuid(s: &str) -> Option<[u8; 16]> {
    let b = s.as_bytes();
    if b.len() != 36 || b[8] != b'-' || b[13] != b'-' || b[18] != b'-' || b[23] != b'-' {
        return None;
    }
    let mut out = [0u8; 16];
    let mut j = 0;
    let mut i = 0;
    while i < 36 {
        if matches!(i, 8 | 13 | 18 | 23) {
            i += 1;
            continue;
        }
        let hi = (b[i] as char).to_digit(16)?;
        let lo = (b[i + 1] as char).to_digit(16)?;
        out[j] = (hi * 16 + lo) as u8;
        j += 1;
        i += 2;
    }
    Some(out)
}

/// The canonical lowercase text of a UUID.
pub fn format_uuid(u: &[u8; 16]) -> String {
    let mut s = String::with_capacity(36);
    for (i, b) in u.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            s.push('-');
        }
        s.push_str(&format!("{b:02x}"));
    }
    s
}

/// Builds the columns of a text format (JSON, CSV) value by value.
pub(crate) enum Builder {
    Fixed(ColumnType, Vec<u8>),
    Strings(Vec<String>),
}

impl Builder {
    pub(crate) fn new(ty: ColumnType, rows: usize) -> Builder {
        match ty.width() {
            None => Builder::Strings(Vec::with_capacity(rows)),
            Some(w) => Builder::Fixed(ty, Vec::with_capacity(w.saturating_mul(rows).min(1 << 26))),
        }
    }

    pub(crate) fn finish(self) -> ColumnData {
        match self {
            Builder::Strings(v) => ColumnData::String(v),
            Builder::Fixed(ty, v) => {
                let mut buf = aligned_zeroed(v.len());
                buf.as_mut_slice().copy_from_slice(&v);
                ColumnData::fixed(ty, buf.freeze())
            }
        }
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuid_text() {
        let u = parse_uuid("7C9E6679-7425-40de-944b-e07fc1f90ae7").unwrap();
        assert_eq!(format_uuid(&u), "7c9e6679-7425-40de-944b-e07fc1f90ae7");
        assert!(parse_uuid("7c9e6679742540de944be07fc1f90ae7").is_none());
        assert!(parse_uuid("7c9e6679-7425-40de-944b-e07fc1f90ag7").is_none());
    }

    #[test]
    fn views_borrow_when_aligned() {
        let v = Values::<f64>::from_slice(&[1.0, 2.0]);
        assert!(v.is_zero_copy());
        assert!(matches!(v.as_slice(), Cow::Borrowed(_)));
        let mut raw = vec![0u8; 17];
        raw[1..9].copy_from_slice(&3.5f64.to_le_bytes());
        raw[9..].copy_from_slice(&(-1.0f64).to_le_bytes());
        let b = Bytes::from(raw).slice(1..);
        let v = Values::<f64>::from_bytes(b);
        assert_eq!((v.get(0), v.get(1)), (3.5, -1.0));
        assert_eq!(&*v.as_slice(), &[3.5, -1.0]);
    }
}
