"""Ragged and sparse tensors as Arrow IPC streams (SPEC.md 20.7), through pyarrow (the ``arrow`` extra):
``List<FixedSizeList<T, d>>`` and ``Struct<indices: List<UInt32>, values: List<T>>``. Decoding keeps
section 10's order of checks and returns views over the stream's buffers."""

from __future__ import annotations

import numpy as np

from ._arrow import _count, _pyarrow, _value_type, read_stream
from ._errors import InvalidFieldError, MalformedError, ShapeMismatchError
from ._ragged import RaggedTensor, SparseVectors, check_indices, check_sparse_dtype, check_vocab_size
from ._tensor import Embeddings, Tensor, Usage, check_dtype, row_bytes, storage_dtype

__all__ = ["encode_arrow_kind", "decode_arrow_kind", "arrow_column", "ragged_array", "sparse_array"]


def _item_type(pa, dtype: str, d: int):
    if dtype == "binary":
        return pa.binary(row_bytes(dtype, d))
    return pa.list_(pa.field("item", _value_type(pa, dtype), nullable=False), d)


def _list_offsets(pa, offsets: np.ndarray):
    if offsets.size and int(offsets[-1]) >= 1 << 31:
        raise ValueError("an Arrow list holds fewer than 2^31 entries (its offsets are int32)")
    return pa.py_buffer(offsets.astype("<i4"))


def ragged_array(t: RaggedTensor):
    """``List<FixedSizeList<T, d>>`` (``List<FixedSizeBinary>`` for binary) over ``t``'s rows buffer (no
    copy of the values; the uint32 offsets become Arrow's int32 ones)."""
    pa = _pyarrow()
    item = _item_type(pa, t.dtype, t.d)
    count = t.rows.n
    data = pa.py_buffer(np.ascontiguousarray(t.rows.array))
    if t.dtype == "binary":
        child = pa.FixedSizeBinaryArray.from_buffers(item, count, [None, data])
    else:
        values = pa.Array.from_buffers(_value_type(pa, t.dtype), count * t.d, [None, data])
        child = pa.FixedSizeListArray.from_buffers(item, count, [None], children=[values])
    typ = pa.list_(pa.field("item", item, nullable=False))
    return pa.ListArray.from_buffers(typ, t.n, [None, _list_offsets(pa, t.offsets)], children=[child])


def sparse_array(t: SparseVectors):
    """``Struct<indices: List<UInt32>, values: List<T>>`` over ``t``'s indices and values buffers (no copy
    of either; both lists share the int32 form of ``t.offsets``)."""
    pa = _pyarrow()
    offsets = _list_offsets(pa, t.offsets)
    k = int(t.offsets[-1])
    idx_type = pa.list_(pa.field("item", pa.uint32(), nullable=False))
    inner = _value_type(pa, t.dtype)
    val_type = pa.list_(pa.field("item", inner, nullable=False))
    idx = pa.ListArray.from_buffers(idx_type, t.n, [None, offsets], children=[
        pa.Array.from_buffers(pa.uint32(), k, [None, pa.py_buffer(np.ascontiguousarray(t.indices, "<u4"))])])
    val = pa.ListArray.from_buffers(val_type, t.n, [None, offsets], children=[
        pa.Array.from_buffers(inner, k, [None, pa.py_buffer(np.ascontiguousarray(t.values))])])
    typ = pa.struct([pa.field("indices", idx_type, nullable=False), pa.field("values", val_type, nullable=False)])
    return pa.StructArray.from_arrays([idx, val], fields=list(typ))


def arrow_column(t: RaggedTensor | SparseVectors):
    """The ``embedding`` column of SPEC.md 20.7 for a ragged or sparse tensor, over its buffers."""
    return sparse_array(t) if isinstance(t, SparseVectors) else ragged_array(t)


def encode_arrow_kind(emb: Embeddings) -> bytes:
    """One schema, one record batch with the ``embedding`` column, end of stream."""
    pa = _pyarrow()
    t = emb.tensor
    sparse = isinstance(t, SparseVectors)
    kind, d = ("sparse", t.vocab_size) if sparse else ("ragged", t.d)
    meta = {"densewire.version": "1", "densewire.kind": kind, "densewire.dtype": t.dtype, "densewire.dimensions": str(d)}
    if emb.model is not None:
        meta["densewire.model"] = emb.model
    if emb.usage is not None:
        meta["densewire.prompt_tokens"] = str(emb.usage.prompt_tokens)
        meta["densewire.total_tokens"] = str(emb.usage.total_tokens)
    field_meta = {"densewire.dtype": t.dtype}
    if sparse:
        field_meta["densewire.vocabulary_size"] = str(d)
    column = arrow_column(t)
    typ = column.type
    schema = pa.schema([pa.field("embedding", typ, nullable=False, metadata=field_meta)], metadata=meta)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, schema) as writer:
        writer.write_batch(pa.record_batch([column], schema=schema))
    return sink.getvalue().to_pybytes()


def decode_arrow_kind(body, kind: str) -> Embeddings:
    """Decode the stream of a ragged or sparse tensor; its parts are views over ``body``."""
    pa = _pyarrow()
    return read_stream(pa, body, lambda pa, schema, batches: _meaning(pa, schema, batches, kind))


def _view(pa, array, start: int, count: int, itemsize: int) -> memoryview | bytes:
    """``count`` items of ``itemsize`` bytes of a primitive array from its logical item ``start``."""
    buf = array.buffers()[1]
    if buf is None or not count:
        return b""
    at = (array.offset + start) * itemsize
    return memoryview(buf)[at:at + count * itemsize]


def _meaning(pa, schema, batches, kind: str) -> Embeddings:
    for batch in batches:  # structure (section 10 step 2): nested offsets and children are followed below,
        try:               # and an inconsistent one aborts pyarrow (found by fuzzing)
            batch.validate(full=True)
        except pa.ArrowException as exc:
            raise MalformedError(f"a record batch is not valid Arrow: {exc}") from None
    meta = {k.decode(): v.decode() for k, v in (schema.metadata or {}).items()}
    if meta.get("densewire.kind") != kind:
        raise InvalidFieldError(f"a {kind} stream needs densewire.kind {kind!r}, got {meta.get('densewire.kind')!r}",
                                field="densewire.kind")
    if "embedding" not in schema.names:
        raise InvalidFieldError("the stream has no 'embedding' column", field="embedding")
    field = schema.field("embedding")
    fmeta = {k.decode(): v.decode() for k, v in (field.metadata or {}).items()}
    dtype = fmeta.get("densewire.dtype", meta.get("densewire.dtype"))
    if dtype is None:
        raise InvalidFieldError("missing", field="densewire.dtype")
    dtype = check_dtype(dtype, "densewire.dtype") if kind == "ragged" else check_sparse_dtype(dtype, "densewire.dtype")
    column = pa.concat_arrays([b.column("embedding") for b in batches]) if len(batches) != 1 else batches[0].column("embedding")
    model = meta.get("densewire.model")
    usage = None
    if "densewire.prompt_tokens" in meta:
        usage = Usage(_count(meta, "densewire.prompt_tokens"),
                      _count(meta, "densewire.total_tokens") if "densewire.total_tokens" in meta else 0)
    if kind == "ragged":
        return Embeddings(_ragged(pa, field.type, column, dtype, meta), model, usage)
    return Embeddings(_sparse(pa, field.type, column, dtype, fmeta), model, usage)


def _ragged(pa, typ, column, dtype: str, meta: dict) -> RaggedTensor:
    vt = typ.value_type if pa.types.is_list(typ) else None
    if dtype == "binary":
        ok = vt is not None and pa.types.is_fixed_size_binary(vt)
    else:
        ok = vt is not None and pa.types.is_fixed_size_list(vt) and vt.value_type == _value_type(pa, dtype)
    if not ok:
        raise InvalidFieldError(f"ragged {dtype} embeddings must be List<{_item_type(pa, dtype, 1)}>, got {typ}",
                                field="embedding")
    child = column.values
    if column.null_count or child.null_count:
        raise InvalidFieldError("the embedding column has nulls", field="embedding")
    offsets = column.offsets.to_numpy()
    base, count = int(offsets[0]), int(offsets[-1] - offsets[0])
    if dtype == "binary":
        d = _count(meta, "densewire.dimensions") if "densewire.dimensions" in meta else vt.byte_width * 8
        data = _view(pa, child, base, count, vt.byte_width)
    else:
        d = vt.list_size
        inner = child.values
        if inner.null_count:
            raise InvalidFieldError("the embedding column has nulls", field="embedding")
        itemsize = storage_dtype(dtype).itemsize
        data = _view(pa, inner, (child.offset + base) * d, count * d, itemsize) if d else b""
    rows = Tensor.from_bytes(data, dtype, (count, d), field="embedding")
    return RaggedTensor(rows, (offsets - base).astype("<u4"))


def _sparse(pa, typ, column, dtype: str, fmeta: dict) -> SparseVectors:
    names = [typ.field(i).name for i in range(typ.num_fields)] if pa.types.is_struct(typ) else []
    ok = names == ["indices", "values"] and all(pa.types.is_list(typ.field(i).type) for i in range(2))
    if not ok or typ.field(0).type.value_type != pa.uint32() or typ.field(1).type.value_type != _value_type(pa, dtype):
        raise InvalidFieldError(f"sparse {dtype} embeddings must be Struct<indices: List<UInt32>, values: "
                                f"List<{_value_type(pa, dtype)}>>, got {typ}", field="embedding")
    size = fmeta.get("densewire.vocabulary_size")
    if size is None or not (size.isascii() and size.isdigit()):
        raise InvalidFieldError(f"must be the vocabulary size in decimal, got {size!r}", field="densewire.vocabulary_size")
    vocab = check_vocab_size(int(size), "densewire.vocabulary_size")
    idx_list, val_list = column.flatten()
    if column.null_count or idx_list.null_count or val_list.null_count or idx_list.values.null_count \
            or val_list.values.null_count:
        raise InvalidFieldError("the embedding column has nulls", field="embedding")
    io, vo = idx_list.offsets.to_numpy(), val_list.offsets.to_numpy()
    differ = np.flatnonzero(np.diff(io) != np.diff(vo))
    if differ.size:
        i = int(differ[0])
        raise ShapeMismatchError(f"row {i} has {int(io[i + 1] - io[i])} indices and {int(vo[i + 1] - vo[i])} values",
                                 field="embedding")
    count = int(io[-1] - io[0])
    offsets = (io - io[0]).astype("<u4")
    indices = np.frombuffer(_view(pa, idx_list.values, int(io[0]), count, 4), "<u4", count=count)
    check_indices(indices, offsets, vocab)
    item = storage_dtype(dtype)
    values = np.frombuffer(_view(pa, val_list.values, int(vo[0]), count, item.itemsize), item, count=count)
    return SparseVectors(indices, values, offsets, vocab, dtype)
