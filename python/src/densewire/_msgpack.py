"""The MessagePack map of SPEC.md section 8.

Written and read here rather than through msgpack-python or msgspec for two reasons the spec
needs: ``data`` comes back as a view over the received body (no copy of the vector bytes), and
errors carry the byte offset SPEC.md prescribes. The tests check both directions against
msgpack-python.
"""

from __future__ import annotations

import struct

from ._errors import InvalidFieldError, MalformedError, TruncatedError
from ._coerce import as_embeddings
from ._tensor import Embeddings, Tensor, Usage, check_dtype, check_no_kind

__all__ = ["encode_msgpack", "decode_msgpack"]


def _uint(v: int) -> bytes:
    if v < 0x80:
        return bytes((v,))
    if v < 0x100:
        return b"\xcc" + struct.pack(">B", v)
    if v < 0x10000:
        return b"\xcd" + struct.pack(">H", v)
    if v < 0x100000000:
        return b"\xce" + struct.pack(">I", v)
    return b"\xcf" + struct.pack(">Q", v)


def _str(s: str) -> bytes:
    b = s.encode()
    n = len(b)
    if n < 32:
        return bytes((0xA0 | n,)) + b
    if n < 0x100:
        return b"\xd9" + struct.pack(">B", n) + b
    if n < 0x10000:
        return b"\xda" + struct.pack(">H", n) + b
    return b"\xdb" + struct.pack(">I", n) + b


def _bin_header(n: int) -> bytes:
    if n < 0x100:
        return b"\xc4" + struct.pack(">B", n)
    if n < 0x10000:
        return b"\xc5" + struct.pack(">H", n)
    return b"\xc6" + struct.pack(">I", n)


def encode_msgpack(emb: Embeddings | Tensor) -> bytes:
    """The map ``{model?, dtype, shape, data, usage?, quantization?}`` in the smallest encodings (byte-exact)."""
    emb = as_embeddings(emb)
    t = emb.tensor
    count = 3 + (emb.model is not None) + (emb.usage is not None) + (emb.quantization is not None)
    head = [bytes((0x80 | count,))]
    if emb.model is not None:
        head += [b"\xa5model", _str(emb.model)]
    data = t.to_bytes("little")
    head += [b"\xa5dtype", _str(t.dtype), b"\xa5shape\x92", _uint(t.n), _uint(t.d), b"\xa4data", _bin_header(len(data))]
    parts = [b"".join(head), data]
    if emb.usage is not None:
        parts.append(b"\xa5usage\x82\xadprompt_tokens" + _uint(emb.usage.prompt_tokens) +
                     b"\xactotal_tokens" + _uint(emb.usage.total_tokens))
    if emb.quantization is not None:
        parts.append(b"\xacquantization" + _str(emb.quantization))
    return b"".join(parts)


class _Reader:
    """A cursor over a MessagePack body that reports offsets in its errors."""

    __slots__ = ("buf", "pos")

    def __init__(self, buf: memoryview) -> None:
        self.buf = buf
        self.pos = 0

    def take(self, n: int) -> memoryview:
        end = self.pos + n
        if end > len(self.buf):
            raise TruncatedError(f"body ends after {len(self.buf)} bytes, inside a value that needs {end}",
                                 offset=len(self.buf))
        out = self.buf[self.pos:end]
        self.pos = end
        return out

    def byte(self) -> int:
        return self.take(1)[0]

    def length(self, size: int) -> int:
        return int.from_bytes(self.take(size), "big")

    def value(self):
        """Read any value: ints, str, bin (as a view), arrays, maps; nil, bool, floats, ext."""
        start = self.pos
        b = self.byte()
        if b <= 0x7F:
            return b
        if b >= 0xE0:
            return b - 0x100
        if 0x80 <= b <= 0x8F:
            return self.map_body(b & 0x0F, start)
        if 0x90 <= b <= 0x9F:
            return [self.value() for _ in range(b & 0x0F)]
        if 0xA0 <= b <= 0xBF:
            return self.text(b & 0x1F, start)
        simple = {0xC0: None, 0xC2: False, 0xC3: True}
        if b in simple:
            return simple[b]
        if b in (0xC4, 0xC5, 0xC6):
            return self.take(self.length(1 << (b - 0xC4)))
        if b in (0xD9, 0xDA, 0xDB):
            return self.text(self.length(1 << (b - 0xD9)), start)
        if b in (0xCC, 0xCD, 0xCE, 0xCF):
            return self.length(1 << (b - 0xCC))
        if b in (0xD0, 0xD1, 0xD2, 0xD3):
            return int.from_bytes(self.take(1 << (b - 0xD0)), "big", signed=True)
        if b in (0xCA, 0xCB):
            return struct.unpack(">f" if b == 0xCA else ">d", self.take(4 if b == 0xCA else 8))[0]
        if b in (0xDC, 0xDD):
            return [self.value() for _ in range(self.length(2 if b == 0xDC else 4))]
        if b in (0xDE, 0xDF):
            return self.map_body(self.length(2 if b == 0xDE else 4), start)
        if b in (0xD4, 0xD5, 0xD6, 0xD7, 0xD8):
            return self.take(1 + (1 << (b - 0xD4)))
        if b in (0xC7, 0xC8, 0xC9):
            return self.take(1 + self.length(1 << (b - 0xC7)))
        raise MalformedError(f"byte 0x{b:02x} is not a MessagePack value", offset=start)

    def text(self, n: int, start: int) -> str:
        try:
            return str(self.take(n), "utf-8")
        except UnicodeDecodeError:
            raise MalformedError("string is not UTF-8", offset=start) from None

    def map_body(self, count: int, start: int) -> dict:
        out = {}
        for _ in range(count):
            key_at = self.pos
            key = self.value()
            if not isinstance(key, str):
                raise MalformedError("map keys must be strings", offset=key_at)
            out[key] = self.value()
        return out


def read_top_map(body) -> dict:
    """Read ``body`` as exactly one top-level MessagePack map (``bin`` values as views over it):
    truncated if empty, malformed if it starts with anything but a map or has bytes after it."""
    r = _Reader(memoryview(body).cast("B") if not isinstance(body, memoryview) or body.format != "B" else body)
    if not len(r.buf):
        raise TruncatedError("empty body", offset=0)
    first = r.buf[0]
    if not (0x80 <= first <= 0x8F or first in (0xDE, 0xDF)):
        raise MalformedError(f"the body must be a MessagePack map, it starts with 0x{first:02x}", offset=0)
    doc = r.value()
    if r.pos != len(r.buf):
        raise MalformedError(f"{len(r.buf) - r.pos} bytes after the map", offset=r.pos)
    return doc


def nd_shape(doc: dict) -> list[int]:
    """The map's ``shape``, checked to be ``[n, d]`` of two non-negative integers."""
    shape = doc.get("shape")
    if (not isinstance(shape, list) or len(shape) != 2
            or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in shape)):
        raise InvalidFieldError(f"must be [n, d] with two non-negative integers, got {shape!r}", field="shape")
    return shape


def decode_msgpack(body) -> Embeddings:
    """Decode the map; ``tensor.array`` is a read-only view over ``body``."""
    doc = read_top_map(body)
    check_no_kind(doc, "kind")
    dtype = doc.get("dtype")
    if dtype is None:
        raise InvalidFieldError("missing", field="dtype")
    dtype = check_dtype(dtype)
    shape = nd_shape(doc)
    data = doc.get("data")
    if not isinstance(data, memoryview):
        raise InvalidFieldError("missing or not MessagePack bin", field="data")
    model = doc.get("model")
    if model is not None and not isinstance(model, str):
        raise InvalidFieldError("must be a string", field="model")
    quantization = doc.get("quantization")
    if quantization is not None and not isinstance(quantization, str):
        raise InvalidFieldError(f"must be a string, got {quantization!r}", field="quantization")
    return Embeddings(Tensor.from_bytes(data, dtype, (shape[0], shape[1]), field="data"), model,
                      Usage.parse(doc.get("usage")), quantization)

