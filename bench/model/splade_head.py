"""What the SPLADE head costs on top of the encoder, side by side in one run.

    .venv/bin/python bench/model/splade_head.py [--texts 32] [--words 100] [--rounds 5] [--engine onnx]

The checkpoint is all-MiniLM-L6-v2's real encoder (the built-in model) with a random MLM head of BERT's
shape (dense 384 x 384, LayerNorm, the decoder tied to its 30522 x 384 word embeddings, a bias) written
beside it as a BertForMaskedLM folder: the encoder costs what MiniLM's does, the head what a MiniLM-sized
SPLADE model's does. Timed per round, interleaved: the pooled vectors of the same texts (``embed``) and their
sparse vectors (``embed_sparse``: the same encoder call, then the head on every real token and the
sparsification), one engine thread, numpy's BLAS on one thread. Best and median, load average, machine.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
from safetensors.numpy import load_file, save_file

from densewire._backends import default_model_path, load_backend
from densewire._backends.blas import limit_blas_threads
from densewire._backends.splade import SpladeBackend
from densewire._bench import machine_info


def splade_folder(dst: Path) -> Path:
    src = default_model_path()
    shutil.copytree(src, dst)
    t = load_file(str(dst / "model.safetensors"))
    rng = np.random.default_rng(0)
    d, v = 384, t[next(k for k in t if k.endswith("word_embeddings.weight"))].shape[0]
    t.update({"cls.predictions.transform.dense.weight": (rng.standard_normal((d, d)) / np.sqrt(d)).astype(np.float32),
              "cls.predictions.transform.dense.bias": np.zeros(d, np.float32),
              "cls.predictions.transform.LayerNorm.weight": np.ones(d, np.float32),
              "cls.predictions.transform.LayerNorm.bias": np.zeros(d, np.float32),
              "cls.predictions.bias": np.full(v, -3.5, np.float32)})  # some hundreds of non-zeros a text
    save_file(t, str(dst / "model.safetensors"))
    (dst / "modules.json").unlink(missing_ok=True)
    return dst


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=32)
    parser.add_argument("--words", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--engine", default="onnx")
    args = parser.parse_args()
    limit_blas_threads(1)
    words = "sparse retrieval expands every document into the vocabulary terms it is about".split()
    texts = [" ".join(words[(i + k) % len(words)] for k in range(args.words)) for i in range(args.texts)]
    with tempfile.TemporaryDirectory() as tmp:
        folder = splade_folder(Path(tmp) / "minilm-splade")
        dense = load_backend(str(folder), engine=args.engine, precision="fp32", threads=1)
        sparse = load_backend(str(folder), engine=args.engine, precision="fp32", threads=1, pooling="splade")
        assert isinstance(sparse, SpladeBackend)
        tokens = sum(dense.count_tokens(texts))
        contenders = {"encoder + mean pooling (embed)": lambda: dense.embed(texts),
                      "encoder + SPLADE head (embed_sparse)": lambda: sparse.embed_sparse(texts)}
        for fn in contenders.values():
            fn()  # warm-up
        times: dict[str, list[float]] = {k: [] for k in contenders}
        for _ in range(args.rounds):
            for name, fn in contenders.items():
                t0 = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - t0)
        nnz = sparse.embed_sparse(texts)[2]
    base = statistics.median(times["encoder + mean pooling (embed)"])
    print(f"{args.texts} texts, {tokens} tokens, engine {args.engine} fp32, 1 thread; {args.rounds} interleaved rounds; "
          f"load average {os.getloadavg()}; non-zeros per text {int(nnz.mean())}")
    print("| call | best ms | median ms | median vs embed |")
    print("|---|---:|---:|---:|")
    for name, ts in times.items():
        print(f"| {name} | {min(ts) * 1e3:.1f} | {statistics.median(ts) * 1e3:.1f} | {statistics.median(ts) / base:.2f}x |")
    print(json.dumps(machine_info(("densewire", "numpy", "onnxruntime", "openvino")), indent=1))


if __name__ == "__main__":
    main()
