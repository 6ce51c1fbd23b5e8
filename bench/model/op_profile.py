"""Where a model call's time goes: ONNX Runtime's own profiler, per operator type, per call.

    .venv/bin/python bench/model/op_profile.py packed 8      # today's engine, calls of 8 sentences
    .venv/bin/python bench/model/op_profile.py buckets 8     # the engine before (bucketed_graph.py)

Runs the 320 benchmark sentences' first 160 in calls of BATCH on 2 intra-op threads (idle threads
sleep, as in `densewire serve`) and prints milliseconds per call for each operator type. Then the
matrix products' own rate: their FLOPs (real tokens x the linear layers) over the time ONNX Runtime
spent in `Gemm` and `MatMul`, against numpy's fp32 GEMM on 1024^3 (the peak bench.py divides by) and
numpy on the model's own product shapes (a call's mean tokens x hidden x 3 hidden, hidden x hidden,
hidden x intermediate, intermediate x hidden), all on 2 threads. The products alone bound the FLOP
utilization bench.py reports: the other operators only add time.
"""

from __future__ import annotations

import collections
import json
import sys
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench import sentences  # noqa: E402
from bucketed_graph import BucketedOnnxBackend  # noqa: E402

from densewire._backends import OnnxBertBackend, default_model_path  # noqa: E402
from densewire._backends.onnx_graph import DISABLED_FUSIONS  # noqa: E402


def main() -> None:
    kind, batch = sys.argv[1], int(sys.argv[2])
    backend = (BucketedOnnxBackend if kind == "buckets" else OnnxBertBackend)(default_model_path(), threads=2)
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.intra_op_num_threads, opts.inter_op_num_threads = 2, 1
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    opts.enable_profiling = True
    opts.profile_file_prefix = str(Path("/tmp") / f"densewire-op-profile-{kind}")
    backend._session = ort.InferenceSession(str(backend.graph_path), opts, providers=["CPUExecutionProvider"],
                                            disabled_optimizers=list(DISABLED_FUSIONS))
    texts = sentences()[:160]
    for i in range(0, len(texts), batch):
        backend.embed(texts[i:i + batch])
    events = json.loads(Path(backend._session.end_profiling()).read_text())
    per_op: collections.Counter[str] = collections.Counter()
    total, runs = 0, 0
    for e in events:
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
            per_op[e["args"]["op_name"]] += e["dur"]
        elif e.get("cat") == "Session" and e["name"] == "model_run":
            total, runs = total + e["dur"], runs + 1
    print(f"{kind}, calls of {batch}: {runs} ONNX Runtime runs, {total / runs / 1e3:.2f} ms a run "
          f"({total / len(texts) / 1e3:.2f} ms a sentence)")
    for op, us in per_op.most_common():
        print(f"  {op:26s} {us / runs / 1e3:7.3f} ms a run")
    products_rates(backend, texts, runs, (per_op["Gemm"] + per_op["MatMul"]) / 1e6)


def products_rates(backend: OnnxBertBackend, texts: list[str], runs: int, seconds: float) -> None:
    """The linear layers' GFLOP/s in ONNX Runtime, numpy's peak, and numpy on the same shapes."""
    from threadpoolctl import threadpool_limits

    from engines import gemm_rate

    m = backend.model
    d, ff, layers = m.hidden, m.intermediate, len(m.load_weights()[1])
    shapes = [(d, 3 * d), (d, d), (d, ff), (ff, d)]
    tokens = sum(backend.count_tokens(texts))
    flops = 2 * tokens * layers * sum(k * n for k, n in shapes)
    rows = max(1, round(tokens / runs))
    rng = np.random.default_rng(0)
    xs = {k: rng.standard_normal((rows, k)).astype(np.float32) for k, _ in shapes}
    ws = [rng.standard_normal((k, n)).astype(np.float32) for k, n in shapes]
    with threadpool_limits(2):
        peak = max(gemm_rate(1024, 10) for _ in range(3))
        best = float("inf")
        for _ in range(20):
            t = time.perf_counter()
            for (k, _), w in zip(shapes, ws):
                xs[k] @ w
            best = min(best, time.perf_counter() - t)
        # reading the linear layers' weights once: numpy's matrix-vector product over as many bytes
        weights = 4 * layers * sum(k * n for k, n in shapes)
        big = rng.standard_normal((weights // (4 * 4096), 4096)).astype(np.float32)
        vec = np.ones(4096, dtype=np.float32)
        read = min(_timed(lambda: big @ vec) for _ in range(15))
    same_shapes = 2 * rows * sum(k * n for k, n in shapes) / best
    ort_rate = flops / seconds
    print(f"matrix products: {ort_rate / 1e9:.1f} GFLOP/s in ONNX Runtime ({ort_rate / peak:.0%} of numpy's "
          f"1024^3 peak, {peak / 1e9:.1f} GFLOP/s); numpy on the same shapes ({rows} rows): "
          f"{same_shapes / 1e9:.1f} GFLOP/s ({same_shapes / peak:.0%})")
    print(f"the linear weights, {weights / 2**20:.1f} MiB, read in {read * 1e3:.2f} ms "
          f"({big.nbytes / read / 1e9:.1f} GB/s, numpy's matrix-vector product on 2 threads)")


def _timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


if __name__ == "__main__":
    main()
