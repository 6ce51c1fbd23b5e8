"""Tables in ``densewire serve`` (SPEC.md 15.9): ``GET /v1/tables``, ``GET``/``HEAD /v1/tables/{name}``
and the ``/demo`` page.

Every table is kept warm: each version of its data is serialized in the seven formats and each body
compressed with gzip, zstd and br *before* any request asks for it, in two build processes (one
loads and serializes, one compresses at a lower CPU priority), so the event loop never runs that
work. A version lives in one immutable
:class:`Snapshot`; a request reads one reference (``entry.snapshot``) and answers its prepared bytes,
with a strong ETag per representation and content coding (304 on ``If-None-Match``).

Life of a table: the first load is published as soon as its uncompressed bodies exist (a request
asking for gzip meanwhile gets the identity body, which HTTP allows), then each compression is added
as it is built. A refresh (``refresh`` seconds) reloads the source; unchanged data keeps the version
(and the ETags); changed data is fully built, then swapped in at once. A failing refresh keeps the
last good version, and says so in the log, the metrics, ``/health`` and the listing. Before the first
version exists a request waits for it (``--table-load-timeout``), then gets 503 ``unavailable`` with
``Retry-After``: never a 500.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import multiprocessing
import time
from concurrent.futures import Executor, ProcessPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from email.utils import formatdate, parsedate_to_datetime
from pathlib import Path
from typing import Any, Callable, Mapping

from starlette.requests import Request
from starlette.responses import Response
from starlette.staticfiles import StaticFiles
from starlette.types import Receive, Scope, Send

from densewire import DensewireError, NotFoundError, UnavailableError, error_class

from .negotiation import VARY, negotiate_encoding, negotiate_table_format
from .table_sources import TableSpec
from .tables_build import CODINGS, compress_body, load_and_encode, parse_compression, worker_init

__all__ = ["TableRegistry", "TableEntry", "Snapshot", "Representation", "DemoFiles", "list_tables",
           "get_table", "if_none_match_matches", "DEMO_DIR"]

log = logging.getLogger("densewire.server")

DEMO_DIR = Path(__file__).resolve().parent / "static" / "demo"
#: Priorities in the build queue: loads first, then the compressions of a first version, then
#: those of refreshed versions (the old version is served meanwhile).
_PRIO_LOAD, _PRIO_FIRST, _PRIO_REFRESH = 0, 1, 2
_RETRY_FIRST_MAX = 60.0


def _content_type(fmt: str) -> str:
    from densewire import TABLE_MEDIA_TYPES
    from densewire._tables import CSV_MEDIA_TYPE

    return CSV_MEDIA_TYPE if fmt == "csv" else TABLE_MEDIA_TYPES[fmt]


def _rfc3339(ts: float | None) -> str | None:
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass(frozen=True, slots=True)
class Representation:
    """One prepared response: a format in one content coding."""

    body: bytes
    etag: str
    headers: Mapping[str, str]


@dataclass(frozen=True, eq=False)
class Snapshot:
    """One version of a table with its prepared representations; never mutated once published
    (adding a compression makes a new Snapshot)."""

    name: str
    version: str
    rows: int
    columns: tuple[tuple[str, str], ...]
    loaded_at: float  # when this version was first loaded
    reps: Mapping[tuple[str, str], Representation]  # (format, coding); coding "identity" for none
    errors: Mapping[str, tuple[str, str, str | None]]  # formats that cannot hold the data
    base_headers: Mapping[str, str]
    complete: bool = False

    @property
    def last_modified(self) -> str:
        return formatdate(self.loaded_at, usegmt=True)

    def pick(self, fmt: str, coding: str | None) -> Representation:
        """The prepared body for a request: its coding if built (and worth it), else identity."""
        if coding is not None:
            rep = self.reps.get((fmt, coding))
            if rep is not None:
                return rep
        return self.reps[(fmt, "identity")]

    def with_rep(self, fmt: str, coding: str, level: int, body: bytes) -> "Snapshot":
        reps = dict(self.reps)
        reps[(fmt, coding)] = _representation(self, fmt, coding, level, body)
        return Snapshot(self.name, self.version, self.rows, self.columns, self.loaded_at, reps, self.errors,
                        self.base_headers, self.complete)

    def completed(self) -> "Snapshot":
        return Snapshot(self.name, self.version, self.rows, self.columns, self.loaded_at, self.reps, self.errors,
                        self.base_headers, True)

    def sizes(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for (fmt, coding), rep in self.reps.items():
            out.setdefault(fmt, {})[coding] = len(rep.body)
        return out


def _representation(snap: Snapshot, fmt: str, coding: str, level: int | None, body: bytes) -> Representation:
    etag = f'"{snap.version}-{fmt}"' if coding == "identity" else f'"{snap.version}-{fmt}-{coding}{level}"'
    headers = dict(snap.base_headers)
    headers["Content-Type"] = _content_type(fmt)
    headers["ETag"] = etag
    if coding != "identity":
        headers["Content-Encoding"] = coding
    return Representation(body, etag, headers)


@dataclass(eq=False)
class TableEntry:
    """A served table's state; touched by the event loop only."""

    spec: TableSpec
    snapshot: Snapshot | None = None
    settled: asyncio.Event = field(default_factory=asyncio.Event)  # the first load succeeded or failed
    last_success: float | None = None
    error: str | None = None
    error_at: float | None = None
    failures: int = 0
    task: asyncio.Task[None] | None = None

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def status(self) -> str:
        snap = self.snapshot
        if snap is None:
            return "failed" if self.error else "loading"
        if self.error:
            return "stale"  # serving the last good version; the latest refresh failed
        return "ready" if snap.complete else "warming"

    def describe(self) -> dict[str, Any]:
        from densewire import TABLE_FORMATS

        snap = self.snapshot
        doc: dict[str, Any] = {"object": "table", "name": self.name}
        if snap is None:
            doc.update(rows=None, columns=None, version=None, refreshed_at=None, formats=[])
        else:
            doc.update(rows=snap.rows, columns=[{"name": n, "type": t} for n, t in snap.columns],
                       version=snap.version, refreshed_at=_rfc3339(self.last_success),
                       formats=[f for f in TABLE_FORMATS if f not in snap.errors])
        doc.update(status=self.status, source=self.spec.kind, refresh_interval=self.spec.refresh,
                   refresh_error=self.error, refresh_failed_at=_rfc3339(self.error_at))
        if snap is not None:
            doc["last_modified"] = _rfc3339(snap.loaded_at)
            doc["bytes"] = snap.sizes()
        return doc


class TableRegistry:
    """The served tables, their refresh tasks and the build process."""

    def __init__(self, specs: list[TableSpec], *, metrics: Any, compression: str = "best",
                 compress_min_bytes: int = 1024,
                 executor_factory: Callable[[str], Executor] | None = None) -> None:
        self.entries: dict[str, TableEntry] = {}
        self._specs = specs
        self.metrics = metrics
        self.levels = parse_compression(compression)
        self.compress_min_bytes = compress_min_bytes
        self._executor_factory = executor_factory or _process_pool
        self._lanes: dict[str, _Lane] = {}
        self._closed = False

    @property
    def names(self) -> list[str]:
        return list(self.entries)

    def get(self, name: str) -> TableEntry | None:
        return self.entries.get(name)

    # -- life cycle ----------------------------------------------------------------------------
    async def start(self) -> None:
        if not self._specs:
            return
        self._lanes = {kind: _Lane(kind, self._executor_factory) for kind in ("load", "compress")}
        for lane in self._lanes.values():
            lane.start()
        for spec in self._specs:
            entry = TableEntry(spec)
            self.entries[spec.name] = entry
            self.metrics.table_age.labels(spec.name).set(-1)
            self.metrics.table_warm.labels(spec.name).set(0)
            entry.task = asyncio.get_running_loop().create_task(self._run(entry), name=f"densewire-table-{spec.name}")
        log.info("tables: %s (pre-warming 7 formats x %s in build processes)",
                 ", ".join(f"{s.name} <- {s.describe()}" for s in self._specs),
                 ", ".join(["identity", *(f"{c} {self.levels[c]}" for c in CODINGS if c in self.levels)]))

    async def stop(self) -> None:
        self._closed = True
        tasks = [e.task for e in self.entries.values() if e.task is not None]
        for t in tasks:
            t.cancel()
        for t in tasks:
            try:
                await t
            except (asyncio.CancelledError, Exception):  # noqa: BLE001
                pass
        for lane in self._lanes.values():
            await lane.stop()

    def _submit(self, lane: str, prio: int, fn: Callable[..., Any], *args: Any) -> "asyncio.Future[Any]":
        return self._lanes[lane].submit(prio, fn, *args)

    # -- loading and refreshing ----------------------------------------------------------------
    async def _run(self, entry: TableEntry) -> None:
        backoff = 1.0
        while not self._closed:
            ok = await self._refresh(entry)
            refresh = entry.spec.refresh
            if ok:
                backoff = 1.0
                if not refresh:
                    return
                delay = refresh
            elif entry.snapshot is None:  # never loaded: retry with back-off (capped by the refresh interval)
                delay = min(backoff, refresh) if refresh else backoff
                backoff = min(backoff * 2, _RETRY_FIRST_MAX)
            elif refresh:
                delay = refresh
            else:
                return
            await asyncio.sleep(delay)

    async def _refresh(self, entry: TableEntry) -> bool:
        m, name = self.metrics, entry.name
        known = entry.snapshot.version if entry.snapshot is not None else None
        try:
            res = await self._submit("load", _PRIO_LOAD, load_and_encode, entry.spec, known)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001
            res = {"error": f"the build process failed: {type(exc).__name__}: {exc}"}
        if res.get("load_seconds"):
            m.table_load_seconds.labels(name).inc(res["load_seconds"])
        if "error" in res:
            self._failed(entry, res["error"], res.get("traceback"))
            return False
        now = time.time()
        if res.get("unchanged"):
            m.table_loads.labels(name, "unchanged").inc()
            self._succeeded(entry, now)
            return True
        m.table_loads.labels(name, "changed").inc()
        for fmt, seconds in res["encode_seconds"].items():
            m.table_serializations.labels(name, fmt).inc()
            m.table_serialization_seconds.labels(name, fmt).inc(seconds)
        for fmt, (cat, msg, _) in res["errors"].items():
            log.warning("table %s: cannot be served as %s: %s: %s", name, fmt, cat, msg)
        snap = self._identity_snapshot(entry.spec, res, now)
        first = entry.snapshot is None
        if first:
            entry.snapshot = snap
            self._publish_metrics(entry)
        self._succeeded(entry, now)
        log.info("table %s: version %s, %d rows, loaded in %.2f s, serialized in %.2f s%s", name, snap.version,
                 snap.rows, res["load_seconds"], sum(res["encode_seconds"].values()),
                 "" if first else " (serving the previous version until every compression is built)")
        bodies: dict[str, bytes] = res["bodies"]
        jobs = [(fmt, coding) for coding in CODINGS if coding in self.levels
                for fmt in sorted(bodies, key=lambda f: len(bodies[f]))
                if len(bodies[fmt]) >= self.compress_min_bytes]
        prio = _PRIO_FIRST if first else _PRIO_REFRESH
        futures = [self._submit("compress", prio, compress_body, bodies[fmt], coding, self.levels[coding])
                   for fmt, coding in jobs]
        for (fmt, coding), fut in zip(jobs, futures):
            try:
                out, seconds = await fut
            except asyncio.CancelledError:
                for f in futures:
                    f.cancel()
                raise
            except Exception as exc:  # noqa: BLE001 - serve identity for this one; say so
                log.error("table %s: %s compression of %s failed: %s", name, coding, fmt, exc)
                continue
            m.table_compressions.labels(name, fmt, coding).inc()
            m.table_compression_seconds.labels(name, fmt, coding).inc(seconds)
            snap = snap.with_rep(fmt, coding, self.levels[coding], out)
            if first and entry.snapshot is not None and entry.snapshot.version == snap.version:
                entry.snapshot = snap  # a first version gets each compression as soon as it exists
        entry.snapshot = snap.completed()  # one reference swap: requests see the old or the new version
        self._publish_metrics(entry)
        log.info("table %s: version %s warm (%d representations)", name, snap.version, len(snap.reps))
        return True

    def _identity_snapshot(self, spec: TableSpec, res: dict[str, Any], now: float) -> Snapshot:
        base = dict(res["headers"])
        base["Cache-Control"] = spec.cache_control
        base["Vary"] = VARY
        base["Last-Modified"] = formatdate(now, usegmt=True)
        snap = Snapshot(spec.name, res["version"], res["rows"], tuple(map(tuple, res["columns"])), now, {},
                        dict(res["errors"]), base)
        reps = {(fmt, "identity"): _representation(snap, fmt, "identity", None, body)
                for fmt, body in res["bodies"].items()}
        return Snapshot(snap.name, snap.version, snap.rows, snap.columns, now, reps, snap.errors, base)

    def _succeeded(self, entry: TableEntry, now: float) -> None:
        if entry.error:
            log.warning("table %s: loads again (after %d failure(s))", entry.name, entry.failures)
        entry.last_success = now
        entry.error = None
        entry.error_at = None
        self.metrics.table_last_success.labels(entry.name).set(now)
        entry.settled.set()

    def _failed(self, entry: TableEntry, message: str, tb: str | None = None) -> None:
        entry.failures += 1
        entry.error = message
        entry.error_at = time.time()
        self.metrics.table_refresh_failures.labels(entry.name).inc()
        self.metrics.table_loads.labels(entry.name, "failed").inc()
        if entry.snapshot is None:
            log.error("table %s: load from %s failed: %s", entry.name, entry.spec.describe(), message)
        else:
            log.error("table %s: refresh from %s failed: %s; still serving version %s loaded at %s", entry.name,
                      entry.spec.describe(), message, entry.snapshot.version, _rfc3339(entry.snapshot.loaded_at))
        if tb:
            log.debug("table %s: %s", entry.name, tb)
        entry.settled.set()

    def _publish_metrics(self, entry: TableEntry) -> None:
        snap = entry.snapshot
        if snap is None:
            return
        m = self.metrics
        m.table_rows.labels(entry.name).set(snap.rows)
        m.table_warm.labels(entry.name).set(1 if snap.complete else 0)
        for (fmt, coding), rep in snap.reps.items():
            m.table_representation_bytes.labels(entry.name, fmt, coding).set(len(rep.body))

    def update_gauges(self) -> None:
        now = time.time()
        for e in self.entries.values():
            self.metrics.table_age.labels(e.name).set(now - e.last_success if e.last_success else -1)

    async def wait_first(self, entry: TableEntry, timeout: float) -> Snapshot | None:
        """The entry's snapshot, waiting at most ``timeout`` for its first load."""
        if entry.snapshot is None and not entry.settled.is_set():
            try:
                await asyncio.wait_for(entry.settled.wait(), timeout)
            except asyncio.TimeoutError:
                pass
        return entry.snapshot

    async def wait_all(self, timeout: float) -> None:
        waits = [asyncio.ensure_future(e.settled.wait()) for e in self.entries.values() if not e.settled.is_set()]
        if waits:
            _, pending = await asyncio.wait(waits, timeout=timeout)
            for t in pending:
                t.cancel()

    def health(self) -> dict[str, Any]:
        out = {}
        for e in self.entries.values():
            snap = e.snapshot
            out[e.name] = {"status": e.status, "version": snap.version if snap else None,
                           "rows": snap.rows if snap else None, "refreshed_at": _rfc3339(e.last_success),
                           "error": e.error}
        return out

    @property
    def degraded(self) -> bool:
        return any(e.error for e in self.entries.values())


#: (priority, sequence, function, arguments, future of its result)
_Job = tuple[int, int, Callable[..., Any], tuple[Any, ...], "asyncio.Future[Any]"]


class _Lane:
    """A priority queue of build jobs feeding one build process. Two lanes: ``load`` (reading sources
    and serializing: a request may be waiting for it) and ``compress`` (the slow high-level
    compressions: the identity body is served meanwhile), each its own process and CPU priority."""

    def __init__(self, kind: str, factory: Callable[[str], Executor]) -> None:
        self.kind = kind
        self._factory = factory
        self._executor: Executor | None = None
        self._queue: asyncio.PriorityQueue[_Job] = asyncio.PriorityQueue()
        self._seq = itertools.count()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._consume(), name=f"densewire-table-{self.kind}")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):  # noqa: BLE001
                pass
        _shutdown(self._executor)
        self._executor = None

    def submit(self, prio: int, fn: Callable[..., Any], *args: Any) -> "asyncio.Future[Any]":
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._queue.put_nowait((prio, next(self._seq), fn, args, fut))
        return fut

    async def _consume(self) -> None:
        from concurrent.futures.process import BrokenProcessPool

        loop = asyncio.get_running_loop()
        while True:
            _, _, fn, args, fut = await self._queue.get()
            if fut.done():
                continue
            try:
                if self._executor is None:
                    self._executor = self._factory(self.kind)
                result = await loop.run_in_executor(self._executor, fn, *args)
            except asyncio.CancelledError:
                fut.cancel()
                raise
            except Exception as exc:  # noqa: BLE001 - e.g. the build process died (OOM killer)
                if isinstance(exc, BrokenProcessPool):
                    log.error("the table %s process died (%s); starting a new one", self.kind, exc)
                    _shutdown(self._executor)
                    self._executor = None
                if not fut.done():
                    fut.set_exception(exc)
                continue
            if not fut.done():
                fut.set_result(result)


#: CPU priority (nice) of the build processes: loads above compressions, both below the server.
_NICE = {"load": 5, "compress": 10}


def _process_pool(kind: str) -> Executor:
    return ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"),
                               initializer=worker_init, initargs=(_NICE[kind],))


def _shutdown(executor: Executor | None) -> None:
    """Stop the build process now: a br-11 compression in progress is not waited for."""
    if executor is None:
        return
    procs = list((getattr(executor, "_processes", None) or {}).values())
    executor.shutdown(wait=False, cancel_futures=True)
    for p in procs:
        try:
            if p.is_alive():
                p.terminate()
        except (OSError, ValueError, AttributeError):
            pass
    for p in procs:
        try:
            p.join(2)
        except (OSError, ValueError, AttributeError, AssertionError):
            pass


# ------------------------------------------------------------------------------------------ HTTP
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
    from .responses import ErrorResponse

    st = _state(request)
    try:
        st.check_auth(request, public=st.cfg.public_tables)
        reg: TableRegistry = st.tables
        await reg.wait_all(st.cfg.table_load_timeout)
        import orjson

        response = Response(orjson.dumps({"object": "list", "data": [e.describe() for e in reg.entries.values()]}),
                            200, {"Cache-Control": "no-cache"}, media_type="application/json")
    except DensewireError as err:
        response = ErrorResponse(err)
    st.metrics.requests.labels("/v1/tables", str(response.status_code), "json").inc()
    return response


async def get_table(request: Request) -> Response:
    from .responses import ErrorResponse

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
        from .responses import ErrorResponse

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
