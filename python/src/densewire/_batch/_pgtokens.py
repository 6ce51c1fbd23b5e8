"""``PgvectorTokensSink``: per-token (multi-vector) output into a table of one row per (id, token position).

A ColBERT document of 300 tokens is 300 vectors, and pgvector has no multi-vector type: the table
holds one row per token, ``(id, position, vector(d))``, with a unique constraint on ``(id,
position)``, which is what a late-interaction search (maxsim over the tokens of each candidate id)
reads::

    CREATE TABLE doc_tokens (id bigint, position int, embedding vector(384), PRIMARY KEY (id, position));

A block is one transaction: its token vectors go by one binary COPY per chunk of the column (the
RaggedTensor's values buffer encoded as it is, each document's id repeated for its tokens) into a
temporary table whose identity column numbers the rows in the order they arrived, then ``INSERT INTO
target SELECT id, row_number() OVER (PARTITION BY id ORDER BY arrival) - 1, vector ... ON CONFLICT (id,
position) DO NOTHING``. So a block written again (a retried task) inserts none of the tokens already
there, and a task that dies before its COMMIT leaves none. ``write`` returns the token rows inserted.

Checked before anything is written: the three columns exist, the id is bigint, integer, text or uuid,
the position an integer, ``(id, position)`` carries a unique index of its own, the vector column is a
``vector(d)`` or ``halfvec(d)`` of the tokens' ``d``, and no id appears twice in the block (its tokens'
positions would run on).
"""

from __future__ import annotations

import uuid
from typing import Any

import numpy as np
import pyarrow as pa

from .._stores._pgvector import copy_vectors, quote_ident, quote_table
from ._columns import ids_of, token_chunks
from ._errors import BatchError
from ._pgsink import _ID_TYPES, PgvectorSink, TargetColumns

__all__ = ["PgvectorTokensSink"]

_POSITION_TYPES = ("int2", "int4", "int8")


class PgvectorTokensSink(PgvectorSink):
    """Write blocks of an Arrow table (``id_column`` and the per-token ``column``, a
    ``List<FixedSizeList<float32>[d]>``) into ``table``: one row per token, ``(id_column,
    position_column, column)``, each (id, position) exactly once however often a block is written."""

    def __init__(self, conninfo: str, *, table: str, column: str, id_column: str, position_column: str = "position",
                 retries: int = 2) -> None:
        super().__init__(conninfo, table=table, column=column, id_column=id_column, retries=retries)
        self.position_column = position_column

    def __getstate__(self) -> dict[str, Any]:
        return {**super().__getstate__(), "position_column": self.position_column}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["conninfo"], table=state["table"], column=state["column"], id_column=state["id_column"],
                      position_column=state["position_column"], retries=state.get("retries", 2))

    def _read_target(self, conn: Any, block: str | None) -> TargetColumns:
        return _read_tokens_target(conn, self.table, self.column, self.id_column, self.position_column, block)

    def write(self, data: pa.Table | pa.RecordBatch, *, block: str) -> int:
        """Insert the token rows of ``data`` whose (id, position) are not in the table yet, in one
        transaction; the number inserted."""
        ids = ids_of(data, self.id_column, block=block)
        pieces = token_chunks(data, self.column, id_column=self.id_column, block=block)
        _check_unique(ids, self.id_column, block)
        target = self.target(block)
        d = next((r.d for _r, r in pieces if r.rows.n), None)
        if d is not None and target.dimensions is not None and d != target.dimensions:
            raise BatchError(f"token vectors of {d} dimensions for {self.table}.{self.column}, a "
                             f"{target.pg_type}({target.dimensions})", category="shape_mismatch", column=self.column,
                             block=block)
        if d is None:
            return 0
        return self._retrying(lambda: self._insert_tokens(ids, pieces, target, block), block)

    def _insert_tokens(self, ids: Any, pieces: list[tuple[int, Any]], target: TargetColumns, block: str) -> int:
        conn = self._connection()
        stage = quote_ident(f"densewire_stage_{uuid.uuid4().hex[:12]}")
        idc, pos, vec = (quote_ident(c) for c in (self.id_column, self.position_column, self.column))
        with self.writing(block), conn.transaction():
            conn.execute(f"CREATE TEMPORARY TABLE {stage} ON COMMIT DROP AS SELECT {idc}, {vec} FROM "
                         f"{quote_table(self.table)} WITH NO DATA")
            conn.execute(f"ALTER TABLE {stage} ADD COLUMN densewire_arrival bigint GENERATED ALWAYS AS IDENTITY")
            for row0, ragged in pieces:
                if not ragged.rows.n:
                    continue
                doc_ids = ids[row0:row0 + ragged.n]
                token_ids = (np.repeat(doc_ids, ragged.lengths) if isinstance(doc_ids, np.ndarray) else
                             [v for v, k in zip(doc_ids, ragged.lengths.tolist()) for _ in range(k)])
                copy_vectors(conn, stage, (self.id_column, self.column), ragged.rows, token_ids,
                             pg_type=target.pg_type, id_type=target.id_type, progress=False)
            cur = conn.execute(
                f"INSERT INTO {quote_table(self.table)} ({idc}, {pos}, {vec}) SELECT {idc}, row_number() OVER "
                f"(PARTITION BY {idc} ORDER BY densewire_arrival) - 1, {vec} FROM {stage} "
                f"ON CONFLICT ({idc}, {pos}) DO NOTHING")
            inserted = cur.rowcount
        return inserted


def _check_unique(ids: Any, column: str, block: str) -> None:
    values = ids.tolist() if isinstance(ids, np.ndarray) else ids
    seen: dict[Any, int] = {}
    for row, v in enumerate(values):
        if v in seen:
            raise BatchError(f"id {v!r} is in rows {seen[v]} and {row} of one block: a document's tokens are one "
                             f"row of the per-token column", column=column, row=row, row_id=v, block=block)
        seen[v] = row


def _read_tokens_target(conn: Any, table: str, column: str, id_column: str, position_column: str,
                        block: str | None) -> TargetColumns:
    with conn.cursor() as cur:
        cur.execute("SELECT to_regclass(%s)::oid", (quote_table(table),))
        row = cur.fetchone()
        if row is None or row[0] is None:
            raise BatchError(f"no table {table} in the database", block=block)
        oid = row[0]
        names = [id_column, position_column, column]
        cur.execute("SELECT a.attname, a.attnum, a.atttypmod, t.typname FROM pg_attribute a JOIN pg_type t ON "
                    "t.oid = a.atttypid WHERE a.attrelid = %s AND a.attname = ANY(%s) AND a.attnum > 0 AND NOT "
                    "a.attisdropped", (oid, names))
        found = {name: (attnum, typmod, typ) for name, attnum, typmod, typ in cur.fetchall()}
        for name in names:
            if name not in found:
                raise BatchError(f"table {table} has no column {name!r}", column=name, block=block)
        id_num, _m, id_typ = found[id_column]
        if id_typ not in _ID_TYPES:
            raise BatchError(f"{table}.{id_column} is of type {id_typ}; ids are bigint, integer, text or uuid",
                             column=id_column, block=block)
        pos_num, _m, pos_typ = found[position_column]
        if pos_typ not in _POSITION_TYPES:
            raise BatchError(f"{table}.{position_column} is of type {pos_typ}, not an integer", column=position_column,
                             block=block)
        _n, typmod, vtyp = found[column]
        if vtyp not in ("vector", "halfvec"):
            raise BatchError(f"{table}.{column} is of type {vtyp}: token vectors go in a vector or halfvec column",
                             column=column, block=block)
        cur.execute("SELECT 1 FROM pg_index WHERE indrelid = %s AND indisunique AND indnkeyatts = 2 AND "
                    "indpred IS NULL AND indexprs IS NULL AND ((indkey[0] = %s AND indkey[1] = %s) OR "
                    "(indkey[0] = %s AND indkey[1] = %s))", (oid, id_num, pos_num, pos_num, id_num))
        if cur.fetchone() is None:
            raise BatchError(f"{table} has no unique constraint or primary key on ({id_column}, {position_column}): "
                             f"without one, a block written again would insert its tokens twice (ALTER TABLE {table} "
                             f"ADD PRIMARY KEY ({id_column}, {position_column}))", column=position_column, block=block)
    return TargetColumns(_ID_TYPES[id_typ], vtyp, typmod if typmod > 0 else None)
