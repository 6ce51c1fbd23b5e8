#!/usr/bin/env python3
"""Python embeddings clients side by side against one ``densewire serve`` on loopback: requests/s and
client CPU per request of densewire.AsyncClient, the sync densewire.Client, plain aiohttp + numpy
.frombuffer, httpx + numpy.frombuffer and the openai SDK (as users call it, and with
``encoding_format="base64"`` + ``densewire.from_openai``), 8 requests in flight, small (8 x 384) and
large (256 x 1024) responses, in interleaved rounds (the order rotates each round).

The server is ``densewire serve --model hash:1024`` (one process; small requests ask for
``dimensions: 384``). Client CPU is this process's user + system time (all threads) over the run (the server is
another process), divided by the requests.

    .venv/bin/python bench/python/client.py          # writes bench/python/RESULTS-client.md
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import importlib.metadata as md
import os
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

import densewire
from densewire._bench import machine_info

HERE = Path(__file__).resolve().parent
TRANSPORT_NOTE = ("The transport: densewire's clients run on aiohttp itself (its C HTTP parser, one keep-alive pool per client), reading each body into one preallocated buffer that the decoded array views; the sync Client runs the same async core on a private event-loop thread. httpx, measured above, costs 4-5x the CPU; a hand-written asyncio protocol over httptools was not built, since aiohttp already sits within the targets and is a maintained library.")
REPO = HERE.parents[1]
RAW = {"Accept": "application/octet-stream", "Accept-Encoding": "identity", "Content-Type": "application/json"}


def start_server(port: int) -> subprocess.Popen:
    env = {**os.environ, "DENSEWIRE_DEMO_TABLES": "false"}
    proc = subprocess.Popen([sys.executable, "-m", "densewire", "serve", "--model", "hash:1024", "--port", str(port),
                             "--no-access-log", "--log-level", "warning"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    import httpx

    for _ in range(600):
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit("the server did not start")


def body_of(texts, dims):
    import orjson

    doc = {"input": texts, "encoding_format": "base64"}
    if dims:
        doc["dimensions"] = dims
    return orjson.dumps(doc)


SETTINGS = {"max_seconds": 4.0}  # a measurement stops taking new requests after this (the openai SDK is slow)


async def run_async(n_requests: int, inflight: int, call) -> int:
    left, deadline = [n_requests], time.perf_counter() + SETTINGS["max_seconds"]

    async def worker():
        while left[0] > 0 and time.perf_counter() < deadline:
            left[0] -= 1
            await call()

    await asyncio.gather(*(worker() for _ in range(inflight)))
    return n_requests - left[0]


def client_factories(url: str, texts: list[str], dims: int | None, n: int, d: int):
    """name -> (setup() -> state, run(state, requests), teardown(state)); each run checks its shape."""
    import aiohttp
    import httpx
    import openai

    def check(a):
        assert a.shape == (n, d), a.shape

    def dw_async():
        loop = asyncio.new_event_loop()
        client = densewire.AsyncClient(url)

        async def call():
            check(await client.embed(texts, dimensions=dims))

        return (lambda k: loop.run_until_complete(run_async(k, 8, call)),
                lambda: (loop.run_until_complete(client.aclose()), loop.close()))

    def dw_sync():
        client = densewire.Client(url)
        pool = ThreadPoolExecutor(8)

        def run(k):
            left, deadline, lock = [k], time.perf_counter() + SETTINGS["max_seconds"], threading.Lock()

            def worker():
                while True:
                    with lock:
                        if left[0] <= 0 or time.perf_counter() >= deadline:
                            return
                        left[0] -= 1
                    check(client.embed(texts, dimensions=dims))

            list(pool.map(lambda _i: worker(), range(8)))
            return k - left[0]

        return run, lambda: (client.close(), pool.shutdown())

    def plain_aiohttp():
        loop = asyncio.new_event_loop()
        session = loop.run_until_complete(_make_session(aiohttp))
        u = f"{url}/v1/embeddings"

        async def call():
            async with session.post(u, data=body_of(texts, dims), headers=RAW) as resp:
                data = await resp.read()
                check(np.frombuffer(data, np.float32).reshape(int(resp.headers["Densewire-Shape"].split(",")[0]), -1))

        return (lambda k: loop.run_until_complete(run_async(k, 8, call)),
                lambda: (loop.run_until_complete(session.close()), loop.close()))

    def plain_httpx():
        loop = asyncio.new_event_loop()
        client = httpx.AsyncClient(limits=httpx.Limits(max_connections=64))
        u = f"{url}/v1/embeddings"

        async def call():
            resp = await client.post(u, content=body_of(texts, dims), headers=RAW)
            check(np.frombuffer(resp.content, np.float32).reshape(int(resp.headers["Densewire-Shape"].split(",")[0]), -1))

        return (lambda k: loop.run_until_complete(run_async(k, 8, call)),
                lambda: (loop.run_until_complete(client.aclose()), loop.close()))

    def openai_sdk(base64: bool):
        def make():
            loop = asyncio.new_event_loop()
            client = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)
            extra = {"dimensions": dims} if dims else {}

            async def call():
                if base64:
                    r = await client.embeddings.create(input=texts, model="hash-1024", encoding_format="base64", **extra)
                    check(densewire.from_openai(r))
                else:
                    r = await client.embeddings.create(input=texts, model="hash-1024", **extra)
                    check(np.array([e.embedding for e in r.data], dtype=np.float32))

            return (lambda k: loop.run_until_complete(run_async(k, 8, call)),
                    lambda: (loop.run_until_complete(client.close()), loop.close()))
        return make

    return {"densewire.AsyncClient": dw_async, "densewire.Client (sync)": dw_sync,
            "aiohttp + frombuffer": plain_aiohttp, "httpx + frombuffer": plain_httpx,
            "openai SDK": openai_sdk(False), "openai SDK base64 + from_openai": openai_sdk(True)}


async def _make_session(aiohttp):
    return aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=64), auto_decompress=False)


def measure(run, k: int) -> tuple[float, float]:
    """(requests/s, client CPU microseconds per request) of k requests."""
    c0, t0 = time.process_time(), time.perf_counter()
    done = run(k)
    t1, c1 = time.perf_counter(), time.process_time()
    return done / (t1 - t0), (c1 - c0) / done * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--small-requests", type=int, default=1000)
    parser.add_argument("--large-requests", type=int, default=200)
    parser.add_argument("--port", type=int, default=18431)
    parser.add_argument("--max-seconds", type=float, default=SETTINGS["max_seconds"],
                        help="a measurement stops taking new requests after this many seconds")
    parser.add_argument("--output", default=str(HERE / "RESULTS-client.md"))
    a = parser.parse_args()
    SETTINGS["max_seconds"] = a.max_seconds

    server = start_server(a.port)
    url = f"http://127.0.0.1:{a.port}"
    sizes = {"small (8 x 384)": ([f"small text {i}" for i in range(8)], 384, a.small_requests, 8, 384),
             "large (256 x 1024)": ([f"large text {i}" for i in range(256)], None, a.large_requests, 256, 1024)}
    results: dict[tuple[str, str], list[tuple[float, float]]] = {}
    try:
        for size, (texts, dims, k, n, d) in sizes.items():
            factories = client_factories(url, texts, dims, n, d)
            states = {name: make() for name, make in factories.items()}
            for run, _close in states.values():
                run(20)  # warm up: connections, caches of the server
            names = list(states)
            for r in range(a.rounds):
                order = names[r % len(names):] + names[:r % len(names)]
                for name in order:
                    results.setdefault((size, name), []).append(measure(states[name][0], k))
                print(f"{size} round {r + 1}/{a.rounds} done", file=sys.stderr)
            for _run, close in states.values():
                close()
    finally:
        server.terminate()
        server.wait(30)

    report = render(results, a, sizes)
    Path(a.output).write_text(report)
    print(report)
    return 0


def render(results, a, sizes) -> str:
    info = machine_info()
    versions = {p: _version(p) for p in ("aiohttp", "httpx", "openai", "numpy", "orjson")}
    blas = {k: os.environ.get(k, "unset") for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
    lines = ["# Python embeddings clients on loopback", "",
             f"Run {datetime.date.today().isoformat()}: `.venv/bin/python bench/python/client.py --rounds {a.rounds} "
             f"--small-requests {a.small_requests} --large-requests {a.large_requests} --max-seconds {a.max_seconds}`", "",
             f"Machine: {info['cpu']}, {info['cores']} cores (shared with other jobs while measured: load average "
             f"{os.getloadavg()[0]:.1f} at the end), "
             f"Python {info['python']}, {info['platform']}; "
             + ", ".join(f"{p} {v}" for p, v in versions.items())
             + f", densewire {info['densewire']}; " + ", ".join(f"{k} {v}" for k, v in blas.items()) + ".", "",
             "One `densewire serve --model hash:1024` process (small requests ask `dimensions: 384`), 8 requests "
             "in flight per client (a measurement ends after its requests or after --max-seconds), clients measured one after another in interleaved rounds (order rotating). "
             "Every client builds its request body per request (orjson for the plain ones). Each request's vectors are decoded into an (n, d) float32 array and its shape checked. "
             "CPU is the client process's user + system time per request (`time.process_time`, all its threads). Best and median over the rounds.", ""]
    for size in sizes:
        ref = [x for x in results[(size, "aiohttp + frombuffer")]]
        ref_rps = statistics.median(x[0] for x in ref)
        ref_cpu = statistics.median(x[1] for x in ref)
        lines += [f"## {size}", "", "| client | requests/s best | median | vs aiohttp | CPU us/request best | median | vs aiohttp |",
                  "|---|---:|---:|---:|---:|---:|---:|"]
        for (sz, name), xs in results.items():
            if sz != size:
                continue
            rps = [x[0] for x in xs]
            cpu = [x[1] for x in xs]
            lines.append(f"| {name} | {max(rps):,.0f} | {statistics.median(rps):,.0f} | "
                         f"{statistics.median(rps) / ref_rps:.2f}x | {min(cpu):,.0f} | {statistics.median(cpu):,.0f} | "
                         f"{statistics.median(cpu) / ref_cpu:.2f}x |")
        lines.append("")
    lines += ["## Targets (issue 16): densewire.AsyncClient against plain aiohttp + frombuffer, medians", "",
              "| size | requests/s ratio | required | met | CPU per request ratio | required | met |",
              "|---|---:|---:|---|---:|---:|---|"]
    for size in sizes:
        dw, ref = results[(size, "densewire.AsyncClient")], results[(size, "aiohttp + frombuffer")]
        rps = statistics.median(x[0] for x in dw) / statistics.median(x[0] for x in ref)
        cpu = statistics.median(x[1] for x in dw) / statistics.median(x[1] for x in ref)
        lines.append(f"| {size} | {rps:.2f}x | >= 0.9x | {'yes' if rps >= 0.9 else 'no'} | {cpu:.2f}x | <= 1.2x | "
                     f"{'yes' if cpu <= 1.2 else 'no'} |")
    lines += ["", "On a machine shared with other jobs, requests/s depends on how the scheduler shares the 2 cores "
              "between the server and the client (a client with 9 threads, such as the sync Client's 8 callers "
              "and its loop thread, gets a larger share than a single-threaded one); CPU per request is the "
              "steadier figure.", "", TRANSPORT_NOTE, ""]
    return "\n".join(lines)


def _version(p: str) -> str:
    try:
        return md.version(p)
    except md.PackageNotFoundError:
        return "not installed"


if __name__ == "__main__":
    sys.exit(main())
