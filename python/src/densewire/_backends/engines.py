"""Choosing the engine and precision that run a BERT-family model folder: ONNX Runtime, OpenVINO or numpy.

``load_bert`` is what ``load_backend`` calls for the built-in model, a model folder and a Hugging Face
Hub id. ``engine``: ``"auto"`` (the default, also ``None``), ``"onnx"`` (ONNX Runtime), ``"openvino"``
(OpenVINO's CPU plugin) or ``"numpy"`` (the reference engine); ``precision``: ``"auto"`` (the default),
``"fp32"``, ``"bf16"`` or ``"int8"``; ``quantize="int8"`` is the older name of ``precision="int8"``.
``precision.choose`` decides from the CPU's flags (a bf16 matrix unit: bf16 on OpenVINO; else fp32 on
ONNX Runtime) and refuses what this CPU cannot run natively. ``threads`` is the model's intra-op thread
count: ONNX Runtime's ``intra_op_num_threads``, OpenVINO's ``INFERENCE_NUM_THREADS``, or the BLAS
library's threads for numpy. The backend built carries ``engine``, ``precision``, ``cpu_features`` and
``precision_reason``, which the server reports.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Callable, Iterable

from .base import Backend
from .bert import BertBackend
from .onnx_bert import OnnxBertBackend
from .openvino_bert import OpenVinoBertBackend
from .precision import ENGINES, Choice, choose, merge_quantize

__all__ = ["ENGINES", "load_bert", "resolve_engine"]

log = logging.getLogger("densewire.backends")


def resolve_engine(engine: str | None, precision: str | None = "auto", quantize: str | None = None,
                   flags: Iterable[str] | None = None) -> Choice:
    """The engine and precision that will run, with the CPU features that decided them."""
    return choose(engine, merge_quantize(precision, quantize), flags)


def load_bert(
    path: Path,
    what: str,
    construct: Callable[..., Backend],
    *,
    engine: str | None = None,
    precision: str | None = None,
    quantize: str | None = None,
    threads: int | None = None,
    **options: Any,
) -> Backend:
    """The backend for model folder ``path`` on the chosen engine and precision.

    ``construct(factory, what, *args, **options)`` is load_backend's option checker.
    """
    choice = resolve_engine(engine, precision, quantize)
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 0):
        raise ValueError(f"threads must be a non-negative integer, not {threads!r}")
    if choice.engine == "numpy":
        if threads:
            options.setdefault("blas_threads", threads)
        backend = construct(BertBackend, f"{what} (numpy engine)", path, **options)
    else:
        blas_threads = options.pop("blas_threads", None)  # the numpy engine's name for the same knob
        if blas_threads is not None:
            if isinstance(blas_threads, bool) or not isinstance(blas_threads, int) or blas_threads < 1:
                raise ValueError(f"blas_threads must be a positive integer, not {blas_threads!r}")
            threads = threads or blas_threads
        if choice.engine == "openvino":
            backend = construct(OpenVinoBertBackend, f"{what} (openvino engine)", path, precision=choice.precision,
                                threads=threads or None, **options)
        else:
            backend = construct(OnnxBertBackend, f"{what} (onnx engine)", path,
                                quantize="int8" if choice.precision == "int8" else None,
                                threads=threads or None, **options)
    backend.precision = choice.precision
    backend.cpu_features = choice.features
    backend.precision_reason = choice.reason
    log.info("engine %s, precision %s: %s", choice.engine, choice.precision, choice.reason)
    return backend
