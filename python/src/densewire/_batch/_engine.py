"""The ONNX engine in the worker process: loaded once per process, threads sized to the worker.

``model=`` names a model as ``densewire serve --model`` does (``minilm``, ``hash:D``, a folder, a
Hugging Face id); :func:`engine` loads it with :func:`densewire.server.load_backend` the first time a
process asks for it and hands the same engine to every later :class:`BatchEmbedder` of that process
(one copy of the weights per actor or executor, however many batches or tasks it runs). The key is
(model, threads): the output dtype is a conversion of the engine's float32 vectors, so embedders of
one model in several dtypes share one engine.
"""

from __future__ import annotations

import os
import threading

from .._backends import Backend, load_backend

__all__ = ["engine", "worker_cpus"]

_ENGINES: dict[tuple[str, int], Backend] = {}
_LOCK = threading.Lock()


def worker_cpus() -> int:
    """The CPUs this worker may use: ``OMP_NUM_THREADS`` when the engine that started it set it (Ray sets
    it to an actor's ``num_cpus``), else the CPUs of this process's affinity mask (which a container,
    ``taskset`` or Spark's executor cores narrow)."""
    value = os.environ.get("OMP_NUM_THREADS", "")
    if value.isdigit() and int(value) > 0:
        return int(value)
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def engine(model: str, threads: int | None = None) -> Backend:
    """The process's engine for ``model`` with ``threads`` intra-op threads (default :func:`worker_cpus`)."""
    threads = threads or worker_cpus()
    key = (model, threads)
    with _LOCK:
        found = _ENGINES.get(key)
        if found is None:
            found = _ENGINES[key] = load_backend(model, threads=threads)
        return found
