"""``densewire serve``: the embeddings server (Starlette + uvicorn).

Public pieces for embedding the server in other apps:

* :func:`create_app` (the ASGI app) and :class:`ServerConfig`;
* the response classes, one per media type (``RawEmbeddingsResponse`` ...), usable from any
  Starlette or FastAPI endpoint, and :func:`negotiated_response`;
* :func:`add_serve_command` for the ``densewire`` command line.

Names are imported on first use, so that ``densewire --help`` does not load Starlette, uvicorn or
redis (``densewire._server.cli`` itself needs the standard library only until a server runs).
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_WHERE = {
    "create_app": ".app",
    "ServerConfig": ".config",
    "add_serve_command": ".cli",
    "run_server": ".cli",
    "main": ".cli",
    "EmbeddingsResponse": ".responses",
    "JSONEmbeddingsResponse": ".responses",
    "RawEmbeddingsResponse": ".responses",
    "MsgpackEmbeddingsResponse": ".responses",
    "ProtobufEmbeddingsResponse": ".responses",
    "ArrowEmbeddingsResponse": ".responses",
    "RESPONSE_CLASSES": ".responses",
    "ErrorResponse": ".responses",
    "negotiated_response": ".responses",
    "render_embeddings": ".responses",
}

__all__ = list(_WHERE)


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
