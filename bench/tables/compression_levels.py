#!/usr/bin/env python3
"""Which ``--table-compression`` levels let the demo tables be ready within about 10 s of start, and
what the slow maximum levels gain in bytes.

    .venv/bin/python bench/tables/compression_levels.py            # writes bench/tables/RESULTS-compression.md
    .venv/bin/python bench/tables/compression_levels.py --rounds 3 --ready-rounds 2

Two measurements, each in interleaved rounds (every candidate once per round), best and median:

* **levels**: the 14 bodies of the demo tables (``points`` and ``points_f32``, 7 formats each) compressed
  with gzip, zstd and br at each level, in this process, one at a time (what the server's one
  compression process does): seconds for all 14 bodies, and their total bytes;
* **ready**: ``densewire serve --model hash:64 --table-compression PRESET`` started, and the seconds
  from the process start until ``GET /v1/tables`` lists both demo tables as ``ready`` (every format
  and compression built).
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "python" / "src"))

import densewire  # noqa: E402
from densewire import TABLE_FORMATS, encode_table  # noqa: E402
from densewire._server.tables.build import compress_body  # noqa: E402
from densewire._server.tables.config import COMPRESSION_PRESETS  # noqa: E402

HERE = Path(__file__).resolve().parent
LEVELS = {"gzip": [1, 4, 6, 9], "zstd": [1, 3, 9, 19], "br": [1, 4, 5, 11]}
#: levels slower than a few seconds per round: measured in the first round only
SLOW = {("gzip", 9), ("zstd", 19), ("br", 11)}
#: br 11 takes minutes of CPU for the 14 bodies: only with --with-br11
BR11 = ("br", 11)


def bodies() -> list[tuple[str, str, bytes]]:
    out = []
    for name, coords in (("points", "float64"), ("points_f32", "float32")):
        table = densewire.demo_table(coordinates=coords)
        for fmt in TABLE_FORMATS:
            out.append((name, fmt, bytes(encode_table(table, fmt))))
    return out


def free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ready_seconds(preset: str, timeout: float) -> float:
    port = free_port()
    exe = str(Path(sys.executable).parent / "densewire")
    with tempfile.TemporaryFile() as log:
        t0 = time.perf_counter()
        proc = subprocess.Popen([exe, "serve", "--model", "hash:64", "--port", str(port), "--table-compression", preset],
                                stdout=log, stderr=subprocess.STDOUT)
        try:
            while time.perf_counter() - t0 < timeout:
                try:
                    doc = httpx.get(f"http://127.0.0.1:{port}/v1/tables", timeout=5).json()
                    if len(doc["data"]) == 2 and all(t["status"] == "ready" for t in doc["data"]):
                        return time.perf_counter() - t0
                except (httpx.HTTPError, ValueError, KeyError):
                    pass
                if proc.poll() is not None:
                    log.seek(0)
                    raise RuntimeError(f"densewire serve exited: {log.read().decode()[-2000:]}")
                time.sleep(0.1)
            raise RuntimeError(f"{preset}: not ready after {timeout} s")
        finally:
            proc.terminate()
            proc.wait(30)


def fmt_s(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} / {min(values):.2f}" if len(values) > 1 else f"{values[0]:.2f} (1 run)"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3, help="rounds of the level sweep (default 3)")
    ap.add_argument("--ready-rounds", type=int, default=3, help="server starts per preset (default 3)")
    ap.add_argument("--presets", nargs="+", default=["fast"], help="presets of the ready measurement")
    ap.add_argument("--max-ready-rounds", type=int, default=1, help="server starts for the max preset (slow)")
    ap.add_argument("--with-br11", action="store_true", help="also br 11 (minutes of CPU)")
    ap.add_argument("--output", default=str(HERE / "RESULTS-compression.md"))
    args = ap.parse_args()
    load_start = Path("/proc/loadavg").read_text().strip() if Path("/proc/loadavg").exists() else "n/a"
    data = bodies()
    identity = sum(len(b) for _, _, b in data)
    times: dict[tuple[str, int], list[float]] = {}
    sizes: dict[tuple[str, int], int] = {}
    per_format: dict[tuple[str, int], dict[tuple[str, str], int]] = {}
    for r in range(args.rounds):
        for coding, levels in LEVELS.items():
            for level in levels:
                if (coding, level) in SLOW and r > 0 or ((coding, level) == BR11 and not args.with_br11):
                    continue
                total = 0.0
                nbytes = 0
                pf = {}
                for name, fmt, body in data:
                    c0 = time.process_time()
                    out, _ = compress_body(body, coding, level)
                    total += time.process_time() - c0  # CPU seconds: robust on a machine shared with other work
                    nbytes += len(out)
                    pf[(name, fmt)] = len(out)
                times.setdefault((coding, level), []).append(total)
                sizes[(coding, level)] = nbytes
                per_format[(coding, level)] = pf
                print(f"round {r + 1}: {coding} {level}: {total:.2f} s, {nbytes:,} bytes", file=sys.stderr, flush=True)
    ready: dict[str, list[float]] = {}
    for r in range(args.ready_rounds):
        for preset in args.presets:
            if preset == "max" and r >= args.max_ready_rounds:
                continue
            s = ready_seconds(preset, timeout=900)
            ready.setdefault(preset, []).append(s)
            print(f"round {r + 1}: ready with {preset}: {s:.1f} s", file=sys.stderr, flush=True)
    load_end = Path("/proc/loadavg").read_text().strip() if Path("/proc/loadavg").exists() else "n/a"
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    import brotli
    import zstandard
    lines = [
        "# Table compression levels: time to a ready demo, and what the maximum levels gain",
        "",
        f"Measured {datetime.date.today()} by `.venv/bin/python bench/tables/compression_levels.py "
        f"--rounds {args.rounds} --ready-rounds {args.ready_rounds}"
        f"{' --with-br11' if args.with_br11 else ''}`.",
        "",
        f"Machine: {cpu}, {os.cpu_count()} CPUs, Python {platform.python_version()}, densewire {densewire.__version__}, "
        f"brotli {brotli.__version__}, zstandard {zstandard.__version__}, zlib {__import__('zlib').ZLIB_VERSION}; "
        f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', 'unset')}, "
        f"OPENBLAS_L2_SIZE={os.environ.get('OPENBLAS_L2_SIZE', 'unset')}.",
        "",
        f"Load average at start `{load_start}`, at end `{load_end}` (a machine shared with other builds: expect "
        "noise; median / best).",
        "",
        "## Ready after start",
        "",
        "`densewire serve --model hash:64 --table-compression PRESET`: seconds from the process start until "
        "`GET /v1/tables` lists `points` and `points_f32` as `ready` (7 formats x identity, gzip, zstd, br "
        "built in the build processes).",
        "",
        "| preset | levels (gzip, zstd, br) | ready after s, median / best |",
        "|---|---|---:|",
    ]
    for preset, values in ready.items():
        lv = COMPRESSION_PRESETS[preset]
        lines.append(f"| `{preset}` | {lv.get('gzip', '-')}, {lv.get('zstd', '-')}, {lv.get('br', '-')} | {fmt_s(values)} |")
    lines += [
        "",
        "## Levels",
        "",
        f"The 14 bodies of both demo tables ({identity:,} bytes uncompressed), compressed one at a time in "
        "this process; CPU seconds of this process for all 14 (`time.process_time`, so that other work on the machine "
        "does not inflate them; median / best; the slowest levels once) and their total bytes.",
        "",
        "| coding | level | CPU seconds | bytes | % of identity |",
        "|---|---:|---:|---:|---:|",
    ]
    for (coding, level), values in times.items():
        lines.append(f"| {coding} | {level} | {fmt_s(values)} | {sizes[(coding, level)]:,} | "
                     f"{100 * sizes[(coding, level)] / identity:.1f} |")
    d, m = COMPRESSION_PRESETS["fast"], COMPRESSION_PRESETS["max"]
    measured = [c for c in ("gzip", "zstd", "br") if (c, m[c]) in per_format and (c, d[c]) in per_format]
    lines += [
        "",
        "## What `max` gains over the default, per body",
        "",
        "Bytes of each body at the default level and at `max`, by coding; the gain is the share of bytes `max` saves.",
        "",
        "| table | format | " + " | ".join(f"{c} {d[c]} -> {m[c]}" for c in measured) + " |",
        "|---|---|" + "---:|" * len(measured),
    ]
    for name, fmt, _ in data:
        cells = []
        for c in measured:
            a, b = per_format[(c, d[c])][(name, fmt)], per_format[(c, m[c])][(name, fmt)]
            cells.append(f"{a:,} -> {b:,} ({100 * (a - b) / a:.1f} %)")
        lines.append(f"| {name} | {fmt} | " + " | ".join(cells) + " |")
    Path(args.output).write_text("\n".join(lines) + "\n")
    print(f"wrote {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
