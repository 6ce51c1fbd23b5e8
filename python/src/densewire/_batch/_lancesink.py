"""``LanceDBSink``: blocks merged by id into a LanceDB table, the vectors as the Arrow they are.

Each block is one ``merge_insert`` on ``id_column`` (rows whose id is there are updated, the others
inserted) of the block's ids and its ``FixedSizeList`` vector column as it is: no copy of the vectors, no
Python object per value. A block written again (a retried task) leaves each id once. The table is
checked before the first block (both columns, a fixed-size list of the vectors' dimension) or made
with ``create_table=True``. LanceDB retries a commit that raced another writer's; a failure after that
is a :class:`BatchError` naming the block.
"""

from __future__ import annotations

import os
from typing import Any

import pyarrow as pa

from .._stores.lance import LanceTableError, check_table, fixed_size_block, lancedb
from ._columns import ids_of, vector_chunks
from ._errors import BatchError, store_check_error

__all__ = ["LanceDBSink"]


class LanceDBSink:
    """Write blocks of an Arrow table (``id_column`` and the vector ``column``) into ``table`` of the
    LanceDB database at ``uri`` (a folder, or an object store URI LanceDB takes). ``write`` returns the
    rows inserted (not those updated)."""

    def __init__(self, uri: str, *, table: str, column: str, id_column: str, create_table: bool = False,
                 storage_options: dict[str, str] | None = None) -> None:
        if "://" not in str(uri):
            uri = os.path.abspath(uri)  # resolved where the sink is made (the driver)
        self.uri, self.table, self.column, self.id_column = str(uri), table, column, id_column
        self.create_table, self.storage_options = create_table, storage_options
        self._table: Any = None
        self._schema: pa.Schema | None = None
        self._dims: int | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k not in ("_table", "_schema", "_dims")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state, _table=None, _schema=None, _dims=None)

    def close(self) -> None:
        self._table = self._schema = self._dims = None

    def check(self, dims: int, value_type: pa.DataType = pa.float32(), block: str | None = None,
              id_type: pa.DataType = pa.int64()) -> None:
        """The table checked (or made, with ``id_type`` ids and ``value_type`` values) for vectors of ``dims``."""
        try:
            db = lancedb().connect(self.uri, storage_options=self.storage_options)
            self._table, self._schema = check_table(db, self.table, self.id_column, self.column, dims, value_type,
                                                    create=self.create_table, id_type=id_type)
        except LanceTableError as exc:
            raise store_check_error(exc, column=self.column, block=block) from None
        self._dims = dims

    def write(self, data: pa.Table | pa.RecordBatch, *, block: str) -> int:
        ids_of(data, self.id_column, block=block)  # no null id
        pieces = vector_chunks(data, self.column, id_column=self.id_column, block=block, skip_empty=True)
        if not pieces:
            return 0
        d = pieces[0][1].shape[1]
        if self._dims != d or self._table is None:
            self.check(d, pa.from_numpy_dtype(pieces[0][1].dtype), block, data.schema.field(self.id_column).type)
        source = data.column(self.column)
        one = len(pieces) == 1
        parts = [fixed_size_block(data.column(self.id_column).slice(r, len(a)), a, self.id_column, self.column,
                                  source if one else None) for r, a in pieces]
        block_table = parts[0] if one else pa.concat_tables(parts)
        try:
            target = pa.schema([self._schema.field(self.id_column), self._schema.field(self.column)])
            block_table = block_table.cast(target)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise BatchError(f"the block does not fit {self.table}'s columns {self._schema}: {exc}",
                             column=self.column, block=block) from exc
        try:
            result = (self._table.merge_insert(self.id_column).when_matched_update_all()
                      .when_not_matched_insert_all().execute(block_table))
        except Exception as exc:
            raise BatchError(f"writing into LanceDB table {self.table} failed: {type(exc).__name__}: {exc}",
                             category="internal_error", block=block) from exc
        return int(result.num_inserted_rows)
