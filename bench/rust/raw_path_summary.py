"""Summarises bench/rust/raw_path.txt (written by raw_path.sh): best and median requests/s of each
(size, route) over the rounds, server CPU per request, the densewire / plain ratios (best over best,
median over median, and the median of each round's own ratio, the pairs having run back to back),
and the callgrind instructions per request.

    python3 bench/rust/raw_path_summary.py bench/rust/raw_path.txt
"""

import re
import statistics
import sys
from collections import defaultdict


def fields(line):
    return dict(re.findall(r"(\w+)=(\S+)", line))


def main(path):
    runs = defaultdict(list)  # (size, route) -> [(round, req/s, client cpu, server cpu)]
    grind = {}
    rnd = 0
    for line in open(path, encoding="utf-8"):
        if line.startswith("# round "):
            rnd = int(line.split()[2])
        elif line.startswith("run "):
            f = fields(line)
            runs[f["size"], f["route"]].append((rnd, float(f["req_per_s"]), float(f["server_cpu_us_per_req"])))
        elif line.startswith("callgrind "):
            f = fields(line)
            grind[f["size"], f["route"]] = int(f["instructions_per_req"])
    sizes = [s for s in ("small", "large") if (s, "plain") in runs]
    print("| size | route | req/s best | req/s median | server CPU µs/req (median) |")
    print("|---|---|---:|---:|---:|")
    for size in sizes:
        for route in ("plain", "densewire"):
            r = runs[size, route]
            rates = [x[1] for x in r]
            print(
                f"| {size} | {route} | {max(rates):,.0f} | {statistics.median(rates):,.0f} "
                f"| {statistics.median(x[2] for x in r):,.0f} |"
            )
    print()
    print("| size | densewire / plain, best | median | median of per-round ratios | rounds |")
    print("|---|---:|---:|---:|---:|")
    for size in sizes:
        p = {x[0]: x[1] for x in runs[size, "plain"]}
        d = {x[0]: x[1] for x in runs[size, "densewire"]}
        paired = [d[k] / p[k] for k in p if k in d]
        print(
            f"| {size} | {max(d.values()) / max(p.values()):.3f} "
            f"| {statistics.median(d.values()) / statistics.median(p.values()):.3f} "
            f"| {statistics.median(paired):.3f} | {len(paired)} |"
        )
    if grind:
        print()
        print("| size | plain instructions/req | densewire instructions/req | densewire / plain |")
        print("|---|---:|---:|---:|")
        for size in sizes:
            if (size, "plain") in grind and (size, "densewire") in grind:
                a, b = grind[size, "plain"], grind[size, "densewire"]
                print(f"| {size} | {a:,} | {b:,} | {b / a:.3f} |")


if __name__ == "__main__":
    main(sys.argv[1])
