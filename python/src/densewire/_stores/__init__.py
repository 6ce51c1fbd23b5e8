"""The stores densewire loads vectors into, one module per store family, used by the CLI (``densewire
ingest``), the batch sinks (:mod:`densewire.batch`) and the public modules (:mod:`densewire.pgvector`):

* PostgreSQL / pgvector: ``_pgcopy`` (the binary COPY stream, SPEC.md section 15), ``_pgcopy_read``
  (reading one back), ``_pgvector`` (the psycopg side: COPY into a table, read a column);
* Elasticsearch / OpenSearch: ``_esbulk`` (the ``_bulk`` NDJSON bodies: packed big-endian Base64 or
  float arrays), ``_es`` (a node: the index's mapping checked or created, bulk answers read item by item).
"""
