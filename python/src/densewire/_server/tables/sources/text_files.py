"""CSV and JSON Lines files, read with pyarrow; their text columns may hold UUIDs or vectors (inferred)."""

from __future__ import annotations

import csv
import re
from typing import Any

from densewire._optional import require

from ..spec import TableLoadError, TableSpec
from .arrow_columns import arrow_target, table_from_arrow

__all__ = ["load_csv", "load_jsonl"]


def load_csv(spec: TableSpec) -> Any:
    pa = require("pyarrow", extra="arrow", feature="CSV tables")
    pacsv = require("pyarrow.csv", extra="arrow", feature="CSV tables")

    overrides = dict(spec.columns)
    types = {c: arrow_target(t) for c, t in overrides.items()}
    try:
        pt = pacsv.read_csv(spec.location, convert_options=pacsv.ConvertOptions(
            column_types=types, null_values=[""], strings_can_be_null=False, quoted_strings_can_be_null=False,
            true_values=["true", "True", "TRUE"], false_values=["false", "False", "FALSE"]))
    except (pa.ArrowInvalid, OSError) as exc:
        raise TableLoadError(f"{spec.location}: {_name_csv_column(spec.location, str(exc))}") from None
    return table_from_arrow(spec, pt, infer_text=True)


def _name_csv_column(path: str, message: str) -> str:
    """pyarrow says 'CSV column #3': say its name too."""
    m = re.search(r"CSV column #(\d+)", message)
    if not m:
        return message
    try:
        with open(path, newline="", encoding="utf-8") as f:
            header = next(csv.reader(f))
        return message.replace(m.group(0), f"{m.group(0)} ({header[int(m.group(1))]!r})")
    except (OSError, StopIteration, IndexError, UnicodeDecodeError, csv.Error):
        return message


def load_jsonl(spec: TableSpec) -> Any:
    pa = require("pyarrow", extra="arrow", feature="JSON Lines tables")
    pajson = require("pyarrow.json", extra="arrow", feature="JSON Lines tables")

    try:
        pt = pajson.read_json(spec.location)
    except (pa.ArrowInvalid, OSError) as exc:
        raise TableLoadError(f"{spec.location}: {exc}") from None
    return table_from_arrow(spec, pt, infer_text=True)
