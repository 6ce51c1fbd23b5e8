"""``OpenSearchSink``: blocks into an OpenSearch k-NN index by ``_bulk``, each row's ``_id`` its id.

The bodies and the sending are :class:`EsBulkSink`'s with ``vector_format="floats"`` (OpenSearch
parses no packed form; each row's float32 values written by orjson from the numpy buffer): a block
written again replaces its documents, items rejected with 429 are sent again alone, a refused document
is a :class:`BatchError` naming its id and the block. What differs is the target: before the first
block the index is checked by :func:`densewire._stores.opensearch.ensure_knn_index` (``field`` a
``knn_vector`` of the vectors' dimension), or made with ``create_index=True`` (lucene HNSW).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from .._stores._es import EsConnection, EsError, EsIndex
from .._stores.opensearch import KnnIndexError, ensure_knn_index
from ._columns import vector_chunks
from ._errors import BatchError, store_check_error
from ._essink import EsBulkSink

__all__ = ["OpenSearchSink"]


class OpenSearchSink(EsBulkSink):
    """Write blocks of an Arrow table (``id_column`` and the vector column ``field``) into the k-NN
    ``index`` of the OpenSearch at ``url`` (``http(s)://[user:password@]host:port``; ``ca_file`` to
    verify its TLS certificate, ``api_key`` for an ``Authorization: ApiKey`` proxy: both
    :class:`EsBulkSink`'s, used for the index check and the bulk requests alike). ``write`` returns the
    documents created (not those replaced); ``refresh=True`` refreshes the index after each block."""

    def __init__(self, url: str, *, index: str, field: str, id_column: str, create_index: bool = False,
                 space_type: str = "l2", engine: str = "lucene", refresh: bool = False, **options: Any) -> None:
        if not str(url).lower().startswith(("http://", "https://")):
            raise BatchError(f"an OpenSearch URL is http(s)://host:port, not {url!r}")
        options.pop("vector_format", None)
        super().__init__(url, index=index, field=field, id_column=id_column, vector_format="floats",
                         create_index=create_index, **options)
        self.space_type, self.engine, self.refresh = space_type, engine, refresh

    def target(self, dims: int, dtype: str = "float32", block: str | None = None) -> EsIndex:
        """The k-NN index checked (or made) for vectors of ``dims`` (once a process), as an ``EsIndex``
        whose ``bulk`` sends the bodies."""
        if self._target is None:
            try:
                conn = EsConnection(self.path_or_url, api_key=self.api_key, ca_file=self.ca_file,
                                    timeout=self.timeout, retries=self.retries)
                target = EsIndex(conn, self.index, self.field)
                ensure_knn_index(conn, self.index, self.field, dims, create=self.create_index,
                                 space_type=self.space_type, engine=self.engine)
            except KnnIndexError as exc:
                raise store_check_error(exc, column=self.field, block=block) from None
            except EsError as exc:  # OpenSearch's answer (a bad index name, a mapping it refused, 401), or none
                raise BatchError(f"OpenSearch: {exc.message}", category=exc.category, column=self.field,
                                 block=block) from exc
            target.element_type = "float"
            self._target = target
        return self._target

    def check(self, dims: int, block: str | None = None) -> None:
        """The index checked (or made) for vectors of ``dims``, on the driver before a job."""
        self.target(dims, block=block)

    def write(self, data: pa.Table | pa.RecordBatch, *, block: str) -> int:
        pieces = [a for _r, a in vector_chunks(data, self.field, id_column=self.id_column, block=block,
                                               skip_empty=True)]
        if not pieces:
            return 0
        target = self.target(pieces[0].shape[1], block=block)
        created = super().write(data, block=block)
        if self.refresh:
            target.refresh()
        return created
