#!/usr/bin/env python3
"""Engines and precisions side by side in one run (issue 26): in process, then over HTTP.

    .venv/bin/python bench/model/precision_speed.py                     # both parts, results-precision-speed.json
    .venv/bin/python bench/model/precision_speed.py --skip-http --rounds 7
    .venv/bin/python bench/model/precision_speed.py --skip-inprocess --http-rounds 5

Runs with the project's .venv (openvino, onnxruntime, aiohttp; wrk from apt for the wrk pass).

In process (one process, 2 intra-op threads each, MiniLM, tokenization and pooling included): sentences/s
at batch 1, 8 and 32 over bench.py's short sentences, every contender in every round, order rotating;
the median of per-round ratios to today's default engine (ONNX fp32). Contenders: ONNX fp32, ONNX int8
(reduce_range as the CPU decides), OpenVINO fp32, and OpenVINO bf16 where the CPU multiplies bf16 natively
(amx_bf16 / avx512_bf16: not on an AVX2-only CPU, where it is left out and said so). Also each contender's
cosine to ONNX fp32 (min over the sentences) and its matrix products' rate: the model's product FLOPs
(``BertModel.flops_per_token``) per second of whole calls at batch 32, against the measured peak of its
precision on the same 2 threads (fp32: numpy 2048^3 and OpenVINO's MatMul 2048^3 in f32, the higher;
bf16: OpenVINO's MatMul in bf16; int8: ONNX Runtime's MatMulInteger 2048^3).

Over HTTP: ``densewire serve`` with its defaults (engine and precision auto) against ``--engine onnx
--precision fp32``, both ``--cache-bytes 0 --no-demo-tables --log-level warning --blas-threads 2``;
8 one-sentence clients (aiohttp, and wrk -c8) and requests of 32 sentences (aiohttp, 2 in flight);
rounds interleave the two servers; ratios default / onnx-fp32 per round.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))

from bench import Server, free_port, http_load, sentences, wrk_load  # noqa: E402

from densewire._backends import (  # noqa: E402
    OnnxBertBackend, OpenVinoBertBackend, choose, cpu_features, cpu_flags, default_model_path, native_precision)
from densewire._backends.blas import limit_blas_threads  # noqa: E402

BATCHES = (1, 8, 32)
SHARE = {1: 48, 8: 128, 32: 128}


def machine() -> dict[str, Any]:
    lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    flags = cpu_flags()
    names = ("numpy", "onnxruntime", "onnx", "openvino", "tokenizers", "aiohttp", "uvicorn", "starlette")
    wrk = subprocess.run(["wrk", "--version"], capture_output=True, text=True) if shutil.which("wrk") else None
    return {"lscpu": lscpu, "cpu_features": list(cpu_features(flags)), "native_precision": native_precision(flags),
            "auto": choose(flags=flags).__dict__ | {"features": list(choose(flags=flags).features)},
            "python": platform.python_version(), "kernel": platform.release(),
            "versions": {n: importlib.metadata.version(n) for n in names},
            "wrk": (wrk.stdout or wrk.stderr).splitlines()[0] if wrk else None, "load_average": os.getloadavg()}


def peaks(threads: int) -> dict[str, float]:
    """GFLOP/s (GOP/s for int8) of a 2048^3 product in each precision on ``threads`` threads, best of 5."""
    import onnx
    import onnxruntime as ort
    import openvino as ov
    from onnx import TensorProto, helper

    n = 2048
    flop = 2.0 * n ** 3
    out: dict[str, float] = {}

    def best(fn: Callable[[], Any]) -> float:
        fn()
        times = []
        for _ in range(5):
            t = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t)
        return flop / min(times) / 1e9

    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((n, n), dtype=np.float32), rng.standard_normal((n, n), dtype=np.float32)
    out["fp32 numpy"] = best(lambda: a @ b)
    core = ov.Core()
    x = ov.opset13.parameter([n, n], ov.Type.f32, name="x")
    w = ov.opset13.constant(b)
    mm = ov.Model([ov.opset13.matmul(x, w, False, False)], [x], "mm")
    precisions = ["f32"] + (["bf16"] if native_precision(cpu_flags()) == "bf16" else [])
    for p in precisions:
        compiled = core.compile_model(mm, "CPU", {"INFERENCE_NUM_THREADS": threads, "INFERENCE_PRECISION_HINT": p,
                                                 "PERFORMANCE_HINT": "LATENCY"})
        request = compiled.create_infer_request()
        out[f"{'fp32' if p == 'f32' else p} openvino"] = best(lambda: request.infer({0: a}))
    qa = rng.integers(0, 255, (n, n), dtype=np.uint8)
    qb = rng.integers(-127, 127, (n, n), dtype=np.int8)
    graph = helper.make_graph([helper.make_node("MatMulInteger", ["a", "b"], ["y"])], "mmi",
                              [helper.make_tensor_value_info("a", TensorProto.UINT8, [n, n])],
                              [helper.make_tensor_value_info("y", TensorProto.INT32, [n, n])],
                              initializer=[onnx.numpy_helper.from_array(qb, "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    session = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    out["int8 onnxruntime"] = best(lambda: session.run(None, {"a": qa}))
    return out


def inprocess(args: argparse.Namespace, texts: list[str], report: dict[str, Any]) -> dict[str, Any]:
    path = default_model_path()
    t = args.threads
    builders: dict[str, Callable[[], Any]] = {
        "onnx fp32": lambda: OnnxBertBackend(path, threads=t),
        "onnx int8": lambda: OnnxBertBackend(path, threads=t, quantize="int8"),
        "openvino fp32": lambda: OpenVinoBertBackend(path, threads=t),
    }
    if native_precision(cpu_flags()) == "bf16":
        builders["openvino bf16"] = lambda: OpenVinoBertBackend(path, threads=t, precision="bf16")
    else:
        report["left_out"] = ("openvino bf16: this CPU has neither amx_bf16 nor avx512_bf16, so OpenVINO would run "
                              "it in f32; bf16 speed is not measured here")
    engines = {name: make() for name, make in builders.items()}
    model = engines["onnx fp32"].model
    base = engines["onnx fp32"].embed(texts)
    cos = {n: float(np.einsum("ij,ij->i", e.embed(texts), base).min()) for n, e in engines.items()}
    lengths = [len(s) for s in engines["onnx fp32"].tokenize(texts)]
    rates: dict[str, dict[int, list[float]]] = {n: {b: [] for b in BATCHES} for n in engines}
    flops_rate: dict[str, list[float]] = {n: [] for n in engines}
    names = list(engines)
    for r in range(args.rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        off = (r * 37) % (len(texts) - 160)
        for b in BATCHES:
            share = texts[off:off + SHARE[b]]
            flop = sum(model.flops_per_token(n) * n for n in lengths[off:off + SHARE[b]])
            for n in order:
                e = engines[n]
                start = time.perf_counter()
                for i in range(0, len(share), b):
                    e.embed(share[i:i + b])
                secs = time.perf_counter() - start
                rates[n][b].append(len(share) / secs)
                if b == 32:
                    flops_rate[n].append(flop / secs / 1e9)
        print(f"round {r + 1}: " + ", ".join(f"{n} " + "/".join(f"{rates[n][b][-1]:.0f}" for b in BATCHES)
                                            for n in names) + f"; load {os.getloadavg()[0]:.1f}", file=sys.stderr)
    peak = peaks(t)
    precision_peak = {"fp32": max(v for k, v in peak.items() if k.startswith("fp32")),
                      "int8": peak["int8 onnxruntime"], "bf16": peak.get("bf16 openvino")}
    out: dict[str, Any] = {"peaks": peak, "contenders": {}}
    for n in names:
        prec = n.split()[1]
        row: dict[str, Any] = {"cosine_to_fp32_min": cos[n], "precision": prec}
        for b in BATCHES:
            ratios = [x / y for x, y in zip(rates[n][b], rates["onnx fp32"][b])]
            row[f"batch {b}"] = {"median": statistics.median(rates[n][b]), "best": max(rates[n][b]),
                                 "ratio_median": statistics.median(ratios), "ratio_min": min(ratios),
                                 "ratio_max": max(ratios)}
        gf = statistics.median(flops_rate[n])
        row["products_gflops_batch32"] = gf
        row["peak_of_precision"] = precision_peak[prec]
        row["share_of_peak"] = gf / precision_peak[prec] if precision_peak[prec] else None
        out["contenders"][n] = row
    return out


def http(args: argparse.Namespace, texts: list[str]) -> dict[str, Any]:
    t = str(args.threads)
    env = {k: v for k, v in os.environ.items() if not k.startswith("DENSEWIRE_")}
    env.update(OMP_NUM_THREADS=t, TOKENIZERS_PARALLELISM="false")
    exe = str(ROOT / ".venv" / "bin" / "densewire")
    common = ["serve", "--host", "127.0.0.1", "--cache-bytes", "0", "--no-demo-tables", "--log-level", "warning",
              "--blas-threads", t]
    plans = {"default": [exe, *common], "onnx-fp32": [exe, *common, "--engine", "onnx", "--precision", "fp32"]}
    servers: dict[str, Server] = {}
    try:
        for name, cmd in plans.items():
            port = free_port()
            servers[name] = Server(name, [*cmd, "--port", str(port)], port, dict(env), "minilm")
            print(f"server {name} up on {port}", file=sys.stderr)
        import httpx

        described = {n: httpx.get(f"http://127.0.0.1:{s.port}/v1/models").json()["data"][0]
                     for n, s in servers.items()}
        n = args.http_sentences
        modes: dict[str, tuple[int, int, list[str]]] = {"1x8 aiohttp": (1, 8, texts[:n]),
                                                        "32x2 aiohttp": (32, 2, texts[:n * 4 // 3 // 32 * 32 or 32])}
        if shutil.which("wrk"):
            modes["1x8 wrk"] = (1, 8, texts)
        rates: dict[str, dict[str, list[float]]] = {s: {m: [] for m in modes} for s in servers}
        names = list(servers)
        for r in range(args.http_rounds):
            order = names[r % 2:] + names[:r % 2]
            for mode, (per, flight, share) in modes.items():
                for s in order:
                    srv = servers[s]
                    if mode == "1x8 wrk":
                        rates[s][mode].append(wrk_load(srv.url, "minilm", texts, flight, args.wrk_seconds))
                    else:
                        secs = asyncio.run(http_load(srv.url, "minilm", share, per, flight))
                        rates[s][mode].append(len(share) / secs)
            print(f"http round {r + 1}: " + ", ".join(f"{s} " + "/".join(f"{rates[s][m][-1]:.0f}" for m in modes)
                                                      for s in names) + f"; load {os.getloadavg()[0]:.1f}",
                  file=sys.stderr)
        out: dict[str, Any] = {"servers": {n: {k: described[n].get(k) for k in ("engine", "precision", "cpu_features")}
                                           for n in names}, "modes": {}}
        for m in modes:
            ratios = [x / y for x, y in zip(rates["default"][m], rates["onnx-fp32"][m])]
            out["modes"][m] = {s: {"median": statistics.median(rates[s][m]), "best": max(rates[s][m])} for s in names}
            out["modes"][m]["ratio_default_to_onnx_fp32"] = {"median": statistics.median(ratios), "min": min(ratios),
                                                             "max": max(ratios)}
        return out
    finally:
        for s in servers.values():
            s.stop()


def table(result: dict[str, Any]) -> str:
    lines = []
    if "inprocess" in result:
        c = result["inprocess"]["contenders"]
        lines += ["| engine | batch 1 | batch 8 | batch 32 | cosine to fp32 (min) | products at batch 32 | "
                  "peak of its precision |", "|---|---:|---:|---:|---:|---:|---:|"]
        for n, row in c.items():
            cells = [f"{row[f'batch {b}']['median']:.0f}" if n == "onnx fp32"
                     else f"{row[f'batch {b}']['ratio_median']:.2f}x" for b in BATCHES]
            share = f"{row['share_of_peak'] * 100:.0f} %" if row["share_of_peak"] else "-"
            lines.append(f"| {n} | {' | '.join(cells)} | {row['cosine_to_fp32_min']:.5f} | "
                         f"{row['products_gflops_batch32']:.0f} GFLOP/s ({share}) | {row['peak_of_precision']:.0f} |")
        lines.append("peaks (2048^3, GFLOP/s or GOP/s): " + ", ".join(
            f"{k} {v:.0f}" for k, v in result["inprocess"]["peaks"].items()))
    if "http" in result:
        lines += ["", "| over HTTP | default | onnx fp32 | default / onnx fp32 (median, min-max of rounds) |",
                  "|---|---:|---:|---:|"]
        for m, row in result["http"]["modes"].items():
            r = row["ratio_default_to_onnx_fp32"]
            lines.append(f"| {m} | {row['default']['median']:.0f} | {row['onnx-fp32']['median']:.0f} | "
                         f"{r['median']:.3f}x ({r['min']:.3f}-{r['max']:.3f}) |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--http-rounds", type=int, default=5)
    ap.add_argument("--http-sentences", type=int, default=96)
    ap.add_argument("--wrk-seconds", type=int, default=8)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--skip-inprocess", action="store_true")
    ap.add_argument("--skip-http", action="store_true")
    ap.add_argument("--out", default=str(HERE / "results-precision-speed.json"))
    args = ap.parse_args()
    limit_blas_threads(args.threads)
    texts = sentences()
    result: dict[str, Any] = {"command": " ".join([Path(sys.executable).name, *sys.argv]), "machine": machine(),
                              "git": subprocess.run(["git", "-C", str(HERE), "rev-parse", "--short", "HEAD"],
                                                    capture_output=True, text=True).stdout.strip()}
    if not args.skip_inprocess:
        result["inprocess"] = inprocess(args, texts, result)
    if not args.skip_http:
        result["http"] = http(args, texts)
    result["machine"]["load_average_end"] = os.getloadavg()
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n", "utf-8")
    print(table(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
