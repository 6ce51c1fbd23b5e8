#!/usr/bin/env python3
"""Reproduce the published comparison: 1,000 embeddings of 1,536 float32 dimensions sent as JSON
float arrays vs packed float32 Base64 inside JSON (payload size, Python serialization time, Python
deserialization time), with every other format of SPEC.md measured in the same run.

    .venv/bin/python bench/python/published_case.py            # writes bench/python/RESULTS.md
    .venv/bin/python bench/python/published_case.py --check    # also exit 1 if a target is missed

Published figures (JSON floats vs Base64): payload -75%, serialization 3,140 ms -> 45 ms (-98.5%).
"""

from __future__ import annotations

import argparse
import datetime
import sys
from pathlib import Path

from densewire import _bench

HERE = Path(__file__).resolve().parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--d", type=int, default=1536)
    parser.add_argument("--min-time", type=float, default=1.0)
    parser.add_argument("--check", action="store_true", help="exit 1 when a target of issue 2 is missed")
    parser.add_argument("--output", default=str(HERE / "RESULTS.md"))
    args = parser.parse_args()
    results = _bench.run_bench(args.n, args.d, "float32", min_repeat=7, min_time=args.min_time,
                               progress=lambda m: print(m, file=sys.stderr, flush=True))
    by = {r.codec: r for r in results}
    std, orj, b64, ref = by["json-stdlib"], by["json-orjson"], by["json-base64"], by["pybase64-only"]
    targets = [
        ("JSON+Base64 encode vs orjson floats", orj.encode_ms / b64.encode_ms, ">=", 10),
        ("JSON+Base64 decode vs orjson floats", orj.decode_ms / b64.decode_ms, ">=", 10),
        ("JSON+Base64 encode vs stdlib json .tolist()", std.encode_ms / b64.encode_ms, ">=", 50),
        ("JSON+Base64 decode vs stdlib json", std.decode_ms / b64.decode_ms, ">=", 50),
        ("JSON+Base64 decode / pybase64 decode of the same bytes", b64.decode_ms / ref.decode_ms, "<=", 3),
    ]
    info = _bench.machine_info()
    lines = [
        "# Python codecs: the published case and every format side by side", "",
        f"Measured {datetime.date.today().isoformat()} by `.venv/bin/python bench/python/published_case.py` "
        f"(median of at least 7 runs and {args.min_time:g} s per measurement, one process, same array).", "",
        "Machine and versions: " + ", ".join(f"{k} {v}" for k, v in info.items()) + ".", "",
        "```", _bench.format_table(results, args.n, args.d, "float32"), "```", "",
        "## Against the published figures", "",
        "| | published | measured here |", "|---|---|---|",
        f"| payload, Base64 vs JSON floats | -75% | {100 * (b64.size / std.size - 1):+.1f}% vs stdlib json, "
        f"{100 * (b64.size / orj.size - 1):+.1f}% vs orjson's shortest floats |",
        f"| serialization, JSON floats -> Base64 | 3,140 ms -> 45 ms (-98.5%) | {std.encode_ms:,.0f} ms -> "
        f"{b64.encode_ms:,.2f} ms ({100 * (b64.encode_ms / std.encode_ms - 1):+.2f}%) |",
        f"| deserialization, JSON floats -> Base64 | | {std.decode_ms:,.0f} ms -> {b64.decode_ms:,.2f} ms "
        f"({100 * (b64.decode_ms / std.decode_ms - 1):+.2f}%) |", "",
        "## Targets (issue 2)", "", "| target | measured | required | met |", "|---|---|---|---|",
    ]
    missed = 0
    for name, value, op, bound in targets:
        ok = value >= bound if op == ">=" else value <= bound
        missed += not ok
        lines.append(f"| {name} | {value:,.1f}x | {op} {bound}x | {'yes' if ok else 'NO'} |")
    zero = {r.codec: r.zero_copy for r in results if r.codec in ("raw", "msgpack", "protobuf", "arrow")}
    lines += ["", "Decoded without copying the vector data (the array lies inside the received body): " +
              ", ".join(f"{k} {'yes' if v else 'NO'}" for k, v in zero.items()) + ".", ""]
    missed += sum(not v for v in zero.values())
    Path(args.output).write_text("\n".join(lines))
    print("\n".join(lines))
    return 1 if args.check and missed else 0


if __name__ == "__main__":
    sys.exit(main())
