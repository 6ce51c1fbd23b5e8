"""The other way to the ONNX engine, for comparison: a plain graph (standard ONNX ops only, the
pattern transformers' torch export produces) run through ONNX Runtime's transformer optimizer
(``optimize_model(..., model_type="bert")``). bench.py measures it next to densewire's graph,
which uses the fused com.microsoft operators directly (python/src/densewire/_backends/onnx_graph.py).
"""

from __future__ import annotations

import math
import os
import tempfile
from typing import Callable

import numpy as np


def build_plain(model, standard: bool = False) -> "onnx.ModelProto":  # noqa: F821
    """The plain graph of ``model``: int32 ``input_ids`` and ``attention_mask`` (batch, sequence) ->
    ``last_hidden_state`` (batch, sequence, hidden). ``standard``: the interface of transformers' export
    (``onnx/model.onnx`` on the hub, what TEI's ONNX Runtime backend loads): int64 inputs and a third,
    ``token_type_ids``, gathered from the model's token-type table."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    emb, layers = model.load_weights()
    d, h = model.hidden, model.heads
    hd = d // h
    inits, nodes = [], []

    def c(name: str, arr) -> str:
        a = np.asarray(arr)
        inits.append(numpy_helper.from_array(a if a.dtype != np.float64 else a.astype(np.float32), name))
        return name

    def node(op: str, ins: list[str], out: str, **kw) -> str:
        nodes.append(helper.make_node(op, ins, [out], name=out, **kw))
        return out

    ids, mask = "input_ids", "attention_mask"
    int_type = TensorProto.INT64 if standard else TensorProto.INT32
    word = node("Gather", [c("word", emb["word"]), ids], "word_emb")
    shape = node("Shape", [ids], "ids_shape")
    seq = node("Gather", [shape, c("one_i", np.array(1, dtype=np.int64))], "seq_len")
    pos_ids = node("Range", [c("zero_i", np.array(0, dtype=np.int64)), seq, c("step_i", np.array(1, dtype=np.int64))],
                   "pos_ids")
    pos = node("Gather", [c("pos", emb["position"]), pos_ids], "pos_emb")
    x = node("Add", [word, pos], "emb_sum0")
    if standard:
        from safetensors.numpy import load_file

        tensors = load_file(str(model.weights_file))
        table = next((v for k, v in tensors.items() if k.endswith("embeddings.token_type_embeddings.weight")),
                     emb["token_type"][None, :])
        types = node("Gather", [c("token_type", table.astype(np.float32)), "token_type_ids"], "token_type_emb")
        x = node("Add", [x, types], "emb_sum")
    else:
        x = node("Add", [x, c("token_type0", emb["token_type"])], "emb_sum")
    x = node("LayerNormalization", [x, c("emb_ln_w", emb["ln_w"]), c("emb_ln_b", emb["ln_b"])], "emb_out",
             axis=-1, epsilon=model.eps)
    mf = node("Cast", [mask], "mask_f", to=TensorProto.FLOAT)
    inv = node("Sub", [c("one_f", np.array(1.0, dtype=np.float32)), mf], "mask_inv")
    bias = node("Mul", [inv, c("neg_big", np.array(-10000.0, dtype=np.float32))], "mask_bias0")
    bias = node("Unsqueeze", [bias, c("axes12", np.array([1, 2], dtype=np.int64))], "mask_bias")
    heads_shape = c("heads_shape", np.array([0, 0, h, hd], dtype=np.int64))
    merged_shape = c("merged_shape", np.array([0, 0, d], dtype=np.int64))
    for n, lay in enumerate(layers):
        p = f"l{n}_"

        def lin(inp: str, w, b, name: str) -> str:
            return node("Add", [node("MatMul", [inp, c(p + name + "_w", w)], p + name + "_mm"), c(p + name + "_b", b)],
                        p + name)

        q = node("Transpose", [node("Reshape", [lin(x, lay.w_q, lay.b_q, "q"), heads_shape], p + "q_r")], p + "q_t",
                 perm=[0, 2, 1, 3])
        k = node("Transpose", [node("Reshape", [lin(x, lay.w_k, lay.b_k, "k"), heads_shape], p + "k_r")], p + "k_t",
                 perm=[0, 2, 3, 1])
        v = node("Transpose", [node("Reshape", [lin(x, lay.w_v, lay.b_v, "v"), heads_shape], p + "v_r")], p + "v_t",
                 perm=[0, 2, 1, 3])
        s = node("MatMul", [q, k], p + "scores")
        s = node("Div", [s, c(p + "sqrt_hd", np.array(math.sqrt(hd), dtype=np.float32))], p + "scaled")
        s = node("Add", [s, bias], p + "masked")
        s = node("Softmax", [s], p + "probs", axis=-1)
        ctx = node("MatMul", [s, v], p + "ctx")
        ctx = node("Reshape", [node("Transpose", [ctx], p + "ctx_t", perm=[0, 2, 1, 3]), merged_shape], p + "ctx_m")
        a = node("Add", [lin(ctx, lay.w_o, lay.b_o, "o"), x], p + "res1")
        x1 = node("LayerNormalization", [a, c(p + "ln1_w", lay.ln1_w), c(p + "ln1_b", lay.ln1_b)], p + "ln1",
                  axis=-1, epsilon=model.eps)
        i = lin(x1, lay.w_in, lay.b_in, "ffn_in")
        g = node("Erf", [node("Div", [i, c(p + "sqrt2", np.array(math.sqrt(2.0), dtype=np.float32))], p + "div")],
                 p + "erf")
        g = node("Add", [g, c(p + "one", np.array(1.0, dtype=np.float32))], p + "erf1")
        g = node("Mul", [node("Mul", [i, g], p + "gx"), c(p + "half", np.array(0.5, dtype=np.float32))], p + "gelu")
        o = node("Add", [lin(g, lay.w_out, lay.b_out, "ffn_out"), x1], p + "res2")
        x = node("LayerNormalization", [o, c(p + "ln2_w", lay.ln2_w), c(p + "ln2_b", lay.ln2_b)],
                 "last_hidden_state" if n == len(layers) - 1 else p + "ln2", axis=-1, epsilon=model.eps)
    graph = helper.make_graph(
        nodes, "plain",
        [helper.make_tensor_value_info(name, int_type, ["batch", "sequence"])
         for name in (ids, mask, *(["token_type_ids"] if standard else []))],
        [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "sequence", d])],
        initializer=inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def load_plain_optimized(folder: str, threads: int) -> Callable[[list[str]], np.ndarray]:
    """densewire's OnnxBertBackend (tokenizer, length buckets, pooling) on the plain graph after
    ONNX Runtime's transformer optimizer, instead of densewire's own fused graph."""
    import onnx
    import onnxruntime as ort
    from onnxruntime.transformers.optimizer import optimize_model

    from densewire._backends import OnnxBertBackend

    backend = OnnxBertBackend(folder, threads=threads)
    tmp = tempfile.mkdtemp(prefix="densewire-plain-")
    plain, fused = os.path.join(tmp, "plain.onnx"), os.path.join(tmp, "optimized.onnx")
    onnx.save(build_plain(backend.model), plain)
    # opt_level=0: the fusions only (higher levels first run ONNX Runtime itself, which imports torch)
    opt = optimize_model(plain, model_type="bert", num_heads=backend.model.heads, hidden_size=backend.model.hidden,
                         opt_level=0)
    opt.save_model_to_file(fused)
    counts = opt.get_fused_operator_statistics()
    print({k: v for k, v in counts.items() if v}, file=__import__("sys").stderr)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    backend._session = ort.InferenceSession(fused, opts, providers=["CPUExecutionProvider"])
    return backend.embed
