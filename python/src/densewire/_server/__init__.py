"""``densewire serve``: the embeddings server (Starlette + uvicorn).

Public pieces for embedding the server in other apps:

* :func:`create_app` (the ASGI app) and :class:`ServerConfig`;
* the response classes, one per media type (``RawEmbeddingsResponse`` ...), usable from any
  Starlette or FastAPI endpoint, and :func:`negotiated_response`;
* :func:`add_serve_command` for the ``densewire`` command line.
"""

from __future__ import annotations

from .cli import add_serve_command, main, run_server
from .config import ServerConfig
from .responses import (
    RESPONSE_CLASSES,
    ArrowEmbeddingsResponse,
    EmbeddingsResponse,
    ErrorResponse,
    JSONEmbeddingsResponse,
    MsgpackEmbeddingsResponse,
    ProtobufEmbeddingsResponse,
    RawEmbeddingsResponse,
    negotiated_response,
)


def create_app(*args, **kwargs):  # type: ignore[no-untyped-def]
    """See :func:`densewire._server.app.create_app`."""
    from .app import create_app as _create_app

    return _create_app(*args, **kwargs)


__all__ = [
    "create_app",
    "ServerConfig",
    "add_serve_command",
    "run_server",
    "main",
    "EmbeddingsResponse",
    "JSONEmbeddingsResponse",
    "RawEmbeddingsResponse",
    "MsgpackEmbeddingsResponse",
    "ProtobufEmbeddingsResponse",
    "ArrowEmbeddingsResponse",
    "RESPONSE_CLASSES",
    "ErrorResponse",
    "negotiated_response",
]
