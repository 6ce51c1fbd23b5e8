"""Arrow IPC stream tables (SPEC.md section 15.7), through pyarrow (the ``densewire[arrow]`` extra).

Encoding hands the column arrays to pyarrow without copying them (``Array.from_buffers`` over the
numpy memory), except bool (Arrow packs bits) and strings. Decoding reads the stream in place:
int, float, uuid and vector columns of a single-batch stream are numpy views into the body (IPC
buffers are 8-byte aligned); bool is unpacked from bits and strings are built, which copies.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._arrow import _pyarrow
from .._errors import InvalidFieldError, MalformedError, TruncatedError, UnknownDtypeError
from ._model import TABLE_TYPES, Column, Table, register_arrow_bridge, storage_dtype, vector_dims

__all__ = ["encode_arrow_table", "decode_arrow_table", "to_arrow", "from_arrow", "record_batch"]


def _uuid_type(pa) -> Any:
    return pa.uuid() if hasattr(pa, "uuid") else pa.binary(16)


def _array(pa, col: Column, n: int):
    t = col.type
    if t == "string":
        return pa.array(col.values, pa.string())
    if t == "bool":
        return pa.array(np.asarray(col.values, np.bool_), pa.bool_())
    data = pa.py_buffer(np.ascontiguousarray(col.values)) if n else None
    if t == "uuid":
        storage = pa.Array.from_buffers(pa.binary(16), n, [None, data])
        return pa.ExtensionArray.from_storage(pa.uuid(), storage) if hasattr(pa, "uuid") else storage
    d = vector_dims(t)
    if d:
        items = pa.Array.from_buffers(pa.float32(), n * d, [None, data])
        return pa.FixedSizeListArray.from_arrays(items, type=pa.list_(pa.field("item", pa.float32(), nullable=False), d))
    return pa.Array.from_buffers(getattr(pa, t)(), n, [None, data])


def record_batch(table: Table):
    """One ``pyarrow.RecordBatch`` with section 15.7's types and metadata (zero-copy for numeric columns)."""
    pa = _pyarrow()
    fields, arrays = [], []
    for col in table.columns:
        arr = _array(pa, col, table.rows)
        meta = {"densewire.type": col.type}
        if col.type == "uuid" and not hasattr(pa, "uuid"):  # older pyarrow: the extension by its metadata
            meta.update({"ARROW:extension:name": "arrow.uuid", "ARROW:extension:metadata": ""})
        fields.append(pa.field(col.name, arr.type, nullable=False, metadata=meta))
        arrays.append(arr)
    schema = pa.schema(fields, metadata={"densewire.version": "1", "densewire.table": table.name})
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def to_arrow(table: Table):
    """A ``pyarrow.Table`` with section 15.7's types and metadata (zero-copy for numeric columns)."""
    pa = _pyarrow()
    return pa.Table.from_batches([record_batch(table)])


def encode_arrow_table(table: Table) -> bytes:
    """One schema, one record batch, end of stream."""
    pa = _pyarrow()
    batch = record_batch(table)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_batch(batch)
    return sink.getvalue().to_pybytes()


def _infer_type(pa, typ) -> str | None:
    if isinstance(typ, pa.BaseExtensionType):
        if typ.extension_name == "arrow.uuid":
            return "uuid"
        typ = typ.storage_type
    if pa.types.is_boolean(typ):
        return "bool"
    for name in ("int32", "int64", "float32", "float64"):
        if typ == getattr(pa, name)():
            return name
    if pa.types.is_string(typ) or pa.types.is_large_string(typ):
        return "string"
    if pa.types.is_fixed_size_binary(typ) and typ.byte_width == 16:
        return "uuid"
    if pa.types.is_fixed_size_list(typ) and typ.value_type == pa.float32():
        return f"float32[{typ.list_size}]"
    return None


def _matches(pa, type_: str, typ) -> bool:
    if isinstance(typ, pa.BaseExtensionType):
        if typ.extension_name != "arrow.uuid":
            return False
        typ = typ.storage_type
    if type_ == "string":
        return pa.types.is_string(typ) or pa.types.is_large_string(typ)
    if type_ == "uuid":
        return pa.types.is_fixed_size_binary(typ) and typ.byte_width == 16
    d = vector_dims(type_)
    if d:
        return pa.types.is_fixed_size_list(typ) and typ.list_size == d and typ.value_type == pa.float32()
    return typ == (pa.bool_() if type_ == "bool" else getattr(pa, type_)())


def _values(pa, type_: str, arr, n: int):
    """Column values from a (single-chunk) Arrow array: a view over its buffer where possible."""
    if isinstance(arr.type, pa.BaseExtensionType):
        arr = arr.storage
    if type_ == "string":
        return arr.to_pylist()
    if type_ == "bool":
        return arr.to_numpy(zero_copy_only=False).astype(np.bool_, copy=False)
    d = vector_dims(type_)
    if d:
        child = arr.values
        start = arr.offset * d + child.offset
        buf = child.buffers()[1]
        count = n * d
    else:
        buf = arr.buffers()[1]
        start = arr.offset
        count = n * (16 if type_ == "uuid" else 1)
    dt = storage_dtype(type_)
    if n == 0 or buf is None:
        return np.empty((0, 16) if type_ == "uuid" else (0, d) if d else 0, dt)
    values = np.frombuffer(buf, dt, count=count, offset=start * dt.itemsize)
    return values.reshape(n, 16) if type_ == "uuid" else values.reshape(n, d) if d else values


def from_arrow(table, name: str | None = None) -> Table:
    """A Table from a ``pyarrow.Table`` or ``RecordBatch`` (types from ``densewire.type``, else inferred)."""
    pa = _pyarrow()
    if isinstance(table, pa.RecordBatch):
        table = pa.Table.from_batches([table])
    schema = table.schema
    meta = {k.decode(): v.decode() for k, v in (schema.metadata or {}).items()}
    columns = []
    n = table.num_rows
    seen: set[str] = set()
    for k, field in enumerate(schema):
        if not field.name or field.name in seen:  # SPEC.md 15.7: Arrow allows both, a table does not
            raise InvalidFieldError(f"column {k} needs a unique non-empty name, got {field.name!r}",
                                    field=f"columns[{k}].name")
        seen.add(field.name)
        fmeta = field.metadata or {}
        declared = fmeta.get(b"densewire.type")
        if declared is not None:
            type_ = declared.decode()
            if type_ not in TABLE_TYPES and not vector_dims(type_):
                raise UnknownDtypeError(f"unknown column type {type_!r}", field=field.name)
            if not _matches(pa, type_, field.type):
                raise InvalidFieldError(f"a {type_} column cannot have the Arrow type {field.type}", field=field.name)
        else:
            type_ = _infer_type(pa, field.type)
            if type_ is None:
                raise InvalidFieldError(f"no densewire column type for the Arrow type {field.type}", field=field.name)
        chunked = table.column(k)
        if chunked.null_count:
            raise InvalidFieldError(f"the column has {chunked.null_count} nulls (tables have none)", field=field.name)
        arr = chunked.chunk(0) if chunked.num_chunks == 1 else (
            pa.concat_arrays(chunked.chunks) if chunked.num_chunks else pa.array([], field.type))
        columns.append(Column(field.name, type_, _values(pa, type_, arr, n)))
    return Table(meta.get("densewire.table", "") if name is None else name, columns, n)


def decode_arrow_table(body) -> Table:
    """Decode a stream; int, float, uuid and vector columns of a one-batch stream are views into ``body``."""
    pa = _pyarrow()
    size = memoryview(body).nbytes
    try:
        reader = pa.ipc.open_stream(pa.py_buffer(body))
        batches = list(reader)
    except (pa.ArrowException, OSError) as exc:
        short = "expected to" in str(exc).lower() or "end of stream" in str(exc).lower()
        cls = TruncatedError if short else MalformedError
        raise cls(f"not a readable Arrow IPC stream: {exc}", offset=size if short else None) from None
    if not batches:  # SPEC.md section 15.7: even an empty table has its (empty) record batch
        raise TruncatedError("the Arrow stream ends before its first record batch", offset=size)
    try:
        return from_arrow(pa.Table.from_batches(batches, schema=reader.schema))
    except UnicodeDecodeError as exc:  # pyarrow's error for a name or metadata that is not UTF-8 (found by fuzzing)
        raise MalformedError(f"a name or metadata value of the Arrow schema is not valid UTF-8 (at its byte {exc.start})") from None


register_arrow_bridge(to_arrow, from_arrow)
