"""Choosing the engine that runs a BERT-family model folder: ONNX Runtime or numpy.

``load_bert`` is what ``load_backend`` calls for the built-in model, a model
folder and a Hugging Face Hub id. ``engine``: ``"onnx"`` (ONNX Runtime, the
default), ``"numpy"`` (the reference engine, and the fallback where
onnxruntime has no wheel) or ``None`` (onnx when onnxruntime imports, else
numpy with a warning). ``threads`` is the model's intra-op thread count:
ONNX Runtime's ``intra_op_num_threads``, or the BLAS library's threads for numpy.
"""

from __future__ import annotations

import importlib.util
import logging
from pathlib import Path
from typing import Any, Callable

from .base import Backend
from .bert import BertBackend
from .onnx_bert import OnnxBertBackend

__all__ = ["ENGINES", "load_bert", "resolve_engine"]

ENGINES = ("onnx", "numpy")
log = logging.getLogger("densewire.backends")


def resolve_engine(engine: str | None) -> str:
    """``engine`` checked, or for ``None`` the best one installed."""
    if engine is None or engine == "":
        if importlib.util.find_spec("onnxruntime") is not None and importlib.util.find_spec("onnx") is not None:
            return "onnx"
        log.warning("onnxruntime is not installed: running the model on the slower numpy engine "
                    "(`pip install 'densewire[serve]'` brings ONNX Runtime)")
        return "numpy"
    low = str(engine).strip().lower()
    if low not in ENGINES:
        raise ValueError(f"engine must be one of {', '.join(ENGINES)}, not {engine!r}")
    return low


def load_bert(
    path: Path,
    what: str,
    construct: Callable[..., Backend],
    *,
    engine: str | None = None,
    quantize: str | None = None,
    threads: int | None = None,
    **options: Any,
) -> Backend:
    """The backend for model folder ``path`` on the chosen engine.

    ``construct(factory, what, *args, **options)`` is load_backend's option checker.
    """
    engine = resolve_engine(engine)
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 0):
        raise ValueError(f"threads must be a non-negative integer, not {threads!r}")
    if engine == "numpy":
        if quantize not in (None, "", "none"):
            raise ValueError(f"quantize={quantize!r} needs the onnx engine (the numpy engine is float32 only)")
        if threads:
            options.setdefault("blas_threads", threads)
        return construct(BertBackend, f"{what} (numpy engine)", path, **options)
    blas_threads = options.pop("blas_threads", None)  # the numpy engine's name for the same knob
    if blas_threads is not None:
        if isinstance(blas_threads, bool) or not isinstance(blas_threads, int) or blas_threads < 1:
            raise ValueError(f"blas_threads must be a positive integer, not {blas_threads!r}")
        threads = threads or blas_threads

    return construct(OnnxBertBackend, f"{what} (onnx engine)", path, quantize=quantize,
                     threads=threads or None, **options)
