"""Sparse (SPLADE-shaped) output into the stores, client side only: what a write task spends turning one
block's sparse column into what it sends, side by side in one run, rounds interleaved (every contender
once a round, the order rotated), best and median. Nothing is sent: the stores' own parse and index work
is the same for any client (the sinks' correctness against the real stores is python/tests).

* pgvector ``sparsevec`` binary COPY tuples: ``encode_tuples`` straight from the SparseVectors' indices and
  values (what ``PgvectorSink`` does now) vs the dense path (the rows made dense, ``(n, V)`` float32, then
  ``encode_tuples``: the only way before).
* Elasticsearch ``sparse_vector`` bulk bodies: ``EsSparseVectorSink.bodies`` vs the usual way, a Python dict
  ``{token: float}`` per row (``zip`` of the vocabulary's tokens and ``tolist()``), each action serialized by
  elasticsearch-py's own ``JSONSerializer`` and joined into NDJSON.

    .venv/bin/python bench/stores/sparse.py --rows 10000 --nnz 120 --rounds 5 --json bench/stores/sparse.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO / "bench" / "scale")]

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402

from common import machine  # noqa: E402
from common import rounds  # noqa: E402
from densewire import SparseVectors  # noqa: E402
from densewire._backends import default_model_path  # noqa: E402
from densewire._batch._esmulti import EsSparseVectorSink, load_vocabulary  # noqa: E402
from densewire._ragged_arrow import sparse_array  # noqa: E402
from densewire._stores._pgcopy import CopyColumns, encode_tuples  # noqa: E402


def corpus(rows: int, nnz: int, vocab: int, seed: int = 32) -> SparseVectors:
    """SPLADE-shaped rows: about ``nnz`` distinct ascending indices each, weights in (0, 3]."""
    rng = np.random.default_rng(seed)
    counts = rng.integers(nnz // 2, nnz * 3 // 2, rows)
    indices = np.concatenate([np.sort(rng.choice(vocab, k, replace=False)) for k in counts]).astype(np.uint32)
    values = rng.uniform(0.01, 3.0, int(counts.sum())).astype(np.float32)
    return SparseVectors(indices, values, np.concatenate([[0], np.cumsum(counts)]), vocab)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=10_000)
    ap.add_argument("--nnz", type=int, default=120, help="mean non-zeros a row (SPLADE documents: 100-300)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()
    from elasticsearch.serializer import JSONSerializer

    vocab = load_vocabulary(default_model_path())  # 30,522 WordPiece tokens
    sv = corpus(args.rows, args.nnz, len(vocab))
    ids = np.arange(args.rows, dtype=np.int64)
    cols = CopyColumns("sparsevec", "embedding", "int8", "id")
    chunk = 512  # copy_vectors' rows_per_chunk

    def pg_csr() -> None:
        for lo in range(0, sv.n, chunk):
            encode_tuples(sv.slice(lo, min(lo + chunk, sv.n)), cols, ids[lo:lo + chunk], lo)

    def pg_dense() -> None:
        for lo in range(0, sv.n, chunk):
            encode_tuples(sv.slice(lo, min(lo + chunk, sv.n)).to_dense(), cols, ids[lo:lo + chunk], lo)

    assert bytes(encode_tuples(sv.slice(0, 50), cols, ids[:50])) == bytes(encode_tuples(sv.slice(0, 50).to_dense(),
                                                                                          cols, ids[:50]))
    col = sparse_array(sv)
    table = pa.Table.from_arrays([pa.array(ids), col], schema=pa.schema([
        pa.field("id", pa.int64()), pa.field("splade", col.type, False,
                                             metadata={"densewire.vocabulary_size": str(len(vocab))})]))
    sink = EsSparseVectorSink("http://127.0.0.1:9", index="docs", field="splade", id_column="id", vocab=vocab)
    serializer = JSONSerializer()

    def es_sink() -> None:
        sink.bodies(table, block="b")

    def es_dicts() -> None:
        lines = []
        rows = table.to_pylist()  # what a Ray or Spark write task does with a block: a dict a row
        for row in rows:
            lines.append(serializer.dumps({"index": {"_index": "docs", "_id": str(row["id"])}}))
            s = row["splade"]
            lines.append(serializer.dumps({"splade": dict(zip([vocab[i] for i in s["indices"]], s["values"]))}))
        b"\n".join(x if isinstance(x, bytes) else x.encode() for x in lines)

    info = machine(("densewire", "numpy", "pyarrow", "orjson", "elasticsearch"))
    print(json.dumps(info))
    results = {
        "sparsevec_copy": rounds("sparsevec COPY tuples", args.rows, {"densewire CSR": pg_csr, "dense rows": pg_dense},
                                 args.rounds),
        "sparse_vector_bulk": rounds("sparse_vector bulk bodies", args.rows,
                                     {"densewire EsSparseVectorSink": es_sink, "dicts + JSONSerializer": es_dicts},
                                     args.rounds),
    }
    info["load_average_at_end"] = os.getloadavg()
    out = {"machine": info, "rows": args.rows, "nnz_mean": args.nnz, "vocab": len(vocab), "rounds": args.rounds,
           "results": results}
    for name, contenders in results.items():
        a, b = list(contenders.values())
        print(f"{name}: best {a['best_rows_per_s'] / b['best_rows_per_s']:.2f}x, median "
              f"{a['median_rows_per_s'] / b['median_rows_per_s']:.2f}x rows/s")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
