"""``ChromaSink``: blocks upserted into a Chroma collection with Base64 little-endian float32 embeddings.

Each block is cut into requests of at most the server's ``max_batch_size`` rows (its
``/pre-flight-checks``), each one ``POST .../collections/<id>/upsert`` whose body
:func:`densewire._stores.chroma.upsert_body` assembles from the vectors' buffer. Every body is built
(every value checked) before the first is sent, then ``concurrency`` of them are in flight at once
(default 1; with more, a block is cut into at least ``concurrency`` requests when it has ``MIN_ROWS``
rows for each). The time of a load is the server's (its log and HNSW index: the same work for any
client, bench/stores/RESULTS.md), so more in flight helps only where the server has idle cores. Upsert by id: a block
written again replaces its rows. 429, 502-504 and lost connections are retried by the client's
:class:`RetryPolicy` (SPEC.md 18); a 4xx is a :class:`BatchError` naming the block and Chroma's message.
The collection is checked (its dimension, once it holds vectors) before the first request, or made
with ``create_collection=True``.
"""

from __future__ import annotations

import http.client
import time
import urllib.error
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pyarrow as pa

from .._client._retry import RetryPolicy
from .._stores._esbulk import float32_rows
from .._stores._http import StoreHttpError
from .._stores.chroma import ChromaCollectionError, ChromaServer, upsert_body
from ._columns import ids_of, vector_chunks
from ._errors import BatchError, store_check_error

__all__ = ["ChromaSink"]

#: the fewest rows a request when a block is cut into ``concurrency`` requests
MIN_ROWS = 500


class ChromaSink:
    """Write blocks of an Arrow table (``id_column`` and the vector ``column``) into ``collection`` of the
    Chroma server at ``url``. ``write`` returns the rows written (upserted)."""

    def __init__(self, url: str, *, collection: str, column: str, id_column: str, create_collection: bool = False,
                 space: str = "l2", tenant: str = "default_tenant", database: str = "default_database",
                 token: str | None = None, retries: int = 2, timeout: float = 120.0, concurrency: int = 1) -> None:
        if concurrency < 1:
            raise BatchError(f"concurrency is the upsert requests in flight, at least 1, not {concurrency}")
        self.url, self.collection, self.column, self.id_column = url, collection, column, id_column
        self.concurrency = concurrency
        self.create_collection, self.space, self.tenant, self.database = create_collection, space, tenant, database
        self.token, self.retries, self.timeout = token, retries, timeout
        self._id: str | None = None
        self._dims: int | None = None
        self._batch = 1000

    def _server(self) -> ChromaServer:
        return ChromaServer(self.url, tenant=self.tenant, database=self.database, token=self.token,
                            timeout=self.timeout)

    def check(self, dims: int, block: str | None = None) -> None:
        """The collection checked (or made) for vectors of ``dims``."""
        server = self._server()
        try:
            self._batch = server.max_batch_size()
            self._id = server.collection(self.collection, dims, create=self.create_collection, space=self.space)
        except ChromaCollectionError as exc:
            raise store_check_error(exc, column=self.column, block=block) from None
        except StoreHttpError as exc:  # Chroma's answer: a bad name, a tenant or database that is not there
            category = "invalid_field" if 400 <= exc.status < 500 else "unavailable"
            raise BatchError(f"Chroma at {server.base}: {exc}", category=category, column=self.column,
                             block=block) from None
        except OSError as exc:
            raise BatchError(f"Chroma at {server.base}: {exc}", category="unavailable", block=block) from exc
        self._dims = dims

    def close(self) -> None:
        pass

    def write(self, data: pa.Table | pa.RecordBatch, *, block: str) -> int:
        ids = ids_of(data, self.id_column, block=block)
        pieces = vector_chunks(data, self.column, id_column=self.id_column, block=block, skip_empty=True)
        if not pieces:
            return 0
        d = pieces[0][1].shape[1]
        if self._dims != d or self._id is None:
            self.check(d, block)
        # requests of at most max_batch_size rows, and at least `concurrency` of them when the block is large
        # enough (MIN_ROWS a request), so that Chroma indexes them side by side
        step = min(self._batch, max(MIN_ROWS, -(-data.num_rows // self.concurrency)))
        bodies = []
        try:  # every body built (every value checked) before anything is sent
            for row0, a in pieces:
                a = float32_rows(a, self.column, row0)
                for lo in range(0, len(a), step):
                    hi = min(lo + step, len(a))  # within this piece: the ids after it are the next piece's
                    bodies.append(upsert_body(ids[row0 + lo:row0 + hi], a[lo:hi]))
        except ValueError as exc:  # a non-finite value, an integer dtype
            raise BatchError(str(exc), category=getattr(exc, "category", "invalid_field"), column=self.column,
                             block=block) from exc
        server = self._server()
        if self.concurrency == 1 or len(bodies) == 1:
            for body in bodies:
                self._send(server, body, block)
            return data.num_rows
        with ThreadPoolExecutor(min(self.concurrency, len(bodies))) as pool:
            sent = [pool.submit(self._send, server, body, block) for body in bodies]
        for future in sent:  # every request has ended (written or failed); the first failure is the block's
            future.result()
        return data.num_rows

    def _send(self, server: ChromaServer, body: bytes, block: str) -> None:
        policy = RetryPolicy(self.retries)
        attempt = 0
        while True:
            attempt += 1
            try:
                server.upsert(self._id, body)
                return
            except StoreHttpError as exc:
                wait = policy.wait(attempt, status=exc.status, retry_after=exc.retry_after)
                if wait is None:
                    raise BatchError(f"Chroma refused the upsert: HTTP {exc.status}: {exc.text}",
                                     category="internal_error", column=self.column, block=block) from None
            except (urllib.error.URLError, http.client.HTTPException, ConnectionError, TimeoutError) as exc:
                wait = policy.wait(attempt)
                if wait is None:
                    raise BatchError(f"Chroma at {server.base} failed after {attempt} attempts: {exc}",
                                     category="unavailable", block=block) from exc
            time.sleep(wait)
