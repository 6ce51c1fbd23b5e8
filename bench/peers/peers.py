#!/usr/bin/env python3
"""densewire serve beside Hugging Face's text-embeddings-inference (TEI), same model, one run (issue 34).

    .venv/bin/python bench/peers/peers.py --tei-bin PATH [--rounds 5] [--servers densewire,densewire-fp32,tei]

TEI: the ``text-embeddings-router`` binary of TEI 1.9.3 (commit 0d124dc of
huggingface/text-embeddings-inference) built with ``--no-default-features --features ort,http``: the
ONNX Runtime backend, HTTP only, ``ort`` loading the ONNX Runtime library at run time (``load-dynamic``).
Give it with ``--tei-bin`` or ``$TEI_BIN``; this script does not build it (bench/peers/RESULTS.md says how
the measured one differs from TEI's CPU image). TEI loads ``libonnxruntime.so.*`` from the onnxruntime
wheel in .venv (``ORT_DYLIB_PATH``), so both servers run the same ONNX Runtime.

The model is the built-in all-MiniLM-L6-v2. TEI's ONNX backend reads ``onnx/model.onnx`` inside the model
folder, a standard export (int64 ``input_ids``, ``attention_mask``, ``token_type_ids`` ->
``last_hidden_state``); it is written by bench/model/plain_graph.py (``build_plain(standard=True)``, the
operator pattern of transformers' torch export, no torch needed) into a folder of links to the model's
files under the densewire cache directory, once.

Servers (each its own process, started once; no response cache; both on every core):
  densewire       ``densewire serve`` defaults (the engine and precision ``auto`` picks for this CPU)
  densewire-fp32  ``densewire serve --engine onnx --precision fp32``: like for like with TEI
  densewire-fp32-openvino  ``densewire serve --engine openvino --precision fp32``: fp32 vectors on
                  OpenVINO's kernels (oneDNN) instead of ONNX Runtime's
  tei             ``text-embeddings-router`` defaults (ORT fp32, intra-op threads = cores)

Loads, all ``POST /v1/embeddings`` (OpenAI's route, served by both) over keep-alive connections from the
aiohttp load generator of bench/model/bench.py (``http_batches``), ``encoding_format: base64`` (cheap for
the client on the same two cores; both servers encode it):
  8x1    576 one-sentence requests, 8 clients in flight
  32     20 requests of 32 sentences, 2 in flight
  long   requests of 4 texts of 200-250 tokens, 2 in flight
  mixed  requests of 1-32 texts of 10-250 tokens (the same sequence for every server), 4 in flight
  8x1-wrk  (``--loads`` adds it) 8x1's requests from wrk (C: next to no CPU a request, as a client on another
         machine) for 3 s a round; latency percentiles are wrk's

Every round runs every (load, server) pair once, servers in a rotated order. Reported per pair: sentences/s
best and median over rounds, medians of the per-round ratios to TEI, p50/p99 latency over every request
of every round, the server's resident memory (process tree) after the round, and its CPU time per
sentence (user + system of the process tree, /proc: a figure other jobs on a shared machine inflate less
than wall time); the load average at each round. Beside them: response bytes of 1,000 vectors in each
format each server speaks, the cosine of every server's vectors against densewire-fp32's on 64 texts of
each load, and each server's own metrics (queue, tokenization, inference: TEI's ``te_*``, densewire's
``densewire_*``) over the last round. ``--variant NAME=ARGS`` adds a ``densewire serve`` with other flags.

Writes bench/peers/results.json: a list of records, one per (server, load), each with ``server``,
``load``, ``sentences_per_s`` (median), ``p50_ms``, ``p99_ms``, ``rss_mb`` and the run's ``machine``,
``versions`` and load averages, its server's cosines to the reference and response bytes, and the
server's own metrics over the last round.
"""

from __future__ import annotations

import argparse
import asyncio
import glob
import importlib.util
import json
import os
import random
import re
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT / "python" / "src"))
sys.path.insert(0, str(ROOT / "bench" / "model"))
_spec = importlib.util.spec_from_file_location("model_bench", ROOT / "bench" / "model" / "bench.py")
model_bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(model_bench)  # bench/model/bench.py: sentences, Server, http_batches, free_port
_spec = importlib.util.spec_from_file_location("serve_servers", ROOT / "bench" / "serve" / "servers.py")
serve_servers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(serve_servers)  # bench/serve/servers.py: cpu_seconds of a process tree

TEI_VERSION = "1.9.3"
TEI_COMMIT = "0d124dc"
LOADS = {"8x1": 8, "32": 2, "long": 2, "mixed": 4, "8x1-wrk": 8}  # load -> requests in flight
DEFAULT_LOADS = ("8x1", "32", "long", "mixed")
WRK_SECONDS = 3
SERVERS = ("densewire", "densewire-fp32", "densewire-fp32-openvino", "tei")


def ort_dylib() -> str:
    """The ONNX Runtime shared library inside the onnxruntime wheel of this Python."""
    import onnxruntime

    found = sorted(glob.glob(os.path.join(os.path.dirname(onnxruntime.__file__), "capi", "libonnxruntime.so.*")))
    if not found:
        raise SystemExit(f"no libonnxruntime.so.* in {os.path.dirname(onnxruntime.__file__)}/capi")
    return found[0]


def tei_folder(model_folder: Path) -> Path:
    """A folder of links to the model's files plus ``onnx/model.onnx`` (the standard export, made once). The
    links are remade on every run, so that they follow the model's files when the environment that holds
    them moved (a link into a deleted venv would leave TEI without its config.json)."""
    from densewire._backends import BertModel
    from densewire._backends import BUILTIN_MODEL_NAME
    from densewire._backends.onnx_bert import cache_dir

    out = cache_dir() / "peers" / BUILTIN_MODEL_NAME.rsplit("/", 1)[-1]
    graph = out / "onnx" / "model.onnx"
    (out / "onnx").mkdir(parents=True, exist_ok=True)
    for item in model_folder.iterdir():
        link = out / item.name
        if item.name == "onnx" or (link.is_symlink() and link.resolve() == item.resolve()):
            continue
        if link.is_symlink():
            link.unlink()
        link.symlink_to(item)
    if graph.is_file():
        return out
    import onnx
    from plain_graph import build_plain

    tmp = graph.with_suffix(".tmp")
    onnx.save(build_plain(BertModel(model_folder), standard=True), str(tmp))
    onnx.checker.check_model(str(tmp))
    os.replace(tmp, graph)
    return out


def texts_for(tok: Any, seed: int = 34) -> dict[str, list[list[str]]]:
    """The batches of each load, the same every run: short sentences from bench/model, long texts built
    from them up to 200-250 tokens, and a mix."""
    short = model_bench.sentences(640, seed=seed)
    rng = random.Random(seed)

    def text_of(lo: int, hi: int) -> str:
        want = rng.randint(lo, hi)
        parts: list[str] = []
        while True:
            parts.append(rng.choice(short))
            n = len(tok.encode(" ".join(parts)).ids)
            if n >= want:
                while n > hi and len(parts) > 1:
                    parts.pop()
                    n = len(tok.encode(" ".join(parts)).ids)
                return " ".join(parts)

    long = [text_of(200, 250) for _ in range(48)]
    mixed_texts = [text_of(10, 250) if rng.random() < 0.5 else rng.choice(short) for _ in range(200)]
    mixed, at = [], 0
    while at < len(mixed_texts):
        k = rng.choice((1, 1, 4, 8, 16, 32))
        mixed.append(mixed_texts[at:at + k])
        at += k
    one_each = [[t] for t in short[:576]]
    return {"8x1": one_each, "8x1-wrk": one_each, "32": [short[i:i + 32] for i in range(0, 640, 32)],
            "long": [long[i:i + 4] for i in range(0, len(long), 4)], "mixed": mixed}


def rss_mb(pid: int) -> float:
    """Resident MiB of ``pid`` and its descendants."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    parents[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except OSError:
                pass
    tree, grew = {pid}, True
    while grew:
        more = {p for p, parent in parents.items() if parent in tree} - tree
        tree |= more
        grew = bool(more)
    total = 0
    for p in tree:
        try:
            with open(f"/proc/{p}/status") as f:
                total += next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
        except (OSError, StopIteration):
            pass
    return total / 1024


def metrics(port: int) -> dict[str, float]:
    """The _sum and _count of the servers' queue/tokenization/inference/batch histograms."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    want = re.compile(r"^(te_(?:embed|request)_(?:queue|tokenization|inference)_duration|te_batch_next_size|"
                      r"te_batch_next_tokens|densewire_queue_wait_seconds|densewire_model_duration_seconds|"
                      r"densewire_batch_size|densewire_batch_tokens|densewire_request_duration_seconds)"
                      r"_(sum|count)(\{[^}]*\})? ([0-9.eE+-]+)$")
    out: dict[str, float] = {}
    for line in text.splitlines():
        m = want.match(line)
        if m:
            key = f"{m.group(1)}_{m.group(2)}"
            out[key] = out.get(key, 0.0) + float(m.group(4))
    return out


def metric_means(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """Mean of each histogram between two snapshots (durations in ms)."""
    out = {}
    for key in after:
        if key.endswith("_sum"):
            base = key[:-4]
            n = after.get(base + "_count", 0) - before.get(base + "_count", 0)
            if n > 0:
                mean = (after[key] - before.get(key, 0.0)) / n
                scale = 1e3 if base.endswith(("seconds", "duration")) else 1.0
                out[base + ("_mean_ms" if scale != 1.0 else "_mean")] = mean * scale
    return out


def vectors(url: str, model: str, texts: list[str]) -> np.ndarray:
    import httpx

    rows = []
    for i in range(0, len(texts), 32):
        r = httpx.post(url, json={"input": texts[i:i + 32], "model": model}, timeout=120)
        r.raise_for_status()
        rows.extend(d["embedding"] for d in sorted(r.json()["data"], key=lambda d: d["index"]))
    return np.asarray(rows, dtype=np.float64)


def response_bytes(url: str, model: str, texts: list[str], server: str) -> dict[str, int]:
    """Body bytes of 1,000 vectors in each format the server answers, as 40 responses of 25 (one response
    of 25 texts, measured, x 40: the vectors' bytes do not depend on the text, and the model is spared
    1,000 embeddings a format)."""
    import httpx

    formats = {"json-float": ({}, {}), "json-base64": ({"encoding_format": "base64"}, {})}
    if server.startswith("densewire"):
        formats["raw"] = ({}, {"Accept": "application/octet-stream"})
        formats["msgpack"] = ({}, {"Accept": "application/msgpack"})
    out = {}
    with httpx.Client(timeout=120, headers={"Accept-Encoding": "identity"}) as client:
        for name, (extra, headers) in formats.items():
            r = client.post(url, json={"input": texts[:25], "model": model, **extra}, headers=headers)
            r.raise_for_status()
            out[name] = 40 * len(r.content)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tei-bin", default=os.environ.get("TEI_BIN"),
                    help=f"text-embeddings-router of TEI {TEI_VERSION} ({TEI_COMMIT}), features ort,http "
                         "(default $TEI_BIN)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--servers", default=",".join(SERVERS))
    ap.add_argument("--loads", default=",".join(DEFAULT_LOADS))
    ap.add_argument("--out", default=str(HERE / "results.json"))
    ap.add_argument("--variant", action="append", default=[], metavar="NAME=ARGS",
                    help="another densewire serve contender: NAME=\"--engine onnx --blas-threads 1\" (repeatable)")
    ap.add_argument("--label", default="", help="a note stored with every record (e.g. before/after a change)")
    args = ap.parse_args()
    wanted = args.servers.split(",")
    loads = args.loads.split(",")
    if "tei" in wanted and not (args.tei_bin and os.access(args.tei_bin, os.X_OK)):
        raise SystemExit("--tei-bin (or $TEI_BIN) must name the text-embeddings-router binary")

    from tokenizers import Tokenizer

    from densewire._backends import default_model_path
    from densewire._backends.precision import cpu_features, cpu_flags
    from densewire._bench import machine_info

    folder = default_model_path()
    tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tok.no_truncation()
    tok.no_padding()
    batches = texts_for(tok)
    dylib = ort_dylib()
    machine = machine_info(("densewire", "numpy", "onnxruntime", "onnx", "openvino", "tokenizers", "aiohttp",
                            "uvicorn", "orjson"))
    machine["cpu_features"] = list(cpu_features(cpu_flags()))
    versions = {"tei": f"{TEI_VERSION} ({TEI_COMMIT}), features ort,http, ort load-dynamic",
                "tei_onnxruntime": os.path.basename(dylib), "densewire_commit": subprocess.run(
                    ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()}
    print(json.dumps({"machine": machine, "versions": versions}, indent=1), file=sys.stderr)

    base = {k: v for k, v in os.environ.items() if not k.startswith("DENSEWIRE_")}
    base.update(HF_HUB_OFFLINE="1")  # each server with its own defaults (tokenizers' parallelism too)
    dw = [str(ROOT / ".venv" / "bin" / "densewire"), "serve", "--host", "127.0.0.1", "--cache-bytes", "0",
          "--no-demo-tables", "--log-level", "warning"]
    plans: dict[str, tuple[list[str], dict[str, str], str]] = {
        "densewire": (dw, base, "minilm"),
        "densewire-fp32": (dw + ["--engine", "onnx", "--precision", "fp32"], base, "minilm"),
        "densewire-fp32-openvino": (dw + ["--engine", "openvino", "--precision", "fp32"], base, "minilm"),
    }
    for v in args.variant:
        vname, _, vargs = v.partition("=")
        plans[vname] = (dw + vargs.split(), base, "minilm")
        wanted.append(vname)
    if "tei" in wanted:
        tei_model = str(tei_folder(folder))  # TEI's model name is its --model-id (others: a warning a request)
        plans["tei"] = ([args.tei_bin, "--model-id", tei_model, "--hostname", "127.0.0.1"],
                        {**base, "ORT_DYLIB_PATH": dylib}, tei_model)
    servers: dict[str, Any] = {}
    t_start = time.time()
    loadavgs = [os.getloadavg()]
    try:
        for name in wanted:
            cmd, env, model = plans[name]
            port = model_bench.free_port()
            servers[name] = model_bench.Server(name, [*cmd, "--port", str(port)], port, dict(env), model)
            print(f"{name} up on {port}: {' '.join(cmd)}", file=sys.stderr)

        # vectors first: every server against densewire-fp32 (or the first server) on 64 texts of each load
        all_texts = list(dict.fromkeys(t for load in loads for t in [t for b in batches[load] for t in b][:64]))
        ref = "densewire-fp32" if "densewire-fp32" in servers else wanted[0]
        vecs = {n: vectors(s.url, s.model, all_texts) for n, s in servers.items()}

        def cos(a: np.ndarray, b: np.ndarray) -> np.ndarray:
            return (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)

        cosines = {n: {"min": float(cos(v, vecs[ref]).min()), "mean": float(cos(v, vecs[ref]).mean()),
                       "max_abs_diff": float(np.abs(v - vecs[ref]).max())} for n, v in vecs.items()}
        print(json.dumps({f"cosine_vs_{ref}": cosines}, indent=1), file=sys.stderr)
        sizes = {n: response_bytes(s.url, s.model, batches["32"][0], n) for n, s in servers.items()}

        names = list(servers)
        rates = {n: {ld: [] for ld in loads} for n in names}
        lats: dict[str, dict[str, list[float]]] = {n: {ld: [] for ld in loads} for n in names}
        rss = {n: {ld: [] for ld in loads} for n in names}
        cpu = {n: {ld: [] for ld in loads} for n in names}
        prof: dict[str, dict[str, dict[str, float]]] = {n: {} for n in names}
        for n, s in servers.items():  # one warm-up pass of every load
            for ld in loads:
                asyncio.run(model_bench.http_batches(s.url, s.model, batches[ld][:8], LOADS[ld],
                                                     extra={"encoding_format": "base64"}))
        for r in range(args.rounds):
            order = names[r % len(names):] + names[:r % len(names)]
            for ld in loads:
                sentences_n = sum(len(b) for b in batches[ld])
                for n in order:
                    s = servers[n]
                    before, cpu0 = metrics(s.port), serve_servers.cpu_seconds(s.proc.pid)
                    if ld == "8x1-wrk":  # wrk's p50 and p99 of the round go into lats
                        rate = model_bench.wrk_load(s.url, s.model, [t for b in batches[ld] for t in b], LOADS[ld],
                                                    WRK_SECONDS, extra={"encoding_format": "base64"},
                                                    latencies=lats[n][ld])
                        done = rate * WRK_SECONDS
                    else:
                        secs = asyncio.run(model_bench.http_batches(s.url, s.model, batches[ld], LOADS[ld],
                                                                    lats[n][ld], extra={"encoding_format": "base64"}))
                        rate, done = sentences_n / secs, sentences_n
                    cpu[n][ld].append(1e3 * (serve_servers.cpu_seconds(s.proc.pid) - cpu0) / done)
                    prof[n][ld] = metric_means(before, metrics(s.port))
                    rates[n][ld].append(rate)
                    rss[n][ld].append(rss_mb(s.proc.pid))
            loadavgs.append(os.getloadavg())
            print(f"round {r + 1}/{args.rounds}: " + "; ".join(
                f"{ld} " + " ".join(f"{n} {rates[n][ld][-1]:.0f}" for n in names) for ld in loads)
                + f"; load {loadavgs[-1][0]:.1f}", file=sys.stderr)
    finally:
        for s in servers.values():
            s.stop()

    common = {"machine": machine, "versions": versions, "rounds": args.rounds, "label": args.label,
              "loadavg_per_round": loadavgs, "command": " ".join(sys.argv)}
    records: list[dict[str, Any]] = []
    for n in names:
        for ld in loads:
            v, lat = rates[n][ld], sorted(lats[n][ld])
            if ld == "8x1-wrk":  # wrk's own p50 and p99 of each round: their medians
                p50, p99 = (1e3 * statistics.median(lats[n][ld][i::2]) for i in (0, 1))
                requests = round(sum(v) * WRK_SECONDS)
            else:
                p50, p99 = (1e3 * float(np.percentile(lat, q)) for q in (50, 99))
                requests = len(lat)
            rec = {"server": n, "load": ld, "sentences_per_s": statistics.median(v), "sentences_per_s_best": max(v),
                   "sentences_per_s_rounds": v, "p50_ms": p50,
                   "p99_ms": p99, "requests": requests, "rss_mb": max(rss[n][ld]),
                   "cpu_ms_per_sentence": statistics.median(cpu[n][ld]), "cpu_ms_per_sentence_rounds": cpu[n][ld],
                   "in_flight": LOADS[ld], "sentences_per_round": sum(len(b) for b in batches[ld]),
                   "requests_per_round": len(batches[ld]), "server_metrics_last_round": prof[n].get(ld, {})}
            if "tei" in rates and n != "tei":
                ratios = [a / b for a, b in zip(v, rates["tei"][ld])]
                rec["vs_tei_per_round"] = ratios
                rec["vs_tei_median"] = statistics.median(ratios)
            rec.update({"cosine_vs_reference": {"reference": ref, **cosines[n]}, "response_bytes_1000_vectors": sizes[n]})
            records.append({**rec, **common})
    for rec in records:
        rec["wall_seconds"] = time.time() - t_start
    Path(args.out).write_text(json.dumps(records, indent=1) + "\n")

    print(f"\n| load | server | sentences/s median (best) | x TEI median | p50 / p99 ms | RSS MB | CPU ms/sentence |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for rec in records:
        x = f"{rec['vs_tei_median']:.2f}" if "vs_tei_median" in rec else "1"
        print(f"| {rec['load']} | {rec['server']} | {rec['sentences_per_s']:.0f} ({rec['sentences_per_s_best']:.0f}) "
              f"| {x} | {rec['p50_ms']:.1f} / {rec['p99_ms']:.1f} | {rec['rss_mb']:.0f} | {rec['cpu_ms_per_sentence']:.2f} |")
    print(f"\nload averages per round: {[round(la[0], 1) for la in loadavgs]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
