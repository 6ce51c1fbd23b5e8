"""The source kinds a table is read from, one module each, and :func:`load_table` choosing among them.

A new kind is a module here with a ``load_KIND(spec) -> densewire.Table`` function, an entry in
:data:`LOADERS`, and its file suffix or URL scheme in ``..config`` (``parse_source``). Optional
dependencies (pyarrow, psycopg) are imported when a table of their kind is loaded, through
``densewire._optional.require``.
"""

from __future__ import annotations

from typing import Any, Callable

from ..spec import TableLoadError, TableSpec
from .arrow_files import load_arrow, load_parquet
from .demo import load_demo
from .postgresql import load_postgresql
from .sqlite import load_sqlite
from .text_files import load_csv, load_jsonl

__all__ = ["LOADERS", "load_table"]

#: source kind (``TableSpec.kind``) -> the function reading it
LOADERS: dict[str, Callable[[TableSpec], Any]] = {
    "csv": load_csv, "jsonl": load_jsonl, "parquet": load_parquet, "arrow": load_arrow,
    "sqlite": load_sqlite, "postgresql": load_postgresql, "demo": load_demo,
}


def load_table(spec: TableSpec) -> Any:
    """The ``densewire.Table`` of a spec, or TableLoadError saying what is wrong with the source."""
    try:
        return LOADERS[spec.kind](spec)
    except TableLoadError:
        raise
    except ImportError as exc:
        raise TableLoadError(f"a module is missing: {exc}") from None
    except MemoryError:
        raise TableLoadError("out of memory while loading") from None
