#!/usr/bin/env python3
"""The Python side of the client comparison: aiohttp with the same workload as the Rust example
client (N requests of BATCH texts, C in flight, same texts every request), reading each body and
viewing it as float32 with numpy (np.frombuffer: no copy). Prints one line like the Rust client.

    python bench/rust/aiohttp_client.py --url http://127.0.0.1:8000 --accept application/octet-stream
"""
import argparse
import asyncio
import time

import aiohttp
import numpy as np


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--path", default="/v1/embeddings")
    ap.add_argument("--accept", default="application/octet-stream")
    ap.add_argument("--requests", type=int, default=100)
    ap.add_argument("--concurrency", type=int, default=10)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--dims", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--label", default="")
    a = ap.parse_args()
    texts = [f"benchmark sentence number {i} about moving embeddings" for i in range(a.batch)]
    body = {"input": texts, "encoding_format": "base64"}
    sem = asyncio.Semaphore(a.concurrency)
    conn = aiohttp.TCPConnector(limit=a.concurrency)
    async with aiohttp.ClientSession(connector=conn) as session:
        async def one() -> int:
            async with sem:
                async with session.post(a.url + a.path, json=body, headers={"Accept": a.accept, "Accept-Encoding": "identity"}) as r:
                    data = await r.read()
            arr = np.frombuffer(data, dtype="<f4").reshape(a.batch, a.dims)
            return arr.nbytes

        await asyncio.gather(*(one() for _ in range(a.concurrency)))  # warm-up
        best = None
        for _ in range(a.rounds):
            start = time.perf_counter()
            sizes = await asyncio.gather(*(one() for _ in range(a.requests)))
            secs = time.perf_counter() - start
            if best is None or secs < best[0]:
                best = (secs, sum(sizes))
    secs, total = best
    print(f"target={a.label or a.url} client=aiohttp accept={a.accept} requests={a.requests} concurrency={a.concurrency} "
          f"seconds={secs:.3f} req_per_s={a.requests / secs:.1f} vectors_per_s={a.requests * a.batch / secs:.0f} "
          f"MB_per_s={total / secs / 1e6:.1f} Gbit_per_s={total * 8 / secs / 1e9:.2f}")


if __name__ == "__main__":
    asyncio.run(main())
