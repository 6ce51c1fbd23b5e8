#!/usr/bin/env python3
"""Tables (Markdown) from the raw lines of bench/rust/loopback.sh: best and median of the rounds per
(server, client) pair, MB/s as % of the loopback socket reference measured in the same run, CPU time
per request of client and server, and the ratios the published case quotes.

    python bench/rust/summarize.py bench/rust/loopback.txt
"""
from __future__ import annotations

import statistics
import sys
from collections import defaultdict


def fields(line: str) -> dict[str, str]:
    """key=value pairs; the first occurrence of a key wins (loopback.sh's server= and client= come
    before the client's own line)."""
    out: dict[str, str] = {}
    for kv in line.split():
        if "=" in kv:
            k, v = kv.split("=", 1)
            out.setdefault(k, v)
    return out


def main(path: str) -> None:
    runs: dict[tuple[str, str], list[dict[str, float]]] = defaultdict(list)
    sockets: list[tuple[int, float]] = []
    profile: list[str] = []
    for line in open(path, encoding="utf-8"):
        if line.startswith("pair "):
            f = fields(line)
            runs[f["server"], f["client"]].append({k: float(f[k]) for k in
                                                   ("req_per_s", "MB_per_s", "cpu_us_per_req", "server_cpu_us_per_req")})
        elif line.startswith("profile "):
            profile.append(line.removeprefix("profile ").strip())
        elif line.startswith("socket "):
            f = fields(line)
            sockets.append((int(f["streams"]), float(f["MB_per_s"])))
    ref = max(mb for _, mb in sockets)
    med = statistics.median

    def stat(key, server, client, fn=max):
        return fn(r[key] for r in runs[server, client])

    print("### Loopback socket reference (same run)\n")
    print("| streams | MB/s (each measurement) | best |\n|---:|---|---:|")
    for n in sorted({s for s, _ in sockets}):
        v = [mb for s, mb in sockets if s == n]
        print(f"| {n} | {', '.join(f'{x:,.0f}' for x in v)} | {max(v):,.0f} |")
    print(f"\nReference: **{ref:,.0f} MB/s** ({ref * 8 / 1e3:.1f} Gbit/s), the best of the above.\n")

    main_servers = ["fastapi-def", "fastapi-async", "axum", "densewire-serve"]
    clients = ["rust-zero-copy", "rust-copy", "aiohttp", "densewire-py"]
    print("### Transport: every (server, client) pair, raw bodies\n")
    print("| server | client | req/s best | req/s median | MB/s best | % of socket | client CPU µs/req | server CPU µs/req |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for s in main_servers:
        for c in clients:
            if (s, c) not in runs:
                continue
            best_mb = stat("MB_per_s", s, c)
            print(f"| {s} | {c} | {stat('req_per_s', s, c):,.0f} | {stat('req_per_s', s, c, med):,.0f} | "
                  f"{best_mb:,.0f} | {100 * best_mb / ref:.0f} % | {stat('cpu_us_per_req', s, c, med):,.0f} | "
                  f"{stat('server_cpu_us_per_req', s, c, med):,.0f} |")
    print("\n(CPU columns: medians over the rounds.)\n")

    print("### Computed per request (no cache), Rust zero-copy client\n")
    print("| server | req/s best | req/s median | MB/s best | server CPU µs/req |\n|---|---:|---:|---:|---:|")
    for s in ["axum-computed", "fastapi-computed", "fastapi-computed-async", "densewire-serve-computed", "fastapi-h11-def"]:
        c = "rust-zero-copy"
        if (s, c) in runs:
            print(f"| {s} | {stat('req_per_s', s, c):,.0f} | {stat('req_per_s', s, c, med):,.0f} | "
                  f"{stat('MB_per_s', s, c):,.0f} | {stat('server_cpu_us_per_req', s, c, med):,.0f} |")

    def ratio(a, b, fn):
        return stat("req_per_s", *a, fn) / stat("req_per_s", *b, fn)

    print("\n### Ratios (best / median of rounds)\n")
    print("| ratio | best | median |\n|---|---:|---:|")
    rz = "rust-zero-copy"
    rows = [
        ("axum / FastAPI `def`, transport (Rust zero-copy client)", ("axum", rz), ("fastapi-def", rz)),
        ("axum / FastAPI `async def`, transport (Rust zero-copy client)", ("axum", rz), ("fastapi-async", rz)),
        ("axum / FastAPI `def`, computed per request", ("axum-computed", rz), ("fastapi-computed", rz)),
        ("axum / FastAPI `async def`, computed per request", ("axum-computed", rz), ("fastapi-computed-async", rz)),
        ("FastAPI uvloop+httptools / h11+asyncio (`def`, transport)", ("fastapi-def", rz), ("fastapi-h11-def", rz)),
    ]
    for s in main_servers:
        rows.append((f"Rust zero-copy / aiohttp, server {s}", (s, rz), (s, "aiohttp")))
    for s in main_servers:
        rows.append((f"Rust zero-copy / copy, server {s}", (s, rz), (s, "rust-copy")))
    for s in main_servers:
        rows.append((f"Rust zero-copy / densewire-py, server {s}", (s, rz), (s, "densewire-py")))
    for name, a, b in rows:
        if a in runs and b in runs:
            print(f"| {name} | {ratio(a, b, max):.2f}x | {ratio(a, b, med):.2f}x |")
    cpu_rust = stat("cpu_us_per_req", "axum", rz, med)
    cpu_aio = stat("cpu_us_per_req", "axum", "aiohttp", med)
    print(f"| client CPU per request, aiohttp / Rust zero-copy (server axum) | | {cpu_aio / cpu_rust:.2f}x |")
    if profile:
        print("\n### FastAPI in-process profile (bench/rust/fastapi_profile.py, same run)\n")
        for p in profile:
            print(f"- {p}")
    best = max(((stat("MB_per_s", s, c), s, c) for (s, c) in runs), key=lambda t: t[0])
    print(f"\nBest pair: {best[1]} + {best[2]}, {best[0]:,.0f} MB/s = {best[0] * 8 / 1e3:.1f} Gbit/s = "
          f"**{100 * best[0] / ref:.0f} %** of the socket reference.")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "bench/rust/loopback.txt")
