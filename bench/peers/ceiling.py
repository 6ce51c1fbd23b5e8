#!/usr/bin/env python3
"""The engines without the servers: how fast each model engine embeds peers.py's loads in one process, and
how much of that each server delivers over HTTP (issue 34).

    .venv/bin/python bench/peers/ceiling.py [--rounds 5] [--peers bench/peers/results.json]

Contenders, each on 2 intra-op threads (this machine's cores), from token ids to pooled vectors (tokenization
is outside the clock for every one; peers.py's servers tokenize too):

  tei-graph          TEI's model call: ONNX Runtime on the standard export TEI's ORT backend reads
                     (``onnx/model.onnx``, made by peers.py), TEI's session settings (level-3 optimizations,
                     intra-op threads = cores, ONNX Runtime's default spinning), inputs padded to the batch's
                     longest, at most 8 inputs a call (TEI's ORT backend forces ``max_batch_requests=8``),
                     mean pooling and L2 in numpy
  onnx-fp32          densewire's ONNX engine (the packed graph; ``densewire-fp32``'s engine)
  openvino-fp32      densewire's OpenVINO engine in f32 (``densewire-fp32-openvino``'s)
  openvino-bf16      densewire's OpenVINO engine in bf16, where the CPU multiplies bf16 (the defaults here)

Batches: each load's texts (peers.py ``texts_for``) in the calls densewire's server forms for it: 8x1 in
calls of 8 (its 8 lock-step clients' requests merged), 32 in calls of 64 (both requests in flight merged),
long in calls of 8, mixed in its requests as sent. tei-graph cuts every call into calls of at most 8.
Rounds interleave the contenders (rotated order); reported per load: texts/s median and best, CPU ms a text
(process time), and the median per-round ratio to tei-graph. With ``--peers FILE`` (a peers.py result) each
server's median sentences/s over HTTP is set against its engine's median here: the share of the engine's
own rate the server delivers with HTTP, JSON, tokenization, batching and the load generator on the same
cores. Writes bench/peers/results-ceiling.json.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT / "python" / "src"))
_spec = importlib.util.spec_from_file_location("peers", HERE / "peers.py")
peers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(peers)

CALLS = {"8x1": 8, "32": 64, "long": 8, "mixed": None}  # texts a call; None: the load's requests as sent


def tei_graph(folder: Path, threads: int) -> Callable[[list[list[int]]], np.ndarray]:
    """TEI's ORT model call on ``folder``'s standard export, mean-pooled and normalized as TEI answers."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.intra_op_num_threads = threads
    session = ort.InferenceSession(str(folder / "onnx" / "model.onnx"), opts, providers=["CPUExecutionProvider"])

    def call(seqs: list[list[int]]) -> np.ndarray:
        out = []
        for at in range(0, len(seqs), 8):
            part = seqs[at:at + 8]
            width = max(map(len, part))
            ids = np.zeros((len(part), width), np.int64)
            mask = np.zeros_like(ids)
            for i, s in enumerate(part):
                ids[i, :len(s)] = s
                mask[i, :len(s)] = 1
            (hidden,) = session.run(["last_hidden_state"], {"input_ids": ids, "attention_mask": mask,
                                                            "token_type_ids": np.zeros_like(ids)})
            pooled = (hidden * mask[:, :, None]).sum(1) / mask.sum(1, keepdims=True)
            out.append(pooled / np.linalg.norm(pooled, axis=1, keepdims=True))
        return np.concatenate(out).astype(np.float32)

    return call


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--peers", help="a peers.py results file: each server's rate against its engine's")
    ap.add_argument("--out", default=str(HERE / "results-ceiling.json"))
    args = ap.parse_args()

    from tokenizers import Tokenizer

    from densewire._backends import OnnxBertBackend, default_model_path
    from densewire._backends.openvino_bert import OpenVinoBertBackend
    from densewire._backends.precision import cpu_flags, native_precision
    from densewire._bench import machine_info

    folder = default_model_path()
    onnx_fp32 = OnnxBertBackend(folder, threads=args.threads)
    tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tok.no_truncation()
    tok.no_padding()
    loads = peers.texts_for(tok)
    tok.enable_truncation(onnx_fp32.max_tokens)  # as the servers cut (TEI's call gets the same ids)
    calls: dict[str, list[list[list[int]]]] = {}
    for ld, reqs in loads.items():
        if ld not in CALLS:  # 8x1-wrk: 8x1's texts from another client
            continue
        if CALLS[ld] is None:
            calls[ld] = [[e.ids for e in tok.encode_batch(r)] for r in reqs]
        else:
            flat = [e.ids for e in tok.encode_batch([t for r in reqs for t in r])]
            calls[ld] = [flat[i:i + CALLS[ld]] for i in range(0, len(flat), CALLS[ld])]

    engines: dict[str, Callable[[list[list[int]]], np.ndarray]] = {
        "tei-graph": tei_graph(peers.tei_folder(folder), args.threads),
        "onnx-fp32": onnx_fp32.embed_encoded,
        "openvino-fp32": OpenVinoBertBackend(folder, precision="fp32", threads=args.threads).embed_encoded,
    }
    # the engine behind each peers.py server
    engine_of_server = {"tei": "tei-graph", "densewire-fp32": "onnx-fp32", "densewire-fp32-openvino": "openvino-fp32"}
    if native_precision(cpu_flags()) == "bf16":
        engines["openvino-bf16"] = OpenVinoBertBackend(folder, precision="bf16", threads=args.threads).embed_encoded
        engine_of_server["densewire"] = "openvino-bf16"
    sample = calls["mixed"][0] + calls["long"][0]
    ref = engines["onnx-fp32"](sample)
    agree = {n: float(np.abs(e(sample) - ref).max()) for n, e in engines.items()}
    print(f"largest difference to onnx-fp32: {agree}", file=sys.stderr)

    names = list(engines)
    rates: dict[str, dict[str, list[float]]] = {n: {ld: [] for ld in calls} for n in names}
    cpu: dict[str, dict[str, list[float]]] = {n: {ld: [] for ld in calls} for n in names}
    loadavgs = [os.getloadavg()]
    for n in names:  # warm-up: every call shape once
        for ld in calls:
            engines[n](calls[ld][0])
    for r in range(args.rounds):
        for ld, batches in calls.items():
            texts = sum(map(len, batches))
            for n in names[r % len(names):] + names[:r % len(names)]:
                t0, c0 = time.perf_counter(), time.process_time()
                for b in batches:
                    engines[n](b)
                rates[n][ld].append(texts / (time.perf_counter() - t0))
                cpu[n][ld].append(1e3 * (time.process_time() - c0) / texts)
        loadavgs.append(os.getloadavg())
        print(f"round {r + 1}/{args.rounds}: " + "; ".join(
            f"{ld} " + " ".join(f"{n} {rates[n][ld][-1]:.0f}" for n in names) for ld in calls)
            + f"; load {loadavgs[-1][0]:.1f}", file=sys.stderr)

    served: dict[tuple[str, str], float] = {}
    if args.peers:
        for rec in json.loads(Path(args.peers).read_text()):
            served[(rec["server"], rec["load"])] = rec["sentences_per_s"]
    records: list[dict[str, Any]] = []
    for n in names:
        for ld in calls:
            v = rates[n][ld]
            rec: dict[str, Any] = {
                "engine": n, "load": ld, "texts_per_s": statistics.median(v), "texts_per_s_best": max(v),
                "texts_per_s_rounds": v, "cpu_ms_per_text": statistics.median(cpu[n][ld]),
                "vs_tei_graph_median": statistics.median(a / b for a, b in zip(v, rates["tei-graph"][ld])),
                "texts_per_call": CALLS[ld], "max_abs_diff_vs_onnx_fp32": agree[n]}
            for server, engine in engine_of_server.items():
                if engine == n and (server, ld) in served:
                    rec["served_by"] = server
                    rec["server_share_of_engine"] = served[(server, ld)] / rec["texts_per_s"]
                    if ld == "8x1" and (server, "8x1-wrk") in served:
                        rec["server_share_of_engine_wrk"] = served[(server, "8x1-wrk")] / rec["texts_per_s"]
            records.append(rec)
    common = {"machine": machine_info(("densewire", "numpy", "onnxruntime", "openvino", "tokenizers")),
              "threads": args.threads, "rounds": args.rounds, "loadavg_per_round": loadavgs,
              "peers_results": args.peers, "command": " ".join(sys.argv),
              "openblas_env": {k: v for k, v in os.environ.items() if k.startswith("OPENBLAS_")}}
    Path(args.out).write_text(json.dumps([{**rec, **common} for rec in records], indent=1) + "\n")

    print("\n| load | engine | texts/s median (best) | x tei-graph | CPU ms/text | server over HTTP: share of this |")
    print("|---|---|---:|---:|---:|---:|")
    for rec in records:
        share = (f"{rec['served_by']} {100 * rec['server_share_of_engine']:.0f} %" if "served_by" in rec else "")
        if "server_share_of_engine_wrk" in rec:
            share += f" (wrk: {100 * rec['server_share_of_engine_wrk']:.0f} %)"
        print(f"| {rec['load']} | {rec['engine']} | {rec['texts_per_s']:.0f} ({rec['texts_per_s_best']:.0f}) | "
              f"{rec['vs_tei_graph_median']:.2f} | {rec['cpu_ms_per_text']:.2f} | {share} |")
    print(f"\nload averages per round: {[round(la[0], 1) for la in loadavgs]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
