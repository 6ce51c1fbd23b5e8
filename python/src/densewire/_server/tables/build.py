"""The CPU work of serving tables: load a source, serialize it in every format, compress each body.

These functions run in the build process of ``densewire serve`` (a ``ProcessPoolExecutor`` worker,
at a lower CPU priority), never on the event loop, so a request is not delayed by a pre-warm. They
take and return plain picklable values (no exceptions cross the process boundary: failures come
back as messages).
"""

from __future__ import annotations

import gzip
import hashlib
import os
import signal
import time
import traceback
from typing import Any

import brotli
import numpy as np
import zstandard

import densewire
from densewire import TABLE_FORMATS, DensewireError, encode_table, table_headers

from .sources import load_table
from .spec import TableLoadError

__all__ = ["worker_init", "load_and_encode", "compress_body", "table_version"]


def worker_init(nice: int) -> None:
    """Build-process set-up: a lower CPU priority than the server, and Ctrl-C left to the parent."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if nice:
        try:
            os.nice(nice)
        except OSError:
            pass


def table_version(table: Any) -> str:
    """An opaque version that changes when the data (names, types, values) or densewire's
    serializers (its version) change: 20 hex digits of BLAKE2b."""
    h = hashlib.blake2b(digest_size=10)
    h.update(f"densewire {densewire.__version__}\0{table.name}\0{table.rows}\0".encode())
    for c in table.columns:
        h.update(f"{c.name}\0{c.type}\0".encode())
        if c.type == "string":
            encoded = [s.encode("utf-8", "surrogatepass") for s in c.values]
            h.update(np.fromiter(map(len, encoded), dtype="<i8", count=len(encoded)).tobytes())
            h.update(b"".join(encoded))
        else:
            h.update(np.ascontiguousarray(c.values).tobytes())
    return h.hexdigest()


def load_and_encode(spec: Any, known_version: str | None) -> dict[str, Any]:
    """Load ``spec``'s source and serialize it in every table format.

    Returns ``{"error": message}`` when the load fails; ``{"unchanged": True, "version", ...}`` when
    the data has ``known_version``; else the version, schema, section 15.2 headers, the bodies by
    format, the seconds each serialization took, and the formats that cannot hold the data (JSON
    with NaN: ``{"format": (category, message, field)}``).
    """
    t0 = time.perf_counter()
    try:
        table = load_table(spec)
    except TableLoadError as exc:
        return {"error": str(exc), "load_seconds": time.perf_counter() - t0}
    except DensewireError as exc:
        return {"error": exc.message if exc.field is None else f"{exc.field}: {exc.message}",
                "load_seconds": time.perf_counter() - t0}
    except Exception as exc:  # noqa: BLE001 - report, never crash the build process
        return {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc(),
                "load_seconds": time.perf_counter() - t0}
    load_seconds = time.perf_counter() - t0
    version = table_version(table)
    if version == known_version:
        return {"unchanged": True, "version": version, "load_seconds": load_seconds}
    bodies: dict[str, bytes] = {}
    seconds: dict[str, float] = {}
    errors: dict[str, tuple[str, str, str | None]] = {}
    for fmt in TABLE_FORMATS:
        t = time.perf_counter()
        try:
            body = encode_table(table, fmt)
            bodies[fmt] = body if isinstance(body, bytes) else bytes(body)
        except DensewireError as exc:
            errors[fmt] = (exc.category, exc.message, exc.field)
        seconds[fmt] = time.perf_counter() - t
    return {"version": version, "rows": table.rows, "columns": table.schema, "headers": table_headers(table),
            "bodies": bodies, "encode_seconds": seconds, "errors": errors, "load_seconds": load_seconds}


def compress_body(body: bytes, coding: str, level: int) -> tuple[bytes, float]:
    """``body`` compressed with ``coding`` at ``level`` (deterministic: gzip without a timestamp),
    and the seconds it took."""
    t = time.perf_counter()
    if coding == "gzip":
        out = gzip.compress(body, compresslevel=level, mtime=0)
    elif coding == "zstd":
        out = zstandard.ZstdCompressor(level=level).compress(body)
    elif coding == "br":
        out = brotli.compress(body, quality=level)
    else:
        raise ValueError(f"unknown content coding {coding!r}")
    return out, time.perf_counter() - t
