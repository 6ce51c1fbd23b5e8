"""``write_pgvector`` and ``write_es_bulk``: a DataFrame's ids and vectors into a store, partition by
partition, each row exactly once however often Spark runs a task again.

Each task gathers its partition's Arrow record batches (only the id and vector columns travel) into
one block, up to ``max_block_bytes`` of vectors (a bigger partition is cut into several blocks at
batch boundaries), and hands each block to :class:`densewire.batch.PgvectorSink` (binary COPY into a
temporary table, ``INSERT ... ON CONFLICT (id) DO NOTHING``, one transaction) or
:class:`densewire.batch.EsBulkSink` (one ``_bulk`` body per block with the ids as ``_id``, or one file
per block written atomically). A task that dies before its COMMIT leaves nothing; the attempt Spark
runs next writes the block whole, skipping any row already there by id. A block is named by the
write's id, the partition and its place in the partition (the same in every attempt: a file written
again replaces itself), followed by the stage and attempt for the pgvector errors.

The driver checks what the schema tells before the job: the id and vector columns and their types,
the target table, its columns, the unique id and the vector column's dimension against the one the
column's metadata states (a column made by :func:`densewire.spark.embed`). A job whose task failed
every attempt raises a :class:`~densewire.batch.BatchError` with the task's own error (the column,
row, id and block it names) and the number of attempts.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql import types as T

from .._batch import BatchError, EsBulkSink, EsRankVectorsSink, EsSparseVectorSink, PgvectorSink, PgvectorTokensSink
from .._batch._chromasink import ChromaSink
from .._batch._lancesink import LanceDBSink
from .._batch._milvussink import MilvusSink
from .._batch._ossink import OpenSearchSink
from ._failure import job_error
from ._types import (check_id_column, check_sparse_column, check_tokens_column, check_vector_column, dimensions_of,
                     vocabulary_of)

__all__ = ["write_pgvector", "write_pgvector_tokens", "write_es_bulk", "write_es_sparse_vector", "write_es_rank_vectors",
           "write_opensearch", "write_lancedb", "write_chroma", "write_milvus"]

DEFAULT_BLOCK_BYTES = 128 << 20


def _blocks(batches: Iterator[pa.RecordBatch], max_bytes: int) -> Iterator[pa.Table]:
    """The partition's batches gathered into tables of at most ``max_bytes`` (one batch at least)."""
    pending: list[pa.RecordBatch] = []
    size = 0
    for batch in batches:
        if pending and size + batch.nbytes > max_bytes:
            yield pa.Table.from_batches(pending)
            pending, size = [], 0
        pending.append(batch)
        size += batch.nbytes
    if pending:
        yield pa.Table.from_batches(pending)


class _WritePartitions:
    """The function ``mapInArrow`` runs in each write task: the partition's blocks into the sink, one
    output row (``rows``, ``blocks``) per task."""

    def __init__(self, sink: Any, job: str, max_bytes: int, attempt_in_name: bool) -> None:
        self.sink, self.job, self.max_bytes, self.attempt_in_name = sink, job, max_bytes, attempt_in_name

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        ctx = TaskContext.get()
        part = ctx.partitionId() if ctx is not None else 0
        rows = blocks = 0
        try:
            for k, table in enumerate(_blocks(batches, self.max_bytes)):
                block = f"{self.job}-{part:05d}-{k:04d}"
                if self.attempt_in_name and ctx is not None:
                    block += f" (partition {part}, stage {ctx.stageId()}, attempt {ctx.attemptNumber()})"
                self.sink.write(table, block=block)  # whole, or not at all (the task fails)
                rows += table.num_rows
                blocks += 1
        finally:
            close = getattr(self.sink, "close", None)
            if close is not None:
                close()
        yield pa.RecordBatch.from_pydict({"rows": [rows], "blocks": [blocks]},
                                         schema=pa.schema([("rows", pa.int64()), ("blocks", pa.int64())]))


def _run(df: Any, sink: Any, columns: tuple[str, str], max_block_bytes: int, attempt_in_name: bool) -> int:
    if max_block_bytes < 1:
        raise BatchError(f"max_block_bytes must be at least 1, got {max_block_bytes}")
    job = uuid.uuid4().hex[:12]
    counts = df.select(*columns).mapInArrow(_WritePartitions(sink, job, max_block_bytes, attempt_in_name),
                                            "rows long, blocks long")
    try:
        result = counts.collect()
    except Exception as exc:  # a Py4J/Spark error wrapping the task's own
        raise job_error(exc) from exc
    return int(sum(r["rows"] for r in result))


def write_pgvector(df: Any, conninfo: str, *, table: str, column: str, id_column: str,
                   max_block_bytes: int = DEFAULT_BLOCK_BYTES) -> int:
    """Write ``df``'s ``id_column`` and vector ``column`` (an array of numbers) into the same columns of
    ``table`` (``vector(d)``, ``halfvec(d)`` or ``bit(d)``, the id ``bigint``, ``integer``, ``text`` or
    ``uuid`` with a unique constraint), or a sparse column (``embed(..., output="sparse")``) into a
    ``sparsevec(V)`` column of its vocabulary size: binary COPY, one transaction a block (a partition, or
    ``max_block_bytes`` of it), each row exactly once by id. Returns the rows written, each now in the
    table once (as :func:`densewire.ray.write_pgvector` does): a row whose id was there already, from an
    earlier run or from a task attempt whose COMMIT went through before it died, is kept as it was."""
    check_id_column(df, id_column)
    sparse = column in df.schema.names and isinstance(df.schema[column].dataType, T.StructType)
    field = check_sparse_column(df, column) if sparse else check_vector_column(df, column)
    sink = PgvectorSink(conninfo, table=table, column=column, id_column=id_column)
    try:
        target = sink.target()
    finally:
        sink.close()
    if sparse and target.pg_type != "sparsevec":
        raise BatchError(f"a sparse column cannot fill {table}.{column}, a {target.pg_type}: make it a sparsevec",
                         column=column)
    d = vocabulary_of(field) if sparse else dimensions_of(field)
    if d is not None and target.dimensions is not None:
        width = d * 8 if target.pg_type == "bit" else d
        if width != target.dimensions:
            raise BatchError(f"vectors of {d} dimensions for {table}.{column}, a {target.pg_type}({target.dimensions})",
                             category="shape_mismatch", column=column)
    return _run(df, sink, (id_column, column), max_block_bytes, attempt_in_name=True)


def write_pgvector_tokens(df: Any, conninfo: str, *, table: str, column: str, id_column: str,
                          position_column: str = "position", max_block_bytes: int = DEFAULT_BLOCK_BYTES) -> int:
    """Write ``df``'s per-token ``column`` (``embed(..., output="tokens")``, ``array<array<float>>``) into
    ``table`` as one row per (``id_column``, ``position_column``) with the token's vector in ``column``:
    binary COPY, one transaction a block, ``ON CONFLICT (id, position) DO NOTHING``, so a task Spark runs
    again inserts no token twice (:class:`densewire.batch.PgvectorTokensSink`). The table and the dimension
    the column's metadata states are checked on the driver first. Returns the documents written."""
    check_id_column(df, id_column)
    field = check_tokens_column(df, column)
    sink = PgvectorTokensSink(conninfo, table=table, column=column, id_column=id_column,
                              position_column=position_column)
    try:
        target = sink.target()
    finally:
        sink.close()
    d = dimensions_of(field)
    if d is not None and target.dimensions is not None and d != target.dimensions:
        raise BatchError(f"token vectors of {d} dimensions for {table}.{column}, a {target.pg_type}({target.dimensions})",
                         category="shape_mismatch", column=column)
    return _run(df, sink, (id_column, column), max_block_bytes, attempt_in_name=True)


def write_es_sparse_vector(df: Any, url: str, *, index: str, field: str, id_column: str, vocab: Any,
                           create_index: bool = False, max_block_bytes: int = DEFAULT_BLOCK_BYTES,
                           **options: Any) -> int:
    """Write ``df``'s sparse ``field`` (``embed(..., output="sparse")``) into the ``sparse_vector`` field of
    ``index`` as ``{token: weight}`` objects, the tokens ``vocab``'s (:class:`densewire.batch.EsSparseVectorSink`),
    the ids as ``_id`` (a task Spark runs again replaces its documents). The index is checked (or created)
    on the driver, and the vocabulary's size against the column's. Returns the rows written."""
    check_id_column(df, id_column)
    spec = check_sparse_column(df, field)
    sink = EsSparseVectorSink(url, index=index, field=field, id_column=id_column, vocab=vocab,
                              create_index=create_index, **options)
    v = vocabulary_of(spec)
    if v is not None and v != len(sink.vocab):
        raise BatchError(f"sparse vectors of a {v}-token vocabulary, and the vocabulary given has {len(sink.vocab)} "
                         f"tokens", category="shape_mismatch", column=field)
    sink.check()
    return _run(df, sink, (id_column, field), max_block_bytes, attempt_in_name=False)


def write_es_rank_vectors(df: Any, url: str, *, index: str, field: str, id_column: str, create_index: bool = False,
                          max_block_bytes: int = DEFAULT_BLOCK_BYTES, **options: Any) -> int:
    """Write ``df``'s per-token ``field`` (``embed(..., output="tokens")``) into the ``rank_vectors`` field of
    ``index`` (:class:`densewire.batch.EsRankVectorsSink`), the ids as ``_id``. The index is checked (or
    created, for the dimension the column's metadata states) on the driver. Returns the rows written."""
    check_id_column(df, id_column)
    spec = check_tokens_column(df, field)
    sink = EsRankVectorsSink(url, index=index, field=field, id_column=id_column, create_index=create_index, **options)
    d = dimensions_of(spec)
    if d is not None:
        sink.check(d)
    return _run(df, sink, (id_column, field), max_block_bytes, attempt_in_name=False)


def write_es_bulk(df: Any, path_or_url: str, *, index: str, field: str, id_column: str,
                  max_block_bytes: int = DEFAULT_BLOCK_BYTES, **options: Any) -> int:
    """Write ``df``'s ``id_column`` and vector column ``field`` as Elasticsearch ``_bulk`` requests with
    packed vectors (the ids as ``_id``): to ``<url>/_bulk`` (``http(s)://``; a retried block replaces
    its documents), or one ``<block>.ndjson`` file a block in the folder ``path_or_url`` (on a file
    system every executor sees; a retried block replaces its file). ``options``:
    :class:`densewire.batch.EsBulkSink`'s (``create_index``, ``similarity``, ``index_type``,
    ``element_type``, ``api_key``, ``ca_file``, ``vector_format``, ``max_bytes``...). With a URL and a
    column whose metadata states its dimension (:func:`densewire.spark.embed`'s), the index's mapping is
    checked (or the index created) on the driver before any task starts. Returns the rows written."""
    check_id_column(df, id_column)
    vector_field = check_vector_column(df, field)
    sink = EsBulkSink(path_or_url, index=index, field=field, id_column=id_column, **options)
    d = dimensions_of(vector_field)
    if sink.is_url and d is not None:
        element = type(vector_field.dataType.elementType).__name__
        sink.target(d, {"ByteType": "int8", "DoubleType": "float64"}.get(element, "float32"))
    return _run(df, sink, (id_column, field), max_block_bytes, attempt_in_name=False)


def _write_store(df: Any, sink: Any, id_column: str, field: str, max_block_bytes: int) -> int:
    """A store sink's ``check(d)`` on the driver (the index, collection or table, against the dimension the
    column's metadata states), then the partitions' blocks into it."""
    check_id_column(df, id_column)
    spec = check_vector_column(df, field)
    d = dimensions_of(spec)
    if d is not None:
        sink.check(d)
    return _run(df, sink, (id_column, field), max_block_bytes, attempt_in_name=False)


def write_opensearch(df: Any, url: str, *, index: str, field: str, id_column: str, create_index: bool = False,
                     max_block_bytes: int = DEFAULT_BLOCK_BYTES, **options: Any) -> int:
    """Write ``df``'s ``id_column`` and vector column ``field`` into the k-NN ``index`` of the OpenSearch at
    ``url`` by ``_bulk`` (JSON float arrays written from the Arrow buffers, the ids as ``_id``: a block
    Spark runs again replaces its documents). The index is checked, or made with ``create_index``
    (lucene HNSW). ``options``: :class:`densewire.batch.OpenSearchSink`'s. Returns the rows written."""
    sink = OpenSearchSink(url, index=index, field=field, id_column=id_column, create_index=create_index, **options)
    return _write_store(df, sink, id_column, field, max_block_bytes)


def write_lancedb(df: Any, uri: str, *, table: str, column: str, id_column: str, create_table: bool = False,
                  max_block_bytes: int = DEFAULT_BLOCK_BYTES, **options: Any) -> int:
    """Merge ``df``'s ``id_column`` and vector ``column`` by id into ``table`` of the LanceDB at ``uri`` (a
    folder every executor sees, or an object store URI): each partition's Arrow batches in, the
    ``array<float>`` re-wrapped as a fixed-size list over its own values (no copy); a block Spark runs
    again updates its rows. The table is checked, or made with ``create_table``. Returns the rows written."""
    sink = LanceDBSink(uri, table=table, column=column, id_column=id_column, create_table=create_table, **options)
    return _write_store(df, sink, id_column, column, max_block_bytes)


def write_chroma(df: Any, url: str, *, collection: str, column: str, id_column: str, create_collection: bool = False,
                 max_block_bytes: int = DEFAULT_BLOCK_BYTES, **options: Any) -> int:
    """Upsert ``df``'s ``id_column`` (as Chroma's string ids) and vector ``column`` into ``collection`` of the
    Chroma server at ``url``, the embeddings as Base64 little-endian float32 built from the partition's
    Arrow buffers (a block Spark runs again replaces its rows). The collection is checked, or made with
    ``create_collection``. ``options``: :class:`densewire.batch.ChromaSink`'s. Returns the rows written."""
    sink = ChromaSink(url, collection=collection, column=column, id_column=id_column,
                      create_collection=create_collection, **options)
    return _write_store(df, sink, id_column, column, max_block_bytes)


def write_milvus(df: Any, uri: str, *, collection: str, column: str, id_column: str, create_collection: bool = False,
                 max_block_bytes: int = DEFAULT_BLOCK_BYTES, **options: Any) -> int:
    """Upsert ``df``'s ``id_column`` (the primary key) and vector ``column`` into ``collection`` of the Milvus
    at ``uri``, the vector column filled from the partition's Arrow buffers (a block Spark runs again
    replaces its rows). The collection is checked, or made with ``create_collection``. ``options``:
    :class:`densewire.batch.MilvusSink`'s. Returns the rows written."""
    sink = MilvusSink(uri, collection=collection, column=column, id_column=id_column,
                      create_collection=create_collection, **options)
    return _write_store(df, sink, id_column, column, max_block_bytes)
