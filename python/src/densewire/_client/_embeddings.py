"""``AsyncClient`` and ``Client`` for the embeddings API.

They ask for the fastest format the server offers (raw, then MessagePack, Protobuf, JSON) and
decode whatever comes back by its Content-Type, as views of the one buffer the body was read into.
Against an OpenAI-compatible server that only speaks JSON they get JSON with Base64 rows.

They send ``Accept-Encoding: identity`` unless told otherwise: float vectors barely compress (256
MiniLM vectors keep 91.7 to 92.9 % of their size under gzip, zstd or brotli at any level) while gzip
-6 compresses at about 40 MB/s, 800 times slower than copying the bytes
(bench/python/compression.py), so on a datacenter network compression costs far more time than the
7 % it saves. Pass ``accept_encoding="zstd, gzip"`` for a slow link.
"""

from __future__ import annotations

import asyncio
import weakref
from urllib.parse import quote
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import orjson
import yarl

from .._optional import require
from .._errors import DensewireError, InvalidFieldError
from .._formats import MEDIA_TYPES, decode, format_for_media_type
from .._quantize import QUANTIZED_DTYPES, Quantization
from .._ragged import RaggedTensor, SparseVectors
from .._tensor import Embeddings
from ._errors import APIError
from ._loop import LoopThread, close_on_loop
from ._retry import RetryPolicy
from ._transport import Response, Transport, raise_for_status

__all__ = ["Client", "AsyncClient", "DEFAULT_ACCEPT"]

DEFAULT_ACCEPT = (f"{MEDIA_TYPES['raw']}, {MEDIA_TYPES['msgpack']};q=0.9, {MEDIA_TYPES['protobuf']};q=0.8, "
                  f"{MEDIA_TYPES['json']};q=0.5")


def base_url_of(url: str) -> str:
    """``http://host:8000/v1/`` -> ``http://host:8000``."""
    return url.rstrip("/").removesuffix("/v1")


def auth_headers(api_key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


def _request_body(texts, model: str | None, dimensions: int | None, dtype: str) -> bytes:
    body: dict[str, Any] = {"input": texts if isinstance(texts, str) else list(texts), "encoding_format": "base64"}
    if model is not None:
        body["model"] = model
    if dimensions is not None:
        body["dimensions"] = dimensions
    if dtype != "float32":  # densewire's field; plain OpenAI-compatible servers may reject unknown fields
        body["dtype"] = dtype
    return orjson.dumps(body, option=orjson.OPT_SERIALIZE_NUMPY)


def _decode_response(response: Response) -> Embeddings:
    raise_for_status(response)
    fmt = format_for_media_type(response.header("Content-Type", "application/json")) or "json"
    try:
        return decode(response.body, fmt, response.headers)
    except DensewireError as exc:
        raise APIError(response.status, f"the server's {fmt} response does not decode: {exc}", exc.category,
                       exc.field, exc.offset, attempts=response.attempts) from exc


def _decode_tokens(response: Response) -> Embeddings:
    """A per-token answer of ``POST /embed_all``: densewire's ragged tensor (SPEC.md 20), or TEI's JSON."""
    raise_for_status(response)
    fmt = format_for_media_type(response.header("Content-Type", "application/json")) or "json"
    try:
        if fmt == "json":  # TEI's own shape: [[[f32]]], one matrix per input
            doc = orjson.loads(response.body)
            return Embeddings(RaggedTensor.from_arrays([np.array(m, np.float32).reshape(len(m), -1) for m in doc]))
        return decode(response.body, fmt, response.headers, kind="ragged")
    except (DensewireError, orjson.JSONDecodeError, ValueError, TypeError) as exc:
        raise APIError(response.status, f"the server's {fmt} per-token response does not decode: {exc}",
                       getattr(exc, "category", "malformed"), getattr(exc, "field", None),
                       getattr(exc, "offset", None), attempts=response.attempts) from exc


def _decode_sparse(response: Response, vocab_size: int | None) -> SparseVectors:
    """A sparse answer of ``POST /embed_sparse``: densewire's sparse tensor (SPEC.md 20.2), or TEI's JSON
    (``[[{"index", "value"}]]``, which does not say the vocabulary size: ``vocab_size``, else one past the
    largest index)."""
    raise_for_status(response)
    fmt = format_for_media_type(response.header("Content-Type", "application/json")) or "json"
    try:
        if fmt == "json":
            doc = orjson.loads(response.body)
            if not isinstance(doc, list) or not all(isinstance(v, list) for v in doc):
                raise TypeError("a TEI sparse answer is an array of arrays of {index, value}")
            indices = np.array([e["index"] for v in doc for e in v], np.int64)
            values = np.array([e["value"] for v in doc for e in v], np.float32)
            offsets = np.concatenate([[0], np.cumsum([len(v) for v in doc], dtype=np.int64)])
            vocab = vocab_size or (int(indices.max()) + 1 if indices.size else 1)
            return SparseVectors(indices, values, offsets, vocab)
        out = decode(response.body, fmt, response.headers, kind="sparse").tensor
        return out
    except (DensewireError, orjson.JSONDecodeError, ValueError, TypeError, KeyError) as exc:
        raise APIError(response.status, f"the server's {fmt} sparse response does not decode: {exc}",
                       getattr(exc, "category", "malformed"), getattr(exc, "field", None),
                       getattr(exc, "offset", None), attempts=response.attempts) from exc


def _as_array(emb: Embeddings) -> np.ndarray:
    t = emb.tensor
    return t.to_float32() if t.dtype == "bfloat16" else t.array


def _progress(total: int, enabled: bool) -> Callable[[int], None]:
    if not enabled:
        return lambda _k: None
    tqdm = require("tqdm", package="tqdm", feature="progress=True").tqdm
    return tqdm(total=total, unit="text").update


def _check_dequantize(dtype: str, dequantize: bool) -> None:
    if dequantize and dtype not in QUANTIZED_DTYPES:
        raise ValueError(f"dequantize=True needs dtype 'int8' or 'uint8', not {dtype!r}")


class AsyncClient:
    """The asyncio client: ``await client.embed(["a", "b"])`` returns an ``(n, d)`` numpy array.

    ``dtype="int8"`` or ``"uint8"`` asks the server for codes quantized with its published ranges
    (SPEC.md 17, 4x fewer bytes than float32); ``embed(..., dequantize=True)`` turns them back into
    float32 with the ranges of :meth:`quantization`, fetched once per id and kept.

    ``max_retries`` (default 2) retries 429, 503 and connection errors before an answer (SPEC.md
    section 18), waiting the server's ``Retry-After`` plus a full-jitter backoff of at most
    ``backoff_base * 2**k`` seconds (capped at ``backoff_cap``); a ``Retry-After`` over 60 s is not
    waited for (the error carries it). ``RetryPolicy.wait`` is the rule, ``RetryPolicy.random`` its draws. Errors raise :class:`APIError` subclasses
    (:class:`RateLimitError` for 429) or :class:`APIConnectionError`. ``http_client`` may be an
    ``aiohttp.ClientSession`` of your own (proxies, TLS), made with ``auto_decompress=False``; it is
    not closed by :meth:`aclose`."""

    def __init__(self, base_url: str = "http://127.0.0.1:8000", *, api_key: str | None = None,
                 model: str | None = None, timeout: float | None = 120.0, accept: str = DEFAULT_ACCEPT,
                 accept_encoding: str = "identity", max_retries: int = 2, backoff_base: float = 0.5,
                 backoff_cap: float = 8.0, max_connections: int = 64, http_client: Any = None) -> None:
        self.base_url = base_url_of(base_url)
        self.model = model
        self._url = yarl.URL(f"{self.base_url}/v1/embeddings")
        self._tokens_url = yarl.URL(f"{self.base_url}/embed_all")
        self._sparse_url = yarl.URL(f"{self.base_url}/embed_sparse")
        self._headers = {"Accept": accept, "Accept-Encoding": accept_encoding, "Content-Type": "application/json",
                         **auth_headers(api_key)}
        self._transport = Transport(timeout=timeout, retry=RetryPolicy(max_retries, backoff_base, backoff_cap),
                                    max_connections=max_connections, session=http_client)
        self._quantizations: dict[str, Quantization] = {}

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._transport.close()

    async def create(self, texts, *, model: str | None = None, dimensions: int | None = None,
                     dtype: str = "float32") -> Embeddings:
        """One request: the decoded response with its model and usage."""
        body = _request_body(texts, model or self.model, dimensions, dtype)
        return _decode_response(await self._transport.request("POST", self._url, self._headers, body))

    async def embed(self, texts, *, model: str | None = None, dimensions: int | None = None,
                    dtype: str = "float32", dequantize: bool = False) -> np.ndarray:
        """Vectors of one request as an (n, d) array (float16 stays float16; bfloat16 widens to float32;
        binary is packed uint8; int8/uint8 are the codes, or with ``dequantize`` float32 values)."""
        _check_dequantize(dtype, dequantize)
        emb = await self.create(texts, model=model, dimensions=dimensions, dtype=dtype)
        if dequantize:
            return await self.dequantize(emb)
        return _as_array(emb)

    async def embed_tokens(self, texts, *, truncate: bool | None = None) -> RaggedTensor:
        """Per-token embeddings (TEI's ``POST /embed_all``): one ``(tokens, hidden)`` matrix per text, special
        tokens included, as a :class:`RaggedTensor` over one buffer (``r[i]`` is text ``i``'s matrix, a view).
        Asked for by the client's ``accept`` (densewire's ragged raw body first by default); TEI's JSON shape
        is read too. ``truncate`` cuts texts
        longer than the model's maximum (the server's ``--auto-truncate`` when None)."""
        body: dict[str, Any] = {"inputs": texts if isinstance(texts, str) else list(texts)}
        if truncate is not None:
            body["truncate"] = truncate
        response = await self._transport.request("POST", self._tokens_url, self._headers, orjson.dumps(body))
        return _decode_tokens(response).tensor

    async def embed_sparse(self, texts, *, truncate: bool | None = None, max_active_dims: int | None = None,
                           vocab_size: int | None = None) -> SparseVectors:
        """Sparse (SPLADE) vectors (TEI's ``POST /embed_sparse``): per text its non-zero vocabulary weights, as
        :class:`SparseVectors` over one buffer (``s[i]`` is text ``i``'s ``(indices, values)``, views;
        ``s.to_scipy()`` a CSR matrix). Asked for by the client's ``accept`` (densewire's sparse raw body first
        by default); TEI's JSON is read too, with ``vocab_size`` as its vocabulary size (it sends none; one past
        the largest index when None). ``truncate`` cuts texts longer than the model's maximum (the server's
        ``--auto-truncate`` when None); ``max_active_dims`` keeps each vector's largest weights only."""
        body: dict[str, Any] = {"inputs": texts if isinstance(texts, str) else list(texts)}
        if truncate is not None:
            body["truncate"] = truncate
        if max_active_dims is not None:
            body["max_active_dims"] = max_active_dims
        response = await self._transport.request("POST", self._sparse_url, self._headers, orjson.dumps(body))
        return _decode_sparse(response, vocab_size)

    async def quantization(self, quantization_id: str) -> Quantization:
        """The ranges with this id (``GET /v1/quantization/{id}``), checked (SPEC.md 17.6); fetched once
        per id, then kept (they never change)."""
        found = self._quantizations.get(quantization_id)
        if found is not None:
            return found
        response = await self._transport.request(
            "GET", f"{self.base_url}/v1/quantization/{quote(quantization_id, safe='')}",
            {**self._headers, "Accept": "application/json"})
        raise_for_status(response)
        try:
            found = Quantization.from_json(response.body)
        except DensewireError as exc:
            raise APIError(response.status, f"the server's quantization object does not decode: {exc}",
                           exc.category, exc.field, exc.offset, attempts=response.attempts) from exc
        if found.id != quantization_id:
            raise APIError(response.status, f"asked for the ranges {quantization_id}, the server sent {found.id}",
                           "invalid_field", "id", None, attempts=response.attempts)
        self._quantizations[quantization_id] = found
        return found

    async def dequantize(self, emb: Embeddings) -> np.ndarray:
        """float32 values of an int8/uint8 response, with the ranges its quantization id names."""
        if emb.quantization is None:
            raise InvalidFieldError(f"this {emb.tensor.dtype} response names no quantization ranges",
                                    field="quantization")
        return (await self.quantization(emb.quantization)).dequantize(emb.tensor)

    async def embed_many(self, texts: Sequence[str], *, batch_size: int = 256, concurrency: int = 4,
                         model: str | None = None, dimensions: int | None = None, dtype: str = "float32",
                         progress: bool = False, dequantize: bool = False) -> np.ndarray:
        """Many texts in batches, ``concurrency`` requests at a time, in input order."""
        _check_dequantize(dtype, dequantize)
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        spans = [(i, min(i + batch_size, len(texts))) for i in range(0, len(texts), batch_size)]
        update = _progress(len(texts), progress)
        gate = asyncio.Semaphore(max(1, concurrency))

        async def one(lo: int, hi: int) -> np.ndarray:
            async with gate:
                out = await self.embed(list(texts[lo:hi]), model=model, dimensions=dimensions, dtype=dtype,
                                       dequantize=dequantize)
            update(hi - lo)
            return out

        tasks = [asyncio.ensure_future(one(lo, hi)) for lo, hi in spans]
        try:
            results = await asyncio.gather(*tasks)
        finally:
            for task in tasks:  # the first error ends the job: do not leave the other batches running
                task.cancel()
        return np.concatenate(results) if results else np.empty((0, 0), np.float32)

    async def models(self) -> list[str]:
        """The ids of ``GET /v1/models``."""
        response = await self._transport.request("GET", f"{self.base_url}/v1/models",
                                                 {**self._headers, "Accept": "application/json"})
        raise_for_status(response)
        return [m["id"] for m in orjson.loads(response.body)["data"]]


class Client:
    """The synchronous client, with the arguments and methods of :class:`AsyncClient` (``close()``
    instead of ``aclose()``). It runs the async client on a private event loop thread, so one
    ``Client`` may be used from many threads at once."""

    def __init__(self, base_url: str = "http://127.0.0.1:8000", *, api_key: str | None = None,
                 model: str | None = None, timeout: float | None = 120.0, accept: str = DEFAULT_ACCEPT,
                 accept_encoding: str = "identity", max_retries: int = 2, backoff_base: float = 0.5,
                 backoff_cap: float = 8.0, max_connections: int = 64) -> None:
        self._async = AsyncClient(base_url, api_key=api_key, model=model, timeout=timeout, accept=accept,
                                  accept_encoding=accept_encoding, max_retries=max_retries,
                                  backoff_base=backoff_base, backoff_cap=backoff_cap, max_connections=max_connections)
        self.base_url, self.model = self._async.base_url, model
        self._loop = LoopThread("densewire-client")
        # closed when collected, or at exit, if its user never calls close(): no open session is left
        self._finalizer = weakref.finalize(self, close_on_loop, self._loop, self._async)

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._finalizer()

    def create(self, texts, *, model: str | None = None, dimensions: int | None = None,
               dtype: str = "float32") -> Embeddings:
        """One request: the decoded response with its model and usage."""
        return self._loop.run(self._async.create(texts, model=model, dimensions=dimensions, dtype=dtype))

    def embed(self, texts, *, model: str | None = None, dimensions: int | None = None,
              dtype: str = "float32", dequantize: bool = False) -> np.ndarray:
        """Vectors of one request as an (n, d) array (int8/uint8 codes, or float32 with ``dequantize``)."""
        return self._loop.run(self._async.embed(texts, model=model, dimensions=dimensions, dtype=dtype,
                                                dequantize=dequantize))

    def embed_tokens(self, texts, *, truncate: bool | None = None) -> RaggedTensor:
        """Per-token embeddings of each text as a :class:`RaggedTensor` (see :meth:`AsyncClient.embed_tokens`)."""
        return self._loop.run(self._async.embed_tokens(texts, truncate=truncate))

    def embed_sparse(self, texts, *, truncate: bool | None = None, max_active_dims: int | None = None,
                     vocab_size: int | None = None) -> SparseVectors:
        """Sparse vectors of each text as :class:`SparseVectors` (see :meth:`AsyncClient.embed_sparse`)."""
        return self._loop.run(self._async.embed_sparse(texts, truncate=truncate, max_active_dims=max_active_dims,
                                                       vocab_size=vocab_size))

    def quantization(self, quantization_id: str) -> Quantization:
        """The ranges with this id (``GET /v1/quantization/{id}``), fetched once per id."""
        return self._loop.run(self._async.quantization(quantization_id))

    def dequantize(self, emb: Embeddings) -> np.ndarray:
        """float32 values of an int8/uint8 response, with the ranges its quantization id names."""
        return self._loop.run(self._async.dequantize(emb))

    def embed_many(self, texts: Sequence[str], *, batch_size: int = 256, concurrency: int = 4,
                   model: str | None = None, dimensions: int | None = None, dtype: str = "float32",
                   progress: bool = False, dequantize: bool = False) -> np.ndarray:
        """Many texts in batches, ``concurrency`` requests at a time, in input order."""
        return self._loop.run(self._async.embed_many(texts, batch_size=batch_size, concurrency=concurrency, model=model,
                                                     dimensions=dimensions, dtype=dtype, progress=progress,
                                                     dequantize=dequantize))

    def models(self) -> list[str]:
        """The ids of ``GET /v1/models``."""
        return self._loop.run(self._async.models())
