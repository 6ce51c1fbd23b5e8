"""The columnar MessagePack map of SPEC.md section 15.5.

Written by hand like the tensor map (smallest encodings, so byte-exact) and read with the tensor
codec's offset-reporting reader, which hands ``bin`` values over as views: fixed-width columns come
back as numpy views into the body where aligned (see ``_binary``). Arrays of strings are written
with msgspec, whose MessagePack output uses the smallest header of every string and array (the
tests check it against the hand-written encoder and msgpack-python).
"""

from __future__ import annotations

import msgspec

from .._errors import InvalidFieldError, ShapeMismatchError
from .._msgpack import _bin_header, _str, _uint, read_top_map
from ._binary import column_bytes, fixed_values
from ._model import Column, Table, check_type

__all__ = ["encode_msgpack_table", "decode_msgpack_table"]

_ENCODER = msgspec.msgpack.Encoder()


def _array_header(n: int) -> bytes:
    if n < 16:
        return bytes((0x90 | n,))
    if n < 0x10000:
        return b"\xdc" + n.to_bytes(2, "big")
    return b"\xdd" + n.to_bytes(4, "big")


def encode_msgpack_table(table: Table) -> bytes:
    """``{"name", "rows", "columns": [{"name", "type", "data"}, ...]}`` in the smallest encodings."""
    parts = [b"\x83\xa4name" + _str(table.name) + b"\xa4rows" + _uint(table.rows) + b"\xa7columns"
             + _array_header(len(table.columns))]
    for col in table.columns:
        parts.append(b"\x83\xa4name" + _str(col.name) + b"\xa4type" + _str(col.type) + b"\xa4data")
        if col.type == "string":
            parts.append(_ENCODER.encode(col.values))
        else:
            data = column_bytes(col)
            parts += [_bin_header(len(data)), data]
    return b"".join(parts)


def _is_uint(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def decode_msgpack_table(body) -> Table:
    """Decode the map; fixed-width columns are read-only views into ``body`` where aligned."""
    doc = read_top_map(body)
    name = doc.get("name", "")
    if not isinstance(name, str):
        raise InvalidFieldError(f"must be a string, got {type(name).__name__}", field="name")
    if "rows" not in doc:
        raise InvalidFieldError("missing", field="rows")
    rows = doc["rows"]
    if not _is_uint(rows):
        raise InvalidFieldError(f"must be a non-negative integer, got {rows!r}", field="rows")
    columns = doc.get("columns")
    if not isinstance(columns, list):
        raise InvalidFieldError("missing or not an array" if columns is None else "must be an array", field="columns")
    out = []
    seen: set[str] = set()
    for k, c in enumerate(columns):
        path = f"columns[{k}]"
        if not isinstance(c, dict):
            raise InvalidFieldError("a column must be a map", field=path)
        cname = c.get("name")
        if not isinstance(cname, str) or not cname:
            raise InvalidFieldError("missing, empty or not a string", field=f"{path}.name")
        if cname in seen:
            raise InvalidFieldError(f"column name {cname!r} occurs twice", field=f"{path}.name")
        seen.add(cname)
        if "type" not in c:
            raise InvalidFieldError("missing", field=f"{path}.type")
        type_ = check_type(c["type"], field=f"{path}.type")
        data = c.get("data")
        if type_ == "string":
            if not isinstance(data, list):
                raise InvalidFieldError("a string column's data must be an array of str", field=f"{path}.data")
            if len(data) != rows:
                raise ShapeMismatchError(f"{len(data)} strings for {rows} rows", field=f"{path}.data")
            if not all(type(v) is str for v in data):
                bad = next(i for i, v in enumerate(data) if type(v) is not str)
                raise InvalidFieldError(f"not a str: {type(data[bad]).__name__}", field=f"{path}.data[{bad}]")
            out.append(Column(cname, type_, data))
        else:
            if not isinstance(data, memoryview):
                raise InvalidFieldError(f"a {type_} column's data must be bin", field=f"{path}.data")
            out.append(Column(cname, type_, fixed_values(data, type_, rows, f"{path}.data")))
    return Table(name, out, rows)
