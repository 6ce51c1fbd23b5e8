"""The raw body (SPEC.md section 7): the tensor's little-endian bytes, described by headers."""

from __future__ import annotations

from collections.abc import Mapping

from ._errors import InvalidFieldError
from ._coerce import as_embeddings
from ._tensor import Embeddings, Tensor, Usage, check_dtype, check_no_kind

__all__ = ["encode_raw", "decode_raw"]


def encode_raw(emb: Embeddings | Tensor) -> tuple[bytes | memoryview, dict[str, str]]:
    """The body (a view of the tensor, no copy) and its ``Densewire-*`` headers."""
    emb = as_embeddings(emb)
    t = emb.tensor
    headers = {"Densewire-Version": "1", "Densewire-Dtype": t.dtype, "Densewire-Shape": f"{t.n},{t.d}",
               "Densewire-Byteorder": "little"}
    if emb.model is not None:
        headers["Densewire-Model"] = emb.model
    if emb.usage is not None:
        headers["Densewire-Prompt-Tokens"] = str(emb.usage.prompt_tokens)
        headers["Densewire-Total-Tokens"] = str(emb.usage.total_tokens)
    if emb.quantization is not None:
        headers["Densewire-Quantization"] = emb.quantization
    return t.to_bytes("little"), headers


def decode_raw(body, headers: Mapping[str, str]) -> Embeddings:
    """A zero-copy view over ``body`` described by ``headers`` (names are case-insensitive)."""
    h = {k.lower(): v for k, v in headers.items()}
    check_no_kind(h, "densewire-kind", "Densewire-Kind")
    if "densewire-dtype" not in h:
        raise InvalidFieldError("header missing", field="Densewire-Dtype")
    dtype = check_dtype(h["densewire-dtype"].strip(), field="Densewire-Dtype")
    order = h.get("densewire-byteorder", "little").strip()
    if order != "little":
        raise InvalidFieldError(f"raw bodies are little-endian, got {order!r}", field="Densewire-Byteorder")
    shape = _shape(h.get("densewire-shape"))
    model = h.get("densewire-model")
    usage = None
    if "densewire-prompt-tokens" in h or "densewire-total-tokens" in h:
        usage = Usage(_count(h, "Densewire-Prompt-Tokens"), _count(h, "Densewire-Total-Tokens"))
    quantization = h.get("densewire-quantization")
    return Embeddings(Tensor.from_bytes(body, dtype, shape), model, usage,
                      quantization.strip() if quantization is not None else None)


def _shape(value: str | None) -> tuple[int, int]:
    if value is None:
        raise InvalidFieldError("header missing", field="Densewire-Shape")
    parts = value.strip().split(",")
    if len(parts) != 2 or not all(p.isascii() and p.isdigit() for p in parts):
        raise InvalidFieldError(f"must be 'n,d' with two non-negative integers, got {value!r}", field="Densewire-Shape")
    return int(parts[0]), int(parts[1])


def _count(h: dict[str, str], name: str) -> int:
    value = h.get(name.lower(), "0").strip()
    if not (value.isascii() and value.isdigit()):
        raise InvalidFieldError(f"must be a non-negative integer, got {value!r}", field=name)
    return int(value)
