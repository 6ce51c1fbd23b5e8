"""The HTTP side of tables (SPEC.md 15.9): ``GET /v1/tables``, ``GET``/``HEAD /v1/tables/{name}`` (the
prepared bytes of the current snapshot, 304 on ``If-None-Match``, 503 with ``Retry-After`` before a
first load), and the ``/demo`` page."""

from __future__ import annotations

import time
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.staticfiles import StaticFiles
from starlette.types import Receive, Scope, Send

from densewire import DensewireError, NotFoundError, UnavailableError, error_class

from ..negotiation import negotiate_encoding, negotiate_table_format
from ..responses import ErrorResponse
from .registry import TableRegistry
from .snapshot import Representation, Snapshot, TableEntry

__all__ = ["list_tables", "get_table", "DemoFiles", "DEMO_DIR", "if_none_match_matches", "TableResponse"]

DEMO_DIR = Path(__file__).resolve().parent.parent / "static" / "demo"


def if_none_match_matches(header: str, etag: str) -> bool:
    """RFC 9110 13.1.2: ``*`` or a list of entity tags, compared weakly (``W/`` ignored)."""
    value = header.strip()
    if value == "*":
        return True
    opaque = etag[2:] if etag.startswith("W/") else etag
    for item in value.split(","):
        tag = item.strip()
        if tag.startswith(("W/", "w/")):
            tag = tag[2:]
        if tag == opaque:
            return True
    return False


def _not_modified(request: Request, snap: Snapshot, rep: Representation) -> bool:
    inm = request.headers.get("if-none-match")
    if inm is not None:
        return if_none_match_matches(inm, rep.etag)
    ims = request.headers.get("if-modified-since")
    if ims:
        try:
            since = parsedate_to_datetime(ims).timestamp()
        except (TypeError, ValueError, IndexError, OverflowError):
            return False
        return int(snap.loaded_at) <= since
    return False


class TableResponse(Response):
    """A prepared representation (no rendering: the body and headers exist already)."""

    def __init__(self, rep: Representation, status_code: int = 200) -> None:
        self.status_code = status_code
        self.background = None
        self.body = rep.body if status_code == 200 else b""
        self.init_headers(rep.headers)


def _state(request: Request) -> Any:
    return request.app.state.densewire


async def list_tables(request: Request) -> Response:
    st = _state(request)
    try:
        st.check_auth(request, public=st.cfg.public_tables)
        reg: TableRegistry = st.tables
        await reg.wait_all(st.cfg.table_load_timeout)
        response = Response(orjson.dumps({"object": "list", "data": [e.describe() for e in reg.entries.values()]}),
                            200, {"Cache-Control": "no-cache"}, media_type="application/json")
    except DensewireError as err:
        response = ErrorResponse(err)
    st.metrics.requests.labels("/v1/tables", str(response.status_code), "json").inc()
    return response


async def get_table(request: Request) -> Response:
    st = _state(request)
    m = st.metrics
    t0 = time.perf_counter()
    fmt = "-"
    name = request.path_params["name"]
    reg: TableRegistry = st.tables
    entry: TableEntry | None = None
    coding = "identity"
    try:
        st.check_auth(request, public=st.cfg.public_tables)
        entry = reg.get(name)
        if entry is None:
            served = ", ".join(reg.names) or "none"
            raise NotFoundError(f"no table {name[:100]!r} here; the tables are: {served}", field="name")
        fmt = negotiate_table_format(request.headers.get("accept"), request.query_params.get("format"))
        coding = negotiate_encoding(request.headers.get("accept-encoding")) or "identity"
        snap = entry.snapshot
        result = "warm"
        if snap is None:
            result = "waited"
            snap = await reg.wait_first(entry, st.cfg.table_load_timeout)
            if snap is None:
                if entry.error:
                    msg = f"table {name!r} could not be loaded: {entry.error}; retrying"
                else:
                    msg = f"table {name!r} is still loading (waited {st.cfg.table_load_timeout:g} s)"
                m.table_requests.labels(name, fmt, coding, "unavailable").inc()
                raise UnavailableError(msg)
        if fmt in snap.errors:
            cat, msg, fld = snap.errors[fmt]
            raise error_class(cat)(f"table {name!r} cannot be served as {fmt}: {msg}; use a binary format "
                                   "(msgpack, protobuf, arrow) or csv", field=fld)
        rep = snap.pick(fmt, coding)
        used = rep.headers.get("Content-Encoding", "identity")
        if _not_modified(request, snap, rep):
            response: Response = TableResponse(rep, 304)
            m.table_requests.labels(name, fmt, used, "not_modified").inc()
        else:
            response = TableResponse(rep)
            m.table_requests.labels(name, fmt, used, result).inc()
            if request.method != "HEAD":
                m.table_response_bytes.labels(name, fmt, used).inc(len(rep.body))
    except UnavailableError as err:
        response = ErrorResponse(err, {"Retry-After": "5"})
    except DensewireError as err:
        response = ErrorResponse(err)
    m.requests.labels("/v1/tables/{name}", str(response.status_code), fmt).inc()
    m.latency.labels("/v1/tables/{name}").observe(time.perf_counter() - t0)
    return response


# ------------------------------------------------------------------------------------------ /demo
class DemoFiles:
    """The demo page (``python/src/densewire/_server/static/demo/``, built from typescript/demo) at
    ``/demo/``; a 404 saying so when it has not been built."""

    def __init__(self, directory: Path = DEMO_DIR) -> None:
        self.directory = directory
        self._static: StaticFiles | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not (self.directory / "index.html").is_file():
            response = ErrorResponse(NotFoundError(
                f"the demo page is not built: {self.directory} has no index.html (it is built from "
                "typescript/demo into that folder; see typescript/demo)", field="path"))
            await response(scope, receive, send)
            return
        if self._static is None:
            self._static = StaticFiles(directory=str(self.directory), html=True)

        async def send_no_cache(message: Any) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                if not any(k.lower() == b"cache-control" for k, _ in headers):
                    headers.append((b"cache-control", b"no-cache"))
                message = {**message, "headers": headers}
            await send(message)

        await self._static(scope, receive, send_no_cache)
