//! Tables (SPEC.md section 15): the model ([`model`]), the HTTP face ([`media`]: formats, media
//! types, `Densewire-*` headers), one module per format, and this dispatcher, [`Table::decode`],
//! which hands a body to the module of its format. The format modules import the model, never
//! this module.

mod media;
mod model;

#[cfg(feature = "arrow")]
mod arrow;
mod csv;
pub(crate) mod json;
#[cfg(feature = "msgpack")]
mod msgpack;
#[cfg(feature = "protobuf")]
pub(crate) mod protobuf;

pub use media::{
    HEADER_COLUMNS, HEADER_ROWS, HEADER_TABLE, TableFormat, columns_header, parse_columns_header, percent_encode,
};
pub(crate) use model::parse_uuid;
pub use model::{Column, ColumnData, ColumnSpec, ColumnType, Table, TableItem, Values, format_uuid};

#[cfg(feature = "arrow")]
pub use arrow::decode_table_arrow;
pub use csv::{decode_table_csv, encode_table_csv};
pub use json::{decode_table_json_columns, decode_table_json_objects, decode_table_json_rows, encode_table_json};
#[cfg(feature = "msgpack")]
pub use msgpack::{decode_table_msgpack, encode_table_msgpack};
#[cfg(feature = "protobuf")]
pub use protobuf::{decode_table_protobuf, encode_table_protobuf};

use crate::error::{ErrorKind, Result, err};
use crate::headers::Headers;
use bytes::Bytes;
use media::percent_decode_lossy;

impl Table {
    /// Decodes a table body of `format`. JSON objects and CSV take their column types from the
    /// `Densewire-Columns` header (and the name from `Densewire-Table`); the other formats carry
    /// their own schema and need no headers. A format whose cargo feature is off is
    /// `unsupported_media_type`.
    pub fn decode<H: Headers + ?Sized>(format: TableFormat, headers: &H, body: Bytes) -> Result<Table> {
        let schema = || -> Result<(String, Vec<ColumnSpec>)> {
            let cols = headers.header(HEADER_COLUMNS).ok_or_else(|| {
                err(ErrorKind::InvalidField, format!("{} carries no types: the header is missing", format.name()))
                    .field(HEADER_COLUMNS)
            })?;
            let name = headers.header(HEADER_TABLE).map(percent_decode_lossy).unwrap_or_default();
            Ok((name, parse_columns_header(cols)?))
        };
        match format {
            TableFormat::Json => {
                let (name, cols) = schema()?;
                json::decode_table_json_objects(&body, &name, &cols)
            }
            TableFormat::JsonRows => json::decode_table_json_rows(&body),
            TableFormat::JsonColumns => json::decode_table_json_columns(&body),
            TableFormat::Csv => {
                let (name, cols) = schema()?;
                csv::decode_table_csv(&body, &name, &cols)
            }
            TableFormat::Msgpack => {
                #[cfg(feature = "msgpack")]
                return msgpack::decode_table_msgpack(body);
                #[cfg(not(feature = "msgpack"))]
                return Err(unsupported(format));
            }
            TableFormat::Protobuf => {
                #[cfg(feature = "protobuf")]
                return protobuf::decode_table_protobuf(body);
                #[cfg(not(feature = "protobuf"))]
                return Err(unsupported(format));
            }
            TableFormat::Arrow => {
                #[cfg(feature = "arrow")]
                return arrow::decode_table_arrow(body);
                #[cfg(not(feature = "arrow"))]
                return Err(unsupported(format));
            }
        }
    }
}

#[allow(dead_code)]
fn unsupported(format: TableFormat) -> crate::Error {
    err(
        ErrorKind::UnsupportedMediaType,
        format!("{} support is not compiled in (enable the cargo feature {:?})", format.media_type(), format.name()),
    )
}
