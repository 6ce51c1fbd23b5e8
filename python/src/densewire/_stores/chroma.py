"""Chroma (server mode, its HTTP API v2): collections and ``/upsert`` bodies with packed embeddings.

Chroma's ``/add`` and ``/upsert`` take each embedding as Base64 of its little-endian float32 bytes (what
its own client sends when the server's ``/pre-flight-checks`` answers ``supports_base64_encoding``; the
client packs each row with ``struct.pack(*floats)``, one Python float per value). Here a chunk of rows is
one little-endian float32 buffer: Base64-encoded in one call when a row is a multiple of 3 bytes and cut
per row, and the JSON body is assembled from those bytes (no Python object per value). The ids are
Chroma's string ids (``str(id)``); ``/upsert`` replaces a row whose id is there, so a block written again
leaves each id once.

>>> embeddings_json(np.array([[1.0, 2.0, 3.0]], np.float32))
b'["AACAPwAAAEAAAEBA"]'
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from urllib.parse import quote

import numpy as np
import orjson
import pybase64

from ._http import StoreHttpError, request_json, split_credentials

__all__ = ["ChromaCollectionError", "ChromaServer", "embeddings_json", "upsert_body"]


class ChromaCollectionError(ValueError):
    pass


def _base64_rows(a: np.ndarray) -> list[bytes]:
    little = np.ascontiguousarray(a, dtype="<f4")
    row = little.shape[1] * 4
    if row % 3 == 0 and little.size:
        text = pybase64.b64encode(memoryview(little).cast("B"))
        step = row // 3 * 4
        return [text[i:i + step] for i in range(0, len(text), step)]
    return [pybase64.b64encode(little[i].tobytes()) for i in range(little.shape[0])]


def embeddings_json(a: np.ndarray) -> bytes:
    """The ``embeddings`` JSON array of the rows of ``a`` (float32 values), each a Base64 string."""
    rows = _base64_rows(a)
    return b'["' + b'","'.join(rows) + b'"]' if rows else b"[]"


def upsert_body(ids: Sequence[Any], a: np.ndarray) -> bytes:
    """The ``/upsert`` (or ``/add``) JSON body of ``ids`` and the rows of ``a``."""
    return b'{"ids":' + orjson.dumps([str(i) for i in ids]) + b',"embeddings":' + embeddings_json(a) + b"}"


class ChromaServer:
    """One Chroma server's collections API: ``url`` (``http(s)://[user:password@]host:port``), ``tenant``,
    ``database``, an optional ``token`` (``Authorization: Bearer``)."""

    def __init__(self, url: str, *, tenant: str = "default_tenant", database: str = "default_database",
                 token: str | None = None, timeout: float = 120.0) -> None:
        self.base, self.headers = split_credentials(url)
        if token:
            self.headers["Authorization"] = f"Bearer {token}"
        self.tenant, self.database, self.timeout = tenant, database, timeout
        self.collections = (f"{self.base}/api/v2/tenants/{quote(tenant, safe='')}/databases/"
                            f"{quote(database, safe='')}/collections")

    def request(self, method: str, url: str, body: Any = None, raw: bytes | None = None) -> Any:
        return request_json(method, url, body, raw=raw, headers=self.headers, timeout=self.timeout)

    def max_batch_size(self) -> int:
        checks = self.request("GET", f"{self.base}/api/v2/pre-flight-checks") or {}
        if not checks.get("supports_base64_encoding", False):
            raise ChromaCollectionError(f"the Chroma server at {self.base} does not take Base64 embeddings "
                                        "(Chroma 1.0 or later does)")
        return int(checks.get("max_batch_size", 1000))

    def collection(self, name: str, dims: int, *, create: bool = False, space: str = "l2") -> str:
        """The id of collection ``name``, checked for ``dims`` (or made, with ``create``)."""
        try:
            found = self.request("GET", f"{self.collections}/{quote(name, safe='')}")
        except StoreHttpError as exc:
            if exc.status != 404:
                raise
            if not create:
                raise ChromaCollectionError(f"no collection {name!r} in {self.tenant}/{self.database} at {self.base} "
                                            f"(create it, or pass create_collection=True / --create-index)") from None
            found = self.request("POST", self.collections, {"name": name, "get_or_create": True,
                                                            "configuration": {"hnsw": {"space": space}}})
        have = found.get("dimension")
        if have is not None and int(have) != dims:
            raise ChromaCollectionError(f"vectors of {dims} dimensions for collection {name!r}, which holds "
                                        f"vectors of {have}")
        return str(found["id"])

    def upsert(self, collection_id: str, body: bytes) -> None:
        self.request("POST", f"{self.collections}/{collection_id}/upsert", raw=body)
