"""The stores densewire loads vectors into, one module per store family, used by the CLI (``densewire
ingest``), the batch sinks (:mod:`densewire.batch`, and so :mod:`densewire.ray` and :mod:`densewire.spark`)
and the public modules (:mod:`densewire.pgvector`):

* PostgreSQL / pgvector: ``_pgcopy`` (the binary COPY stream, SPEC.md section 15), ``_pgcopy_read``
  (reading one back), ``_pgvector`` (the psycopg side: COPY into a table, read a column);
* Elasticsearch / OpenSearch: ``_esbulk`` (the ``_bulk`` NDJSON bodies: packed big-endian Base64 or
  float arrays), ``_es`` (a node: the index's mapping checked or created, bulk answers read item by item);
  ``opensearch`` (the k-NN index: checked, or made with a lucene ``knn_vector``);
* LanceDB: ``lance`` (the table, and a block as Arrow without a copy of its vectors);
* Chroma: ``chroma`` (its HTTP API v2, ``/upsert`` bodies with Base64 little-endian float32);
* Milvus: ``milvus`` (the collection, and pymilvus' ``UpsertRequest`` filled from the vectors' buffer);
* ``_http``: one JSON request to a store's HTTP API, credentials from the URL.
"""
