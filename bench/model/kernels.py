"""ONNX Runtime's kernels for the non-product part of a layer, each against its alternatives.

    .venv/bin/python bench/model/kernels.py attention   # MultiHeadAttention against plain operators
    .venv/bin/python bench/model/kernels.py bias        # MultiHeadAttention with and without its bias input
    .venv/bin/python bench/model/kernels.py gelu        # com.microsoft Gelu, opset-20 Gelu, an Erf composition

MiniLM-L6's shapes (12 heads of 32, intermediate 1536), on the row counts of a call of 1, 8 and 32
of bench.py's sentences; 2 intra-op threads, idle threads sleeping. Interleaved, 30 rounds of 20
runs; medians in microseconds a run. Outputs are checked against the first contender.
"""

from __future__ import annotations

import statistics
import sys
import time

import numpy as np
import onnxruntime as ort
from onnx import ModelProto, TensorProto, helper, numpy_helper

HEADS, HEAD = 12, 32
D, FF = HEADS * HEAD, 1536
_MS = "com.microsoft"


def _model(nodes: list, inputs: list, output: list, inits: list | None = None, opset: int = 17) -> ModelProto:
    graph = helper.make_graph(nodes, "kernel", inputs, [helper.make_tensor_value_info("out", TensorProto.FLOAT, output)],
                              initializer=inits or [])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid(_MS, 1)])
    m.ir_version = 9
    return m


def _session(m: ModelProto) -> ort.InferenceSession:
    o = ort.SessionOptions()
    o.intra_op_num_threads = 2
    o.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(m.SerializeToString(), o, providers=["CPUExecutionProvider"],
                                disabled_optimizers=["GeluFusion"])


def _qkv_inputs(mask_type: int) -> list:
    return [helper.make_tensor_value_info(x, TensorProto.FLOAT, ["B", "S", D]) for x in "qkv"] + \
        [helper.make_tensor_value_info("mask", mask_type, ["B", "S"])]


def mha(bias: bool) -> ModelProto:
    inits = [numpy_helper.from_array(np.random.default_rng(3).standard_normal(3 * D).astype(np.float32), "bias")]
    node = helper.make_node("MultiHeadAttention", ["q", "k", "v", "bias" if bias else "", "mask"], ["out"],
                            domain=_MS, num_heads=HEADS)
    return _model([node], _qkv_inputs(TensorProto.INT32), ["B", "S", D], inits if bias else None)


def plain_attention() -> ModelProto:
    """Reshape to heads, Transpose, MatMul, scale, additive mask, Softmax, MatMul, Transpose back."""
    inits = [numpy_helper.from_array(np.array([0, 0, HEADS, HEAD], np.int64), "heads"),
             numpy_helper.from_array(np.array([0, 0, D], np.int64), "merged"),
             numpy_helper.from_array(np.array([1, 2], np.int64), "axes"),
             numpy_helper.from_array(np.array(1 / np.sqrt(HEAD), np.float32), "scale")]
    n = helper.make_node
    nodes = [n("Reshape", ["q", "heads"], ["q4"]), n("Reshape", ["k", "heads"], ["k4"]), n("Reshape", ["v", "heads"], ["v4"]),
             n("Transpose", ["q4"], ["qt"], perm=[0, 2, 1, 3]), n("Transpose", ["k4"], ["kt"], perm=[0, 2, 3, 1]),
             n("Transpose", ["v4"], ["vt"], perm=[0, 2, 1, 3]), n("MatMul", ["qt", "kt"], ["s"]), n("Mul", ["s", "scale"], ["ss"]),
             n("Unsqueeze", ["mask", "axes"], ["mb"]), n("Add", ["ss", "mb"], ["sm"]), n("Softmax", ["sm"], ["p"], axis=-1),
             n("MatMul", ["p", "vt"], ["c"]), n("Transpose", ["c"], ["ct"], perm=[0, 2, 1, 3]), n("Reshape", ["ct", "merged"], ["out"])]
    return _model(nodes, _qkv_inputs(TensorProto.FLOAT), ["B", "S", D], inits)


def gelu(kind: str) -> ModelProto:
    x = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["R", FF])]
    if kind == "com.microsoft":
        return _model([helper.make_node("Gelu", ["x"], ["out"], domain=_MS)], x, ["R", FF])
    if kind == "opset-20":
        return _model([helper.make_node("Gelu", ["x"], ["out"])], x, ["R", FF], opset=20)
    inits = [numpy_helper.from_array(np.array(v, np.float32), k) for k, v in (("c", 1 / np.sqrt(2)), ("h", 0.5), ("one", 1.0))]
    n = helper.make_node
    nodes = [n("Mul", ["x", "c"], ["a"]), n("Erf", ["a"], ["e"]), n("Add", ["e", "one"], ["b"]),
             n("Mul", ["x", "h"], ["xh"]), n("Mul", ["xh", "b"], ["out"])]
    return _model(nodes, x, ["R", FF], inits)


def _medians(contenders: dict[str, tuple[ort.InferenceSession, dict]]) -> dict[str, float]:
    """Median microseconds a run of each contender, interleaved: 30 rounds of 20 runs."""
    times: dict[str, list[float]] = {k: [] for k in contenders}
    for _ in range(30):
        for k, (s, feeds) in contenders.items():
            t = time.perf_counter()
            for _ in range(20):
                s.run(None, feeds)
            times[k].append((time.perf_counter() - t) / 20 * 1e6)
    return {k: statistics.median(v) for k, v in times.items()}


def main() -> None:
    what = sys.argv[1] if len(sys.argv) > 1 else "attention"
    rng = np.random.default_rng(0)
    if what == "gelu":
        sessions = {k: _session(gelu(k)) for k in ("com.microsoft", "opset-20", "erf")}
        for rows in (19, 158, 636):
            x = {"x": rng.standard_normal((rows, FF)).astype(np.float32) * 3}
            ref = sessions["com.microsoft"].run(None, x)[0]
            med = _medians({k: (s, x) for k, s in sessions.items()})
            print(f"{rows} rows: " + "   ".join(
                f"{k} {med[k]:7.1f} us (max diff {np.abs(s.run(None, x)[0] - ref).max():.1e})" for k, s in sessions.items()))
        return
    if what not in ("attention", "bias"):
        raise SystemExit(f"unknown kernel {what!r}: attention, bias or gelu")
    name = "plain operators" if what == "attention" else "MultiHeadAttention + bias"
    base, other = _session(mha(bias=False)), _session(plain_attention() if what == "attention" else mha(bias=True))
    for batch, seq in ((1, 14), (8, 20), (32, 22)):
        q, k, v = (rng.standard_normal((batch, seq, D)).astype(np.float32) for _ in range(3))
        lengths = rng.integers(seq // 2, seq + 1, batch)
        lengths[0] = seq
        mask = (np.arange(seq) < lengths[:, None]).astype(np.int32)
        fa = {"q": q, "k": k, "v": v, "mask": mask}
        fb = {**fa, "mask": np.where(mask, 0.0, -1e4).astype(np.float32)} if what == "attention" else fa
        med = _medians({"MultiHeadAttention": (base, fa), name: (other, fb)})
        line = (f"batch {batch} x {seq}: MultiHeadAttention {med['MultiHeadAttention']:7.1f} us   {name} "
                f"{med[name]:7.1f} us   ({med['MultiHeadAttention'] / med[name]:.2f}x its speed)")
        if what == "attention":  # the same computation: padded rows differ and are never read
            real = mask.astype(bool)
            line += f"   max diff on real rows {np.abs(base.run(None, fa)[0] - other.run(None, fb)[0])[real].max():.1e}"
        print(line)


if __name__ == "__main__":
    main()
