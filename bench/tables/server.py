#!/usr/bin/env python3
"""densewire serve's table API on the demo table (67,627 points): warm vs cold requests, per format.

    .venv/bin/python bench/tables/server.py                 # writes bench/tables/RESULTS-server.md
    .venv/bin/python bench/tables/server.py --rounds 5 --requests 50

* **cold**: the first request after the server starts (it waits for the table's first load and
  serialization), one fresh server per format and round;
* **warm**: requests once every representation is built (the deployed default: gzip 9, zstd 19,
  br 11), identity and br, and a 304 revalidation; the server's metrics before and after show that
  these requests serialized and compressed nothing;
* **during a refresh**: the demo table from SQLite with a refresh interval; the data changes, and
  requests keep being answered from the previous version (no waiting) until the new version is
  built and swapped in;
* for scale, what one request would cost a server that serializes (and compresses) per request,
  measured in this process: ``encode_table`` and zstd 3 / br 11.

The server runs on CPU 1 and the client on CPU 0 (taskset) when the machine has two CPUs or more.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import shutil
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "python" / "src"))
sys.path.insert(0, str(REPO / "python" / "tests"))

import densewire  # noqa: E402
from densewire import TABLE_FORMATS, encode_table  # noqa: E402

HERE = Path(__file__).resolve().parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pin(cpu: int) -> list[str]:
    return ["taskset", "-c", str(cpu)] if shutil.which("taskset") and (os.cpu_count() or 1) >= 2 else []


class Server:
    def __init__(self, *args: str, tmp: Path, pinned: bool = True) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = tmp / f"server-{self.port}.log"
        env = {k: v for k, v in os.environ.items() if not k.startswith("DENSEWIRE_")}
        env["PYTHONPATH"] = str(REPO / "python" / "src")
        self.t0 = time.perf_counter()
        self.proc = subprocess.Popen(
            [*(pin(1) if pinned else []), sys.executable, "-m", "densewire.server", "--model", "hash:8", "--port", str(self.port),
             "--log-level", "warning", *args], stdout=open(self.log, "wb"), stderr=subprocess.STDOUT, env=env,
            cwd=str(tmp))

    def wait_listening(self, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(self.log.read_text()[-3000:])
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.1):
                    return
            except OSError:
                time.sleep(0.005)
        raise RuntimeError("server did not listen")

    def wait_ready(self, names: list[str], timeout: float = 1800) -> float:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                data = httpx.get(self.url + "/v1/tables", timeout=60).json()["data"]
                if all(t["status"] == "ready" for t in data if t["name"] in names):
                    return time.perf_counter() - self.t0
            except httpx.HTTPError:
                pass
            time.sleep(0.25)
        raise RuntimeError("tables not ready")

    def metrics(self) -> dict[str, float]:
        from server_support import parse_metrics

        return parse_metrics(httpx.get(self.url + "/metrics", timeout=30).text)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def total(m: dict[str, float], prefix: str, *must: str) -> float:
    return sum(v for k, v in m.items() if k.startswith(prefix) and all(x in k for x in must))


def med_best(xs: list[float]) -> str:
    return f"{statistics.median(xs) * 1000:,.1f} / {min(xs) * 1000:,.1f}"


BROWSER_CODINGS = "gzip, deflate, br, zstd"


def bench_cold(args: argparse.Namespace, tmp: Path) -> dict[str, list[tuple[float, int, str, float]]]:
    out: dict[str, list[tuple[float, int, str, float]]] = {f: [] for f in TABLE_FORMATS}
    for r in range(args.rounds):
        for fmt in TABLE_FORMATS:
            s = Server("--table-compression", args.compression, tmp=tmp)
            try:
                s.wait_listening()
                with httpx.Client(timeout=120) as c:
                    t = time.perf_counter()
                    resp = c.get(s.url + f"/v1/tables/points?format={fmt}",
                                 headers={"Accept-Encoding": BROWSER_CODINGS})
                    resp.read()
                    done = time.perf_counter()
                    dt = done - t
                assert resp.status_code == 200, resp.text[:500]
                out[fmt].append((dt, int(resp.headers["content-length"]), resp.headers.get("content-encoding", "identity"),
                                 done - s.t0))
            finally:
                s.stop()
            print(f"cold round {r + 1} {fmt}: {dt * 1000:.0f} ms", file=sys.stderr, flush=True)
    return out


def bench_warm(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    s = Server("--table-compression", args.compression, tmp=tmp)
    try:
        s.wait_listening()
        prewarm = s.wait_ready(["points", "points_f32"])
        print(f"pre-warm done in {prewarm:.1f} s", file=sys.stderr, flush=True)
        listing = {t["name"]: t for t in httpx.get(s.url + "/v1/tables").json()["data"]}
        before = s.metrics()
        times: dict[tuple[str, str], list[float]] = {}
        sizes: dict[tuple[str, str], int] = {}
        n = 0
        with httpx.Client(timeout=60) as c:
            for _ in range(args.rounds):
                for fmt in TABLE_FORMATS:
                    url = s.url + f"/v1/tables/points?format={fmt}"
                    for coding in ("identity", "br", "304"):
                        headers = {"Accept-Encoding": "br" if coding == "br" else "identity"}
                        if coding == "304":
                            headers["If-None-Match"] = c.get(url, headers={"Accept-Encoding": "identity"}).headers["etag"]
                            n += 1
                        xs = times.setdefault((fmt, coding), [])
                        for _ in range(args.requests):
                            t = time.perf_counter()
                            with c.stream("GET", url, headers=headers) as resp:
                                body = b"".join(resp.iter_raw())
                            xs.append(time.perf_counter() - t)
                            n += 1
                        assert resp.status_code == (304 if coding == "304" else 200)
                        sizes[(fmt, coding)] = len(body)
        after = s.metrics()
        return {
            "prewarm": prewarm, "listing": listing, "times": times, "sizes": sizes, "requests": n,
            "serializations": (total(before, "densewire_table_serializations_total", 'table="points"'),
                               total(after, "densewire_table_serializations_total", 'table="points"')),
            "compressions": (total(before, "densewire_table_compressions_total", 'table="points"'),
                             total(after, "densewire_table_compressions_total", 'table="points"')),
            "warm": (total(before, "densewire_table_requests_total", 'table="points"', 'result="warm"')
                     + total(before, "densewire_table_requests_total", 'table="points"', 'result="not_modified"'),
                     total(after, "densewire_table_requests_total", 'table="points"', 'result="warm"')
                     + total(after, "densewire_table_requests_total", 'table="points"', 'result="not_modified"')),
            "build_seconds": {
                "serialize": total(after, "densewire_table_serialization_seconds_total", 'table="points"'),
                "compress": {c: total(after, "densewire_table_compression_seconds_total", 'table="points"',
                                      f'encoding="{c}"') for c in ("gzip", "zstd", "br")},
            },
        }
    finally:
        s.stop()


def bench_refresh(args: argparse.Namespace, tmp: Path, pinned: bool = True) -> dict[str, Any]:
    demo = densewire.demo_table()
    db = tmp / f"points-{pinned}.db"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE points (uuid UUID, status INTEGER, longitude REAL, latitude REAL)")
    u = demo.column("uuid").values
    con.executemany("INSERT INTO points VALUES (?, ?, ?, ?)", zip(
        (bytes(r) for r in u), demo.column("status").values.tolist(), demo.column("longitude").values.tolist(),
        demo.column("latitude").values.tolist()))
    con.commit()
    con.close()
    cfg = tmp / f"tables-{pinned}.toml"
    cfg.write_text(f'demo_tables = false\n[tables.points]\nsource = "sqlite:{db}"\nrefresh = 2\n'
                   'columns = { status = "int32" }\n')
    s = Server("--tables-config", str(cfg), "--table-compression", args.compression, tmp=tmp, pinned=pinned)
    try:
        s.wait_listening()
        s.wait_ready(["points"])
        url = s.url + "/v1/tables/points?format=protobuf"
        with httpx.Client(timeout=60) as c:
            etag0 = c.get(url, headers={"Accept-Encoding": "br"}).headers["etag"]
            before = s.metrics()
            con = sqlite3.connect(db)
            con.execute("UPDATE points SET status = 1 - status WHERE rowid % 1000 = 0")
            con.commit()
            con.close()
            t_change = time.perf_counter()
            lat: list[float] = []
            while True:
                t = time.perf_counter()
                with c.stream("GET", url, headers={"Accept-Encoding": "br"}) as resp:
                    b"".join(resp.iter_raw())  # as sent: no client-side decompression in the timing
                lat.append(time.perf_counter() - t)
                assert resp.status_code == 200
                if resp.headers["etag"] != etag0:
                    swapped = time.perf_counter() - t_change
                    break
                if time.perf_counter() - t_change > 1800:
                    raise RuntimeError("no new version")
                time.sleep(0.02)
        after = s.metrics()
        waited = total(after, "densewire_table_requests_total", 'result="waited"') - total(
            before, "densewire_table_requests_total", 'result="waited"')
        return {"latencies": lat, "swapped": swapped, "waited": waited}
    finally:
        s.stop()


def bench_on_request() -> dict[str, dict[str, float]]:
    import brotli
    import zstandard

    demo = densewire.demo_table()
    out: dict[str, dict[str, float]] = {}
    for fmt in TABLE_FORMATS:
        enc = []
        for _ in range(5):
            t = time.perf_counter()
            body = encode_table(demo, fmt)
            enc.append(time.perf_counter() - t)
        t = time.perf_counter()
        zstandard.ZstdCompressor(level=3).compress(body)
        z3 = time.perf_counter() - t
        t = time.perf_counter()
        brotli.compress(body, quality=11)
        b11 = time.perf_counter() - t
        out[fmt] = {"encode": statistics.median(enc), "zstd3": z3, "br11": b11, "bytes": len(body)}
        print(f"on-request {fmt}: encode {out[fmt]['encode'] * 1000:.0f} ms, br11 {b11 * 1000:.0f} ms",
              file=sys.stderr, flush=True)
    return out


def machine() -> str:
    import importlib.metadata as md

    cpu = platform.processor()
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    versions = ", ".join(f"{p} {md.version(p)}" for p in ("numpy", "starlette", "uvicorn", "httpx", "brotli",
                                                            "zstandard", "pyarrow"))
    return (f"{cpu}, {os.cpu_count()} CPUs, Python {platform.python_version()}, densewire {densewire.__version__}, "
            f"{versions}, {platform.platform()}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--requests", type=int, default=20, help="warm requests per format, coding and round")
    parser.add_argument("--compression", default="best", help="--table-compression of the servers (default best)")
    parser.add_argument("--output", default=str(HERE / "RESULTS-server.md"))
    parser.add_argument("--skip-refresh", action="store_true")
    args = parser.parse_args()
    if pin(0):
        os.sched_setaffinity(0, {0})  # the client (and the in-process "on request" measurements) on CPU 0
    load_start = open("/proc/loadavg").read().strip()
    tmp = Path(tempfile.mkdtemp(prefix="dw-bench-tables-"))
    try:
        on_request = bench_on_request()
        cold = bench_cold(args, tmp)
        warm = bench_warm(args, tmp)
        refresh = None if args.skip_refresh else bench_refresh(args, tmp)
        refresh_free = None if args.skip_refresh or not pin(0) else bench_refresh(args, tmp, pinned=False)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    load_end = open("/proc/loadavg").read().strip()

    cmd = "taskset: server CPU 1, client CPU 0; " if pin(0) else ""
    lines = [
        "# densewire serve: table requests, warm and cold (demo table, 67,627 rows)", "",
        f"Measured {datetime.date.today().isoformat()} by `.venv/bin/python bench/tables/server.py "
        f"--rounds {args.rounds} --requests {args.requests} --compression {args.compression}` "
        f"({cmd}client: httpx over loopback, keep-alive).", "",
        f"Machine: {machine()}.", "",
        f"Load average (1, 5, 15 min): at start `{load_start}`, at end `{load_end}` (a 2-CPU machine shared with "
        "other builds: expect noise; figures are median / best).", "",
        "## Warm requests (every representation pre-built)", "",
        f"Pre-warm of both demo tables at `{args.compression}` levels (7 formats x identity, gzip, zstd, br, "
        f"in the niced build processes): ready {warm['prewarm']:.1f} s after the server started; for `points`: "
        f"{warm['build_seconds']['serialize']:.2f} s serializing, compressing "
        + ", ".join(f"{c} {s:.1f} s" for c, s in warm["build_seconds"]["compress"].items()) + ".", "",
        f"{args.rounds} rounds x {args.requests} requests per format and coding; milliseconds from request to the "
        "last body byte at the client, median / best.", "",
        "| format | identity bytes | identity ms | br bytes | br ms | 304 ms | on request: encode ms | + br 11 ms | + zstd 3 ms |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for fmt in TABLE_FORMATS:
        t, sz, o = warm["times"], warm["sizes"], on_request[fmt]
        lines.append(f"| {fmt} | {sz[(fmt, 'identity')]:,} | {med_best(t[(fmt, 'identity')])} | {sz[(fmt, 'br')]:,} | "
                     f"{med_best(t[(fmt, 'br')])} | {med_best(t[(fmt, '304')])} | {o['encode'] * 1000:,.1f} | "
                     f"{o['br11'] * 1000:,.0f} | {o['zstd3'] * 1000:,.1f} |")
    s0, s1 = warm["serializations"]
    c0, c1 = warm["compressions"]
    w0, w1 = warm["warm"]
    lines += [
        "",
        f"Metrics of the server around these {warm['requests']:,} requests to `points`: "
        f"`densewire_table_serializations_total` {s0:g} -> {s1:g}, `densewire_table_compressions_total` "
        f"{c0:g} -> {c1:g} (the build of the one version, before the first measured request), "
        f"`densewire_table_requests_total{{result=\"warm\"|\"not_modified\"}}` {w0:g} -> {w1:g}: "
        f"**{s1 - s0:g} serializations and {c1 - c0:g} compressions for {w1 - w0:g} requests.**", "",
        "The \"on request\" columns are what a server that serializes per request would spend before sending "
        "a byte (measured in the bench process: `encode_table`, then brotli 11 or zstd 3 of that body).", "",
        "## Cold requests (the first request after the server starts)", "",
        "A fresh server per format and round (default demo tables, the same levels); the request is sent as soon "
        f"as the port accepts connections, with `Accept-Encoding: {BROWSER_CODINGS}`. It waits for the first load "
        "(the build process starts, generates the demo table and serializes all seven formats) if that is not done yet, then gets the "
        "identity body: the compressions are still being built, and HTTP lets the server answer uncompressed.", "",
        "The port opens when the model is loaded (the lifespan), while the table load is already running in "
        "the build process: a request sent at that moment waits for whatever is left of the load (nothing, when "
        "the load finished first). The last column counts from the server process's start (Python start-up "
        "included).", "",
        "| format | ms after the port opened, median / best | ms after the process started, median / best | bytes | coding |",
        "|---|---:|---:|---:|---|",
    ]
    for fmt in TABLE_FORMATS:
        xs = cold[fmt]
        lines.append(f"| {fmt} | {med_best([x[0] for x in xs])} | {med_best([x[3] for x in xs])} | {xs[-1][1]:,} | "
                     f"{xs[-1][2]} |")
    if refresh:
        lines += [
            "", "## During a refresh", "",
            "The `points` table from SQLite (refresh every 2 s, same compression levels); 1 row in 1,000 changed, "
            "then protobuf + br requested every 20 ms until the ETag changed. Every request is answered from the "
            "previous version while the new one is built (reload + 7 serializations + 21 compressions, then one "
            "swap).", "",
            "| server placement | new version visible after | requests meanwhile | median ms | slowest ms | waited for a build |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        for label, r in (("server and its build processes on CPU 1 (one core shared with the compressions)", refresh),
                         ("server and build processes free on both CPUs (client on CPU 0)", refresh_free)):
            if r:
                lat = r["latencies"]
                lines.append(f"| {label} | {r['swapped']:.1f} s | {len(lat)} | {statistics.median(lat) * 1000:.1f} | "
                             f"{max(lat) * 1000:.1f} | {r['waited']:g} |")
    lines += ["", "## Sizes of the pre-built representations (bytes, from GET /v1/tables)", "",
              "| table | format | identity | gzip | zstd | br |", "|---|---|---:|---:|---:|---:|"]
    for name in ("points", "points_f32"):
        b = warm["listing"][name]["bytes"]
        for fmt in TABLE_FORMATS:
            lines.append(f"| {name} | {fmt} | " + " | ".join(f"{b[fmt].get(c, 0):,}" for c in ("identity", "gzip", "zstd", "br"))
                         + " |")
    Path(args.output).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
