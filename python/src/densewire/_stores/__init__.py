"""The stores densewire loads vectors into, one module per store family, used by the CLI (``densewire
ingest``), the batch sinks (:mod:`densewire.batch`) and the public modules (:mod:`densewire.pgvector`):

* PostgreSQL / pgvector: ``_pgcopy`` (the binary COPY stream, SPEC.md section 15), ``_pgcopy_read``
  (reading one back), ``_pgvector`` (the psycopg side: COPY into a table, read a column);
* Elasticsearch / OpenSearch: ``_esbulk`` (the ``_bulk`` NDJSON bodies, SPEC.md section 16).
"""
