"""LanceDB (embedded): the table a sink merges blocks into, and the block as Arrow without a copy.

LanceDB stores Arrow: a block's vector column goes in as the ``FixedSizeList<float32|float16>[d]`` it is
(a ``list<float>`` column, as Spark hands it, is re-wrapped as a fixed-size list over the same values
buffer: no copy of the vectors). Rows are merged by id (``merge_insert(id).when_matched_update_all()
.when_not_matched_insert_all()``), so a block written again replaces its rows rather than adding copies.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from .._optional import require

__all__ = ["lancedb", "fixed_size_block", "check_table", "LanceTableError"]


def lancedb() -> Any:
    return require("lancedb", extra="stores", feature="writing to LanceDB")


class LanceTableError(ValueError):
    pass


def fixed_size_block(ids: pa.Array, vectors: np.ndarray, id_column: str, column: str,
                     source: pa.ChunkedArray | pa.Array | None = None) -> pa.Table:
    """``(id_column, column)`` with the vectors a ``FixedSizeList`` over ``vectors``' own buffer (or
    ``source`` itself, when it is a one-chunk fixed-size list already)."""
    if source is not None:
        chunk = source.chunks[0] if isinstance(source, pa.ChunkedArray) and source.num_chunks == 1 else source
        if isinstance(chunk, pa.Array) and pa.types.is_fixed_size_list(chunk.type):
            return pa.table({id_column: ids, column: chunk})
    values = pa.array(vectors.reshape(-1))  # a view of the numpy buffer
    return pa.table({id_column: ids, column: pa.FixedSizeListArray.from_arrays(values, vectors.shape[1])})


def check_table(db: Any, name: str, id_column: str, column: str, dims: int, value_type: pa.DataType, *,
                create: bool, id_type: pa.DataType = pa.int64()) -> tuple[Any, pa.Schema]:
    """The table ``name`` of ``db`` (made with ``create`` when missing) and its schema, checked: both
    columns there, the vector column a fixed-size list of ``dims`` values."""
    try:
        table = db.open_table(name)
    except (ValueError, FileNotFoundError):
        if not create:
            raise LanceTableError(f"no table {name!r} in {db.uri} (create it, or pass create_table=True / "
                                  f"--create-index to have one of {dims}-value vectors made)") from None
        schema = pa.schema([pa.field(id_column, id_type, nullable=False),
                            (column, pa.list_(pa.field("item", value_type), dims))])
        table = db.create_table(name, schema=schema, exist_ok=True)
    schema = table.schema
    for col in (id_column, column):
        if col not in schema.names:
            raise LanceTableError(f"table {name!r} has no column {col!r} (its columns: {schema.names})")
    typ = schema.field(column).type
    if not pa.types.is_fixed_size_list(typ):
        raise LanceTableError(f"{name}.{column} is of type {typ}, not a fixed-size list (a vector column)")
    if typ.list_size != dims:
        raise LanceTableError(f"vectors of {dims} dimensions for {name}.{column}, a column of {typ.list_size}")
    return table, schema
