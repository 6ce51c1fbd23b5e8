"""Build the ONNX graph of a BERT-family encoder from its weights, without torch.

The graph computes every linear layer on the *real* tokens only: the batch
arrives packed, sequences back to back, and only attention, which needs each
sequence's tokens side by side, works on a padded ``(batch, sequence)`` view
gathered for it and scattered back. Padding therefore costs only attention's
scores, not the matrix products that are nearly all of a short sequence's
work. Per layer:

* ``MatMul`` of the packed tokens by the fused Q/K/V weights, ``Gather`` into
  the padded view, ``Split`` into Q, K and V;
* ``MultiHeadAttention`` (domain ``com.microsoft``) with the Q/K/V bias and the
  key padding mask, and a ``Gather`` of its real rows back into packed order;
* ``MatMul``, ``Add`` of the bias and of the residual, ``LayerNormalization``;
  the feed-forward ``MatMul``, ``Add`` of the bias, ``Gelu`` (exact erf form,
  ``com.microsoft``), ``MatMul``, the two ``Add`` and a second
  ``LayerNormalization``.

ONNX Runtime's optimizer folds each matrix product and its bias into one
``Gemm``. Its fusions into ``SkipLayerNormalization`` and ``BiasGelu``, which
the graph of builder version 2 used, are kept off when the session is made
(:data:`DISABLED_FUSIONS`; ONNX Runtime 1.31 does not apply them to these 2-D
tensors anyway): on the AVX2 machines this project measures on,
``SkipLayerNormalization`` ran 4-6x slower than ``Add`` + ``LayerNormalization``
(bench/model/layernorm.py, bench/model/RESULTS.md).

The embeddings are ``Gather`` of the word and position tables (token type 0
folded into the positions), ``Add`` and ``LayerNormalization``.

Inputs (int32): ``input_ids`` and ``position_ids`` ``(tokens,)``, the packed
batch; ``pad_index`` ``(batch, sequence)``, the packed row of each padded slot
(any row for a pad slot); ``unpad_index`` ``(tokens,)``, the flat padded slot of
each packed token; ``key_padding_mask`` ``(batch, sequence)``, 1 for real
tokens. :func:`packed_feeds` makes them from a batch of sequences. Output:
``last_hidden_state`` float32 ``(tokens, hidden)`` in packed order; pooling
runs outside the graph (``bert_model.pool``), shared with the numpy engine.
:data:`BUILDER_VERSION` is part of the cache key: bump it whenever the graph
this module builds changes.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .._optional import require
from .bert_model import BertLayer, BertModel

__all__ = ["BUILDER_VERSION", "DISABLED_FUSIONS", "GraphBuilder", "build_graph", "build_plain_graph", "packed_feeds",
           "OPSET"]

BUILDER_VERSION = "3"
#: ONNX Runtime graph transformers to switch off for this graph (``InferenceSession(disabled_optimizers=...)``)
DISABLED_FUSIONS = ("SkipLayerNormFusion", "BiasGeluFusion")
OPSET = 17
_MS = "com.microsoft"
_I32 = np.int32


def packed_feeds(seqs: Sequence[Sequence[int]], lengths: np.ndarray,
                 key_lengths: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """The graph's inputs for ``seqs`` (``lengths`` tokens each, all > 0). ``key_lengths``: only the first
    so many tokens of each sequence are attended to (every token still attends: ColBERT's query
    expansion tokens); None: all of them."""
    rows, width = len(lengths), int(lengths.max())
    tokens = int(lengths.sum())
    mask = np.arange(width, dtype=_I32) < lengths[:, None]
    unpad = np.flatnonzero(mask).astype(_I32)  # row-major: sequence by sequence, as packed
    pad = np.zeros(rows * width, dtype=_I32)
    pad[unpad] = np.arange(tokens, dtype=_I32)
    starts = np.zeros(rows, dtype=_I32)
    np.cumsum(lengths[:-1], out=starts[1:])
    return {
        "input_ids": np.fromiter((t for s in seqs for t in s), dtype=_I32, count=tokens),
        "position_ids": np.arange(tokens, dtype=_I32) - np.repeat(starts, lengths),
        "pad_index": pad.reshape(rows, width),
        "unpad_index": unpad,
        "key_padding_mask": (mask if key_lengths is None
                             else np.arange(width, dtype=_I32) < key_lengths[:, None]).astype(_I32),
    }


class GraphBuilder:
    """The nodes and initializers of an encoder graph being built: :func:`build_graph` uses it, and
    so do the graph variants bench/model measures against it (``bench/model/graph_variants.py``)."""

    #: the operators of ONNX Runtime's ``com.microsoft`` domain these graphs may use
    MS_OPS = frozenset({"MultiHeadAttention", "Gelu", "Attention", "EmbedLayerNormalization"})

    def __init__(self, model: BertModel, plain: bool = False) -> None:
        self.onnx = require("onnx", extra="serve", feature="the ONNX engine")
        self.model = model
        #: standard ONNX operators only (no ``com.microsoft`` domain): the graph OpenVINO reads
        self.plain = plain
        self.inits: list = []
        self.nodes: list = []

    def const(self, name: str, array: np.ndarray, dtype: type = np.float32) -> str:
        self.inits.append(self.onnx.numpy_helper.from_array(np.ascontiguousarray(array, dtype=dtype), name))
        return name

    def node(self, op: str, inputs: list[str], outputs: list[str], name: str, **attrs: object) -> None:
        domain = _MS if op in self.MS_OPS else ""
        self.nodes.append(self.onnx.helper.make_node(op, inputs, outputs, name=name, domain=domain, **attrs))

    def gelu(self, p: str, x: str, out: str) -> None:
        """Exact (erf) GELU of ``x``: ``com.microsoft`` ``Gelu``, or with ``plain`` the standard-operator
        composition ``x * 0.5 * (1 + Erf(x / sqrt 2))`` that other runtimes read and fuse back into one Gelu."""
        if not self.plain:
            self.node("Gelu", [x], [out], p + "gelu")
            return
        const, node = self.const, self.node
        node("Div", [x, const(p + "sqrt2", np.array(np.sqrt(2.0)))], [p + "gelu_div"], p + "gelu_div")
        node("Erf", [p + "gelu_div"], [p + "gelu_erf"], p + "gelu_erf")
        node("Add", [p + "gelu_erf", const(p + "gelu_one", np.array(1.0))], [p + "gelu_erf1"], p + "gelu_erf1")
        node("Mul", [x, p + "gelu_erf1"], [p + "gelu_mul"], p + "gelu_mul")
        node("Mul", [p + "gelu_mul", const(p + "gelu_half", np.array(0.5))], [out], p + "gelu_half")

    def layer_tail(self, lay: BertLayer, p: str, x: str, context: str, out: str) -> None:
        """A layer after its attention: the output product, ``Add`` of the bias and of the residual
        ``x``, ``LayerNormalization``; the feed-forward product, bias, ``Gelu``, product, bias,
        residual and the second ``LayerNormalization`` into ``out`` (all on ``(rows, hidden)``)."""
        const, node, eps = self.const, self.node, self.model.eps
        node("MatMul", [context, const(p + "attn_out_w", lay.w_o)], [p + "attn_out"], p + "attn_out")
        node("Add", [p + "attn_out", const(p + "attn_out_b", lay.b_o)], [p + "attn_biased"], p + "attn_bias")
        node("Add", [p + "attn_biased", x], [p + "attn_residual"], p + "attn_residual")
        node("LayerNormalization", [p + "attn_residual", const(p + "ln1_w", lay.ln1_w), const(p + "ln1_b", lay.ln1_b)],
             [p + "attn_norm"], p + "ln1", axis=-1, epsilon=eps)
        node("MatMul", [p + "attn_norm", const(p + "ffn_in_w", lay.w_in)], [p + "ffn_in"], p + "ffn_in")
        node("Add", [p + "ffn_in", const(p + "ffn_in_b", lay.b_in)], [p + "ffn_biased"], p + "ffn_in_bias")
        self.gelu(p, p + "ffn_biased", p + "ffn_act")
        node("MatMul", [p + "ffn_act", const(p + "ffn_out_w", lay.w_out)], [p + "ffn_out"], p + "ffn_out")
        node("Add", [p + "ffn_out", const(p + "ffn_out_b", lay.b_out)], [p + "ffn_biased_out"], p + "ffn_out_bias")
        node("Add", [p + "ffn_biased_out", p + "attn_norm"], [p + "ffn_residual"], p + "ffn_residual")
        node("LayerNormalization", [p + "ffn_residual", const(p + "ln2_w", lay.ln2_w), const(p + "ln2_b", lay.ln2_b)],
             [out], p + "ln2", axis=-1, epsilon=eps)

    def embeddings(self, emb: dict[str, np.ndarray]) -> None:
        """Word and position embeddings (every input is segment 0), layer-normalized into ``hidden_0``."""
        const, node = self.const, self.node
        position = emb["position"] + emb["token_type"]
        node("Gather", [const("word_embeddings", emb["word"]), "input_ids"], ["word"], "word", axis=0)
        node("Gather", [const("position_embeddings", position), "position_ids"], ["position"], "position", axis=0)
        node("Add", ["word", "position"], ["embedded"], "embedded")
        node("LayerNormalization", ["embedded", const("embeddings_ln_w", emb["ln_w"]),
                                    const("embeddings_ln_b", emb["ln_b"])],
             ["hidden_0"], "embeddings_ln", axis=-1, epsilon=self.model.eps)

    def unpad_layer_tail(self, lay: BertLayer, n: int, x: str, rows_shape: str, *, last: bool) -> str:
        """Layer ``n``'s padded attention context (``layer{n}_context_padded``) back to packed rows, then
        :meth:`layer_tail`; the layer's output name (``last_hidden_state`` for the last layer)."""
        p = f"layer{n}_"
        self.node("Reshape", [p + "context_padded", rows_shape], [p + "context_slots"], p + "slots")
        self.node("Gather", [p + "context_slots", "unpad_index"], [p + "context"], p + "unpad", axis=0)
        out = "last_hidden_state" if last else f"hidden_{n + 1}"
        self.layer_tail(lay, p, x, p + "context", out)
        return out

    def packed_proto(self) -> "onnx.ModelProto":  # noqa: F821
        """:meth:`proto` with the packed graphs' inputs."""
        return self.proto([("input_ids", ["tokens"]), ("position_ids", ["tokens"]),
                           ("pad_index", ["batch", "sequence"]), ("unpad_index", ["tokens"]),
                           ("key_padding_mask", ["batch", "sequence"])], "tokens")

    def proto(self, inputs: list[tuple[str, list[str]]], rows: str) -> "onnx.ModelProto":  # noqa: F821
        """The model: int32 ``inputs`` (name, dims), float32 ``last_hidden_state`` ``(rows, hidden)``."""
        helper, tensor = self.onnx.helper, self.onnx.TensorProto
        graph = helper.make_graph(
            self.nodes, "sentence_encoder",
            [helper.make_tensor_value_info(name, tensor.INT32, dims) for name, dims in inputs],
            [helper.make_tensor_value_info("last_hidden_state", tensor.FLOAT, [rows, self.model.hidden])],
            initializer=self.inits,
        )
        opsets = [helper.make_opsetid("", OPSET)] + ([] if self.plain else [helper.make_opsetid(_MS, 1)])
        proto = helper.make_model(graph, producer_name="densewire", producer_version=BUILDER_VERSION,
                                  opset_imports=opsets)
        proto.ir_version = 8
        return proto


def build_graph(model: BertModel) -> "onnx.ModelProto":  # noqa: F821 (onnx imported lazily)
    """The packed ONNX graph of ``model`` (weights embedded as initializers)."""
    g = GraphBuilder(model)
    const, node = g.const, g.node
    emb, layers = model.load_weights()
    d = model.hidden
    g.embeddings(emb)
    rows_shape = const("rows_shape", np.array([-1, d]), np.int64)
    qkv_split = const("qkv_split", np.array([d, d, d]), np.int64)
    x = "hidden_0"
    for n, lay in enumerate(layers):
        p = f"layer{n}_"
        w_qkv = np.concatenate([lay.w_q, lay.w_k, lay.w_v], axis=1)
        b_qkv = np.concatenate([lay.b_q, lay.b_k, lay.b_v])
        node("MatMul", [x, const(p + "qkv_w", w_qkv)], [p + "qkv"], p + "qkv")
        node("Gather", [p + "qkv", "pad_index"], [p + "qkv_padded"], p + "pad", axis=0)
        node("Split", [p + "qkv_padded", qkv_split], [p + "q", p + "k", p + "v"], p + "split", axis=2)
        node("MultiHeadAttention", [p + "q", p + "k", p + "v", const(p + "qkv_b", b_qkv), "key_padding_mask"],
             [p + "context_padded"], p + "attention", num_heads=model.heads)
        x = g.unpad_layer_tail(lay, n, x, rows_shape, last=n == len(layers) - 1)
    return g.packed_proto()


def build_plain_graph(model: BertModel) -> "onnx.ModelProto":  # noqa: F821
    """The packed graph of ``model`` in standard ONNX operators only, for runtimes other than ONNX
    Runtime (the OpenVINO engine): the same inputs and output as :func:`build_graph`, the same packed
    linear layers; attention is ``Reshape``/``Transpose``/``MatMul``/``Softmax`` on the padded view with
    the key padding mask as an additive bias, and GELU the ``Erf`` composition (:meth:`GraphBuilder.gelu`)."""
    g = GraphBuilder(model, plain=True)
    const, node = g.const, g.node
    emb, layers = model.load_weights()
    d, h = model.hidden, model.heads
    hd = d // h
    g.embeddings(emb)
    # (batch, 1, 1, sequence): 0 for real keys, -1e9 for padding
    node("Cast", ["key_padding_mask"], ["mask_f"], "mask_f", to=g.onnx.TensorProto.FLOAT)
    node("Sub", ["mask_f", const("one_f", np.array(1.0))], ["mask_neg"], "mask_neg")
    node("Mul", ["mask_neg", const("big_f", np.array(1e9))], ["mask_bias0"], "mask_bias0")
    node("Unsqueeze", ["mask_bias0", const("axes_12", np.array([1, 2]), np.int64)], ["mask_bias"], "mask_bias")
    rows_shape = const("rows_shape", np.array([-1, d]), np.int64)
    heads_shape = const("heads_shape", np.array([0, 0, 3, h, hd]), np.int64)
    x = "hidden_0"
    scale = 1.0 / np.sqrt(hd)
    for n, lay in enumerate(layers):
        p = f"layer{n}_"
        w_qkv = np.concatenate([lay.w_q * scale, lay.w_k, lay.w_v], axis=1)  # 1/sqrt(head size) folded into Q
        b_qkv = np.concatenate([lay.b_q * scale, lay.b_k, lay.b_v])
        node("MatMul", [x, const(p + "qkv_w", w_qkv)], [p + "qkv_mm"], p + "qkv")
        node("Add", [p + "qkv_mm", const(p + "qkv_b", b_qkv)], [p + "qkv"], p + "qkv_bias")
        node("Gather", [p + "qkv", "pad_index"], [p + "qkv_padded"], p + "pad", axis=0)
        node("Reshape", [p + "qkv_padded", heads_shape], [p + "qkv_heads"], p + "qkv_heads")
        # (3, batch, heads, sequence, head size)
        node("Transpose", [p + "qkv_heads"], [p + "qkv_t"], p + "qkv_t", perm=[2, 0, 3, 1, 4])
        node("Split", [p + "qkv_t", const(p + "ones3", np.array([1, 1, 1]), np.int64)],
             [p + "q5", p + "k5", p + "v5"], p + "split", axis=0)
        for part in ("q", "k", "v"):
            node("Squeeze", [p + part + "5", const(p + part + "_axis0", np.array([0]), np.int64)], [p + part],
                 p + part + "_squeeze")
        node("Transpose", [p + "k"], [p + "k_t"], p + "k_t", perm=[0, 1, 3, 2])
        node("MatMul", [p + "q", p + "k_t"], [p + "scores"], p + "scores")
        node("Add", [p + "scores", "mask_bias"], [p + "masked"], p + "masked")
        node("Softmax", [p + "masked"], [p + "probs"], p + "softmax", axis=-1)
        node("MatMul", [p + "probs", p + "v"], [p + "context_heads"], p + "context_heads")
        node("Transpose", [p + "context_heads"], [p + "context_padded"], p + "context_t", perm=[0, 2, 1, 3])
        x = g.unpad_layer_tail(lay, n, x, rows_shape, last=n == len(layers) - 1)
    return g.packed_proto()
