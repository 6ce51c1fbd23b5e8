"""Where the tables of ``densewire serve`` come from, and how a source becomes a ``densewire.Table``.

A table is configured on the command line (``--table NAME=SOURCE``, repeatable) or in a TOML file
(``--tables-config FILE``). ``SOURCE`` is one of:

* a file: ``.csv``, ``.jsonl`` / ``.ndjson`` (JSON Lines), ``.parquet``, ``.arrow`` / ``.arrows`` /
  ``.feather`` / ``.ipc`` (Arrow IPC file or stream); read with pyarrow;
* ``sqlite:PATH`` (also a path ending in ``.db``, ``.sqlite``, ``.sqlite3``): an SQLite database,
  read-only;
* ``postgresql://...`` (or ``postgres://``): a PostgreSQL server, through psycopg 3;
* ``demo:`` (options ``rows=N,coordinates=float32,seed=S``): ``densewire.demo_table()``.

For a database the query is ``SELECT * FROM "NAME"`` unless one is given: after the URL and a
space on the command line (``--table 'cities=sqlite:geo.db SELECT name, lon, lat FROM cities'``),
or as ``query`` in the TOML file.

Column types (SPEC.md 15.1) follow the source's: SQLite and PostgreSQL ``int2``/``int4`` give
``int32``, ``int8`` and SQLite integers ``int64``, PostgreSQL ``real`` ``float32``, ``double
precision`` and SQLite ``REAL`` ``float64`` (SQLite's REAL is a double), ``boolean`` (SQLite: a
column declared ``BOOLEAN``) ``bool``, text ``string``, ``uuid`` (SQLite: declared ``UUID``, text or
16-byte blob) ``uuid``, pgvector ``vector(d)`` and ``float4[]`` / ``float8[]`` arrays of one length
``float32[d]``; files keep their Arrow types, with two inferences for CSV and JSON Lines (which
have no such types): a text column whose every value is a UUID is ``uuid``, and a column of number
arrays of one length is ``float32[d]``. A type in the configuration overrides the inferred one
(``longitude = "float32"``: the float32 opt-in of SPEC.md 15.1, rounded as section 3.3 says).

A NULL (or a missing JSON key, or an empty CSV number) makes the load fail, naming the column and
the row: version 1.1 tables have no nulls.

This module needs numpy and densewire only; pyarrow and psycopg are imported by the loaders that
use them.
"""

from __future__ import annotations

import math
import os
import re
import tomllib
import uuid as uuidlib
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any, Sequence
from urllib.parse import quote, urlsplit, urlunsplit

import numpy as np

__all__ = [
    "TableSpec",
    "TableLoadError",
    "parse_table_arg",
    "parse_source",
    "load_tables_config",
    "table_specs",
    "demo_specs",
    "load_table",
    "DEMO_TABLE_NAMES",
]

#: A table name: it is a URL path segment and a header value, so ASCII letters, digits, ``_ . -``.
NAME_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]{0,127}")
DEMO_TABLE_NAMES = ("points", "points_f32")
_FILE_KINDS = {
    ".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".parquet": "parquet", ".pq": "parquet",
    ".arrow": "arrow", ".arrows": "arrow", ".feather": "arrow", ".ipc": "arrow",
    ".db": "sqlite", ".sqlite": "sqlite", ".sqlite3": "sqlite",
}
_SCALAR_TYPES = ("bool", "int32", "int64", "float32", "float64", "string", "uuid")
_VECTOR_RE = re.compile(r"float32\[([1-9][0-9]*)\]")
_TABLE_KEYS = {"source", "query", "refresh", "cache_control", "columns"}
_TOP_KEYS = {"tables", "demo_tables", "refresh", "cache_control"}


class TableLoadError(Exception):
    """A source could not be turned into a table (missing file, failing query, NULL, bad type)."""


@dataclass(frozen=True)
class TableSpec:
    """One served table: where its rows come from and how it is served. Picklable (it travels to the
    build process)."""

    name: str
    kind: str  # csv, jsonl, parquet, arrow, sqlite, postgresql, demo
    location: str  # absolute file path, database URL, or demo options
    query: str | None = None
    columns: tuple[tuple[str, str], ...] = ()  # type overrides: (column, type)
    refresh: float = 0.0  # seconds between reloads; 0 = load once
    cache_control: str = "no-cache"
    origin: str = "--table"

    @property
    def safe_location(self) -> str:
        """The location without a password, for logs, /health and the listing."""
        if self.kind != "postgresql":
            return self.location
        parts = urlsplit(self.location)
        if parts.password:
            netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
            return urlunsplit(parts._replace(netloc=netloc))
        return self.location

    def describe(self) -> str:
        where = f"{self.kind}:{self.safe_location}" if self.kind in ("sqlite", "demo") else self.safe_location
        return where + (f" ({self.query})" if self.query else "")


# ---------------------------------------------------------------------------------------- config
def _check_type(name: str, type_: Any, where: str) -> str:
    if not isinstance(type_, str) or not (type_ in _SCALAR_TYPES or _VECTOR_RE.fullmatch(type_)):
        raise ValueError(f"{where}: column {name!r}: unknown type {type_!r}; use one of "
                         f"{', '.join(_SCALAR_TYPES)} or float32[d]")
    return type_


def _check_name(name: str, where: str) -> str:
    if not isinstance(name, str) or not NAME_RE.fullmatch(name):
        raise ValueError(f"{where}: table name {name!r} must be 1 to 128 ASCII letters, digits, '_', '.' "
                         "or '-' (it is a URL path segment), not starting with '.' or '-'")
    return name


def _resolve_path(path: str, base_dir: Path | None, where: str) -> str:
    p = Path(path).expanduser()
    if not p.is_absolute():
        p = (base_dir or Path.cwd()) / p
    if not p.is_file():
        raise ValueError(f"{where}: {p} does not exist or is not a file")
    return str(p.resolve())


def _parse_demo_options(text: str, where: str) -> str:
    opts: dict[str, str] = {}
    for item in filter(None, (s.strip() for s in text.split(","))):
        key, eq, value = item.partition("=")
        if not eq or key not in ("rows", "coordinates", "seed"):
            raise ValueError(f"{where}: demo option {item!r}: use rows=N, coordinates=float64|float32, seed=S")
        if key in ("rows", "seed"):
            try:
                if int(value) < 0:
                    raise ValueError
            except ValueError:
                raise ValueError(f"{where}: demo option {key} must be a non-negative integer, not {value!r}") from None
        elif value not in ("float64", "float32"):
            raise ValueError(f"{where}: demo coordinates must be float64 or float32, not {value!r}")
        opts[key] = value
    return ",".join(f"{k}={v}" for k, v in opts.items())


def parse_source(source: str, *, query: str | None = None, base_dir: Path | None = None,
                 where: str = "--table", allow_inline_query: bool = True) -> tuple[str, str, str | None]:
    """``(kind, location, query)`` of a SOURCE string; ValueError naming ``where`` when it is bad."""
    s = source.strip()
    if not s:
        raise ValueError(f"{where}: empty source")
    low = s.lower()
    if low.startswith("demo:"):
        if query:
            raise ValueError(f"{where}: a demo source takes no query")
        return "demo", _parse_demo_options(s[5:], where), None
    if low.startswith(("postgresql://", "postgres://")):
        url, inline = s, None
        if allow_inline_query and " " in s:
            url, inline = s.split(None, 1)
        if inline and query:
            raise ValueError(f"{where}: a query both after the URL and as 'query'")
        return "postgresql", url, (inline or query or None)
    if low.startswith("sqlite:"):
        rest = s[7:]
        inline = None
        if allow_inline_query and " " in rest.strip():
            rest, inline = rest.strip().split(None, 1)
        if inline and query:
            raise ValueError(f"{where}: a query both after the path and as 'query'")
        if rest.startswith("///"):
            rest = rest[2:]
        elif rest.startswith("//"):
            rest = rest[2:]
        return "sqlite", _resolve_path(rest, base_dir, where), (inline or query or None)
    kind = _FILE_KINDS.get(Path(s).suffix.lower())
    if kind is None:
        raise ValueError(
            f"{where}: cannot tell the kind of source {s!r}: use a file ending in "
            f"{', '.join(sorted(_FILE_KINDS))}, sqlite:PATH, postgresql://... or demo:")
    if kind == "sqlite":
        return "sqlite", _resolve_path(s, base_dir, where), (query or None)
    if query:
        raise ValueError(f"{where}: a {kind} file takes no query")
    return kind, _resolve_path(s, base_dir, where), None


def _check_refresh(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{where}: refresh must be a non-negative number of seconds, not {value!r}")
    return float(value)


def parse_table_arg(text: str, *, refresh: float = 0.0, cache_control: str = "no-cache") -> TableSpec:
    """A ``--table NAME=SOURCE`` argument."""
    name, eq, source = text.partition("=")
    where = f"--table {text[:200]!r}"
    if not eq:
        raise ValueError(f"{where}: use NAME=SOURCE, e.g. points=data/points.parquet")
    name = _check_name(name.strip(), where)
    kind, location, query = parse_source(source, where=where)
    if kind in ("sqlite", "postgresql") and not query:
        query = f'SELECT * FROM "{name}"'
    return TableSpec(name, kind, location, query, (), refresh, cache_control, origin="--table")


def load_tables_config(path: str | os.PathLike[str], *, refresh: float = 0.0,
                       cache_control: str = "no-cache") -> tuple[list[TableSpec], bool | None]:
    """The tables of a TOML file, and its ``demo_tables`` setting (None when absent).

    ::

        demo_tables = false          # optional (default: the demo tables are served)
        refresh = 300                # optional default for the tables below (seconds; 0 = never)
        cache_control = "no-cache"   # optional default

        [tables.cities]
        source = "cities.parquet"    # relative paths are relative to this file
        refresh = 0
        cache_control = "public, max-age=300"
        columns = { longitude = "float32", latitude = "float32" }

        [tables.places]
        source = "postgresql://app@db.internal/geo"
        query = "SELECT id, status, lon AS longitude, lat AS latitude FROM places"
        refresh = 60
    """
    p = Path(path).expanduser()
    where = f"--tables-config {p}"
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ValueError(f"{where}: cannot read it: {exc.strerror or exc}") from None
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{where}: not valid TOML: {exc}") from None
    unknown = set(doc) - _TOP_KEYS
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}; "
                         f"the top level takes {', '.join(sorted(_TOP_KEYS))}")
    demo = doc.get("demo_tables")
    if demo is not None and not isinstance(demo, bool):
        raise ValueError(f"{where}: demo_tables must be true or false, not {demo!r}")
    if "refresh" in doc:
        refresh = _check_refresh(doc["refresh"], f"{where}: refresh")
    if "cache_control" in doc:
        cache_control = _check_cache_control(doc["cache_control"], f"{where}: cache_control")
    tables = doc.get("tables", {})
    if not isinstance(tables, dict):
        raise ValueError(f"{where}: 'tables' must be a table of tables ([tables.NAME])")
    specs: list[TableSpec] = []
    for name, t in tables.items():
        w = f"{where} [tables.{name}]"
        _check_name(name, w)
        if not isinstance(t, dict):
            raise ValueError(f"{w}: must be a table with at least 'source'")
        unknown = set(t) - _TABLE_KEYS
        if unknown:
            raise ValueError(f"{w}: unknown key(s) {', '.join(sorted(unknown))}; a table takes "
                             f"{', '.join(sorted(_TABLE_KEYS))}")
        if not isinstance(t.get("source"), str):
            raise ValueError(f"{w}: 'source' (a string) is required")
        q = t.get("query")
        if q is not None and (not isinstance(q, str) or not q.strip()):
            raise ValueError(f"{w}: 'query' must be a non-empty string")
        kind, location, query = parse_source(t["source"], query=q, base_dir=p.parent, where=w,
                                             allow_inline_query=False)
        if kind in ("sqlite", "postgresql") and not query:
            query = f'SELECT * FROM "{name}"'
        cols = t.get("columns", {})
        if not isinstance(cols, dict):
            raise ValueError(f"{w}: 'columns' must map column names to types, e.g. {{ longitude = \"float32\" }}")
        overrides = tuple((c, _check_type(c, ty, w)) for c, ty in cols.items())
        specs.append(TableSpec(
            name, kind, location, query, overrides,
            _check_refresh(t["refresh"], f"{w}: refresh") if "refresh" in t else refresh,
            _check_cache_control(t["cache_control"], f"{w}: cache_control") if "cache_control" in t else cache_control,
            origin=w))
    return specs, demo


def _check_cache_control(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.strip() or any(c in value for c in "\r\n") or not value.isascii():
        raise ValueError(f"{where}: must be a non-empty one-line ASCII Cache-Control value, not {value!r}")
    return value.strip()


def demo_specs(cache_control: str = "no-cache") -> list[TableSpec]:
    """The demo tables: ``points`` (float64 coordinates) and ``points_f32`` (float32 ones)."""
    return [TableSpec("points", "demo", "coordinates=float64", cache_control=cache_control, origin="demo table"),
            TableSpec("points_f32", "demo", "coordinates=float32", cache_control=cache_control,
                      origin="demo table")]


def table_specs(cfg: Any) -> list[TableSpec]:
    """Every table a ``ServerConfig`` serves, in order: the demo tables (unless turned off or
    replaced by a table of the same name), then ``--table`` ones, then the config file's.
    Raises ValueError naming the flag or file when something is wrong."""
    refresh = float(getattr(cfg, "table_refresh", 0.0))
    cache_control = _check_cache_control(getattr(cfg, "table_cache_control", "no-cache"), "--table-cache-control")
    specs = [parse_table_arg(t, refresh=refresh, cache_control=cache_control) for t in cfg.table]
    demo = bool(cfg.demo_tables)
    if cfg.tables_config:
        file_specs, file_demo = load_tables_config(cfg.tables_config, refresh=refresh, cache_control=cache_control)
        specs += file_specs
        if file_demo is not None:
            demo = demo and file_demo
    seen: dict[str, str] = {}
    for s in specs:
        if s.name in seen:
            raise ValueError(f"table {s.name!r} is configured twice: by {seen[s.name]} and by {s.origin}")
        seen[s.name] = s.origin
    if demo:
        specs = [d for d in demo_specs(cache_control) if d.name not in seen] + specs
    for s in specs:
        if s.kind == "postgresql":
            _require("psycopg", "PostgreSQL tables need psycopg 3: pip install 'densewire[serve]' "
                     "(or pip install 'psycopg[binary]')", s.origin)
        elif s.kind in ("csv", "jsonl", "parquet", "arrow"):
            _require("pyarrow", f"{s.kind} tables need pyarrow: pip install 'densewire[arrow]'", s.origin)
    return specs


def _require(module: str, message: str, where: str) -> None:
    import importlib.util

    if importlib.util.find_spec(module) is None:
        raise ValueError(f"{where}: {message}")


# ---------------------------------------------------------------------------------------- loading
def _null(name: str, row: int) -> TableLoadError:
    return TableLoadError(f"column {name!r} is NULL at row {row} (counting from 0): tables have no "
                          "nulls (SPEC.md 15); filter or COALESCE them in the source")


def _kind_name(v: Any) -> str:
    return type(v).__name__


def _parse_vectors_text(name: str, values: Sequence[str]) -> np.ndarray:
    """pgvector's text form ``[1,2,3]`` (also JSON arrays) -> (n, d) float64."""
    import orjson

    try:
        rows = orjson.loads(("[" + ",".join(v.strip() for v in values) + "]").encode())
    except orjson.JSONDecodeError:
        for i, v in enumerate(values):
            try:
                orjson.loads(v)
            except orjson.JSONDecodeError:
                raise TableLoadError(f"column {name!r} row {i}: {v[:60]!r} is not a vector like [1,2,3]") from None
        raise TableLoadError(f"column {name!r}: not vectors like [1,2,3]") from None
    return _vectors(name, rows)


def _vectors(name: str, rows: Sequence[Any]) -> np.ndarray:
    """A list of equal-length number lists -> (n, d) float64 (or float32 when given float32 arrays)."""
    if not rows:
        raise TableLoadError(f"column {name!r}: an empty table has no vector length; declare its type "
                             "(float32[d]) in the configuration")
    lengths = {len(r) if isinstance(r, (list, tuple, np.ndarray)) else -1 for r in rows}
    if -1 in lengths:
        i = next(i for i, r in enumerate(rows) if not isinstance(r, (list, tuple, np.ndarray)))
        raise TableLoadError(f"column {name!r} row {i}: {_kind_name(rows[i])} is not a vector")
    if len(lengths) != 1 or 0 in lengths:
        d0 = len(rows[0])
        i = next((i for i, r in enumerate(rows) if len(r) != d0), 0)
        raise TableLoadError(f"column {name!r} row {i}: a vector of {len(rows[i])} items where row 0 has "
                             f"{d0}; a float32[d] column needs one length d >= 1")
    try:
        return np.array(rows, dtype=np.float64)
    except (TypeError, ValueError):
        for i, r in enumerate(rows):
            if any(x is None for x in r):
                raise TableLoadError(f"column {name!r} row {i}: a NULL item inside the vector") from None
            try:
                np.array(r, dtype=np.float64)
            except (TypeError, ValueError):
                raise TableLoadError(f"column {name!r} row {i}: vector items must be numbers") from None
        raise


class _Natural:
    """A source column before the configured type is applied: a densewire type or a source-only
    kind (``binary``, ``decimal``, ``text-vector``) that needs a declared type."""

    __slots__ = ("name", "type", "values")

    def __init__(self, name: str, type_: str, values: Any) -> None:
        self.name, self.type, self.values = name, type_, values


def _from_python(name: str, values: Sequence[Any]) -> _Natural:
    """Infer a column from Python values (SQLite rows)."""
    n = len(values)
    for i, v in enumerate(values):
        if v is None:
            raise _null(name, i)
    kinds = {type(v) for v in values}
    if not kinds:  # no rows: no values to infer from; a declared type still applies
        return _Natural(name, "string", [])
    if kinds <= {bool}:
        return _Natural(name, "bool", np.array(values, dtype=np.bool_))
    if kinds <= {int}:
        try:
            arr = np.array(values, dtype=np.int64)
        except OverflowError:
            i = next(i for i, v in enumerate(values) if not -(1 << 63) <= v < (1 << 63))
            raise TableLoadError(f"column {name!r} row {i}: {values[i]} is beyond int64") from None
        return _Natural(name, "int64", arr)
    if kinds <= {int, float}:
        return _Natural(name, "float64", np.array(values, dtype=np.float64))
    if kinds <= {str}:
        return _Natural(name, "string", list(values))
    if kinds <= {uuidlib.UUID}:
        return _Natural(name, "uuid", np.frombuffer(b"".join(v.bytes for v in values), np.uint8).reshape(n, 16))
    if kinds <= {bytes, bytearray, memoryview}:
        return _Natural(name, "binary", [bytes(v) for v in values])
    if kinds <= {Decimal, int}:
        return _Natural(name, "decimal", values)
    if kinds <= {list, tuple}:
        return _Natural(name, "vector", _vectors(name, values))
    if len(kinds) > 1:
        first = type(values[0])
        i = next(i for i, v in enumerate(values) if type(v) is not first)
        raise TableLoadError(f"column {name!r} mixes {first.__name__} (row 0) and {_kind_name(values[i])} "
                             f"(row {i}); cast it to one type in the query")
    raise TableLoadError(f"column {name!r}: values of type {_kind_name(values[0])} are not supported; cast "
                         "the column in the query (to a number, boolean, text or uuid)")


def _uuid_from_strings(name: str, values: Sequence[str]) -> np.ndarray:
    from densewire._tables._model import parse_uuid_text

    arr, bad = parse_uuid_text(values)
    if arr is None:
        raise TableLoadError(f"column {name!r} row {bad}: {str(values[bad])[:60]!r} is not a UUID")
    return arr


def _apply(nat: _Natural, target: str | None) -> "Any":
    """The ``densewire.Column`` of a natural column, converted to ``target`` when one is declared."""
    from densewire import Column
    from densewire._tables._model import to_float32

    name, typ, values = nat.name, nat.type, nat.values
    if target is None or target == typ:
        if typ == "vector":
            arr = np.asarray(values)
            target = f"float32[{arr.shape[1]}]"
            return Column(name, target, arr if arr.dtype == np.float32 else to_float32(arr))
        if typ in ("binary", "decimal"):
            hint = ("uuid (16-byte values) or float32[d] (4*d-byte little-endian values)" if typ == "binary"
                    else "float64 or float32")
            raise TableLoadError(f"column {name!r} holds {typ} values: declare its type in the configuration "
                                 f"({hint}), or cast it in the query")
        return Column(name, typ, values)
    d_target = _VECTOR_RE.fullmatch(target)
    try:
        if d_target:
            d = int(d_target.group(1))
            if typ == "vector":
                arr = np.asarray(values)
            elif typ == "string":
                arr = _parse_vectors_text(name, values)
            elif typ == "binary":
                bad = next((i for i, b in enumerate(values) if len(b) != 4 * d), None)
                if bad is not None:
                    raise TableLoadError(f"column {name!r} row {bad}: {len(values[bad])} bytes, not {4 * d} "
                                         f"(float32[{d}])")
                arr = np.frombuffer(b"".join(values), "<f4").reshape(len(values), d)
            elif typ.startswith("float32["):
                arr = np.asarray(values)
            else:
                raise TableLoadError(f"column {name!r} is {typ}; it cannot be served as {target}")
            if arr.ndim != 2 or arr.shape[1] != d:
                raise TableLoadError(f"column {name!r}: vectors of {arr.shape[-1] if arr.ndim == 2 else '?'} items, "
                                     f"declared {target}")
            return Column(name, target, arr if arr.dtype == np.float32 else to_float32(arr))
        if target == "uuid":
            if typ == "string":
                return Column(name, "uuid", _uuid_from_strings(name, values))
            if typ == "binary":
                bad = next((i for i, b in enumerate(values) if len(b) != 16), None)
                if bad is not None:
                    raise TableLoadError(f"column {name!r} row {bad}: {len(values[bad])} bytes, a uuid has 16")
                return Column(name, "uuid", np.frombuffer(b"".join(values), np.uint8).reshape(-1, 16))
            raise TableLoadError(f"column {name!r} is {typ}; it cannot be served as uuid")
        if target == "string":
            if typ == "uuid":
                return Column(name, "string", [str(uuidlib.UUID(bytes=bytes(r))) for r in np.asarray(values)])
            if typ in ("int32", "int64", "bool"):
                return Column(name, "string", [str(v) for v in np.asarray(values).tolist()])
            raise TableLoadError(f"column {name!r} is {typ}; it cannot be served as string")
        if typ == "decimal":
            values = np.array([float(v) for v in values], dtype=np.float64)
            typ = "float64"
        if typ == "string" and target in ("int32", "int64", "float32", "float64", "bool"):
            values = _parse_strings(name, values, target)
            typ = "float64" if target.startswith("float") else ("bool" if target == "bool" else "int64")
        arr = np.asarray(values)
        if target == "float32":
            if arr.dtype.kind == "f":
                return Column(name, "float32", to_float32(arr))
            if arr.dtype.kind in "iub":
                return Column(name, "float32", arr.astype(np.float32))
        elif target == "float64":
            if arr.dtype.kind in "fiub":
                return Column(name, "float64", arr.astype(np.float64))
        elif target in ("int32", "int64"):
            if arr.dtype.kind == "f":
                if not np.all(np.isfinite(arr)) or not np.all(arr == np.round(arr)):
                    i = int(np.argmax(~np.isfinite(arr) | (arr != np.round(arr))))
                    raise TableLoadError(f"column {name!r} row {i}: {arr[i]!r} is not an integer ({target})")
                arr = arr.astype(np.int64)
            if arr.dtype.kind in "iub":
                lo, hi = (-(1 << 31), (1 << 31) - 1) if target == "int32" else (-(1 << 63), (1 << 63) - 1)
                a64 = arr.astype(np.int64)
                bad = (a64 < lo) | (a64 > hi)
                if bad.any():
                    i = int(np.argmax(bad))
                    raise TableLoadError(f"column {name!r} row {i}: {int(a64[i])} is out of the {target} range")
                return Column(name, target, a64.astype("<i4" if target == "int32" else "<i8"))
        elif target == "bool":
            if arr.dtype.kind == "b":
                return Column(name, "bool", arr)
            if arr.dtype.kind in "iu":
                bad = (arr != 0) & (arr != 1)
                if bad.any():
                    i = int(np.argmax(bad))
                    raise TableLoadError(f"column {name!r} row {i}: {arr[i]} is not 0 or 1 (bool)")
                return Column(name, "bool", arr.astype(np.bool_))
        raise TableLoadError(f"column {name!r} is {typ}; it cannot be served as {target}")
    except TableLoadError:
        raise
    except Exception as exc:  # a Column validation error, with its column name
        raise TableLoadError(f"column {name!r} as {target}: {getattr(exc, 'message', exc)}") from None


_TRUE = {"true", "t", "1", "yes"}
_FALSE = {"false", "f", "0", "no"}


def _parse_strings(name: str, values: Sequence[str], target: str) -> np.ndarray:
    out: list[Any] = []
    for i, v in enumerate(values):
        s = v.strip()
        try:
            if target == "bool":
                low = s.lower()
                if low not in _TRUE and low not in _FALSE:
                    raise ValueError
                out.append(low in _TRUE)
            elif target.startswith("int"):
                out.append(int(s))
            else:
                out.append(float(s))
        except ValueError:
            raise TableLoadError(f"column {name!r} row {i}: {v[:60]!r} is not {target}") from None
    dtype = np.bool_ if target == "bool" else (np.float64 if target.startswith("float") else object)
    if dtype is object:
        try:
            return np.array(out, dtype=np.int64)
        except OverflowError:
            raise TableLoadError(f"column {name!r}: a value is beyond int64") from None
    return np.array(out, dtype=dtype)


def _build(name: str, naturals: list[_Natural], spec: TableSpec, declared: dict[str, str] | None = None) -> Any:
    from densewire import Table

    overrides = dict(declared or {})
    overrides.update(dict(spec.columns))
    names = [c.name for c in naturals]
    unknown = [c for c in dict(spec.columns) if c not in names]
    if unknown:
        raise TableLoadError(f"the configured type of column(s) {', '.join(map(repr, unknown))} names no "
                             f"column of the source (its columns: {', '.join(names)})")
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise TableLoadError(f"column {dup!r} occurs twice in the source; rename one (AS ...)")
    if not names:
        raise TableLoadError("the source has no columns")
    cols = [_apply(c, overrides.get(c.name)) for c in naturals]
    return Table(name, cols)


# -- files (pyarrow) ------------------------------------------------------------------------------
def _arrow_target(type_: str) -> Any:
    import pyarrow as pa

    # int32 and float32 are read wide, then narrowed with a range check / section 3.3 rounding
    return {"bool": pa.bool_(), "int32": pa.int64(), "int64": pa.int64(), "float32": pa.float64(),
            "float64": pa.float64()}.get(type_, pa.string())


def _from_arrow_column(name: str, arr: Any, infer_text: bool, declared: str | None) -> _Natural:
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
    if arr.null_count:
        raise _null(name, int(pc.index(arr.is_null(), True).as_py()))
    t = arr.type
    if pa.types.is_dictionary(t):
        arr = arr.dictionary_decode()
        t = arr.type
    if isinstance(t, getattr(pa, "BaseExtensionType", pa.ExtensionType)):
        ext = getattr(t, "extension_name", "")
        arr = arr.storage
        t = arr.type
        if ext == "arrow.uuid" and pa.types.is_fixed_size_binary(t) and t.byte_width == 16:
            return _Natural(name, "uuid", _fixed_binary(arr, 16))
    if pa.types.is_boolean(t):
        return _Natural(name, "bool", arr.to_numpy(zero_copy_only=False).astype(np.bool_))
    if pa.types.is_integer(t):
        a = arr.to_numpy(zero_copy_only=False)
        if pa.types.is_uint64(t) and len(a) and int(a.max()) >= (1 << 63):
            i = int(np.argmax(a >= (1 << 63)))
            raise TableLoadError(f"column {name!r} row {i}: {int(a[i])} is beyond int64")
        small = t.bit_width < 32 or (t.bit_width == 32 and pa.types.is_signed_integer(t))
        return _Natural(name, "int32" if small else "int64", a.astype("<i4" if small else "<i8"))
    if pa.types.is_floating(t):
        a = arr.to_numpy(zero_copy_only=False)
        return _Natural(name, "float64" if t.bit_width == 64 else "float32",
                        a.astype("<f8" if t.bit_width == 64 else "<f4"))
    if pa.types.is_decimal(t):
        return _Natural(name, "decimal", arr.to_pylist())
    if pa.types.is_string(t) or pa.types.is_large_string(t) or getattr(pa.types, "is_string_view", lambda _: False)(t):
        values = arr.to_pylist()
        if infer_text and declared is None and values:
            from densewire._tables._model import parse_uuid_text

            uu, _ = parse_uuid_text(values)
            if uu is not None:
                return _Natural(name, "uuid", uu)
            if all(v[:1] == "[" and v[-1:] == "]" for v in values):  # pgvector / JSON text of vectors
                try:
                    return _Natural(name, "vector", _parse_vectors_text(name, values))
                except TableLoadError:
                    pass
        return _Natural(name, "string", values)
    if pa.types.is_fixed_size_binary(t):
        if t.byte_width == 16 and declared in (None, "uuid"):
            return _Natural(name, "uuid", _fixed_binary(arr, 16))
        return _Natural(name, "binary", arr.to_pylist())
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return _Natural(name, "binary", arr.to_pylist())
    if pa.types.is_fixed_size_list(t) or pa.types.is_list(t) or pa.types.is_large_list(t):
        vt = t.value_type
        if not (pa.types.is_floating(vt) or pa.types.is_integer(vt)):
            raise TableLoadError(f"column {name!r}: lists of {vt} are not supported (vectors are lists of numbers)")
        n = len(arr)
        if pa.types.is_fixed_size_list(t):
            d = t.list_size
        else:
            lengths = pc.list_value_length(arr).to_numpy(zero_copy_only=False)
            if n and (lengths != lengths[0]).any():
                i = int(np.argmax(lengths != lengths[0]))
                raise TableLoadError(f"column {name!r} row {i}: a vector of {lengths[i]} items where row 0 has "
                                     f"{lengths[0]}; a float32[d] column needs one length")
            d = int(lengths[0]) if n else 0
        flat = arr.flatten()
        if flat.null_count:
            k = int(pc.index(flat.is_null(), True).as_py())
            raise _null(name, k // d if d else 0)
        if n == 0 or d == 0:
            if declared and _VECTOR_RE.fullmatch(declared):
                return _Natural(name, "vector", np.empty((n, int(declared[8:-1])), np.float32))
            raise TableLoadError(f"column {name!r}: vectors of length 0 (or no rows): declare float32[d]")
        vals = flat.to_numpy(zero_copy_only=False)
        vals = vals if vals.dtype == np.float32 else vals.astype(np.float64)
        return _Natural(name, "vector", vals.reshape(n, d))
    raise TableLoadError(f"column {name!r}: Arrow type {t} is not supported; declare the column 'string' "
                         "(CSV) or convert it in the source (to a number, boolean, text, uuid or vector)")


def _fixed_binary(arr: Any, width: int) -> np.ndarray:
    bufs = arr.buffers()
    data = np.frombuffer(bufs[1], np.uint8) if bufs[1] is not None else np.empty(0, np.uint8)
    start = arr.offset * width
    return data[start:start + len(arr) * width].reshape(len(arr), width).copy()


def _table_from_arrow(spec: TableSpec, pt: Any, infer_text: bool) -> Any:
    declared_meta: dict[str, str] = {}
    for f in pt.schema:
        meta = f.metadata or {}
        t = meta.get(b"densewire.type")
        if t:
            declared_meta[f.name] = t.decode()
    overrides = {**declared_meta, **dict(spec.columns)}
    naturals = [_from_arrow_column(f.name, pt.column(i), infer_text, overrides.get(f.name))
                for i, f in enumerate(pt.schema)]
    return _build(spec.name, naturals, spec, declared_meta)


def _load_csv(spec: TableSpec) -> Any:
    import pyarrow as pa
    import pyarrow.csv as pacsv

    overrides = dict(spec.columns)
    types = {c: _arrow_target(t) for c, t in overrides.items()}
    try:
        pt = pacsv.read_csv(spec.location, convert_options=pacsv.ConvertOptions(
            column_types=types, null_values=[""], strings_can_be_null=False, quoted_strings_can_be_null=False,
            true_values=["true", "True", "TRUE"], false_values=["false", "False", "FALSE"]))
    except (pa.ArrowInvalid, OSError) as exc:
        raise TableLoadError(f"{spec.location}: {_name_csv_column(spec.location, str(exc))}") from None
    return _table_from_arrow(spec, pt, infer_text=True)


def _name_csv_column(path: str, message: str) -> str:
    """pyarrow says 'CSV column #3': say its name too."""
    m = re.search(r"CSV column #(\d+)", message)
    if not m:
        return message
    import csv

    try:
        with open(path, newline="", encoding="utf-8") as f:
            header = next(csv.reader(f))
        return message.replace(m.group(0), f"{m.group(0)} ({header[int(m.group(1))]!r})")
    except (OSError, StopIteration, IndexError, UnicodeDecodeError, csv.Error):
        return message


def _load_jsonl(spec: TableSpec) -> Any:
    import pyarrow as pa
    import pyarrow.json as pajson

    try:
        pt = pajson.read_json(spec.location)
    except (pa.ArrowInvalid, OSError) as exc:
        raise TableLoadError(f"{spec.location}: {exc}") from None
    return _table_from_arrow(spec, pt, infer_text=True)


def _load_parquet(spec: TableSpec) -> Any:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        pt = pq.read_table(spec.location)
    except (pa.ArrowInvalid, OSError) as exc:
        raise TableLoadError(f"{spec.location}: {exc}") from None
    return _table_from_arrow(spec, pt, infer_text=False)


def _load_arrow(spec: TableSpec) -> Any:
    import pyarrow as pa

    try:
        with pa.memory_map(spec.location) as source:
            try:
                pt = pa.ipc.open_file(source).read_all()
            except pa.ArrowInvalid:
                source.seek(0)
                pt = pa.ipc.open_stream(source).read_all()
    except (pa.ArrowInvalid, OSError) as exc:
        raise TableLoadError(f"{spec.location}: not an Arrow IPC file or stream: {exc}") from None
    return _table_from_arrow(spec, pt, infer_text=False)


# -- SQLite -------------------------------------------------------------------------------------
def _sqlite_bool(b: bytes) -> bool:
    s = b.decode("ascii", "replace").strip().lower()
    if s in ("1", "true", "t"):
        return True
    if s in ("0", "false", "f"):
        return False
    raise ValueError(f"{s!r} is not a boolean")


def _sqlite_uuid(b: bytes) -> uuidlib.UUID:
    return uuidlib.UUID(bytes=b) if len(b) == 16 else uuidlib.UUID(b.decode("ascii"))


def _load_sqlite(spec: TableSpec) -> Any:
    import sqlite3

    # converters are looked up by the first word of a column's declared type (PARSE_DECLTYPES);
    # they run only in the build process, which has no other SQLite user
    for decl in ("BOOLEAN", "BOOL"):
        sqlite3.register_converter(decl, _sqlite_bool)
    sqlite3.register_converter("UUID", _sqlite_uuid)
    if not os.path.isfile(spec.location):
        raise TableLoadError(f"SQLite database {spec.location} does not exist")
    uri = "file:" + quote(spec.location) + "?mode=ro"
    try:
        con = sqlite3.connect(uri, uri=True, detect_types=sqlite3.PARSE_DECLTYPES)
        try:
            cur = con.execute(spec.query or f'SELECT * FROM "{spec.name}"')
            names = [d[0] for d in cur.description or ()]
            rows = cur.fetchall()
        finally:
            con.close()
    except (sqlite3.Error, ValueError) as exc:
        raise TableLoadError(f"SQLite {spec.location}: {type(exc).__name__}: {exc}") from None
    cols = list(zip(*rows)) if rows else [() for _ in names]
    return _build(spec.name, [_from_python(n, list(v)) for n, v in zip(names, cols)], spec)


# -- PostgreSQL ---------------------------------------------------------------------------------
#: type OID -> how the column is read (SPEC.md 15.1 type, or a source kind needing care)
_PG_OIDS = {16: "bool", 21: "int32", 23: "int32", 20: "int64", 700: "float32", 701: "float64",
            25: "string", 1043: "string", 1042: "string", 19: "string", 2950: "uuid",
            1021: "vector", 1022: "vector", 1700: "decimal", 17: "binary"}


def _load_postgresql(spec: TableSpec) -> Any:
    import psycopg

    try:
        with psycopg.connect(spec.location, connect_timeout=10, autocommit=True) as conn:
            conn.execute("SET default_transaction_read_only = on")
            cur = conn.execute(spec.query or f'SELECT * FROM "{spec.name}"')
            desc = list(cur.description or ())
            rows = cur.fetchall()
            unknown = sorted({d.type_code for d in desc if d.type_code not in _PG_OIDS})
            typnames: dict[int, str] = {}
            if unknown:
                for oid, typname in conn.execute("SELECT oid::int, typname FROM pg_type WHERE oid = ANY(%s)",
                                                 (unknown,)).fetchall():
                    typnames[oid] = typname
    except psycopg.Error as exc:
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise TableLoadError(f"PostgreSQL {spec.safe_location}: {type(exc).__name__}: {msg}") from None
    cols = list(zip(*rows)) if rows else [() for _ in desc]
    naturals = []
    for d, values in zip(desc, cols):
        kind = _PG_OIDS.get(d.type_code)
        if kind is None:
            typname = typnames.get(d.type_code, str(d.type_code))
            if typname in ("vector", "halfvec"):
                kind = "vector"
            elif typname in ("citext", "bpchar", "varchar"):
                kind = "string"
            else:
                raise TableLoadError(f"column {d.name!r}: PostgreSQL type {typname} is not supported; cast it "
                                     "in the query (::text, ::float8, ::int8, ...)")
        naturals.append(_pg_column(d.name, list(values), kind))
    return _build(spec.name, naturals, spec)


def _pg_column(name: str, values: list[Any], kind: str) -> _Natural:
    for i, v in enumerate(values):
        if v is None:
            raise _null(name, i)
    if kind == "vector":
        if not values:
            return _Natural(name, "vector", np.empty((0, 0)))
        if isinstance(values[0], str):
            return _Natural(name, "vector", _parse_vectors_text(name, values))
        if hasattr(values[0], "tolist") and not isinstance(values[0], list):
            values = [v.tolist() for v in values]
        return _Natural(name, "vector", _vectors(name, values))
    if kind == "uuid":
        return _Natural(name, "uuid", np.frombuffer(b"".join(v.bytes for v in values), np.uint8).reshape(-1, 16)
                        if values else np.empty((0, 16), np.uint8))
    if kind == "binary":
        return _Natural(name, "binary", [bytes(v) for v in values])
    if kind == "decimal":
        return _Natural(name, "decimal", values)
    if kind == "string":
        return _Natural(name, "string", [str(v) for v in values])
    if kind == "bool":
        return _Natural(name, "bool", np.array(values, dtype=np.bool_))
    if kind in ("int32", "int64"):
        return _Natural(name, kind, np.array(values, dtype="<i4" if kind == "int32" else "<i8"))
    return _Natural(name, kind, np.array(values, dtype="<f8").astype("<f4" if kind == "float32" else "<f8"))


# -- demo ---------------------------------------------------------------------------------------
def _load_demo(spec: TableSpec) -> Any:
    from densewire import demo_table

    opts = dict(item.split("=", 1) for item in spec.location.split(",") if item)
    kwargs: dict[str, Any] = {"name": spec.name, "coordinates": opts.get("coordinates", "float64")}
    if "rows" in opts:
        kwargs["rows"] = int(opts["rows"])
    if "seed" in opts:
        kwargs["seed"] = int(opts["seed"])
    table = demo_table(**kwargs)
    if spec.columns:
        naturals = [_Natural(c.name, c.type, c.values) for c in table.columns]
        return _build(spec.name, naturals, spec)
    return table


_LOADERS = {"csv": _load_csv, "jsonl": _load_jsonl, "parquet": _load_parquet, "arrow": _load_arrow,
            "sqlite": _load_sqlite, "postgresql": _load_postgresql, "demo": _load_demo}


def load_table(spec: TableSpec) -> Any:
    """The ``densewire.Table`` of a spec, or TableLoadError saying what is wrong with the source."""
    try:
        return _LOADERS[spec.kind](spec)
    except TableLoadError:
        raise
    except ImportError as exc:
        raise TableLoadError(f"a module is missing: {exc}") from None
    except MemoryError:
        raise TableLoadError("out of memory while loading") from None

