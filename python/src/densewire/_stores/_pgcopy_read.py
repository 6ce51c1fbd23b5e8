"""Reading PostgreSQL binary COPY streams of pgvector columns into one tensor (SPEC.md section 16.2).

The fast path takes one numpy structured view over all the tuples when each has the first one's layout
(no NULL, fixed-width id, the same ``d``) and checks every length word of it at once; any other stream
(NULL or text ids, ``sparsevec``, or an invalid one) is walked tuple by tuple, which finds the exact
offset of an error.
"""

from __future__ import annotations

import struct
import uuid as uuidlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from .._errors import InvalidFieldError, LengthMismatchError, MalformedError, ShapeMismatchError, TruncatedError
from ._pgcopy import ID_TYPES, SIGNATURE, VECTOR_TYPES, CopyColumns, CopyData
from .._tensor import Tensor

__all__ = ["decode_copy", "read_stream", "decode_values"]

_ID_WIDTH = {"int8": 8, "int4": 4, "uuid": 16}
_ID_NUMPY = {"int8": ">i8", "int4": ">i4"}
_ITEM = {"vector": ">f4", "halfvec": ">f2"}
#: The bound of a sparsevec stream's dense tensor (SPEC.md 16.2, as the Go, Rust and Java readers):
#: this many times the stream's bytes, and at least _MAX_SPARSE_DENSE_MIN bytes.
_MAX_SPARSE_DENSE_FACTOR = 4096
_MAX_SPARSE_DENSE_MIN = 64 << 20


def decode_copy(data: bytes | bytearray | memoryview, *, pg_type: str = "vector", id_type: str | None = None,
                column: str = "embedding", id_column: str = "id", d: int = 0) -> CopyData:
    """Read a whole stream (as ``COPY ... TO STDOUT (FORMAT BINARY)`` sends it) of an optional id column
    (``id_type``: int8, int4, text, uuid) and a vector column of ``pg_type`` into one tensor of the type's
    dtype (float32, float16, binary; a sparsevec dense); ``d`` is the dimension an empty stream reports."""
    return read_stream(memoryview(data).cast("B"), CopyColumns(pg_type, column, id_type, id_column), d)


def decode_values(values: Sequence[bytes | None], pg_type: str = "vector", column: str = "embedding") -> Tensor:
    """One ``vector`` or ``halfvec`` column's values in their binary form (a field of a binary COPY read as
    ``bytea``, or a binary result) as one ``(n, d)`` tensor, checked as section 16.2 says."""
    if pg_type not in _ITEM:
        raise InvalidFieldError(f"decode_values reads vector and halfvec values, not {pg_type}", field=column)
    nulls = [i for i, v in enumerate(values) if v is None]
    if nulls:
        raise InvalidFieldError(f"row {nulls[0]} has a NULL {pg_type}", field=column)
    if not values:
        return Tensor(np.empty((0, 0), np.dtype(_ITEM[pg_type]).newbyteorder("=")), VECTOR_TYPES[pg_type], 0)
    first = bytes(values[0][:4])
    d = struct.unpack(">h", first[:2])[0] if len(first) == 4 else 0
    item = np.dtype(_ITEM[pg_type])
    width = 4 + item.itemsize * d
    bad = next((i for i, v in enumerate(values) if len(v) != width), None)
    if d < 1 or bad is not None:
        row = 0 if d < 1 else bad
        raise ShapeMismatchError(f"row {row} has a {pg_type} of {len(values[row])} bytes where row 0 has {d} "
                                 "dimensions", field=column)
    rec = np.frombuffer(b"".join(values), np.dtype([("dim", ">i2"), ("unused", ">i2"), ("data", (item, d))]))
    wrong = (rec["dim"] != d) | (rec["unused"] != 0)
    if wrong.any():
        row = int(np.argmax(wrong))
        raise MalformedError(f"row {row}: a {pg_type} header (dim {int(rec['dim'][row])}, unused "
                             f"{int(rec['unused'][row])}) that does not match its length", field=column)
    return Tensor(rec["data"].astype(item.newbyteorder("=")), VECTOR_TYPES[pg_type], d)


def _header(buf: memoryview) -> int:
    """The offset of the first tuple, after checking the signature, flags and header extension."""
    size = len(buf)
    if bytes(buf[:min(11, size)]) != SIGNATURE[:min(11, size)]:
        raise MalformedError("not a PostgreSQL binary COPY stream (the signature PGCOPY\\n\\377\\r\\n\\0 differs)",
                             offset=0)
    if size < 19:
        raise TruncatedError(f"the stream ends inside its 19-byte header after {size} bytes", offset=size)
    flags, ext = struct.unpack_from(">Ii", buf, 11)
    if flags & 0x1FFFF:
        raise MalformedError(f"flags 0x{flags:08x}: tuples with OIDs (bit 16) or an unknown critical flag "
                             "(bits 0 to 15)", offset=11)
    if ext < 0:
        raise MalformedError(f"negative header extension length {ext}", offset=15)
    if 19 + ext > size:
        raise TruncatedError("the stream ends inside its header extension", offset=size)
    return 19 + ext


def read_stream(buf: memoryview, cols: CopyColumns, d: int = 0) -> CopyData:
    pos = _header(buf)
    fast = _read_uniform(buf, pos, cols)
    return fast if fast is not None else _Walker(buf, cols, d).read(pos)


# ------------------------------------------------------------------------------------ fast path
def _read_uniform(buf: memoryview, pos: int, cols: CopyColumns) -> CopyData | None:
    """All tuples at once when they share the first one's layout; None when they do not (or on any doubt)."""
    size = len(buf)
    if cols.pg_type == "sparsevec" or cols.id_type == "text" or pos + 2 > size:
        return None
    fields: list[tuple[str, Any]] = [("count", ">i2")]
    at = pos + 2
    if cols.id_type is not None:
        fields += [("id_len", ">i4"), ("id", ">i8" if cols.id_type == "int8" else ">i4" if cols.id_type == "int4" else "V16")]
        at += 4 + _ID_WIDTH[cols.id_type]
    if at + 8 > size:
        return None
    if cols.pg_type == "bit":
        d = struct.unpack_from(">i", buf, at + 4)[0]
        if d < 1:
            return None
        fields += [("len", ">i4"), ("bits", ">i4"), ("data", np.dtype(("u1", (d + 7) // 8)))]
        value_len = 4 + (d + 7) // 8
    else:
        d = struct.unpack_from(">h", buf, at + 4)[0]
        if d < 1:
            return None
        fields += [("len", ">i4"), ("dim", ">i2"), ("unused", ">i2"), ("data", np.dtype((_ITEM[cols.pg_type], d)))]
        value_len = 4 + np.dtype(_ITEM[cols.pg_type]).itemsize * d
    dt = np.dtype(fields)
    body = size - pos - 2
    if body % dt.itemsize or bytes(buf[size - 2:]) != b"\xff\xff":
        return None
    n = body // dt.itemsize
    rec = np.frombuffer(buf, dt, count=n, offset=pos)
    ok = (rec["count"] == cols.count) & (rec["len"] == value_len)
    if cols.id_type is not None:
        ok &= rec["id_len"] == _ID_WIDTH[cols.id_type]
    ok &= (rec["bits"] == d) if cols.pg_type == "bit" else (rec["dim"] == d) & (rec["unused"] == 0)
    if not ok.all():
        return None
    dtype = VECTOR_TYPES[cols.pg_type]
    data = rec["data"]
    array = data.astype(data.dtype.newbyteorder("=")) if cols.pg_type != "bit" else np.ascontiguousarray(data)
    ids: Any = None
    if cols.id_type in ("int8", "int4"):
        ids = rec["id"].astype(np.int64 if cols.id_type == "int8" else np.int32)
    elif cols.id_type == "uuid":
        raw = rec["id"].tobytes()
        ids = [uuidlib.UUID(bytes=raw[i:i + 16]) for i in range(0, len(raw), 16)]
    return CopyData(Tensor(array, dtype, d), ids)


# ------------------------------------------------------------------------------------ tuple by tuple
class _Walker:
    """The general reader: one tuple at a time, every check of SPEC.md section 16 with its offset."""

    def __init__(self, buf: memoryview, cols: CopyColumns, d: int) -> None:
        self.buf, self.cols, self.size, self.d = buf, cols, len(buf), None
        self.empty_d = d
        self.starts: list[int] = []  # offset of each row's vector items (dense types)
        self.sparse: list[tuple[int, int]] = []  # (offset of the indices, nnz) of each row (sparsevec)
        self.ids: list[Any] = []

    def need(self, at: int, k: int) -> None:
        if at + k > self.size:
            raise TruncatedError(f"the stream ends after {self.size} bytes, inside a tuple", offset=self.size)

    def read(self, pos: int) -> CopyData:
        cols = self.cols
        while True:
            self.need(pos, 2)
            count = struct.unpack_from(">h", self.buf, pos)[0]
            if count == -1:
                if pos + 2 != self.size:
                    raise MalformedError(f"{self.size - pos - 2} bytes after the trailer", offset=pos + 2)
                break
            if count != cols.count:
                raise ShapeMismatchError(f"a tuple of {count} fields, but the COPY has {cols.count} columns "
                                         f"({', '.join(cols.names)})", offset=pos)
            pos += 2
            if cols.id_type is not None:
                pos = self.field(pos, self.id_value)
            pos = self.field(pos, self.vector_value)
        return self.result()

    def field(self, at: int, parse) -> int:
        self.need(at, 4)
        length = struct.unpack_from(">i", self.buf, at)[0]
        if length < -1:
            raise MalformedError(f"field length {length}", offset=at)
        if length >= 0:
            self.need(at + 4, length)
        parse(at, length)
        return at + 4 + max(length, 0)

    def id_value(self, at: int, length: int) -> None:
        id_type, v = self.cols.id_type, at + 4
        if length == -1:
            self.ids.append(None)
            return
        if id_type == "text":
            raw = bytes(self.buf[v:v + length])
            try:
                self.ids.append(raw.decode("utf-8"))
            except UnicodeDecodeError as exc:
                raise MalformedError("a text id that is not UTF-8", offset=v + exc.start,
                                     field=self.cols.id_column) from None
            return
        if length != _ID_WIDTH[id_type]:
            raise LengthMismatchError(f"an {id_type} id of {length} bytes (it has {_ID_WIDTH[id_type]})", offset=at,
                                      field=self.cols.id_column)
        raw = bytes(self.buf[v:v + length])
        self.ids.append(uuidlib.UUID(bytes=raw) if id_type == "uuid" else int.from_bytes(raw, "big", signed=True))

    def vector_value(self, at: int, length: int) -> None:
        cols, v = self.cols, at + 4
        if length == -1:
            raise InvalidFieldError(f"row {len(self.starts) + len(self.sparse)} has a NULL {cols.pg_type}",
                                    offset=at, field=cols.column)
        head = 12 if cols.pg_type == "sparsevec" else 4
        if length < head:
            raise LengthMismatchError(f"a {cols.pg_type} value of {length} bytes", offset=at, field=cols.column)
        if cols.pg_type == "bit":
            d = struct.unpack_from(">i", self.buf, v)[0]
            expected = 4 + (d + 7) // 8
        elif cols.pg_type == "sparsevec":
            d, nnz, unused = struct.unpack_from(">iii", self.buf, v)
            expected = 12 + 8 * nnz
        else:
            d, unused = struct.unpack_from(">hh", self.buf, v)
            expected = 4 + np.dtype(_ITEM[cols.pg_type]).itemsize * d
        if d < 1:
            raise MalformedError(f"a {cols.pg_type} of {d} dimensions", offset=v, field=cols.column)
        if cols.pg_type == "sparsevec" and not 0 <= nnz <= d:
            raise MalformedError(f"a sparsevec of {d} dimensions with {nnz} non-zero values", offset=v + 4,
                                 field=cols.column)
        if length != expected:
            raise LengthMismatchError(f"a {cols.pg_type} of {d} dimensions needs {expected} bytes, the field has "
                                      f"{length}", offset=at, field=cols.column)
        if cols.pg_type != "bit" and unused != 0:
            raise MalformedError(f"the unused word of a {cols.pg_type} is {unused}, not 0",
                                 offset=v + (8 if cols.pg_type == "sparsevec" else 2), field=cols.column)
        if self.d is None:
            self.d = d
        elif d != self.d:
            raise ShapeMismatchError(f"row {len(self.starts) + len(self.sparse)} has {d} dimensions, the first "
                                     f"row {self.d}", offset=v, field=cols.column)
        if cols.pg_type == "sparsevec":
            self.check_sparse(v + 12, nnz, d)
            # a sparsevec of a few bytes stands for up to 4 GB of zeros: the dense tensor is bounded by
            # the stream's size, checked before result() allocates it (a hostile stream cannot exhaust memory)
            limit = max(_MAX_SPARSE_DENSE_MIN, _MAX_SPARSE_DENSE_FACTOR * self.size)
            if (len(self.sparse) + 1) * d * 4 > limit:
                raise InvalidFieldError(f"the dense tensor of these sparsevec rows would exceed {limit} bytes "
                                        f"({_MAX_SPARSE_DENSE_FACTOR} times the stream, at least 64 MiB)",
                                        offset=v, field=cols.column)
            self.sparse.append((v + 12, nnz))
        else:
            self.starts.append(v + 4)

    def check_sparse(self, at: int, nnz: int, d: int) -> None:
        indices = np.frombuffer(self.buf, ">i4", count=nnz, offset=at)
        bad = (indices < 0) | (indices >= d)
        bad[1:] |= indices[1:] <= indices[:-1]
        if bad.any():
            i = int(np.argmax(bad))
            raise MalformedError(f"sparsevec index {int(indices[i])} is out of 0..{d - 1} or not above the one "
                                 "before it", offset=at + 4 * i, field=self.cols.column)
        values = np.frombuffer(self.buf, ">f4", count=nnz, offset=at + 4 * nnz)
        zero = values == 0
        if zero.any():
            i = int(np.argmax(zero))
            raise MalformedError("a sparsevec stores no zero value", offset=at + 4 * (nnz + i), field=self.cols.column)

    def result(self) -> CopyData:
        cols = self.cols
        d = self.empty_d if self.d is None else self.d
        raw = np.frombuffer(self.buf, np.uint8)
        if cols.pg_type == "sparsevec":
            n = len(self.sparse)
            array = np.zeros((n, d), np.float32)
            for r, (at, nnz) in enumerate(self.sparse):
                idx = np.frombuffer(self.buf, ">i4", count=nnz, offset=at)
                array[r, idx] = np.frombuffer(self.buf, ">f4", count=nnz, offset=at + 4 * nnz)
        else:
            n = len(self.starts)
            width = (d + 7) // 8 if cols.pg_type == "bit" else np.dtype(_ITEM[cols.pg_type]).itemsize * d
            starts = np.asarray(self.starts, np.int64)
            gathered = raw[starts[:, None] + np.arange(width)] if n else np.zeros((0, width), np.uint8)
            if cols.pg_type == "bit":
                array = gathered
            else:
                item = np.dtype(_ITEM[cols.pg_type])
                array = gathered.view(item).reshape(n, d).astype(item.newbyteorder("="))
        return CopyData(Tensor(array, VECTOR_TYPES[cols.pg_type], d), self.id_result())

    def id_result(self) -> Any:
        id_type = self.cols.id_type
        if id_type is None:
            return None
        if id_type in _ID_NUMPY:
            if any(v is None for v in self.ids):
                return np.array(self.ids, dtype=object)
            return np.array(self.ids, dtype=np.int64 if id_type == "int8" else np.int32)
        return self.ids


assert set(_ID_WIDTH) | {"text"} == set(ID_TYPES)
