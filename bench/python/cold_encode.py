#!/usr/bin/env python3
"""Cold against warm: ``densewire.encode_json`` of a 1000 x 1536 float32 tensor to the JSON + Base64
envelope, the first call in a fresh process (cold) against the median of the next 20 calls in the
same process (warm), with the page faults of each (``resource.getrusage`` minor faults). Side by
side, in fresh processes that alternate round by round: densewire's encoder (written straight into
the returned ``bytes``, its pages backed in one ``madvise`` call), the same without that prefault,
and the two encoders before it (a reused scratch buffer copied into the result; a list of parts over
one big Base64 string, then ``b"".join``).

    .venv/bin/python bench/python/cold_encode.py        # writes bench/python/RESULTS-cold-encode.md
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
NOTE = ("The first call in a process writes into memory the process never had. densewire writes the envelope "
        "straight into the `bytes` it returns (CPython's `PyBytes_FromStringAndSize(NULL, n)`, through "
        "`densewire._outbuf.OutBuffer`): one 8.2 MB allocation a call, where the scratch-buffer encoder had the "
        "scratch buffer and the result (two on the first call) and copied one into the other on every call. When "
        "`mincore` shows that the result's pages are not resident yet (a fresh glibc mapping: the first call), "
        "they are backed in one go: `MADV_HUGEPAGE` on the whole 2 MiB pages inside the range (THP is in "
        "`madvise` mode here) and `MADV_POPULATE_WRITE` on all of it, instead of a trap per 4 KiB as the encoder "
        "writes. getrusage still counts the pages the kernel populates for it (about 500: the 4 KiB pages outside "
        "the huge pages), but they cost no trap each. 'without the prefault' is the same encoder with that step "
        "switched off (`PREFAULT_MIN` raised): writing into the result halves the faults, the prefault does the "
        "rest. Warm calls are faster too: no 8 MB copy out of a scratch buffer.")

CHILD = r"""
import json, resource, statistics, sys, time
import numpy as np, pybase64
import densewire
from densewire._json import encode_json

n, d = int(sys.argv[2]), int(sys.argv[3])
values = np.random.default_rng(0).standard_normal((n, d), dtype=np.float32)
emb = densewire.Embeddings(densewire.Tensor.from_array(values), "bench", densewire.Usage(n, n))


def joined(emb):  # the encoder before the scratch buffer, as it was
    t, u = emb.tensor, emb.usage
    tail = b'],"model":"bench","usage":{"prompt_tokens":%d,"total_tokens":%d},"dtype":"float32",' \
           b'"byteorder":"little","dimensions":%d}' % (u.prompt_tokens, u.total_tokens, t.d)
    whole = memoryview(pybase64.b64encode(t.to_bytes("little")))
    w = t.d * 4 // 3 * 4
    parts = [b'{"object":"list","data":[']
    for i in range(t.n):
        parts.append(b'%s{"object":"embedding","index":%d,"embedding":"' % (b"," if i else b"", i))
        parts.append(whole[i * w:(i + 1) * w])
        parts.append(b'"}')
    parts.append(tail)
    return b"".join(parts)


_SCRATCH = []


def scratch(emb):  # the encoder before writing into the result: a reused scratch buffer, then tobytes()
    from densewire._json import _HEAD, _PRE1, _PRE2, _POST
    from densewire._tensor import row_bytes
    t = emb.tensor
    u = emb.usage
    tail = b'],"model":"bench","usage":{"prompt_tokens":%d,"total_tokens":%d},"dtype":"float32",' \
           b'"byteorder":"little","dimensions":%d}' % (u.prompt_tokens, u.total_tokens, t.d)
    n, rb = t.n, row_bytes(t.dtype, t.d)
    w = (rb + 2) // 3 * 4
    raw = memoryview(t.to_bytes("little")).cast("B")
    groups, lo, digits = [], 0, 1
    while lo < n:
        hi = 1 if lo == 0 else min(n, 10 ** digits)
        groups.append((lo, hi, digits, 1 if lo else 0))
        lo = hi
        digits = len(str(hi))
    fixed = len(_PRE1) + len(_PRE2) + w + len(_POST)
    size = len(_HEAD) + len(tail) + sum((hi - lo) * (comma + fixed + nd) for lo, hi, nd, comma in groups)
    buf = _SCRATCH.pop() if _SCRATCH else bytearray()
    if len(buf) < size:
        buf = bytearray(size)
    out = np.frombuffer(buf, np.uint8)
    a = lambda b: np.frombuffer(b, np.uint8)
    out[:len(_HEAD)] = a(_HEAD)
    pos = len(_HEAD)
    per_chunk = max(1, (48 << 10) // rb)
    for lo, hi, nd, comma in groups:
        stride = comma + fixed + nd
        block = out[pos:pos + (hi - lo) * stride].reshape(hi - lo, stride)
        col = comma
        if comma:
            block[:, 0] = 0x2C
        block[:, col:col + len(_PRE1)] = a(_PRE1)
        col += len(_PRE1)
        index = np.arange(lo, hi)
        for k in range(nd):
            block[:, col + k] = index // 10 ** (nd - 1 - k) % 10 + 0x30
        col += nd
        block[:, col:col + len(_PRE2)] = a(_PRE2)
        col += len(_PRE2)
        for c0 in range(lo, hi, per_chunk):
            c1 = min(hi, c0 + per_chunk)
            enc = pybase64.b64encode(raw[c0 * rb:c1 * rb])
            block[c0 - lo:c1 - lo, col:col + w] = np.frombuffer(enc, np.uint8).reshape(c1 - c0, w)
        col += w
        block[:, col:col + len(_POST)] = a(_POST)
        pos += (hi - lo) * stride
    out[pos:pos + len(tail)] = a(tail)
    pos += len(tail)
    result = out[:pos].tobytes()
    del out, block
    _SCRATCH.append(buf)
    return result


if sys.argv[1] == "densewire-no-prefault":
    import densewire._outbuf
    densewire._outbuf.PREFAULT_MIN = 1 << 62
fn = {"densewire": encode_json, "densewire-no-prefault": encode_json, "scratch": scratch, "join": joined}[sys.argv[1]]
faults = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_minflt
f0, t0 = faults(), time.perf_counter()
out = fn(emb)
cold, cold_faults = time.perf_counter() - t0, faults() - f0
size = len(out)
del out
warm, warm_faults = [], []
for _ in range(20):
    f0, t0 = faults(), time.perf_counter()
    out = fn(emb)
    warm.append(time.perf_counter() - t0)
    warm_faults.append(faults() - f0)
    del out
assert joined(emb) == encode_json(emb) == scratch(emb)  # the same body (checked after the measurement, which it would warm)
print(json.dumps({"cold_ms": cold * 1e3, "cold_faults": cold_faults, "warm_ms": statistics.median(warm) * 1e3,
                  "warm_faults": statistics.median(warm_faults), "bytes": size}))
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=15, help="fresh processes per encoder (default 15)")
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--d", type=int, default=1536)
    parser.add_argument("--output", default=str(HERE / "RESULTS-cold-encode.md"))
    a = parser.parse_args()
    variants = {"densewire (into the result, prefaulted)": "densewire", "densewire without the prefault": "densewire-no-prefault",
                "scratch buffer (before)": "scratch", "join (before that)": "join"}
    runs: dict[str, list[dict]] = {name: [] for name in variants}
    for _ in range(a.processes):
        for name, arg in variants.items():  # alternate fresh processes of the encoders
            out = subprocess.run([sys.executable, "-c", CHILD, arg, str(a.n), str(a.d)], capture_output=True, text=True,
                                 check=True)
            runs[name].append(json.loads(out.stdout))
    from densewire._bench import machine_info

    info = machine_info()
    lines = [f"# Cold and warm JSON + Base64 encode ({a.n} x {a.d} float32)", "",
             f"Run {datetime.date.today().isoformat()}: `.venv/bin/python bench/python/cold_encode.py --processes "
             f"{a.processes}`", "",
             f"Machine: {info['cpu']}, {info['cores']} cores (shared with other jobs while measured: load average "
             f"{os.getloadavg()[0]:.1f}), Python {info['python']}, numpy {info['numpy']}, pybase64 {info['pybase64']}; "
             f"OPENBLAS_CORETYPE {os.environ.get('OPENBLAS_CORETYPE', 'unset')}, OPENBLAS_L2_SIZE "
             f"{os.environ.get('OPENBLAS_L2_SIZE', 'unset')}.", "",
             "Cold: the first call in a fresh process; warm: the median of the next 20 calls in that process. "
             f"{a.processes} fresh processes per encoder, alternating. Best and median over the processes.", "",
             "| encoder | cold ms best | cold ms median | cold faults median | warm ms best | warm ms median | "
             "warm faults median | cold / warm (medians) | cold / warm (median of each process's own) |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name, xs in runs.items():
        cold = [x["cold_ms"] for x in xs]
        warm = [x["warm_ms"] for x in xs]
        lines.append(f"| {name} | {min(cold):.2f} | {statistics.median(cold):.2f} | "
                     f"{statistics.median(x['cold_faults'] for x in xs):,.0f} | {min(warm):.2f} | "
                     f"{statistics.median(warm):.2f} | {statistics.median(x['warm_faults'] for x in xs):,.0f} | "
                     f"{statistics.median(cold) / statistics.median(warm):.2f}x | "
                     f"{statistics.median(x['cold_ms'] / x['warm_ms'] for x in xs):.2f}x |")
    lines += ["", NOTE, ""]
    lines += ["", f"Load average at the end: {os.getloadavg()[0]:.1f}."]
    Path(a.output).write_text("\n".join(lines))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
