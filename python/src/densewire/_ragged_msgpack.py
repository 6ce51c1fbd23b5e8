"""Ragged and sparse tensors as MessagePack (SPEC.md 20.5): section 8's map with ``kind``, ``offsets``
and, for sparse, ``indices``; every part a bin read as a view over the body."""

from __future__ import annotations

import numpy as np

from ._errors import InvalidFieldError, LengthMismatchError
from ._msgpack import _bin_header, _str, _uint, nd_shape, read_top_map
from ._ragged import RaggedTensor, SparseVectors, check_indices, check_sparse_dtype, check_vocab_size, read_offsets
from ._tensor import Embeddings, Tensor, Usage, check_dtype, storage_dtype

__all__ = ["encode_msgpack_kind", "decode_msgpack_kind"]


def _bin(b: bytes | memoryview) -> list:
    return [_bin_header(memoryview(b).nbytes), b]


def encode_msgpack_kind(emb: Embeddings) -> bytes:
    """``{model?, kind, dtype, shape, offsets, indices?, data, usage?}``, smallest encodings (byte-exact)."""
    t = emb.tensor
    sparse = isinstance(t, SparseVectors)
    count = 5 + sparse + (emb.model is not None) + (emb.usage is not None)
    parts: list = [bytes((0x80 | count,))]
    if emb.model is not None:
        parts += [b"\xa5model", _str(emb.model)]
    d = t.vocab_size if sparse else t.d
    parts += [b"\xa4kind", _str("sparse" if sparse else "ragged"), b"\xa5dtype", _str(t.dtype),
              b"\xa5shape\x92", _uint(t.n), _uint(d), b"\xa7offsets", *_bin(t.offsets.astype("<u4", copy=False).tobytes())]
    if sparse:
        parts += [b"\xa7indices", *_bin(t.indices.astype("<u4", copy=False).tobytes()), b"\xa4data",
                  *_bin(np.ascontiguousarray(t.values).tobytes())]
    else:
        parts += [b"\xa4data", *_bin(t.rows.to_bytes("little"))]
    if emb.usage is not None:
        parts.append(b"\xa5usage\x82\xadprompt_tokens" + _uint(emb.usage.prompt_tokens) +
                     b"\xactotal_tokens" + _uint(emb.usage.total_tokens))
    return b"".join(parts)


def _part(doc: dict, key: str) -> memoryview:
    value = doc.get(key)
    if not isinstance(value, memoryview):
        raise InvalidFieldError("missing or not MessagePack bin", field=key)
    return value


def decode_msgpack_kind(body, kind: str) -> Embeddings:
    """Decode the map of a ragged or sparse tensor; its parts are read-only views over ``body``."""
    doc = read_top_map(body)
    if doc.get("kind") != kind:
        raise InvalidFieldError(f"a {kind} body needs kind {kind!r}, got {doc.get('kind')!r}", field="kind")
    if doc.get("dtype") is None:
        raise InvalidFieldError("missing", field="dtype")
    dtype = check_dtype(doc["dtype"]) if kind == "ragged" else check_sparse_dtype(doc["dtype"])
    shape = nd_shape(doc)
    n, d = shape
    if kind == "sparse":
        check_vocab_size(d, "shape")
    offsets = read_offsets(_part(doc, "offsets"), n)
    count = int(offsets[-1])
    model = doc.get("model")
    if model is not None and not isinstance(model, str):
        raise InvalidFieldError("must be a string", field="model")
    if kind == "ragged":
        rows = Tensor.from_bytes(_part(doc, "data"), dtype, (count, d), field="data")
        return Embeddings(RaggedTensor(rows, offsets), model, Usage.parse(doc.get("usage")))
    raw_indices, data = _part(doc, "indices"), _part(doc, "data")
    for name, part, want in (("indices", raw_indices, 4 * count), ("data", data, count * storage_dtype(dtype).itemsize)):
        if part.nbytes != want:
            raise LengthMismatchError(f"{part.nbytes} bytes, {count} entries need {want}", offset=min(part.nbytes, want),
                                      field=name)
    indices = np.frombuffer(raw_indices, "<u4", count=count)
    check_indices(indices, offsets, d)
    values = np.frombuffer(data, storage_dtype(dtype), count=count)
    return Embeddings(SparseVectors(indices, values, offsets, d, dtype), model, Usage.parse(doc.get("usage")))
