"""Arrow IPC stream (SPEC.md section 10), through pyarrow (the ``densewire[arrow]`` extra).

Decoding is zero-copy: pyarrow reads the stream in place and the tensor is a numpy view over the
values buffer of the ``embedding`` column.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._errors import InvalidFieldError, MalformedError, TruncatedError, UnknownDtypeError
from ._coerce import as_embeddings
from ._tensor import DTYPES, Embeddings, Tensor, Usage, check_no_kind, row_bytes, storage_dtype

__all__ = ["encode_arrow", "decode_arrow"]


def _pyarrow() -> Any:
    try:
        import pyarrow as pa
        import pyarrow.ipc  # noqa: F401
    except ImportError:
        raise ImportError("the Arrow format needs pyarrow: pip install 'densewire[arrow]'") from None
    return pa


def _value_type(pa, dtype: str):
    return {"float32": pa.float32(), "float16": pa.float16(), "bfloat16": pa.uint16(), "float64": pa.float64(),
            "int8": pa.int8(), "uint8": pa.uint8()}[dtype]


def encode_arrow(emb: Embeddings | Tensor) -> bytes:
    """One schema, one record batch with the ``embedding`` column, end of stream."""
    pa = _pyarrow()
    emb = as_embeddings(emb)
    t = emb.tensor
    meta = {"densewire.version": "1", "densewire.dtype": t.dtype, "densewire.dimensions": str(t.d)}
    if emb.model is not None:
        meta["densewire.model"] = emb.model
    if emb.usage is not None:
        meta["densewire.prompt_tokens"] = str(emb.usage.prompt_tokens)
        meta["densewire.total_tokens"] = str(emb.usage.total_tokens)
    if emb.quantization is not None:
        meta["densewire.quantization"] = emb.quantization
    data = pa.py_buffer(np.ascontiguousarray(t.array))
    if t.dtype == "binary":
        typ = pa.binary(row_bytes("binary", t.d))
        column = pa.FixedSizeBinaryArray.from_buffers(typ, t.n, [None, data])
    else:
        inner = _value_type(pa, t.dtype)
        values = pa.Array.from_buffers(inner, t.n * t.d, [None, data])
        typ = pa.list_(pa.field("item", inner, nullable=False), t.d)
        if t.d:
            column = pa.FixedSizeListArray.from_arrays(values, type=typ)
        else:  # from_arrays divides by the list size: pyarrow 26 dies of SIGFPE on d = 0
            column = pa.FixedSizeListArray.from_buffers(typ, t.n, [None], children=[values])
    schema = pa.schema([pa.field("embedding", typ, nullable=False, metadata={"densewire.dtype": t.dtype})],
                       metadata=meta)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, schema) as writer:
        writer.write_batch(pa.record_batch([column], schema=schema))
    return sink.getvalue().to_pybytes()


def decode_arrow(body) -> Embeddings:
    """Decode a stream with an ``embedding`` column; the tensor is a view over ``body``."""
    pa = _pyarrow()
    return read_stream(pa, body, _embeddings)


def read_stream(pa, body, meaning):
    """``meaning(pa, schema, batches)`` of a stream, after SPEC.md section 10's framing and structure checks."""
    size = memoryview(body).nbytes
    try:
        reader = pa.ipc.open_stream(pa.py_buffer(body))
        batches = list(reader)
    except (pa.ArrowException, OSError) as exc:  # pyarrow reports short reads as "Expected to read ..."
        short = "expected to" in str(exc).lower() or "end of stream" in str(exc).lower()
        cls = TruncatedError if short else MalformedError
        raise cls(f"not a readable Arrow IPC stream: {exc}", offset=size if short else None) from None
    if not batches:
        raise TruncatedError("the Arrow stream ends before its record batch", offset=size)
    try:
        return meaning(pa, reader.schema, batches)
    except UnicodeDecodeError as exc:  # pyarrow's error for a name or metadata that is not UTF-8 (found by fuzzing)
        raise MalformedError(f"a name or metadata value of the Arrow schema is not valid UTF-8 (at its byte {exc.start})") from None


def _embeddings(pa, schema, batches) -> Embeddings:
    meta = {k.decode(): v.decode() for k, v in (schema.metadata or {}).items()}
    check_no_kind(meta, "densewire.kind")
    if "embedding" not in schema.names:
        raise InvalidFieldError("the stream has no 'embedding' column", field="embedding")
    field = schema.field("embedding")
    dtype = (field.metadata or {}).get(b"densewire.dtype", meta.get("densewire.dtype", "").encode()).decode()
    if not dtype:
        dtype = _infer_dtype(pa, field.type)
    if dtype not in DTYPES:
        raise UnknownDtypeError(f"unknown dtype {dtype!r}", field="densewire.dtype")
    column = pa.concat_arrays([b.column("embedding") for b in batches]) if len(batches) != 1 else batches[0].column("embedding")
    n = len(column)
    if column.null_count:
        raise InvalidFieldError("the embedding column has nulls", field="embedding")
    if dtype == "binary":
        if not pa.types.is_fixed_size_binary(field.type):
            raise InvalidFieldError(f"binary embeddings must be FixedSizeBinary, got {field.type}", field="embedding")
        d = _count(meta, "densewire.dimensions") if "densewire.dimensions" in meta else field.type.byte_width * 8
        width = field.type.byte_width
        buf = column.buffers()[1]
        start = column.offset * width
    else:
        if not pa.types.is_fixed_size_list(field.type):
            raise InvalidFieldError(f"embeddings must be FixedSizeList, got {field.type}", field="embedding")
        d = field.type.list_size
        values = column.values if hasattr(column, "values") else column.flatten()
        if values.type != _value_type(pa, dtype):
            raise InvalidFieldError(f"{dtype} embeddings cannot have {values.type} items", field="embedding")
        width = d * storage_dtype(dtype).itemsize
        buf = values.buffers()[1]
        start = (values.offset + column.offset * d) * storage_dtype(dtype).itemsize
    data = memoryview(buf)[start:start + n * width] if buf is not None else b""
    tensor = Tensor.from_bytes(data, dtype, (n, d), field="embedding")
    usage = None
    if "densewire.prompt_tokens" in meta:
        usage = Usage(_count(meta, "densewire.prompt_tokens"),
                      _count(meta, "densewire.total_tokens") if "densewire.total_tokens" in meta else 0)
    return Embeddings(tensor, meta.get("densewire.model"), usage, meta.get("densewire.quantization"))


def _count(meta: dict[str, str], key: str) -> int:
    """A metadata value that must be a decimal count: anything else is invalid_field, not a ValueError."""
    value = meta[key]
    if not (value.isascii() and value.isdigit()):
        raise InvalidFieldError(f"must be a non-negative integer, got {value!r}", field=key)
    return int(value)


def _infer_dtype(pa, typ) -> str:
    if pa.types.is_fixed_size_binary(typ):
        return "binary"
    if pa.types.is_fixed_size_list(typ):
        for name in ("float32", "float16", "float64", "int8", "uint8"):
            if typ.value_type == _value_type(pa, name):
                return name
    raise InvalidFieldError(f"cannot carry embeddings of Arrow type {typ}", field="embedding")
