"""gRPC beside HTTP on one `densewire serve --model hash:DIM --grpc-port` (issue 33 item 6, the gRPC part):

* throughput: N texts a request (default 1,000 x 1,536 float32), rows/s of `tritonclient.grpc` ModelInfer
  (raw_input_contents / raw_output_contents, the vectors read by `as_numpy`) against densewire's own raw
  `POST /v1/embeddings` (Accept: application/octet-stream, read by `np.frombuffer`) through a kept-alive
  httpx client; the target is gRPC >= 0.8x the raw HTTP path's rows/s;
* latency: one sentence a request, p50 and p99 over gRPC and over HTTP (the same clients).

Contenders alternate round by round (interleaved, so a shared machine's load falls on both); best and
median rounds are reported, with the load average before and after, `densewire._bench.machine_info` and
the OPENBLAS_* variables. Each request has new texts (no cache hit: the cache would measure nothing).

    .venv/bin/python bench/kserve/grpc_bench.py [--rows 1000] [--dim 1536] [--rounds 7] [--latency 300]

writes bench/kserve/RESULTS-grpc.md and results-grpc.json.
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

import httpx
import numpy as np
import tritonclient.grpc as tg

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO / "python" / "src"))

from densewire._backends import cpu_features, cpu_flags  # noqa: E402
from densewire._bench import machine_info  # noqa: E402

_serial = count()


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _texts(n: int) -> list[str]:
    k = next(_serial)
    return [f"round {k} text {i} of the benchmark" for i in range(n)]


def _grpc_infer(client: tg.InferenceServerClient, model: str, texts: list[str]) -> np.ndarray:
    inp = tg.InferInput("text", [len(texts)], "BYTES")
    inp.set_data_from_numpy(np.array([t.encode() for t in texts], dtype=object))
    return client.infer(model, [inp]).as_numpy("embedding")


def _http_raw(http: httpx.Client, texts: list[str], dim: int) -> np.ndarray:
    r = http.post("/v1/embeddings", json={"input": texts}, headers={"Accept": "application/octet-stream"})
    r.raise_for_status()
    return np.frombuffer(r.content, dtype="<f4").reshape(len(texts), dim)


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1000)
    ap.add_argument("--dim", type=int, default=1536)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--latency", type=int, default=300, help="one-sentence requests per contender")
    args = ap.parse_args()
    http_port, grpc_port = _port(), _port()
    env = {**os.environ, "PYTHONPATH": str(REPO / "python" / "src")}
    cmd = [sys.executable, "-m", "densewire.server", "--model", f"hash:{args.dim}", "--port", str(http_port),
           "--grpc-port", str(grpc_port), "--no-demo-tables", "--cache-bytes", "0",
           "--max-client-batch-size", str(max(args.rows, 2048)), "--max-body-bytes", "64M", "--log-level", "warning"]
    server = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{http_port}"
        for _ in range(300):
            try:
                if httpx.get(url + "/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        model = httpx.get(url + "/v1/models").json()["data"][0]["id"]
        client = tg.InferenceServerClient(f"127.0.0.1:{grpc_port}")
        http = httpx.Client(base_url=url, timeout=120)
        same = _grpc_infer(client, model, ["same text"]).tobytes() == _http_raw(http, ["same text"], args.dim).tobytes()
        load_before = _load()
        contenders = {"grpc_raw_contents": lambda t: _grpc_infer(client, model, t),
                      "http_raw_v1_embeddings": lambda t: _http_raw(http, t, args.dim)}
        for fn in contenders.values():  # warm-up
            fn(_texts(args.rows))
        rates: dict[str, list[float]] = {k: [] for k in contenders}
        for _ in range(args.rounds):
            for name, fn in contenders.items():
                texts = _texts(args.rows)
                t0 = time.perf_counter()
                out = fn(texts)
                rates[name].append(len(texts) / (time.perf_counter() - t0))
                assert out.shape == (args.rows, args.dim)
        lat: dict[str, list[float]] = {k: [] for k in contenders}
        for _ in range(args.latency):
            for name, fn in contenders.items():
                texts = _texts(1)
                t0 = time.perf_counter()
                fn(texts)
                lat[name].append((time.perf_counter() - t0) * 1000)
        load_after = _load()
        client.close()
        http.close()
    finally:
        server.terminate()
        server.wait(30)

    def pct(xs: list[float], p: float) -> float:
        return float(np.percentile(xs, p))

    doc = {
        "command": "bench/kserve/grpc_bench.py " + " ".join(sys.argv[1:]),
        "rows": args.rows, "dim": args.dim, "rounds": args.rounds, "latency_requests": args.latency,
        "same_vectors": same, "load_before": load_before, "load_after": load_after,
        "machine": {**machine_info(("densewire", "numpy", "grpcio", "protobuf", "tritonclient", "httpx", "uvicorn")),
                    "cpu_features": list(cpu_features(cpu_flags()))},
        "openblas": {k: v for k, v in os.environ.items() if k.startswith("OPENBLAS")},
        "rows_per_s": {k: {"best": max(v), "median": statistics.median(v), "all": v} for k, v in rates.items()},
        "latency_ms": {k: {"p50": pct(v, 50), "p99": pct(v, 99)} for k, v in lat.items()},
    }
    g, h = doc["rows_per_s"]["grpc_raw_contents"], doc["rows_per_s"]["http_raw_v1_embeddings"]
    doc["ratio_grpc_vs_http"] = {"best": g["best"] / h["best"], "median": g["median"] / h["median"]}
    (HERE / "results-grpc.json").write_text(json.dumps(doc, indent=2) + "\n")
    m = doc["machine"]
    lines = [
        "# gRPC vs HTTP on one densewire serve (issue 33 item 6, gRPC part)", "",
        f"`{doc['command']}` (writes this file and results-grpc.json); server `--model hash:{args.dim} --grpc-port`,",
        "no cache; clients tritonclient.grpc (raw contents) and httpx (raw `/v1/embeddings`), rounds interleaved.",
        f"Vectors over both bit for bit equal: {same}.", "",
        f"Machine: {m['cpu']} ({', '.join(m['cpu_features'])}), {m['cores']} cores, Python {m['python']}; grpcio {m['grpcio']}, protobuf "
        f"{m['protobuf']}, tritonclient {m['tritonclient']}, httpx {m['httpx']}, uvicorn {m['uvicorn']}; "
        f"OPENBLAS_*: {doc['openblas'] or 'none'}.",
        f"Load average (1, 5, 15 min) before: {load_before}; after: {load_after} "
        "(a shared machine: rerun on an idle one for the record).", "",
        f"## Throughput: {args.rows:,} x {args.dim:,} float32 a request, {args.rounds} rounds", "",
        "| path | best rows/s | median rows/s |", "|---|---:|---:|",
        f"| gRPC ModelInfer, raw contents | {g['best']:,.0f} | {g['median']:,.0f} |",
        f"| HTTP raw /v1/embeddings | {h['best']:,.0f} | {h['median']:,.0f} |",
        f"| **gRPC / HTTP** | **{doc['ratio_grpc_vs_http']['best']:.2f}x** | "
        f"**{doc['ratio_grpc_vs_http']['median']:.2f}x** |", "",
        "Target: gRPC >= 0.8x the raw HTTP path.", "",
        f"## Latency: one sentence a request, {args.latency} requests each", "",
        "| path | p50 ms | p99 ms |", "|---|---:|---:|",
        *(f"| {k} | {v['p50']:.2f} | {v['p99']:.2f} |" for k, v in doc["latency_ms"].items()), "",
    ]
    (HERE / "RESULTS-grpc.md").write_text("\n".join(lines))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
