#!/usr/bin/env python3
"""Accuracy of every precision (issue 26): cosine to sentence-transformers and recall@10 against fp32.

    .venv/bin/python bench/model/precision_accuracy.py                 # writes bench/model/results-precision.json
    .venv/bin/python bench/model/precision_accuracy.py --queries 300   # a quicker run

For each contender (the ONNX engine in fp32 and int8 with and without ``reduce_range``, the OpenVINO engine
in fp32 and, where the CPU multiplies bf16 natively, bf16; the numpy engine in fp32 and with weights and
activations rounded to bf16, which is how bf16 is measured on a CPU without bf16 units):

* cosine to sentence-transformers' vectors of the held-out reference texts
  (python/tests/data/minilm-reference.json), min and mean;
* on the retrieval set of bench/serve/quantized.py (first sentence of a prose paragraph against the rest,
  from the installed packages' descriptions and docstrings): the cosine of each vector to the ONNX fp32
  engine's (min), recall@10 (the query's own document in its top 10), recall@10 as a share of fp32's,
  and overlap@10 (the share of fp32's top 10 it keeps).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE.parent / "serve"))

from quantized import retrieval_set, top_k  # noqa: E402

from densewire._backends import (  # noqa: E402
    BertBackend, OnnxBertBackend, OpenVinoBertBackend, cpu_features, cpu_flags, default_model_path, native_precision)
from densewire._server.quantization import calibration_texts  # noqa: E402

REFERENCE = ROOT / "python" / "tests" / "data" / "minilm-reference.json"


def reference() -> tuple[list[str], np.ndarray]:
    doc = json.loads(REFERENCE.read_text("utf-8"))
    texts = [i["text"] for i in doc["items"]]
    return texts, np.stack([np.frombuffer(bytes.fromhex(i["embedding_f32le_hex"]), "<f4") for i in doc["items"]])


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a, b = a.astype(np.float64), b.astype(np.float64)
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def contenders(threads: int) -> dict:
    path = default_model_path()
    out = {
        "onnx fp32": lambda: OnnxBertBackend(path, threads=threads),
        "openvino fp32": lambda: OpenVinoBertBackend(path, threads=threads),
        "numpy fp32": lambda: BertBackend(path, blas_threads=threads),
        "numpy bf16 (weights and activations rounded)": lambda: BertBackend(path, emulate_bf16=True,
                                                                          blas_threads=threads),
        "onnx int8, reduce_range (7-bit weights)": lambda: OnnxBertBackend(path, threads=threads, quantize="int8",
                                                                           reduce_range=True),
        "onnx int8, 8-bit weights": lambda: OnnxBertBackend(path, threads=threads, quantize="int8",
                                                            reduce_range=False),
    }
    if native_precision(cpu_flags()) == "bf16":
        out["openvino bf16"] = lambda: OpenVinoBertBackend(path, threads=threads, precision="bf16")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", type=int, default=2000, help="retrieval queries (and documents) at most")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default=str(HERE / "results-precision.json"))
    args = ap.parse_args()
    texts, expected = reference()
    queries, docs = retrieval_set(args.queries, set(calibration_texts()))
    print(f"retrieval set: {len(queries)} queries, {len(docs)} documents", file=sys.stderr)
    truth = np.arange(len(queries))
    rows: dict[str, dict] = {}
    base_top = base_q = base_d = None
    for name, make in contenders(args.threads).items():
        t = time.perf_counter()
        backend = make()
        ref = backend.embed(texts)
        qv, dv = backend.embed(queries), backend.embed(docs)
        top = top_k(qv @ dv.T, 10)
        if base_top is None:  # the first contender is ONNX fp32, today's engine
            base_top, base_q, base_d = top, qv, dv
        recall = float(np.mean([truth[i] in top[i] for i in range(len(queries))]))
        rows[name] = {
            "cosine_to_st_min": float(cosines(ref, expected).min()),
            "cosine_to_st_mean": float(cosines(ref, expected).mean()),
            "cosine_to_fp32_min": float(min(cosines(qv, base_q).min(), cosines(dv, base_d).min())),
            "recall@10": recall,
            "overlap@10": float(np.mean([len(set(top[i]) & set(base_top[i])) / 10 for i in range(len(queries))])),
            "precision": getattr(backend, "precision", None),
            "seconds": round(time.perf_counter() - t, 1),
        }
        print(name, rows[name], file=sys.stderr)
    f32 = rows["onnx fp32"]["recall@10"]
    for row in rows.values():
        row["recall_of_fp32"] = row["recall@10"] / f32
    print(f"\n| precision (engine) | cosine to ST, min | mean | cosine to fp32, min | recall@10 | of fp32 | overlap@10 |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, r in rows.items():
        print(f"| {name} | {r['cosine_to_st_min']:.6f} | {r['cosine_to_st_mean']:.6f} | {r['cosine_to_fp32_min']:.5f} "
              f"| {r['recall@10']:.4f} | {r['recall_of_fp32']:.4f} | {r['overlap@10']:.4f} |")
    flags = cpu_flags()
    result = {
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "git": subprocess.run(["git", "-C", str(HERE), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True).stdout.strip(),
        "cpu": next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                     if line.startswith("model name")), platform.processor()),
        "cpu_features": list(cpu_features(flags)), "native_precision": native_precision(flags),
        "versions": {n: importlib.metadata.version(n) for n in ("numpy", "onnxruntime", "openvino", "tokenizers")},
        "queries": len(queries), "documents": len(docs), "contenders": rows,
    }
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n", "utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
