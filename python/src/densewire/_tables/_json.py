"""The three JSON layouts of SPEC.md section 15.3: objects, rows and columns.

Encoding is column at a time: orjson writes each numeric column in one call (shortest round-trip
digits; float32 columns with float32-shortest digits, as orjson does for numpy float32), the text is
split into one token a value, and the rows are assembled by one ``bytes.join`` over an iterator
that never enters Python per value. Decoding parses with orjson, then checks and converts each
column in bulk (a set of the value types, numpy conversions), locating the first bad value only
when there is one.
"""

from __future__ import annotations

from itertools import chain, repeat
from operator import itemgetter
from typing import Any, Callable

import numpy as np
import orjson

from .._errors import InvalidFieldError, MalformedError, NonFiniteError, ShapeMismatchError
from ._csv_fields import csv_field, vector_field
from ._model import Column, Table, check_type, parse_uuid_text, schema_of, to_float32, uuid_text, vector_dims

__all__ = ["encode_json_table", "decode_json_table", "value_tokens", "column_from_values", "assemble"]

_NUMPY = orjson.OPT_SERIALIZE_NUMPY
_BOOL = (b"false", b"true")
_INT_RANGE = {"int32": (-(1 << 31), (1 << 31) - 1), "int64": (-(1 << 63), (1 << 63) - 1)}


# ------------------------------------------------------------------------------ encoding
def _split_array(a: np.ndarray) -> list[bytes]:
    """One JSON token a value of a 1-D numeric array (orjson digits)."""
    if a.size == 0:
        return []
    return orjson.dumps(np.ascontiguousarray(a), option=_NUMPY)[1:-1].split(b",")


def _fixed_tokens(a: np.ndarray, width: int, prefix: bytes = b"", suffix: bytes = b"") -> list[bytes]:
    """Rows of an ``(n, width)`` uint8 text array as bytes, with a prefix and suffix on each."""
    n = len(a)
    if n == 0:
        return []
    p, s = len(prefix), len(suffix)
    out = np.empty((n, p + width + s), np.uint8)
    if p:
        out[:, :p] = np.frombuffer(prefix, np.uint8)
    out[:, p:p + width] = a
    if s:
        out[:, p + width:] = np.frombuffer(suffix, np.uint8)
    flat = out.tobytes()
    w = out.shape[1]
    return [flat[i:i + w] for i in range(0, len(flat), w)]


def _check_finite(col: Column) -> None:
    finite = np.isfinite(col.values)
    if not finite.all():
        bad = np.argwhere(~finite)[0]
        row = int(bad[0])
        raise NonFiniteError(f"{col.values[tuple(bad)]} has no JSON number form (use a binary format or CSV)",
                             field=f"{col.name}[{row}]")


def value_tokens(col: Column, csv: bool = False) -> list[bytes]:
    """One encoded token a row: JSON values, or CSV fields (already quoted) when ``csv``."""
    t = col.type
    v = col.values
    if t == "bool":
        return list(map(_BOOL.__getitem__, np.asarray(v, np.uint8).tolist()))
    if t in ("int32", "int64"):
        return _split_array(v)
    if t in ("float32", "float64"):
        if not csv:
            _check_finite(col)
            return _split_array(v)
        tokens = _split_array(v)
        bad = np.flatnonzero(~np.isfinite(v))
        for i in bad.tolist():
            x = float(v[i])
            tokens[i] = b"NaN" if x != x else b"Infinity" if x > 0 else b"-Infinity"
        return tokens
    if t == "uuid":
        return _fixed_tokens(uuid_text(v), 36) if csv else _fixed_tokens(uuid_text(v), 36, b'"', b'"')
    if t == "string":
        if csv:
            return [csv_field(s).encode("utf-8") for s in v]
        return [orjson.dumps(s) for s in v]
    # float32[d]
    if len(v) == 0:
        return []
    if not csv:
        _check_finite(col)
    a = np.ascontiguousarray(v)
    if csv and not np.isfinite(a).all():
        return [vector_field(row) for row in a]
    inner = orjson.dumps(a, option=_NUMPY)[2:-2].split(b"],[")
    open_, close = (b'"[', b']"') if csv else (b"[", b"]")
    return [open_ + x + close for x in inner]


def assemble(columns: list[list[bytes]], before: list[bytes], end: bytes, n: int) -> bytes:
    """``before[0] col0[i] before[1] col1[i] ... end`` for every row i, concatenated in one join."""
    if n == 0:
        return b""
    streams: list = []
    for sep, tokens in zip(before, columns):
        streams += [repeat(sep, n), tokens]
    streams.append(repeat(end, n))
    return b"".join(chain.from_iterable(zip(*streams)))


def _schema_json(table: Table) -> bytes:
    return orjson.dumps([{"name": c.name, "type": c.type} for c in table.columns])


def encode_json_table(table: Table, layout: str = "json") -> bytes:
    """``json`` (objects), ``json-rows`` or ``json-columns``; ``non_finite`` on ``COLUMN[ROW]`` for
    NaN or infinity."""
    if layout == "json-columns":
        parts = [b'{"name":' + orjson.dumps(table.name) + b',"rows":%d,"columns":[' % table.rows]
        for k, col in enumerate(table.columns):
            head = b'%s{"name":%s,"type":"%s","values":[' % (b"," if k else b"", orjson.dumps(col.name), col.type.encode())
            if col.type in ("int32", "int64", "bool"):
                values = orjson.dumps(np.ascontiguousarray(col.values), option=_NUMPY)[1:-1] if table.rows else b""
            elif col.type in ("float32", "float64") or vector_dims(col.type):
                _check_finite(col)
                values = orjson.dumps(np.ascontiguousarray(col.values), option=_NUMPY)[1:-1] if table.rows else b""
            elif col.type == "string":
                values = orjson.dumps(col.values)[1:-1]
            else:
                values = b",".join(value_tokens(col))
            parts += [head, values, b"]}"]
        parts.append(b"]}")
        return b"".join(parts)
    tokens = [value_tokens(col) for col in table.columns]
    n = table.rows
    if layout == "json":
        if not table.columns:
            return b"[" + b",".join(repeat(b"{}", n)) + b"]"
        keys = [orjson.dumps(c.name) + b":" for c in table.columns]
        before = [b"{" + keys[0]] + [b"," + k for k in keys[1:]]
        body = assemble(tokens, before, b"},", n)
        return b"[" + body[:-1] + b"]"
    if layout == "json-rows":
        head = b'{"name":' + orjson.dumps(table.name) + b',"columns":' + _schema_json(table) + b',"rows":['
        if not table.columns:
            return head + b",".join(repeat(b"[]", n)) + b"]}"
        before = [b"["] + [b","] * (len(table.columns) - 1)
        body = assemble(tokens, before, b"],", n)
        return head + body[:-1] + b"]}"
    raise ValueError(f"unknown JSON layout {layout!r}")


# ------------------------------------------------------------------------------ decoding
def _loads(body: Any) -> Any:
    if isinstance(body, memoryview):
        body = body.tobytes()
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise MalformedError(f"invalid JSON: {exc.msg}", offset=exc.pos) from None


def _kind(v: Any) -> str:
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "an array",
            dict: "an object", type(None): "null"}.get(type(v), type(v).__name__)


def column_from_values(name: str, type_: str, values: list, path: Callable[[int], str], item_paths: bool = True) -> Column:
    """A column from decoded JSON values (or CSV-parsed Python values), checked in bulk; the first bad
    value is ``invalid_field`` on ``path(row)``, a bad vector item on ``path(row)[item]`` when
    ``item_paths`` (JSON; a CSV cell is the finest place CSV has)."""
    def bad(i: int, why: str) -> InvalidFieldError:
        return InvalidFieldError(f"{why}, got {_kind(values[i])} ({values[i]!r:.60})", field=path(i))

    def item(i: int, j: int) -> str:
        return f"{path(i)}[{j}]" if item_paths else path(i)

    kinds = set(map(type, values))
    if type_ == "bool":
        if not kinds <= {bool}:
            raise bad(next(i for i, v in enumerate(values) if type(v) is not bool), "a bool column needs true or false")
        return Column(name, type_, np.array(values, np.bool_))
    if type_ in ("int32", "int64"):
        lo, hi = _INT_RANGE[type_]
        if not kinds <= {int} or (values and (min(values) < lo or max(values) > hi)):
            i = next(i for i, v in enumerate(values) if type(v) is not int or not lo <= v <= hi)
            raise bad(i, f"an {type_} column needs an integer in {lo}..{hi}")
        return Column(name, type_, np.array(values, np.int64).astype("<i4" if type_ == "int32" else "<i8", copy=False)
                      if values else np.empty(0, "<i4" if type_ == "int32" else "<i8"))
    if type_ in ("float32", "float64"):
        if not kinds <= {int, float}:
            raise bad(next(i for i, v in enumerate(values) if type(v) not in (int, float)), f"a {type_} column needs a number")
        try:
            a = np.array(values, np.float64) if values else np.empty(0, np.float64)
        except OverflowError:
            i = next(i for i, v in enumerate(values) if type(v) is int and abs(v) > 1 << 1024)
            raise bad(i, "a number beyond the float64 range") from None
        if type_ == "float64":
            return Column(name, type_, a)
        f = to_float32(a)
        over = np.isinf(f) & np.isfinite(a)  # JSON has no infinities, CSV spells them: SPEC.md 15.3
        if over.any():
            raise bad(int(np.flatnonzero(over)[0]), "a number beyond the float32 range (largest finite 3.4028235e38)")
        return Column(name, type_, f)
    if type_ == "string":
        if not kinds <= {str}:
            raise bad(next(i for i, v in enumerate(values) if type(v) is not str), "a string column needs a string")
        return Column(name, type_, values if type(values) is list else list(values))
    if type_ == "uuid":
        arr, i = parse_uuid_text(values)
        if arr is None:
            raise bad(i, "a uuid column needs the text xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx")
        return Column(name, type_, arr)
    d = vector_dims(type_)
    if not kinds <= {list}:
        raise bad(next(i for i, v in enumerate(values) if type(v) is not list), f"a {type_} column needs an array")
    if values and set(map(len, values)) != {d}:
        i = next(i for i, v in enumerate(values) if len(v) != d)
        raise ShapeMismatchError(f"{len(values[i])} numbers, the column type is {type_}", field=path(i))
    if not set(map(type, chain.from_iterable(values))) <= {int, float}:
        i = next(i for i, v in enumerate(values) if not all(type(x) in (int, float) for x in v))
        j = next(j for j, x in enumerate(values[i]) if type(x) not in (int, float))
        raise InvalidFieldError(f"a vector item must be a number, got {_kind(values[i][j])}", field=item(i, j))
    a = np.array(values, np.float64).reshape(len(values), d) if values else np.empty((0, d), np.float64)
    f = to_float32(a)
    over = np.isinf(f) & np.isfinite(a)
    if over.any():
        i, j = (int(k) for k in np.argwhere(over)[0])
        raise InvalidFieldError(f"{values[i][j]!r:.60} is beyond the float32 range (largest finite 3.4028235e38)",
                                field=item(i, j))
    return Column(name, type_, f)



def _check_schema(items: Any, field: str) -> list[tuple[str, str]]:
    if not isinstance(items, list):
        raise InvalidFieldError("missing or not an array", field=field)
    out = []
    seen: set[str] = set()
    for k, c in enumerate(items):
        if not isinstance(c, dict):
            raise InvalidFieldError("a column must be an object", field=f"{field}[{k}]")
        name = c.get("name")
        if not isinstance(name, str) or not name:
            raise InvalidFieldError("missing, empty or not a string", field=f"{field}[{k}].name")
        if name in seen:
            raise InvalidFieldError(f"column name {name!r} occurs twice", field=f"{field}[{k}].name")
        seen.add(name)
        if "type" not in c:
            raise InvalidFieldError("missing", field=f"{field}[{k}].type")
        out.append((name, check_type(c["type"], field=f"{field}[{k}].type")))
    return out


def _table_name(doc: dict, given: str | None) -> str:
    name = doc.get("name", "")
    if not isinstance(name, str):
        raise InvalidFieldError(f"must be a string, got {_kind(name)}", field="name")
    return name if given is None else given


def decode_json_table(body: Any, layout: str = "json", columns: Any = None, name: str | None = None) -> Table:
    """Decode one of the three layouts. ``json`` (objects) takes its types from ``columns`` (the
    ``Densewire-Columns`` value or (name, type) pairs) and its name from ``name``."""
    if layout == "json":
        schema = schema_of(columns)
        doc = _loads(body)
        if not isinstance(doc, list):
            raise MalformedError("JSON objects: the body must be an array of objects", offset=0)
        keys = [c[0] for c in schema]
        keyset = set(keys)
        if not all(type(o) is dict and o.keys() == keyset for o in doc):
            for i, o in enumerate(doc):
                if type(o) is not dict:
                    raise InvalidFieldError(f"a row must be an object, got {_kind(o)}", field=f"[{i}]")
                missing = [k for k in keys if k not in o]
                if missing:
                    raise InvalidFieldError("missing key", field=f"[{i}].{missing[0]}")
                extra = [k for k in o if k not in keyset]
                if extra:
                    raise InvalidFieldError("unknown key (not in the table's columns)", field=f"[{i}].{extra[0]}")
        cols = [column_from_values(cn, ct, list(map(itemgetter(cn), doc)), lambda i, cn=cn: f"[{i}].{cn}")
                for cn, ct in schema]
        return Table(name or "", cols, len(doc))
    doc = _loads(body)
    if not isinstance(doc, dict):
        raise MalformedError(f"{layout}: the body must be a JSON object", offset=0)
    if layout == "json-rows":
        schema = _check_schema(doc.get("columns"), "columns")
        rows = doc.get("rows")
        if not isinstance(rows, list):
            raise InvalidFieldError("missing or not an array", field="rows")
        width = len(schema)
        if not all(type(r) is list and len(r) == width for r in rows):
            i = next(i for i, r in enumerate(rows) if type(r) is not list or len(r) != width)
            if type(rows[i]) is not list:
                raise InvalidFieldError(f"a row must be an array, got {_kind(rows[i])}", field=f"rows[{i}]")
            raise ShapeMismatchError(f"{len(rows[i])} values, the table has {width} columns", field=f"rows[{i}]")
        by_column = list(zip(*rows)) if rows else [()] * width
        cols = [column_from_values(cn, ct, list(by_column[k]), lambda i, k=k: f"rows[{i}][{k}]")
                for k, (cn, ct) in enumerate(schema)]
        return Table(_table_name(doc, name), cols, len(rows))
    if layout == "json-columns":
        n = doc.get("rows")
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise InvalidFieldError("missing or not a non-negative integer", field="rows")
        items = doc.get("columns")
        schema = _check_schema(items, "columns")
        cols = []
        for k, (cn, ct) in enumerate(schema):
            values = items[k].get("values")
            if not isinstance(values, list):
                raise InvalidFieldError("missing or not an array", field=f"columns[{k}].values")
            if len(values) != n:
                raise ShapeMismatchError(f"{len(values)} values for {n} rows", field=f"columns[{k}].values")
            cols.append(column_from_values(cn, ct, values, lambda i, k=k: f"columns[{k}].values[{i}]"))
        return Table(_table_name(doc, name), cols, n)
    raise ValueError(f"unknown JSON layout {layout!r}")
