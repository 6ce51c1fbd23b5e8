"""The ONNX engine as it was before builder version 2, for comparison in the same run: the fused
graph of ONNX Runtime's transformer operators (EmbedLayerNormalization, Attention with its own
Q/K/V projection, SkipLayerNormalization, BiasGelu) on right-padded (batch, sequence) inputs, with
each batch sorted by length and cut into length buckets (every linear layer computes the bucket's
padding). bench.py runs it as ``onnx-buckets`` next to today's packed graph (``onnx-nospin``).
Copied from python/src/densewire/_backends/onnx_graph.py and onnx_bert.py at commit e33a1db.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from densewire._backends import OnnxBertBackend
from densewire._backends.bert_model import BertModel, pool
from densewire._backends.onnx_bert import _save_graph, _weights_sha256

_MS = "com.microsoft"
_F32 = np.float32


def build_bucketed_graph(model: BertModel) -> "onnx.ModelProto":  # noqa: F821 (onnx imported lazily)
    """The fused ONNX graph of ``model`` (weights embedded as initializers)."""
    import onnx
    TensorProto, helper, numpy_helper = onnx.TensorProto, onnx.helper, onnx.numpy_helper

    emb, layers = model.load_weights()
    inits: list[onnx.TensorProto] = []
    nodes: list[onnx.NodeProto] = []

    def const(name: str, array: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(np.ascontiguousarray(array, dtype=np.float32), name))
        return name

    position = emb["position"] + emb["token_type"]  # every input is segment 0
    nodes.append(helper.make_node(
        "EmbedLayerNormalization",
        ["input_ids", "", const("word_embeddings", emb["word"]), const("position_embeddings", position),
         "", const("embeddings_ln_w", emb["ln_w"]), const("embeddings_ln_b", emb["ln_b"]), "attention_mask"],
        ["hidden_0", "mask_index"], name="embeddings", domain=_MS, epsilon=model.eps,
    ))
    x = "hidden_0"
    for n, lay in enumerate(layers):
        p = f"layer{n}_"
        w_qkv = np.concatenate([lay.w_q, lay.w_k, lay.w_v], axis=1)
        b_qkv = np.concatenate([lay.b_q, lay.b_k, lay.b_v])
        nodes.append(helper.make_node(
            "Attention", [x, const(p + "qkv_w", w_qkv), const(p + "qkv_b", b_qkv), "mask_index"],
            [p + "context"], name=p + "attention", domain=_MS, num_heads=model.heads,
        ))
        nodes.append(helper.make_node("MatMul", [p + "context", const(p + "attn_out_w", lay.w_o)],
                                      [p + "attn_out"], name=p + "attn_out"))
        nodes.append(helper.make_node(
            "SkipLayerNormalization",
            [p + "attn_out", x, const(p + "ln1_w", lay.ln1_w), const(p + "ln1_b", lay.ln1_b),
             const(p + "attn_out_b", lay.b_o)],
            [p + "attn_norm"], name=p + "ln1", domain=_MS, epsilon=model.eps,
        ))
        nodes.append(helper.make_node("MatMul", [p + "attn_norm", const(p + "ffn_in_w", lay.w_in)],
                                      [p + "ffn_in"], name=p + "ffn_in"))
        nodes.append(helper.make_node("BiasGelu", [p + "ffn_in", const(p + "ffn_in_b", lay.b_in)],
                                      [p + "ffn_act"], name=p + "gelu", domain=_MS))
        nodes.append(helper.make_node("MatMul", [p + "ffn_act", const(p + "ffn_out_w", lay.w_out)],
                                      [p + "ffn_out"], name=p + "ffn_out"))
        out = "last_hidden_state" if n == len(layers) - 1 else f"hidden_{n + 1}"
        nodes.append(helper.make_node(
            "SkipLayerNormalization",
            [p + "ffn_out", p + "attn_norm", const(p + "ln2_w", lay.ln2_w), const(p + "ln2_b", lay.ln2_b),
             const(p + "ffn_out_b", lay.b_out)],
            [out], name=p + "ln2", domain=_MS, epsilon=model.eps,
        ))
        x = out
    graph = helper.make_graph(
        nodes, "sentence_encoder",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT32, ["batch", "sequence"]),
         helper.make_tensor_value_info("attention_mask", TensorProto.INT32, ["batch", "sequence"])],
        [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT,
                                       ["batch", "sequence", model.hidden])],
        initializer=inits,
    )
    proto = helper.make_model(
        graph, producer_name="densewire", producer_version="1",
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(_MS, 1)],
    )
    proto.ir_version = 8
    return proto


def plan_buckets(lengths: np.ndarray, batch_size: int, max_batch_tokens: int, overhead: int) -> list[int]:
    """Cut points of sorted (longest first) ``lengths`` into sub-batches.

    Minimises the padded tokens computed (rows x the chunk's longest) plus
    ``overhead`` token-equivalents per call, with at most ``batch_size`` rows
    and ``max_batch_tokens`` padded tokens per chunk (dynamic programming over
    the sorted lengths). Returns the chunk ends.
    """
    n = len(lengths)
    ls = lengths.tolist()
    best = [0.0] + [float("inf")] * n
    cut = [0] * (n + 1)
    for i in range(1, n + 1):
        for j in range(max(0, i - batch_size), i):
            rows = i - j
            if rows > 1 and rows * ls[j] > max_batch_tokens:
                continue
            cost = best[j] + overhead + rows * ls[j]
            if cost < best[i]:
                best[i], cut[i] = cost, j
    ends = []
    i = n
    while i > 0:
        ends.append(i)
        i = cut[i]
    return ends[::-1]


class BucketedOnnxBackend(OnnxBertBackend):
    """densewire's ONNX engine with the graph and the length buckets of builder version 1."""

    def _graph(self, folder: Path) -> Path:
        m = self.model
        digest = _weights_sha256(m.weights_file, folder / "weights-sha256")
        key = hashlib.sha256(f"bucketed-1\0{digest}\0{json.dumps(m.config, sort_keys=True)}".encode()).hexdigest()[:24]
        path = folder / f"{key}-bucketed.onnx"
        if not path.is_file():
            _save_graph(build_bucketed_graph(m), path)
        return path

    def _encode_sorted(self, seqs: list[list[int]], lengths: np.ndarray) -> np.ndarray:
        out = np.empty((len(seqs), self.dimensions), dtype=_F32)
        start = 0
        for end in plan_buckets(lengths, self._batch_size, self._max_batch_tokens, self._overhead):
            rows = lengths[start:end]
            width = int(rows[0])
            mask = np.arange(width, dtype=np.int32) < rows[:, None]
            ids = np.zeros(mask.shape, dtype=np.int32)
            ids[mask] = np.fromiter((t for s in seqs[start:end] for t in s), dtype=np.int32,
                                    count=int(rows.sum()))
            (hidden,) = self._session.run(["last_hidden_state"],
                                          {"input_ids": ids, "attention_mask": mask.astype(np.int32)})
            rows_out = hidden.reshape(-1, hidden.shape[-1])  # (batch, sequence, hidden) or already (rows, hidden)
            packed = rows_out if mask.all() else rows_out[mask.ravel()]
            out[start:end] = pool(packed, rows, self.model.pooling, self.model.normalize)
            start = end
        return out
