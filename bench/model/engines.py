"""Benchmark workers: one process per engine, driven over stdin/stdout by bench.py.

    python engines.py ENGINE MODEL_FOLDER THREADS

ENGINE: onnx, onnx-int8, onnx-nospin, onnx-buckets, numpy (densewire's engines; run with the project's
.venv), st (sentence-transformers on torch) or infinity (infinity-emb's torch
engine, in process; both run with bench/model/.venv). Each line on stdin is a
JSON command, each answer one JSON line on stdout:

* {"op": "run", "texts": [...], "batch": B}: embed the texts in batches of B;
  answers {"seconds": wall time}.
* {"op": "embed", "texts": [...]}: answers {"vectors": hex float32 rows}.
* {"op": "gemm", "n": N, "repeat": R}: best fp32 GEMM rate of numpy (FLOP/s).
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any, Callable

import numpy as np


def load(engine: str, folder: str, threads: int) -> Callable[[list[str]], np.ndarray]:
    if engine in ("onnx", "onnx-int8", "onnx-nospin"):
        from densewire._backends import OnnxBertBackend

        b = OnnxBertBackend(folder, threads=threads, quantize="int8" if engine == "onnx-int8" else None,
                            spinning=engine != "onnx-nospin")  # as measured in RESULTS.md
        return b.embed
    if engine == "onnx-buckets":
        from bucketed_graph import BucketedOnnxBackend

        b = BucketedOnnxBackend(folder, threads=threads, spinning=False)
        return b.embed
    if engine in ("numpy", "numpy-noenv"):
        from densewire._backends import BertBackend

        b = BertBackend(folder, blas_threads=threads)
        return b.embed
    if engine == "plain-optimized":
        from plain_graph import load_plain_optimized

        return load_plain_optimized(folder, threads)
    if engine == "st":
        import torch
        from sentence_transformers import SentenceTransformer

        torch.set_num_threads(threads)
        m = SentenceTransformer(folder, device="cpu")

        def st_embed(texts: list[str]) -> np.ndarray:
            return m.encode(texts, batch_size=max(len(texts), 1), convert_to_numpy=True, show_progress_bar=False)

        return st_embed
    if engine == "infinity":
        import asyncio

        import torch
        from infinity_emb import AsyncEmbeddingEngine, EngineArgs

        import threading

        torch.set_num_threads(threads)
        # infinity's batch handler expects its event loop to run all the time (as in its server)
        loop = asyncio.new_event_loop()
        threading.Thread(target=loop.run_forever, daemon=True).start()
        eng = AsyncEmbeddingEngine.from_args(EngineArgs(model_name_or_path=folder, engine="torch", device="cpu",
                                                        batch_size=32, bettertransformer=False))
        asyncio.run_coroutine_threadsafe(eng.astart(), loop).result()

        def inf_embed(texts: list[str]) -> np.ndarray:
            vecs, _ = asyncio.run_coroutine_threadsafe(eng.embed(sentences=texts), loop).result()
            return np.asarray(vecs, dtype=np.float32)

        return inf_embed
    raise SystemExit(f"unknown engine {engine!r}")


def gemm_rate(n: int, repeat: int) -> float:
    a = np.random.default_rng(0).standard_normal((n, n)).astype(np.float32)
    b = np.random.default_rng(1).standard_normal((n, n)).astype(np.float32)
    c = np.empty((n, n), dtype=np.float32)
    np.matmul(a, b, out=c)
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        np.matmul(a, b, out=c)
        best = min(best, time.perf_counter() - t)
    return 2.0 * n ** 3 / best


def main() -> None:
    engine, folder, threads = sys.argv[1], sys.argv[2], int(sys.argv[3])
    if engine.startswith("numpy") or engine == "gemm":
        from threadpoolctl import threadpool_limits

        threadpool_limits(limits=threads, user_api="blas")
    t0 = time.perf_counter()
    embed = load(engine, folder, threads) if engine != "gemm" else None
    load_s = time.perf_counter() - t0
    if embed is not None:
        embed(["warm up the engine", "and its allocator with a second, longer sentence"] * 16)
    out = sys.stdout
    out.write(json.dumps({"ready": engine, "load_seconds": load_s, "pid": os.getpid()}) + "\n")
    out.flush()
    for line in sys.stdin:
        cmd: dict[str, Any] = json.loads(line)
        if cmd["op"] == "run":
            texts, b = cmd["texts"], cmd["batch"]
            t = time.perf_counter()
            for i in range(0, len(texts), b):
                embed(texts[i:i + b])
            answer: dict[str, Any] = {"seconds": time.perf_counter() - t}
        elif cmd["op"] == "embed":
            v = np.ascontiguousarray(embed(cmd["texts"]), dtype="<f4")
            answer = {"vectors": v.tobytes().hex(), "dims": v.shape[1]}
        elif cmd["op"] == "gemm":
            answer = {"flops": gemm_rate(cmd["n"], cmd["repeat"])}
        else:
            answer = {"error": f"unknown op {cmd['op']!r}"}
        out.write(json.dumps(answer) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
