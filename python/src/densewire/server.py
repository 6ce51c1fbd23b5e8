"""The embeddings and tables server of ``densewire serve``, as a library (needs ``densewire[serve]``).

* :func:`create_app`: the ASGI app (Starlette) for a :class:`ServerConfig`, serving
  ``POST /v1/embeddings``, ``/v1/models``, ``/v1/tables``, ``/health``, ``/metrics``, ``/openapi.json``;
  pass ``backend=`` to serve a model already loaded;
* :func:`load_backend`: a :class:`Backend` from a spec (``minilm``, ``hash:DIM``, a model folder,
  ``st:NAME_OR_PATH``, ``upstream:URL`` with ``model=...``);
* :func:`main` (``python -m densewire.server [flags]``, the same as ``densewire serve [flags]``),
  :func:`run_server` (uvicorn until SIGINT/SIGTERM) and :func:`add_serve_command` (``serve`` on an
  argparse parser);
* the response classes, one per media type (``RawEmbeddingsResponse`` ...), usable from any
  Starlette or FastAPI endpoint, :func:`negotiated_response` and :func:`render_embeddings`.

>>> from densewire.server import ServerConfig, load_backend
>>> backend = load_backend("hash:8")
>>> backend.embed(["hello"]).shape
(1, 8)
>>> ServerConfig(model="hash:8").port
8000

``create_app(ServerConfig(model="hash:8"))`` is then an app for ``uvicorn``. The names that need
Starlette are imported on first use, so that ``densewire --help`` and the flag checks of
``densewire serve`` load no web framework.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._backends import Backend, load_backend
from ._optional import require
from ._server.cli import add_serve_command, main, run_server
from ._server.config import ServerConfig

if TYPE_CHECKING:
    from ._server.app import create_app
    from ._server.responses import (RESPONSE_CLASSES, ArrowEmbeddingsResponse, EmbeddingsResponse, ErrorResponse,
                                    JSONEmbeddingsResponse, MsgpackEmbeddingsResponse, ProtobufEmbeddingsResponse,
                                    RawEmbeddingsResponse, negotiated_response, render_embeddings)

#: The names that need Starlette, and the module of each.
_LAZY = {
    "create_app": "app",
    **dict.fromkeys(("EmbeddingsResponse", "JSONEmbeddingsResponse", "RawEmbeddingsResponse",
                     "MsgpackEmbeddingsResponse", "ProtobufEmbeddingsResponse", "ArrowEmbeddingsResponse",
                     "RESPONSE_CLASSES", "ErrorResponse", "negotiated_response", "render_embeddings"), "responses"),
}

__all__ = ["create_app", "ServerConfig", "load_backend", "Backend", "main", "run_server", "add_serve_command",
           *sorted(set(_LAZY) - {"create_app"})]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(require(f"densewire._server.{module}", extra="serve", feature=f"densewire.server.{name}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


if __name__ == "__main__":
    raise SystemExit(main())
