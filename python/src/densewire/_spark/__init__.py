"""Spark: embed a DataFrame through ``mapInArrow``, write it to pgvector or Elasticsearch partition by
partition (the public module is :mod:`densewire.spark`)."""

from ._embed import embed, spark_vectors
from ._failure import job_error
from ._write import write_chroma, write_es_bulk, write_lancedb, write_milvus, write_opensearch, write_pgvector

__all__ = ["embed", "job_error", "spark_vectors", "write_chroma", "write_es_bulk", "write_lancedb", "write_milvus", "write_opensearch", "write_pgvector"]
