"""Spark: embed a DataFrame's texts through ``mapInArrow``, write the vectors to pgvector or
Elasticsearch partition by partition, on ``local[*]`` or a cluster (standalone, YARN, Kubernetes).

.. code-block:: python

    import densewire.spark as dwspark

    df = dwspark.embed(spark.read.parquet("docs/"), url=["http://embed-1:8000", "http://embed-2:8000"],
                       id_column="id")
    dwspark.write_pgvector(df, "postgresql://db/app", table="docs", column="embedding", id_column="id")

* :func:`embed`: the vector column is a non-null ``array<float>`` built from the answers' own buffers
  (int32 offsets ``0, d, 2d, ...`` over the fixed-size list's values: no Python object per row);
  ``url=`` a fleet of ``densewire serve`` replicas (or one load balancer), ``model=`` the engine in
  each executor's Python workers;
* :func:`write_pgvector`: binary COPY, one transaction a partition, each row exactly once by id when
  Spark retries a task; :func:`write_es_bulk`: ``_bulk`` bodies with packed vectors, to the API or
  to one file a block; :func:`write_opensearch`, :func:`write_lancedb`, :func:`write_chroma`,
  :func:`write_milvus`: the store sinks of :mod:`densewire.batch`, each block written by id;
* ``embed(..., output="tokens")`` (``array<array<float>>``) and ``output="sparse"`` (``struct<indices:
  array<int>, values: array<float>>``): :func:`write_pgvector` fills a ``sparsevec`` column,
  :func:`write_pgvector_tokens` a table of one row per (id, token position), :func:`write_es_sparse_vector`
  a ``sparse_vector`` field ({token: weight}) and :func:`write_es_rank_vectors` a ``rank_vectors`` one;
* errors are :class:`~densewire.batch.BatchError` s naming the column, the row, its id and the
  partition (block); what the schema tells (a missing or non-string column, a table vector column of
  another dimension) is raised on the driver before any task runs.

The executors need densewire (``pip install 'densewire[spark]'`` in the Python that
``spark.pyspark.python`` / ``PYSPARK_PYTHON`` names on each node).
"""

from ._batch import BatchError
from ._optional import require

require("pyspark", extra="spark", feature="densewire.spark")
require("pandas", extra="spark", feature="densewire.spark (Spark's mapInArrow)")
require("pyarrow", extra="spark", feature="densewire.spark")

from ._spark import embed, spark_vectors, write_chroma, write_es_bulk, write_es_rank_vectors, write_es_sparse_vector, write_lancedb, write_milvus, write_opensearch, write_pgvector, write_pgvector_tokens  # noqa: E402

__all__ = ["embed", "write_pgvector", "write_pgvector_tokens", "write_es_bulk", "write_es_sparse_vector", "write_es_rank_vectors", "write_opensearch", "write_lancedb", "write_chroma", "write_milvus", "spark_vectors", "BatchError"]
