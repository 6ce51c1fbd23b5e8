"""Quantized answers (SPEC.md section 17): calibration of the served model and its published ranges.

When the model loads, :func:`load_quantizer` embeds the calibration set shipped in the package
(``calibration/python-docs-v1.txt``, SPEC.md 17.2) and keeps the float32 vectors; the ranges of the
native dimensions, and of each ``dimensions: k`` asked for (the vectors cut to k and renormalised as
the answers are), are their per-dimension min and max. The vectors are cached beside the ONNX graphs
(``<cache>/quantization/<key>.npy``), keyed by the model weights' sha256 (with the engine, its
quantization and the model config), the calibration set's sha256 and the rule's version, so a warm
start reads 1,000 x d floats instead of embedding the set. The hash backend is calibrated every
start (faster than reading a file); a backend without a stable identity (sentence-transformers)
every start; an upstream backend on the first int8/uint8 request, not at load (it may not answer yet).

:meth:`Quantizer.quantize` is what the routes call: float32 vectors in, an int8/uint8 Tensor and the
:class:`densewire.Quantization` it used out. :func:`encode_dtype` is the one function a route of another
dialect calls to turn float32 vectors into any dtype a client asks for (SPEC.md 3 and 17).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from densewire import InvalidFieldError, Quantization, Tensor, UnavailableError, convert
from densewire._backends.hash import HashBackend
from densewire._backends.onnx_bert import _weights_sha256, cache_dir
from densewire._backends.upstream import UpstreamBackend
from densewire._quantize import RULE_VERSION

from .embedder import reduce_dimensions
from .logs import log

__all__ = ["CALIBRATION_NAME", "CALIBRATION_SHA256", "CALIBRATION_FILE", "Quantizer", "LazyQuantizer",
           "load_quantizer", "calibrates_at_load", "calibration_texts", "backend_fingerprint", "encode_dtype",
           "answer_dtype"]

CALIBRATION_NAME = "python-docs-v1"
CALIBRATION_FILE = Path(__file__).resolve().parent / "calibration" / f"{CALIBRATION_NAME}.txt"
#: SPEC.md 17.2: the sha256 of the calibration set as shipped (checked when it is read)
CALIBRATION_SHA256 = "81929a2d3728bde37f0c0e1316befb814dae9cafa3050c6fb3a84c4fd112a6d4"


def calibration_texts() -> list[str]:
    """The 1,000 texts of the calibration set, checked against :data:`CALIBRATION_SHA256`."""
    data = CALIBRATION_FILE.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if digest != CALIBRATION_SHA256:
        raise RuntimeError(f"{CALIBRATION_FILE} has sha256 {digest}, expected {CALIBRATION_SHA256}: the "
                           "package's calibration set was changed; reinstall densewire")
    return data.decode("utf-8").splitlines()


def backend_fingerprint(backend: Any) -> str | None:
    """A string that changes whenever the backend's vectors may: for BERT-family models the sha256 of
    the weights and tokenizer, the config, pooling, engine, its quantization and precision; None for a backend
    without a stable identity (its calibration is not cached)."""
    model = getattr(backend, "model", None)
    weights = getattr(model, "weights_file", None)
    if weights is None or not hasattr(model, "config"):
        return None
    memo = cache_dir() / "onnx" / "weights-sha256"
    parts = {
        "weights": _weights_sha256(Path(weights), memo),
        "config": model.config,
        "pooling": str(getattr(model, "pooling", "")),
        "normalize": bool(getattr(model, "normalize", False)),
        "max_tokens": int(backend.max_tokens),
        "engine": str(getattr(backend, "engine", type(backend).__name__)),
        "quantize": str(getattr(backend, "quantize", "none")),
    }
    if getattr(backend, "precision", None) in ("bf16", "bf16-emulated"):  # issue 26 (fp32 keeps its old key)
        parts["precision"] = backend.precision
    if parts["quantize"] == "int8" and getattr(backend, "reduce_range", True) is False:
        parts["int8_weights"] = "8bit"  # int8 with VNNI (7-bit weights, the old default, keep their key)
    tokenizer = Path(getattr(model, "folder", "")) / "tokenizer.json"
    if tokenizer.is_file():
        parts["tokenizer"] = _weights_sha256(tokenizer, memo)
    return json.dumps(parts, sort_keys=True, default=str)


def _atomic_save(path: Path, array: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            np.save(f, array, allow_pickle=False)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _cache_path(fingerprint: str, dimensions: int) -> Path:
    key = hashlib.sha256(f"{fingerprint}\0{CALIBRATION_SHA256}\0{RULE_VERSION}\0{dimensions}".encode()).hexdigest()[:24]
    return cache_dir() / "quantization" / f"{key}.npy"


def calibration_vectors(backend: Any) -> tuple[np.ndarray, str]:
    """The float32 vectors of the calibration set for this backend, and where they came from
    (``cache``, ``computed``); cached when the backend has a fingerprint."""
    d = int(backend.dimensions)
    fingerprint = None if isinstance(backend, HashBackend) else backend_fingerprint(backend)
    path = _cache_path(fingerprint, d) if fingerprint is not None else None
    texts = calibration_texts()
    if path is not None:
        try:
            cached = np.load(path, allow_pickle=False)
            if cached.shape == (len(texts), d) and cached.dtype == np.float32 and np.isfinite(cached).all():
                return cached, "cache"
        except (OSError, ValueError):
            pass
    vectors = np.ascontiguousarray(backend.embed(texts), dtype=np.float32)
    if vectors.shape != (len(texts), d):
        raise RuntimeError(f"the model returned an array of shape {vectors.shape} for the calibration set, "
                           f"not ({len(texts)}, {d})")
    if not np.isfinite(vectors).all():
        raise RuntimeError("the model returned non-finite values for the calibration set")
    if path is not None:
        try:
            _atomic_save(path, vectors)
        except OSError as exc:
            log.warning("could not cache the calibration vectors in %s: %s", path, exc)
    return vectors, "computed"


class Quantizer:
    """The published ranges of one model: native and per ``dimensions: k`` (computed when first asked,
    then kept), found by id for ``GET /v1/quantization/{id}``."""

    def __init__(self, model_id: str, vectors: np.ndarray) -> None:
        self.model_id = model_id
        self._vectors = vectors
        self._by_k: dict[int, Quantization] = {}
        self._by_id: dict[str, Quantization] = {}
        self._all_k = False
        self.dimensions = int(vectors.shape[1])
        self.native = self.for_dimensions(None)

    def for_dimensions(self, k: int | None) -> Quantization:
        """The ranges of the answers cut to ``k`` dimensions (None: the model's own)."""
        key = 0 if k is None else k  # k == d is cut and renormalised too, as the answers are
        q = self._by_k.get(key)
        if q is None:
            cut = self._vectors if k is None else reduce_dimensions(self._vectors, k)
            q = Quantization.calibrate(cut, model=self.model_id, calibration={
                "name": CALIBRATION_NAME, "texts": int(self._vectors.shape[0]), "sha256": CALIBRATION_SHA256})
            self._by_k[key] = q
            self._by_id.setdefault(q.id, q)
        return q

    def by_id(self, qid: str) -> Quantization | None:
        """The ranges with this id: those already asked for, else every ``k`` is computed once (an id
        another replica answered with is found here too)."""
        q = self._by_id.get(qid)
        if q is None and not self._all_k:
            for k in range(1, self.dimensions + 1):
                self.for_dimensions(k)
            self._all_k = True
            q = self._by_id.get(qid)
        return q

    def quantize(self, vectors: np.ndarray, dtype: str, dimensions: int | None) -> tuple[Tensor, Quantization]:
        """int8/uint8 codes of the answers' float32 vectors (cut to ``dimensions`` already)."""
        q = self.for_dimensions(dimensions)
        return q.quantize(vectors, dtype), q


def load_quantizer(backend: Any, model_id: str) -> Quantizer:
    """Calibrate (or read the cached calibration of) a loaded backend; blocking."""
    t0 = time.perf_counter()
    vectors, source = calibration_vectors(backend)
    quantizer = Quantizer(model_id, vectors)
    log.info("quantization %s: %s ranges of %d calibration texts (%s) in %.2f s", quantizer.native.id,
             "cached" if source == "cache" else "calibrated", vectors.shape[0], CALIBRATION_NAME,
             time.perf_counter() - t0)
    return quantizer


def calibrates_at_load(backend: Any) -> bool:
    """Whether the server calibrates when the model loads: every backend but a remote one."""
    return not isinstance(backend, UpstreamBackend) and getattr(backend, "pooled", True)  # a SPLADE model has none


class LazyQuantizer:
    """The :class:`Quantizer` of a backend, built at load or on first use, once."""

    def __init__(self, backend: Any, model_id: str) -> None:
        self.backend, self.model_id = backend, model_id
        self.value: Quantizer | None = None
        self.error: str | None = None
        self._lock = asyncio.Lock()

    async def load(self, run: Any) -> Quantizer:
        """The quantizer, calibrating through ``run(fn, *args)`` (a thread pool) the first time."""
        if self.value is not None:
            return self.value
        async with self._lock:
            if self.value is None:
                try:
                    self.value = await run(load_quantizer, self.backend, self.model_id)
                    self.error = None
                except Exception as exc:  # noqa: BLE001 - reported on each int8/uint8 request
                    log.exception("calibration of the quantization ranges failed")
                    self.error = f"{type(exc).__name__}: {exc}"
                    raise UnavailableError(f"the quantization ranges could not be calibrated: {self.error}") from None
        return self.value


def encode_dtype(vectors: np.ndarray, dtype: str, quantizer: Quantizer | None = None,
                 dimensions: int | None = None) -> tuple[Tensor, Quantization | None]:
    """float32 answers in ``dtype``: float32/float16/bfloat16/binary by SPEC.md 3, int8/uint8 by
    SPEC.md 17 with ``quantizer``'s ranges for ``dimensions`` (the k the vectors were cut to, None
    for the native ones). Returns the tensor and the ranges it was quantized with (None for the
    other dtypes). For another dialect's route: its ``binary`` is :func:`densewire.cohere_binary`
    of the ``binary`` tensor's array."""
    tensor = Tensor.from_array(np.ascontiguousarray(vectors, dtype=np.float32))
    if dtype in ("int8", "uint8"):
        if quantizer is None:
            raise UnavailableError("this server has no quantization ranges for its model")
        return quantizer.quantize(tensor.array, dtype, dimensions)
    if dtype not in ("float32", "float16", "bfloat16", "binary"):
        raise InvalidFieldError(f"the server does not answer in {dtype!r}", field="dtype")
    return (tensor if dtype == "float32" else convert(tensor, dtype)), None


#: Quantizing more elements than this runs in the CPU pool (about a millisecond of numpy per 100,000).
_THREAD_QUANTIZE_ELEMENTS = 1 << 18


async def answer_dtype(service: Any, vectors: np.ndarray, dtype: str,
                       dimensions: int | None = None) -> tuple[Tensor, Quantization | None]:
    """The server's float32 answers (``service`` is the app's ``Embedder``, ``vectors`` what
    ``embed_texts`` returned for ``dimensions``) in ``dtype``, any of float32, float16, bfloat16,
    int8, uint8, binary: the tensor, and for int8/uint8 the :class:`densewire.Quantization` used
    (its ``id`` goes into the response; its ``to_json()`` is the published object). int8/uint8 wait
    for the calibration the first time (an upstream model) and answer 503 while it fails."""
    quantizer = None
    if dtype in ("int8", "uint8"):
        lazy = getattr(service, "quantization", None)
        if lazy is None:
            raise UnavailableError("this server has no quantization ranges for its model")
        quantizer = await lazy.load(service.in_cpu_pool)
    if vectors.size >= _THREAD_QUANTIZE_ELEMENTS:
        return await service.in_cpu_pool(encode_dtype, vectors, dtype, quantizer, dimensions)
    return encode_dtype(vectors, dtype, quantizer, dimensions)
