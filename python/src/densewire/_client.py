"""Clients for the embeddings API: ``Client`` (sync) and ``AsyncClient`` (asyncio), over httpx.

They ask for the fastest format the server offers (raw, then MessagePack, Protobuf, JSON) and
decode whatever comes back by its Content-Type, without copying the vectors out of the response
body. Against an OpenAI-compatible server that only speaks JSON they get JSON with Base64 rows.

They send ``Accept-Encoding: identity`` unless told otherwise: float vectors barely compress (256
MiniLM vectors keep 91.7 to 92.9 % of their size under gzip, zstd or brotli at any level) while gzip
-6 compresses at about 40 MB/s, 800 times slower than copying the bytes
(bench/python/compression.py), so on a datacenter network compression costs far more time than the
7 % it saves. Pass ``accept_encoding="zstd, gzip"`` for a slow link.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from ._errors import DensewireError
from ._formats import MEDIA_TYPES, decode, format_for_media_type
from ._tensor import Embeddings

__all__ = ["Client", "AsyncClient", "APIError", "DEFAULT_ACCEPT"]

DEFAULT_ACCEPT = (f"{MEDIA_TYPES['raw']}, {MEDIA_TYPES['msgpack']};q=0.9, {MEDIA_TYPES['protobuf']};q=0.8, "
                  f"{MEDIA_TYPES['json']};q=0.5")


class APIError(Exception):
    """The server answered with an error: its status and the fields of its OpenAI error envelope."""

    def __init__(self, status_code: int, message: str, code: str | None = None, param: str | None = None,
                 offset: int | None = None) -> None:
        self.status_code, self.message, self.code, self.param, self.offset = status_code, message, code, param, offset
        super().__init__(f"HTTP {status_code}" + (f" {code}" if code else "") + f": {message}")


def _httpx():
    try:
        import httpx
    except ImportError:
        raise ImportError("the densewire client needs httpx: pip install 'densewire[serve]'") from None
    return httpx


def _headers(accept: str, accept_encoding: str, api_key: str | None) -> dict[str, str]:
    headers = {"Accept": accept, "Accept-Encoding": accept_encoding}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    return headers


def _request(texts: str | Sequence[str] | Sequence[int] | Sequence[Sequence[int]], model: str | None,
             dimensions: int | None, dtype: str) -> dict[str, Any]:
    body: dict[str, Any] = {"input": texts if isinstance(texts, str) else list(texts), "encoding_format": "base64"}
    if model is not None:
        body["model"] = model
    if dimensions is not None:
        body["dimensions"] = dimensions
    if dtype != "float32":  # densewire's field; plain OpenAI-compatible servers may reject unknown fields
        body["dtype"] = dtype
    return body


def _decode_response(response) -> Embeddings:
    if response.status_code >= 400:
        try:
            err = response.json()["error"]
            raise APIError(response.status_code, err.get("message", ""), err.get("code"), err.get("param"), err.get("offset"))
        except (ValueError, KeyError, TypeError):
            raise APIError(response.status_code, response.text[:500] or response.reason_phrase) from None
    fmt = format_for_media_type(response.headers.get("content-type", "application/json")) or "json"
    try:
        return decode(response.content, fmt, response.headers)
    except DensewireError as exc:
        raise APIError(response.status_code, f"the server's {fmt} response does not decode: {exc}", exc.category,
                       exc.field, exc.offset) from exc


def _as_array(emb: Embeddings) -> np.ndarray:
    t = emb.tensor
    return t.to_float32() if t.dtype == "bfloat16" else t.array


def _batches(n: int, size: int) -> list[tuple[int, int]]:
    return [(i, min(i + size, n)) for i in range(0, n, size)]


def _progress(total: int, enabled: bool) -> Callable[[int], None]:
    if not enabled:
        return lambda _k: None
    try:
        from tqdm import tqdm
    except ImportError:
        raise ImportError("progress=True needs tqdm: pip install tqdm") from None
    bar = tqdm(total=total, unit="text")
    return bar.update


class Client:
    """Synchronous client.

    ``client.embed(["a", "b"])`` returns an ``(n, d)`` numpy array; ``embed_many`` sends large jobs
    in batches, ``concurrency`` at a time. Errors from the server raise :class:`APIError`.
    """

    def __init__(self, base_url: str = "http://127.0.0.1:8000", *, api_key: str | None = None,
                 model: str | None = None, timeout: float = 120.0, accept: str = DEFAULT_ACCEPT,
                 accept_encoding: str = "identity", http_client: Any = None) -> None:
        httpx = _httpx()
        self.base_url = base_url.rstrip("/").removesuffix("/v1")
        self.model = model
        self._http = http_client or httpx.Client(timeout=timeout, limits=httpx.Limits(max_connections=64))
        self._headers = _headers(accept, accept_encoding, api_key)

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def create(self, texts, *, model: str | None = None, dimensions: int | None = None,
               dtype: str = "float32") -> Embeddings:
        """One request: the decoded response with its model and usage."""
        response = self._http.post(f"{self.base_url}/v1/embeddings", headers=self._headers,
                                   json=_request(texts, model or self.model, dimensions, dtype))
        return _decode_response(response)

    def embed(self, texts, *, model: str | None = None, dimensions: int | None = None, dtype: str = "float32") -> np.ndarray:
        """Vectors of one request as an (n, d) array (float16 stays float16; bfloat16 widens to float32;
        binary is packed uint8)."""
        return _as_array(self.create(texts, model=model, dimensions=dimensions, dtype=dtype))

    def embed_many(self, texts: Sequence[str], *, batch_size: int = 256, concurrency: int = 4,
                   model: str | None = None, dimensions: int | None = None, dtype: str = "float32",
                   progress: bool = False) -> np.ndarray:
        """Many texts in batches, ``concurrency`` requests at a time, in input order."""
        spans = _batches(len(texts), batch_size)
        update = _progress(len(texts), progress)
        results: list[np.ndarray | None] = [None] * len(spans)

        def one(k: int) -> None:
            lo, hi = spans[k]
            results[k] = self.embed(list(texts[lo:hi]), model=model, dimensions=dimensions, dtype=dtype)
            update(hi - lo)

        with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
            for future in [pool.submit(one, k) for k in range(len(spans))]:
                future.result()
        return np.concatenate(results) if results else np.empty((0, 0), np.float32)

    def models(self) -> list[str]:
        response = self._http.get(f"{self.base_url}/v1/models", headers={**self._headers, "Accept": "application/json"})
        if response.status_code >= 400:
            _decode_response(response)
        return [m["id"] for m in response.json()["data"]]


class AsyncClient:
    """The asyncio twin of :class:`Client`."""

    def __init__(self, base_url: str = "http://127.0.0.1:8000", *, api_key: str | None = None,
                 model: str | None = None, timeout: float = 120.0, accept: str = DEFAULT_ACCEPT,
                 accept_encoding: str = "identity", http_client: Any = None) -> None:
        httpx = _httpx()
        self.base_url = base_url.rstrip("/").removesuffix("/v1")
        self.model = model
        self._headers = _headers(accept, accept_encoding, api_key)
        self._http = http_client or httpx.AsyncClient(timeout=timeout, limits=httpx.Limits(max_connections=64))

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def create(self, texts, *, model: str | None = None, dimensions: int | None = None,
                     dtype: str = "float32") -> Embeddings:
        response = await self._http.post(f"{self.base_url}/v1/embeddings", headers=self._headers,
                                         json=_request(texts, model or self.model, dimensions, dtype))
        return _decode_response(response)

    async def embed(self, texts, *, model: str | None = None, dimensions: int | None = None,
                    dtype: str = "float32") -> np.ndarray:
        return _as_array(await self.create(texts, model=model, dimensions=dimensions, dtype=dtype))

    async def embed_many(self, texts: Sequence[str], *, batch_size: int = 256, concurrency: int = 4,
                         model: str | None = None, dimensions: int | None = None, dtype: str = "float32",
                         progress: bool = False) -> np.ndarray:
        spans = _batches(len(texts), batch_size)
        update = _progress(len(texts), progress)
        gate = asyncio.Semaphore(max(1, concurrency))

        async def one(lo: int, hi: int) -> np.ndarray:
            async with gate:
                out = await self.embed(list(texts[lo:hi]), model=model, dimensions=dimensions, dtype=dtype)
            update(hi - lo)
            return out

        results = await asyncio.gather(*(one(lo, hi) for lo, hi in spans))
        return np.concatenate(results) if results else np.empty((0, 0), np.float32)

    async def models(self) -> list[str]:
        response = await self._http.get(f"{self.base_url}/v1/models", headers={**self._headers, "Accept": "application/json"})
        if response.status_code >= 400:
            _decode_response(response)
        return [m["id"] for m in response.json()["data"]]
