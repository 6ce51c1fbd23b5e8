#!/usr/bin/env python3
"""How much float32 embeddings shrink under HTTP compression, and what it costs: real vectors of
the built-in model (all-MiniLM-L6-v2, 384 dimensions), as the raw body densewire sends, through
gzip, zstd and brotli at the levels servers use, with the memory copy of the same bytes as the
reference. It is why densewire's Python client asks for ``Accept-Encoding: identity``.

    .venv/bin/python bench/python/compression.py     # writes bench/python/RESULTS-compression.md
"""

from __future__ import annotations

import argparse
import datetime
import gzip
import os
import statistics
import time
from pathlib import Path

import brotli
import numpy as np
import zstandard

from densewire.server import load_backend
from densewire._bench import machine_info

HERE = Path(__file__).resolve().parent


def timed(fn, data: bytes, rounds: int) -> tuple[bytes, float]:
    """The output and the median seconds of ``rounds`` calls."""
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        out = fn(data)
        times.append(time.perf_counter() - t0)
    return out, statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=256, help="sentences to embed (default 256)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--output", default=str(HERE / "RESULTS-compression.md"))
    a = parser.parse_args()

    texts = [f"sentence {i}: the weather in city {i % 17} is {['mild', 'cold', 'wet'][i % 3]} today"
             for i in range(a.n)]
    vectors = np.asarray(load_backend("minilm").embed(texts), dtype="<f4")
    raw = vectors.tobytes()
    codecs = [
        ("memory copy (reference)", bytearray, bytes),  # each a real copy of the body
        ("gzip -1", lambda d: gzip.compress(d, 1), gzip.decompress),
        ("gzip -6", lambda d: gzip.compress(d, 6), gzip.decompress),
        ("zstd -3", zstandard.ZstdCompressor(level=3).compress, zstandard.ZstdDecompressor().decompress),
        ("zstd -19", zstandard.ZstdCompressor(level=19).compress, zstandard.ZstdDecompressor().decompress),
        ("brotli 4", lambda d: brotli.compress(d, quality=4), brotli.decompress),
        ("brotli 11", lambda d: brotli.compress(d, quality=11), brotli.decompress),
    ]
    mb = len(raw) / 1e6
    lines = [f"{'coding':<24}{'bytes':>10}{'size':>8}{'compress MB/s':>15}{'decompress MB/s':>17}"]
    for name, enc, dec in codecs:
        body, t_enc = timed(enc, raw, a.rounds)
        back, t_dec = timed(dec, body, a.rounds)
        assert back == raw, name
        lines.append(f"{name:<24}{len(body):>10,}{100 * len(body) / len(raw):>7.1f}%{mb / t_enc:>15,.0f}{mb / t_dec:>17,.0f}")
    info = machine_info()
    report = "\n".join([
        "# Compression of float32 embeddings",
        "",
        f"{a.n} x {vectors.shape[1]} float32 vectors of all-MiniLM-L6-v2 ({len(raw):,} bytes, the raw body), "
        f"median of {a.rounds} rounds, {datetime.date.today()}, load average {os.getloadavg()[0]:.2f}.",
        f"Machine: {info['cpu']}, {info['cores']} cores, Python {info['python']}, numpy {info['numpy']}, "
        f"zstandard {zstandard.__version__}, brotli {brotli.__version__}.",
        "Command: `.venv/bin/python bench/python/compression.py`",
        "",
        "```",
        *lines,
        "```",
        "",
    ])
    Path(a.output).write_text(report)
    print(report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
