"""Backend that forwards to another OpenAI-compatible embeddings server.

Works with anything that serves ``POST /v1/embeddings`` the OpenAI way: text
embeddings inference (TEI), vLLM, Infinity, OpenAI itself. Requests ask for
``encoding_format: "base64"`` (little-endian float32) and decode answers with
densewire's JSON envelope decoder, so rows are placed by ``index`` and responses
that ignore Base64 and send float lists are accepted too.

Notes:
    * ``count_tokens`` cannot ask the upstream (the API has no such call): it
      approximates tokens by whitespace-separated words.
    * Truncation is the upstream's business: texts are sent as they are
      (some servers need e.g. ``extra_body={"truncate": True}``).
    * ``dimensions`` is learnt from the first response when not given; reading
      it before any request sends one short probe request.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import orjson

from .._errors import DensewireError
from .._json import decode_json
from .._optional import require
from .base import Backend, check_ids, check_texts, empty_result, whitespace_token_counts

__all__ = ["UpstreamBackend", "UpstreamError", "embeddings_url"]


class UpstreamError(RuntimeError):
    """The upstream server failed or answered something unusable.

    Attributes:
        status: the upstream's HTTP status, or None when no response came
            (connection refused, timeout).
        message: the upstream's error message (or a description).
        url: the endpoint that was called.
    """

    def __init__(self, status: int | None, message: str, url: str = "") -> None:
        self.status = status
        self.message = message
        self.url = url
        where = f" from {url}" if url else ""
        prefix = f"upstream returned HTTP {status}" if status is not None else "upstream request failed"
        super().__init__(f"{prefix}{where}: {message}")


def embeddings_url(base_url: str) -> str:
    """``{base}/v1/embeddings`` for a base URL given with or without ``/v1``."""
    base = base_url.strip().rstrip("/")
    for suffix in ("/v1/embeddings", "/v1"):
        if base.endswith(suffix):
            base = base[: -len(suffix)]
            break
    return f"{base}/v1/embeddings"


def _error_message(content: bytes, reason: str) -> str:
    """The message of an OpenAI-, TEI- or FastAPI-style error body."""
    try:
        body = orjson.loads(content)
    except ValueError:
        text = content.decode("utf-8", "replace").strip()
        return text[:1000] or reason
    if isinstance(body, dict):
        err = body.get("error")
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])
        for key in ("error", "detail", "message"):
            if body.get(key):
                value = body[key]
                return value if isinstance(value, str) else orjson.dumps(value).decode()
    return orjson.dumps(body).decode()[:1000]


class UpstreamBackend(Backend):
    """Embeddings from a remote OpenAI-compatible ``/v1/embeddings`` endpoint.

    Args:
        base_url: e.g. ``http://127.0.0.1:8080`` or ``https://api.openai.com/v1``.
        model: the model id sent upstream.
        api_key: sent as ``Authorization: Bearer ...`` when given.
        timeout: seconds for connect/read/write of one request.
        name: model id served by densewire (default: ``model``).
        dimensions: expected dimension (default: learnt from the first answer).
        max_tokens: advertised input limit (whitespace words, see module doc).
        batch_size: most inputs sent in one upstream request.
        max_connections: size of the connection pool.
        extra_body: extra JSON fields for every request.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        timeout: float = 60.0,
        *,
        name: str | None = None,
        dimensions: int | None = None,
        max_tokens: int = 8192,
        batch_size: int = 512,
        max_connections: int = 16,
        extra_body: dict[str, Any] | None = None,
    ) -> None:
        httpx = require("httpx", extra="serve", feature="the upstream backend")
        if not model:
            raise ValueError("the upstream backend needs a model id (model=...)")
        if not base_url.strip().lower().startswith(("http://", "https://")):
            raise ValueError(f"upstream base_url must be an http(s) URL, not {base_url!r}")
        if dimensions is not None and dimensions < 1:
            raise ValueError(f"dimensions must be positive, not {dimensions}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be positive, not {batch_size}")
        self._httpx = httpx
        self.url = embeddings_url(base_url)
        self.model = model
        self.name = name or model
        # which sizes the upstream's model was trained for is the upstream's to judge (the server's
        # --matryoshka-dimensions narrows it): dimensions are accepted (server/matryoshka.py)
        self.matryoshka = True
        self.max_tokens = int(max_tokens)
        self._dimensions = int(dimensions) if dimensions is not None else None
        self._batch_size = int(batch_size)
        self._extra = dict(extra_body or {})
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        self._client = httpx.Client(
            headers=headers,
            timeout=httpx.Timeout(timeout),
            limits=httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections),
        )

    @property
    def dimensions(self) -> int:  # type: ignore[override]
        if self._dimensions is None:
            self.embed(["dimension probe"])
        assert self._dimensions is not None
        return self._dimensions

    def close(self) -> None:
        self._client.close()

    def count_tokens(self, texts: list[str]) -> list[int]:
        """Approximation: whitespace-separated words per text."""
        check_texts(texts)
        return whitespace_token_counts(texts)

    def embed(self, texts: list[str]) -> np.ndarray:
        check_texts(texts)
        return self._run(list(texts))

    def embed_tokens(self, ids: list[list[int]]) -> np.ndarray:
        check_ids(ids)
        return self._run([[int(t) for t in seq] for seq in ids])

    # -- requests ----------------------------------------------------------
    def _run(self, inputs: list[Any]) -> np.ndarray:
        if not inputs:
            return empty_result(self._dimensions or 0)
        out: np.ndarray | None = None
        if self._dimensions is not None:
            out = np.empty((len(inputs), self._dimensions), dtype=np.float32)
        for start in range(0, len(inputs), self._batch_size):
            chunk = inputs[start:start + self._batch_size]
            status, vectors = self._post(chunk)
            if out is None:
                if vectors.shape[1] == 0:
                    raise UpstreamError(status, "the upstream returned empty vectors", self.url)
                self._dimensions = int(vectors.shape[1])
                out = np.empty((len(inputs), vectors.shape[1]), dtype=np.float32)
            if vectors.shape[1] != out.shape[1]:
                raise UpstreamError(status, f"embeddings have {vectors.shape[1]} values, expected {out.shape[1]}", self.url)
            out[start:start + len(chunk)] = vectors
        assert out is not None
        return out

    def _post(self, chunk: list[Any]) -> tuple[int, np.ndarray]:
        """One request; the response decoded by densewire's JSON envelope decoder (rows by index,
        Base64 or float rows), as float32 of shape (len(chunk), d)."""
        body = {"model": self.model, "input": chunk, "encoding_format": "base64", **self._extra}
        httpx = self._httpx
        try:
            resp = self._client.post(self.url, content=orjson.dumps(body))
        except httpx.TimeoutException as exc:
            raise UpstreamError(None, f"timed out ({type(exc).__name__})", self.url) from exc
        except httpx.HTTPError as exc:
            raise UpstreamError(None, f"{type(exc).__name__}: {exc}", self.url) from exc
        if resp.status_code >= 400:
            raise UpstreamError(resp.status_code, _error_message(resp.content, resp.reason_phrase), self.url)
        try:
            vectors = decode_json(resp.content).tensor.to_float32()
        except DensewireError as exc:
            raise UpstreamError(resp.status_code, f"malformed embeddings response: {exc}", self.url) from exc
        if vectors.shape[0] != len(chunk):
            raise UpstreamError(
                resp.status_code, f"sent {len(chunk)} inputs but got {vectors.shape[0]} embeddings", self.url
            )
        return resp.status_code, vectors
