"""The Protobuf messages of SPEC.md section 9 (proto/densewire/v1/tensor.proto).

A direct proto3 wire reader and writer for these three small messages: the ``data`` field comes
back as a view over the received body (the protobuf runtime would copy it into a new bytes
object), and errors carry the offsets SPEC.md prescribes. The output follows the official
serializers' rules (field order, defaults omitted, packed shape); the tests check both directions
against the protobuf runtime with classes compiled from the shipped .proto.
"""

from __future__ import annotations

from ._errors import InvalidFieldError, MalformedError, TruncatedError, UnknownDtypeError
from ._coerce import as_tensor
from ._tensor import DTYPES, Embeddings, Tensor, Usage

__all__ = ["encode_protobuf", "decode_protobuf", "DTYPE_ENUM"]

#: SPEC.md section 2: dtype name -> enum value of densewire.v1.DType
DTYPE_ENUM = {name: i + 1 for i, name in enumerate(DTYPES)}
_ENUM_DTYPE = {v: k for k, v in DTYPE_ENUM.items()}


def _varint(v: int) -> bytes:
    out = bytearray()
    while v > 0x7F:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def _tensor_head(t: Tensor, data_len: int) -> bytes:
    shape = _varint(t.n) + _varint(t.d)
    head = b"\x08" + _varint(DTYPE_ENUM[t.dtype]) + b"\x12" + _varint(len(shape)) + shape
    return head + (b"\x1a" + _varint(data_len) if data_len else b"")


def encode_protobuf(emb: Embeddings | Tensor) -> bytes:
    """A ``Tensor`` message for a bare tensor (or array), an ``EmbeddingsResponse`` for Embeddings."""
    if not isinstance(emb, (Tensor, Embeddings)):
        emb = as_tensor(emb)
    if isinstance(emb, Tensor):
        data = emb.to_bytes("little")
        return b"".join((_tensor_head(emb, len(data)), data))
    data = emb.tensor.to_bytes("little")
    return encode_response(emb.model, [_tensor_head(emb.tensor, len(data)), data], emb.usage, emb.quantization)


def _read_varint(buf: memoryview, pos: int, base: int = 0) -> tuple[int, int]:
    start = pos
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise TruncatedError("body ends inside a varint", offset=base + len(buf))
        if pos - start == 10:
            raise MalformedError("varint longer than 10 bytes", offset=base + start)
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


def _fields(buf: memoryview, base: int = 0, nested: bool = False):
    """Yield (number, wire_type, value, tag_offset, value_offset) with offsets from the start of
    the body (``base`` is where ``buf`` sits in it); value is an int, or a view for wire type 2.
    Running past the end of the body is truncation; past the end of an embedded message (``nested``)
    while still inside the body, a malformed message (SPEC.md section 9)."""
    pos = 0
    while pos < len(buf):
        tag_at = base + pos
        try:
            tag, pos, number, wire, value = _field(buf, pos, base)
        except TruncatedError as exc:
            if nested:
                raise MalformedError(f"a field runs past the end of its embedded message: {exc.message}",
                                     offset=tag_at) from None
            raise
        yield number, wire, value, tag_at, base + pos - (len(value) if wire == 2 else 0)


def _field(buf: memoryview, pos: int, base: int, depth: int = 0):
    """One field at ``pos``: (tag, next position, number, wire type, value)."""
    tag_at = base + pos
    tag, pos = _read_varint(buf, pos, base)
    number, wire = tag >> 3, tag & 7
    if number == 0:
        raise MalformedError("field number 0", offset=tag_at)
    if wire == 0:
        value, pos = _read_varint(buf, pos, base)
    elif wire == 2:
        n, pos = _read_varint(buf, pos, base)
        if pos + n > len(buf):
            raise TruncatedError(f"a {n}-byte field runs past the end of the body", offset=base + len(buf))
        value, pos = buf[pos:pos + n], pos + n
    elif wire in (1, 5):
        size = 8 if wire == 1 else 4
        if pos + size > len(buf):
            raise TruncatedError("body ends inside a fixed-size field", offset=base + len(buf))
        value, pos = buf[pos:pos + size], pos + size
    elif wire == 3:  # a group (deprecated): skipped like any unknown field, up to its matching end tag
        if depth >= 64:
            raise MalformedError("groups nested too deeply", offset=tag_at)
        start = pos
        while True:
            if pos >= len(buf):
                raise TruncatedError("body ends inside a group", offset=base + len(buf))
            inner_at = base + pos
            inner, after = _read_varint(buf, pos, base)
            if inner & 7 == 4:
                if inner >> 3 != number:
                    raise MalformedError("end-group tag does not match its start", offset=inner_at)
                value, pos = buf[start:pos], after
                break
            pos = _field(buf, pos, base, depth + 1)[1]
    else:
        raise MalformedError(f"unsupported wire type {wire}", offset=tag_at)
    return tag, pos, number, wire, value


def _expect(wire: int, want: int, name: str, tag_at: int) -> None:
    if wire != want:
        raise MalformedError(f"field {name} has wire type {wire}, expected {want}", offset=tag_at)


def _decode_tensor(buf: memoryview, base: int = 0, nested: bool = False) -> Tensor:
    dtype_value = 0
    shape: list[int] = []
    data: memoryview = buf[0:0]
    for number, wire, value, tag_at, value_at in _fields(buf, base, nested):
        if number == 1:
            _expect(wire, 0, "dtype", tag_at)
            dtype_value = value
        elif number == 2:
            read_shape(wire, value, tag_at, value_at, shape)
        elif number == 3:
            _expect(wire, 2, "data", tag_at)
            data = value
    dtype, (n, d) = check_head(dtype_value, shape)
    return Tensor.from_bytes(data, dtype, (n, d), field="data")


def read_shape(wire: int, value, tag_at: int, value_at: int, shape: list[int]) -> None:
    """Append the entries of one ``shape`` field (packed or not) to ``shape``."""
    if wire == 0:
        shape.append(value)
        return
    _expect(wire, 2, "shape", tag_at)
    pos = 0
    while pos < len(value):
        try:
            v, pos = _read_varint(value, pos, value_at)
        except TruncatedError:
            raise MalformedError("a packed shape entry runs past the end of its field", offset=tag_at) from None
        shape.append(v)


def check_head(dtype_value: int, shape: list[int]) -> tuple[str, tuple[int, int]]:
    """The dtype name and ``(n, d)`` of a decoded message's fields 1 and 2 (SPEC.md section 9 errors)."""
    if dtype_value == 0:
        raise InvalidFieldError("missing (DTYPE_UNSPECIFIED)", field="dtype")
    if dtype_value not in _ENUM_DTYPE:
        raise UnknownDtypeError(f"unknown DType enum value {dtype_value}", field="dtype")
    if len(shape) != 2:
        raise InvalidFieldError(f"must hold two entries [n, d], got {shape}", field="shape")
    return _ENUM_DTYPE[dtype_value], (shape[0], shape[1])


def encode_response(model: str | None, tensor: list, usage: Usage | None, quantization: str | None = None) -> bytes:
    """An ``EmbeddingsResponse``-shaped message (model 1, embeddings 2, usage 3, quantization 4) around
    the encoded parts of its embedded tensor message."""
    size = sum(memoryview(p).nbytes for p in tensor)
    model_b = (model or "").encode()
    parts = [b"\x0a" + _varint(len(model_b)) + model_b if model_b else b"", b"\x12" + _varint(size), *tensor]
    u = usage or Usage()
    counts = (b"\x08" + _varint(u.prompt_tokens) if u.prompt_tokens else b"") + (
        b"\x10" + _varint(u.total_tokens) if u.total_tokens else b"")
    parts.append(b"\x1a" + _varint(len(counts)) + counts)
    if quantization:  # field 4 (SPEC.md 17.5), a proto3 string: omitted when empty
        q = quantization.encode()
        parts.append(b"\x22" + _varint(len(q)) + q)
    return b"".join(parts)


def decode_protobuf(body, message: str = "EmbeddingsResponse") -> Embeddings:
    """Decode an ``EmbeddingsResponse`` (or a bare ``Tensor`` with ``message="Tensor"``)."""
    buf = memoryview(body).cast("B") if not isinstance(body, memoryview) or body.format != "B" else body
    if message == "Tensor":
        return Embeddings(_decode_tensor(buf))
    if message != "EmbeddingsResponse":
        raise ValueError(f"unknown message {message!r}")
    return decode_response(buf, _decode_tensor)


def decode_response(buf: memoryview, decode_inner, quantization_field: bool = True) -> Embeddings:
    """An ``EmbeddingsResponse``-shaped message, its field 2 decoded by ``decode_inner(view, base, nested)``
    (field 4 is skipped as unknown without ``quantization_field``)."""
    model, tensor, usage, quantization = None, None, None, None
    for number, wire, value, tag_at, value_at in _fields(buf):
        if number == 1:
            _expect(wire, 2, "model", tag_at)
            try:
                model = str(value, "utf-8")
            except UnicodeDecodeError:
                raise MalformedError("model is not UTF-8", offset=tag_at) from None
        elif number == 2:
            _expect(wire, 2, "embeddings", tag_at)
            tensor = decode_inner(value, base=value_at, nested=True)
        elif number == 3:
            _expect(wire, 2, "usage", tag_at)
            counts = {1: 0, 2: 0}
            for n, w, v, at, _ in _fields(value, value_at, nested=True):
                if n in counts:
                    _expect(w, 0, "usage", at)
                    counts[n] = v
            usage = Usage(counts[1], counts[2])
        elif number == 4 and quantization_field:
            _expect(wire, 2, "quantization", tag_at)
            try:
                quantization = str(value, "utf-8") or None
            except UnicodeDecodeError:
                raise MalformedError("quantization is not UTF-8", offset=tag_at) from None
    if tensor is None:
        raise InvalidFieldError("missing", field="embeddings")
    return Embeddings(tensor, model, usage, quantization)
