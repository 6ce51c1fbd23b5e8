"""Request ids and one log line per error response (ASGI middleware, every route).

Every response carries ``X-Request-Id``: the client's own when it sent a usable one (a proxy's
``$request_id``), else a new random id. Every 4xx and 5xx is logged once, on the ``densewire.server``
logger, with that id, the status, the error code, the field and the message, the same text as the
client gets in the OpenAI error envelope::

    request_id=3f2a9c... POST /v1/embeddings 400 invalid_field param=dimensions: dimensions: 1e+30 is out of range ...

4xx lines are INFO (the client's mistake, visible at the default level), 5xx lines WARNING.
"""

from __future__ import annotations

import os
import re

import orjson
from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .logs import log

__all__ = ["ErrorLogMiddleware", "REQUEST_ID_HEADER"]

REQUEST_ID_HEADER = "X-Request-Id"
_GOOD_ID = re.compile(rb"[A-Za-z0-9._:-]{1,64}")
#: An error body larger than this is not kept for the log line (envelopes are a few hundred bytes).
_MAX_ERROR_BODY = 16 * 1024


def _request_id(scope: Scope) -> str:
    for name, value in scope.get("headers", ()):
        if name == b"x-request-id" and _GOOD_ID.fullmatch(value):
            return value.decode("ascii")
    return os.urandom(8).hex()


def _describe(body: bytes) -> tuple[str, str, str]:
    """(code, param, message) of an OpenAI error envelope; dashes when the body is something else."""
    try:
        err = orjson.loads(body)["error"]
        return str(err.get("code") or "-"), str(err.get("param") or "-"), str(err.get("message") or "-")
    except (orjson.JSONDecodeError, KeyError, TypeError, AttributeError):
        return "-", "-", body[:200].decode("utf-8", "replace") or "-"


class ErrorLogMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        rid = _request_id(scope)
        scope.setdefault("state", {})["request_id"] = rid
        status = 0
        parts: list[bytes] = []
        size = 0

        async def send_with_id(message: Message) -> None:
            nonlocal status, size
            if message["type"] == "http.response.start":
                status = message["status"]
                MutableHeaders(scope=message)[REQUEST_ID_HEADER] = rid
            elif message["type"] == "http.response.body" and status >= 400:
                chunk = message.get("body", b"")
                if size + len(chunk) <= _MAX_ERROR_BODY:
                    parts.append(chunk)
                size += len(chunk)
                if not message.get("more_body", False):
                    _log_error(scope, rid, status, b"".join(parts))
            await send(message)

        await self.app(scope, receive, send_with_id)


def _log_error(scope: Scope, rid: str, status: int, body: bytes) -> None:
    code, param, message = _describe(body)
    level = 30 if status >= 500 else 20  # WARNING, INFO
    log.log(level, "request_id=%s %s %s %d %s param=%s: %s", rid, scope.get("method", "-"),
            scope.get("path", "-"), status, code, param, message)
