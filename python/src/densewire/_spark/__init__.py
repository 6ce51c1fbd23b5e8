"""Spark: embed a DataFrame through ``mapInArrow``, write it to pgvector or Elasticsearch partition by
partition (the public module is :mod:`densewire.spark`)."""

from ._embed import embed, spark_sparse, spark_tokens, spark_vectors
from ._failure import job_error
from ._write import (write_chroma, write_es_bulk, write_es_rank_vectors, write_es_sparse_vector, write_lancedb,
                     write_milvus, write_opensearch, write_pgvector, write_pgvector_tokens)

__all__ = ["embed", "job_error", "spark_sparse", "spark_tokens", "spark_vectors", "write_chroma", "write_es_bulk",
           "write_es_rank_vectors", "write_es_sparse_vector", "write_lancedb", "write_milvus", "write_opensearch",
           "write_pgvector", "write_pgvector_tokens"]
