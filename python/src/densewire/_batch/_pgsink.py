"""``PgvectorSink``: one block, one transaction, each row exactly once by its id.

A block's rows go by binary COPY (:func:`densewire.pgvector.copy_vectors`, one COPY per chunk of the
vector column, its values buffer encoded as it is) into a temporary table made for the transaction,
then ``INSERT INTO target SELECT ... FROM stage ON CONFLICT (id) DO NOTHING``, then COMMIT. A task
that dies before the COMMIT leaves nothing; a block written again (an engine retrying a task whose
COMMIT went through but whose answer was lost, or a job run twice) inserts none of the rows already
there. ``write`` returns the rows newly inserted.

Before anything is written the target is checked: the table and both columns exist, the id column
carries a unique constraint or primary key of its own (without one ON CONFLICT cannot tell a row
was there), and the vector column's dimension (``vector(d)``, ``halfvec(d)``, ``bit(d)``,
``sparsevec(d)``) is the vectors'.

A ``sparsevec(d)`` target takes a sparse column (``Struct<indices, values>``, what
``BatchEmbedder(output="sparse")`` makes; ``d`` its vocabulary size), each row's tuple written from its
indices and values (zeros left out, as pgvector requires), or a dense fixed-size list column.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pyarrow as pa

from .._client._retry import RetryPolicy
from .._optional import require
from .._stores._pgcopy import VECTOR_TYPES
from .._stores._pgvector import copy_vectors, quote_ident, quote_table
from .._tensor import Tensor
from ._columns import ids_of, is_sparse_column, sparse_chunks, vector_chunks
from ._errors import BatchError

__all__ = ["PgvectorSink", "TargetColumns"]

_ID_TYPES = {"int8": "int8", "int4": "int4", "text": "text", "varchar": "text", "bpchar": "text",
             "uuid": "uuid"}


class TargetColumns:
    """What the catalog says of the target: the types of both columns and the vector dimension."""

    def __init__(self, id_type: str, pg_type: str, dimensions: int | None) -> None:
        self.id_type, self.pg_type, self.dimensions = id_type, pg_type, dimensions


def _psycopg() -> Any:
    return require("psycopg", extra="serve", feature="writing to pgvector")


class PgvectorSink:
    """Write blocks of an Arrow table (its ``id_column`` and ``column``, vectors as a fixed-size list)
    into ``table`` of the database at ``conninfo``. One connection per sink, opened on first use
    (a sink is pickled to workers without it)."""

    def __init__(self, conninfo: str, *, table: str, column: str, id_column: str, retries: int = 2) -> None:
        self.conninfo, self.table, self.column, self.id_column = conninfo, table, column, id_column
        self.retries = retries
        self._conn: Any = None
        self._target: TargetColumns | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"conninfo": self.conninfo, "table": self.table, "column": self.column, "id_column": self.id_column,
                "retries": self.retries}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["conninfo"], table=state["table"], column=state["column"], id_column=state["id_column"],
                      retries=state.get("retries", 2))

    def __enter__(self) -> "PgvectorSink":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    def _connection(self) -> Any:
        if self._conn is None or self._conn.closed:
            self._conn = None
            self._conn = _psycopg().connect(self.conninfo)
            self._target = None
        return self._conn

    def _retrying(self, what: Any, block: str | None) -> Any:
        """``what()``, again on a new connection after a connection error (refused, lost: psycopg's
        OperationalError), up to ``retries`` times with the client's backoff; then a BatchError naming
        the block and the last error."""
        operational = _psycopg().OperationalError
        policy = RetryPolicy(self.retries)
        attempt = 0
        while True:
            attempt += 1
            try:
                return what()
            except operational as exc:
                self.close()
                if attempt > policy.max_retries:
                    raise BatchError(f"no connection to the database after {attempt} attempts: "
                                     f"{str(exc).strip()}", category="unavailable", block=block) from exc
            time.sleep(policy.wait(attempt))  # a connection failure: 18.2's backoff, never None within the retries

    def target(self, block: str | None = None) -> TargetColumns:
        """The checked types of the target's columns (read once per connection)."""
        def read() -> TargetColumns:
            conn = self._connection()
            if self._target is None:
                try:
                    self._target = self._read_target(conn, block)
                finally:
                    if not conn.closed:
                        conn.rollback()
            return self._target

        return self._retrying(read, block)

    def _read_target(self, conn: Any, block: str | None) -> TargetColumns:
        return _read_target(conn, self.table, self.column, self.id_column, block)

    def write(self, data: pa.Table | pa.RecordBatch, *, block: str) -> int:
        """Insert the rows of ``data`` whose ids are not in the table yet, in one transaction; the number
        inserted. A :class:`BatchError` names the block and what was wrong, raised before anything is
        written when the data or the target is at fault."""
        ids = ids_of(data, self.id_column, block=block)
        target = self.target(block)
        if is_sparse_column(data, self.column):
            if target.pg_type != "sparsevec":
                raise BatchError(f"a sparse column cannot fill {self.table}.{self.column}, a {target.pg_type}: "
                                 f"make it a sparsevec", column=self.column, block=block)
            vocab = _vocab_of(data, self.column, target)
            if vocab is None and b"densewire.vocabulary_size" not in (data.schema.field(self.column).metadata or {}):
                raise BatchError(f"the sparse column states no vocabulary size and {self.table}.{self.column} is a "
                                 f"sparsevec without one: declare it sparsevec(V)", column=self.column, block=block)
            pieces: list[tuple[int, Any]] = sparse_chunks(data, self.column, id_column=self.id_column, block=block,
                                                          vocab_size=vocab)
            d = pieces[0][1].vocab_size if pieces else None
        else:
            pieces = vector_chunks(data, self.column, id_column=self.id_column, block=block)
            d = next((a.shape[1] for _r, a in pieces if len(a)), None)
        if d is not None:
            width = d * 8 if target.pg_type == "bit" else d
            if target.dimensions is not None and width != target.dimensions:
                raise BatchError(f"vectors of {width} dimensions for {self.table}.{self.column}, a "
                                 f"{target.pg_type}({target.dimensions})", category="shape_mismatch",
                                 column=self.column, block=block)
        if len(ids) == 0:
            return 0
        return self._retrying(lambda: self._insert(ids, pieces, target, block), block)

    @contextmanager
    def writing(self, block: str) -> Iterator[None]:
        """Around a block's transaction: a row's densewire error or the database's refusal becomes a
        BatchError naming the block (and the column); a lost connection is left to :meth:`_retrying`."""
        try:
            yield
        except BatchError as exc:
            raise exc.in_block(block)
        except _psycopg().OperationalError:
            raise  # the connection: retried by _retrying
        except Exception as exc:
            if getattr(exc, "field", None) is not None and hasattr(exc, "category"):  # a densewire error of a row
                raise BatchError(str(exc), category=exc.category, column=self.column, block=block) from exc
            raise BatchError(f"writing into {self.table} failed: {type(exc).__name__}: {exc}",
                             category="internal_error", block=block) from exc

    def _insert(self, ids: Any, pieces: list[tuple[int, Any]], target: TargetColumns, block: str) -> int:
        """One transaction: COPY into a temporary table, INSERT ... ON CONFLICT DO NOTHING; rows inserted."""
        conn = self._connection()
        stage = quote_ident(f"densewire_stage_{uuid.uuid4().hex[:12]}")
        cols = f"{quote_ident(self.id_column)}, {quote_ident(self.column)}"
        with self.writing(block), conn.transaction():
            conn.execute(f"CREATE TEMPORARY TABLE {stage} ON COMMIT DROP AS SELECT {cols} FROM "
                         f"{quote_table(self.table)} WITH NO DATA")
            for row0, a in pieces:
                if a.shape[0]:
                    copy_vectors(conn, stage, (self.id_column, self.column), _tensor(a, target),
                                 ids[row0:row0 + len(a)], pg_type=target.pg_type, id_type=target.id_type,
                                 progress=False)
            cur = conn.execute(f"INSERT INTO {quote_table(self.table)} ({cols}) SELECT {cols} FROM {stage} "
                               f"ON CONFLICT ({quote_ident(self.id_column)}) DO NOTHING")
            inserted = cur.rowcount
        return inserted


def _vocab_of(data: Any, column: str, target: TargetColumns) -> int | None:
    """The sparse column's vocabulary size: its field metadata's, else the target's ``sparsevec(d)``."""
    meta = data.schema.field(column).metadata or {}
    return None if b"densewire.vocabulary_size" in meta else target.dimensions


def _tensor(a: Any, target: TargetColumns) -> Any:
    if not isinstance(a, np.ndarray):  # SparseVectors: encoded from its indices and values
        return a
    if target.pg_type == "bit":
        return Tensor.from_array(a.astype(np.uint8, copy=False), "binary", a.shape[1] * 8)
    return a


def _read_target(conn: Any, table: str, column: str, id_column: str, block: str | None) -> TargetColumns:
    with conn.cursor() as cur:
        cur.execute("SELECT to_regclass(%s)::oid", (quote_table(table),))
        row = cur.fetchone()
        if row is None or row[0] is None:
            raise BatchError(f"no table {table} in the database", column=None, block=block)
        oid = row[0]
        cur.execute("SELECT a.attname, a.attnum, a.atttypmod, t.typname FROM pg_attribute a JOIN pg_type t ON "
                    "t.oid = a.atttypid WHERE a.attrelid = %s AND a.attname = ANY(%s) AND a.attnum > 0 AND NOT "
                    "a.attisdropped", (oid, [column, id_column]))
        found = {name: (attnum, typmod, typ) for name, attnum, typmod, typ in cur.fetchall()}
        for name in (id_column, column):
            if name not in found:
                raise BatchError(f"table {table} has no column {name!r}", column=name, block=block)
        id_num, _m, id_typ = found[id_column]
        if id_typ not in _ID_TYPES:
            raise BatchError(f"{table}.{id_column} is of type {id_typ}; ids are bigint, integer, text or uuid",
                             column=id_column, block=block)
        _n, typmod, vtyp = found[column]
        vtyp = "bit" if vtyp == "varbit" else vtyp
        if vtyp not in VECTOR_TYPES:
            raise BatchError(f"{table}.{column} is of type {vtyp}, not vector, halfvec, bit or sparsevec", column=column,
                             block=block)
        cur.execute("SELECT 1 FROM pg_index WHERE indrelid = %s AND indisunique AND indnkeyatts = 1 AND "
                    "indkey[0] = %s AND indpred IS NULL AND indexprs IS NULL", (oid, id_num))
        if cur.fetchone() is None:
            raise BatchError(f"{table}.{id_column} has no unique constraint or primary key of its own: without one, "
                             f"a block written again would insert its rows twice (ALTER TABLE {table} ADD PRIMARY KEY "
                             f"({id_column}))", column=id_column, block=block)
    return TargetColumns(_ID_TYPES[id_typ], vtyp, typmod if typmod > 0 else None)
