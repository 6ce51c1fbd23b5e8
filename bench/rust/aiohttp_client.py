#!/usr/bin/env python3
"""The Python side of the client comparison, with the same workload as the Rust example client
(N requests of BATCH texts, C in flight, the same texts every request), raw bodies:

* ``--client aiohttp``: aiohttp, reading each body and viewing it as float32 with
  ``numpy.frombuffer`` (no copy);
* ``--client densewire``: densewire's own Python client (``densewire.AsyncClient``, over httpx),
  asking for raw (``Accept: application/octet-stream``) and decoding each response into its
  zero-copy numpy view.

Both run on asyncio's standard event loop (what aiohttp and httpx use unless told otherwise;
``--loop uvloop`` for uvloop, which was slower for 1 MiB bodies here). Prints one line
like the Rust client, with the process's CPU time (user + system) per request.

    python bench/rust/aiohttp_client.py --url http://127.0.0.1:8000 --client aiohttp --requests 1000
"""
import argparse
import asyncio
import resource
import time

import numpy as np


def cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


async def run_aiohttp(a, texts, rounds):
    import aiohttp

    body = {"input": texts, "encoding_format": "base64"}
    sem = asyncio.Semaphore(a.concurrency)
    conn = aiohttp.TCPConnector(limit=a.concurrency)
    async with aiohttp.ClientSession(connector=conn) as session:
        async def one() -> tuple[int, float]:
            async with sem:
                async with session.post(a.url + a.path, json=body,
                                        headers={"Accept": "application/octet-stream", "Accept-Encoding": "identity"}) as r:
                    r.raise_for_status()
                    data = await r.read()
            arr = np.frombuffer(data, dtype="<f4").reshape(a.batch, a.dims)
            return arr.nbytes, float(arr[:, 0].sum())

        return await rounds(one)


async def run_densewire(a, texts, rounds):
    import densewire
    import httpx

    # httpx offers gzip, deflate, br (and zstd when zstandard is installed) by default, and a densewire
    # server then compresses each 1 MiB float32 body; --encoding identity asks for the bytes as they are
    # (the published workload: raw bytes), --encoding default keeps httpx's Accept-Encoding.
    headers = {"Accept-Encoding": "identity"} if a.encoding == "identity" else {}
    http = httpx.AsyncClient(timeout=120.0, headers=headers, limits=httpx.Limits(max_connections=64))
    async with densewire.AsyncClient(a.url, accept="application/octet-stream", http_client=http) as client:
        sem = asyncio.Semaphore(a.concurrency)

        async def one() -> tuple[int, float]:
            async with sem:
                arr = (await client.create(texts)).tensor.array
            assert arr.shape == (a.batch, a.dims), arr.shape
            return arr.nbytes, float(arr[:, 0].sum())

        return await rounds(one)


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True, help="base URL; requests go to URL + /v1/embeddings")
    ap.add_argument("--path", default="/v1/embeddings", help="(aiohttp) path appended to --url")
    ap.add_argument("--client", choices=["aiohttp", "densewire"], default="aiohttp")
    ap.add_argument("--requests", type=int, default=1000)
    ap.add_argument("--concurrency", type=int, default=10)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--dims", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--label", default="")
    ap.add_argument("--encoding", choices=["identity", "default"], default="identity",
                    help="(densewire client) Accept-Encoding: identity, or httpx's default")
    ap.add_argument("--loop", choices=["asyncio", "uvloop"], default="asyncio")
    a = ap.parse_args()
    texts = [f"benchmark sentence number {i} about moving embeddings" for i in range(a.batch)]

    async def rounds(one):
        await asyncio.gather(*(one() for _ in range(a.concurrency)))  # warm-up: open the connections
        best = None
        for _ in range(a.rounds):
            cpu0, start = cpu_seconds(), time.perf_counter()
            results = await asyncio.gather(*(one() for _ in range(a.requests)))
            secs, cpu = time.perf_counter() - start, cpu_seconds() - cpu0
            if best is None or secs < best[0]:
                best = (secs, sum(n for n, _ in results), cpu)
        return best

    secs, total, cpu = await (run_aiohttp if a.client == "aiohttp" else run_densewire)(a, texts, rounds)
    enc = f" encoding={a.encoding}" if a.client == "densewire" else ""
    print(f"target={a.label or a.url} client={a.client}{enc} loop={a.loop} requests={a.requests} concurrency={a.concurrency} "
          f"batch={a.batch} seconds={secs:.3f} req_per_s={a.requests / secs:.1f} MB_per_s={total / secs / 1e6:.1f} "
          f"Gbit_per_s={total * 8 / secs / 1e9:.2f} cpu_us_per_req={cpu / a.requests * 1e6:.0f}", flush=True)


if __name__ == "__main__":
    import sys

    if "--loop" in sys.argv and sys.argv[sys.argv.index("--loop") + 1] == "uvloop":
        import uvloop

        uvloop.run(main())
    else:
        asyncio.run(main())
