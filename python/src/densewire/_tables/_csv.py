"""CSV tables (SPEC.md section 15.4): RFC 4180, a header line, CRLF line ends, pgvector-style vectors.

Encoding shares the JSON codec's column tokens (orjson digits, vectorised uuid text) and assembles
the lines in one join. Decoding uses Python's C ``csv`` reader (strict mode), then converts column
at a time. Lines in errors are records, counting the header as line 1 (a quoted field with line
breaks inside is one record).
"""

from __future__ import annotations

import csv
import io
import math
import re
from itertools import chain
from typing import Any

import numpy as np
import orjson

from .._errors import InvalidFieldError, MalformedError, ShapeMismatchError, TruncatedError
from ._csv_fields import csv_field
from ._json import assemble, column_from_values, value_tokens
from ._model import Column, Table, schema_of, vector_dims

__all__ = ["encode_csv_table", "decode_csv_table", "csv_field", "CSV_MEDIA_TYPE"]

CSV_MEDIA_TYPE = "text/csv; charset=utf-8; header=present"
_INT = re.compile(r"-?[0-9]+")
_FLOAT = re.compile(r"-?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?|NaN|-?Infinity")
_SPECIAL = {"NaN": "nan", "Infinity": "inf", "-Infinity": "-inf"}


def encode_csv_table(table: Table) -> bytes:
    """The CSV text, UTF-8 (served as ``text/csv; charset=utf-8; header=present``)."""
    header = ",".join(csv_field(c.name) for c in table.columns).encode("utf-8") + b"\r\n"
    if not table.columns:
        return header + b"\r\n" * table.rows
    tokens = [value_tokens(c, csv=True) for c in table.columns]
    before = [b""] + [b","] * (len(table.columns) - 1)
    return header + assemble(tokens, before, b"\r\n", table.rows)


def _text(body: Any) -> str:
    if isinstance(body, str):
        text = body
    else:
        try:
            text = bytes(body).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise MalformedError(f"CSV is not UTF-8: {exc.reason}", offset=exc.start) from None
    return text[1:] if text.startswith("\ufeff") else text


def _parse_column(name: str, type_: str, fields: list[str], line_of) -> Column:
    def bad(i: int, what: str) -> InvalidFieldError:
        return InvalidFieldError(f"{fields[i]!r:.60} is not {what}", field=f"{line_of(i)}, {name}")

    if type_ == "bool":
        if not set(fields) <= {"true", "false"}:
            raise bad(next(i for i, f in enumerate(fields) if f not in ("true", "false")), "true or false")
        return Column(name, type_, np.array(fields, dtype=object) == "true" if fields else np.empty(0, np.bool_))
    if type_ in ("int32", "int64"):
        if not all(map(_INT.fullmatch, fields)):
            raise bad(next(i for i, f in enumerate(fields) if not _INT.fullmatch(f)), f"an {type_} integer")
        values = list(map(int, fields))
        try:
            return column_from_values(name, type_, values, lambda i: f"{line_of(i)}, {name}")
        except InvalidFieldError as exc:
            raise InvalidFieldError(f"out of the {type_} range", field=exc.field) from None
    if type_ in ("float32", "float64"):
        if not all(map(_FLOAT.fullmatch, fields)):
            raise bad(next(i for i, f in enumerate(fields) if not _FLOAT.fullmatch(f)), f"a {type_} number")
        values = [float(_SPECIAL.get(f, f)) for f in fields]
        _check_float64_range(fields, values, bad)
        return column_from_values(name, type_, values, lambda i: f"{line_of(i)}, {name}")
    if type_ == "string":
        return Column(name, type_, fields)
    if type_ == "uuid":
        return column_from_values(name, type_, fields, lambda i: f"{line_of(i)}, {name}")
    d = vector_dims(type_)
    try:  # all at once, as JSON numbers; fall back field by field (and for NaN/Infinity items)
        values = orjson.loads("[" + ",".join(fields) + "]") if fields else []
        ok = (len(values) == len(fields) and all(type(v) is list and len(v) == d for v in values)
              and set(map(type, chain.from_iterable(values))) <= {int, float})
    except orjson.JSONDecodeError:
        ok = False
    if not ok:
        values = []
        for i, f in enumerate(fields):
            items = f[1:-1].split(",") if len(f) >= 2 and f[0] == "[" and f[-1] == "]" else None
            items = [x.strip() for x in items] if items else None
            if not items or len(items) != d or not all(map(_FLOAT.fullmatch, items)):
                raise bad(i, f"a {type_} vector [v1,...,v{d}]")
            row = [float(_SPECIAL.get(x, x)) for x in items]
            _check_float64_range(items, row, lambda _, why: bad(i, why))
            values.append(row)
    return column_from_values(name, type_, values, lambda i: f"{line_of(i)}, {name}", item_paths=False)


def _check_float64_range(texts: list[str], values: list[float], bad: Any) -> None:
    """A decimal that Python reads as infinity is beyond float64: only the words spell infinities."""
    if math.inf in map(abs, values):
        i = next((i for i, (t, v) in enumerate(zip(texts, values)) if math.isinf(v) and t not in _SPECIAL), None)
        if i is not None:
            raise bad(i, "within the float64 range")


def decode_csv_table(body: Any, columns: Any = None, name: str | None = None) -> Table:
    """Decode CSV with the given schema (the ``Densewire-Columns`` value or (name, type) pairs)."""
    schema = schema_of(columns)
    text = _text(body)
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    try:
        records = list(reader)
    except csv.Error as exc:
        if "unexpected end of data" in str(exc) or "EOF" in str(exc):
            raise TruncatedError(f"the CSV ends inside a quoted field: {exc}", offset=len(text.encode("utf-8"))) from None
        raise MalformedError(f"invalid CSV near line {reader.line_num} (physical lines): {exc}") from None
    names = [c[0] for c in schema]
    if not records or (records[0] != names and not (records[0] == [] and names == [])):
        raise ShapeMismatchError(f"the header must name the columns {names}, got {records[0] if records else []}",
                                 field="header")
    rows = records[1:]
    width = len(names)
    if width == 0:
        if any(rows):
            raise ShapeMismatchError("a table without columns has empty lines only",
                                     field=f"line {next(i for i, r in enumerate(rows) if r) + 2}")
        return Table(name or "", [], len(rows))
    if not all(len(r) == width for r in rows):
        i = next(i for i, r in enumerate(rows) if len(r) != width)
        raise ShapeMismatchError(f"{len(rows[i])} fields, the table has {width} columns", field=f"line {i + 2}")
    by_column = list(zip(*rows)) if rows else [()] * width
    cols = [_parse_column(cn, ct, list(by_column[k]), lambda i: f"line {i + 2}") for k, (cn, ct) in enumerate(schema)]
    return Table(name or "", cols, len(rows))
