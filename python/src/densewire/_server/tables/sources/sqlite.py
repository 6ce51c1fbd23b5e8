"""SQLite databases, opened read-only; ``BOOLEAN`` and ``UUID`` declared types are converted."""

from __future__ import annotations

import os
import sqlite3
import uuid as uuidlib
from typing import Any
from urllib.parse import quote

from ..coercion import build_table, from_python
from ..spec import TableLoadError, TableSpec

__all__ = ["load_sqlite"]


def _sqlite_bool(b: bytes) -> bool:
    s = b.decode("ascii", "replace").strip().lower()
    if s in ("1", "true", "t"):
        return True
    if s in ("0", "false", "f"):
        return False
    raise ValueError(f"{s!r} is not a boolean")


def _sqlite_uuid(b: bytes) -> uuidlib.UUID:
    return uuidlib.UUID(bytes=b) if len(b) == 16 else uuidlib.UUID(b.decode("ascii"))


def load_sqlite(spec: TableSpec) -> Any:
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
    return build_table(spec.name, [from_python(n, list(v)) for n, v in zip(names, cols)], spec)
