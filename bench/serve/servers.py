#!/usr/bin/env python3
"""Which ASGI server runs ``densewire serve`` fastest: the same app under each candidate, side by side.

    .venv/bin/python bench/serve/servers.py                 # 5 interleaved rounds
    .venv/bin/python bench/serve/servers.py --rounds 2 --quick

Candidates (each one worker, uvloop where the server takes an event loop, no access log, the app of
``densewire serve --model hash:1024`` made by ``densewire._server.app:app_from_env``):

* ``uvicorn+httptools``: what ``densewire serve`` ran before issue 27 (``uvicorn[standard]``);
* ``uvicorn+densewire protocol``: the baseline's command with ``--http
  densewire._server.protocol:HTTPProtocol``, the one difference being the connection protocol chosen here;
* ``densewire serve``: the runner chosen here (uvicorn, its httptools protocol for HTTP/1.1 with the
  h2c upgrade offers answered as HTTP/1.1, zttp for HTTP/2 connections: densewire/_server/protocol.py),
  started as users start it; the same app and settings;
* ``uvicorn+h11``: the same server with the pure-Python h11 parser;
* ``uvicorn+zttp``: the same server with zttp (Zig HTTP/1.1 + HTTP/2 parser), ``--http zttp --http2``;
* ``granian``: Rust (hyper) HTTP/1.1 + HTTP/2, ``--interface asgi --http auto``;
* ``hypercorn``: h11 + h2, ``--worker-class uvloop``.

Workloads, all ``POST /v1/embeddings`` over HTTP/1.1 keep-alive from one aiohttp client, 10 in flight,
``Accept-Encoding: identity``, the same texts every time (after the warm-up they come from the
server's cache, so what is measured is parsing, serialization and transport):

* ``raw``: 256 texts x 1024 float32 answered ``application/octet-stream`` (1 MiB a body);
* ``base64``: the same as JSON with ``encoding_format: base64`` (1.4 MB a body);
* ``small``: 1 text, raw (4 KiB a body): the per-request cost.

Every round runs every (workload, server) pair once, the servers in a rotated order each round; the
table gives each pair's best and median round and its ratio to ``uvicorn+httptools``. Writes
bench/serve/results-servers.json unless --no-write.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any

import aiohttp

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench import free_port, stop, wait_http  # noqa: E402

PY = sys.executable
BIN = Path(PY).parent
APP = "densewire._server.app:app_from_env"
DIMS = 1024


def commands(port: int) -> dict[str, list[str]]:
    p = str(port)
    uv = [PY, "-m", "uvicorn", "--factory", APP, "--host", "127.0.0.1", "--port", p, "--loop", "uvloop",
          "--no-access-log", "--no-server-header", "--lifespan", "on", "--log-level", "warning"]
    return {
        "uvicorn+httptools": uv + ["--http", "httptools"],
        "uvicorn+densewire protocol": uv + ["--http", "densewire._server.protocol:HTTPProtocol"],
        "densewire serve": [PY, "-m", "densewire.server", "--host", "127.0.0.1", "--port", p],
        "uvicorn+h11": uv + ["--http", "h11"],
        "uvicorn+zttp": uv + ["--http", "zttp", "--http2"],
        "granian": [str(BIN / "granian"), "--interface", "asgi", "--factory", "--host", "127.0.0.1", "--port", p,
                    "--http", "auto", "--loop", "uvloop", "--no-ws", "--log-level", "warning", APP],
        "hypercorn": [str(BIN / "hypercorn"), "--worker-class", "uvloop", "--bind", f"127.0.0.1:{p}",
                      "--log-level", "warning", APP.replace("app_from_env", "app_from_env()")],
    }


def workloads(quick: bool) -> dict[str, tuple[bytes, dict[str, str], int, int]]:
    """name -> (body, headers, requests a round, vectors a request)."""
    texts = [f"benchmark text number {i} with a few words" for i in range(256)]
    n = 20 if quick else 1
    return {
        "raw": (json.dumps({"input": texts, "model": "hash-1024"}).encode(),
                {"Accept": "application/octet-stream"}, 100 // n, 256),
        "base64": (json.dumps({"input": texts, "model": "hash-1024", "encoding_format": "base64"}).encode(),
                   {"Accept": "application/json"}, 100 // n, 256),
        "small": (json.dumps({"input": texts[:1], "model": "hash-1024"}).encode(),
                  {"Accept": "application/octet-stream"}, 2000 // n, 1),
    }


async def drive(url: str, body: bytes, headers: dict[str, str], requests: int, concurrency: int = 10) -> tuple[float, int]:
    """(seconds for ``requests`` requests, body bytes of the last answer); every answer must be 200."""
    hdrs = {"Content-Type": "application/json", "Accept-Encoding": "identity", **headers}
    conn = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=conn) as session:
        sem = asyncio.Semaphore(concurrency)
        size = 0

        async def one() -> None:
            nonlocal size
            async with sem, session.post(url, data=body, headers=hdrs) as resp:
                data = await resp.read()
                if resp.status != 200:
                    raise RuntimeError(f"{url}: HTTP {resp.status}: {data[:200]!r}")
                size = len(data)

        await asyncio.gather(*(one() for _ in range(concurrency)))  # warm-up: connections and cache
        t0 = time.perf_counter()
        await asyncio.gather(*(one() for _ in range(requests)))
        return time.perf_counter() - t0, size


def cpu_seconds(root: int) -> float:
    """User + system CPU seconds of process ``root`` and its descendants (granian's and hypercorn's
    workers are child processes), from /proc: a figure that other jobs on the machine do not inflate."""
    parents: dict[int, int] = {}
    times: dict[int, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(entry)] = int(fields[1])
        times[int(entry)] = (int(fields[11]) + int(fields[12])) / tick
    tree, grew = {root}, True
    while grew:
        more = {pid for pid, parent in parents.items() if parent in tree} - tree
        tree |= more
        grew = bool(more)
    return sum(times.get(pid, 0.0) for pid in tree)


def machine() -> dict[str, Any]:
    lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    fields = dict(line.split(":", 1) for line in lscpu.splitlines() if ":" in line)
    flags = fields.get("Flags", "").split()
    return {
        "cpu": fields.get("Model name", "").strip(), "cores": os.cpu_count(),
        "simd": [f for f in ("avx2", "avx512f", "amx_tile") if f in flags],
        "load_average": os.getloadavg(), "python": platform.python_version(),
        "versions": {p: version(p) for p in ("uvicorn", "httptools", "h11", "uvloop", "zttp", "granian", "hypercorn",
                                             "h2", "starlette", "aiohttp", "orjson")},
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="a twentieth of the requests (smoke run)")
    ap.add_argument("--only", nargs="+", help="run only these servers (names as in the table)")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop the servers (finally) when stopped

    env = {**os.environ, "DENSEWIRE_MODEL": "hash:1024", "DENSEWIRE_LOG_LEVEL": "warning", "DENSEWIRE_DEMO_TABLES": "false",
           "PYTHONUNBUFFERED": "1"}
    names = list(commands(0))
    if args.only:
        names = [n for n in names if n in args.only]
    procs: dict[str, tuple[subprocess.Popen, str]] = {}
    logs = tempfile.TemporaryDirectory()
    try:
        for name in names:
            port = free_port()
            log = open(Path(logs.name) / f"{name}.log", "wb")  # noqa: SIM115
            proc = subprocess.Popen(commands(port)[name], env=env, stdout=log, stderr=subprocess.STDOUT)
            procs[name] = (proc, f"http://127.0.0.1:{port}")
        for name, (proc, base) in procs.items():
            wait_http(base + "/health", proc)
        info = machine()
        print(f"{info['cpu']}, {info['cores']} cores, load {info['load_average']}")
        loads = workloads(args.quick)
        results: dict[str, dict[str, list[float]]] = {w: {n: [] for n in names} for w in loads}
        cpu: dict[str, dict[str, list[float]]] = {w: {n: [] for n in names} for w in loads}
        sizes: dict[str, int] = {}
        for r in range(args.rounds):
            order = names[r % len(names):] + names[:r % len(names)]
            for wname, (body, headers, requests, vectors) in loads.items():
                for name in order:
                    proc, base = procs[name]
                    before = cpu_seconds(proc.pid)
                    secs, size = asyncio.run(drive(base + "/v1/embeddings", body, headers, requests))
                    used = cpu_seconds(proc.pid) - before  # includes the 10 warm-up requests
                    sizes[wname] = size
                    results[wname][name].append(requests * vectors / secs)
                    cpu[wname][name].append(used * 1e3 / (requests + 10))
            print(f"round {r + 1}/{args.rounds} done")
    finally:
        for proc, _ in procs.values():
            stop(proc)

    rows = []
    for wname, per in results.items():
        base_best = max(per[names[0]])
        base_median = statistics.median(per[names[0]])
        base_cpu = statistics.median(cpu[wname][names[0]])
        for name in names:
            best, median = max(per[name]), statistics.median(per[name])
            cpu_median = statistics.median(cpu[wname][name])
            rows.append({"workload": wname, "server": name, "best": best, "median": median,
                         "best_ratio": best / base_best, "median_ratio": median / base_median,
                         "cpu_ms_per_request": cpu_median, "cpu_ratio": cpu_median / base_cpu,
                         "body_bytes": sizes[wname], "rounds": per[name], "cpu_rounds": cpu[wname][name]})
    print(f"\n| workload | server | best vectors/s | median vectors/s | best x {names[0]} | median x {names[0]} "
          f"| server CPU ms/request (median) | CPU x {names[0]} |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        print(f"| {row['workload']} ({row['body_bytes']:,} B) | {row['server']} | {row['best']:,.0f} | "
              f"{row['median']:,.0f} | {row['best_ratio']:.2f} | {row['median_ratio']:.2f} | "
              f"{row['cpu_ms_per_request']:.3f} | {row['cpu_ratio']:.2f} |")
    print(f"\nload average at the end: {os.getloadavg()}")
    if not args.no_write:
        out = {"machine": info, "rounds": args.rounds, "results": rows, "load_average_end": os.getloadavg()}
        (HERE / "results-servers.json").write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
