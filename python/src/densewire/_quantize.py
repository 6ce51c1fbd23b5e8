"""Quantized embeddings (SPEC.md section 17): int8/uint8 codes from per-dimension ranges, the
quantization id that names the ranges, the object servers publish, and Cohere's binary names.

Every function is vectorised with numpy and exact to the spec: the arithmetic is binary64 on the
float32 values widened exactly, one ufunc per operation (numpy never fuses a multiply and an add),
and float32 results are rounded by numpy's float64 -> float32 cast (round to nearest, ties to even).

>>> import numpy as np
>>> q = Quantization.from_ranges(np.array([-1.0, 0.0], np.float32), np.array([1.0, 1.0], np.float32))
>>> codes = q.quantize(np.array([[0.0, 1.0]], np.float32), "uint8")
>>> codes.array
array([[127, 255]], dtype=uint8)
>>> q.dequantize(codes)
array([[-0.00392157,  1.0019608 ]], dtype=float32)
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import orjson

from ._base64 import b64decode_strict, b64encode
from ._errors import DensewireError, InvalidFieldError, LengthMismatchError, MalformedError, ShapeMismatchError
from ._tensor import Embeddings, Tensor

__all__ = ["METHOD", "RULE_VERSION", "Quantization", "quantize", "dequantize", "quantization_id", "calibrate",
           "check_ranges", "cohere_binary", "from_cohere_binary", "QUANTIZED_DTYPES"]

#: SPEC.md 17.6: the ``method`` of the published object
METHOD = "minmax-per-dimension"
#: The rule's version, part of the servers' calibration cache keys: bump it if the rule changes.
RULE_VERSION = "minmax-per-dimension/1"
QUANTIZED_DTYPES = ("int8", "uint8")


def _float32_vector(v: Any, name: str) -> np.ndarray:
    a = np.asarray(v)
    if a.ndim != 1:
        raise ShapeMismatchError(f"must be one vector of float32 values, got shape {a.shape}", field=name)
    if a.dtype.kind != "f":
        raise InvalidFieldError(f"must hold floats, got numpy {a.dtype}", field=name)
    return a.astype("<f4", copy=False)


def check_ranges(lower: Any, upper: Any, d: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``lower`` and ``upper`` as float32 vectors of ``d`` items (SPEC.md 17.2), or the error of 17.3:
    ``shape_mismatch`` for another length, ``invalid_field`` on ``lower[j]`` or ``upper[j]`` for the
    first dimension with a non-finite item or ``upper[j] < lower[j]``."""
    lo, hi = _float32_vector(lower, "lower"), _float32_vector(upper, "upper")
    if d is None:
        d = lo.shape[0]
    if lo.shape[0] != d:
        raise ShapeMismatchError(f"{lo.shape[0]} items for {d} dimensions", field="lower")
    if hi.shape[0] != d:
        raise ShapeMismatchError(f"{hi.shape[0]} items for {d} dimensions", field="upper")
    bad_lo = ~np.isfinite(lo)
    with np.errstate(invalid="ignore"):
        bad_hi = ~np.isfinite(hi) | (hi < lo)
    if bad_lo.any() or bad_hi.any():
        j = int(np.argmax(bad_lo | bad_hi))
        if bad_lo[j]:
            raise InvalidFieldError(f"{lo[j]} is not a finite lower bound", field=f"lower[{j}]")
        why = "is not finite" if not np.isfinite(hi[j]) else f"is below lower[{j}] = {lo[j]}"
        raise InvalidFieldError(f"{hi[j]} {why}", field=f"upper[{j}]")
    return lo, hi


def _values(x: Any) -> np.ndarray:
    """Float values as an (n, d) array (float16 and bfloat16 tensors widen exactly to float32)."""
    if isinstance(x, Embeddings):
        x = x.tensor
    if isinstance(x, Tensor):
        if x.dtype in ("int8", "uint8", "binary"):
            raise InvalidFieldError(f"only float values are quantized, not {x.dtype}", field="dtype")
        x = x.to_float32() if x.dtype != "float64" else x.array
    a = np.asarray(x)
    if a.ndim == 1:
        a = a.reshape(1, -1)
    if a.ndim != 2 or a.dtype.kind != "f":
        raise ValueError(f"quantize takes an (n, d) array of floats, got {a.dtype} of shape {a.shape}")
    if a.dtype == np.float64:  # float64 values are float32 embeddings on the wire: round them first
        a = a.astype(np.float32)
    return a


def quantize(x: Any, lower: Any, upper: Any, dtype: str = "int8") -> Tensor:
    """Codes of float values ``x`` (an ``(n, d)`` array or float Tensor) with the ranges, SPEC.md 17.3:
    ``u = floor((x - lower) / step)`` clamped to 0..255 (NaN: 0; ``step = (upper - lower) / 255``, when
    0: 255 above lower, else 0); ``uint8`` is ``u``, ``int8`` is ``u - 128``."""
    if dtype not in QUANTIZED_DTYPES:
        raise InvalidFieldError(f"quantizes to int8 or uint8, not {dtype!r}", field="dtype")
    a = _values(x)
    lo32, hi32 = check_ranges(lower, upper, a.shape[1])
    lo, hi = lo32.astype(np.float64), hi32.astype(np.float64)
    step = (hi - lo) / 255.0
    x64 = a.astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        q = np.floor((x64 - lo) / step)
    u = np.clip(np.nan_to_num(q, nan=0.0, posinf=255.0, neginf=0.0), 0.0, 255.0)
    flat = step == 0
    if flat.any():
        u[:, flat] = np.where(x64[:, flat] > lo[flat], 255.0, 0.0)
    codes = u.astype(np.uint8)
    if dtype == "int8":
        return Tensor((codes ^ np.uint8(0x80)).view(np.int8), "int8", a.shape[1])  # u - 128 in two's complement
    return Tensor(codes, "uint8", a.shape[1])


def _codes(codes: Any) -> np.ndarray:
    """uint8 codes (0..255) from an int8/uint8 Tensor, Embeddings or numpy array (int8 + 128)."""
    if isinstance(codes, Embeddings):
        codes = codes.tensor
    if isinstance(codes, Tensor):
        if codes.dtype not in QUANTIZED_DTYPES:
            raise InvalidFieldError(f"only int8 and uint8 codes are dequantized, not {codes.dtype}", field="dtype")
        codes = codes.array
    a = np.asarray(codes)
    if a.ndim == 1:
        a = a.reshape(1, -1)
    if a.ndim != 2 or a.dtype not in (np.dtype(np.int8), np.dtype(np.uint8)):
        raise ValueError(f"dequantize takes an (n, d) array of int8 or uint8 codes, got {a.dtype} of shape {a.shape}")
    return a.view(np.uint8) ^ np.uint8(0x80) if a.dtype == np.int8 else a


def dequantize(codes: Any, lower: Any, upper: Any) -> np.ndarray:
    """float32 ``(n, d)`` values of int8/uint8 codes, SPEC.md 17.3: ``lower + (u + 0.5) * step`` in
    binary64, rounded to float32; ``lower`` where ``step`` is 0."""
    u = _codes(codes)
    lo32, hi32 = check_ranges(lower, upper, u.shape[1])
    lo, hi = lo32.astype(np.float64), hi32.astype(np.float64)
    step = (hi - lo) / 255.0
    product = (u.astype(np.float64) + 0.5) * step
    with np.errstate(over="ignore"):  # a range near the float32 limits may round past them: infinity
        out = (lo + product).astype(np.float32)
    flat = step == 0
    if flat.any():
        out[:, flat] = lo32[flat]
    return out


def quantization_id(lower: Any, upper: Any) -> str:
    """SPEC.md 17.4: the first 16 hex digits of sha256(lower LE float32 || upper LE float32 || decimal d)."""
    lo, hi = check_ranges(lower, upper)
    h = hashlib.sha256(lo.astype("<f4").tobytes())
    h.update(hi.astype("<f4").tobytes())
    h.update(str(lo.shape[0]).encode("ascii"))
    return h.hexdigest()[:16]


def calibrate(vectors: Any) -> tuple[np.ndarray, np.ndarray]:
    """Ranges of calibration vectors (SPEC.md 17.2): the per-dimension minimum and maximum, float32."""
    a = _values(vectors)
    if a.shape[0] == 0:
        raise ValueError("calibration needs at least one vector")
    if not np.isfinite(a).all():
        raise ValueError("calibration vectors must be finite")
    return a.min(axis=0).astype("<f4"), a.max(axis=0).astype("<f4")


def cohere_binary(packed: Any) -> np.ndarray:
    """Packed sign bits (densewire ``binary``, Cohere's ``ubinary``) as Cohere's and
    sentence-transformers' ``binary``: each byte as int8, ``byte - 128`` (SPEC.md 17.1)."""
    if isinstance(packed, Embeddings):
        packed = packed.tensor
    if isinstance(packed, Tensor):
        if packed.dtype != "binary":
            raise InvalidFieldError(f"needs a binary tensor, not {packed.dtype}", field="dtype")
        packed = packed.array
    a = np.asarray(packed, dtype=np.uint8)
    return (a ^ np.uint8(0x80)).view(np.int8)


def from_cohere_binary(values: Any) -> np.ndarray:
    """Cohere's ``binary`` int8 values (``byte - 128``) back to the packed bytes (uint8)."""
    a = np.asarray(values)
    if a.dtype != np.int8:
        if a.size and (a.min() < -128 or a.max() > 127):
            raise InvalidFieldError("Cohere binary values are -128..127", field="binary")
        a = a.astype(np.int8)
    return a.view(np.uint8) ^ np.uint8(0x80)


def _b64_floats(v: np.ndarray) -> str:
    return b64encode(np.ascontiguousarray(v, dtype="<f4").tobytes()).decode("ascii")


@dataclass(frozen=True, eq=False)
class Quantization:
    """Ranges with their id (SPEC.md 17.2-17.4), as servers publish them at ``GET /v1/models`` and
    ``GET /v1/quantization/{id}``. Build with :meth:`from_ranges`, :meth:`calibrate` or :meth:`from_json`."""

    lower: np.ndarray
    upper: np.ndarray
    id: str
    model: str | None = None
    calibration: dict[str, Any] | None = field(default=None)

    @property
    def dimensions(self) -> int:
        return int(self.lower.shape[0])

    @classmethod
    def from_ranges(cls, lower: Any, upper: Any, *, model: str | None = None,
                    calibration: dict[str, Any] | None = None) -> "Quantization":
        lo, hi = check_ranges(lower, upper)
        lo, hi = lo.copy(), hi.copy()
        lo.setflags(write=False)
        hi.setflags(write=False)
        return cls(lo, hi, quantization_id(lo, hi), model, calibration)

    @classmethod
    def calibrate(cls, vectors: Any, *, model: str | None = None,
                  calibration: dict[str, Any] | None = None) -> "Quantization":
        """The ranges of calibration vectors (their per-dimension min and max)."""
        return cls.from_ranges(*calibrate(vectors), model=model, calibration=calibration)

    @classmethod
    def from_json(cls, obj: Any) -> "Quantization":
        """The published object (a dict, or its JSON text), checked as SPEC.md 17.6 says: keys and
        types, Base64 and lengths of ``lower`` and ``upper``, the ranges, then the id."""
        if isinstance(obj, (bytes, bytearray, memoryview, str)):
            try:
                obj = orjson.loads(obj)
            except orjson.JSONDecodeError as exc:
                raise MalformedError(f"the quantization object is not JSON: {exc}", offset=exc.pos) from None
        if not isinstance(obj, dict):
            raise MalformedError("the quantization object must be a JSON object")
        for key, kind in (("id", str), ("method", str), ("dimensions", int), ("lower", str), ("upper", str)):
            v = obj.get(key)
            if not isinstance(v, kind) or isinstance(v, bool):
                raise InvalidFieldError("missing" if v is None else f"must be a {kind.__name__}, got {v!r}", field=key)
            if key == "method" and v != METHOD:
                raise InvalidFieldError(f"{v!r} is not {METHOD!r}, the only method of this spec", field=key)
            if key == "dimensions" and v < 0:
                raise InvalidFieldError(f"must be a non-negative integer, got {v}", field=key)
        d = obj["dimensions"]
        ranges = []
        for key in ("lower", "upper"):
            try:
                raw = b64decode_strict(obj[key])
            except DensewireError as exc:
                raise exc.located(field=key) from None
            if len(raw) != 4 * d:
                raise LengthMismatchError(f"{len(raw)} bytes, expected {d} float32 items ({4 * d} bytes)",
                                          offset=min(len(raw), 4 * d), field=key)
            ranges.append(np.frombuffer(raw, "<f4"))
        lo, hi = check_ranges(ranges[0], ranges[1], d)
        qid = quantization_id(lo, hi)
        if obj["id"] != qid:
            raise InvalidFieldError(f"{obj['id']!r} is not the id of these ranges ({qid})", field="id")
        model = obj.get("model") if isinstance(obj.get("model"), str) else None
        calibration = obj.get("calibration") if isinstance(obj.get("calibration"), dict) else None
        lo.setflags(write=False)
        hi.setflags(write=False)
        return cls(lo, hi, qid, model, calibration)

    def to_json(self) -> dict[str, Any]:
        """The published object (SPEC.md 17.6), keys in spec order."""
        doc: dict[str, Any] = {"object": "quantization", "id": self.id}
        if self.model is not None:
            doc["model"] = self.model
        doc["method"] = METHOD
        if self.calibration is not None:
            doc["calibration"] = self.calibration
        doc.update(dimensions=self.dimensions, lower=_b64_floats(self.lower), upper=_b64_floats(self.upper))
        return doc

    def quantize(self, x: Any, dtype: str = "int8") -> Tensor:
        return quantize(x, self.lower, self.upper, dtype)

    def dequantize(self, codes: Any) -> np.ndarray:
        return dequantize(codes, self.lower, self.upper)

    def __repr__(self) -> str:
        return f"Quantization(id={self.id!r}, dimensions={self.dimensions}, model={self.model!r})"
