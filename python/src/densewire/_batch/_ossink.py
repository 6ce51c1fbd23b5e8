"""``OpenSearchSink``: blocks into an OpenSearch k-NN index by ``_bulk``, each row's ``_id`` its id.

The bodies and the sending are :class:`EsBulkSink`'s with ``vector_format="floats"`` (OpenSearch
parses no packed form): a block written again replaces its documents, 429/503 and lost connections
are retried, a refused document is a :class:`BatchError` naming its id and the block. Before the first
block the index is checked by :func:`densewire._stores.opensearch.ensure_knn_index` (``field`` a
``knn_vector`` of the vectors' dimension), or made with ``create_index=True`` (lucene HNSW).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from .._stores._http import StoreHttpError, request_json, split_credentials
from .._stores.opensearch import KnnIndexError, ensure_knn_index
from ._columns import vector_chunks
from ._errors import BatchError
from ._essink import EsBulkSink

__all__ = ["OpenSearchSink"]


class OpenSearchSink(EsBulkSink):
    """Write blocks of an Arrow table (``id_column`` and the vector column ``field``) into the k-NN
    ``index`` of the OpenSearch at ``url`` (``http(s)://[user:password@]host:port``). ``write`` returns
    the documents created (not those replaced)."""

    def __init__(self, url: str, *, index: str, field: str, id_column: str, create_index: bool = False,
                 space_type: str = "l2", engine: str = "lucene", refresh: bool = False, **options: Any) -> None:
        if not str(url).lower().startswith(("http://", "https://")):
            raise BatchError(f"an OpenSearch URL is http(s)://host:port, not {url!r}")
        options.pop("vector_format", None)
        super().__init__(url, index=index, field=field, id_column=id_column, vector_format="floats", **options)
        self.create_index, self.space_type, self.engine, self.refresh = create_index, space_type, engine, refresh
        self._checked: int | None = None

    def check(self, dims: int, block: str | None = None) -> str:
        """The index checked (or made) for vectors of ``dims``: "checked" or "created"."""
        try:
            what = ensure_knn_index(self.path_or_url, self.index, self.field, dims, create=self.create_index,
                                    space_type=self.space_type, engine=self.engine, timeout=self.timeout)
        except KnnIndexError as exc:
            raise BatchError(str(exc), category="shape_mismatch" if "dimensions for" in str(exc) else "invalid_field",
                             column=self.field, block=block) from None
        except StoreHttpError as exc:  # OpenSearch's answer: a bad index name, a mapping it refused
            category = "invalid_field" if 400 <= exc.status < 500 else "unavailable"
            raise BatchError(f"OpenSearch: {exc}", category=category, column=self.field, block=block) from None
        except OSError as exc:
            raise BatchError(f"OpenSearch at {self.path_or_url}: {exc}", category="unavailable", block=block) from exc
        self._checked = dims
        return what

    def write(self, data: pa.Table | pa.RecordBatch, *, block: str) -> int:
        d = next((a.shape[1] for _r, a in vector_chunks(data, self.field, id_column=self.id_column, block=block)
                  if len(a)), None)
        if d is not None and self._checked != d:
            self.check(d, block)
        created = super().write(data, block=block)
        if self.refresh:
            base, headers = split_credentials(self.path_or_url)
            request_json("POST", f"{base}/{self.index}/_refresh", headers=headers, timeout=self.timeout)
        return created
