"""Embed Arrow tables and write them to pgvector or Elasticsearch, block by block (pyarrow only).

The pieces the Ray and Spark integrations (:mod:`densewire.ray`, :mod:`densewire.spark`) are made of,
usable from any engine that hands a worker Arrow data:

* :class:`BatchEmbedder`: a table or record batch in, the same with a ``FixedSizeList<dtype>[d]``
  vector column appended (``output="tokens"``: the per-token states, ``List<FixedSizeList<float32>[d]>``;
  ``output="sparse"``: ``Struct<indices: List<UInt32>, values: List<float32>>``), from a fleet of ``densewire serve`` replicas (``url=``) or the ONNX engine
  in the worker (``model=``);
* :class:`PgvectorSink`: one block, one transaction (binary COPY into a temporary table, then
  ``INSERT ... ON CONFLICT (id) DO NOTHING``): each row exactly once however often a block is retried;
  a sparse column into ``sparsevec`` from its indices and values;
* :class:`PgvectorTokensSink`: per-token output (``output="tokens"``) as one row per (id, token position),
  the same transaction and the same exactly-once rule by (id, position);
* :class:`EsBulkSink`: ``_bulk`` NDJSON with packed vectors, to a file per block or to the ``_bulk`` API;
* :class:`EsSparseVectorSink`: a sparse column into a ``sparse_vector`` field, ``{token: weight}`` objects
  named by the model's vocabulary; :class:`EsRankVectorsSink`: a per-token column into ``rank_vectors``;
* :class:`OpenSearchSink`: ``_bulk`` into an OpenSearch k-NN index, float arrays written from the buffers;
* :class:`LanceDBSink`: ``merge_insert`` by id into a LanceDB table, the Arrow vectors as they are;
* :class:`ChromaSink`: ``/upsert`` into a Chroma collection, Base64 little-endian float32 embeddings;
* :class:`MilvusSink`: upserts by primary key into Milvus, the vector column filled from the buffer;
* :class:`BatchError`: what went wrong, naming the column, the row and its id, and the block.

>>> import pyarrow as pa
>>> from densewire.batch import BatchEmbedder
>>> with BatchEmbedder(model="hash:4") as embed:
...     out = embed(pa.table({"id": [1, 2], "text": ["a cat", "a dog"]}))
>>> out.schema.field("embedding").type
FixedSizeListType(fixed_size_list<item: float not null>[4])
>>> embed(pa.table({"id": [1, 2], "text": ["a cat", None]}), block="b7")
Traceback (most recent call last):
...
densewire._batch._errors.BatchError: invalid_field: a null text (column 'text', row 1, block 'b7')
"""

from ._batch import BatchEmbedder, BatchError, ChromaSink, EsBulkSink, EsRankVectorsSink, EsSparseVectorSink, LanceDBSink, MilvusSink, OpenSearchSink, PgvectorSink, PgvectorTokensSink, worker_cpus

__all__ = ["BatchEmbedder", "BatchError", "ChromaSink", "EsBulkSink", "EsRankVectorsSink", "EsSparseVectorSink", "LanceDBSink", "MilvusSink", "OpenSearchSink", "PgvectorSink", "PgvectorTokensSink", "worker_cpus"]
