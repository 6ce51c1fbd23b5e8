"""Dtypes (SPEC.md section 2) and the typed objects that travel: Tensor, Usage, Embeddings."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

import numpy as np

from ._errors import InvalidFieldError, LengthMismatchError, UnknownDtypeError

__all__ = ["DTYPES", "Tensor", "Usage", "Embeddings", "row_bytes", "check_dtype", "check_byteorder", "check_no_kind",
           "widen"]

#: dtype name -> numpy storage dtype (little-endian); bfloat16 is stored as its uint16 bits and
#: binary as packed bytes, ceil(d / 8) per row.
_STORAGE: Final[dict[str, np.dtype]] = {
    "float32": np.dtype("<f4"),
    "float16": np.dtype("<f2"),
    "bfloat16": np.dtype("<u2"),
    "float64": np.dtype("<f8"),
    "int8": np.dtype("i1"),
    "uint8": np.dtype("u1"),
    "binary": np.dtype("u1"),
}
DTYPES: Final[tuple[str, ...]] = tuple(_STORAGE)
_FROM_NUMPY: Final[dict[np.dtype, str]] = {
    np.dtype("<f4"): "float32", np.dtype("<f2"): "float16", np.dtype("<f8"): "float64",
    np.dtype("i1"): "int8", np.dtype("u1"): "uint8",
}


def check_dtype(name: object, field: str = "dtype") -> str:
    if not isinstance(name, str):
        raise InvalidFieldError(f"dtype must be a string, got {type(name).__name__}", field=field)
    if name not in _STORAGE:
        raise UnknownDtypeError(f"unknown dtype {name!r}; expected one of {', '.join(DTYPES)}", field=field)
    return name


def check_no_kind(doc: Mapping, key: str, field: str | None = None) -> None:
    """SPEC.md 20: a tensor body says no kind: ``doc`` (a parsed body, headers or metadata) has no ``key``."""
    if key in doc:
        raise InvalidFieldError(f"a tensor body says no kind, this one says {doc[key]!r}: decode it as that kind "
                                "(decode(..., kind=...))", field=field or key)


def check_byteorder(name: object, field: str = "byteorder") -> str:
    if name not in ("little", "big"):
        raise InvalidFieldError(f"byteorder must be 'little' or 'big', got {name!r}", field=field)
    return name  # type: ignore[return-value]


def row_bytes(dtype: str, d: int) -> int:
    """Bytes per row: ``ceil(d / 8)`` for binary, ``d * itemsize`` otherwise."""
    return (d + 7) // 8 if dtype == "binary" else d * _STORAGE[dtype].itemsize


def storage_dtype(dtype: str, byteorder: str = "little") -> np.dtype:
    dt = _STORAGE[dtype]
    return dt.newbyteorder(">") if byteorder == "big" and dt.itemsize > 1 else dt


@dataclass(frozen=True, slots=True)
class Tensor:
    """A row-major ``(n, d)`` matrix of one dtype.

    ``array`` is the storage: an ``(n, d)`` numpy array of the dtype (``uint16`` bits for bfloat16,
    packed ``uint8`` of shape ``(n, ceil(d / 8))`` for binary), usually a read-only view over the
    received bytes. Build one with :meth:`from_array` or :meth:`from_bytes`.

    >>> t = Tensor.from_array(np.array([[1.0, -2.5]], dtype=np.float32))
    >>> t.dtype, t.shape
    ('float32', (1, 2))
    """

    array: np.ndarray
    dtype: str
    d: int

    def __post_init__(self) -> None:
        check_dtype(self.dtype)
        width = row_bytes(self.dtype, self.d) if self.dtype == "binary" else self.d
        if self.array.ndim != 2 or self.array.shape[1] != width:
            raise ValueError(f"{self.dtype} tensor with d={self.d} needs an (n, {width}) array, got {self.array.shape}")
        if self.array.dtype.itemsize != _STORAGE[self.dtype].itemsize or self.array.dtype.kind != _STORAGE[self.dtype].kind:
            raise ValueError(f"{self.dtype} tensor cannot hold a numpy {self.array.dtype} array")

    @property
    def n(self) -> int:
        return self.array.shape[0]

    @property
    def shape(self) -> tuple[int, int]:
        return (self.array.shape[0], self.d)

    @property
    def nbytes(self) -> int:
        return self.n * row_bytes(self.dtype, self.d)

    @classmethod
    def from_array(cls, array: np.ndarray, dtype: str | None = None, d: int | None = None) -> "Tensor":
        """Wrap a numpy array (1-D is one row). ``dtype`` is needed for bfloat16 (uint16 bits) and
        binary (packed uint8, with ``d``); other dtypes follow the array's."""
        array = np.asarray(array)
        if array.ndim == 1:
            array = array.reshape(1, -1)
        if dtype is None:
            native = array.dtype.newbyteorder("<") if array.dtype.byteorder in (">", "=") else array.dtype
            dtype = _FROM_NUMPY.get(np.dtype(native))
            if dtype is None:
                raise ValueError(f"no densewire dtype for numpy {array.dtype}; pass dtype= (bfloat16 and binary need it)")
        check_dtype(dtype)
        target = _STORAGE[dtype]
        if array.dtype != target:
            if array.dtype.kind != target.kind or array.dtype.itemsize != target.itemsize:
                raise ValueError(f"a numpy {array.dtype} array cannot be a {dtype} tensor; use densewire.convert")
            array = array.astype(target)
        if dtype == "binary":
            if d is None:
                d = array.shape[1] * 8
            elif (d + 7) // 8 != array.shape[1]:
                raise ValueError(f"binary d={d} needs {(d + 7) // 8} bytes per row, the array has {array.shape[1]}")
        else:
            d = array.shape[1]
        return cls(array, dtype, d)

    @classmethod
    def from_bytes(cls, data, dtype: str, shape: tuple[int, int], byteorder: str = "little",
                   field: str | None = None, offset: int = 0) -> "Tensor":
        """A view over ``data`` (no copy for little-endian); checks the length against the shape."""
        n, d = shape
        expected = n * row_bytes(dtype, d)
        got = memoryview(data).nbytes
        if got != expected:
            raise LengthMismatchError(
                f"{got} bytes do not hold a {dtype} tensor of shape ({n}, {d}), which needs {expected}",
                offset=offset + min(got, expected), field=field)
        width = row_bytes(dtype, d) if dtype == "binary" else d
        dt = storage_dtype(dtype, byteorder)
        array = np.frombuffer(data, dtype=dt, count=n * width).reshape(n, width) if expected else np.empty((n, width), dt)
        if dt.byteorder == ">":
            array = array.astype(dt.newbyteorder("<"))
        return cls(array, dtype, d)

    def to_bytes(self, byteorder: str = "little") -> bytes | memoryview:
        """The tensor's bytes in the given byte order (a view when no copy is needed)."""
        a = self.array
        if byteorder == "big" and a.dtype.itemsize > 1:
            a = a.astype(a.dtype.newbyteorder(">"))
        a = np.ascontiguousarray(a)
        return memoryview(a).cast("B") if a.size else b""

    def to_float32(self) -> np.ndarray:
        """Values widened to float32 (exact for float16 and bfloat16; 0/1 for binary bits)."""
        return widen(self)


MAX_TOKEN_COUNT = (1 << 53) - 1
"""The largest usage count (SPEC.md 6.2): every language's JSON numbers hold it exactly."""


@dataclass(frozen=True, slots=True)
class Usage:
    prompt_tokens: int = 0
    total_tokens: int = 0

    @classmethod
    def parse(cls, value: object) -> "Usage | None":
        """A decoded ``usage`` map (JSON or MessagePack): None when absent; missing counts are 0."""
        if value is None:
            return None
        if not isinstance(value, dict):
            raise InvalidFieldError("must be a map of token counts", field="usage")
        counts = []
        for key in ("prompt_tokens", "total_tokens"):
            v = value.get(key, 0)
            if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v <= MAX_TOKEN_COUNT:
                raise InvalidFieldError(f"must be an integer from 0 to 2^53 - 1, got {v!r}", field=f"usage.{key}")
            counts.append(v)
        return cls(*counts)


@dataclass(frozen=True, slots=True)
class Embeddings:
    """An embeddings response: the tensor, and the model and usage that came with it; for int8 and
    uint8 responses, the ``quantization`` id of the ranges the server quantized with (SPEC.md 17.4).
    ``tensor`` is a RaggedTensor or SparseVectors for the outputs of SPEC.md 19 (token embeddings,
    sparse vectors); ``array`` is then their ``values``."""

    tensor: "Tensor | RaggedTensor | SparseVectors"  # noqa: F821 (densewire._ragged builds on this module)
    model: str | None = None
    usage: Usage | None = None
    quantization: str | None = None

    @property
    def array(self) -> np.ndarray:
        return self.tensor.array if isinstance(self.tensor, Tensor) else self.tensor.values


def widen(t: Tensor) -> np.ndarray:
    """A tensor's values as float32: exact for float16 and bfloat16; 0.0/1.0 per bit for binary."""
    a = t.array
    if t.dtype == "bfloat16":
        return (a.astype(np.uint32) << 16).view(np.float32)
    if t.dtype == "binary":
        return np.unpackbits(a, axis=1, count=t.d, bitorder="big").astype(np.float32)
    return a.astype(np.float32, copy=False)
