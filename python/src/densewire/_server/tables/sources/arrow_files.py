"""Parquet and Arrow IPC (file or stream) files, read with pyarrow; their Arrow types are kept."""

from __future__ import annotations

from typing import Any

from densewire._optional import require

from ..spec import TableLoadError, TableSpec
from .arrow_columns import table_from_arrow

__all__ = ["load_parquet", "load_arrow"]


def load_parquet(spec: TableSpec) -> Any:
    pa = require("pyarrow", extra="arrow", feature="Parquet tables")
    pq = require("pyarrow.parquet", extra="arrow", feature="Parquet tables")

    try:
        pt = pq.read_table(spec.location)
    except (pa.ArrowInvalid, OSError) as exc:
        raise TableLoadError(f"{spec.location}: {exc}") from None
    return table_from_arrow(spec, pt, infer_text=False)


def load_arrow(spec: TableSpec) -> Any:
    pa = require("pyarrow", extra="arrow", feature="Arrow IPC tables")

    try:
        with pa.memory_map(spec.location) as source:
            try:
                pt = pa.ipc.open_file(source).read_all()
            except pa.ArrowInvalid:
                source.seek(0)
                pt = pa.ipc.open_stream(source).read_all()
    except (pa.ArrowInvalid, OSError) as exc:
        raise TableLoadError(f"{spec.location}: not an Arrow IPC file or stream: {exc}") from None
    return table_from_arrow(spec, pt, infer_text=False)
