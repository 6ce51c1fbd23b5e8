"""Ragged and sparse tensors as Protobuf (SPEC.md 19.6): ``RaggedTensor``, ``SparseTensor`` and their
responses, by section 9's direct reader and writer; ``offsets``, ``indices`` and ``data`` come back as
views over the body."""

from __future__ import annotations

import numpy as np

from ._errors import InvalidFieldError, LengthMismatchError
from ._protobuf import (DTYPE_ENUM, _expect, _fields, _varint, check_head, decode_response, encode_response,
                        read_shape)
from ._ragged import RaggedTensor, SparseVectors, check_indices, check_sparse_dtype, check_vocab_size, read_offsets
from ._tensor import Embeddings, Tensor, storage_dtype

__all__ = ["MESSAGES", "encode_protobuf_kind", "decode_protobuf_kind"]

#: message name -> (kind, is a response)
MESSAGES = {"RaggedTensor": ("ragged", False), "RaggedEmbeddingsResponse": ("ragged", True),
            "SparseTensor": ("sparse", False), "SparseEmbeddingsResponse": ("sparse", True)}


def _bytes_field(number: int, b) -> list:
    size = memoryview(b).nbytes
    return [_varint(number << 3 | 2) + _varint(size), b] if size else []


def _tensor_parts(t: RaggedTensor | SparseVectors) -> list:
    sparse = isinstance(t, SparseVectors)
    shape = _varint(t.n) + _varint(t.vocab_size if sparse else t.d)
    parts = [b"\x08" + _varint(DTYPE_ENUM[t.dtype]) + b"\x12" + _varint(len(shape)) + shape]
    parts += _bytes_field(3, t.offsets.astype("<u4", copy=False).tobytes())
    if sparse:
        parts += _bytes_field(4, t.indices.astype("<u4", copy=False).tobytes())
        parts += _bytes_field(5, np.ascontiguousarray(t.values).tobytes())
    else:
        parts += _bytes_field(4, t.rows.to_bytes("little"))
    return parts


def encode_protobuf_kind(emb: Embeddings | RaggedTensor | SparseVectors) -> bytes:
    """A bare ``RaggedTensor``/``SparseTensor`` for a tensor, its response message for Embeddings."""
    if isinstance(emb, (RaggedTensor, SparseVectors)):
        return b"".join(_tensor_parts(emb))
    return encode_response(emb.model, _tensor_parts(emb.tensor), emb.usage)


def _decode(kind: str):
    def decode(buf: memoryview, base: int = 0, nested: bool = False) -> RaggedTensor | SparseVectors:
        dtype_value, shape = 0, []
        parts = {"offsets": buf[0:0], "indices": buf[0:0], "data": buf[0:0]}
        names = {3: "offsets", 4: "data"} if kind == "ragged" else {3: "offsets", 4: "indices", 5: "data"}
        for number, wire, value, tag_at, value_at in _fields(buf, base, nested):
            if number == 1:
                _expect(wire, 0, "dtype", tag_at)
                dtype_value = value
            elif number == 2:
                read_shape(wire, value, tag_at, value_at, shape)
            elif number in names:
                _expect(wire, 2, names[number], tag_at)
                parts[names[number]] = value
        dtype, (n, d) = check_head(dtype_value, shape)
        if kind == "sparse":
            check_sparse_dtype(dtype)
            check_vocab_size(d, "shape")
        offsets = read_offsets(parts["offsets"], n)
        count = int(offsets[-1])
        if kind == "ragged":
            return RaggedTensor(Tensor.from_bytes(parts["data"], dtype, (count, d), field="data"), offsets)
        item = storage_dtype(dtype).itemsize
        for name, want in (("indices", 4 * count), ("data", count * item)):
            got = parts[name].nbytes
            if got != want:
                raise LengthMismatchError(f"{got} bytes, {count} entries need {want}", offset=min(got, want), field=name)
        indices = np.frombuffer(parts["indices"], "<u4", count=count)
        check_indices(indices, offsets, d)
        return SparseVectors(indices, np.frombuffer(parts["data"], storage_dtype(dtype), count=count), offsets, d, dtype)
    return decode


_DECODERS = {"ragged": _decode("ragged"), "sparse": _decode("sparse")}


def decode_protobuf_kind(body, message: str) -> Embeddings:
    """Decode one of :data:`MESSAGES` (a response by default names ``RaggedEmbeddingsResponse`` or
    ``SparseEmbeddingsResponse``)."""
    if message not in MESSAGES:
        raise ValueError(f"unknown message {message!r}; expected one of {', '.join(MESSAGES)}")
    kind, response = MESSAGES[message]
    buf = memoryview(body).cast("B") if not isinstance(body, memoryview) or body.format != "B" else body
    if not response:
        return Embeddings(_DECODERS[kind](buf))
    emb = decode_response(buf, _DECODERS[kind], quantization_field=False)
    if emb.tensor is None:
        raise InvalidFieldError("missing", field="embeddings")
    return emb
