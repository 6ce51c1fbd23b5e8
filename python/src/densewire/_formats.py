"""The five formats of SPEC.md section 12 behind one encode/decode pair, and media types."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from ._arrow import decode_arrow, encode_arrow
from ._json import decode_json, encode_json
from ._msgpack import decode_msgpack, encode_msgpack
from ._protobuf import decode_protobuf, encode_protobuf
from ._raw import decode_raw, encode_raw
from ._coerce import as_embeddings
from ._ragged import KINDS, RaggedTensor, SparseVectors
from ._ragged_arrow import decode_arrow_kind, encode_arrow_kind
from ._ragged_json import decode_json_kind, encode_json_kind
from ._ragged_msgpack import decode_msgpack_kind, encode_msgpack_kind
from ._ragged_protobuf import decode_protobuf_kind, encode_protobuf_kind
from ._ragged_raw import decode_raw_kind, encode_raw_kind
from ._tensor import Embeddings, Tensor

__all__ = ["FORMATS", "MEDIA_TYPES", "format_for_media_type", "encode", "decode", "detect_format"]

#: format name -> canonical media type, in the server's order of preference at equal q-values
MEDIA_TYPES: Final[dict[str, str]] = {
    "json": "application/json",
    "raw": "application/octet-stream",
    "msgpack": "application/vnd.msgpack",
    "protobuf": "application/protobuf",
    "arrow": "application/vnd.apache.arrow.stream",
}
FORMATS: Final[tuple[str, ...]] = tuple(MEDIA_TYPES)
#: media types accepted besides the canonical ones (SPEC.md section 12)
MEDIA_TYPE_ALIASES: Final[dict[str, str]] = {
    "application/msgpack": "msgpack",
    "application/x-msgpack": "msgpack",
    "application/x-protobuf": "protobuf",
}
_ALIASES: Final[dict[str, str]] = {**{mt: fmt for fmt, mt in MEDIA_TYPES.items()}, **MEDIA_TYPE_ALIASES}


def format_for_media_type(media_type: str) -> str | None:
    """``'application/x-msgpack; charset=x'`` -> ``'msgpack'``; None when not ours."""
    return _ALIASES.get(media_type.split(";", 1)[0].strip().lower())


def encode(emb: Embeddings | Tensor | RaggedTensor | SparseVectors, format: str, *, encoding_format: str = "base64",
           byteorder: str = "little") -> tuple[bytes | memoryview, dict[str, str]]:
    """Body and headers (``Content-Type`` included) of ``emb`` in one of :data:`FORMATS`. ``emb`` is
    Embeddings, a Tensor, a RaggedTensor or SparseVectors (SPEC.md 19), a numpy array (any float dtype,
    int8, uint8), a list of floats or of lists (float32) or anything numpy.asarray reads.

    ``encoding_format`` and ``byteorder`` apply to JSON only: binary formats are little-endian.
    """
    emb = as_embeddings(emb)
    headers = {"Content-Type": MEDIA_TYPES[format] if format in MEDIA_TYPES else ""}
    if not isinstance(emb.tensor, Tensor):
        return _encode_kind(emb, format, encoding_format, byteorder, headers)
    if format == "json":
        return encode_json(emb, encoding_format, byteorder), headers
    if format == "raw":
        body, extra = encode_raw(emb)
        return body, headers | extra
    if format == "msgpack":
        return encode_msgpack(emb), headers
    if format == "protobuf":
        return encode_protobuf(emb), headers
    if format == "arrow":
        return encode_arrow(emb), headers
    raise ValueError(f"unknown format {format!r}; expected one of {', '.join(FORMATS)}")


def _encode_kind(emb: Embeddings, format: str, encoding_format: str, byteorder: str,
                 headers: dict[str, str]) -> tuple[bytes | memoryview, dict[str, str]]:
    if format == "json":
        return encode_json_kind(emb, encoding_format, byteorder), headers
    if format == "raw":
        body, extra = encode_raw_kind(emb)
        return body, headers | extra
    if format == "msgpack":
        return encode_msgpack_kind(emb), headers
    if format == "protobuf":
        return encode_protobuf_kind(emb), headers
    if format == "arrow":
        return encode_arrow_kind(emb), headers
    raise ValueError(f"unknown format {format!r}; expected one of {', '.join(FORMATS)}")


def decode(body, format: str, headers: Mapping[str, str] | None = None, *, kind: str = "tensor") -> Embeddings:
    """Decode a body of a known format (``headers`` are needed for raw). ``kind`` is what the body must
    hold (SPEC.md 19): ``"tensor"``, or ``"ragged"`` (a :class:`RaggedTensor`) or ``"sparse"``
    (:class:`SparseVectors`) in ``Embeddings.tensor``; a Protobuf body is then the kind's response message."""
    if kind != "tensor":
        return _decode_kind(body, format, headers, kind)
    if format == "json":
        return decode_json(body)
    if format == "raw":
        return decode_raw(body, headers or {})
    if format == "msgpack":
        return decode_msgpack(body)
    if format == "protobuf":
        return decode_protobuf(body)
    if format == "arrow":
        return decode_arrow(body)
    raise ValueError(f"unknown format {format!r}; expected one of {', '.join(FORMATS)}")


def _decode_kind(body, format: str, headers: Mapping[str, str] | None, kind: str) -> Embeddings:
    if kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r}; expected one of {', '.join(KINDS)}")
    if format == "json":
        return decode_json_kind(body, kind)
    if format == "raw":
        return decode_raw_kind(body, headers or {}, kind)
    if format == "msgpack":
        return decode_msgpack_kind(body, kind)
    if format == "protobuf":
        return decode_protobuf_kind(body, f"{kind.capitalize()}EmbeddingsResponse")
    if format == "arrow":
        return decode_arrow_kind(body, kind)
    raise ValueError(f"unknown format {format!r}; expected one of {', '.join(FORMATS)}")


def detect_format(body: bytes) -> str | None:
    """Best guess of a body's format from its first bytes (for ``densewire inspect``); None if unsure."""
    head = bytes(body[:8])
    stripped = head.lstrip()
    if stripped.startswith((b"{", b"[")):
        return "json"
    if head.startswith(b"\xff\xff\xff\xff"):  # an IPC stream message starts with the continuation marker
        return "arrow"
    if head and (0x80 <= head[0] <= 0x8F or head[0] in (0xDE, 0xDF)):
        return "msgpack"
    if head and head[0] in (0x08, 0x0A, 0x12):
        return "protobuf"
    return None
