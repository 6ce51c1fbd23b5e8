"""Conversions (SPEC.md section 3) against the golden generator's exact rounding (fractions)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import densewire
from densewire._convert import float32_to_bfloat16, float32_to_float16, float64_to_bfloat16

_spec = importlib.util.spec_from_file_location("golden_generate", Path(__file__).resolve().parents[2] / "testdata" / "generate.py")
reference = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(reference)


@settings(max_examples=2000, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_float32_to_float16_and_bfloat16_match_exact_rounding(bits: int) -> None:
    x = np.array([bits], dtype="<u4").view("<f4")
    assert int(float32_to_float16(x).view("<u2")[0]) == reference.convert_bits(bits, "float32", "float16")
    assert int(float32_to_bfloat16(x)[0]) == reference.convert_bits(bits, "float32", "bfloat16")


@settings(max_examples=2000, deadline=None)
@given(st.one_of(st.integers(0, 2**64 - 1),
                 # values near float32 / bfloat16 rounding boundaries, where double rounding would show
                 st.integers(0, 2**32 - 1).map(lambda b: (b << 32) | 0x10000000)))
def test_float64_conversions_round_once(bits: int) -> None:
    x = np.array([bits], dtype="<u8").view("<f8")
    assert int(float64_to_bfloat16(x)[0]) == reference.convert_bits(bits, "float64", "bfloat16")
    f32 = densewire.convert(x.reshape(1, 1), "float32").array.view("<u4")[0, 0]
    assert int(f32) == reference.convert_bits(bits, "float64", "float32")
    f16 = densewire.convert(x.reshape(1, 1), "float16").array.view("<u2")[0, 0]
    assert int(f16) == reference.convert_bits(bits, "float64", "float16")


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 40), st.integers(1, 5), st.integers(0, 2**32 - 1))
def test_binary_packs_sign_bits_msb_first(d: int, n: int, seed: int) -> None:
    x = np.random.default_rng(seed).standard_normal((n, d)).astype(np.float32)
    packed = densewire.convert(x, "binary")
    assert packed.shape == (n, d) and packed.array.shape == (n, (d + 7) // 8)
    items = [f"{v:08x}" for v in x.view("<u4").ravel()]
    assert [f"{b:02x}" for b in packed.array.ravel()] == reference.to_binary_rows("float32", items, [n, d])
    assert np.array_equal(packed.to_float32(), (x > 0).astype(np.float32))


def test_widening_is_exact() -> None:
    x = np.random.default_rng(1).standard_normal((8, 33)).astype(np.float32)
    for dtype in ("float16", "bfloat16"):
        t = densewire.convert(x, dtype)
        assert np.array_equal(densewire.convert(t.to_float32(), dtype).array, t.array)
