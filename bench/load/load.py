"""Load and fault figures of ``densewire serve`` (issue 14, step 6): real server processes, a real
redis-server, an asyncio/aiohttp load generator, loopback only.

    .venv/bin/python bench/load/load.py --src python/src [--scenarios steady,overload,...] [--quick]

``--src`` is the ``python/src`` folder of the densewire to test: this worktree's, or that of a
worktree at the commit before (the "before" column of RESULTS.md). Flags the older server does not
know (``--max-concurrent-requests``) are passed only when ``--admission`` is given. Prints one JSON
object per scenario. ``--quick`` shortens every scenario (python/tests/test_load_faults.py).

Scenarios (each starts its own server):

* ``steady``: 64 connections for 60 s, each sending requests of one new text: every answer must be 200.
* ``overload``: p99 of one client alone, then 10x the admission limit in connections: the statuses
  seen, and p99 of the admitted (200) requests against the unloaded p99.
* ``redis``: load with Redis as the cache; Redis killed (SIGKILL) after 1/4 of the run and started
  again at 1/2: failed requests, and whether the server wrote to Redis again after it came back.
* ``sigterm``: load, then SIGTERM: every request the server admitted must be answered (lost = sent
  and admitted but never answered); refusals (connection refused, 503 draining) are not losses.
* ``bombs``: 1 GiB of zeros compressed with gzip, zstd, br and deflate, and a 17 MiB plain body,
  against --max-body-bytes 16M: status and the growth of peak resident memory.
* ``bigtexts``: three different 12 MB texts at once with the built-in model: status, peak growth.
* ``slowloris``: 100 connections sending their headers one byte a second while 4 clients do
  requests: the clients' answers and latency.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path
from typing import Any, Callable

import aiohttp
import brotli
import zstandard

WORDS = ("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa "
         "quebec romeo sierra tango uniform victor whiskey xray yankee zulu").split()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, src: str, *flags: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = Path(tempfile.mkstemp(prefix="dw-load-", suffix=".log")[1])
        env = {k: v for k, v in os.environ.items() if not k.startswith("DENSEWIRE_")}
        env["PYTHONPATH"] = str(Path(src).resolve())
        cmd = [sys.executable, "-m", "densewire.server", "--host", "127.0.0.1", "--port", str(self.port),
               "--no-demo-tables", *flags]
        self.proc = subprocess.Popen(cmd, stdout=self.log.open("wb"), stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited: {self.log.read_text()[-3000:]}")
            try:
                import urllib.request

                with urllib.request.urlopen(self.url + "/health", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.2)
        raise RuntimeError("server not ready in 300 s")

    def status(self, field: str) -> int:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
        return 0

    def reset_peak(self) -> None:
        Path(f"/proc/{self.proc.pid}/clear_refs").write_text("5")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class Redis:
    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                                      "--appendonly", "no"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", self.port), 0.2).close()
                return
            except OSError:
                time.sleep(0.05)

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait()

    def dbsize(self) -> int:
        import redis

        return int(redis.Redis(port=self.port, socket_timeout=5).dbsize())


def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    s = sorted(values)
    return round(s[min(len(s) - 1, int(q * len(s)))] * 1000, 1)  # ms


class Tally:
    def __init__(self) -> None:
        self.statuses: dict[str, int] = {}
        self.ok_latency: list[float] = []
        self.mark: float | None = None  # e.g. when SIGTERM was sent
        self.ok_after_mark = 0

    def add(self, what: str, latency: float) -> None:
        self.statuses[what] = self.statuses.get(what, 0) + 1
        if what == "200":
            self.ok_latency.append(latency)
            if self.mark is not None and time.monotonic() > self.mark:
                self.ok_after_mark += 1

    def summary(self) -> dict[str, Any]:
        return {"statuses": dict(sorted(self.statuses.items())), "requests": sum(self.statuses.values()),
                "p50_ms": pct(self.ok_latency, 0.5), "p99_ms": pct(self.ok_latency, 0.99)}


def text_maker(seed: int, words: int = 8) -> Callable[[], dict[str, Any]]:
    rng = random.Random(seed)
    counter = iter(range(1 << 62))

    def body() -> dict[str, Any]:
        return {"input": [" ".join(rng.choice(WORDS) for _ in range(words)) + f" {seed}-{next(counter)}"]}

    return body


async def load(url: str, conns: int, seconds: float, body: Callable[[], dict[str, Any]], tally: Tally,
               stop: asyncio.Event | None = None) -> None:
    end = time.monotonic() + seconds
    connector = aiohttp.TCPConnector(limit=conns, force_close=False)
    timeout = aiohttp.ClientTimeout(total=300)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        async def worker() -> None:
            while time.monotonic() < end and not (stop and stop.is_set()):
                t0 = time.monotonic()
                try:
                    async with session.post(url + "/v1/embeddings", json=body()) as r:
                        await r.read()
                        what = str(r.status)
                        if r.status == 429:
                            await asyncio.sleep(min(1.0, float(r.headers.get("Retry-After", "1"))))
                except aiohttp.ClientConnectorError:
                    what = "refused"
                    await asyncio.sleep(0.05)
                except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError, asyncio.TimeoutError) as exc:
                    what = "lost:" + type(exc).__name__
                tally.add(what, time.monotonic() - t0)

        await asyncio.gather(*(worker() for _ in range(conns)))


def metric(url: str, name: str) -> float:
    import urllib.request

    with urllib.request.urlopen(url + "/metrics", timeout=5) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name + " ") or line.startswith(name + "{"):
                return float(line.rsplit(" ", 1)[1])
    return 0.0


# -- scenarios ----------------------------------------------------------------------------------------
def steady(a: argparse.Namespace) -> dict[str, Any]:
    server = Server(a.src, "--blas-threads", "1")
    try:
        tally = Tally()
        asyncio.run(load(server.url, 64 if not a.quick else 8, 60 if not a.quick else 3, text_maker(1), tally))
        out = tally.summary()
        out["errors"] = out["requests"] - out["statuses"].get("200", 0)
        return out
    finally:
        server.stop()


def overload(a: argparse.Namespace) -> dict[str, Any]:
    limit = a.limit
    flags = ["--blas-threads", "1"] + (["--max-concurrent-requests", str(limit)] if a.admission else [])
    server = Server(a.src, *flags)
    try:
        alone = Tally()
        asyncio.run(load(server.url, 1, 20 if not a.quick else 3, text_maker(2), alone))
        loaded = Tally()
        asyncio.run(load(server.url, 10 * limit, 40 if not a.quick else 4, text_maker(3), loaded))
        out = {"limit": limit, "connections": 10 * limit, "unloaded": alone.summary(), "loaded": loaded.summary()}
        if alone.ok_latency and loaded.ok_latency:
            out["p99_ratio"] = round(pct(loaded.ok_latency, 0.99) / pct(alone.ok_latency, 0.99), 2)
        return out
    finally:
        server.stop()


def redis_restart(a: argparse.Namespace) -> dict[str, Any]:
    redis = Redis()
    redis.start()
    server = Server(a.src, "--model", "hash:384", "--redis-url", redis.url)
    seconds = 20 if not a.quick else 4
    try:
        tally = Tally()

        async def run() -> dict[str, Any]:
            job = asyncio.create_task(load(server.url, 16, seconds, text_maker(4), tally))
            await asyncio.sleep(seconds / 4)
            redis.kill()
            await asyncio.sleep(seconds / 4)
            redis.start()
            back_at = time.monotonic()
            await job
            return {"seconds_after_restart": round(time.monotonic() - back_at, 1)}

        out = asyncio.run(run())
        out.update(tally.summary())
        out["failed"] = out["requests"] - out["statuses"].get("200", 0)
        out["redis_keys_written_after_restart"] = redis.dbsize()
        out["redis_up_gauge"] = metric(server.url, "densewire_redis_up")
        return out
    finally:
        server.stop()
        redis.kill()


def sigterm(a: argparse.Namespace) -> dict[str, Any]:
    server = Server(a.src, "--model", "hash:384", "--timeout-graceful-shutdown", "30", "--access-log")
    tally = Tally()
    seconds = 30 if not a.quick else 6

    def heavy() -> dict[str, Any]:  # requests that take a while: several long texts
        rng = random.Random()
        return {"input": [" ".join(rng.choice(WORDS) for _ in range(100)) for _ in range(16)]}

    async def run() -> None:
        stop = asyncio.Event()
        job = asyncio.create_task(load(server.url, 32, seconds, heavy, tally, stop))
        await asyncio.sleep(3 if a.quick else 10)
        tally.mark = time.monotonic()
        server.proc.send_signal(signal.SIGTERM)
        await asyncio.get_running_loop().run_in_executor(None, server.proc.wait, 120)
        stop.set()
        await job

    t0 = time.monotonic()
    asyncio.run(run())
    out = tally.summary()
    # the server's side: every response it started is an access-log line; requests it cancelled at the
    # end of the grace period are counted in uvicorn's "Cancel N running task(s)"
    log = server.log.read_text(errors="replace")
    served = log.count('"POST /v1/embeddings HTTP/1.1" ')
    cancelled = sum(int(m) for m in re.findall(r"Cancel (\d+) running task", log))
    received = sum(n for k, n in out["statuses"].items() if k.isdigit())
    out["server_responses"] = served
    out["client_responses"] = received
    out["admitted_lost"] = served - received + cancelled
    out["connection_errors_unread_by_server"] = sum(n for k, n in out["statuses"].items() if k.startswith("lost:"))
    out["answered_200_after_sigterm"] = tally.ok_after_mark
    out["exit_code"] = server.proc.returncode
    out["seconds_to_exit_incl_load_start"] = round(time.monotonic() - t0, 1)
    return out


def _bomb(encoding: str, mib: int) -> bytes:
    """``mib`` MiB of zeros compressed with ``encoding`` (kept in the temp folder: slow to make)."""
    cached = Path(tempfile.gettempdir()) / f"densewire-bomb-{mib}m.{encoding}"
    if not cached.exists():
        cached.write_bytes(_make_bomb(encoding, mib))
    return cached.read_bytes()


def _make_bomb(encoding: str, mib: int) -> bytes:
    zeros = b"\0" * (1 << 20)
    if encoding == "gzip":
        c = zlib.compressobj(9, zlib.DEFLATED, 31)
        return b"".join(c.compress(zeros) for _ in range(mib)) + c.flush()
    if encoding == "deflate":
        c = zlib.compressobj(9)
        return b"".join(c.compress(zeros) for _ in range(mib)) + c.flush()
    if encoding == "zstd":
        c = zstandard.ZstdCompressor(level=3).compressobj()
        return b"".join(c.compress(zeros) for _ in range(mib)) + c.flush()
    if encoding == "br":
        c = brotli.Compressor(quality=1)
        return b"".join(c.process(zeros) for _ in range(mib)) + c.finish()
    raise ValueError(encoding)


def _post_raw(port: int, headers: dict[str, str], body: bytes) -> int | str:
    """POST over a plain socket, reading the answer even when the server answers (413) and closes
    before the whole body was sent."""
    head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    with socket.create_connection(("127.0.0.1", port), timeout=120) as sock:
        sock.sendall(f"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n{head}\r\n".encode())
        try:
            for i in range(0, len(body), 1 << 16):
                sock.sendall(body[i:i + (1 << 16)])
        except OSError:
            pass  # closed early: the status line is already in the receive buffer
        try:
            line = sock.makefile("rb").readline()
        except OSError as exc:
            return f"no answer ({type(exc).__name__})"
    parts = line.split()
    return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else f"no answer ({line[:40]!r})"


def bombs(a: argparse.Namespace) -> dict[str, Any]:
    server = Server(a.src, "--model", "hash:384", "--max-body-bytes", "16M")
    out: dict[str, Any] = {"limit_bytes": 16 << 20}
    mib = 64 if a.quick else 1024
    out["bomb_inflated_mib"] = mib
    try:
        cases = [(enc, _bomb(enc, mib)) for enc in ("gzip", "zstd", "br", "deflate")]
        cases.append(("identity-17MiB", b'{"input": "' + b"a" * (17 << 20) + b'"}'))
        for name, body in cases:
            headers = {"Content-Type": "application/json"}
            if not name.startswith("identity"):
                headers["Content-Encoding"] = name
            server.reset_peak()
            before = server.status("VmRSS")
            status = _post_raw(server.port, headers, body)
            out[name] = {"sent_bytes": len(body), "status": status,
                         "peak_rss_growth_mib": round((server.status("VmHWM") - before) / (1 << 20), 1)}
        return out
    finally:
        server.stop()


def bigtexts(a: argparse.Namespace) -> dict[str, Any]:
    server = Server(a.src, "--cache-bytes", "0", "--blas-threads", "1")
    size = 12_000_000 if not a.quick else 2_000_000
    rng = random.Random(5)
    texts = [" ".join(rng.choice(WORDS) + str(rng.randrange(1000)) for _ in range(size // 6))[:size] for _ in range(3)]
    try:
        tally = Tally()

        async def one(session: aiohttp.ClientSession, text: str) -> None:
            t0 = time.monotonic()
            # asked to be cut to the model's limit (vLLM's -1): without it a text over the limit is a 400
            # (no silent truncation), after the server has tokenized all of it, which is what this measures
            request = {"input": text, "truncate_prompt_tokens": -1}
            async with session.post(server.url + "/v1/embeddings", json=request) as r:
                body = await r.json()
                tally.add(str(r.status), time.monotonic() - t0)
                if r.status == 200:
                    out.setdefault("prompt_tokens", []).append(body["usage"]["prompt_tokens"])

        async def run() -> None:
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=600)) as s:
                await s.post(server.url + "/v1/embeddings", json={"input": "warm"})
                server.reset_peak()
                out["rss_before_mib"] = round(server.status("VmRSS") / (1 << 20), 1)
                await asyncio.gather(*(one(s, t) for t in texts))

        out: dict[str, Any] = {"text_chars": size}
        asyncio.run(run())
        out["peak_rss_growth_mib"] = round(server.status("VmHWM") / (1 << 20) - out["rss_before_mib"], 1)
        time.sleep(1)
        out["rss_after_mib"] = round(server.status("VmRSS") / (1 << 20), 1)
        out.update(tally.summary())
        return out
    finally:
        server.stop()


def slowloris(a: argparse.Namespace) -> dict[str, Any]:
    server = Server(a.src, "--model", "hash:384")
    seconds = 20 if not a.quick else 4
    try:
        base = Tally()
        asyncio.run(load(server.url, 4, seconds / 2, text_maker(6), base))

        async def slow_client(stop: asyncio.Event) -> str:
            try:
                reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
                writer.write(b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\n")
                await writer.drain()
                while not stop.is_set():
                    writer.write(b"X")
                    await writer.drain()
                    await asyncio.sleep(1)
                writer.close()
                return "held"
            except OSError as exc:
                return f"closed by server ({type(exc).__name__})"

        tally = Tally()

        async def run() -> list[str]:
            stop = asyncio.Event()
            slow = [asyncio.create_task(slow_client(stop)) for _ in range(100)]
            await asyncio.sleep(0.5)
            await load(server.url, 4, seconds, text_maker(7), tally)
            stop.set()
            return await asyncio.gather(*slow)

        fates = asyncio.run(run())
        out = {"baseline": base.summary(), "with_100_slow_clients": tally.summary(),
               "slow_clients": {f: fates.count(f) for f in set(fates)}}
        return out
    finally:
        server.stop()


SCENARIOS = {"steady": steady, "overload": overload, "redis": redis_restart, "sigterm": sigterm,
             "bombs": bombs, "bigtexts": bigtexts, "slowloris": slowloris}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--src", required=True, help="python/src of the densewire to test")
    p.add_argument("--scenarios", default=",".join(SCENARIOS))
    p.add_argument("--admission", action="store_true", help="pass --max-concurrent-requests (new servers)")
    p.add_argument("--quick", action="store_true", help="short runs (the test suite's version)")
    p.add_argument("--limit", type=int, default=4,
                   help="overload: --max-concurrent-requests of the server, loaded by 10 times as many connections")
    a = p.parse_args(argv)
    for name in a.scenarios.split(","):
        t0 = time.monotonic()
        result = SCENARIOS[name](a)
        print(json.dumps({"scenario": name, "seconds": round(time.monotonic() - t0, 1), **result}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
