"""The columnar Protobuf ``Table`` of SPEC.md section 15.6 (proto/densewire/v1/table.proto).

Written and read directly on the wire, with the tensor codec's proto3 reader (``_fields``), so that
column data comes back as numpy views into the body (PLAIN columns at an aligned address; see
``_binary``) and errors carry SPEC.md's fields and offsets. The output follows the official
serializers' rules (field order, defaults omitted, packed lengths); the tests check both directions
against the protobuf runtime with classes compiled from the shipped .proto.
"""

from __future__ import annotations

import numpy as np

from .._errors import InvalidFieldError, LengthMismatchError, MalformedError, ShapeMismatchError, UnknownDtypeError
from .._protobuf import _expect, _fields, _varint
from ._binary import column_bytes, decode_varints, encode_varints, fixed_values
from ._model import TABLE_TYPES, Column, Table, item_width, vector_dims

__all__ = ["encode_protobuf_table", "decode_protobuf_table", "TYPE_ENUM"]

#: section 15.1: type name -> ColumnType enum value (float32[d] is 8, FLOAT32_VECTOR)
TYPE_ENUM = {name: i + 1 for i, name in enumerate(TABLE_TYPES)}
_VECTOR_ENUM = 8
_ENUM_TYPE = {v: k for k, v in TYPE_ENUM.items()}
_PLAIN, _SPLIT = 0, 1


def _len_field(number: int, payload_len: int) -> bytes:
    return _varint(number << 3 | 2) + _varint(payload_len)


def _string_parts(values: list[str]) -> tuple[bytes, np.ndarray]:
    """The UTF-8 of every value concatenated, and each value's byte length."""
    text = "".join(values)
    data = text.encode("utf-8")
    if len(data) == len(text):  # ASCII: byte lengths are character lengths
        lengths = np.fromiter(map(len, values), np.int64, count=len(values))
    else:
        lengths = np.fromiter((len(v.encode("utf-8")) for v in values), np.int64, count=len(values))
    return data, lengths


def _splits(col: Column, split: bool | str) -> bool:
    """Whether a fixed-width column is written BYTE_STREAM_SPLIT under the policy ``split``."""
    if split == "floats":
        return col.type in ("float32", "float64") or vector_dims(col.type) is not None
    if split is True or split is False:
        return split and item_width(col.type) >= 2
    raise ValueError(f"byte_stream_split must be 'floats', True or False, not {split!r}")


def _column(col: Column, split: bool | str) -> list:
    name = col.name.encode("utf-8")
    head = [b"\x0a" + _varint(len(name)) + name]
    d = vector_dims(col.type)
    head.append(b"\x10" + _varint(_VECTOR_ENUM if d else TYPE_ENUM[col.type]))
    if d:
        head.append(b"\x18" + _varint(d))
    if col.type == "string":
        data, lengths = _string_parts(col.values)
        packed = encode_varints(lengths)
        tail = [_len_field(5, len(data)), data] if data else []
        if packed:
            tail += [_len_field(6, len(packed)), packed]
        return head + tail
    use_split = _splits(col, split)
    if use_split:
        head.append(b"\x20\x01")
    data = column_bytes(col, use_split)
    return head + ([_len_field(5, len(data)), data] if len(data) else [])


def encode_protobuf_table(table: Table, byte_stream_split: bool | str = "floats") -> bytes:
    """A ``Table`` message; ``byte_stream_split`` as :func:`densewire.encode_table` says (bool and string
    are always PLAIN)."""
    name = table.name.encode("utf-8")
    parts: list = []
    if name:
        parts += [b"\x0a" + _varint(len(name)), name]
    if table.rows:
        parts.append(b"\x10" + _varint(table.rows))
    for col in table.columns:
        pieces = _column(col, byte_stream_split)
        size = sum(len(p) for p in pieces)
        parts.append(b"\x1a" + _varint(size))
        parts += pieces
    return b"".join(parts)


def _decode_column(buf: memoryview, base: int, k: int, n: int) -> Column:
    path = f"columns[{k}]"
    name, type_value, dims, encoding = "", 0, 0, 0
    data: memoryview = buf[0:0]
    lengths: list[np.ndarray] = []
    for number, wire, value, tag_at, value_at in _fields(buf, base, nested=True):
        if number == 1:
            _expect(wire, 2, f"{path}.name", tag_at)
            try:
                name = str(value, "utf-8")
            except UnicodeDecodeError:
                raise MalformedError("the column name is not UTF-8", offset=tag_at, field=f"{path}.name") from None
        elif number in (2, 3, 4):
            _expect(wire, 0, f"{path}.{('type', 'dimensions', 'encoding')[number - 2]}", tag_at)
            if number == 2:
                type_value = value & 0xFFFFFFFF  # an enum is an int32 on the wire
            elif number == 3:
                dims = value & 0xFFFFFFFF
            else:
                encoding = value & 0xFFFFFFFF
        elif number == 5:
            _expect(wire, 2, f"{path}.data", tag_at)
            data = value
        elif number == 6:
            if wire == 0:
                lengths.append(np.array([value & 0xFFFFFFFF], np.uint64))
            else:
                _expect(wire, 2, f"{path}.lengths", tag_at)
                lengths.append(decode_varints(value, f"{path}.lengths", tag_at))
    if type_value == 0:
        raise InvalidFieldError("missing (COLUMN_TYPE_UNSPECIFIED)", field=f"{path}.type")
    if type_value == _VECTOR_ENUM:
        if dims == 0:
            raise InvalidFieldError("a FLOAT32_VECTOR column needs dimensions >= 1", field=f"{path}.dimensions")
        type_ = f"float32[{dims}]"
    elif type_value in _ENUM_TYPE:
        type_ = _ENUM_TYPE[type_value]
        if dims:
            raise InvalidFieldError(f"dimensions {dims} on a {type_} column (vectors only)", field=f"{path}.dimensions")
    else:
        raise UnknownDtypeError(f"unknown ColumnType enum value {type_value}", field=f"{path}.type")
    if encoding not in (_PLAIN, _SPLIT):
        raise InvalidFieldError(f"unknown ColumnEncoding {encoding}", field=f"{path}.encoding")
    if encoding == _SPLIT and type_ in ("bool", "string"):
        raise InvalidFieldError(f"BYTE_STREAM_SPLIT is not defined for {type_} columns", field=f"{path}.encoding")
    if not name:
        raise InvalidFieldError("a column needs a non-empty name", field=f"{path}.name")
    if type_ != "string":
        if lengths:
            raise InvalidFieldError(f"lengths on a {type_} column (strings only)", field=f"{path}.lengths")
        return Column(name, type_, fixed_values(data, type_, n, f"{path}.data", encoding == _SPLIT))
    lens = np.concatenate(lengths) if len(lengths) > 1 else lengths[0] if lengths else np.empty(0, np.uint64)
    if len(lens) != n:
        raise ShapeMismatchError(f"{len(lens)} lengths for {n} rows", field=f"{path}.lengths")
    total = int(lens.sum()) if n else 0
    if total != len(data):
        raise LengthMismatchError(f"the lengths add up to {total} bytes, data has {len(data)}",
                                  offset=min(total, len(data)), field=f"{path}.data")
    return Column(name, "string", split_strings(data, lens, f"{path}.data"))


def split_strings(data, lens: np.ndarray, field: str) -> list[str]:
    """Concatenated UTF-8 and byte lengths -> the strings (``malformed`` on invalid UTF-8)."""
    raw = bytes(data)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MalformedError(f"invalid UTF-8: {exc.reason}", offset=exc.start, field=field) from None
    ends = np.cumsum(lens, dtype=np.int64).tolist()
    starts = [0] + ends[:-1]
    if len(text) == len(raw):  # ASCII: slice the decoded text directly
        return [text[a:b] for a, b in zip(starts, ends)]
    try:
        return [raw[a:b].decode("utf-8") for a, b in zip(starts, ends)]
    except UnicodeDecodeError:
        at = next(a for a, b in zip(starts, ends) if not _utf8(raw[a:b]))
        raise MalformedError("a length splits a UTF-8 character", offset=at, field=field) from None


def _utf8(b: bytes) -> bool:
    try:
        b.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


def decode_protobuf_table(body) -> Table:
    """Decode a ``Table`` message; fixed-width columns are views into ``body`` where aligned."""
    buf = memoryview(body).cast("B") if not isinstance(body, memoryview) or body.format != "B" else body
    name, rows = "", 0
    raw_columns: list[tuple[memoryview, int]] = []
    for number, wire, value, tag_at, value_at in _fields(buf):
        if number == 1:
            _expect(wire, 2, "name", tag_at)
            try:
                name = str(value, "utf-8")
            except UnicodeDecodeError:
                raise MalformedError("the table name is not UTF-8", offset=tag_at, field="name") from None
        elif number == 2:
            _expect(wire, 0, "rows", tag_at)
            rows = value
        elif number == 3:
            _expect(wire, 2, "columns", tag_at)
            raw_columns.append((value, value_at))
    columns = [_decode_column(value, at, k, rows) for k, (value, at) in enumerate(raw_columns)]
    seen: set[str] = set()
    for k, c in enumerate(columns):
        if c.name in seen:
            raise InvalidFieldError(f"column name {c.name!r} occurs twice", field=f"columns[{k}].name")
        seen.add(c.name)
    return Table(name, columns, rows)
