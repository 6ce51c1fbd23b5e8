"""Graph variants of the ONNX engine against today's packed graph, interleaved in one process.

    .venv/bin/python bench/model/graph_variants.py [--rounds 12] [--batches 1,8,32]

Contenders, each a backend of 2 intra-op threads whose idle threads sleep (as `densewire serve`)
unless said otherwise:

* ``packed``: today's engine (python/src/densewire/_backends/onnx_graph.py, builder version 3).
* ``packed-spin``: the same with idle intra-op threads spinning (ONNX Runtime's own default).
* ``padded``: right-padded length buckets with ``EmbedLayerNormalization`` and the fused ``Attention``
  (its own Q/K/V product), every other operator as in ``packed`` on the ``(rows, hidden)`` view
  (``Gemm`` + ``Add`` + ``LayerNormalization``, ``Gelu``): no gathers, but the linear layers compute
  each bucket's padding. What one would run for single sequences if the graph were chosen by the
  call's size.
* ``three-qkv``: ``packed`` with separate Q, K and V products (each ``Gemm`` with its bias) gathered
  one by one into the padded view: no ``Split``, and ``MultiHeadAttention`` without a bias input.
* ``buckets``: the engine before builder version 2 (bucketed_graph.py).
* ``numpy``: densewire's numpy engine (the issue's baseline).

Prints, per batch size, the median sentences/s and the medians of the per-round ratios to numpy
and to ``packed``. Vectors of every variant are checked against ``packed`` first (max abs diff).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench import sentences  # noqa: E402
from bucketed_graph import BucketedOnnxBackend  # noqa: E402

from densewire._backends import BertBackend, OnnxBertBackend, default_model_path  # noqa: E402
from densewire._backends.bert_model import BertModel  # noqa: E402
from densewire._backends.onnx_graph import GraphBuilder  # noqa: E402



def build_padded(model: BertModel) -> "onnx.ModelProto":  # noqa: F821
    g, (emb, layers), d = GraphBuilder(model), model.load_weights(), model.hidden
    position = emb["position"] + emb["token_type"]
    g.node("EmbedLayerNormalization",
           ["input_ids", "", g.const("word", emb["word"]), g.const("position", position), "",
            g.const("eln_w", emb["ln_w"]), g.const("eln_b", emb["ln_b"]), "attention_mask"],
           ["embedded", "mask_index"], "embeddings", epsilon=model.eps)
    rows = g.const("rows_shape", np.array([-1, d]), np.int64)
    g.node("Shape", ["embedded"], ["padded_shape"], "padded_shape")
    g.node("Reshape", ["embedded", rows], ["hidden_0"], "rows_0")
    x, x_padded = "hidden_0", "embedded"
    for n, lay in enumerate(layers):
        p = f"layer{n}_"
        if x_padded is None:
            g.node("Reshape", [x, "padded_shape"], [p + "padded"], p + "padded")
            x_padded = p + "padded"
        g.node("Attention", [x_padded, g.const(p + "qkv_w", np.concatenate([lay.w_q, lay.w_k, lay.w_v], axis=1)),
                             g.const(p + "qkv_b", np.concatenate([lay.b_q, lay.b_k, lay.b_v])), "mask_index"],
               [p + "context_padded"], p + "attention", num_heads=model.heads)
        g.node("Reshape", [p + "context_padded", rows], [p + "context"], p + "context")
        out = "last_hidden_state" if n == len(layers) - 1 else f"hidden_{n + 1}"
        g.layer_tail(lay, p, x, p + "context", out)
        x, x_padded = out, None
    return g.proto([("input_ids", ["batch", "sequence"]), ("attention_mask", ["batch", "sequence"])], "rows")


def build_three_qkv(model: BertModel) -> "onnx.ModelProto":  # noqa: F821
    g, (emb, layers), d = GraphBuilder(model), model.load_weights(), model.hidden
    position = emb["position"] + emb["token_type"]
    g.node("Gather", [g.const("word", emb["word"]), "input_ids"], ["word_rows"], "word", axis=0)
    g.node("Gather", [g.const("position", position), "position_ids"], ["position_rows"], "position", axis=0)
    g.node("Add", ["word_rows", "position_rows"], ["embedded"], "embedded")
    g.node("LayerNormalization", ["embedded", g.const("eln_w", emb["ln_w"]), g.const("eln_b", emb["ln_b"])],
           ["hidden_0"], "embeddings_ln", axis=-1, epsilon=model.eps)
    rows = g.const("rows_shape", np.array([-1, d]), np.int64)
    x = "hidden_0"
    for n, lay in enumerate(layers):
        p = f"layer{n}_"
        for part, w, b in (("q", lay.w_q, lay.b_q), ("k", lay.w_k, lay.b_k), ("v", lay.w_v, lay.b_v)):
            g.node("MatMul", [x, g.const(p + part + "_w", w)], [p + part + "_mm"], p + part + "_mm")
            g.node("Add", [p + part + "_mm", g.const(p + part + "_b", b)], [p + part + "_rows"], p + part + "_bias")
            g.node("Gather", [p + part + "_rows", "pad_index"], [p + part], p + part + "_pad", axis=0)
        g.node("MultiHeadAttention", [p + "q", p + "k", p + "v", "", "key_padding_mask"], [p + "context_padded"],
               p + "attention", num_heads=model.heads)
        g.node("Reshape", [p + "context_padded", rows], [p + "context_slots"], p + "slots")
        g.node("Gather", [p + "context_slots", "unpad_index"], [p + "context"], p + "unpad", axis=0)
        out = "last_hidden_state" if n == len(layers) - 1 else f"hidden_{n + 1}"
        g.layer_tail(lay, p, x, p + "context", out)
        x = out
    return g.proto([("input_ids", ["tokens"]), ("position_ids", ["tokens"]), ("pad_index", ["batch", "sequence"]),
                    ("unpad_index", ["tokens"]), ("key_padding_mask", ["batch", "sequence"])], "tokens")


class _VariantMixin:
    builder = staticmethod(build_padded)
    tag = "variant"

    def _graph(self, folder: Path) -> Path:
        import onnx

        path = Path(folder) / f"graph-variant-{self.tag}.onnx"
        path.parent.mkdir(parents=True, exist_ok=True)
        onnx.save(self.builder(self.model), str(path))
        return path


class ThreeQkvBackend(_VariantMixin, OnnxBertBackend):
    builder, tag = staticmethod(build_three_qkv), "three-qkv"


class PaddedBackend(_VariantMixin, BucketedOnnxBackend):
    """The bucketed engine's buckets and pooling (its output may be 2-D) on the padded graph."""

    builder, tag = staticmethod(build_padded), "padded"


def main() -> None:
    import tempfile

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--batches", default="1,8,32")
    ap.add_argument("--variants", default="packed,padded,three-qkv,buckets,numpy",  # packed-spin on request
                    help="which contenders (packed and numpy are always run: the ratios are to them)")
    args = ap.parse_args()
    wanted = {"packed", "numpy", *args.variants.split(",")}
    batches = [int(b) for b in args.batches.split(",")]
    folder, texts = default_model_path(), sentences()
    with tempfile.TemporaryDirectory() as tmp:
        makers = {
            "packed": lambda: OnnxBertBackend(folder, threads=2),
            "packed-spin": lambda: OnnxBertBackend(folder, threads=2, spinning=True),
            "padded": lambda: PaddedBackend(folder, threads=2, spinning=False, cache=tmp),
            "three-qkv": lambda: ThreeQkvBackend(folder, threads=2, cache=tmp),
            "buckets": lambda: BucketedOnnxBackend(folder, threads=2, spinning=False),
            "numpy": lambda: BertBackend(folder, blas_threads=2),
        }
        engines = {k: make() for k, make in makers.items() if k in wanted}
        reference = engines["packed"].embed(texts[:64])
        for name, e in engines.items():
            print(f"{name}: max abs diff to packed {np.abs(e.embed(texts[:64]) - reference).max():.1e}")
        rates = {(k, b): [] for k in engines for b in batches}
        for r in range(args.rounds):
            for b in batches:
                order = list(engines) if r % 2 == 0 else list(engines)[::-1]
                n, off = (48 if b == 1 else 128), (r * 37) % 180
                for k in order:
                    t = time.perf_counter()
                    for i in range(off, off + n, b):
                        engines[k].embed(texts[i:i + b])
                    rates[(k, b)].append(n / (time.perf_counter() - t))
    for b in batches:
        print(f"batch {b}:")
        for k in engines:
            mine = rates[(k, b)]
            vs = {o: statistics.median(x / y for x, y in zip(mine, rates[(o, b)])) for o in ("numpy", "packed")}
            print(f"  {k:10s} {statistics.median(mine):7.1f} sentences/s   x numpy {vs['numpy']:.3f}   x packed {vs['packed']:.3f}")


if __name__ == "__main__":
    main()
