"""Best and median over rounds of benchmark time, with the ratios baseline / benchmark (of the bests, and
the median over rounds of the per-round ratio), from `go test -bench` output holding one
result per benchmark per round (run.sh). Encode benchmarks compare with Encode_JSONBaseline,
decode ones with Decode_JSONBaseline."""
import re
import statistics
import sys
from collections import defaultdict

rounds = defaultdict(list)  # name -> [ns/op per round]
sizes = {}
for line in open(sys.argv[1]):
    m = re.match(r"Benchmark(\S+?)-\d+\s+\d+\s+([\d.]+) ns/op(?:.*?\s([\d.]+) body-B)?", line)
    if m:
        rounds[m.group(1)].append(float(m.group(2)))
        if m.group(3):
            sizes[m.group(1)] = int(float(m.group(3)))

print(f"{'benchmark':34} {'best ms':>10} {'median ms':>10} {'x baseline (best)':>18} {'x baseline (median)':>20} {'body bytes':>11}")
for name, times in rounds.items():
    base = "Encode_JSONBaseline" if name.startswith("Encode") else "Decode_JSONBaseline"
    if name.startswith("Table_"):  # tables: against encoding/json of the objects layout
        base = "Table_Decode_JSONBaseline"
    if name.startswith(("Tokens_", "Sparse_")):  # per-token and sparse output: against TEI's JSON
        base = name.split("_")[0] + "_Decode_TEIJSON"
    if name.startswith("Copy_"):  # PostgreSQL COPY: against the text COPY of pgvector literals
        base = "Copy_Encode_TextBaseline" if name.startswith("Copy_Encode") else "Copy_Decode_TextBaseline"
    ratio = best = ""
    kind = name.split("_")[1] if name.startswith(("Table_", "Copy_", "Tokens_", "Sparse_")) else name.split("_")[0]
    if kind in ("Encode", "Decode") and base in rounds and len(rounds[base]) == len(times):
        ratio = f"{statistics.median(b / t for b, t in zip(rounds[base], times)):.1f}"
        best = f"{min(rounds[base]) / min(times):.1f}"
    print(f"{name:34} {min(times) / 1e6:10.3f} {statistics.median(times) / 1e6:10.3f} {best:>18} {ratio:>20} {sizes.get(name, ''):>11}")
