"""One version of a served table and its prepared responses (:class:`Snapshot`, :class:`Representation`),
and a table's state in the registry (:class:`TableEntry`)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import datetime, timezone
from email.utils import formatdate
from typing import Any, Mapping

from densewire import TABLE_FORMATS, TABLE_MEDIA_TYPES
from densewire._tables import CSV_MEDIA_TYPE

from .spec import TableSpec

__all__ = ["Representation", "Snapshot", "TableEntry", "representation", "rfc3339"]


def _content_type(fmt: str) -> str:
    return CSV_MEDIA_TYPE if fmt == "csv" else TABLE_MEDIA_TYPES[fmt]


def rfc3339(ts: float | None) -> str | None:
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
        reps[(fmt, coding)] = representation(self, fmt, coding, level, body)
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


def representation(snap: Snapshot, fmt: str, coding: str, level: int | None, body: bytes) -> Representation:
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
        snap = self.snapshot
        doc: dict[str, Any] = {"object": "table", "name": self.name}
        if snap is None:
            doc.update(rows=None, columns=None, version=None, refreshed_at=None, formats=[])
        else:
            doc.update(rows=snap.rows, columns=[{"name": n, "type": t} for n, t in snap.columns],
                       version=snap.version, refreshed_at=rfc3339(self.last_success),
                       formats=[f for f in TABLE_FORMATS if f not in snap.errors])
        doc.update(status=self.status, source=self.spec.kind, refresh_interval=self.spec.refresh,
                   refresh_error=self.error, refresh_failed_at=rfc3339(self.error_at))
        if snap is not None:
            doc["last_modified"] = rfc3339(snap.loaded_at)
            doc["bytes"] = snap.sizes()
        return doc
