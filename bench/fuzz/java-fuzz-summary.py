#!/usr/bin/env python3
"""Summarises a `mvn test -pl densewire-fuzz` log (java/densewire-fuzz): per Jazzer target, the executions, the
seconds they took, the coverage reached and any finding, as the table of bench/fuzz/RESULTS-java.md.

    python3 bench/fuzz/java-fuzz-summary.py fuzz.log
"""
import re
import sys

rows = []
target = None
for line in open(sys.argv[1], errors="replace"):
    m = re.search(r"Running dev\.densewire\.fuzz\.(\w+)", line)
    if m:
        target = {"name": m.group(1), "runs": 0, "secs": 0, "cov": "", "seeds": "", "finding": ""}
        rows.append(target)
        continue
    if target is None:
        continue
    m = re.search(r"#\d+\s+(?:DONE|NEW|REDUCE|INITED|pulse)\s+cov: (\d+) ft: (\d+)", line)
    if m:
        target["cov"] = f"{m.group(1)} / {m.group(2)}"
    m = re.search(r"Done (\d+) runs in (\d+) second", line)
    if m:
        target["runs"], target["secs"] = int(m.group(1)), int(m.group(2))
    m = re.search(r"INFO: seed corpus: files: (\d+)", line)
    if m:
        target["seeds"] = m.group(1)
    m = re.search(r"FuzzTestFindingException: (.*)", line)
    if m and not target["finding"]:
        target["finding"] = m.group(1).strip()[:140]

print("| target | seed inputs | executions | seconds | coverage (edges / features) | finding |")
print("|---|---|---|---|---|---|")
for r in rows:
    print(f"| {r['name']} | {r['seeds']} | {r['runs']} | {r['secs']} | {r['cov']} | {r['finding'] or 'none'} |")
