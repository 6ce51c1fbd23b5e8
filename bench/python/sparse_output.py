"""Sparse output (SPEC.md 20.2) in densewire's sparse formats against TEI's ``/embed_sparse`` JSON shape,
side by side in one run: bytes and Python decode time.

    .venv/bin/python bench/python/sparse_output.py [--docs 100] [--words 256] [--rounds 7]

The vectors are the ``hash:D`` model's sparse output (``_backends/hash.py``: one weight per distinct word,
vocabulary 30522, float32 weights in (0, 1]) of ``--docs`` texts of ``--words`` distinct words, about as
many non-zeros as a SPLADE document vector has (100 to 300). TEI's answer is ``[[{"index": i, "value": v}]]``
as the server writes it (float32's shortest decimals, as TEI's serde does); its client decodes with
``json.loads`` and builds one index and one value array per vector (the usual code), or with orjson.
densewire's bodies are ``densewire.encode``'s, decoded by ``densewire.decode(kind="sparse")``. Rounds are
interleaved; best and median are reported with the machine, the versions and the load average.
"""

from __future__ import annotations

import argparse
import json
import os

import numpy as np
import orjson

import densewire
from densewire._backends import HashBackend
from densewire._bench import decoder_table, interleaved, machine_info
from densewire._server.sparse_routes import tei_sparse_json


def texts_of(docs: int, words: int) -> list[str]:
    return [" ".join(f"w{d}x{k}" for k in range(words)) for d in range(docs)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=100)
    parser.add_argument("--words", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    model = HashBackend(384)
    indices, values, nnz = model.embed_sparse(texts_of(args.docs, args.words))
    sparse = densewire.SparseVectors(indices, values, np.concatenate([[0], np.cumsum(nnz)]), model.sparse_vocab_size)
    emb = densewire.Embeddings(sparse, model.name, densewire.Usage(args.docs * args.words, args.docs * args.words))
    tei = tei_sparse_json(sparse)
    bodies = {fmt: densewire.encode(emb, fmt) for fmt in ("raw", "msgpack", "protobuf", "arrow")}

    def arrays(doc: list) -> list[tuple[np.ndarray, np.ndarray]]:
        return [(np.array([e["index"] for e in v], np.uint32), np.array([e["value"] for e in v], np.float32))
                for v in doc]

    contenders = {"TEI JSON, json.loads + np.array": lambda: arrays(json.loads(tei)),
                  "TEI JSON, orjson.loads + np.array": lambda: arrays(orjson.loads(tei))}
    for fmt, (body, headers) in bodies.items():
        contenders[f"densewire {fmt}"] = (lambda b=body, h=headers, f=fmt: densewire.decode(b, f, h, kind="sparse"))
    got = densewire.decode(bodies["raw"][0], "raw", bodies["raw"][1], kind="sparse").tensor
    assert np.array_equal(got.indices, sparse.indices) and np.array_equal(got.values, sparse.values)
    times = interleaved(contenders, args.rounds, warmup=True)  # warm-up: pyarrow's IPC import is not a decode
    sizes = {"TEI JSON, json.loads + np.array": len(tei), "TEI JSON, orjson.loads + np.array": len(tei),
             **{f"densewire {f}": len(b) for f, (b, _) in bodies.items()}}
    print(f"{args.docs} documents x {args.words} words: {int(nnz.sum())} non-zeros (vocabulary {sparse.vocab_size}), "
          f"{args.rounds} interleaved rounds; load average {os.getloadavg()}")
    print(decoder_table(times, sizes, "TEI JSON, json.loads + np.array", digits=3))
    print(json.dumps(machine_info(), indent=1))


if __name__ == "__main__":
    main()
