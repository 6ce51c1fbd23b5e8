"""Fixed-width column bytes shared by the MessagePack and Protobuf table codecs: PLAIN and
BYTE_STREAM_SPLIT layouts (SPEC.md section 15.6) and vectorised packed varints.

Decoded PLAIN columns are numpy views into the body when the data sits at an address aligned for
the item type (always for bool and uuid, whose items are bytes); otherwise one aligned copy is
made, so every array a decoder returns is aligned. BYTE_STREAM_SPLIT columns are always a copy
(the bytes have to be interleaved back), done with one numpy transpose.
"""

from __future__ import annotations

import numpy as np

from .._errors import InvalidFieldError, LengthMismatchError, MalformedError
from ._model import Column, item_width, storage_dtype, value_width, vector_dims

__all__ = ["column_bytes", "fixed_values", "split_bytes", "join_bytes", "encode_varints", "decode_varints"]


def split_bytes(raw: np.ndarray, width: int) -> np.ndarray:
    """PLAIN bytes of ``m`` items of ``width`` bytes -> BYTE_STREAM_SPLIT (byte k of item i at k*m + i)."""
    return np.ascontiguousarray(raw.reshape(-1, width).T)


def join_bytes(raw: np.ndarray, width: int) -> np.ndarray:
    """BYTE_STREAM_SPLIT -> PLAIN: the inverse of :func:`split_bytes` (a new, aligned array)."""
    return np.ascontiguousarray(raw.reshape(width, -1).T)


def column_bytes(col: Column, split: bool = False) -> bytes | memoryview:
    """A fixed-width column's data field: PLAIN, or BYTE_STREAM_SPLIT when ``split`` (the caller
    decides whether the type allows it)."""
    a = np.ascontiguousarray(col.values)
    if a.size == 0:
        return b""
    raw = a.reshape(-1).view(np.uint8)
    if split:
        raw = split_bytes(raw, item_width(col.type))
    return memoryview(raw).cast("B")


def fixed_values(data, type_: str, n: int, field: str, split: bool = False) -> np.ndarray:
    """The values of a fixed-width column from its data bytes; checks the length (``length_mismatch``
    with ``offset = min(actual, expected)``) and bool bytes (``invalid_field`` on ``FIELD[ROW]``)."""
    expected = n * value_width(type_)
    got = memoryview(data).nbytes
    if got != expected:
        raise LengthMismatchError(f"{got} bytes do not hold {n} {type_} values, which need {expected}",
                                  offset=min(got, expected), field=field)
    dt = storage_dtype(type_)
    d = vector_dims(type_)
    if expected == 0:
        return np.empty((0, 16) if type_ == "uuid" else (0, d) if d else 0, dt)
    raw = np.frombuffer(data, np.uint8, count=expected)
    if split:
        raw = join_bytes(raw, item_width(type_)).reshape(-1)
    elif dt.itemsize > 1 and raw.ctypes.data % dt.itemsize:
        raw = raw.copy()  # numpy allocations are aligned
    if type_ == "bool":
        if raw.max() > 1:
            row = int(np.argmax(raw > 1))
            raise InvalidFieldError(f"a bool byte is 0x{int(raw[row]):02x}, not 0 or 1", field=f"{field}[{row}]")
        return raw.view(np.bool_)
    if type_ == "uuid":
        return raw.reshape(n, 16)
    values = raw.view(dt)
    return values.reshape(n, d) if d else values


# ------------------------------------------------------------------------------ packed varints
def encode_varints(values: np.ndarray) -> bytes:
    """Packed unsigned varints (protobuf), vectorised: every value's 7-bit groups, low first."""
    v = np.asarray(values, np.uint64)
    if v.size == 0:
        return b""
    sizes = np.ones(v.shape, np.int64)
    for k in range(1, 10):
        sizes += v >= (np.uint64(1) << np.uint64(7 * k))
    ends = np.cumsum(sizes)
    out = np.empty(int(ends[-1]), np.uint8)
    starts = ends - sizes
    for k in range(int(sizes.max())):
        has = sizes > k
        group = ((v[has] >> np.uint64(7 * k)) & np.uint64(0x7F)).astype(np.uint8)
        more = (sizes[has] > k + 1).astype(np.uint8) << 7
        out[starts[has] + k] = group | more
    return out.tobytes()


def decode_varints(data, field: str, tag_at: int) -> np.ndarray:
    """Packed unsigned varints -> uint64 array of their low 32 bits (a ``uint32`` field, as protobuf
    reads it). An entry running past the end of the field or longer than 10 bytes is ``malformed``
    at the field's tag (SPEC.md section 9)."""
    b = np.frombuffer(data, np.uint8)
    if b.size == 0:
        return np.empty(0, np.uint64)
    last = np.flatnonzero(b < 0x80)
    if last.size == 0 or last[-1] != b.size - 1:
        raise MalformedError("a packed entry runs past the end of its field", offset=tag_at, field=field)
    first = np.empty_like(last)
    first[0] = 0
    first[1:] = last[:-1] + 1
    if (last - first).max() >= 10:
        raise MalformedError("varint longer than 10 bytes", offset=tag_at, field=field)
    owner = np.repeat(np.arange(last.size), last - first + 1)
    pos = (np.arange(b.size) - first[owner]).astype(np.uint64)
    # 7-bit groups in place (groups 5.. only carry bits above 32: dropped); the groups of one varint
    # do not overlap, so their sum is their bitwise or
    contrib = np.where(pos < 5, (b & np.uint8(0x7F)).astype(np.uint64) << (np.uint64(7) * np.minimum(pos, 4)), 0)
    return np.add.reduceat(contrib.astype(np.uint64), first) & np.uint64(0xFFFFFFFF)
