"""Reading a block's columns: the texts to embed, the ids, and a vector column as one ``(n, d)`` array.

Everything is checked before any request is sent or any row written: a missing or non-string text
column, a null or empty text, a null id, a vector column that is not a fixed-size (or uniformly
long) list of numbers, or a null vector raise :class:`BatchError` naming the column, the row and its
id, and the block.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .._errors import DensewireError
from .._ragged import RaggedTensor, SparseVectors
from ._errors import BatchError

__all__ = ["texts_of", "ids_of", "vectors_of", "row_id", "VALUE_TYPES", "value_type", "vector_chunks", "token_chunks",
           "sparse_chunks", "is_sparse_column", "is_token_column"]

#: densewire dtype -> the Arrow type of a vector column's values (bfloat16 travels as its uint16 bits)
VALUE_TYPES = {"float32": pa.float32(), "float16": pa.float16(), "float64": pa.float64(), "bfloat16": pa.uint16(),
               "int8": pa.int8(), "uint8": pa.uint8(), "binary": pa.uint8()}


def value_type(dtype: str) -> pa.DataType:
    try:
        return VALUE_TYPES[dtype]
    except KeyError:
        raise BatchError(f"dtype must be one of {', '.join(VALUE_TYPES)}, not {dtype!r}", column=None) from None


def _column(data: pa.Table | pa.RecordBatch, name: str, block: str | None, what: str) -> Any:
    if name not in data.schema.names:
        raise BatchError(f"no {what} column {name!r}; the columns are {data.schema.names}", column=name, block=block)
    return data.column(name)


def row_id(data: pa.Table | pa.RecordBatch, id_column: str | None, row: int) -> Any:
    """The id of row ``row`` (None without an id column)."""
    if id_column is None or id_column not in data.schema.names:
        return None
    return data.column(id_column)[row].as_py()


def texts_of(data: pa.Table | pa.RecordBatch, column: str, *, id_column: str | None = None,
             block: str | None = None) -> list[str]:
    """The texts of ``column`` as Python strings, each non-null and non-empty."""
    col = _column(data, column, block, "text")
    typ = col.type
    if not (pa.types.is_string(typ) or pa.types.is_large_string(typ) or pa.types.is_string_view(typ)):
        raise BatchError(f"the text column is of type {typ}, not a string", column=column, block=block)
    if col.null_count:
        row = _first(pc.is_null(col))
        raise BatchError("a null text", column=column, row=row, row_id=row_id(data, id_column, row), block=block)
    empty = pc.equal(pc.utf8_length(col), 0)
    if pc.any(empty).as_py():
        row = _first(empty)
        raise BatchError("an empty text", column=column, row=row, row_id=row_id(data, id_column, row), block=block)
    return col.to_pylist()


def ids_of(data: pa.Table | pa.RecordBatch, column: str, *, block: str | None = None) -> list[Any] | np.ndarray:
    """The ids: an int64 array for integer ids, else Python values (str, UUID); none may be null."""
    col = _column(data, column, block, "id")
    if col.null_count:
        row = _first(pc.is_null(col))
        raise BatchError("a null id", column=column, row=row, block=block)
    if pa.types.is_integer(col.type):
        return np.asarray(col.cast(pa.int64()).to_numpy(), dtype=np.int64)
    if not (pa.types.is_string(col.type) or pa.types.is_large_string(col.type) or pa.types.is_string_view(col.type)
            or pa.types.is_fixed_size_binary(col.type) or isinstance(col.type, pa.UuidType)):
        raise BatchError(f"the id column is of type {col.type}: ids are integers, strings or UUIDs", column=column,
                         block=block)
    return col.to_pylist()


def _first(mask: Any) -> int:
    return int(pc.index(mask, True).as_py())


def vector_chunks(data: pa.Table | pa.RecordBatch, column: str, *, id_column: str | None = None,
                  block: str | None = None, skip_empty: bool = False) -> list[tuple[int, np.ndarray]]:
    """The vector column as ``(first row, (k, d) array)`` pieces (with ``skip_empty``, only those of
    k > 0), views of its values buffers where the values are one contiguous run (a fixed-size list, or
    a list whose rows all have d values)."""
    col = _column(data, column, block, "vector")
    chunks = col.chunks if isinstance(col, pa.ChunkedArray) else [col]
    out, row0, d = [], 0, None
    for chunk in chunks:
        if isinstance(chunk, pa.ExtensionArray):
            chunk = chunk.storage
        a = _chunk_array(chunk, data, column, id_column, block, row0)
        if d is not None and a.shape[1] != d and len(chunk):
            raise BatchError(f"rows of {a.shape[1]} and of {d} values in one column", category="shape_mismatch",
                             column=column, row=row0, row_id=row_id(data, id_column, row0), block=block)
        if len(chunk):
            d = a.shape[1]
        if len(a) or not skip_empty:
            out.append((row0, a))
        row0 += len(chunk)
    return out


def vectors_of(data: pa.Table | pa.RecordBatch, column: str, *, id_column: str | None = None,
               block: str | None = None) -> np.ndarray:
    """The vector column as one ``(n, d)`` array (a view when it is one chunk)."""
    arrays = [a for _r, a in vector_chunks(data, column, id_column=id_column, block=block, skip_empty=True)]
    if len(arrays) == 1:
        return arrays[0]
    return np.concatenate(arrays) if arrays else np.empty((0, 0), np.float32)


def _chunk_array(chunk: pa.Array, data: Any, column: str, id_column: str | None, block: str | None,
                 row0: int) -> np.ndarray:
    typ = chunk.type
    if chunk.null_count:
        row = _first(pc.is_null(chunk)) + row0
        raise BatchError("a null vector", column=column, row=row, row_id=row_id(data, id_column, row), block=block)
    if pa.types.is_fixed_size_list(typ):
        d = typ.list_size
        values = chunk.flatten()  # the child values of these rows (the chunk's offset applied)
    elif pa.types.is_list(typ) or pa.types.is_large_list(typ):
        lengths = pc.list_value_length(chunk).to_numpy(zero_copy_only=False)
        d = int(lengths[0]) if len(lengths) else 0
        if len(lengths) and (bad := np.flatnonzero(lengths != d)).size:
            row = int(bad[0]) + row0
            raise BatchError(f"a vector of {int(lengths[bad[0]])} values in a column of {d}-value vectors",
                             category="shape_mismatch", column=column, row=row,
                             row_id=row_id(data, id_column, row), block=block)
        values = chunk.flatten()
    else:
        raise BatchError(f"the vector column is of type {typ}, not a list of numbers", column=column, block=block)
    if not (pa.types.is_floating(values.type) or pa.types.is_integer(values.type)):
        raise BatchError(f"the vector column's values are of type {values.type}, not numbers", column=column,
                         block=block)
    if values.null_count:
        raise BatchError("a null value inside a vector", column=column, block=block)
    return values.to_numpy(zero_copy_only=True).reshape(len(chunk), d)


# -- per-token and sparse columns (SPEC.md 20.7), as made by BatchEmbedder(output="tokens" | "sparse") -------------

def _chunks_of(data: pa.Table | pa.RecordBatch, column: str, block: str | None, what: str) -> list[pa.Array]:
    col = _column(data, column, block, what)
    chunks = col.chunks if isinstance(col, pa.ChunkedArray) else [col]
    return [c.storage if isinstance(c, pa.ExtensionArray) else c for c in chunks]


def _list_offsets(chunk: pa.Array) -> np.ndarray:
    """A list array's ``len + 1`` offsets (its slice offset applied), int64."""
    return np.asarray(chunk.offsets.to_numpy(zero_copy_only=False), np.int64)


def _null_row(chunk: pa.Array, row0: int, data: Any, column: str, id_column: str | None, block: str | None,
              what: str) -> None:
    if chunk.null_count:
        row = _first(pc.is_null(chunk)) + row0
        raise BatchError(f"a null {what}", column=column, row=row, row_id=row_id(data, id_column, row), block=block)


def is_sparse_column(data: pa.Table | pa.RecordBatch, column: str) -> bool:
    """Whether ``column`` is a struct (a sparse column: indices and values)."""
    return column in data.schema.names and pa.types.is_struct(data.schema.field(column).type)


def is_token_column(data: pa.Table | pa.RecordBatch, column: str) -> bool:
    """Whether ``column`` is a list of lists (a per-token column)."""
    if column not in data.schema.names:
        return False
    typ = data.schema.field(column).type
    typ = getattr(typ, "storage_type", typ)
    return (pa.types.is_list(typ) or pa.types.is_large_list(typ)) and (
        pa.types.is_fixed_size_list(typ.value_type) or pa.types.is_list(typ.value_type))


def token_chunks(data: pa.Table | pa.RecordBatch, column: str, *, id_column: str | None = None,
                 block: str | None = None) -> list[tuple[int, Any]]:
    """A per-token column as ``(first row, RaggedTensor)`` pieces over its values buffer: a
    ``List<FixedSizeList<T>[d]>`` (BatchEmbedder's) or a ``List<List<T>>`` whose inner lists all hold
    ``d`` values (Spark's ``array<array<float>>``). A null row, a null token vector or one of another
    length is a BatchError naming the row."""
    out, row0, d = [], 0, None
    for chunk in _chunks_of(data, column, block, "per-token"):
        typ = chunk.type
        if not ((pa.types.is_list(typ) or pa.types.is_large_list(typ))
                and (pa.types.is_fixed_size_list(typ.value_type) or pa.types.is_list(typ.value_type)
                     or pa.types.is_large_list(typ.value_type))):
            raise BatchError(f"the per-token column is of type {typ}, not a list of vectors (list<fixed_size_list>, "
                             f"what BatchEmbedder(output='tokens') makes)", column=column, block=block)
        _null_row(chunk, row0, data, column, id_column, block, "row of token vectors")
        outer = _list_offsets(chunk)
        inner = chunk.values.slice(int(outer[0]), int(outer[-1] - outer[0]))
        where = lambda k: int(np.searchsorted(outer - outer[0], k, side="right")) - 1 + row0  # noqa: E731
        if inner.null_count:
            row = where(_first(pc.is_null(inner)))
            raise BatchError("a null token vector", column=column, row=row, row_id=row_id(data, id_column, row),
                             block=block)
        if pa.types.is_fixed_size_list(inner.type):
            width = inner.type.list_size
        else:
            lengths = pc.list_value_length(inner).to_numpy(zero_copy_only=False)
            width = int(lengths[0]) if len(lengths) else (d or 0)
            if len(lengths) and (bad := np.flatnonzero(lengths != width)).size:
                row = where(int(bad[0]))
                raise BatchError(f"a token vector of {int(lengths[bad[0]])} values among {width}-value ones",
                                 category="shape_mismatch", column=column, row=row,
                                 row_id=row_id(data, id_column, row), block=block)
        if d is not None and len(inner) and width != d:
            raise BatchError(f"token vectors of {width} and of {d} values in one column", category="shape_mismatch",
                             column=column, row=row0, row_id=row_id(data, id_column, row0), block=block)
        values = inner.flatten()
        if not pa.types.is_floating(values.type):
            raise BatchError(f"the token vectors' values are of type {values.type}, not floats", column=column,
                             block=block)
        if values.null_count:
            raise BatchError("a null value inside a token vector", column=column, block=block)
        if len(inner):
            d = width
        rows = values.to_numpy(zero_copy_only=True).reshape(len(inner), width)
        if rows.dtype == np.float64:
            rows = rows.astype(np.float32)
        out.append((row0, RaggedTensor.from_lengths(rows, np.diff(outer))))
        row0 += len(chunk)
    return out


def sparse_chunks(data: pa.Table | pa.RecordBatch, column: str, *, vocab_size: int | None = None,
                  id_column: str | None = None, block: str | None = None) -> list[tuple[int, Any]]:
    """A sparse column, ``Struct<indices: List<UInt32>, values: List<float>>`` (BatchEmbedder's; Spark's
    ``struct<indices: array<int>, values: array<float>>``), as ``(first row, SparseVectors)`` pieces over
    its buffers. The vocabulary size is ``vocab_size`` or the field's ``densewire.vocabulary_size``
    metadata. Indices not strictly ascending, past the vocabulary or lists of unequal lengths are
    BatchErrors naming the row."""
    field = data.schema.field(column) if column in data.schema.names else None
    if vocab_size is None and field is not None and field.metadata:
        size = field.metadata.get(b"densewire.vocabulary_size", b"").decode()
        vocab_size = int(size) if size.isdigit() else None
    if vocab_size is None:
        raise BatchError("the sparse column states no vocabulary size (the field metadata "
                         "densewire.vocabulary_size BatchEmbedder(output='sparse') writes): pass vocab_size=",
                         column=column, block=block)
    out, row0 = [], 0
    for chunk in _chunks_of(data, column, block, "sparse"):
        typ = chunk.type
        names = [typ.field(i).name for i in range(typ.num_fields)] if pa.types.is_struct(typ) else []
        if names != ["indices", "values"] or not all(pa.types.is_list(typ.field(i).type) for i in range(2)) \
                or not pa.types.is_integer(typ.field(0).type.value_type) \
                or not pa.types.is_floating(typ.field(1).type.value_type):
            raise BatchError(f"the sparse column is of type {typ}, not struct<indices: list<uint32>, values: "
                             f"list<float>> (what BatchEmbedder(output='sparse') makes)", column=column, block=block)
        _null_row(chunk, row0, data, column, id_column, block, "sparse vector")
        idx, val = chunk.flatten()
        for part, what in ((idx, "indices"), (val, "values")):
            if part.null_count or part.values.null_count:
                raise BatchError(f"null {what} in a sparse vector", column=column, block=block)
        io, vo = _list_offsets(idx), _list_offsets(val)
        differ = np.flatnonzero(np.diff(io) != np.diff(vo))
        if differ.size:
            row = int(differ[0]) + row0
            raise BatchError(f"{int(io[differ[0] + 1] - io[differ[0]])} indices and {int(vo[differ[0] + 1] - vo[differ[0]])} "
                             f"values in one sparse vector", category="shape_mismatch", column=column, row=row,
                             row_id=row_id(data, id_column, row), block=block)
        indices = idx.values.slice(int(io[0]), int(io[-1] - io[0])).to_numpy(zero_copy_only=False)
        values = val.values.slice(int(vo[0]), int(vo[-1] - vo[0])).to_numpy(zero_copy_only=False)
        if indices.size and int(indices.min()) < 0:
            row = int(np.searchsorted(io - io[0], int(np.argmax(indices < 0)), side="right")) - 1 + row0
            raise BatchError("a negative index in a sparse vector", column=column, row=row,
                             row_id=row_id(data, id_column, row), block=block)
        try:
            sv = SparseVectors(indices.astype(np.uint32, copy=False), values.astype(np.float32, copy=False),
                               io - io[0], vocab_size)
        except (DensewireError, ValueError) as exc:
            row = getattr(exc, "offset", None)
            found = None
            if row is not None:  # the index's place: the row that holds it
                found = int(np.searchsorted(io - io[0], int(row) // 4, side="right")) - 1 + row0
            raise BatchError(f"a sparse vector is not valid: {exc}", column=column, row=found,
                             row_id=None if found is None else row_id(data, id_column, found), block=block) from exc
        out.append((row0, sv))
        row0 += len(chunk)
    return out
