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

from ._errors import BatchError

__all__ = ["texts_of", "ids_of", "vectors_of", "row_id", "VALUE_TYPES", "value_type"]

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
