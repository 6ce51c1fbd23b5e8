"""Which tables ``densewire serve`` serves: the ``--table`` flags, the ``--tables-config`` TOML file,
the demo tables, and ``--table-compression``.

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
or as ``query`` in the TOML file. A type in the configuration overrides the one inferred from the
source (``longitude = "float32"``; see :mod:`.coercion`).

This module needs the standard library only (the server's flags are checked before anything
heavy is imported).
"""

from __future__ import annotations

import math
import os
import tomllib
from pathlib import Path
from typing import Any

from ..._optional import install_hint, missing
from .spec import NAME_RE, SCALAR_TYPES, VECTOR_RE, TableSpec

__all__ = ["parse_table_arg", "parse_source", "load_tables_config", "table_specs", "demo_specs",
           "parse_compression", "CODINGS", "COMPRESSION_PRESETS"]

_FILE_KINDS = {
    ".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".parquet": "parquet", ".pq": "parquet",
    ".arrow": "arrow", ".arrows": "arrow", ".feather": "arrow", ".ipc": "arrow",
    ".db": "sqlite", ".sqlite": "sqlite", ".sqlite3": "sqlite",
}
_TABLE_KEYS = {"source", "query", "refresh", "cache_control", "columns"}
_TOP_KEYS = {"tables", "demo_tables", "refresh", "cache_control"}


# ---------------------------------------------------------------------------------------- config
def _check_type(name: str, type_: Any, where: str) -> str:
    if not isinstance(type_, str) or not (type_ in SCALAR_TYPES or VECTOR_RE.fullmatch(type_)):
        raise ValueError(f"{where}: column {name!r}: unknown type {type_!r}; use one of "
                         f"{', '.join(SCALAR_TYPES)} or float32[d]")
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
            _require("psycopg", f"PostgreSQL tables need psycopg 3: {install_hint('serve')} "
                     "(or pip install 'psycopg[binary]')", s.origin)
        elif s.kind in ("csv", "jsonl", "parquet", "arrow"):
            _require("pyarrow", f"{s.kind} tables need pyarrow: {install_hint('arrow')}", s.origin)
    return specs


def _require(module: str, message: str, where: str) -> None:
    if missing(module):
        raise ValueError(f"{where}: {message}")


# ------------------------------------------------------------------------------ --table-compression
#: Content codings built for every table body, in the order they are built (fastest first).
CODINGS = ("gzip", "zstd", "br")
COMPRESSION_PRESETS: dict[str, dict[str, int]] = {
    "best": {"gzip": 9, "zstd": 19, "br": 11},
    "fast": {"gzip": 4, "zstd": 3, "br": 4},
    "off": {},
}
_LEVEL_RANGE = {"gzip": (1, 9), "zstd": (1, 22), "br": (0, 11)}


def parse_compression(text: str) -> dict[str, int]:
    """``best`` (gzip 9, zstd 19, br 11: the default), ``fast`` (4, 3, 4), ``off``, or levels such as
    ``br=9,zstd=15,gzip=6`` (codings not named keep the ``best`` level; ``br=off`` leaves one out)."""
    t = text.strip().lower()
    if t in COMPRESSION_PRESETS:
        return dict(COMPRESSION_PRESETS[t])
    levels = dict(COMPRESSION_PRESETS["best"])
    for item in filter(None, (s.strip() for s in t.split(","))):
        coding, eq, value = item.partition("=")
        coding = coding.strip()
        if not eq or coding not in _LEVEL_RANGE:
            raise ValueError(f"--table-compression: {item!r}: use best, fast, off or CODING=LEVEL items "
                             "(gzip=1..9, zstd=1..22, br=0..11, or CODING=off)")
        if value.strip() == "off":
            levels.pop(coding, None)
            continue
        lo, hi = _LEVEL_RANGE[coding]
        try:
            level = int(value)
        except ValueError:
            level = lo - 1
        if not lo <= level <= hi:
            raise ValueError(f"--table-compression: {coding} level must be in {lo}..{hi}, not {value.strip()!r}")
        levels[coding] = level
    return levels
