"""Ragged and sparse tensors as raw bodies (SPEC.md 19.4): the parts back to back, 8-byte aligned,
``Densewire-Kind`` beside the headers of section 7."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ._errors import InvalidFieldError, LengthMismatchError
from ._raw import _count, _shape
from ._ragged import RaggedTensor, SparseVectors, check_indices, check_offsets, check_sparse_dtype, check_vocab_size
from ._tensor import Embeddings, Tensor, Usage, check_dtype, row_bytes, storage_dtype

__all__ = ["encode_raw_kind", "decode_raw_kind"]


def _pad(n: int) -> bytes:
    return b"\0" * (-n % 8)


def encode_raw_kind(emb: Embeddings) -> tuple[bytes, dict[str, str]]:
    """The body (one copy of the parts, with their padding) and its ``Densewire-*`` headers."""
    t = emb.tensor
    kind = "ragged" if isinstance(t, RaggedTensor) else "sparse"
    d = t.d if kind == "ragged" else t.vocab_size
    headers = {"Densewire-Version": "1", "Densewire-Kind": kind, "Densewire-Dtype": t.dtype,
               "Densewire-Shape": f"{t.n},{d}", "Densewire-Byteorder": "little"}
    if emb.model is not None:
        headers["Densewire-Model"] = emb.model
    if emb.usage is not None:
        headers["Densewire-Prompt-Tokens"] = str(emb.usage.prompt_tokens)
        headers["Densewire-Total-Tokens"] = str(emb.usage.total_tokens)
    offsets = t.offsets.astype("<u4", copy=False).tobytes()
    if kind == "ragged":
        parts = [offsets, _pad(len(offsets)), t.rows.to_bytes("little")]
    else:
        indices = t.indices.astype("<u4", copy=False).tobytes()
        parts = [offsets, _pad(len(offsets)), indices, _pad(len(indices)),
                 np.ascontiguousarray(t.values.astype(storage_dtype(t.dtype), copy=False)).tobytes()]
    return b"".join(parts), headers


def decode_raw_kind(body, headers: Mapping[str, str], kind: str) -> Embeddings:
    """A ragged or sparse tensor over ``body`` (views, no copy), described by ``headers``."""
    h = {k.lower(): v for k, v in headers.items()}
    said = h.get("densewire-kind")
    if said is None or said.strip() != kind:
        raise InvalidFieldError(f"a {kind} body needs 'Densewire-Kind: {kind}', got {said!r}", field="Densewire-Kind")
    if "densewire-dtype" not in h:
        raise InvalidFieldError("header missing", field="Densewire-Dtype")
    dtype = h["densewire-dtype"].strip()
    dtype = check_dtype(dtype, "Densewire-Dtype") if kind == "ragged" else check_sparse_dtype(dtype, "Densewire-Dtype")
    order = h.get("densewire-byteorder", "little").strip()
    if order != "little":
        raise InvalidFieldError(f"raw bodies are little-endian, got {order!r}", field="Densewire-Byteorder")
    n, d = _shape(h.get("densewire-shape"))
    if kind == "sparse":
        check_vocab_size(d, "Densewire-Shape")
    buf = memoryview(body).cast("B") if memoryview(body).format != "B" else memoryview(body)
    size = buf.nbytes
    head = 4 * (n + 1)
    if size < head:
        raise LengthMismatchError(f"{size} bytes cannot hold the {head} bytes of offsets of {n} inputs", offset=size)
    offsets = np.frombuffer(buf, "<u4", count=n + 1)
    check_offsets(offsets)
    count = int(offsets[-1])
    start = head + (-head % 8)
    if kind == "ragged":
        expected = start + count * row_bytes(dtype, d)
    else:
        item = storage_dtype(dtype).itemsize
        values_at = start + 4 * count + (-4 * count % 8)
        expected = values_at + count * item
    if size != expected:
        raise LengthMismatchError(f"{size} bytes, the offsets and {count} {'rows' if kind == 'ragged' else 'entries'} "
                                  f"need {expected}", offset=min(size, expected))
    model = h.get("densewire-model")
    usage = None
    if "densewire-prompt-tokens" in h or "densewire-total-tokens" in h:
        usage = Usage(_count(h, "Densewire-Prompt-Tokens"), _count(h, "Densewire-Total-Tokens"))
    if kind == "ragged":
        return Embeddings(RaggedTensor(Tensor.from_bytes(buf[start:], dtype, (count, d)), offsets), model, usage)
    indices = np.frombuffer(buf, "<u4", count=count, offset=start)
    check_indices(indices, offsets, d, base=start)
    values = np.frombuffer(buf, storage_dtype(dtype), count=count, offset=values_at)
    return Embeddings(SparseVectors(indices, values, offsets, d, dtype), model, usage)
