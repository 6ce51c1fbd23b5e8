"""Arrow columns (from pyarrow's readers of CSV, JSON Lines, Parquet and Arrow IPC files) to
:class:`~..coercion.Natural` columns, then to a table."""

from __future__ import annotations

from typing import Any

import numpy as np

from densewire._optional import require
from densewire._tables._model import parse_uuid_text

from ..coercion import Natural, build_table, null_error, parse_vectors_text
from ..spec import VECTOR_RE, TableLoadError, TableSpec

__all__ = ["arrow_target", "table_from_arrow", "fixed_binary"]

_FEATURE = "file tables"


def arrow_target(type_: str) -> Any:
    pa = require("pyarrow", extra="arrow", feature=_FEATURE)

    # int32 and float32 are read wide, then narrowed with a range check / section 3.3 rounding
    return {"bool": pa.bool_(), "int32": pa.int64(), "int64": pa.int64(), "float32": pa.float64(),
            "float64": pa.float64()}.get(type_, pa.string())


def _from_arrow_column(name: str, arr: Any, infer_text: bool, declared: str | None) -> Natural:
    pa = require("pyarrow", extra="arrow", feature=_FEATURE)
    pc = require("pyarrow.compute", extra="arrow", feature=_FEATURE)

    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
    if arr.null_count:
        raise null_error(name, int(pc.index(arr.is_null(), True).as_py()))
    t = arr.type
    if pa.types.is_dictionary(t):
        arr = arr.dictionary_decode()
        t = arr.type
    if isinstance(t, getattr(pa, "BaseExtensionType", pa.ExtensionType)):
        ext = getattr(t, "extension_name", "")
        arr = arr.storage
        t = arr.type
        if ext == "arrow.uuid" and pa.types.is_fixed_size_binary(t) and t.byte_width == 16:
            return Natural(name, "uuid", fixed_binary(arr, 16))
    if pa.types.is_boolean(t):
        return Natural(name, "bool", arr.to_numpy(zero_copy_only=False).astype(np.bool_))
    if pa.types.is_integer(t):
        a = arr.to_numpy(zero_copy_only=False)
        if pa.types.is_uint64(t) and len(a) and int(a.max()) >= (1 << 63):
            i = int(np.argmax(a >= (1 << 63)))
            raise TableLoadError(f"column {name!r} row {i}: {int(a[i])} is beyond int64")
        small = t.bit_width < 32 or (t.bit_width == 32 and pa.types.is_signed_integer(t))
        return Natural(name, "int32" if small else "int64", a.astype("<i4" if small else "<i8"))
    if pa.types.is_floating(t):
        a = arr.to_numpy(zero_copy_only=False)
        return Natural(name, "float64" if t.bit_width == 64 else "float32",
                       a.astype("<f8" if t.bit_width == 64 else "<f4"))
    if pa.types.is_decimal(t):
        return Natural(name, "decimal", arr.to_pylist())
    if pa.types.is_string(t) or pa.types.is_large_string(t) or getattr(pa.types, "is_string_view", lambda _: False)(t):
        values = arr.to_pylist()
        if infer_text and declared is None and values:
            uu, _ = parse_uuid_text(values)
            if uu is not None:
                return Natural(name, "uuid", uu)
            if all(v[:1] == "[" and v[-1:] == "]" for v in values):  # pgvector / JSON text of vectors
                try:
                    return Natural(name, "vector", parse_vectors_text(name, values))
                except TableLoadError:
                    pass
        return Natural(name, "string", values)
    if pa.types.is_fixed_size_binary(t):
        if t.byte_width == 16 and declared in (None, "uuid"):
            return Natural(name, "uuid", fixed_binary(arr, 16))
        return Natural(name, "binary", arr.to_pylist())
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return Natural(name, "binary", arr.to_pylist())
    if pa.types.is_fixed_size_list(t) or pa.types.is_list(t) or pa.types.is_large_list(t):
        vt = t.value_type
        if not (pa.types.is_floating(vt) or pa.types.is_integer(vt)):
            raise TableLoadError(f"column {name!r}: lists of {vt} are not supported (vectors are lists of numbers)")
        n = len(arr)
        if pa.types.is_fixed_size_list(t):
            d = t.list_size
        else:
            lengths = pc.list_value_length(arr).to_numpy(zero_copy_only=False)
            if n and (lengths != lengths[0]).any():
                i = int(np.argmax(lengths != lengths[0]))
                raise TableLoadError(f"column {name!r} row {i}: a vector of {lengths[i]} items where row 0 has "
                                     f"{lengths[0]}; a float32[d] column needs one length")
            d = int(lengths[0]) if n else 0
        flat = arr.flatten()
        if flat.null_count:
            k = int(pc.index(flat.is_null(), True).as_py())
            raise null_error(name, k // d if d else 0)
        if n == 0 or d == 0:
            if declared and VECTOR_RE.fullmatch(declared):
                return Natural(name, "vector", np.empty((n, int(declared[8:-1])), np.float32))
            raise TableLoadError(f"column {name!r}: vectors of length 0 (or no rows): declare float32[d]")
        vals = flat.to_numpy(zero_copy_only=False)
        vals = vals if vals.dtype == np.float32 else vals.astype(np.float64)
        return Natural(name, "vector", vals.reshape(n, d))
    raise TableLoadError(f"column {name!r}: Arrow type {t} is not supported; declare the column 'string' "
                         "(CSV) or convert it in the source (to a number, boolean, text, uuid or vector)")


def fixed_binary(arr: Any, width: int) -> np.ndarray:
    bufs = arr.buffers()
    data = np.frombuffer(bufs[1], np.uint8) if bufs[1] is not None else np.empty(0, np.uint8)
    start = arr.offset * width
    return data[start:start + len(arr) * width].reshape(len(arr), width).copy()


def table_from_arrow(spec: TableSpec, pt: Any, infer_text: bool) -> Any:
    declared_meta: dict[str, str] = {}
    for f in pt.schema:
        meta = f.metadata or {}
        t = meta.get(b"densewire.type")
        if t:
            declared_meta[f.name] = t.decode()
    overrides = {**declared_meta, **dict(spec.columns)}
    naturals = [_from_arrow_column(f.name, pt.column(i), infer_text, overrides.get(f.name))
                for i, f in enumerate(pt.schema)]
    return build_table(spec.name, naturals, spec, declared_meta)
