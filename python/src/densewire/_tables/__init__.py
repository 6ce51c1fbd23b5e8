"""Tables (SPEC.md section 15): typed columns in seven formats.

>>> import densewire
>>> t = densewire.Table("t", [densewire.Column("a", "int32", [1, 2]), densewire.Column("b", "float32", [0.1, 2.5])])
>>> densewire.encode_table(t, "json")
b'[{"a":1,"b":0.1},{"a":2,"b":2.5}]'
>>> densewire.decode_table(densewire.encode_table(t, "protobuf"), "protobuf") == t
True

Decoders of the binary formats (msgpack, protobuf, arrow) return fixed-width columns as numpy views
into the body where possible: MessagePack and PLAIN Protobuf columns when the data sits at an
address aligned for the item type (always for bool and uuid), otherwise an aligned copy;
BYTE_STREAM_SPLIT columns are a copy (one numpy transpose); Arrow int/float/uuid/vector columns of
a one-batch stream are views, bool and string columns are built.
"""

from __future__ import annotations

from typing import Any, Final

from .._errors import InvalidFieldError
from ._arrow import decode_arrow_table, encode_arrow_table
from ._csv import CSV_MEDIA_TYPE, decode_csv_table, encode_csv_table
from ._demo import CITIES, DEMO_ROWS, DEMO_SEED, demo_table
from ._json import decode_json_table, encode_json_table
from ._model import (COLUMNS_HEADER, TABLE_TYPES, Column, Table, check_type, columns_header, parse_columns_header,
                     table_headers, to_float32, vector_dims)
from ._msgpack import decode_msgpack_table, encode_msgpack_table
from ._protobuf import decode_protobuf_table, encode_protobuf_table

__all__ = [
    "Table", "Column", "TABLE_TYPES", "TABLE_FORMATS", "TABLE_MEDIA_TYPES", "TABLE_MEDIA_TYPE_ALIASES",
    "encode_table", "decode_table", "demo_table", "DEMO_SEED", "DEMO_ROWS", "CITIES",
    "columns_header", "parse_columns_header", "table_headers", "table_format_for_media_type",
    "check_type", "vector_dims", "to_float32", "COLUMNS_HEADER", "CSV_MEDIA_TYPE",
]

#: The formats of GET /v1/tables/{name}, in the server's order of preference (SPEC.md section 15.9).
TABLE_FORMATS: Final[tuple[str, ...]] = ("json", "json-rows", "json-columns", "csv", "msgpack", "protobuf", "arrow")
TABLE_MEDIA_TYPES: Final[dict[str, str]] = {
    "json": "application/json",
    "json-rows": "application/vnd.densewire.rows+json",
    "json-columns": "application/vnd.densewire.columns+json",
    "csv": "text/csv",
    "msgpack": "application/vnd.msgpack",
    "protobuf": "application/protobuf",
    "arrow": "application/vnd.apache.arrow.stream",
}
#: Other media types accepted for the same formats (SPEC.md section 12).
TABLE_MEDIA_TYPE_ALIASES: Final[dict[str, str]] = {
    "application/msgpack": "msgpack", "application/x-msgpack": "msgpack", "application/x-protobuf": "protobuf",
}
_BY_MEDIA_TYPE = {v: k for k, v in TABLE_MEDIA_TYPES.items()} | TABLE_MEDIA_TYPE_ALIASES


def table_format_for_media_type(media_type: str) -> str | None:
    """The table format of a media type (parameters and case ignored), or None."""
    return _BY_MEDIA_TYPE.get(media_type.split(";", 1)[0].strip().lower())


def _check_format(fmt: str) -> str:
    if fmt not in TABLE_FORMATS:
        raise InvalidFieldError(f"unknown table format {fmt!r}; expected one of {', '.join(TABLE_FORMATS)}",
                                field="format")
    return fmt


def encode_table(table: Table, format: str, *, byte_stream_split: bool | str = "floats") -> bytes:  # noqa: A002
    """Encode a table in one of :data:`TABLE_FORMATS`. ``byte_stream_split`` applies to Protobuf:
    ``"floats"`` (the default, what densewire's server writes) splits float32, float64 and vector
    columns, where grouping the exponent bytes shrinks a compressed body; ``True`` every fixed-width
    column of width >= 2 (UUIDs and integers too: 2 % smaller again, for a decode that costs as much as
    the rest together in a browser); ``False`` none.
    JSON layouts fail with ``non_finite`` on ``COLUMN[ROW]`` for NaN or infinity."""
    fmt = _check_format(format)
    if fmt in ("json", "json-rows", "json-columns"):
        return encode_json_table(table, fmt)
    if fmt == "csv":
        return encode_csv_table(table)
    if fmt == "msgpack":
        return encode_msgpack_table(table)
    if fmt == "protobuf":
        return encode_protobuf_table(table, byte_stream_split)
    return encode_arrow_table(table)


def decode_table(body: Any, format: str, *, columns: Any = None, name: str | None = None) -> Table:  # noqa: A002
    """Decode a table. JSON objects and CSV carry no types: pass ``columns`` (the ``Densewire-Columns``
    value, or ``(name, type)`` pairs) and optionally ``name`` (``Densewire-Table``). The other formats
    carry their schema; ``columns`` is ignored and ``name`` overrides the carried name if given."""
    fmt = _check_format(format)
    if fmt == "json":
        return decode_json_table(body, "json", columns, name)
    if fmt == "csv":
        return decode_csv_table(body, columns, name)
    if fmt in ("json-rows", "json-columns"):
        table = decode_json_table(body, fmt)
    elif isinstance(body, str):
        raise TypeError(f"the {fmt} format is binary: pass bytes, not str")
    elif fmt == "msgpack":
        table = decode_msgpack_table(body)
    elif fmt == "protobuf":
        table = decode_protobuf_table(body)
    else:
        table = decode_arrow_table(body)
    if name is not None:
        table.name = name
    return table
