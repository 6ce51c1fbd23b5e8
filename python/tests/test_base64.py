"""Strict Base64 (SPEC.md section 5): the pybase64-backed codec against a naive reference."""

from __future__ import annotations

import base64

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import densewire
from densewire._base64 import b64decode_strict

ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


def naive(s: str) -> bytes | int:
    """SPEC.md section 5 written out step by step: the bytes, or the offset of the error."""
    for i, c in enumerate(s):
        if c not in ALPHABET and c != "=":
            return i
    if "=" in s:
        p = s.index("=")
        pad = len(s) - p
        if set(s[p:]) != {"="} or pad > 2 or len(s) % 4 or p % 4 not in (2, 3) or (p % 4 == 2) != (pad == 2):
            return p
        body = s[:p]
    else:
        if len(s) % 4 == 1:
            return len(s) - 1
        body = s
    bits = "".join(f"{ALPHABET.index(c):06b}" for c in body)
    return bytes(int(bits[k:k + 8], 2) for k in range(0, len(bits) - len(bits) % 8, 8))


@settings(max_examples=600, deadline=None)
@given(st.text(alphabet=ALPHABET + "=" * 6 + " -_*\n\u00e9", max_size=24))
def test_strict_decode_matches_the_naive_reference(s: str) -> None:
    expected = naive(s)
    if isinstance(expected, int):
        with pytest.raises(densewire.InvalidBase64Error) as info:
            b64decode_strict(s)
        assert info.value.offset == expected
    else:
        assert b64decode_strict(s) == expected


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=64))
def test_encode_is_standard_padded_base64(data: bytes) -> None:
    t = densewire.Tensor.from_array(np.frombuffer(data, np.uint8).reshape(1, -1))
    assert densewire.encode_base64(t) == base64.b64encode(data).decode()
    assert b64decode_strict(base64.b64encode(data).decode().rstrip("=")) == data  # unpadded accepted


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["float32", "float16", "float64", "bfloat16"]), st.sampled_from(["little", "big"]),
       st.integers(0, 5), st.integers(0, 9), st.integers(0, 2**32 - 1))
def test_round_trip_every_dtype_and_byte_order(dtype: str, order: str, n: int, d: int, seed: int) -> None:
    raw = np.random.default_rng(seed).integers(0, 256, n * densewire.row_bytes(dtype, d), dtype=np.uint8).tobytes()
    t = densewire.Tensor.from_bytes(raw, dtype, (n, d))
    text = densewire.encode_base64(t, order)
    back = densewire.decode_base64(text, dtype, (n, d), order)
    assert np.ascontiguousarray(back.array).tobytes() == raw
    if order == "big" and dtype != "bfloat16" and raw:
        width = np.dtype(dtype).itemsize
        swapped = b"".join(raw[k:k + width][::-1] for k in range(0, len(raw), width))
        assert base64.b64decode(text) == swapped


def test_non_ascii_input_names_its_offset() -> None:
    with pytest.raises(densewire.InvalidBase64Error) as info:
        b64decode_strict("AAAA\u00e9AAA")
    assert info.value.offset == 4
