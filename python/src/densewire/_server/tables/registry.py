"""The served tables (:class:`TableRegistry`): their loads, refreshes and pre-warming.

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
import time
from concurrent.futures import Executor
from email.utils import formatdate
from typing import Any, Callable

from ..logs import log
from ..negotiation import VARY
from .build import compress_body, load_and_encode
from .config import CODINGS, parse_compression
from .lanes import Lane, process_pool
from .snapshot import Snapshot, TableEntry, representation, rfc3339
from .spec import TableSpec

__all__ = ["TableRegistry"]


#: Priorities in the build queue: loads first, then the compressions of a first version, then
#: those of refreshed versions (the old version is served meanwhile).
_PRIO_LOAD, _PRIO_FIRST, _PRIO_REFRESH = 0, 1, 2
_RETRY_FIRST_MAX = 60.0


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
        self._executor_factory = executor_factory or process_pool
        self._lanes: dict[str, Lane] = {}
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
        self._lanes = {kind: Lane(kind, self._executor_factory) for kind in ("load", "compress")}
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
        reps = {(fmt, "identity"): representation(snap, fmt, "identity", None, body)
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
                      entry.spec.describe(), message, entry.snapshot.version, rfc3339(entry.snapshot.loaded_at))
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
                           "rows": snap.rows if snap else None, "refreshed_at": rfc3339(e.last_success),
                           "error": e.error}
        return out

    @property
    def degraded(self) -> bool:
        return any(e.error for e in self.entries.values())
