#!/usr/bin/env python3
"""Cold against warm: ``densewire.encode_json`` of a 1000 x 1536 float32 tensor to the JSON + Base64
envelope, the first call in a fresh process (cold) against the median of the next 20 calls in the
same process (warm), with the page faults of each (``resource.getrusage`` minor faults). Side by
side: the previous encoder (a list of parts over one big Base64 string, then ``b"".join``),
measured the same way in fresh processes that alternate with densewire's.

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
NOTE = ("The first call in a process touches memory the process never had: the scratch buffer the envelope is written into and the `bytes` it returns (2 x 8.2 MB, one page fault per 4 KiB). Later calls reuse the scratch buffer, and the returned `bytes` comes from heap memory the previous result gave back: no page faults, where the encoder before made two fresh 8 MB buffers on every call (glibc returned both to the system when they were freed together). Cold within 1.5x of warm is not reached: any result needs fresh memory on a process's first call, and only touching memory ahead of it (at import, for a size densewire cannot know) would hide that cost.")

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


fn = encode_json if sys.argv[1] == "densewire" else joined
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
assert joined(emb) == encode_json(emb)  # the same body (checked after the measurement, which it would warm)
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
    runs: dict[str, list[dict]] = {"densewire": [], "join (before)": []}
    for _ in range(a.processes):
        for name in runs:  # alternate fresh processes of the two encoders
            arg = "densewire" if name == "densewire" else "join"
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
             "warm faults median | cold / warm (medians) |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for name, xs in runs.items():
        cold = [x["cold_ms"] for x in xs]
        warm = [x["warm_ms"] for x in xs]
        lines.append(f"| {name} | {min(cold):.2f} | {statistics.median(cold):.2f} | "
                     f"{statistics.median(x['cold_faults'] for x in xs):,.0f} | {min(warm):.2f} | "
                     f"{statistics.median(warm):.2f} | {statistics.median(x['warm_faults'] for x in xs):,.0f} | "
                     f"{statistics.median(cold) / statistics.median(warm):.1f}x |")
    lines += ["", NOTE, ""]
    Path(a.output).write_text("\n".join(lines))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
