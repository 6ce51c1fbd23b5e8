"""Starlette response classes: one per media type, plus the error envelope.

They work in any Starlette or FastAPI app::

    from densewire import Embeddings, Tensor
    from densewire._server.responses import RawEmbeddingsResponse, negotiated_response

    @app.post("/embed")
    async def embed(request: Request):
        emb = Embeddings(Tensor.from_array(vectors), model="m")
        return negotiated_response(request, emb)      # or RawEmbeddingsResponse(emb)

Every response carries ``Vary: Accept, Accept-Encoding`` and is compressed when the request's
``Accept-Encoding`` allows it and the body is at least ``compress_min_bytes`` long.
"""

from __future__ import annotations

from typing import Any, Mapping

import orjson
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import Response

from densewire import MEDIA_TYPES, DensewireError, Embeddings, encode

from .compression import compress
from .negotiation import VARY, negotiate_encoding, negotiate_format

__all__ = [
    "EmbeddingsResponse",
    "JSONEmbeddingsResponse",
    "RawEmbeddingsResponse",
    "MsgpackEmbeddingsResponse",
    "ProtobufEmbeddingsResponse",
    "ArrowEmbeddingsResponse",
    "RESPONSE_CLASSES",
    "ErrorResponse",
    "error_response",
    "negotiated_response",
    "render_embeddings",
]


def render_embeddings(
    emb: Embeddings,
    fmt: str,
    *,
    encoding_format: str = "base64",
    byteorder: str = "little",
    content_encoding: str | None = None,
    compress_min_bytes: int = 1024,
) -> tuple[bytes | memoryview, dict[str, str]]:
    """Encode (and maybe compress) an embeddings response: ``(body, headers)``.

    Pure CPU work with no event-loop state, so a server may run it in a thread.
    """
    body, headers = encode(emb, fmt, encoding_format=encoding_format, byteorder=byteorder)
    headers = dict(headers)
    headers["Vary"] = VARY
    if content_encoding is not None and len(body) >= compress_min_bytes:
        body = compress(body, content_encoding)
        headers["Content-Encoding"] = content_encoding
    return body, headers


class EmbeddingsResponse(Response):
    """An ``Embeddings`` rendered in the subclass's ``format`` (JSON for this base class)."""

    format = "json"

    def __init__(
        self,
        content: Embeddings | None = None,
        status_code: int = 200,
        headers: Mapping[str, str] | None = None,
        media_type: str | None = None,
        background: BackgroundTask | None = None,
        *,
        encoding_format: str = "base64",
        byteorder: str = "little",
        content_encoding: str | None = None,
        compress_min_bytes: int = 1024,
    ) -> None:
        self._options = dict(encoding_format=encoding_format, byteorder=byteorder,
                             content_encoding=content_encoding, compress_min_bytes=compress_min_bytes)
        self._extra = dict(headers or {})
        super().__init__(content, status_code, None, media_type, background)

    def render(self, content: Any) -> bytes | memoryview:
        if content is None:
            return b""
        body, headers = render_embeddings(content, self.format, **self._options)
        headers.update(self._extra)
        self._extra = headers
        return body

    def init_headers(self, headers: Mapping[str, str] | None = None) -> None:
        super().init_headers(self._extra if headers is None else headers)

    @classmethod
    def prepared(cls, body: bytes | memoryview, headers: Mapping[str, str], status_code: int = 200,
                 background: BackgroundTask | None = None) -> "EmbeddingsResponse":
        """A response from a body and headers made by :func:`render_embeddings` (e.g. in a thread)."""
        self = cls.__new__(cls)
        self.status_code = status_code
        self.background = background
        self.body = body
        Response.init_headers(self, headers)
        return self


class JSONEmbeddingsResponse(EmbeddingsResponse):
    format = "json"
    media_type = MEDIA_TYPES["json"]


class RawEmbeddingsResponse(EmbeddingsResponse):
    format = "raw"
    media_type = MEDIA_TYPES["raw"]


class MsgpackEmbeddingsResponse(EmbeddingsResponse):
    format = "msgpack"
    media_type = MEDIA_TYPES["msgpack"]


class ProtobufEmbeddingsResponse(EmbeddingsResponse):
    format = "protobuf"
    media_type = MEDIA_TYPES["protobuf"]


class ArrowEmbeddingsResponse(EmbeddingsResponse):
    format = "arrow"
    media_type = MEDIA_TYPES["arrow"]


RESPONSE_CLASSES: dict[str, type[EmbeddingsResponse]] = {
    c.format: c for c in (JSONEmbeddingsResponse, RawEmbeddingsResponse, MsgpackEmbeddingsResponse,
                          ProtobufEmbeddingsResponse, ArrowEmbeddingsResponse)
}


class ErrorResponse(Response):
    """A ``DensewireError`` as the OpenAI error envelope (always JSON, whatever was negotiated)."""

    media_type = "application/json"

    def __init__(self, error: DensewireError, headers: Mapping[str, str] | None = None, *,
                 status: int | None = None) -> None:
        """``status``: the route's own status for this error (the OpenAI route's 400 for ``invalid_field``),
        else the category's (SPEC.md 11)."""
        merged = {"Vary": VARY}
        if error.http_status == 401:
            merged["WWW-Authenticate"] = 'Bearer realm="densewire"'
        merged.update(headers or {})
        super().__init__(error.to_envelope(), status or error.http_status, merged)

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content)


def error_response(error: DensewireError, headers: Mapping[str, str] | None = None) -> ErrorResponse:
    return ErrorResponse(error, headers)


def negotiated_response(
    request: Request,
    emb: Embeddings,
    *,
    encoding_format: str = "base64",
    byteorder: str = "little",
    compress_min_bytes: int = 1024,
) -> Response:
    """The response class that the request's ``Accept`` / ``?format=`` asks for (or a 406 error)."""
    try:
        fmt = negotiate_format(request.headers.get("accept"), request.query_params.get("format"))
    except DensewireError as err:
        return ErrorResponse(err)
    enc = negotiate_encoding(request.headers.get("accept-encoding"))
    return RESPONSE_CLASSES[fmt](emb, encoding_format=encoding_format, byteorder=byteorder,
                                 content_encoding=enc, compress_min_bytes=compress_min_bytes)
