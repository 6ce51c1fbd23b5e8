"""``MilvusSink``: blocks upserted by primary key into a Milvus collection, the vectors as binary.

Each block is cut into requests of at most ``max_rows``; each is an ``UpsertRequest`` whose vector
column is filled from the numpy buffer (:func:`densewire._stores.milvus.upsert_request`: float32 as a
packed ``FloatArray``, float16/bfloat16 as the bytes Milvus keeps), sent through pymilvus' connection.
Upsert by the primary key: a block written again replaces its rows. An unavailable server
(gRPC ``UNAVAILABLE``/``DEADLINE_EXCEEDED``) is retried by the client's :class:`RetryPolicy`; a refused
request is a :class:`BatchError` naming the block and Milvus' reason. The collection is checked (the
field a float vector of the vectors' dimension, the id its primary key) before the first request, or
made with ``create_collection=True`` (AUTOINDEX, ``metric``).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pyarrow as pa

from .._client._retry import RetryPolicy
from .._convert import convert
from .._optional import require
from .._stores._esbulk import float32_rows
from .._stores.milvus import MilvusCollectionError, check_collection, pymilvus, send_upsert, upsert_request
from ._columns import ids_of, vector_chunks
from ._errors import BatchError, store_check_error

__all__ = ["MilvusSink"]


class MilvusSink:
    """Write blocks of an Arrow table (``id_column`` and the vector ``column``) into ``collection`` of the
    Milvus at ``uri`` (``http://host:19530``; ``token`` ``user:password`` or an API key). ``write``
    returns the rows upserted."""

    def __init__(self, uri: str, *, collection: str, column: str, id_column: str, create_collection: bool = False,
                 metric: str = "L2", token: str | None = None, db_name: str = "", max_rows: int = 2_000,
                 retries: int = 2, timeout: float = 120.0) -> None:
        self.uri, self.collection, self.column, self.id_column = uri, collection, column, id_column
        self.create_collection, self.metric, self.token, self.db_name = create_collection, metric, token, db_name
        self.max_rows, self.retries, self.timeout = max_rows, retries, timeout
        self._client: Any = None
        self._target: dict[str, Any] | None = None
        self._dims: int | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k not in ("_client", "_target", "_dims")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state, _client=None, _target=None, _dims=None)

    def _connection(self) -> Any:
        if self._client is None:
            kw = {"token": self.token} if self.token else {}
            self._client = pymilvus().MilvusClient(self.uri, db_name=self.db_name, timeout=self.timeout, **kw)
        return self._client

    def close(self) -> None:
        client, self._client, self._target, self._dims = self._client, None, None, None
        if client is not None:
            client.close()

    def check(self, dims: int, block: str | None = None, vector_type: str = "FLOAT_VECTOR",
              string_ids: bool = False) -> None:
        """The collection checked (or made) for vectors of ``dims``."""
        try:
            self._target = check_collection(self._connection(), self.collection, self.id_column, self.column, dims,
                                            vector_type, create=self.create_collection, metric=self.metric,
                                            string_ids=string_ids)
        except MilvusCollectionError as exc:
            raise store_check_error(exc, column=self.column, block=block) from None
        except pymilvus().MilvusException as exc:
            raise BatchError(f"Milvus at {self.uri}: {exc}", category="unavailable", block=block) from exc
        self._dims = dims

    def write(self, data: pa.Table | pa.RecordBatch, *, block: str) -> int:
        ids = ids_of(data, self.id_column, block=block)
        pieces = vector_chunks(data, self.column, id_column=self.id_column, block=block, skip_empty=True)
        if not pieces:
            return 0
        d = pieces[0][1].shape[1]
        if self._dims != d or self._target is None:
            self.check(d, block, "FLOAT16_VECTOR" if pieces[0][1].dtype == np.float16 else "FLOAT_VECTOR",
                       string_ids=not isinstance(ids, np.ndarray))
        vt, it = self._target["vector_type"], self._target["id_type"]
        requests = []
        try:
            for row0, a in pieces:
                if vt == "FLOAT_VECTOR" or a.dtype != np.float16:
                    a = float32_rows(a, self.column, row0)
                    if vt != "FLOAT_VECTOR":  # float32 into a float16 / bfloat16 field: Milvus keeps those bits
                        a = a.astype(np.float16) if vt == "FLOAT16_VECTOR" else _bfloat16(a)
                for lo in range(0, len(a), self.max_rows):
                    hi = min(lo + self.max_rows, len(a))  # within this piece: the ids after it are the next one's
                    requests.append(upsert_request(self.collection, self.id_column, ids[row0 + lo:row0 + hi],
                                                   self.column, a[lo:hi], vt, it))
        except ValueError as exc:
            raise BatchError(str(exc), category=getattr(exc, "category", "invalid_field"), column=self.column,
                             block=block) from exc
        return sum(self._send(r, block) for r in requests)

    def _send(self, request: Any, block: str) -> int:
        grpc = require("grpc", extra="stores", feature="writing to Milvus")
        policy = RetryPolicy(self.retries)
        attempt = 0
        while True:
            attempt += 1
            try:
                return send_upsert(self._connection(), request, self.timeout)
            except MilvusCollectionError as exc:
                raise BatchError(str(exc), category="internal_error", column=self.column, block=block) from None
            except grpc.RpcError as exc:
                code = exc.code() if hasattr(exc, "code") else None
                wait = policy.wait(attempt) if code in (grpc.StatusCode.UNAVAILABLE,
                                                        grpc.StatusCode.DEADLINE_EXCEEDED) else None
                if wait is None:
                    details = exc.details() if hasattr(exc, "details") else exc
                    raise BatchError(f"Milvus at {self.uri}: {code}: {details}", category="unavailable",
                                     block=block) from exc
                self.close()
            time.sleep(wait)


def _bfloat16(a: np.ndarray) -> np.ndarray:
    return convert(a, "bfloat16").array
