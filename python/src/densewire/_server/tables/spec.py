"""What a served table is: its :class:`TableSpec` (where the rows come from, how it is served), the
column types a configuration may name, and :class:`TableLoadError`."""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

__all__ = ["TableSpec", "TableLoadError", "NAME_RE", "SCALAR_TYPES", "VECTOR_RE", "DEMO_TABLE_NAMES"]

#: A table name: it is a URL path segment and a header value, so ASCII letters, digits, ``_ . -``.
NAME_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]{0,127}")
DEMO_TABLE_NAMES = ("points", "points_f32")
#: The column types of SPEC.md 15.1 a configuration may declare: these, and ``float32[d]``.
SCALAR_TYPES = ("bool", "int32", "int64", "float32", "float64", "string", "uuid")
VECTOR_RE = re.compile(r"float32\[([1-9][0-9]*)\]")


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
