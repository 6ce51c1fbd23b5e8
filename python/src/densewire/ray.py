"""Ray Data: embed a dataset on an actor pool, write it to a vector store block by block (pgvector,
Elasticsearch, OpenSearch, LanceDB, Chroma, Milvus).

>>> import densewire.ray as dwray                                         # doctest: +SKIP
>>> ds = dwray.embed(ray.data.from_items(rows), url=["http://embed-1:8000", "http://embed-2:8000"])
>>> dwray.write_pgvector(ds, "postgresql://db/app", table="docs", column="embedding", id_column="id")

:func:`embed` runs a :class:`densewire.batch.BatchEmbedder` in each actor of a pool
(``map_batches`` with a callable class and ``batch_format="pyarrow"``): the blocks travel as Arrow,
the vector column is ``FixedSizeList<dtype>[d]`` over the buffers the answers were read into, and
with ``model=`` each actor loads the engine once, with as many threads as it was given CPUs.
:func:`write_pgvector` and :func:`write_es_bulk` are Ray :class:`~ray.data.Datasink` s over
:class:`densewire.batch.PgvectorSink` and :class:`densewire.batch.EsBulkSink`: each block is one
transaction (one binary COPY) whose rows are inserted exactly once by id, so write tasks that Ray
retries after a worker died do not duplicate rows; a block that fails every attempt fails the job
with a :class:`densewire.batch.BatchError` naming the block. :func:`write_opensearch`,
:func:`write_lancedb`, :func:`write_chroma` and :func:`write_milvus` are :class:`StoreDatasink` s over
the store sinks of :mod:`densewire.batch`: each block written by id (replaced, merged or upserted), so a
retried write task leaves each id once. The sparse and per-token outputs (``embed(..., output="sparse" |
"tokens")``) go to :func:`write_pgvector` (a ``sparsevec`` column), :func:`write_pgvector_tokens` (one
row per id and token position), :func:`write_es_sparse_vector` and :func:`write_es_rank_vectors`.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from typing import Any

import pyarrow as pa

from ._batch import (BatchEmbedder, BatchError, EsBulkSink, EsRankVectorsSink, EsSparseVectorSink, PgvectorSink,
                     PgvectorTokensSink)
from ._batch._chromasink import ChromaSink
from ._batch._lancesink import LanceDBSink
from ._batch._milvussink import MilvusSink
from ._batch._ossink import OpenSearchSink
from ._batch._embedder import DEFAULT_TIMEOUT
from ._optional import require

ray = require("ray", extra="ray", feature="densewire.ray")
require("ray.data", extra="ray", feature="densewire.ray")
Datasink = ray.data.Datasink
ActorPoolStrategy = ray.data.ActorPoolStrategy

__all__ = ["embed", "write_pgvector", "write_pgvector_tokens", "write_es_bulk", "write_es_sparse_vector",
           "write_es_rank_vectors", "write_opensearch", "write_lancedb", "write_chroma", "write_milvus",
           "PgvectorDatasink", "EsBulkDatasink", "StoreDatasink", "BatchError"]


class _Embed:
    """The actors' callable: one :class:`BatchEmbedder` per actor, made when the actor starts."""

    def __init__(self, **options: Any) -> None:
        self.embedder = BatchEmbedder(**options)

    def __call__(self, batch: pa.Table) -> pa.Table:
        return self.embedder(batch)

    def __del__(self) -> None:
        embedder = getattr(self, "embedder", None)
        if embedder is not None:
            embedder.close()


def embed(ds: "ray.data.Dataset", *, url: str | Sequence[str] | None = None, model: str | None = None,
          text_column: str = "text", output_column: str = "embedding", dtype: str = "float32",
          batch_size: int = 256, concurrency: int | tuple[int, int] | None = None, num_cpus: float | None = None,
          max_in_flight: int = 4, retries: int = 2, timeout: float | None = DEFAULT_TIMEOUT,
          api_key: str | None = None, id_column: str | None = None, rows_per_call: int | None = None,
          threads: int | None = None, output: str = "dense", vocab_size: int | None = None,
          **ray_remote_args: Any) -> "ray.data.Dataset":
    """``ds`` with ``output_column`` (``FixedSizeList<dtype>[d]``; with ``output="tokens"`` the per-token
    states ``List<FixedSizeList<float32>[d]>``, with ``output="sparse"`` ``Struct<indices: List<UInt32>,
    values: List<float32>>``: see :class:`densewire.batch.BatchEmbedder`) appended, embedded by a pool of
    ``concurrency`` actors (an int: that many; ``(min, max)``: autoscaling; None: 1 to as many as the
    cluster takes). ``url=`` sends ``batch_size`` texts a request, up to ``max_in_flight`` requests an
    actor, spread across the replicas listed (or one URL: a load balancer in front of a fleet);
    ``model=`` runs the engine in each actor with ``num_cpus`` threads (default 1 CPU an actor for
    ``url=``, all of a node's CPUs it is given for ``model=``: pass ``num_cpus``). Each actor call
    takes ``rows_per_call`` rows (default ``batch_size * max_in_flight`` for ``url=``, ``batch_size``
    for ``model=``). ``id_column`` names the ids errors quote. Other keyword arguments go to
    ``map_batches`` (``memory``, ``resources``, ``runtime_env``...)."""
    if url is None and model is None:
        raise BatchError("give url= (densewire servers) or model= (an engine to run in each actor)")
    if num_cpus is None:
        num_cpus = 1
    options = dict(url=url, model=model, text_column=text_column, output_column=output_column, dtype=dtype,
                   batch_size=batch_size, max_in_flight=max_in_flight, retries=retries, timeout=timeout,
                   api_key=api_key, id_column=id_column, output=output, vocab_size=vocab_size,
                   threads=None if url is not None else (threads or max(1, int(num_cpus))))
    if rows_per_call is None:
        rows_per_call = batch_size * max_in_flight if url is not None else batch_size
    return ds.map_batches(_Embed, fn_constructor_kwargs=options, batch_size=rows_per_call, batch_format="pyarrow",
                          zero_copy_batch=True, compute=_pool(concurrency), num_cpus=num_cpus, **ray_remote_args)


def _pool(concurrency: int | tuple[int, int] | None) -> Any:
    if concurrency is None:
        return ActorPoolStrategy(min_size=1, max_size=None)
    if isinstance(concurrency, int):
        return ActorPoolStrategy(size=concurrency)
    low, high = concurrency
    return ActorPoolStrategy(min_size=low, max_size=high)


class _BlockSink(Datasink):
    """A Datasink writing each block with ``sink.write(block, block=name)``; the name is the job's id,
    the write task's index and the block's place in the task, the same when Ray runs the task again."""

    def __init__(self, sink: Any, rows_per_write: int | None) -> None:
        self.sink = sink
        self.job = uuid.uuid4().hex[:12]
        self._rows_per_write = rows_per_write
        #: after the write: the rows written (each block's rows are all in the store once its task returned)
        self.result: int | None = None
        #: after the write: the rows the sink reported new (inserted rather than found there; created rather
        #: than replaced). A task that Ray ran again after its block committed finds its rows there.
        self.new: int | None = None

    @property
    def min_rows_per_write(self) -> int | None:
        return self._rows_per_write

    def write(self, blocks: Iterable[Any], ctx: Any) -> tuple[int, int]:
        """(rows of the blocks, rows the sink reported new)."""
        rows = new = 0
        try:
            for k, block in enumerate(blocks):
                table = block if isinstance(block, pa.Table) else ray.data.BlockAccessor.for_block(block).to_arrow()
                new += self.sink.write(table, block=f"{self.job}-{ctx.task_idx:06d}-{k:04d}")
                rows += table.num_rows
        finally:
            close = getattr(self.sink, "close", None)
            if close is not None:
                close()
        return rows, new

    def on_write_complete(self, write_result: Any) -> None:
        self.result = sum(r for r, _n in write_result.write_returns)
        self.new = sum(n for _r, n in write_result.write_returns)


class PgvectorDatasink(_BlockSink):
    """Each block into ``table`` by :class:`densewire.batch.PgvectorSink`: one transaction, rows
    exactly once by ``id_column``. ``result``: the rows written; ``new``: those not in the table before."""

    def __init__(self, conninfo: str, *, table: str, column: str, id_column: str,
                 rows_per_write: int | None = None) -> None:
        super().__init__(PgvectorSink(conninfo, table=table, column=column, id_column=id_column), rows_per_write)

    def on_write_start(self, schema: pa.Schema | None = None) -> None:
        """The table, its unique id and the vector column's dimension, checked on the driver before any
        write task starts (the dimension against the schema's fixed-size list, when it has one)."""
        try:
            target = self.sink.target()
            if schema is not None and self.sink.column in schema.names:
                typ = schema.field(self.sink.column).type
                typ = getattr(typ, "storage_type", typ)
                if pa.types.is_fixed_size_list(typ) and target.dimensions is not None:
                    width = typ.list_size * (8 if target.pg_type == "bit" else 1)
                    if width != target.dimensions:
                        raise BatchError(f"vectors of {width} dimensions for {self.sink.table}.{self.sink.column}, "
                                         f"a {target.pg_type}({target.dimensions})", category="shape_mismatch",
                                         column=self.sink.column)
        finally:
            self.sink.close()


class EsBulkDatasink(_BlockSink):
    """Each block as a ``_bulk`` request (a URL) or a file named by the block (a folder) by
    :class:`densewire.batch.EsBulkSink`. ``result``: the rows written; ``new``: the documents a URL's store
    created (rather than replaced)."""

    def __init__(self, path_or_url: str, *, index: str, field: str, id_column: str, rows_per_write: int | None = None,
                 **options: Any) -> None:
        super().__init__(EsBulkSink(path_or_url, index=index, field=field, id_column=id_column, **options),
                         rows_per_write)

    def on_write_start(self, schema: pa.Schema | None = None) -> None:
        """With a URL and a fixed-size list vector column: the index's mapping checked (or the index created,
        ``create_index=True``) on the driver before any write task starts."""
        if not self.sink.is_url or schema is None or self.sink.field not in schema.names:
            return
        typ = schema.field(self.sink.field).type
        typ = getattr(typ, "storage_type", typ)
        if pa.types.is_fixed_size_list(typ):
            dtype = _ARROW_DTYPES.get(str(typ.value_type), "float32")
            self.sink.target(typ.list_size * (8 if dtype == "binary" else 1), dtype)


#: an Arrow vector value type -> the densewire dtype EsBulkSink reads it as (uint8: packed bits)
_ARROW_DTYPES = {"float": "float32", "halffloat": "float16", "double": "float64", "int8": "int8", "uint8": "binary"}


def write_pgvector(ds: "ray.data.Dataset", conninfo: str, *, table: str, column: str, id_column: str,
                   concurrency: int | None = None, rows_per_write: int | None = None,
                   ray_remote_args: dict[str, Any] | None = None) -> int:
    """Write ``ds``'s ``id_column`` and vector ``column`` into ``table`` (binary COPY, one transaction a
    block, ``ON CONFLICT (id) DO NOTHING``); the rows written, each now in the table once (rows already
    there with their id are kept as they were: ``PgvectorDatasink.new`` counts the others). ``concurrency`` bounds the write tasks
    (the connections) at once; ``rows_per_write`` gathers small blocks into bigger transactions."""
    sink = PgvectorDatasink(conninfo, table=table, column=column, id_column=id_column, rows_per_write=rows_per_write)
    ds.write_datasink(sink, concurrency=concurrency, ray_remote_args=ray_remote_args)
    return sink.result or 0


def write_pgvector_tokens(ds: "ray.data.Dataset", conninfo: str, *, table: str, column: str, id_column: str,
                          position_column: str = "position", concurrency: int | None = None,
                          rows_per_write: int | None = None, ray_remote_args: dict[str, Any] | None = None) -> int:
    """Write ``ds``'s per-token ``column`` (``embed(..., output="tokens")``) into ``table`` as one row per
    (``id_column``, ``position_column``) with the token's vector in ``column`` (binary COPY, one transaction
    a block, ``ON CONFLICT (id, position) DO NOTHING``: :class:`densewire.batch.PgvectorTokensSink`). The
    documents written (``StoreDatasink.new``: the token rows inserted)."""
    sink = PgvectorTokensSink(conninfo, table=table, column=column, id_column=id_column,
                              position_column=position_column)
    return _write_store(ds, sink, concurrency, rows_per_write, ray_remote_args)


def write_es_sparse_vector(ds: "ray.data.Dataset", url: str, *, index: str, field: str, id_column: str,
                           vocab: Any, create_index: bool = False, concurrency: int | None = None,
                           rows_per_write: int | None = None, ray_remote_args: dict[str, Any] | None = None,
                           **options: Any) -> int:
    """Write ``ds``'s sparse ``field`` (``embed(..., output="sparse")``) into the ``sparse_vector`` field of
    ``index`` as ``{token: weight}`` objects, the tokens ``vocab``'s (a tokenizer.json, a vocab.txt, a
    folder holding one, or a list: :class:`densewire.batch.EsSparseVectorSink`); the ids as ``_id`` (a
    retried block replaces its documents). The rows written."""
    sink = EsSparseVectorSink(url, index=index, field=field, id_column=id_column, vocab=vocab,
                              create_index=create_index, **options)
    return _write_store(ds, sink, concurrency, rows_per_write, ray_remote_args)


def write_es_rank_vectors(ds: "ray.data.Dataset", url: str, *, index: str, field: str, id_column: str,
                          create_index: bool = False, concurrency: int | None = None,
                          rows_per_write: int | None = None, ray_remote_args: dict[str, Any] | None = None,
                          **options: Any) -> int:
    """Write ``ds``'s per-token ``field`` (``embed(..., output="tokens")``) into the ``rank_vectors`` field of
    ``index`` (:class:`densewire.batch.EsRankVectorsSink`: float arrays, or ``vector_format="base64"``); the
    ids as ``_id``. The rows written."""
    sink = EsRankVectorsSink(url, index=index, field=field, id_column=id_column, create_index=create_index, **options)
    return _write_store(ds, sink, concurrency, rows_per_write, ray_remote_args)


def write_es_bulk(ds: "ray.data.Dataset", path_or_url: str, *, index: str, field: str, id_column: str,
                  concurrency: int | None = None, rows_per_write: int | None = None,
                  ray_remote_args: dict[str, Any] | None = None, **options: Any) -> int:
    """Write ``ds`` as Elasticsearch ``_bulk`` requests with packed vectors: to ``<url>/_bulk`` with the
    ids as ``_id`` (retried blocks replace their documents), or one ``<block>.ndjson`` file a block in
    the folder ``path_or_url`` (written atomically). ``options``: :class:`densewire.batch.EsBulkSink`'s
    (``create_index``, ``similarity``, ``index_type``, ``element_type``, ``api_key``, ``ca_file``,
    ``vector_format``, ``max_bytes``...). The rows written."""
    sink = EsBulkDatasink(path_or_url, index=index, field=field, id_column=id_column, rows_per_write=rows_per_write,
                          **options)
    ds.write_datasink(sink, concurrency=concurrency, ray_remote_args=ray_remote_args)
    return sink.result or 0


class StoreDatasink(_BlockSink):
    """Each block into a vector store by one of :mod:`densewire.batch`'s sinks (``OpenSearchSink``,
    ``LanceDBSink``, ``ChromaSink``, ``MilvusSink``): each row once by its id, however often Ray runs a
    write task again. ``result``: the rows written; ``new``: the rows the store reported new."""


def _write_store(ds: "ray.data.Dataset", sink: Any, concurrency: int | None, rows_per_write: int | None,
                 ray_remote_args: dict[str, Any] | None) -> int:
    datasink = StoreDatasink(sink, rows_per_write)
    ds.write_datasink(datasink, concurrency=concurrency, ray_remote_args=ray_remote_args)
    return datasink.result or 0


def write_opensearch(ds: "ray.data.Dataset", url: str, *, index: str, field: str, id_column: str,
                     create_index: bool = False, concurrency: int | None = None, rows_per_write: int | None = None,
                     ray_remote_args: dict[str, Any] | None = None, **options: Any) -> int:
    """Write ``ds``'s ``id_column`` and vector ``field`` into the k-NN ``index`` of the OpenSearch at
    ``url`` by ``_bulk`` (JSON float arrays written from the vectors' buffers, the ids as ``_id``: a
    retried block replaces its documents). The index is checked (``field`` a ``knn_vector`` of the
    vectors' dimension) or, with ``create_index``, made (lucene HNSW). ``options``:
    :class:`densewire.batch.OpenSearchSink`'s (``space_type``, ``max_bytes``, ``refresh``...). The rows written."""
    sink = OpenSearchSink(url, index=index, field=field, id_column=id_column, create_index=create_index, **options)
    return _write_store(ds, sink, concurrency, rows_per_write, ray_remote_args)


def write_lancedb(ds: "ray.data.Dataset", uri: str, *, table: str, column: str, id_column: str,
                  create_table: bool = False, concurrency: int | None = None, rows_per_write: int | None = None,
                  ray_remote_args: dict[str, Any] | None = None, **options: Any) -> int:
    """Merge ``ds``'s ``id_column`` and vector ``column`` by id into ``table`` of the LanceDB at ``uri``
    (the Arrow blocks as they are, the vectors a ``FixedSizeList`` without a copy; a retried block
    updates its rows). The table is checked, or made with ``create_table``. ``options``:
    :class:`densewire.batch.LanceDBSink`'s (``storage_options``). The rows written."""
    sink = LanceDBSink(uri, table=table, column=column, id_column=id_column, create_table=create_table, **options)
    return _write_store(ds, sink, concurrency, rows_per_write, ray_remote_args)


def write_chroma(ds: "ray.data.Dataset", url: str, *, collection: str, column: str, id_column: str,
                 create_collection: bool = False, concurrency: int | None = None, rows_per_write: int | None = None,
                 ray_remote_args: dict[str, Any] | None = None, **options: Any) -> int:
    """Upsert ``ds``'s ``id_column`` (as Chroma's string ids) and vector ``column`` into ``collection`` of
    the Chroma server at ``url``, the embeddings as Base64 little-endian float32 (a retried block
    replaces its rows). The collection is checked, or made with ``create_collection``. ``options``:
    :class:`densewire.batch.ChromaSink`'s (``space``, ``tenant``, ``database``, ``token``...). The rows written."""
    sink = ChromaSink(url, collection=collection, column=column, id_column=id_column,
                      create_collection=create_collection, **options)
    return _write_store(ds, sink, concurrency, rows_per_write, ray_remote_args)


def write_milvus(ds: "ray.data.Dataset", uri: str, *, collection: str, column: str, id_column: str,
                 create_collection: bool = False, concurrency: int | None = None, rows_per_write: int | None = None,
                 ray_remote_args: dict[str, Any] | None = None, **options: Any) -> int:
    """Upsert ``ds``'s ``id_column`` (the primary key) and vector ``column`` into ``collection`` of the
    Milvus at ``uri`` (``http://host:19530``), the vector column filled from the block's buffer
    (float32, float16); a retried block replaces its rows. The collection is checked, or made with
    ``create_collection`` (AUTOINDEX). ``options``: :class:`densewire.batch.MilvusSink`'s (``metric``,
    ``token``, ``db_name``, ``max_rows``...). The rows written."""
    sink = MilvusSink(uri, collection=collection, column=column, id_column=id_column,
                      create_collection=create_collection, **options)
    return _write_store(ds, sink, concurrency, rows_per_write, ray_remote_args)
