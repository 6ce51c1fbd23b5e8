"""Strict Base64 (SPEC.md section 5) over pybase64's SIMD codec.

The happy path is one pybase64 call; the slow scan that finds the offset of the first bad
character only runs after pybase64 has rejected the input.
"""

from __future__ import annotations

import pybase64

from ._errors import InvalidBase64Error
from ._tensor import Tensor, check_byteorder, check_dtype

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


def encode_base64(tensor: Tensor, byteorder: str = "little") -> str:
    """The whole tensor as one Base64 string.

    >>> import numpy as np
    >>> encode_base64(Tensor.from_array(np.array([1.0, -2.5, 0.1], dtype=np.float32)), "big")
    'P4AAAMAgAAA9zMzN'
    """
    check_byteorder(byteorder)
    return b64encode(tensor.to_bytes(byteorder)).decode("ascii")


def decode_base64(text: str | bytes, dtype: str, shape: tuple[int, int], byteorder: str = "little") -> Tensor:
    """Decode one Base64 string holding a whole ``(n, d)`` tensor; checks the length against the shape.

    >>> decode_base64("P4AAAMAgAAA9zMzN", "float32", (1, 3), "big").array
    array([[ 1. , -2.5,  0.1]], dtype=float32)
    """
    check_dtype(dtype)
    check_byteorder(byteorder)
    return Tensor.from_bytes(b64decode_strict(text), dtype, shape, byteorder)
