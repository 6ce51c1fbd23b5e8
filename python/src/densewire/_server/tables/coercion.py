"""From a source's columns to a ``densewire.Table``: inference, NULL checks, and the conversions a
configured type asks for, as one table of (from type, to type) rules (:data:`RULES`).

A source reads each column into a :class:`Natural`: a SPEC.md 15.1 type, or a source-only kind
(``binary``, ``decimal``) that needs a declared type. Types follow the source's: SQLite and
PostgreSQL ``int2``/``int4`` give ``int32``, ``int8`` and SQLite integers ``int64``, PostgreSQL
``real`` ``float32``, ``double precision`` and SQLite ``REAL`` ``float64`` (SQLite's REAL is a
double), ``boolean`` (SQLite: a column declared ``BOOLEAN``) ``bool``, text ``string``, ``uuid``
(SQLite: declared ``UUID``, text or 16-byte blob) ``uuid``, pgvector ``vector(d)`` and ``float4[]`` /
``float8[]`` arrays of one length ``float32[d]``; files keep their Arrow types, with two inferences
for CSV and JSON Lines (which have no such types): a text column whose every value is a UUID is
``uuid``, and a column of number arrays of one length is ``float32[d]``. A type in the
configuration overrides the inferred one (``longitude = "float32"``: the float32 opt-in of SPEC.md
15.1, rounded as section 3.3 says).

A NULL (or a missing JSON key, or an empty CSV number) makes the load fail, naming the column and
the row: version 1.1 tables have no nulls.
"""

from __future__ import annotations

import uuid as uuidlib
from decimal import Decimal
from typing import Any, Callable, Sequence

import numpy as np
import orjson

from densewire import Column, Table
from densewire._tables._model import parse_uuid_text, to_float32

from .spec import VECTOR_RE, TableLoadError, TableSpec

__all__ = ["Natural", "RULES", "coerce", "build_table", "from_python", "null_error", "parse_vectors_text",
           "vectors", "kind_name"]


def null_error(name: str, row: int) -> TableLoadError:
    return TableLoadError(f"column {name!r} is NULL at row {row} (counting from 0): tables have no "
                          "nulls (SPEC.md 15); filter or COALESCE them in the source")


def kind_name(v: Any) -> str:
    return type(v).__name__


def parse_vectors_text(name: str, values: Sequence[str]) -> np.ndarray:
    """pgvector's text form ``[1,2,3]`` (also JSON arrays) -> (n, d) float64."""
    try:
        rows = orjson.loads(("[" + ",".join(v.strip() for v in values) + "]").encode())
    except orjson.JSONDecodeError:
        for i, v in enumerate(values):
            try:
                orjson.loads(v)
            except orjson.JSONDecodeError:
                raise TableLoadError(f"column {name!r} row {i}: {v[:60]!r} is not a vector like [1,2,3]") from None
        raise TableLoadError(f"column {name!r}: not vectors like [1,2,3]") from None
    return vectors(name, rows)


def vectors(name: str, rows: Sequence[Any]) -> np.ndarray:
    """A list of equal-length number lists -> (n, d) float64 (or float32 when given float32 arrays)."""
    if not rows:
        raise TableLoadError(f"column {name!r}: an empty table has no vector length; declare its type "
                             "(float32[d]) in the configuration")
    lengths = {len(r) if isinstance(r, (list, tuple, np.ndarray)) else -1 for r in rows}
    if -1 in lengths:
        i = next(i for i, r in enumerate(rows) if not isinstance(r, (list, tuple, np.ndarray)))
        raise TableLoadError(f"column {name!r} row {i}: {kind_name(rows[i])} is not a vector")
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


class Natural:
    """A source column before the configured type is applied: a densewire type or a source-only
    kind (``binary``, ``decimal``, ``text-vector``) that needs a declared type."""

    __slots__ = ("name", "type", "values")

    def __init__(self, name: str, type_: str, values: Any) -> None:
        self.name, self.type, self.values = name, type_, values


def from_python(name: str, values: Sequence[Any]) -> Natural:
    """Infer a column from Python values (SQLite rows)."""
    n = len(values)
    for i, v in enumerate(values):
        if v is None:
            raise null_error(name, i)
    kinds = {type(v) for v in values}
    if not kinds:  # no rows: no values to infer from; a declared type still applies
        return Natural(name, "string", [])
    if kinds <= {bool}:
        return Natural(name, "bool", np.array(values, dtype=np.bool_))
    if kinds <= {int}:
        try:
            arr = np.array(values, dtype=np.int64)
        except OverflowError:
            i = next(i for i, v in enumerate(values) if not -(1 << 63) <= v < (1 << 63))
            raise TableLoadError(f"column {name!r} row {i}: {values[i]} is beyond int64") from None
        return Natural(name, "int64", arr)
    if kinds <= {int, float}:
        return Natural(name, "float64", np.array(values, dtype=np.float64))
    if kinds <= {str}:
        return Natural(name, "string", list(values))
    if kinds <= {uuidlib.UUID}:
        return Natural(name, "uuid", np.frombuffer(b"".join(v.bytes for v in values), np.uint8).reshape(n, 16))
    if kinds <= {bytes, bytearray, memoryview}:
        return Natural(name, "binary", [bytes(v) for v in values])
    if kinds <= {Decimal, int}:
        return Natural(name, "decimal", values)
    if kinds <= {list, tuple}:
        return Natural(name, "vector", vectors(name, values))
    if len(kinds) > 1:
        first = type(values[0])
        i = next(i for i, v in enumerate(values) if type(v) is not first)
        raise TableLoadError(f"column {name!r} mixes {first.__name__} (row 0) and {kind_name(values[i])} "
                             f"(row {i}); cast it to one type in the query")
    raise TableLoadError(f"column {name!r}: values of type {kind_name(values[0])} are not supported; cast "
                         "the column in the query (to a number, boolean, text or uuid)")


def _uuid_from_strings(name: str, values: Sequence[str]) -> np.ndarray:
    arr, bad = parse_uuid_text(values)
    if arr is None:
        raise TableLoadError(f"column {name!r} row {bad}: {str(values[bad])[:60]!r} is not a UUID")
    return arr


def coerce(nat: Natural, target: str | None) -> Column:
    """The ``densewire.Column`` of a natural column, converted to ``target`` when one is declared
    (by the rule for its (type, target) in :data:`RULES`)."""
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
    try:
        return _apply_rule(name, typ, values, target)
    except TableLoadError:
        raise
    except Exception as exc:  # a Column validation error, with its column name
        raise TableLoadError(f"column {name!r} as {target}: {getattr(exc, 'message', exc)}") from None


#: A conversion: (column name, values, target type) -> the Column.
Rule = Callable[[str, Any, str], Column]


def _family(type_: str) -> str:
    """The key of a type in RULES: every vector type (``vector``, ``float32[d]``) is ``float32[d]``."""
    return "float32[d]" if type_ == "vector" or VECTOR_RE.fullmatch(type_) else type_


def _apply_rule(name: str, typ: str, values: Any, target: str) -> Column:
    rule = RULES.get((_family(typ), _family(target)))
    if rule is None:
        raise TableLoadError(f"column {name!r} is {typ}; it cannot be served as {target}")
    return rule(name, values, target)


# -- to float32[d] ----------------------------------------------------------------------------
def _vector_rule(read: Callable[[str, Any, int], np.ndarray]) -> Rule:
    """A rule to ``float32[d]``: ``read`` gives the (n, d) values, checked against the declared d."""

    def rule(name: str, values: Any, target: str) -> Column:
        d = int(VECTOR_RE.fullmatch(target).group(1))  # type: ignore[union-attr]
        arr = read(name, values, d)
        if arr.ndim != 2 or arr.shape[1] != d:
            raise TableLoadError(f"column {name!r}: vectors of {arr.shape[-1] if arr.ndim == 2 else '?'} items, "
                                 f"declared {target}")
        return Column(name, target, arr if arr.dtype == np.float32 else to_float32(arr))

    return rule


def _vectors_from_bytes(name: str, values: Sequence[bytes], d: int) -> np.ndarray:
    bad = next((i for i, b in enumerate(values) if len(b) != 4 * d), None)
    if bad is not None:
        raise TableLoadError(f"column {name!r} row {bad}: {len(values[bad])} bytes, not {4 * d} (float32[{d}])")
    return np.frombuffer(b"".join(values), "<f4").reshape(len(values), d)


# -- to uuid, to string -----------------------------------------------------------------------
def _uuid_from_bytes(name: str, values: Sequence[bytes], target: str) -> Column:
    bad = next((i for i, b in enumerate(values) if len(b) != 16), None)
    if bad is not None:
        raise TableLoadError(f"column {name!r} row {bad}: {len(values[bad])} bytes, a uuid has 16")
    return Column(name, "uuid", np.frombuffer(b"".join(values), np.uint8).reshape(-1, 16))


def _string_from_uuid(name: str, values: Any, target: str) -> Column:
    return Column(name, "string", [str(uuidlib.UUID(bytes=bytes(r))) for r in np.asarray(values)])


def _string_from_numbers(name: str, values: Any, target: str) -> Column:
    return Column(name, "string", [str(v) for v in np.asarray(values).tolist()])


# -- between numbers and booleans -------------------------------------------------------------
def _float32_from_float(name: str, values: Any, target: str) -> Column:
    return Column(name, "float32", to_float32(np.asarray(values)))  # section 3.3 rounding


def _float32_from_int(name: str, values: Any, target: str) -> Column:
    return Column(name, "float32", np.asarray(values).astype(np.float32))


def _float64(name: str, values: Any, target: str) -> Column:
    return Column(name, "float64", np.asarray(values).astype(np.float64))


def _int_from_float(name: str, values: Any, target: str) -> Column:
    arr = np.asarray(values)
    if not np.all(np.isfinite(arr)) or not np.all(arr == np.round(arr)):
        i = int(np.argmax(~np.isfinite(arr) | (arr != np.round(arr))))
        raise TableLoadError(f"column {name!r} row {i}: {arr[i]!r} is not an integer ({target})")
    return _int_from_int(name, arr.astype(np.int64), target)


def _int_from_int(name: str, values: Any, target: str) -> Column:
    lo, hi = (-(1 << 31), (1 << 31) - 1) if target == "int32" else (-(1 << 63), (1 << 63) - 1)
    a64 = np.asarray(values).astype(np.int64)
    bad = (a64 < lo) | (a64 > hi)
    if bad.any():
        i = int(np.argmax(bad))
        raise TableLoadError(f"column {name!r} row {i}: {int(a64[i])} is out of the {target} range")
    return Column(name, target, a64.astype("<i4" if target == "int32" else "<i8"))


def _bool_from_bool(name: str, values: Any, target: str) -> Column:
    return Column(name, "bool", np.asarray(values))


def _bool_from_int(name: str, values: Any, target: str) -> Column:
    arr = np.asarray(values)
    bad = (arr != 0) & (arr != 1)
    if bad.any():
        i = int(np.argmax(bad))
        raise TableLoadError(f"column {name!r} row {i}: {arr[i]} is not 0 or 1 (bool)")
    return Column(name, "bool", arr.astype(np.bool_))


# -- through an intermediate type -------------------------------------------------------------
def _via(first: Callable[[str, Any, str], tuple[str, Any]]) -> Rule:
    """A rule that converts to an intermediate type first (``first`` gives it and the values), then
    applies that type's rule (a missing one names the intermediate type)."""

    def rule(name: str, values: Any, target: str) -> Column:
        typ, values = first(name, values, target)
        return _apply_rule(name, typ, values, target)

    return rule


def _decimal_as_float64(name: str, values: Any, target: str) -> tuple[str, Any]:
    return "float64", np.array([float(v) for v in values], dtype=np.float64)


def _parsed_strings(name: str, values: Any, target: str) -> tuple[str, Any]:
    typ = "float64" if target.startswith("float") else ("bool" if target == "bool" else "int64")
    return typ, _parse_strings(name, values, target)


_INTS, _FLOATS, _NUMBERS = ("int32", "int64"), ("float32", "float64"), ("bool", "int32", "int64", "float32", "float64")

#: (from type, to type) -> the rule converting a column; a pair not here cannot be converted
#: ("column 'x' is T; it cannot be served as U"). Vector types are keyed ``float32[d]``.
RULES: dict[tuple[str, str], Rule] = {
    ("float32[d]", "float32[d]"): _vector_rule(lambda name, values, d: np.asarray(values)),
    ("string", "float32[d]"): _vector_rule(lambda name, values, d: parse_vectors_text(name, values)),
    ("binary", "float32[d]"): _vector_rule(_vectors_from_bytes),
    ("string", "uuid"): lambda name, values, target: Column(name, "uuid", _uuid_from_strings(name, values)),
    ("binary", "uuid"): _uuid_from_bytes,
    ("uuid", "string"): _string_from_uuid,
    **{(t, "string"): _string_from_numbers for t in ("int32", "int64", "bool")},
    **{(t, "float32"): _float32_from_float for t in _FLOATS},
    **{(t, "float32"): _float32_from_int for t in ("bool", *_INTS)},
    **{(t, "float64"): _float64 for t in _NUMBERS},
    **{(f, t): _int_from_float for f in _FLOATS for t in _INTS},
    **{(f, t): _int_from_int for f in ("bool", *_INTS) for t in _INTS},
    ("bool", "bool"): _bool_from_bool,
    **{(t, "bool"): _bool_from_int for t in _INTS},
    **{("decimal", t): _via(_decimal_as_float64) for t in _NUMBERS},
    **{("string", t): _via(_parsed_strings) for t in _NUMBERS},
}


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


def build_table(name: str, naturals: list[Natural], spec: TableSpec, declared: dict[str, str] | None = None) -> Any:
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
    cols = [coerce(c, overrides.get(c.name)) for c in naturals]
    return Table(name, cols)
