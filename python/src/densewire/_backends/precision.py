"""Which precision and engine run a BERT-family model on this CPU (issue 26).

``--precision auto|fp32|bf16|int8`` and ``--engine auto|onnx|openvino|numpy``. :func:`choose` decides
from a list of CPU flags (``/proc/cpuinfo``'s, by :func:`cpu_flags`; tests pass their own):

* ``auto`` precision is ``bf16`` where the CPU multiplies bf16 natively (``amx_bf16``: Intel Xeon 4th
  generation on, with AMX tiles; ``avx512_bf16``: AMD Zen 4/5, Intel Cooper Lake), else ``fp32``.
  ``int8`` is never chosen by ``auto``: it costs cosine (README, "Precision").
* ``auto`` engine is the one measured fastest for that precision (bench/model/RESULTS.md): ``openvino``
  for bf16 (ONNX Runtime has no bf16 matrix product on x86, microsoft/onnxruntime#19937), ``onnx`` for
  fp32 (OpenVINO f32 ran 0.8-1.0x ONNX Runtime on AVX2, 0.88-1.13x on AMX) and for int8 (ONNX Runtime's
  dynamic quantization kept 0.98 cosine, OpenVINO's NNCF int8 0.947); ``numpy`` where onnxruntime is
  not installed.
* A precision the CPU cannot run natively (``bf16`` without ``amx_bf16``/``avx512_bf16``: OpenVINO would
  quietly run it in f32 or emulate it) or an engine that cannot run it (``bf16`` on onnx or numpy,
  ``int8`` on openvino or numpy) is a :class:`PrecisionError` at start-up, naming the flags read.

``--quantize int8`` is the older name of ``--precision int8`` and still works; the two may not disagree.
"""

from __future__ import annotations

import importlib.util
import logging
import platform
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

__all__ = ["PRECISIONS", "ENGINE_CHOICES", "ENGINES", "BF16_FLAGS", "VNNI_FLAGS", "PrecisionError", "Choice",
           "choose", "cpu_flags", "cpu_features", "native_precision", "int8_reduce_range", "merge_quantize"]

PRECISIONS = ("auto", "fp32", "bf16", "int8")
ENGINES = ("onnx", "openvino", "numpy")
ENGINE_CHOICES = ("auto", *ENGINES)
#: flags of a CPU that multiplies bf16 in hardware
BF16_FLAGS = ("amx_bf16", "avx512_bf16")
#: flags of a CPU with int8 dot products that do not saturate (no need for 7-bit weights)
VNNI_FLAGS = ("amx_int8", "avx512_vnni", "avx_vnni")
#: the flags reported by /v1/models, /health, GET / and the log: the ones these choices read, and the
#: vector width under them
_REPORTED = (*BF16_FLAGS, *VNNI_FLAGS, "amx_tile", "avx512f", "avx2")

log = logging.getLogger("densewire.backends")


class PrecisionError(ValueError):
    """A precision or engine this CPU or engine cannot run: a start-up error."""


_flags_cache: dict[str, tuple[str, ...]] = {}


def cpu_flags(cpuinfo: str | Path = "/proc/cpuinfo") -> tuple[str, ...]:
    """The CPU's feature flags as Linux lists them (``flags`` of the first processor in ``cpuinfo``);
    empty where there is no such file (macOS, Windows: every choice is then fp32)."""
    key = str(cpuinfo)
    if key not in _flags_cache:
        flags: tuple[str, ...] = ()
        try:
            with open(cpuinfo, encoding="utf-8", errors="replace") as f:
                for line in f:
                    name, sep, value = line.partition(":")
                    if sep and name.strip() in ("flags", "Features"):
                        flags = tuple(value.split())
                        break
        except OSError:
            pass
        _flags_cache[key] = flags
    return _flags_cache[key]


def cpu_features(flags: Iterable[str]) -> tuple[str, ...]:
    """The flags among ``flags`` that decide precision and engine (amx_bf16 ... avx2), in that order."""
    have = set(flags)
    return tuple(f for f in _REPORTED if f in have)


def native_precision(flags: Iterable[str]) -> str:
    """``bf16`` when the CPU has a bf16 matrix unit (amx_bf16 or avx512_bf16), else ``fp32``."""
    have = set(flags)
    return "bf16" if any(f in have for f in BF16_FLAGS) else "fp32"


def int8_reduce_range(flags: Iterable[str]) -> bool:
    """Whether int8 weights need 7 bits (``reduce_range``): only without VNNI, where AVX2's
    ``vpmaddubsw`` sums two u8 x s8 products in int16 and can saturate."""
    have = set(flags)
    return not any(f in have for f in VNNI_FLAGS)


def merge_quantize(precision: str | None, quantize: str | None) -> str:
    """``--precision`` with the older ``--quantize`` folded in: ``quantize int8`` means ``precision
    int8`` (with ``auto`` or ``int8``); any other precision with it is an error."""
    p = _norm(precision, PRECISIONS, "precision", default="auto")
    q = (quantize or "none").strip().lower()
    if q not in ("none", "int8"):
        raise PrecisionError(f"quantize must be none or int8, not {quantize!r}")
    if q == "int8":
        if p not in ("auto", "int8"):
            raise PrecisionError(f"--quantize int8 is the older name of --precision int8 and disagrees with "
                                 f"--precision {p}: give one of them")
        return "int8"
    return p


def _norm(value: str | None, allowed: tuple[str, ...], what: str, default: str) -> str:
    if value is None or (isinstance(value, str) and not value.strip()):
        return default
    low = str(value).strip().lower()
    if low not in allowed:
        raise PrecisionError(f"{what} must be one of {', '.join(allowed)}, not {value!r}")
    return low


def _installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


@dataclass(frozen=True)
class Choice:
    """What runs the model: ``engine``, ``precision``, the ``features`` (:func:`cpu_features`) that
    decided it, and ``reason``, one sentence for the start-up log."""

    engine: str
    precision: str
    features: tuple[str, ...]
    reason: str


def choose(engine: str | None = "auto", precision: str | None = "auto", flags: Iterable[str] | None = None,
           *, installed: Iterable[str] | None = None) -> Choice:
    """The engine and precision for ``engine`` and ``precision`` (each ``auto`` or a name) on a CPU with
    ``flags`` (default: this one's). ``installed``: the engines whose packages import (default: looked
    up). Raises :class:`PrecisionError` for a combination that cannot run natively."""
    flags = tuple(cpu_flags() if flags is None else flags)
    features = cpu_features(flags)
    eng = _norm(engine, ENGINE_CHOICES, "engine", default="auto")
    prec = _norm(precision, PRECISIONS, "precision", default="auto")
    if installed is None:
        installed = ["numpy"]
        if _installed("onnxruntime") and _installed("onnx"):
            installed.append("onnx")
        if _installed("openvino") and _installed("onnx"):
            installed.append("openvino")
    have = set(installed)
    shown = ", ".join(features) or f"none of {', '.join(_REPORTED)}"
    native = native_precision(flags)
    if prec == "auto":
        if native == "bf16" and eng in ("auto", "openvino") and ("openvino" in have or eng == "openvino"):
            prec, why = "bf16", f"the CPU multiplies bf16 natively ({shown})"
        elif native == "bf16" and eng == "auto":
            prec = "fp32"
            why = (f"the CPU has bf16 units ({shown}) but openvino, the engine that uses them, is not "
                   "installed (pip install 'densewire[serve]')")
            log.warning("running fp32: %s", why)
        elif native == "bf16":
            prec, why = "fp32", f"the {eng} engine runs fp32 only (the CPU's bf16 units: {shown})"
        else:
            prec, why = "fp32", f"the CPU has no bf16 matrix unit (amx_bf16, avx512_bf16); it has {shown}"
    else:
        why = f"--precision {prec} (CPU: {shown})"
    if prec == "bf16":
        if native != "bf16":
            raise PrecisionError(
                f"--precision bf16: this CPU has neither amx_bf16 nor avx512_bf16 (its flags read from "
                f"/proc/cpuinfo: {shown}), so bf16 would run emulated or in fp32, not faster; use --precision "
                f"auto (fp32 here) or fp32")
        if eng in ("onnx", "numpy"):
            raise PrecisionError(f"--precision bf16 needs --engine openvino (or auto): the {eng} engine has no "
                                 "bf16 matrix product on x86 (ONNX Runtime: microsoft/onnxruntime#19937)")
        eng = "openvino"
    elif prec == "int8":
        if eng in ("numpy", "openvino"):
            raise PrecisionError(f"--precision int8 needs the onnx engine (--engine onnx or auto: ONNX Runtime's "
                                 f"dynamic int8 quantization); the {eng} engine has no int8 mode")
        eng = "onnx"
    elif eng == "auto":
        eng = "onnx" if "onnx" in have else "numpy"
        if eng == "numpy":
            log.warning("onnxruntime is not installed: running the model on the slower numpy engine "
                        "(`pip install 'densewire[serve]'` brings ONNX Runtime)")
    return Choice(eng, prec, features, why)


def describe(choice_features: tuple[str, ...]) -> str:
    """The features as the log and GET / print them."""
    return ", ".join(choice_features) or f"none of {', '.join(_REPORTED)} ({platform.machine()})"
