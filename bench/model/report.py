"""Markdown tables from bench.py's results.json (pasted into RESULTS.md).

    python bench/model/report.py bench/model/results.json
"""

from __future__ import annotations

import json
import sys


def fmt_ratio(r: list[float] | None) -> str:
    return f"{r[0]:.2f} / {r[1]:.2f} / {r[2]:.2f}" if r else "1"


def main() -> None:
    res = json.load(open(sys.argv[1]))
    if "in_process" in res:
        peak = res["gemm_peak_flops"]
        print(f"GEMM peak (numpy fp32, 1024^3, {res['threads']} threads): best {peak['best'] / 1e9:.1f} GFLOP/s, "
              f"median {peak['median'] / 1e9:.1f}")
    print(f"load average at start {res['loadavg_start']}, at end {res.get('loadavg_end')}\n")
    if "in_process" in res:
        print("In process, sentences/s: best / median (per-round ratio to numpy: min / median / max); "
              "FLOP utilization best / median\n")
        print("| engine | batch | best | median | vs numpy per round | FLOP util. best | median |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        for name, per in res["in_process"].items():
            for b, e in per.items():
                print(f"| {name} | {b} | {e['best']:.1f} | {e['median']:.1f} | "
                      f"{fmt_ratio(e.get('vs_numpy_per_round'))} | {100 * e['flop_utilization_best']:.1f} % | "
                      f"{100 * e['flop_utilization_median']:.1f} % |")
    if "http" in res:
        print("\nOver HTTP, sentences/s: best / median; per-round ratios min / median / max\n")
        print("| server | requests | best | median | vs numpy | vs infinity |")
        print("|---|---|---:|---:|---:|---:|")
        for name, per in res["http"].items():
            for m, e in per.items():
                label = {"1x8": "1 sentence, 8 in flight (aiohttp)", "1x8-wrk": "1 sentence, 8 in flight (wrk)",
                         "32x2": "32 sentences, 2 in flight (aiohttp)"}.get(m, m)
                print(f"| {name} | {label} | {e['best']:.1f} | {e['median']:.1f} | "
                      f"{fmt_ratio(e.get('vs_numpy_per_round')) if name != 'numpy' else '1'} | "
                      f"{fmt_ratio(e.get('vs_infinity_per_round')) if name != 'infinity' else '1'} |")
    key = next((k for k in res if k.startswith("cosine_vs_")), None)
    if key is None:
        return
    print(f"\nCosine against {key[len('cosine_vs_'):]} on the {res['sentences']} sentences\n")
    print("| engine | min | mean | max abs diff |")
    print("|---|---:|---:|---:|")
    for name, c in res[key].items():
        print(f"| {name} | {c['min']:.7f} | {c['mean']:.7f} | {c['max_abs_diff']:.2e} |")
    if "cosine_int8_vs_float32" in res:
        c = res["cosine_int8_vs_float32"]
        print(f"\nint8 vs float32 (ONNX): min {c['min']:.4f}, 1st percentile {c['p01']:.4f}, mean {c['mean']:.4f}")
    print("\nload seconds (wall, this run):", {k: round(v, 2) for k, v in res["load_seconds"].items()})
    print("machine:", json.dumps(res["machine"]))


if __name__ == "__main__":
    main()
