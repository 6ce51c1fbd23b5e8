"""Dtype conversions of SPEC.md section 3, vectorised with numpy."""

from __future__ import annotations

import numpy as np

from ._tensor import Tensor, check_dtype, widen

__all__ = ["convert", "float32_to_float16", "float32_to_bfloat16", "to_binary", "float64_to_bfloat16", "widen"]


def float32_to_float16(x: np.ndarray) -> np.ndarray:
    """IEEE round-to-nearest-even; NaN becomes 0x7E00 with the sign kept (numpy keeps payloads)."""
    x = np.asarray(x, dtype=np.float32)
    with np.errstate(over="ignore"):
        out = x.astype("<f2")
    nan = np.isnan(x)
    if nan.any():
        bits = out.view("<u2")
        bits[nan] = np.where(np.signbit(x[nan]), 0xFE00, 0x7E00).astype("<u2")
    return out


def float32_to_bfloat16(x: np.ndarray) -> np.ndarray:
    """Top 16 bits rounded to nearest even; NaN becomes 0x7FC0 with the sign kept. Returns uint16 bits."""
    b = np.asarray(x, dtype="<f4").view("<u4").astype(np.uint32)
    rounded = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype("<u2")
    nan = (b & 0x7FFFFFFF) > 0x7F800000
    if nan.any():
        rounded[nan] = (((b[nan] >> 16) & 0x8000) | 0x7FC0).astype("<u2")
    return rounded


def float64_to_bfloat16(x: np.ndarray) -> np.ndarray:
    """float64 straight to bfloat16 (round to nearest even, no double rounding): round to float32
    *to odd* first, which keeps enough information for the final rounding to be exact."""
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(over="ignore"):
        f = x.astype("<f4")
    bits = f.view("<u4").copy()
    inexact = (f.astype(np.float64) != x) & ~np.isnan(x)
    away = inexact & (np.abs(f.astype(np.float64)) > np.abs(x))
    bits[away] -= 1  # the float32 next toward zero: truncation (inf - 1 is the largest finite)
    bits[inexact] |= 1  # sticky bit
    return float32_to_bfloat16(bits.view("<f4"))


def to_binary(x: np.ndarray) -> np.ndarray:
    """One bit per dimension, 1 iff the value is > 0, packed MSB first, each row padded to a byte."""
    x = np.asarray(x)
    if x.ndim == 1:
        x = x.reshape(1, -1)
    return np.packbits(x > 0, axis=1, bitorder="big")


def convert(x: Tensor | np.ndarray, dtype: str) -> Tensor:
    """Convert float32 (or float64) values to ``dtype`` by the rules of SPEC.md section 3.

    >>> convert(np.array([[1.0, -0.5, 0.0, 2.0]], dtype=np.float32), "binary").array
    array([[144]], dtype=uint8)
    """
    check_dtype(dtype)
    if isinstance(x, Tensor):
        if x.dtype == dtype:
            return x
        if x.dtype not in ("float32", "float64"):
            x = widen(x)
        else:
            x = x.array
    a = np.asarray(x)
    if a.ndim == 1:
        a = a.reshape(1, -1)
    if a.dtype.kind != "f":
        raise ValueError(f"convert() takes float32 or float64 values, got numpy {a.dtype}")
    src64 = a.dtype == np.float64
    if dtype == "float32":
        with np.errstate(over="ignore"):
            f = a.astype("<f4")
        if src64 and np.isnan(a).any():  # canonical NaN, sign kept
            nan = np.isnan(a)
            f.view("<u4")[nan] = np.where(np.signbit(a[nan]), 0xFFC00000, 0x7FC00000).astype("<u4")
        return Tensor(f, "float32", a.shape[1])
    if dtype == "float64":
        return Tensor(a.astype("<f8"), "float64", a.shape[1])
    if dtype == "float16":
        src = a if src64 else a.astype(np.float32)
        return Tensor(float32_to_float16(src) if not src64 else _f64_to_f16(src), "float16", a.shape[1])
    if dtype == "bfloat16":
        return Tensor(float64_to_bfloat16(a) if src64 else float32_to_bfloat16(a), "bfloat16", a.shape[1])
    if dtype == "binary":
        return Tensor(to_binary(a), "binary", a.shape[1])
    raise ValueError(f"densewire does not quantize to {dtype}; pass an {dtype} array to Tensor.from_array")


def _f64_to_f16(a: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        out = a.astype("<f2")  # numpy rounds float64 to float16 directly
    nan = np.isnan(a)
    if nan.any():
        out.view("<u2")[nan] = np.where(np.signbit(a[nan]), 0xFE00, 0x7E00).astype("<u2")
    return out
