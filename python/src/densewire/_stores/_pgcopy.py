"""PostgreSQL binary COPY streams of pgvector columns (SPEC.md section 16), vectorised with numpy.

A stream is written from one ``(n, d)`` array in a few array passes (conversion, finiteness check, a byte
swap into an aligned array copied into a numpy structured array whose fields are the big-endian tuple
layout), with no
Python loop over rows; tuples whose length varies (NULL or text ids, ``sparsevec``) are laid out padded
and compacted with one boolean mask. Reading takes the same structured view over the whole stream when
every tuple has the first one's layout, and otherwise walks the tuples one by one, which also finds the
exact offset of any error.

>>> import numpy as np
>>> body = encode_copy(np.array([[1.0, -2.5]], np.float32), ids=np.array([7]), id_type="int8")
>>> len(body), body[-14:].hex()
(51, '000200003f800000c0200000ffff')
"""

from __future__ import annotations

import struct
import uuid as uuidlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final

import numpy as np

from .._convert import float32_to_float16, to_binary, widen
from .._errors import InvalidFieldError, NonFiniteError, ShapeMismatchError
from .._ragged import SparseVectors
from .._tensor import Tensor

__all__ = ["SIGNATURE", "HEADER", "TRAILER", "VECTOR_TYPES", "ID_TYPES", "CopyColumns", "CopyData",
           "encode_copy", "encode_tuples", "iter_copy"]

SIGNATURE: Final = b"PGCOPY\n\xff\r\n\x00"
HEADER: Final = SIGNATURE + b"\x00\x00\x00\x00" + b"\x00\x00\x00\x00"  # flags 0, no header extension
TRAILER: Final = b"\xff\xff"
#: pgvector type -> the densewire dtype a reader returns
VECTOR_TYPES: Final = {"vector": "float32", "halfvec": "float16", "bit": "binary", "sparsevec": "float32"}
ID_TYPES: Final = ("int8", "int4", "text", "uuid")
_MAX_DIMS: Final = {"vector": 16000, "halfvec": 16000, "bit": (1 << 31) - 1, "sparsevec": 1_000_000_000}
_MAX_SPARSE_NNZ: Final = 16000
_ID_WIDTH: Final = {"int8": 8, "int4": 4, "uuid": 16}
_ID_NUMPY: Final = {"int8": ">i8", "int4": ">i4", "uuid": "V16"}
_ITEMS: Final = {"vector": ">f4", "halfvec": ">f2"}  # the types whose items are written block by block
#: the input bytes of one block of rows in encode_tuples: the block, its swapped copy and its tuples stay in
#: cache between the passes (measured on a 512 KiB-L2 EPYC, 10,000 x 1,536 float32: 512 KiB and 1 MiB
#: fastest, 64 KiB slowest, numpy's per-call cost then dominating)
_BLOCK_BYTES: Final = 512 * 1024


@dataclass(frozen=True, slots=True)
class CopyColumns:
    """The columns of one COPY: an optional id column, then one vector column of a pgvector type."""

    pg_type: str = "vector"
    column: str = "embedding"
    id_type: str | None = None
    id_column: str = "id"

    def __post_init__(self) -> None:
        if self.pg_type not in VECTOR_TYPES:
            raise InvalidFieldError(f"unknown vector type {self.pg_type!r}; expected one of "
                                    f"{', '.join(VECTOR_TYPES)}", field=self.column)
        if self.id_type is not None and self.id_type not in ID_TYPES:
            raise InvalidFieldError(f"unknown id type {self.id_type!r}; expected one of {', '.join(ID_TYPES)}",
                                    field=self.id_column)

    @property
    def count(self) -> int:
        return 1 if self.id_type is None else 2

    @property
    def names(self) -> tuple[str, ...]:
        return (self.column,) if self.id_type is None else (self.id_column, self.column)


@dataclass(frozen=True, slots=True)
class CopyData:
    """A decoded stream: the vectors as one tensor, and the ids (None without an id column): an int64 or
    int32 array (of objects, None for NULL, when any id is NULL), or a list of str / uuid.UUID / None."""

    tensor: Tensor
    ids: Any = None


# ------------------------------------------------------------------------------------ writing
def _as_tensor(vectors: Tensor | np.ndarray) -> Tensor:
    return vectors if isinstance(vectors, Tensor) else Tensor.from_array(np.asarray(vectors))


def _column_values(t: Tensor, cols: CopyColumns, row0: int) -> np.ndarray:
    """The vector column's values in its dtype (native byte order; packed bytes for bit), checked."""
    n, d = t.shape
    if not 1 <= d <= _MAX_DIMS[cols.pg_type]:
        raise InvalidFieldError(f"a {cols.pg_type} has 1 to {_MAX_DIMS[cols.pg_type]} dimensions, not {d}",
                                field=cols.column)
    if cols.pg_type == "bit":
        if t.dtype == "binary":
            a = t.array
            if d % 8 and n:  # pad bits are written 0 (SPEC section 3.4)
                a = a.copy()
                a[:, -1] &= np.uint8((0xFF << (8 - d % 8)) & 0xFF)
            return a
        return to_binary(t.array if t.dtype in ("float32", "float64") else widen(t))
    if t.dtype in ("int8", "uint8", "binary"):
        raise InvalidFieldError(f"a {t.dtype} tensor cannot fill a {cols.pg_type} column", field=cols.column)
    if cols.pg_type == "halfvec":
        if t.dtype == "float16":
            a = t.array
        elif t.dtype == "float64":
            with np.errstate(over="ignore"):
                a = t.array.astype(np.float16)  # numpy rounds float64 to float16 directly, ties to even
        else:
            a = float32_to_float16(t.array if t.dtype == "float32" else widen(t))
    elif t.dtype == "float64":
        with np.errstate(over="ignore"):
            a = t.array.astype(np.float32)
    else:
        a = widen(t)  # float32 as is; float16 and bfloat16 exactly
    if a.dtype == np.float16:  # numpy's isfinite widens float16 item by item: test the exponent bits instead
        ok = bool(((a.view(np.uint16) & 0x7C00) != 0x7C00).all())
    else:
        ok = bool(np.isfinite(a).all())  # one vectorised pass (half the time of a float32 sum)
    if not ok:
        finite = np.isfinite(a)
        r, c = np.unravel_index(int(np.argmin(finite.ravel())), finite.shape)
        raise NonFiniteError(f"{a[r, c]} cannot be stored in a {cols.pg_type} (pgvector refuses NaN and infinity)",
                             field=f"{cols.column}[{row0 + r}][{c}]")
    return a


def _id_values(ids: Any, cols: CopyColumns, n: int, row0: int) -> tuple[np.ndarray, np.ndarray | None]:
    """The id column as a padded (n, width) uint8 matrix of big-endian values, and each row's length
    (None when every row has the full width)."""
    id_type, name = cols.id_type, cols.id_column
    if ids is None:
        raise InvalidFieldError("the COPY has an id column but no ids were given", field=name)
    if isinstance(ids, np.ndarray) and ids.dtype.kind in "iu" and id_type in ("int8", "int4"):
        arr = ids.reshape(-1)
        nulls = None
    else:
        seq = list(ids)
        if len(seq) != n:
            raise ShapeMismatchError(f"{len(seq)} ids for {n} vectors", field=name)
        nulls = np.fromiter((v is None for v in seq), bool, n)
        if id_type in ("int8", "int4"):
            try:
                arr = np.array([0 if v is None else int(v) for v in seq], dtype=object)
                arr = arr.astype(np.int64) if n else np.zeros(0, np.int64)
            except (TypeError, ValueError, OverflowError) as exc:
                bad = next(i for i, v in enumerate(seq) if not _fits_int(v, 64))
                raise InvalidFieldError(f"id {seq[bad]!r} is not an {id_type}", field=f"{name}[{row0 + bad}]") from exc
        elif id_type == "uuid":
            try:
                raw = b"".join(b"\0" * 16 if v is None else (v if isinstance(v, uuidlib.UUID) else uuidlib.UUID(str(v))).bytes
                               for v in seq)
            except ValueError as exc:
                bad = next(i for i, v in enumerate(seq) if v is not None and not _is_uuid(v))
                raise InvalidFieldError(f"id {seq[bad]!r} is not a uuid", field=f"{name}[{row0 + bad}]") from exc
            return np.frombuffer(raw, np.uint8).reshape(n, 16), (np.where(nulls, -1, 16) if nulls.any() else None)
        else:  # text
            encoded = [b"" if v is None else str(v).encode("utf-8") for v in seq]
            lengths = np.fromiter(map(len, encoded), np.int64, n)
            width = int(lengths.max()) if n else 0
            mat = np.zeros((n, width), np.uint8)
            mat[np.arange(width) < lengths[:, None]] = np.frombuffer(b"".join(encoded), np.uint8)
            return mat, np.where(nulls, -1, lengths)
        if not nulls.any():
            nulls = None
    if len(arr) != n:
        raise ShapeMismatchError(f"{len(arr)} ids for {n} vectors", field=name)
    if arr.dtype.kind == "u" and n and arr.max() >= 1 << 63:
        i = int(np.argmax(arr >= 1 << 63))
        raise InvalidFieldError(f"id {int(arr[i])} is out of the int8 range", field=f"{name}[{row0 + i}]")
    if id_type == "int4":
        bad = (arr < -(1 << 31)) | (arr >= (1 << 31))
        if bad.any():
            i = int(np.argmax(bad))
            raise InvalidFieldError(f"id {int(arr[i])} is out of the int4 range", field=f"{name}[{row0 + i}]")
    mat = arr.astype(_ID_NUMPY[id_type]).view(np.uint8).reshape(n, _ID_WIDTH[id_type])
    return mat, (None if nulls is None else np.where(nulls, -1, _ID_WIDTH[id_type]))


def _fits_int(v: Any, bits: int) -> bool:
    try:
        return v is None or -(1 << (bits - 1)) <= int(v) < (1 << (bits - 1))
    except (TypeError, ValueError):
        return False


def _is_uuid(v: Any) -> bool:
    try:
        uuidlib.UUID(str(v))
        return True
    except ValueError:
        return False


def _be_u8(a: np.ndarray, dt: str) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=dt).view(np.uint8).reshape(a.shape[0], -1)


def encode_tuples(vectors: Tensor | np.ndarray, cols: CopyColumns = CopyColumns(), ids: Any = None,
                  row0: int = 0, buffer: list | None = None) -> memoryview:
    """The tuples of these rows (no header, no trailer); ``row0`` numbers the rows in error fields.
    ``buffer``, a list kept by the caller between calls, lets fixed-width tuples reuse one array (the
    returned view is then only valid until the next call)."""
    if isinstance(vectors, SparseVectors):
        return _csr_tuples(vectors, cols, ids, row0)
    t = _as_tensor(vectors)
    n, d = t.shape
    blockwise = cols.pg_type in _ITEMS  # converted, checked and swapped block by block in _put_values
    values = _column_values(Tensor(t.array[:0], t.dtype, d) if blockwise else t, cols, row0)  # d checked
    id_mat, id_len = (None, None) if cols.id_type is None else _id_values(ids, cols, n, row0)
    if cols.pg_type == "sparsevec":
        return _sparse_tuples(values, d, cols, id_mat, id_len, row0)
    if cols.pg_type == "bit":
        head, data_dt, value_len = [("bits", ">i4")], np.dtype(("u1", values.shape[1])), 4 + values.shape[1]
    else:
        item = ">f4" if cols.pg_type == "vector" else ">f2"
        head, data_dt, value_len = [("dim", ">i2"), ("unused", ">i2")], np.dtype((item, d)), 4 + np.dtype(item).itemsize * d
    fields: list[tuple[str, Any]] = [("count", ">i2")]
    if id_mat is not None:
        fields += [("id_len", ">i4"), ("id", np.dtype(("u1", id_mat.shape[1])))]
    fields += [("len", ">i4"), *head, ("data", data_dt)]
    dt = np.dtype(fields)
    reuse = buffer is not None and id_len is None
    if reuse and buffer and buffer[0].dtype == dt and len(buffer[0]) >= n:
        rec = buffer[0][:n]  # its constant fields were written when it was made: they follow from dt
    else:
        rec = np.empty(n, dt)
        if reuse:
            buffer[:] = [rec]
        rec["count"] = cols.count
        rec["len"] = value_len
        if cols.pg_type == "bit":
            rec["bits"] = d
        else:
            rec["dim"] = d
            rec["unused"] = 0
        if id_mat is not None and id_len is None:
            rec["id_len"] = id_mat.shape[1]
    if id_mat is not None:
        if id_len is not None:
            rec["id_len"] = id_len
        rec["id"] = id_mat
    if blockwise:
        _put_values(rec, t, cols, row0, buffer if reuse else None)
    else:
        rec["data"] = values
    flat = rec.view(np.uint8).reshape(n, rec.dtype.itemsize)
    if id_len is None:
        return memoryview(flat.reshape(-1))
    keep = np.ones(flat.shape, bool)  # drop the id bytes a row does not have (NULL ids, shorter texts)
    keep[:, 6:6 + id_mat.shape[1]] = np.arange(id_mat.shape[1]) < id_len[:, None]
    return memoryview(flat[keep])


def _put_values(rec: np.ndarray, t: Tensor, cols: CopyColumns, row0: int, buffer: list | None) -> None:
    """The vector column's items into ``rec["data"]``, big-endian, converted and checked (section 16.2).

    A tuple's items start 2 bytes past a 4-byte boundary every other row, and numpy byte-swaps into such
    unaligned strided memory an item at a time; so the swap goes into an aligned array first (numpy's
    vectorised swap loop) and the swapped bytes are then copied row by row (one memcpy a row), a block
    of rows at a time (:func:`_checked_blocks`). ``buffer`` keeps the aligned block and the check's
    boolean block between chunks."""
    n, d = t.shape
    item = np.dtype(_ITEMS[cols.pg_type])
    rows = min(_block_rows(t), n)
    if buffer is not None and len(buffer) > 2 and buffer[1].dtype == item and buffer[1].shape[1:] == (d,) \
            and len(buffer[1]) >= rows:
        swapped, ok = buffer[1], buffer[2]
    else:
        swapped, ok = np.empty((rows, d), item), np.empty((rows, d), bool)
        if buffer is not None:
            buffer[1:] = [swapped, ok]
    offset = rec.dtype.fields["data"][1]
    flat = rec.view(np.uint8).reshape(n, rec.dtype.itemsize)
    width = item.itemsize * d
    for b0, b1, values in _checked_blocks(t, cols, row0, ok):
        sw = swapped[:b1 - b0]
        np.copyto(sw, values)
        flat[b0:b1, offset:offset + width] = sw.view(np.uint8).reshape(b1 - b0, width)


def _block_rows(t: Tensor) -> int:
    return max(1, _BLOCK_BYTES // max(1, t.array.itemsize * t.array.shape[1]))


def _checked_blocks(t: Tensor, cols: CopyColumns, row0: int, ok: np.ndarray) -> Iterator[tuple[int, int, np.ndarray]]:
    """(start, stop, values) of each block of about :data:`_BLOCK_BYTES` of input rows, the values in the
    column type's dtype (native byte order) and checked. Taken a block at a time, the conversion and the
    check read the input from memory once, and the swap that follows finds it still in cache (whole-chunk
    passes read and wrote the chunk several times, and allocated a chunk-sized boolean ``isfinite``
    result or float16 temporaries). ``ok`` holds the check's booleans for float32 into ``vector``."""
    n, d = t.shape
    block = _block_rows(t)
    array = t.array
    as_is = cols.pg_type == "vector" and t.dtype == "float32" and array.dtype == np.float32  # no conversion
    for b0 in range(0, n, block):
        b1 = min(b0 + block, n)
        if as_is:
            values = array[b0:b1]
            if not np.isfinite(values, out=ok[:b1 - b0]).all():
                _column_values(Tensor(values, t.dtype, d), cols, row0 + b0)  # raises, naming the item
        else:
            values = _column_values(Tensor(array[b0:b1], t.dtype, d), cols, row0 + b0)  # converted and checked
        yield b0, b1, values


def encode_tuple_parts(vectors: Tensor | np.ndarray, cols: CopyColumns, ids: Any, row0: int,
                       buffer: list) -> tuple[memoryview, memoryview, int, int] | None:
    """Fixed-width ``vector``/``halfvec`` tuples in two arrays, for a writer that gathers them itself
    (``sendmsg``): ``(heads, items, head_size, items_size)``, where row r's tuple is ``heads[r * head_size:
    (r + 1) * head_size]`` (field count, id, length, dim, unused) then ``items[r * items_size: ...]``. The
    items are byte-swapped straight into their aligned array: one pass fewer than :func:`encode_tuples`,
    whose tuples are contiguous. None when the tuples vary in width (NULL or text ids) or for ``bit``
    and ``sparsevec``. ``buffer`` (a list kept by the caller) holds the arrays: the views are valid until
    the next call."""
    t = _as_tensor(vectors)
    n, d = t.shape
    if cols.pg_type not in _ITEMS or cols.id_type == "text":
        return None
    _column_values(Tensor(t.array[:0], t.dtype, d), cols, row0)  # d checked
    id_mat, id_len = (None, None) if cols.id_type is None else _id_values(ids, cols, n, row0)
    if id_len is not None:
        return None
    item = np.dtype(_ITEMS[cols.pg_type])
    fields: list[tuple[str, Any]] = [("count", ">i2")]
    if id_mat is not None:
        fields += [("id_len", ">i4"), ("id", np.dtype(("u1", id_mat.shape[1])))]
    dt = np.dtype(fields + [("len", ">i4"), ("dim", ">i2"), ("unused", ">i2")])
    rows = min(_block_rows(t), n)
    if len(buffer) == 3 and buffer[0].dtype == dt and len(buffer[0]) >= n and buffer[1].dtype == item \
            and buffer[1].shape[1:] == (d,) and len(buffer[2]) >= rows:
        heads, items, ok = buffer[0][:n], buffer[1][:n], buffer[2]
    else:
        heads, items, ok = np.empty(n, dt), np.empty((n, d), item), np.empty((rows, d), bool)
        buffer[:] = [heads, items, ok]
        heads["count"] = cols.count
        heads["len"] = 4 + item.itemsize * d
        heads["dim"] = d
        heads["unused"] = 0
        if id_mat is not None:
            heads["id_len"] = id_mat.shape[1]
    if id_mat is not None:
        heads["id"] = id_mat
    for b0, b1, values in _checked_blocks(t, cols, row0, ok):
        np.copyto(items[b0:b1], values)
    return (memoryview(heads.view(np.uint8)), memoryview(items.view(np.uint8).reshape(-1)), dt.itemsize,
            item.itemsize * d)


def _sparse_tuples(values: np.ndarray, d: int, cols: CopyColumns, id_mat: np.ndarray | None,
                   id_len: np.ndarray | None, row0: int) -> memoryview:
    n = values.shape[0]
    nonzero = values != 0  # +0.0 and -0.0 are left out: pgvector refuses zero values
    nnz = nonzero.sum(axis=1)
    if n and nnz.max() > _MAX_SPARSE_NNZ:
        r = int(np.argmax(nnz > _MAX_SPARSE_NNZ))
        raise InvalidFieldError(f"a sparsevec holds at most {_MAX_SPARSE_NNZ} non-zero values, row {row0 + r} has "
                                f"{int(nnz[r])}", field=f"{cols.column}[{row0 + r}]")
    rows, idx = np.nonzero(nonzero)
    return _sparse_parts(nnz, rows, idx, values[rows, idx], d, cols, id_mat, id_len)


def _csr_tuples(sv: SparseVectors, cols: CopyColumns, ids: Any, row0: int) -> memoryview:
    """``sparsevec`` tuples straight from a SparseVectors' indices and values (no dense row is made);
    zero values are left out as pgvector requires, a non-finite one is an error naming its row and index."""
    if cols.pg_type != "sparsevec":
        raise InvalidFieldError(f"sparse vectors fill a sparsevec column, not a {cols.pg_type}", field=cols.column)
    n, d = sv.n, sv.vocab_size
    if not 1 <= d <= _MAX_DIMS["sparsevec"]:
        raise InvalidFieldError(f"a sparsevec has 1 to {_MAX_DIMS['sparsevec']} dimensions, not {d}", field=cols.column)
    values = sv.values_float32() if sv.dtype != "float64" else sv.values.astype(np.float32)
    rows = np.repeat(np.arange(n), sv.nnz)
    finite = np.isfinite(values)
    if not finite.all():
        j = int(np.argmin(finite))
        raise NonFiniteError(f"{values[j]} cannot be stored in a sparsevec (pgvector refuses NaN and infinity)",
                             field=f"{cols.column}[{row0 + int(rows[j])}][{int(sv.indices[j])}]")
    keep = values != 0
    nnz = np.bincount(rows[keep], minlength=n) if n else np.zeros(0, np.int64)
    if n and nnz.max() > _MAX_SPARSE_NNZ:
        r = int(np.argmax(nnz > _MAX_SPARSE_NNZ))
        raise InvalidFieldError(f"a sparsevec holds at most {_MAX_SPARSE_NNZ} non-zero values, row {row0 + r} has "
                                f"{int(nnz[r])}", field=f"{cols.column}[{row0 + r}]")
    id_mat, id_len = (None, None) if cols.id_type is None else _id_values(ids, cols, n, row0)
    return _sparse_parts(nnz, rows[keep], sv.indices[keep].astype(np.int64), values[keep], d, cols, id_mat, id_len)


def _sparse_parts(nnz: np.ndarray, rows: np.ndarray, idx: np.ndarray, nonzero_values: np.ndarray, d: int,
                  cols: CopyColumns, id_mat: np.ndarray | None, id_len: np.ndarray | None) -> memoryview:
    """The tuples of sparsevecs given row by row (``rows`` ascending) as ``(index, value)`` entries: laid out
    padded to the widest row, then compacted with one mask."""
    n = nnz.shape[0]
    width = int(nnz.max()) if n else 0
    rank = np.arange(len(rows)) - np.repeat(np.cumsum(nnz) - nnz, nnz)
    indices = np.zeros((n, width), np.int32)
    vals = np.zeros((n, width), np.float32)
    indices[rows, rank] = idx
    vals[rows, rank] = nonzero_values
    parts: list[tuple[np.ndarray, np.ndarray | None]] = [(_be_u8(np.full((n, 1), cols.count), ">i2"), None)]
    if id_mat is not None:
        length = np.full(n, id_mat.shape[1]) if id_len is None else id_len
        parts += [(_be_u8(length[:, None], ">i4"), None), (id_mat, np.maximum(length, 0))]
    head = np.stack([12 + 8 * nnz, np.full(n, d), nnz, np.zeros(n, np.int64)], axis=1)
    parts += [(_be_u8(head, ">i4"), None), (_be_u8(indices, ">i4"), 4 * nnz), (_be_u8(vals, ">f4"), 4 * nnz)]
    mat = np.concatenate([p for p, _ in parts], axis=1)
    keep = np.concatenate([np.ones(p.shape, bool) if ln is None else np.arange(p.shape[1]) < ln[:, None]
                           for p, ln in parts], axis=1)
    return memoryview(mat[keep])


def encode_copy(vectors: Tensor | np.ndarray, *, pg_type: str = "vector", ids: Any = None,
                id_type: str | None = None, column: str = "embedding", id_column: str = "id") -> bytes:
    """A whole stream (header, tuples, trailer) of ``vectors`` (an ``(n, d)`` array or Tensor) for a
    column of ``pg_type``, with ``ids`` in a first column when ``id_type`` is given."""
    cols = CopyColumns(pg_type, column, id_type, id_column)
    return HEADER + bytes(encode_tuples(vectors, cols, ids)) + TRAILER


def iter_copy(vectors: Tensor | np.ndarray, cols: CopyColumns = CopyColumns(), ids: Any = None, *,
              rows_per_chunk: int = 4096, header: bool = True, trailer: bool = True,
              row0: int = 0, reuse_buffer: bool = False) -> Iterator[memoryview | bytes]:
    """A stream in pieces: the header, the tuples of ``rows_per_chunk`` rows at a time (each checked before
    it is produced), the trailer. Memory stays bounded by the chunk whatever ``n`` is. With
    ``reuse_buffer`` every chunk is written into the same memory: use each piece before taking the next
    (as a synchronous ``copy.write`` does, which copies it)."""
    t = _as_tensor(vectors)
    buffer: list | None = [] if reuse_buffer else None
    if header:
        yield HEADER
    for start in range(0, t.n, rows_per_chunk):
        stop = min(start + rows_per_chunk, t.n)
        chunk_ids = None if ids is None else ids[start:stop]
        yield encode_tuples(Tensor(t.array[start:stop], t.dtype, t.d), cols, chunk_ids, row0 + start, buffer)
    if trailer:
        yield TRAILER
