"""Strict Base64 (SPEC.md section 5) over pybase64's SIMD codec.

The happy path is one pybase64 call; the slow scan that finds the offset of the first bad
character only runs after pybase64 has rejected the input.
"""

from __future__ import annotations

import pybase64

from ._errors import InvalidBase64Error
from ._coerce import as_tensor
from ._tensor import Tensor, check_byteorder, check_dtype, row_bytes

__all__ = ["b64decode_strict", "b64encode", "encode_base64", "decode_base64"]

_ALPHABET = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")


def b64encode(data) -> bytes:
    """Standard alphabet, padded, no line breaks."""
    return pybase64.b64encode(data)


def _locate_error(s: bytes) -> InvalidBase64Error | None:
    """Apply SPEC.md section 5 steps 1-3; None if the input is valid."""
    for i, c in enumerate(s):
        if c not in _ALPHABET and c != 0x3D:  # '='
            shown = chr(c) if 0x20 < c < 0x7F else f"\\x{c:02x}"
            return InvalidBase64Error(f"invalid Base64 character {shown!r} at offset {i}", offset=i)
    p = s.find(b"=")
    if p >= 0:
        pad = len(s) - p
        if s[p:].strip(b"=") or pad > 2 or len(s) % 4 or p % 4 not in (2, 3) or (p % 4 == 2) != (pad == 2):
            return InvalidBase64Error(f"invalid Base64 padding at offset {p}", offset=p)
    elif len(s) % 4 == 1:
        return InvalidBase64Error(f"Base64 length {len(s)} leaves a dangling character at offset {len(s) - 1}",
                                  offset=len(s) - 1)
    return None


def b64decode_strict(text: str | bytes | memoryview) -> bytes:
    """Decode strictly; unpadded input is accepted, non-zero trailing bits are ignored."""
    if isinstance(text, str):
        try:
            text = text.encode("ascii")
        except UnicodeEncodeError:  # one '?' per character keeps offsets; report the real character
            err = _locate_error(text.encode("ascii", "replace"))
            assert err is not None and err.offset is not None
            raise InvalidBase64Error(f"invalid Base64 character {text[err.offset]!r} at offset {err.offset}",
                                     offset=err.offset) from None
    rem = len(text) % 4
    try:
        if rem in (2, 3) and not text.endswith(b"="):
            return pybase64.b64decode(bytes(text) + b"=" * (4 - rem), validate=True)
        return pybase64.b64decode(text, validate=True)
    except ValueError:
        pass
    err = _locate_error(bytes(text))
    if err is None:  # pybase64 disagreed with the spec's rules: fail loudly rather than guess
        raise InvalidBase64Error("invalid Base64", offset=0)
    raise err


def encode_base64(tensor, byteorder: str = "little", *, dtype: str | None = None) -> str:
    """The whole tensor as one Base64 string: a Tensor, a numpy array (any float dtype, int8, uint8),
    a list of floats or of lists (float32), or anything numpy.asarray reads; ``dtype`` converts first.

    >>> import numpy as np
    >>> encode_base64(np.array([1.0, -2.5, 0.1], dtype=np.float32), "big")
    'P4AAAMAgAAA9zMzN'
    >>> encode_base64([1.0, -2.5, 0.1], "big") == encode_base64(np.array([1.0, -2.5, 0.1]), "big", dtype="float32")
    True
    """
    check_byteorder(byteorder)
    return b64encode(as_tensor(tensor, dtype).to_bytes(byteorder)).decode("ascii")


def decode_base64(text: str | bytes, dtype: str = "float32", shape: tuple[int, int] | None = None,
                  byteorder: str = "little", *, dim: int | None = None):
    """Decode one Base64 string.

    Without ``shape`` or ``dim`` it is one vector (an OpenAI ``embedding`` string, float32 by default)
    and a 1-D numpy array comes back; ``dim=d`` gives an ``(n, d)`` array. Both are views of the
    decoded bytes (bfloat16 is widened to float32; binary is packed uint8). With ``shape=(n, d)`` the
    length is checked against it and a :class:`Tensor` comes back.

    >>> decode_base64("AACAPwAAIMA=")
    array([ 1. , -2.5], dtype=float32)
    >>> decode_base64("AACAPwAAIMA=", dim=1)
    array([[ 1. ],
           [-2.5]], dtype=float32)
    >>> decode_base64("P4AAAMAgAAA9zMzN", "float32", (1, 3), "big").array
    array([[ 1. , -2.5,  0.1]], dtype=float32)
    """
    check_dtype(dtype)
    check_byteorder(byteorder)
    data = b64decode_strict(text)
    if shape is not None:
        return Tensor.from_bytes(data, dtype, shape, byteorder)
    if dim is not None:
        if not isinstance(dim, int) or isinstance(dim, bool) or dim < 1:
            raise ValueError(f"dim must be a positive integer, got {dim!r}")
        n = -(-len(data) // row_bytes(dtype, dim))  # a partial last row fails below with length_mismatch
        t = Tensor.from_bytes(data, dtype, (n, dim), byteorder)
    else:
        items = -(-len(data) // (1 if dtype == "binary" else row_bytes(dtype, 1)))
        t = Tensor.from_bytes(data, dtype, (1, items * 8 if dtype == "binary" else items), byteorder)
    array = t.to_float32() if dtype == "bfloat16" else t.array
    return array if dim is not None else array.reshape(-1)
