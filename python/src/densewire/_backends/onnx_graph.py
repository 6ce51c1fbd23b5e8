"""Build the ONNX graph of a BERT-family encoder from its weights, without torch.

The graph uses ONNX Runtime's fused transformer operators (domain
``com.microsoft``) directly, the ones its transformer optimizer would produce
from an exported graph:

* ``EmbedLayerNormalization``: word + position (+ token type 0, folded into the
  position table) embeddings and their LayerNorm in one kernel, and the
  per-row count of real tokens (the attention mask index);
* ``Attention``: the fused Q/K/V projection, scaled dot-product attention over
  the real tokens of each row (right padding) and the head merge;
* ``SkipLayerNormalization``: bias + residual + LayerNorm;
* ``BiasGelu``: bias + exact (erf) GELU.

Inputs: ``input_ids`` and ``attention_mask``, int32 ``(batch, sequence)``,
right-padded. Output: ``last_hidden_state`` float32 ``(batch, sequence,
hidden)``; pooling runs outside the graph (``bert_model.pool``), shared with
the numpy engine. :data:`BUILDER_VERSION` is part of the cache key: bump it
whenever the graph this module builds changes.
"""

from __future__ import annotations

import numpy as np

from .._optional import require
from .bert_model import BertModel

__all__ = ["BUILDER_VERSION", "build_graph", "OPSET"]

BUILDER_VERSION = "1"
OPSET = 17
_MS = "com.microsoft"


def build_graph(model: BertModel) -> "onnx.ModelProto":  # noqa: F821 (onnx imported lazily)
    """The fused ONNX graph of ``model`` (weights embedded as initializers)."""
    onnx = require("onnx", extra="serve", feature="the ONNX engine")
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
        graph, producer_name="densewire", producer_version=BUILDER_VERSION,
        opset_imports=[helper.make_opsetid("", OPSET), helper.make_opsetid(_MS, 1)],
    )
    proto.ir_version = 8
    return proto
