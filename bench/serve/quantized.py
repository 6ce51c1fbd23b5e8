#!/usr/bin/env python3
"""Quantized embeddings (SPEC.md section 17): bytes on the wire, decode time and retrieval quality.

    .venv/bin/python bench/serve/quantized.py            # both parts, writes bench/serve/results-quantized.json
    .venv/bin/python bench/serve/quantized.py --quick    # fewer texts and repeats, for a smoke run

1. Wire: 1,000 texts through the real app of ``densewire serve`` (``create_app``, in process through
   Starlette's test client, so the bodies are exactly the server's), once with the built-in MiniLM
   (384 dimensions: the model has no 1,024-d output) and once with ``hash:1024`` (1,024 dimensions,
   the issue's size; its values are pseudo-random unit vectors, so its bytes and times are
   representative but it says nothing about retrieval). For float32, float16, int8, uint8 and binary
   in JSON numbers, JSON + Base64 and raw: the body's bytes and the median time of
   ``densewire.decode`` of it (and of the dequantize of int8/uint8 codes with the published ranges).
2. Retrieval: a held-out retrieval set built at run time from public text that is not in the
   calibration set: the long descriptions (README texts) of the Python packages installed in this
   venv (pinned by python/requirements-dev.txt) and the docstrings of their modules. Each prose
   paragraph of two or more sentences gives a query (its first sentence) and a document (the rest);
   every document is in the corpus. With the
   MiniLM vectors, each dtype ranks the corpus for each query: float32 and float16 by cosine; int8 and
   uint8 by cosine of the values dequantized with the server's published ranges, and by the dot
   product of the raw codes (what a store of int8 vectors computes); binary by Hamming distance, and
   by Hamming for 4 x 10 candidates rescored with the float32 vectors. recall@10 is the share of
   queries whose own document is in the top 10; "of float32" divides it by float32's; overlap@10 is
   the share of float32's top 10 that the dtype's top 10 keeps.
"""

from __future__ import annotations

import argparse
import ast
import email
import importlib.metadata
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

import densewire
from densewire._server.quantization import calibration_texts, load_quantizer
from densewire.server import ServerConfig, create_app, load_backend

HERE = Path(__file__).resolve().parent
DTYPES = ["float32", "float16", "int8", "uint8", "binary"]
ENCODINGS = [("json numbers", "json", "float"), ("json base64", "json", "base64"), ("raw", "raw", "base64")]


def machine() -> dict:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    versions = {name: importlib.metadata.version(name) for name in
                ("numpy", "onnxruntime", "orjson", "msgspec", "pybase64", "starlette", "tokenizers")}
    return {"cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version(),
            "platform": platform.platform(), "load_average": os.getloadavg(), **versions,
            "densewire": densewire.__version__, "spec": densewire.SPEC_VERSION}


def median_seconds(fn, min_time: float, min_repeat: int) -> float:
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < min_repeat or time.perf_counter() - start < min_time:
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def wire(model: str, texts: list[str], min_time: float, min_repeat: int) -> list[dict]:
    from starlette.testclient import TestClient  # the dev set's test client: the real app, no sockets

    rows = []
    cfg = ServerConfig(model=model, demo_tables=False, request_timeout=3600)  # 1,000 MiniLM texts on a busy machine
    with TestClient(create_app(cfg)) as client:
        card = client.get("/v1/models").json()["data"][0]
        q = densewire.Quantization.from_json(card["quantization"])
        client.post("/v1/embeddings", json={"input": texts})  # computed once; every answer below is cached
        for dtype in DTYPES:
            for label, fmt, encoding_format in ENCODINGS:
                r = client.post("/v1/embeddings", headers={"Accept": densewire.MEDIA_TYPES[fmt]},
                                json={"input": texts, "dtype": dtype, "encoding_format": encoding_format})
                r.raise_for_status()
                body, headers = r.content, dict(r.headers)
                emb = densewire.decode(body, fmt, headers)
                assert emb.tensor.dtype == dtype and emb.tensor.n == len(texts)
                row = {"model": card["id"], "d": card["dimensions"], "dtype": dtype, "encoding": label,
                       "bytes": len(body),
                       "decode_ms": 1000 * median_seconds(lambda: densewire.decode(body, fmt, headers),
                                                          min_time, min_repeat)}
                if dtype in ("int8", "uint8"):
                    assert emb.quantization == q.id
                    row["decode_dequantize_ms"] = 1000 * median_seconds(
                        lambda: q.dequantize(densewire.decode(body, fmt, headers)), min_time, min_repeat)
                rows.append(row)
                print(f"{card['id']:>40} {dtype:>8} {label:>13}: {len(body):>10,} B  "
                      f"{row['decode_ms']:8.3f} ms", file=sys.stderr)
    return rows


_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")
_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")
_CODE = re.compile(r"[{}=<>|\\]|>>>|::|https?://|\w\(|\.\. |---|:\w+:|\s-\w")


def _pairs_of(text: str) -> list[tuple[str, str]]:
    """(first sentence, the rest) of each prose paragraph of a text (markdown links and emphasis
    stripped; paragraphs that look like code, tables or markup are left out)."""
    out = []
    for para in re.split(r"\n\s*\n", text):
        if para.lstrip().startswith(("#", "|", "```", ">>>", "..", "    ")):
            continue
        para = " ".join(_LINK.sub(r"\1", para).replace("`", "").replace("**", "").split())
        if _CODE.search(para) or not para.isascii():
            continue
        sentences = [s for s in _SENTENCE.split(para) if 4 <= len(s.split()) <= 40 and s[-1] in ".!?"]
        if len(sentences) >= 2:
            out.append((sentences[0], " ".join(sentences[1:])))
    return out


def retrieval_set(limit: int, calibration: set[str]) -> tuple[list[str], list[str]]:
    """(queries, documents), query i's document is documents[i]: prose paragraphs, first sentence
    against the rest, of the installed packages' long descriptions and of the docstrings of their
    Python modules (this venv, pinned by python/requirements-dev.txt; densewire's own left out, and
    no sentence of the calibration set)."""
    pairs: list[tuple[str, str]] = []
    dists = sorted(importlib.metadata.distributions(), key=lambda d: d.metadata["Name"].lower())
    for dist in dists:
        meta = dist.metadata
        body = meta.get_payload() if isinstance(meta, email.message.Message) else None
        pairs += _pairs_of(body or meta.get("Description") or "")
    for dist in dists:
        if dist.metadata["Name"].lower() == "densewire":
            continue
        for f in sorted(dist.files or [], key=str):
            if f.suffix != ".py" or "test" in str(f).lower():
                continue
            try:
                tree = ast.parse(Path(dist.locate_file(f)).read_text("utf-8"))
            except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
                continue
            for node in ast.walk(tree):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Module)):
                    doc = ast.get_docstring(node)
                    if doc:
                        pairs += _pairs_of(doc)
    seen, queries, docs = set(), [], []
    for q, d in pairs:
        if q in seen or q in calibration or d in seen:
            continue
        seen.update((q, d))
        queries.append(q)
        docs.append(d)
    step = max(1, len(queries) // limit)
    return queries[::step][:limit], docs[::step][:limit]


def top_k(scores: np.ndarray, k: int) -> np.ndarray:
    part = np.argpartition(-scores, k, axis=1)[:, :k]
    order = np.take_along_axis(scores, part, axis=1).argsort(axis=1)[:, ::-1]
    return np.take_along_axis(part, order, axis=1)


def normalise(v: np.ndarray) -> np.ndarray:
    return v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)


def retrieval(limit: int) -> dict:
    backend = load_backend("minilm")
    quantizer = load_quantizer(backend, backend.name)
    q = quantizer.native
    queries, docs = retrieval_set(limit, set(calibration_texts()))
    print(f"retrieval set: {len(queries)} queries, {len(docs)} documents", file=sys.stderr)
    qv = np.asarray(backend.embed(queries), np.float32)
    dv = np.asarray(backend.embed(docs), np.float32)
    k = 10
    truth = np.arange(len(queries))
    ranked: dict[str, np.ndarray] = {}
    ranked["float32"] = top_k(qv @ dv.T, k)
    half = densewire.convert(dv, "float16").array.astype(np.float32)
    ranked["float16"] = top_k(densewire.convert(qv, "float16").array.astype(np.float32) @ half.T, k)
    for dtype in ("int8", "uint8"):
        dq = q.dequantize(q.quantize(dv, dtype))
        qq = q.dequantize(q.quantize(qv, dtype))
        ranked[f"{dtype} (dequantized)"] = top_k(normalise(qq) @ normalise(dq).T, k)
        codes_d = q.quantize(dv, dtype).array.astype(np.int32)
        codes_q = q.quantize(qv, dtype).array.astype(np.int32)
        ranked[f"{dtype} (raw codes, dot)"] = top_k((codes_q @ codes_d.T).astype(np.float64), k)
    bits_d = np.unpackbits(densewire.convert(dv, "binary").array, axis=1)[:, :dv.shape[1]].astype(np.int32)
    bits_q = np.unpackbits(densewire.convert(qv, "binary").array, axis=1)[:, :qv.shape[1]].astype(np.int32)
    hamming = bits_q.sum(1)[:, None] + bits_d.sum(1)[None, :] - 2 * (bits_q @ bits_d.T)  # |q xor d| of 0/1 bits
    ranked["binary (Hamming)"] = top_k(-hamming.astype(np.float64), k)
    candidates = top_k(-hamming.astype(np.float64), 4 * k)
    rescored = np.einsum("qd,qcd->qc", qv, dv[candidates])
    ranked["binary (Hamming, top 40 rescored with float32)"] = np.take_along_axis(
        candidates, np.argsort(-rescored, axis=1)[:, :k], axis=1)
    base = ranked["float32"]
    out = {"queries": len(queries), "documents": len(docs), "quantization": q.id, "dtypes": {}}
    for name, top in ranked.items():
        recall = float(np.mean([truth[i] in top[i] for i in range(len(queries))]))
        overlap = float(np.mean([len(set(top[i]) & set(base[i])) / k for i in range(len(queries))]))
        out["dtypes"][name] = {"recall@10": recall, "overlap@10": overlap}
    f32 = out["dtypes"]["float32"]["recall@10"]
    for row in out["dtypes"].values():
        row["of_float32"] = row["recall@10"] / f32 if f32 else None
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="100 texts, short timings, 200 queries")
    ap.add_argument("--texts", type=int, default=1000)
    ap.add_argument("--queries", type=int, default=2000, help="retrieval queries (and documents) at most")
    ap.add_argument("--skip-wire", action="store_true")
    ap.add_argument("--skip-retrieval", action="store_true")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    n = 100 if args.quick else args.texts
    min_time, min_repeat = (0.05, 3) if args.quick else (0.5, 7)
    texts = [f"{s} ({i})" for i, s in enumerate(retrieval_set(10 * n, set())[1][:n])]
    texts += [f"text {i} of the wire benchmark" for i in range(n - len(texts))]
    result: dict = {"command": " ".join([Path(sys.executable).name, *sys.argv]), "machine": machine(),
                    "git": subprocess.run(["git", "-C", str(HERE), "rev-parse", "--short", "HEAD"],
                                          capture_output=True, text=True).stdout.strip()}
    if not args.skip_wire:
        result["wire"] = wire("minilm", texts, min_time, min_repeat) + wire("hash:1024", texts, min_time, min_repeat)
    if not args.skip_retrieval:
        result["retrieval"] = retrieval(200 if args.quick else args.queries)
        for name, row in result["retrieval"]["dtypes"].items():
            print(f"{name:>48}: recall@10 {row['recall@10']:.3f} ({row['of_float32']:.3f} of float32), "
                  f"overlap@10 {row['overlap@10']:.3f}", file=sys.stderr)
    result["machine"]["load_average_end"] = os.getloadavg()
    if not args.no_write:
        (HERE / "results-quantized.json").write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
