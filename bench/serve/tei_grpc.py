"""TEI's gRPC EmbedSparse/EmbedAll beside TEI's HTTP routes on one `densewire serve --grpc-port` (issues 32/33):

* sparse (``--model hash:384``: vocabulary 30,522): N texts a round as ``EmbedSparseStream`` (one message a
  text on one stream, TEI's way to send many over gRPC) against ``POST /embed_sparse`` with the N texts in
  TEI's JSON (``[[{"index", "value"}, ...], ...]``, read by orjson) and in densewire's raw sparse tensor;
* per-token (the built-in MiniLM): the same with ``EmbedAllStream`` and ``POST /embed_all`` (JSON floats,
  and the raw ragged tensor), fewer texts (the model's time is most of it).

Contenders alternate round by round (interleaved, so a shared machine's load falls on all); best and
median rounds are reported as texts/s and as ratios to TEI's HTTP JSON, with the load average before and
after, ``densewire._bench.machine_info`` and the OPENBLAS_* variables. Each round has new texts and the
server no cache (a cache hit would measure nothing). The answers of the three paths are checked equal
bit for bit first.

    .venv/bin/python bench/serve/tei_grpc.py [--sparse-texts 256] [--token-texts 16] [--rounds 5]

writes bench/serve/RESULTS-tei-grpc.md and results-tei-grpc.json.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from itertools import count
from pathlib import Path

import grpc
import httpx
import numpy as np
import orjson

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO / "python" / "src"))

import densewire  # noqa: E402
from densewire._backends import cpu_features, cpu_flags  # noqa: E402
from densewire._bench import machine_info  # noqa: E402
from densewire._server.grpcpb import tei_pb2 as pb  # noqa: E402

_serial = count()
RAW = densewire.MEDIA_TYPES["raw"]


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _texts(n: int, words: int) -> list[str]:
    k = next(_serial)
    return [" ".join(f"r{k}-t{i}-w{j}" if j % 3 else f"word{j}" for j in range(words)) for i in range(n)]


def _serve(*args: str) -> tuple[subprocess.Popen, str, grpc.Channel]:
    http_port, grpc_port = _port(), _port()
    env = {**os.environ, "PYTHONPATH": str(REPO / "python" / "src")}
    cmd = [sys.executable, "-m", "densewire.server", *args, "--port", str(http_port), "--grpc-port", str(grpc_port),
           "--no-demo-tables", "--cache-bytes", "0", "--log-level", "warning"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{http_port}"
    for _ in range(600):
        try:
            if httpx.get(url + "/ready", timeout=1).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    return proc, url, grpc.insecure_channel(f"127.0.0.1:{grpc_port}")


def _sparse_contenders(http: httpx.Client, channel: grpc.Channel) -> dict:
    stream = channel.stream_stream("/tei.v1.Embed/EmbedSparseStream", pb.EmbedSparseRequest.SerializeToString,
                                   pb.EmbedSparseResponse.FromString)

    def grpc_stream(texts):
        return [([v.index for v in a.sparse_embeddings], np.array([v.value for v in a.sparse_embeddings], "<f4"))
                for a in stream(iter([pb.EmbedSparseRequest(inputs=t) for t in texts]))]

    def http_json(texts):
        doc = orjson.loads(http.post("/embed_sparse", json={"inputs": texts}).content)
        return [([e["index"] for e in v], np.array([e["value"] for e in v], "<f4")) for v in doc]

    def http_raw(texts):
        r = http.post("/embed_sparse", json={"inputs": texts}, headers={"Accept": RAW})
        s = densewire.decode(r.content, "raw", r.headers, kind="sparse").tensor
        return [(s[i][0].tolist(), s[i][1]) for i in range(s.n)]

    return {"grpc_EmbedSparseStream": grpc_stream, "http_embed_sparse_json": http_json,
            "http_embed_sparse_raw": http_raw}


def _token_contenders(http: httpx.Client, channel: grpc.Channel) -> dict:
    stream = channel.stream_stream("/tei.v1.Embed/EmbedAllStream", pb.EmbedAllRequest.SerializeToString,
                                   pb.EmbedAllResponse.FromString)

    def grpc_stream(texts):
        return [np.array([list(t.embeddings) for t in a.token_embeddings], "<f4")
                for a in stream(iter([pb.EmbedAllRequest(inputs=t) for t in texts]))]

    def http_json(texts):
        return [np.array(m, "<f4") for m in orjson.loads(http.post("/embed_all", json={"inputs": texts}).content)]

    def http_raw(texts):
        r = http.post("/embed_all", json={"inputs": texts}, headers={"Accept": RAW})
        return list(densewire.decode(r.content, "raw", r.headers, kind="ragged").tensor)

    return {"grpc_EmbedAllStream": grpc_stream, "http_embed_all_json": http_json, "http_embed_all_raw": http_raw}


def _same(a, b) -> bool:
    if isinstance(a[0], tuple):
        return all(x[0] == y[0] and np.asarray(x[1], "<f4").tobytes() == np.asarray(y[1], "<f4").tobytes()
                   for x, y in zip(a, b)) and len(a) == len(b)
    return len(a) == len(b) and all(np.ascontiguousarray(x, "<f4").tobytes() == np.ascontiguousarray(y, "<f4").tobytes()
                                    for x, y in zip(a, b))


def _run(contenders: dict, n: int, words: int, rounds: int) -> tuple[bool, dict]:
    probe = _texts(4, words)
    answers = [fn(probe) for fn in contenders.values()]
    same = all(_same(answers[0], other) for other in answers[1:])
    for fn in contenders.values():  # warm-up
        fn(_texts(n, words))
    rates: dict[str, list[float]] = {k: [] for k in contenders}
    for _ in range(rounds):
        for name, fn in contenders.items():
            texts = _texts(n, words)
            t0 = time.perf_counter()
            out = fn(texts)
            rates[name].append(len(texts) / (time.perf_counter() - t0))
            assert len(out) == n
    return same, {k: {"best": max(v), "median": statistics.median(v), "all": v} for k, v in rates.items()}


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sparse-texts", type=int, default=256)
    ap.add_argument("--sparse-words", type=int, default=60)
    ap.add_argument("--token-texts", type=int, default=16)
    ap.add_argument("--token-words", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    load_before = _load()
    results = {}
    for kind, flags, make, n, words in (
            ("sparse", ("--model", "hash:384"), _sparse_contenders, args.sparse_texts, args.sparse_words),
            ("per_token", ("--blas-threads", "1"), _token_contenders, args.token_texts, args.token_words)):
        proc, url, channel = _serve(*flags)
        try:
            with httpx.Client(base_url=url, timeout=300) as http:
                same, rates = _run(make(http, channel), n, words, args.rounds)
        finally:
            channel.close()
            proc.terminate()
            proc.wait(30)
        json_name = next(k for k in rates if k.endswith("_json"))
        ratios = {k: {"best": v["best"] / rates[json_name]["best"], "median": v["median"] / rates[json_name]["median"]}
                  for k, v in rates.items()}
        results[kind] = {"texts": n, "words": words, "flags": list(flags), "same_answers": same,
                         "texts_per_s": rates, "ratio_to_http_json": ratios}
    load_after = _load()
    doc = {"command": "bench/serve/tei_grpc.py " + " ".join(sys.argv[1:]), "rounds": args.rounds,
           "load_before": load_before, "load_after": load_after,
           "machine": {**machine_info(("densewire", "numpy", "grpcio", "protobuf", "httpx", "orjson", "uvicorn")),
                       "cpu_features": list(cpu_features(cpu_flags()))},
           "openblas": {k: v for k, v in os.environ.items() if k.startswith("OPENBLAS")}, "results": results}
    (HERE / "results-tei-grpc.json").write_text(json.dumps(doc, indent=2) + "\n")
    m = doc["machine"]
    lines = ["# TEI's gRPC EmbedSparse / EmbedAll beside TEI's HTTP routes (issues 32/33)", "",
             f"`{doc['command']}` (writes this file and results-tei-grpc.json); one server a kind, `--cache-bytes 0`, "
             f"new texts every round, {args.rounds} rounds, contenders interleaved.", "",
             f"Machine: {m['cpu']} ({', '.join(m['cpu_features'])}), {m['cores']} cores, Python {m['python']}; grpcio "
             f"{m['grpcio']}, protobuf {m['protobuf']}, httpx {m['httpx']}, orjson {m['orjson']}, uvicorn {m['uvicorn']}; "
             f"OPENBLAS_*: {doc['openblas'] or 'none'}.",
             f"Load average (1, 5, 15 min) before: {load_before}; after: {load_after} "
             "(a shared machine: rerun on an idle one for the record).", ""]
    for kind, r in results.items():
        lines += [f"## {kind}: {r['texts']} texts of {r['words']} words a round, server `{' '.join(r['flags'])}`", "",
                  f"Answers of the three paths bit for bit equal: {r['same_answers']}.", "",
                  "| path | best texts/s | median texts/s | best / HTTP JSON | median / HTTP JSON |",
                  "|---|---:|---:|---:|---:|"]
        for k, v in r["texts_per_s"].items():
            q = r["ratio_to_http_json"][k]
            lines.append(f"| {k} | {v['best']:,.0f} | {v['median']:,.0f} | {q['best']:.2f}x | {q['median']:.2f}x |")
        lines.append("")
    (HERE / "RESULTS-tei-grpc.md").write_text("\n".join(lines))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
