#!/usr/bin/env python3
"""Transport benchmark of ``densewire serve`` against the usual FastAPI endpoints, in one run.

    .venv/bin/python bench/serve/bench.py                  # the published workload
    .venv/bin/python bench/serve/bench.py --model-bench    # also the real model end to end
    .venv/bin/python bench/serve/bench.py --quick          # 20 requests, for a smoke run

Workload: REQUESTS requests of BATCH texts x DIMS float32, CONCURRENCY at a time, one aiohttp client
for every target. densewire serve runs the ``hash`` backend and gets the same BATCH texts in every
request (after a warm-up they come from its cache), the FastAPI endpoints return a fixed matrix:
what is measured is request parsing, serialization and the transfer. The physical reference is a
plain loopback TCP copy between two processes, measured in the same run.

Prints a table and writes bench/serve/results.json (machine-readable) unless --no-write.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np
import orjson

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
PY = sys.executable


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url: str, proc: subprocess.Popen, timeout: float = 180) -> None:
    import urllib.request

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{url}: process exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=1) as r:
                if r.status < 500:
                    return
        except Exception:  # noqa: BLE001
            time.sleep(0.1)
    raise RuntimeError(f"{url} not up within {timeout} s")


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# -- loopback reference ------------------------------------------------------------------------------
_SENDER = r"""
import socket, sys
port, total, chunk = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
buf = memoryview(bytearray(chunk))
s = socket.create_connection(("127.0.0.1", port))
sent = 0
while sent < total:
    n = min(chunk, total - sent)
    s.sendall(buf[:n])
    sent += n
s.close()
"""


def loopback_bytes_per_s(total: int = 2 << 30, chunk: int = 1 << 20) -> float:
    """Bytes/s of a plain TCP copy over loopback from another process (sendall -> recv_into)."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port = srv.getsockname()[1]
    proc = subprocess.Popen([PY, "-c", _SENDER, str(port), str(total), str(chunk)])
    conn, _ = srv.accept()
    buf = bytearray(chunk)
    view = memoryview(buf)
    got = 0
    t0 = time.perf_counter()
    while True:
        n = conn.recv_into(view)
        if not n:
            break
        got += n
    elapsed = time.perf_counter() - t0
    conn.close()
    srv.close()
    proc.wait()
    assert got == total, (got, total)
    return got / elapsed


# -- load generator ----------------------------------------------------------------------------------
async def drive(url: str, body: bytes, headers: dict[str, str], requests: int, concurrency: int,
                warmup: int = 3) -> dict[str, Any]:
    conn = aiohttp.TCPConnector(limit=concurrency, force_close=False)
    timeout = aiohttp.ClientTimeout(total=600)
    hdrs = {"Content-Type": "application/json", "Accept-Encoding": "identity", **headers}
    async with aiohttp.ClientSession(connector=conn, timeout=timeout, auto_decompress=False) as session:
        async def one() -> tuple[float, int, bytes, dict[str, str]]:
            t0 = time.perf_counter()
            async with session.post(url, data=body, headers=hdrs) as resp:
                data = await resp.read()
                if resp.status != 200:
                    raise RuntimeError(f"{url}: {resp.status} {data[:300]!r}")
                return time.perf_counter() - t0, len(data), data, dict(resp.headers)

        last = None
        for _ in range(warmup):
            last = await one()
        sem = asyncio.Semaphore(concurrency)

        async def limited() -> tuple[float, int]:
            async with sem:
                lat, size, _, _ = await one()
                return lat, size

        t0 = time.perf_counter()
        results = await asyncio.gather(*(limited() for _ in range(requests)))
        elapsed = time.perf_counter() - t0
    lats = sorted(r[0] for r in results)
    total_bytes = sum(r[1] for r in results)
    assert last is not None
    return {
        "elapsed_s": elapsed,
        "bytes": total_bytes,
        "body_bytes": last[1],
        "p50_ms": 1000 * lats[len(lats) // 2],
        "p99_ms": 1000 * lats[min(len(lats) - 1, int(round(0.99 * (len(lats) - 1))))],
        "sample": (last[2], last[3]),
    }


def verify(sample: tuple[bytes, dict[str, str]], fmt: str | None, want: tuple[int, int]) -> None:
    """The last response decodes to a (batch, dims) matrix (outside the timed part)."""
    body, headers = sample
    if fmt is None:  # FastAPI baselines
        if headers.get("Content-Type", "").startswith("application/json"):
            doc = orjson.loads(body)
            arr = np.array([d["embedding"] for d in doc["data"]], dtype=np.float32)
        else:
            arr = np.frombuffer(body, dtype="<f4").reshape(want)
    else:
        import densewire

        arr = densewire.decode(body, fmt, headers).tensor.array
    assert arr.shape == want, (arr.shape, want)


# -- main --------------------------------------------------------------------------------------------
def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=100)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--dims", type=int, default=1024)
    ap.add_argument("--concurrency", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=1,
                    help="run every target this many times, interleaved; keep each one's best round")
    ap.add_argument("--quick", action="store_true", help="20 requests (smoke run)")
    ap.add_argument("--model-bench", action="store_true", help="also the default model end to end")
    ap.add_argument("--blas-threads", type=int, default=1,
                    help="--blas-threads of the model server (default 1: this machine is shared)")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    if args.quick:
        args.requests = 20

    load_start = os.getloadavg()
    texts = [f"benchmark sentence number {i} about moving embeddings" for i in range(args.batch)]
    env = {**os.environ, "PYTHONPATH": str(REPO / "python" / "src"), "BENCH_N": str(args.batch),
           "BENCH_D": str(args.dims)}
    tmp = Path(tempfile.mkdtemp(prefix="dw-bench-"))
    procs: list[subprocess.Popen] = []
    rows: list[dict[str, Any]] = []
    try:
        print("loopback socket copy ...", flush=True)
        loop_bps = max(loopback_bytes_per_s() for _ in range(2))
        print(f"  {loop_bps / 1e6:,.0f} MB/s", flush=True)

        bport = free_port()
        baseline = subprocess.Popen(
            [PY, "-m", "uvicorn", "--app-dir", str(HERE), "baseline_app:app", "--host", "127.0.0.1", "--port",
             str(bport), "--log-level", "warning", "--no-access-log", "--timeout-keep-alive", "120"],
            env=env, stdout=open(tmp / "baseline.log", "wb"), stderr=subprocess.STDOUT)
        procs.append(baseline)
        dport = free_port()
        dw = subprocess.Popen(
            [PY, "-m", "densewire.server", "--host", "127.0.0.1", "--port", str(dport), "--model",
             f"hash:{args.dims}", "--no-demo-tables", "--log-level", "warning", "--timeout-keep-alive", "120"],
            env=env, stdout=open(tmp / "densewire.log", "wb"), stderr=subprocess.STDOUT)
        procs.append(dw)
        wait_http(f"http://127.0.0.1:{bport}/docs", baseline)
        wait_http(f"http://127.0.0.1:{dport}/health", dw)

        plain = orjson.dumps({"input": texts, "model": "baseline"})
        targets: list[tuple[str, str, bytes, dict[str, str], str | None]] = [
            ("FastAPI .tolist() + standard JSON", f"http://127.0.0.1:{bport}/json/v1/embeddings", plain, {}, None),
            ("FastAPI .tolist() + ORJSONResponse", f"http://127.0.0.1:{bport}/orjson/v1/embeddings", plain, {}, None),
            ("FastAPI raw bytes Response", f"http://127.0.0.1:{bport}/raw/v1/embeddings", plain, {}, None),
        ]
        durl = f"http://127.0.0.1:{dport}/v1/embeddings"
        for label, enc, accept, fmt in (
            ("densewire JSON, float", "float", "application/json", "json"),
            ("densewire JSON, Base64", "base64", "application/json", "json"),
            ("densewire raw", "base64", "application/octet-stream", "raw"),
            ("densewire MessagePack", "base64", "application/vnd.msgpack", "msgpack"),
            ("densewire Protobuf", "base64", "application/protobuf", "protobuf"),
            ("densewire Arrow", "base64", "application/vnd.apache.arrow.stream", "arrow"),
        ):
            body = orjson.dumps({"input": texts, "encoding_format": enc})
            targets.append((label, durl, body, {"Accept": accept}, fmt))

        best: dict[str, dict[str, Any]] = {}
        for rnd in range(args.rounds):
            for label, url, body, headers, fmt in targets:
                print(f"[round {rnd + 1}] {label} ...", flush=True)
                r = asyncio.run(drive(url, body, headers, args.requests, args.concurrency))
                verify(r.pop("sample"), fmt, (args.batch, args.dims))
                r["label"] = label
                r["vectors_per_s"] = args.requests * args.batch / r["elapsed_s"]
                r["mb_per_s"] = r["bytes"] / r["elapsed_s"] / 1e6
                print(f"  {r['vectors_per_s']:>12,.0f} vectors/s {r['mb_per_s']:>9,.1f} MB/s "
                      f"p50 {r['p50_ms']:.1f} ms p99 {r['p99_ms']:.1f} ms  body {r['body_bytes']:,} B", flush=True)
                if label not in best or r["vectors_per_s"] > best[label]["vectors_per_s"]:
                    best[label] = r
        rows = [best[t[0]] for t in targets]
        loop_bps = max(loop_bps, loopback_bytes_per_s())  # once more after the HTTP runs
    finally:
        for p in procs:
            stop(p)

    std = rows[0]["vectors_per_s"]
    orj = rows[1]["vectors_per_s"]
    print()
    print(f"| target | vectors/s | MB/s | p50 ms | p99 ms | body bytes | x standard JSON | x ORJSON |")
    print(f"|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['label']} | {r['vectors_per_s']:,.0f} | {r['mb_per_s']:,.1f} | {r['p50_ms']:.1f} | "
              f"{r['p99_ms']:.1f} | {r['body_bytes']:,} | {r['vectors_per_s'] / std:.1f} | "
              f"{r['vectors_per_s'] / orj:.2f} |")
    print(f"| loopback socket copy (2 processes) | | {loop_bps / 1e6:,.0f} | | | | | |")
    top = max(rows[3:], key=lambda r: r["mb_per_s"])
    print(f"\nbest densewire format: {top['label']}, {top['mb_per_s'] / (loop_bps / 1e6):.0%} of the loopback copy")

    model_rows: list[dict[str, Any]] = []
    if args.model_bench:
        model_rows = model_bench(env, tmp, args.blas_threads)

    if not args.no_write:
        out = {
            "workload": {"requests": args.requests, "batch": args.batch, "dims": args.dims,
                         "concurrency": args.concurrency, "rounds": args.rounds},
            "machine": {**machine(), "loadavg_start": load_start},
            "loopback_bytes_per_s": loop_bps,
            "rows": rows,
            "model": model_rows,
        }
        (HERE / "results.json").write_text(json.dumps(out, indent=1) + "\n")
        print(f"wrote {HERE / 'results.json'}")
    return 0


def model_bench(env: dict[str, str], tmp: Path, blas_threads: int) -> list[dict[str, Any]]:
    """The default model (all-MiniLM-L6-v2, numpy) end to end, cache off: sentences/s."""
    port = free_port()
    proc = subprocess.Popen(
        [PY, "-m", "densewire.server", "--host", "127.0.0.1", "--port", str(port), "--cache-bytes", "0",
         "--no-demo-tables", "--log-level", "warning", "--timeout-keep-alive", "120", "--blas-threads", str(blas_threads)],
        env=env, stdout=open(tmp / "minilm.log", "wb"), stderr=subprocess.STDOUT)
    out = []
    try:
        wait_http(f"http://127.0.0.1:{port}/health", proc)
        url = f"http://127.0.0.1:{port}/v1/embeddings"
        words = "the quick brown fox jumps over the lazy dog while embeddings move between services".split()
        rng = np.random.default_rng(1)

        def sentences(k: int, salt: str) -> list[str]:
            return [f"{salt} {i}: " + " ".join(rng.choice(words, 12)) for i in range(k)]

        for batch, requests, conc in ((1, 64, 8), (32, 8, 2)):
            async def run() -> dict[str, Any]:
                conn = aiohttp.TCPConnector(limit=conc)
                async with aiohttp.ClientSession(connector=conn) as session:
                    async def one(i: int) -> float:
                        body = orjson.dumps({"input": sentences(batch, f"b{batch}r{i}"),
                                             "encoding_format": "base64"})
                        t0 = time.perf_counter()
                        async with session.post(url, data=body, headers={"Content-Type": "application/json"}) as r:
                            await r.read()
                            assert r.status == 200
                        return time.perf_counter() - t0

                    await one(-1)
                    sem = asyncio.Semaphore(conc)

                    async def limited(i: int) -> float:
                        async with sem:
                            return await one(i)

                    t0 = time.perf_counter()
                    lats = await asyncio.gather(*(limited(i) for i in range(requests)))
                    elapsed = time.perf_counter() - t0
                return {"batch": batch, "requests": requests, "concurrency": conc, "blas_threads": blas_threads,
                        "sentences_per_s": batch * requests / elapsed, "p50_ms": 1000 * statistics.median(lats)}

            r = asyncio.run(run())
            out.append(r)
            print(f"minilm batch {batch:>2} (concurrency {conc}): {r['sentences_per_s']:,.1f} sentences/s, "
                  f"p50 {r['p50_ms']:.0f} ms", flush=True)
    finally:
        stop(proc)
    return out


def machine() -> dict[str, Any]:
    info: dict[str, Any] = {"python": platform.python_version(), "cores": os.cpu_count()}
    try:
        lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        for line in lscpu.splitlines():
            if line.startswith("Model name:"):
                info["cpu"] = line.split(":", 1)[1].strip()
    except OSError:
        pass
    try:
        info["loadavg"] = os.getloadavg()
    except OSError:
        pass
    import importlib.metadata as md

    for pkg in ("uvicorn", "starlette", "fastapi", "aiohttp", "orjson", "numpy", "uvloop", "httptools"):
        try:
            info[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            pass
    return info


if __name__ == "__main__":
    raise SystemExit(main())
