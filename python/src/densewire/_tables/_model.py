"""Tables (SPEC.md section 15): column types, ``Column``, ``Table`` and the ``Densewire-Columns`` header.

A column holds its values in the columnar form of section 15.8: a numpy array for the fixed-width
types (little-endian; bool as ``np.bool_``, uuid as ``(n, 16)`` uint8 in RFC 9562 byte order,
``float32[d]`` as ``(n, d)`` float32) and a ``list[str]`` for strings. Arrays handed to a
``Column`` are kept as they are when they already have the column's dtype (decoders hand over
read-only views into the received body), and converted otherwise.
"""

from __future__ import annotations

import re
import uuid as uuidlib
from typing import Any, Callable, Final, Iterable, Sequence
from urllib.parse import quote, unquote_to_bytes

import numpy as np

from .._errors import InvalidFieldError, UnknownDtypeError

__all__ = ["Table", "Column", "TABLE_TYPES", "check_type", "vector_dims", "item_width", "value_width",
           "columns_header", "parse_columns_header", "table_headers", "uuid_text", "parse_uuid_text",
           "storage_dtype"]

#: The scalar types of section 15.1, in Protobuf ``ColumnType`` order; ``float32[d]`` is the vector type.
TABLE_TYPES: Final[tuple[str, ...]] = ("bool", "int32", "int64", "float32", "float64", "string", "uuid")
_STORAGE: Final[dict[str, np.dtype]] = {
    "bool": np.dtype(np.bool_), "int32": np.dtype("<i4"), "int64": np.dtype("<i8"),
    "float32": np.dtype("<f4"), "float64": np.dtype("<f8"), "uuid": np.dtype("u1"),
}
_WIDTH: Final[dict[str, int]] = {"bool": 1, "int32": 4, "int64": 8, "float32": 4, "float64": 8, "uuid": 16}
_VECTOR = re.compile(r"float32\[([1-9][0-9]*)\]")
_INT_RANGE = {"int32": (-(1 << 31), (1 << 31) - 1), "int64": (-(1 << 63), (1 << 63) - 1)}


def vector_dims(type_: str) -> int | None:
    """``d`` of a ``float32[d]`` type name, None for every other name."""
    m = _VECTOR.fullmatch(type_) if isinstance(type_, str) else None
    return int(m.group(1)) if m else None


def check_type(type_: object, field: str | None = None) -> str:
    """The type name if section 15.1 defines it; ``unknown_dtype`` otherwise (``invalid_field`` if not a string)."""
    if not isinstance(type_, str):
        raise InvalidFieldError(f"a column type must be a string, got {type(type_).__name__}", field=field)
    if type_ in TABLE_TYPES or vector_dims(type_):
        return type_
    raise UnknownDtypeError(f"unknown column type {type_!r}; expected one of {', '.join(TABLE_TYPES)} "
                            "or float32[d]", field=field)


def item_width(type_: str) -> int:
    """Bytes of one item as byte-stream-split sees it (4 for vectors: their float32 items)."""
    return 4 if vector_dims(type_) else _WIDTH[type_]


def value_width(type_: str) -> int:
    """Bytes of one value of a fixed-width type (``4d`` for ``float32[d]``)."""
    d = vector_dims(type_)
    return 4 * d if d else _WIDTH[type_]


def storage_dtype(type_: str) -> np.dtype:
    """The numpy dtype of a fixed-width column's array."""
    return np.dtype("<f4") if vector_dims(type_) else _STORAGE[type_]


# ------------------------------------------------------------------------------ uuid text
_HEX = np.frombuffer(b"0123456789abcdef", np.uint8)
_DASHES = (8, 13, 18, 23)
_UUID_HEX_POS = np.array([i for i in range(36) if i not in _DASHES])
_NIBBLE = np.full(256, 255, np.uint8)
_NIBBLE[np.frombuffer(b"0123456789", np.uint8)] = np.arange(10)
_NIBBLE[np.frombuffer(b"abcdef", np.uint8)] = np.arange(10, 16)
_NIBBLE[np.frombuffer(b"ABCDEF", np.uint8)] = np.arange(10, 16)


def uuid_text(values: np.ndarray) -> np.ndarray:
    """``(n, 16)`` uuid bytes -> ``(n, 36)`` uint8 of canonical lowercase text, vectorised."""
    values = np.ascontiguousarray(values, np.uint8).reshape(-1, 16)
    out = np.full((len(values), 36), ord("-"), np.uint8)
    nibbles = np.empty((len(values), 32), np.uint8)
    nibbles[:, 0::2] = values >> 4
    nibbles[:, 1::2] = values & 15
    out[:, _UUID_HEX_POS] = _HEX[nibbles]
    return out


def parse_uuid_text(values: Sequence[Any]) -> tuple[np.ndarray | None, int]:
    """Canonical uuid texts (lower or upper hex) -> ``((n, 16) uint8, -1)``, or ``(None, i)`` with the
    index of the first value that is not one (not a string, or not ``8-4-4-4-12`` hex)."""
    n = len(values)
    if n == 0:
        return np.empty((0, 16), np.uint8), -1
    if not all(type(v) is str for v in values):
        return None, next(i for i, v in enumerate(values) if type(v) is not str)
    if set(map(len, values)) != {36}:
        return None, next(i for i, v in enumerate(values) if len(v) != 36)
    try:
        text = np.frombuffer("".join(values).encode("ascii"), np.uint8).reshape(n, 36)
    except UnicodeEncodeError:
        return None, next(i for i, v in enumerate(values) if not v.isascii())
    nib = _NIBBLE[text[:, _UUID_HEX_POS]]
    bad = (nib == 255).any(axis=1) | (text[:, list(_DASHES)] != ord("-")).any(axis=1)
    if bad.any():
        return None, int(np.argmax(bad))
    return (nib[:, 0::2] << 4) | nib[:, 1::2], -1


# ------------------------------------------------------------------------------ values
def _fail(name: str, message: str) -> InvalidFieldError:
    return InvalidFieldError(f"column {name!r}: {message}", field=name)


def _normalize(name: str, type_: str, values: Any) -> Any:
    """The values of a column in their columnar form (section 15.8), converting only when needed."""
    if type_ == "string":
        if isinstance(values, np.ndarray):
            values = values.tolist()
        values = values if isinstance(values, list) else list(values)
        if not all(type(v) is str for v in values):
            bad = next((i for i, v in enumerate(values) if not isinstance(v, str)), None)
            if bad is not None:
                raise _fail(name, f"row {bad}: a string column cannot hold {type(values[bad]).__name__}")
            values = [str(v) for v in values]  # str subclasses
        return values
    if type_ == "uuid":
        if isinstance(values, np.ndarray) and values.dtype.kind in "uiV" and values.dtype.itemsize in (1, 16):
            arr = values.view(np.uint8) if values.dtype.itemsize == 16 else values
            arr = arr.reshape(-1, 16) if arr.ndim == 1 and arr.size % 16 == 0 and values.dtype.itemsize == 16 else arr
            if arr.ndim != 2 or arr.shape[1] != 16:
                raise _fail(name, f"uuid values must be an (n, 16) uint8 array, got shape {arr.shape}")
            return arr if arr.dtype == np.uint8 else arr.astype(np.uint8)
        items = list(values)
        out = np.empty((len(items), 16), np.uint8)
        for i, v in enumerate(items):
            if isinstance(v, uuidlib.UUID):
                out[i] = np.frombuffer(v.bytes, np.uint8)
            elif isinstance(v, (bytes, bytearray, memoryview)) and len(v) == 16:
                out[i] = np.frombuffer(bytes(v), np.uint8)
            elif isinstance(v, str):
                try:
                    out[i] = np.frombuffer(uuidlib.UUID(v).bytes, np.uint8)
                except ValueError:
                    raise _fail(name, f"row {i}: {v!r} is not a UUID") from None
            else:
                raise _fail(name, f"row {i}: a uuid column cannot hold {type(v).__name__}")
        return out
    d = vector_dims(type_)
    target = storage_dtype(type_)
    arr = np.asarray(values) if isinstance(values, np.ndarray) else None
    if arr is None:
        values = list(values)
        if type_ in ("int32", "int64"):
            if any(type(v) is bool for v in values):
                raise _fail(name, "an integer column cannot hold booleans")
            try:
                arr = np.array(values, dtype=np.int64) if values else np.empty(0, np.int64)
            except (OverflowError, TypeError, ValueError) as exc:
                raise _fail(name, f"not {type_} values: {exc}") from None
        elif type_ == "bool":
            if not all(type(v) in (bool, np.bool_) for v in values):
                raise _fail(name, "a bool column holds True and False only")
            arr = np.array(values, dtype=np.bool_)
        else:
            try:
                arr = np.array(values, dtype=np.float64) if values else np.empty((0, d) if d else 0, np.float64)
            except (TypeError, ValueError) as exc:
                raise _fail(name, f"not numbers: {exc}") from None
    if d:
        if arr.ndim == 1 and arr.size == 0:
            arr = arr.reshape(0, d)
        if arr.ndim != 2 or arr.shape[1] != d:
            raise _fail(name, f"{type_} values must be an (n, {d}) array, got shape {arr.shape}")
    elif arr.ndim != 1:
        raise _fail(name, f"{type_} values must be one-dimensional, got shape {arr.shape}")
    if arr.dtype == target:
        return arr
    kind = arr.dtype.kind
    if type_ == "bool":
        if kind in "iu" and (arr.size == 0 or (arr.min() >= 0 and arr.max() <= 1)):
            return arr.astype(np.bool_)
        raise _fail(name, f"a bool column cannot hold a numpy {arr.dtype} array")
    if type_ in ("int32", "int64"):
        if kind not in "iu":
            raise _fail(name, f"an {type_} column cannot hold a numpy {arr.dtype} array")
        lo, hi = _INT_RANGE[type_]
        if arr.size and (int(arr.min()) < lo or int(arr.max()) > hi):
            raise _fail(name, f"values out of the {type_} range")
        return arr.astype(target)
    if kind not in "fiu":
        raise _fail(name, f"a {type_} column cannot hold a numpy {arr.dtype} array")
    if target == np.float32 and arr.dtype.itemsize > 4 and kind == "f":
        return to_float32(arr)
    return arr.astype(target)


def to_float32(a: np.ndarray) -> np.ndarray:
    """float64 -> float32 by SPEC.md section 3.3: round to nearest even, overflow to infinity,
    NaN to 0x7FC00000 with the sign kept."""
    a = np.asarray(a, np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        f = a.astype("<f4")
    nan = np.isnan(a)
    if nan.any():
        f.view("<u4")[nan] = np.where(np.signbit(a[nan]), 0xFFC00000, 0x7FC00000).astype("<u4")
    return f


class Column:
    """One named, typed column (SPEC.md section 15.1).

    >>> Column("status", "int32", [1, 0, 1]).values
    array([1, 0, 1], dtype=int32)
    """

    __slots__ = ("name", "type", "values")
    __hash__ = None  # type: ignore[assignment]

    def __init__(self, name: str, type: str, values: Any) -> None:  # noqa: A002 (the spec's word)
        if not isinstance(name, str) or not name:
            raise InvalidFieldError(f"a column name must be a non-empty string, got {name!r}", field="name")
        self.name = name
        self.type = check_type(type, field=name)
        self.values = _normalize(name, self.type, values)

    @property
    def dims(self) -> int | None:
        """``d`` for ``float32[d]``, None otherwise."""
        return vector_dims(self.type)

    def __len__(self) -> int:
        return len(self.values)

    def to_bytes(self) -> bytes | memoryview:
        """The fixed-width values, little-endian, value after value (PLAIN); a view when contiguous."""
        if self.type == "string":
            raise TypeError("a string column has no fixed-width bytes")
        a = np.ascontiguousarray(self.values)
        return memoryview(a).cast("B") if a.size else b""

    def _bits(self) -> Any:
        if self.type == "string":
            return self.values
        a = np.ascontiguousarray(self.values)
        return a.view(np.uint8).tobytes() if a.dtype != np.bool_ else a.tobytes()

    def __eq__(self, other: object) -> bool:
        """Equal names, types and values bit for bit (NaN payloads and -0.0 count)."""
        if not isinstance(other, Column):
            return NotImplemented
        return (self.name == other.name and self.type == other.type and len(self) == len(other)
                and self._bits() == other._bits())

    def __repr__(self) -> str:
        return f"Column({self.name!r}, {self.type!r}, <{len(self)} values>)"


class Table:
    """``n`` rows of named, typed columns (SPEC.md section 15).

    >>> t = Table("t", [Column("a", "int32", [1, 2]), Column("b", "string", ["x", "y"])])
    >>> t.rows, [c.name for c in t.columns]
    (2, ['a', 'b'])
    """

    __slots__ = ("name", "columns", "rows")
    __hash__ = None  # type: ignore[assignment]

    def __init__(self, name: str, columns: Iterable[Column], rows: int | None = None) -> None:
        if not isinstance(name, str):
            raise InvalidFieldError(f"the table name must be a string, got {type(name).__name__}", field="name")
        self.name = name
        self.columns = list(columns)
        seen: set[str] = set()
        for c in self.columns:
            if not isinstance(c, Column):
                raise TypeError(f"columns must be Column objects, got {type(c).__name__}")
            if c.name in seen:
                raise InvalidFieldError(f"column name {c.name!r} occurs twice", field=c.name)
            seen.add(c.name)
        if rows is None:
            rows = len(self.columns[0]) if self.columns else 0
        if not isinstance(rows, (int, np.integer)) or rows < 0:
            raise InvalidFieldError(f"rows must be a non-negative integer, got {rows!r}", field="rows")
        for c in self.columns:
            if len(c) != rows:
                raise InvalidFieldError(f"column {c.name!r} holds {len(c)} values, the table has {rows} rows",
                                        field=c.name)
        self.rows = int(rows)

    def column(self, name: str) -> Column:
        for c in self.columns:
            if c.name == name:
                return c
        raise KeyError(name)

    @property
    def schema(self) -> list[tuple[str, str]]:
        """``[(name, type), ...]`` in column order."""
        return [(c.name, c.type) for c in self.columns]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Table):
            return NotImplemented
        return self.name == other.name and self.rows == other.rows and self.columns == other.columns

    def __repr__(self) -> str:
        return f"Table({self.name!r}, rows={self.rows}, columns={columns_header(self)!r})"

    def to_arrow(self):
        """A ``pyarrow.Table`` (section 15.7 types and metadata); needs the ``arrow`` extra."""
        return _ARROW_BRIDGE["to_arrow"](self)

    @classmethod
    def from_arrow(cls, table, name: str | None = None) -> "Table":
        """From a ``pyarrow.Table`` or ``RecordBatch``: types from ``densewire.type`` field metadata,
        else from the Arrow types; the name from ``densewire.table`` unless given."""
        return _ARROW_BRIDGE["from_arrow"](table, name)


#: The pyarrow bridge behind ``Table.to_arrow`` / ``Table.from_arrow``: ``._arrow`` registers its
#: functions when the package loads, so that the model, at the bottom of the import graph, imports
#: no format module.
_ARROW_BRIDGE: dict[str, Callable[..., Any]] = {}


def register_arrow_bridge(to_arrow: Callable[[Table], Any], from_arrow: Callable[..., Table]) -> None:
    """Called once by ``._arrow``: the functions ``Table.to_arrow`` and ``Table.from_arrow`` call."""
    _ARROW_BRIDGE.update(to_arrow=to_arrow, from_arrow=from_arrow)


# ------------------------------------------------------------------------------ Densewire-Columns
COLUMNS_HEADER = "Densewire-Columns"
_BAD_PCT = re.compile(r"%(?![0-9A-Fa-f]{2})")


def columns_header(table: Table | Sequence[Column] | Sequence[tuple[str, str]]) -> str:
    """The ``Densewire-Columns`` value: ``name=type`` joined by ``,``, names percent-encoded (RFC 3986)."""
    cols = table.columns if isinstance(table, Table) else table
    pairs = [(c.name, c.type) if isinstance(c, Column) else tuple(c) for c in cols]
    return ",".join(f"{quote(name, safe='-._~')}={type_}" for name, type_ in pairs)


def parse_columns_header(value: str, field: str = COLUMNS_HEADER) -> list[tuple[str, str]]:
    """Parse a ``Densewire-Columns`` value into ``[(name, type), ...]``.

    A malformed value (an entry without ``=``, a bad percent escape, a name that is empty, not UTF-8
    or repeated) is ``invalid_field`` on the header; an unknown type is ``unknown_dtype``.

    >>> parse_columns_header("name%20x=int32,v=float32[3]")
    [('name x', 'int32'), ('v', 'float32[3]')]
    """
    if not isinstance(value, str):
        raise InvalidFieldError(f"must be a string, got {type(value).__name__}", field=field)
    if value == "":
        return []
    out: list[tuple[str, str]] = []
    seen: set[str] = set()
    for k, entry in enumerate(value.split(",")):
        name_enc, eq, type_ = entry.partition("=")
        if not eq:
            raise InvalidFieldError(f"entry {k} ({entry!r}) is not name=type", field=field)
        if _BAD_PCT.search(name_enc):
            raise InvalidFieldError(f"entry {k}: bad percent escape in {name_enc!r}", field=field)
        try:
            name = unquote_to_bytes(name_enc).decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidFieldError(f"entry {k}: the name {name_enc!r} is not UTF-8", field=field) from None
        if not name:
            raise InvalidFieldError(f"entry {k} has an empty name", field=field)
        if name in seen:
            raise InvalidFieldError(f"column {name!r} occurs twice", field=field)
        seen.add(name)
        out.append((name, check_type(type_, field=field)))
    return out


def table_headers(table: Table) -> dict[str, str]:
    """The response headers of section 15.2 (``Densewire-Version``, ``-Table``, ``-Rows``, ``-Columns``).
    ``Densewire-Table`` is percent-encoded like column names when the name is not header-safe ASCII."""
    name = table.name
    safe = name.isascii() and name.isprintable() and name == name.strip()
    return {"Densewire-Version": "1", "Densewire-Table": name if safe else quote(name, safe="-._~"),
            "Densewire-Rows": str(table.rows), COLUMNS_HEADER: columns_header(table)}


def schema_of(columns: Any, field: str = COLUMNS_HEADER) -> list[tuple[str, str]]:
    """The ``columns=`` argument of the decoders: a header value, a Table, Columns or (name, type) pairs."""
    if columns is None:
        raise InvalidFieldError("this format carries no types: pass columns= (the Densewire-Columns header)",
                                field=field)
    if isinstance(columns, str):
        return parse_columns_header(columns, field)
    if isinstance(columns, Table):
        return columns.schema
    out = []
    for c in columns:
        name, type_ = (c.name, c.type) if isinstance(c, Column) else (c["name"], c["type"]) if isinstance(c, dict) else c
        out.append((name, check_type(type_, field=field)))
    return out
