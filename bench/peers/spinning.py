#!/usr/bin/env python3
"""ONNX Runtime's intra-op threads: sleeping (densewire's default), spinning (ONNX Runtime's and TEI's
default) and spinning stopped between runs (``session.force_spinning_stop``), in one process, rounds
interleaved, densewire's ONNX engine on bench/model's sentences (issue 34: why TEI loses most of its speed
on a busy host).

    .venv/bin/python bench/peers/spinning.py [--rounds 5] [--out bench/peers/results-spinning.json]

Sentences/s at batch 1, 8 and 32 per configuration and round, best, median and the median of the
per-round ratios to the sleeping threads; the load average beside them.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "bench" / "model"))
from bench import sentences  # noqa: E402  (bench/model/bench.py)

CONFIGS = {"sleep": {}, "spin": {"session.intra_op.allow_spinning": "1"},
           "spin-run": {"session.intra_op.allow_spinning": "1", "session.force_spinning_stop": "1"}}
SHARE = {1: 24, 8: 96, 32: 128}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", default=str(HERE / "results-spinning.json"))
    args = ap.parse_args()
    import onnxruntime as ort

    from densewire._backends import OnnxBertBackend, default_model_path
    from densewire._backends.onnx_graph import DISABLED_FUSIONS
    from densewire._bench import machine_info

    texts = sentences(320)
    engines = {}
    for name, entries in CONFIGS.items():
        engine = OnnxBertBackend(default_model_path())  # spinning=False: densewire's session
        if entries:  # the same graph and options, the spinning entries changed
            opts = ort.SessionOptions()
            opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
            opts.inter_op_num_threads = 1
            for key, value in entries.items():
                opts.add_session_config_entry(key, value)
            engine._session = ort.InferenceSession(str(engine.graph_path), opts, providers=["CPUExecutionProvider"],
                                                   disabled_optimizers=list(DISABLED_FUSIONS))
        engines[name] = engine
    rates = {n: {b: [] for b in SHARE} for n in engines}
    loads = [os.getloadavg()]
    names = list(engines)
    for r in range(args.rounds):
        for b, n_texts in SHARE.items():
            share = texts[:n_texts]
            for name in names[r % len(names):] + names[:r % len(names)]:
                time.sleep(0.05)
                t = time.perf_counter()
                for i in range(0, len(share), b):
                    engines[name].embed(share[i:i + b])
                rates[name][b].append(len(share) / (time.perf_counter() - t))
        loads.append(os.getloadavg())
        print(f"round {r + 1}: " + "; ".join(f"{n} " + "/".join(f"{rates[n][b][-1]:.0f}" for b in SHARE) for n in names)
              + f"; load {loads[-1][0]:.1f}", file=sys.stderr)
    out = {"machine": machine_info(("densewire", "onnxruntime", "tokenizers", "numpy")), "loadavg_per_round": loads,
           "command": " ".join(sys.argv), "batches": {}}
    for b in SHARE:
        out["batches"][b] = {n: {"best": max(v[b]), "median": statistics.median(v[b]), "rounds": v[b],
                                 "vs_sleep_median": statistics.median(x / y for x, y in zip(v[b], rates["sleep"][b]))}
                             for n, v in rates.items()}
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    for b in SHARE:
        print(f"batch {b}: " + ", ".join(f"{n} {e['median']:.0f}/s ({e['vs_sleep_median']:.2f}x)"
                                        for n, e in out["batches"][b].items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
