"""ONNX Runtime's SkipLayerNormalization against Add + Add + LayerNormalization, alone.

    .venv/bin/python bench/model/layernorm.py

One operator pattern of every transformer layer (bias + residual + LayerNorm over rows of 384), as a
one-node graph and as the three standard operators, on 1 and 2 intra-op threads (idle threads
sleep, as in `densewire serve`), for 20, 150 and 600 rows: the best of 5 runs of 50 calls each.
Why the ONNX engine's graph (python/src/densewire/_backends/onnx_graph.py) uses the second.
"""

from __future__ import annotations

import time

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

HIDDEN = 384


def graph(fused: bool) -> bytes:
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.random(HIDDEN, dtype=np.float32), n) for n in ("gamma", "beta", "bias")]
    if fused:
        nodes = [helper.make_node("SkipLayerNormalization", ["x", "skip", "gamma", "beta", "bias"], ["y"],
                                  domain="com.microsoft", epsilon=1e-12)]
    else:
        nodes = [helper.make_node("Add", ["x", "bias"], ["biased"]), helper.make_node("Add", ["biased", "skip"], ["sum"]),
                 helper.make_node("LayerNormalization", ["sum", "gamma", "beta"], ["y"], axis=-1, epsilon=1e-12)]
    rows = [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["rows", HIDDEN]) for n in ("x", "skip", "y")]
    g = helper.make_graph(nodes, "layernorm", rows[:2], rows[2:], initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    m.ir_version = 8
    return m.SerializeToString()


def main() -> None:
    rng = np.random.default_rng(1)
    for threads in (1, 2):
        for fused in (True, False):
            opts = ort.SessionOptions()
            opts.intra_op_num_threads = threads
            opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
            # the unfused pattern must stay unfused: ONNX Runtime would make it SkipLayerNormalization
            s = ort.InferenceSession(graph(fused), opts, providers=["CPUExecutionProvider"],
                                     disabled_optimizers=[] if fused else ["SkipLayerNormFusion"])
            for rows in (20, 150, 600):
                feeds = {n: rng.random((rows, HIDDEN), dtype=np.float32) for n in ("x", "skip")}
                for _ in range(20):
                    s.run(None, feeds)
                best = min(_timed(s, feeds) for _ in range(5))
                name = "SkipLayerNormalization" if fused else "Add + Add + LayerNormalization"
                print(f"{threads} thread(s)  {name:32s} {rows:4d} rows  {best * 1e6:8.1f} us")


def _timed(s: ort.InferenceSession, feeds: dict) -> float:
    t = time.perf_counter()
    for _ in range(50):
        s.run(None, feeds)
    return (time.perf_counter() - t) / 50


if __name__ == "__main__":
    main()
