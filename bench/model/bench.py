"""The model behind `densewire serve`, engines side by side in one run (issue 19).

    bench/model/.venv/bin/python bench/model/bench.py [--rounds 7] [--out bench/model/results.json]

Engines (each in its own process, loaded once, all on --threads intra-op threads):
  onnx         densewire's ONNX engine (the default), float32       project .venv
  onnx-nospin  the same with spinning=False (idle threads sleep: the default since this run)
  onnx-int8    the same with --quantize int8                        project .venv
  onnx-buckets the engine before builder version 2 (fused Attention on padded length buckets,
               bucketed_graph.py), spinning=False                   project .venv
  numpy        densewire's numpy engine (the reference)              project .venv
  numpy-noenv  numpy again without OPENBLAS_CORETYPE/L2_SIZE (only when they are set)
  plain-opt    a plain ONNX graph after ONNX Runtime's transformer optimizer   bench venv
  st           sentence-transformers on torch                       bench venv
  infinity     infinity-emb's torch engine, in process              bench venv

In process: sentences/s at batch 1, 8 and 32 over the same 320 distinct short sentences;
rounds interleave every engine and batch size, engine order rotating per round; best and
median per engine, and per-round ratios to numpy. FLOP utilization = real tokens x FLOPs per
token (from config.json, attention included) per second / numpy's fp32 GEMM rate on the same
threads, measured by this run. Over HTTP: densewire serve (onnx, numpy, st:) and infinity-emb's
server on 127.0.0.1, 1-sentence requests with 8 in flight and 32-sentence requests with 2 in
flight, JSON, no response cache. Cosines: every engine against sentence-transformers on all
320 sentences, and int8 against float32.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
MAIN_PY = ROOT / ".venv" / "bin" / "python"
BENCH_PY = HERE / ".venv" / "bin" / "python"
BATCHES = (1, 8, 32)
SHARE = {1: 48, 8: 96, 32: 128}  # sentences per measurement (distinct, from the 320)
OPENBLAS_VARS = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")


def sentences(n: int = 320, seed: int = 19) -> list[str]:
    """n distinct short English sentences (5-22 words), the same every run."""
    rng = random.Random(seed)
    subj = ["the old fisherman", "a young doctor", "my neighbour's cat", "the city council", "our team",
            "the quiet student", "a delivery driver", "the museum guide", "her grandfather", "the new manager",
            "a small bakery", "the river", "every visitor", "the orchestra", "a curious child", "the engineers"]
    verb = ["repaired", "painted", "discussed", "ignored", "photographed", "borrowed", "described", "cleaned",
            "announced", "forgot", "carried", "measured", "sold", "explained", "visited", "designed"]
    obj = ["the broken bridge", "a long report", "the garden fence", "two wooden chairs", "the morning train",
           "an unusual recipe", "the budget for next year", "a map of the coast", "the winter schedule",
           "three old letters", "the noisy printer", "a bright red kite", "the results of the survey"]
    tail = ["before the storm arrived", "after a long meeting", "without telling anyone", "in the market square",
            "late on Friday evening", "with surprising care", "while the others slept", "near the harbour",
            "for the second time this week", "because the deadline was close", "despite the heavy rain", ""]
    extra = ["", "", "Nobody expected it.", "It took hours.", "Everyone agreed it was the right decision.",
             "The neighbours still talk about it, and some of them are not happy at all."]
    out: set[str] = set()
    while len(out) < n:
        s = f"{rng.choice(subj).capitalize()} {rng.choice(verb)} {rng.choice(obj)} {rng.choice(tail)}".strip()
        s = (s + ". " + rng.choice(extra)).strip()
        out.add(s)
    return sorted(out, key=lambda _: rng.random())


class Worker:
    def __init__(self, name: str, python: Path, engine: str, folder: Path, threads: int,
                 env: dict[str, str] | None = None) -> None:
        e = dict(os.environ if env is None else env)
        e.update(OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads), TOKENIZERS_PARALLELISM="false",
                 HF_HUB_OFFLINE="1", INFINITY_ANONYMOUS_USAGE_STATS="0", PYTHONPATH=str(HERE))
        self.name = name
        self.proc = subprocess.Popen([str(python), str(HERE / "engines.py"), engine, str(folder), str(threads)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=sys.stderr, env=e,
                                     text=True, bufsize=1)
        ready = self._read()
        self.load_seconds = ready["load_seconds"]

    def _read(self) -> dict[str, Any]:
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"worker {self.name} died")
            if line.startswith("{"):
                return json.loads(line)

    def ask(self, **cmd: Any) -> dict[str, Any]:
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()
        return self._read()

    def close(self) -> None:
        """End the worker: EOF on its stdin, then a kill if it has not exited within 60 s (infinity-emb's
        batch handler thread can hang at exit; the run's results are complete by then)."""
        self.proc.stdin.close()
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            print(f"worker {self.name} did not exit within 60 s of EOF: killed", file=sys.stderr)
            self.proc.kill()
            self.proc.wait()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, name: str, cmd: list[str], port: int, env: dict[str, str], model: str) -> None:
        self.name, self.port, self.model = name, port, model
        self.log = open(f"/tmp/densewire-bench-model-{name}.log", "w")
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        import httpx

        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server {name} exited: see {self.log.name}")
            try:
                r = httpx.post(f"http://127.0.0.1:{port}/embeddings" if name == "infinity"
                               else f"http://127.0.0.1:{port}/v1/embeddings",
                               json={"input": ["ready?"], "model": model}, timeout=30)
                if r.status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(1)
        raise RuntimeError(f"server {name} did not start")

    @property
    def url(self) -> str:
        return (f"http://127.0.0.1:{self.port}/embeddings" if self.name == "infinity"
                else f"http://127.0.0.1:{self.port}/v1/embeddings")

    def stop(self) -> None:
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.log.close()


async def http_load(url: str, model: str, texts: list[str], per_request: int, in_flight: int) -> float:
    """Seconds to embed ``texts`` as requests of ``per_request`` sentences, ``in_flight`` at a time."""
    return await http_batches(url, model, [texts[i:i + per_request] for i in range(0, len(texts), per_request)],
                              in_flight)


async def http_batches(url: str, model: str, batches: list[list[str]], in_flight: int,
                       latencies: list[float] | None = None, extra: dict[str, Any] | None = None) -> float:
    """Seconds to embed ``batches``, one request each, in order, ``in_flight`` at a time over keep-alive
    connections; each request's seconds are appended to ``latencies``; ``extra`` goes into every body
    (``encoding_format``).

    The load generator shares the two cores with the server it measures, so it must cost little: aiohttp
    (about a quarter of httpx's CPU per request, bench/python/RESULTS-client.md), bodies serialized before
    the clock starts. With httpx the client took so much of the cores that every server looked alike (the
    26 Nov run: ONNX 1.3x numpy over httpx, 1.8x with wrk as the client)."""
    import aiohttp

    bodies = [(json.dumps({"input": b, "model": model, **(extra or {})}).encode(), len(b)) for b in batches]
    queue = list(reversed(bodies))
    headers = {"Content-Type": "application/json", "Accept-Encoding": "identity"}
    connector = aiohttp.TCPConnector(limit=in_flight)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=300)) as client:
        async def one() -> None:
            while queue:
                body, n = queue.pop()
                t0 = time.perf_counter()
                async with client.post(url, data=body, headers=headers) as r:
                    payload = await r.read()
                    if r.status != 200:
                        raise RuntimeError(f"{url}: {r.status} {payload[:200]!r}")
                if latencies is not None:
                    latencies.append(time.perf_counter() - t0)
                if payload.count(b'"index"') != n:
                    raise RuntimeError(f"{url}: wrong number of vectors")

        t = time.perf_counter()
        await asyncio.gather(*(one() for _ in range(in_flight)))
        return time.perf_counter() - t


WRK_SCRIPT = """
local bodies, i = {}, 0
function init(args)
  for line in io.lines(args[1]) do bodies[#bodies + 1] = line end
end
function request()
  i = i % #bodies + 1
  return wrk.format("POST", nil, {["Content-Type"] = "application/json"}, bodies[i])
end
"""


def wrk_load(url: str, model: str, texts: list[str], connections: int, seconds: float, *,
             extra: dict[str, Any] | None = None, latencies: list[float] | None = None) -> float:
    """Requests/s of one-sentence requests from wrk (C, epoll: a few microseconds of CPU per request, so
    nearly all of the two cores go to the server), ``connections`` in flight, cycling over ``texts``;
    ``extra`` goes into every body (``encoding_format``); wrk's p50 and then p99, in seconds, are appended
    to ``latencies`` (wrk keeps no per-request times)."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        bodies = Path(tmp, "bodies.jsonl")
        bodies.write_text("".join(json.dumps({"input": [t], "model": model, **(extra or {})}) + "\n" for t in texts))
        script = Path(tmp, "post.lua")
        script.write_text(WRK_SCRIPT)
        out = subprocess.run(["wrk", "-t1", f"-c{connections}", f"-d{max(1, round(seconds))}s", "--latency", "-s",
                              str(script), url, "--", str(bodies)], capture_output=True, text=True, check=True).stdout
    if "Non-2xx" in out or "Socket errors" in out:
        raise RuntimeError(f"{url}: wrk saw errors:\n{out}")
    if latencies is not None:
        units = {"us": 1e-6, "ms": 1e-3, "s": 1.0}
        for q in ("50", "99"):
            m = next(m for ln in out.splitlines() if (m := re.match(rf"\s+{q}(?:\.000)?%\s+([0-9.]+)(us|ms|s)$", ln)))
            latencies.append(float(m.group(1)) * units[m.group(2)])
    return float(next(ln.split()[1] for ln in out.splitlines() if ln.startswith("Requests/sec")))


def summary(values: list[float]) -> dict[str, float]:
    return {"best": max(values), "median": statistics.median(values), "worst": min(values)}


def machine() -> dict[str, Any]:
    lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    model = next((ln.split(":", 1)[1].strip() for ln in lscpu.splitlines() if ln.startswith("Model name")), "?")
    flags = next((ln for ln in lscpu.splitlines() if ln.startswith("Flags")), "")
    versions = {}
    for py, names in ((MAIN_PY, "numpy onnxruntime onnx tokenizers"),
                      (BENCH_PY, "torch sentence_transformers infinity_emb transformers onnxruntime numpy")):
        code = ("import importlib,json;print(json.dumps({n: importlib.import_module(n).__version__ for n in "
                f"{names.split()!r}}}))")
        out = subprocess.run([str(py), "-c", code], capture_output=True, text=True).stdout.strip()
        versions["project venv" if py == MAIN_PY else "bench venv"] = json.loads(out or "{}")
    return {"cpu": model, "cores": os.cpu_count(), "avx512": "avx512f" in flags, "avx_vnni": "vnni" in flags,
            "python": platform.python_version(), "kernel": platform.release(), "versions": versions,
            **{v: os.environ.get(v) for v in OPENBLAS_VARS}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--http-rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--engines", default="onnx,onnx-nospin,onnx-buckets,onnx-int8,numpy,plain-opt,st,infinity")
    ap.add_argument("--no-http", action="store_true")
    ap.add_argument("--http-only", action="store_true", help="only the HTTP part (--engines picks the servers)")
    ap.add_argument("--http-sentences", type=int, default=96,
                    help="sentences per HTTP measurement (1-sentence requests; 32-sentence ones take 4/3 of it)")
    ap.add_argument("--wrk-seconds", type=int, default=10,
                    help="one-sentence requests, 8 in flight, from wrk for this long per server and round "
                         "(0: not run; also not run when wrk is missing: apt-get install wrk)")
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--out", default=str(HERE / "results.json"))
    args = ap.parse_args()

    sys.path.insert(0, str(ROOT / "python" / "src"))
    from densewire._backends import BertModel, default_model_path

    folder = default_model_path()
    cfg = BertModel(folder)
    texts = sentences()
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tok.no_truncation()
    tok.no_padding()
    lengths = [len(e.ids) for e in tok.encode_batch(texts)]
    flops_all = sum(cfg.flops_per_token(n) * n for n in lengths)  # FLOPs of one pass over the texts
    env_has_openblas = any(os.environ.get(v) for v in OPENBLAS_VARS)
    t_start = time.time()
    result: dict[str, Any] = {"machine": machine(), "loadavg_start": os.getloadavg(), "threads": args.threads,
                              "sentences": len(texts), "tokens": sum(lengths),
                              "tokens_per_sentence": [min(lengths), statistics.median(lengths), max(lengths)],
                              "flops_per_pass": flops_all, "command": " ".join(sys.argv)}
    print(json.dumps(result["machine"], indent=1), file=sys.stderr)

    wanted = args.engines.split(",")
    if args.http_only:
        result["http"] = run_http(args, folder, texts, wanted)
        result["loadavg_end"] = os.getloadavg()
        result["wall_seconds"] = time.time() - t_start
        Path(args.out).write_text(json.dumps(result, indent=1))
        print(json.dumps(result, indent=1))
        return
    spec = {"onnx": (MAIN_PY, "onnx"), "onnx-int8": (MAIN_PY, "onnx-int8"), "numpy": (MAIN_PY, "numpy"),
            "onnx-nospin": (MAIN_PY, "onnx-nospin"), "onnx-buckets": (MAIN_PY, "onnx-buckets"),
            "plain-opt": (BENCH_PY, "plain-optimized"), "st": (BENCH_PY, "st"), "infinity": (BENCH_PY, "infinity")}
    workers: dict[str, Worker] = {}
    for name in wanted:
        py, engine = spec[name]
        workers[name] = Worker(name, py, engine, folder, args.threads)
        print(f"loaded {name} in {workers[name].load_seconds:.2f} s", file=sys.stderr)
    if "numpy" in wanted and env_has_openblas:
        clean = {k: v for k, v in os.environ.items() if k not in OPENBLAS_VARS}
        workers["numpy-noenv"] = Worker("numpy-noenv", MAIN_PY, "numpy", folder, args.threads, env=clean)
    gemm = Worker("gemm", MAIN_PY, "gemm", folder, args.threads)
    result["load_seconds"] = {n: w.load_seconds for n, w in workers.items()}

    # cosines: every engine against sentence-transformers (or numpy when st is not run)
    vecs = {}
    for n, w in workers.items():
        a = w.ask(op="embed", texts=texts)
        vecs[n] = np.frombuffer(bytes.fromhex(a["vectors"]), dtype="<f4").reshape(len(texts), a["dims"])
    ref_name = "st" if "st" in vecs else "numpy"

    def cos(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        a, b = a.astype(np.float64), b.astype(np.float64)
        return (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)

    result["cosine_vs_" + ref_name] = {n: {"min": float(cos(v, vecs[ref_name]).min()),
                                           "mean": float(cos(v, vecs[ref_name]).mean()),
                                           "max_abs_diff": float(np.abs(v - vecs[ref_name]).max())}
                                       for n, v in vecs.items()}
    if "onnx-int8" in vecs and "onnx" in vecs:
        c = cos(vecs["onnx-int8"], vecs["onnx"])
        result["cosine_int8_vs_float32"] = {"min": float(c.min()), "mean": float(c.mean()),
                                            "p01": float(np.percentile(c, 1))}
    print(json.dumps({k: v for k, v in result.items() if k.startswith("cosine")}, indent=1), file=sys.stderr)

    # in process: interleaved rounds
    names = list(workers)
    rates: dict[str, dict[int, list[float]]] = {n: {b: [] for b in BATCHES} for n in names}
    peaks: list[float] = []
    for r in range(args.rounds):
        peaks.append(gemm.ask(op="gemm", n=1024, repeat=5)["flops"])
        order = names[r % len(names):] + names[:r % len(names)]
        for b in BATCHES:
            share = texts[:SHARE[b]]
            for n in order:
                secs = workers[n].ask(op="run", texts=share, batch=b)["seconds"]
                rates[n][b].append(len(share) / secs)
                if args.verbose:
                    print(f"  {n} batch {b}: {rates[n][b][-1]:.1f} sentences/s", file=sys.stderr)
        print(f"round {r + 1}/{args.rounds}: " + ", ".join(
            f"{n} {rates[n][1][-1]:.0f}/{rates[n][8][-1]:.0f}/{rates[n][32][-1]:.0f}" for n in names)
            + f"; GEMM {peaks[-1] / 1e9:.0f} GFLOP/s; load {os.getloadavg()[0]:.1f}", file=sys.stderr)
    peaks.append(gemm.ask(op="gemm", n=1024, repeat=5)["flops"])
    peak = max(peaks)
    inproc: dict[str, Any] = {}
    for n in names:
        inproc[n] = {}
        for b in BATCHES:
            vals = rates[n][b]
            entry = summary(vals)
            share_flops = sum(cfg.flops_per_token(k) * k for k in lengths[:SHARE[b]])
            share_n = SHARE[b]
            entry["flop_utilization_best"] = max(vals) / share_n * share_flops / peak
            entry["flop_utilization_median"] = statistics.median(vals) / share_n * share_flops / peak
            if "numpy" in rates:
                ratios = [x / y for x, y in zip(vals, rates["numpy"][b])]
                entry["vs_numpy_per_round"] = [min(ratios), statistics.median(ratios), max(ratios)]
            inproc[n][b] = entry
    result["gemm_peak_flops"] = {"best": peak, "median": statistics.median(peaks), "all": peaks}
    result["in_process"] = inproc
    for w in workers.values():
        w.close()
    gemm.close()

    if not args.no_http:
        result["http"] = run_http(args, folder, texts, wanted)
    result["loadavg_end"] = os.getloadavg()
    result["wall_seconds"] = time.time() - t_start
    Path(args.out).write_text(json.dumps(result, indent=1))
    print(json.dumps(result, indent=1))


def run_http(args: argparse.Namespace, folder: Path, texts: list[str], wanted: list[str]) -> dict[str, Any]:
    t = str(args.threads)
    base = {k: v for k, v in os.environ.items() if not k.startswith("DENSEWIRE_")}
    base.update(OMP_NUM_THREADS=t, MKL_NUM_THREADS=t, HF_HUB_OFFLINE="1", INFINITY_ANONYMOUS_USAGE_STATS="0",
                TOKENIZERS_PARALLELISM="false")
    common = ["serve", "--host", "127.0.0.1", "--cache-bytes", "0", "--no-demo-tables", "--log-level", "warning",
              "--blas-threads", t]
    plans = {
        "onnx": ([str(ROOT / ".venv" / "bin" / "densewire"), *common], "minilm"),
        "numpy": ([str(ROOT / ".venv" / "bin" / "densewire"), *common, "--engine", "numpy"], "minilm"),
        "st": ([str(HERE / ".venv" / "bin" / "densewire"), *common, "--model", f"st:{folder}"], str(folder)),
        "infinity": ([str(HERE / ".venv" / "bin" / "infinity_emb"), "v2", "--host", "127.0.0.1",
                      "--model-id", str(folder), "--engine", "torch", "--device", "cpu", "--batch-size", "32",
                      "--no-bettertransformer"], str(folder)),
    }
    servers: dict[str, Server] = {}
    try:
        for name, (cmd, model) in plans.items():
            if name not in wanted:
                continue
            port = free_port()
            cmd = [*cmd, "--port", str(port)]
            servers[name] = Server(name, cmd, port, dict(base), model)
            print(f"server {name} up on {port}", file=sys.stderr)
        # infinity names the model by its folder; ask it
        if "infinity" in servers:
            import httpx

            servers["infinity"].model = httpx.get(
                f"http://127.0.0.1:{servers['infinity'].port}/models").json()["data"][0]["id"]
        n = args.http_sentences
        modes = {"1x8": (1, 8, texts[:n]), "32x2": (32, 2, texts[:n * 4 // 3 // 32 * 32 or 32])}
        if shutil.which("wrk") and args.wrk_seconds > 0:
            modes["1x8-wrk"] = (1, 8, texts)
        rates: dict[str, dict[str, list[float]]] = {n: {m: [] for m in modes} for n in servers}
        names = list(servers)
        for r in range(args.http_rounds):
            order = names[r % len(names):] + names[:r % len(names)]
            for mode, (per, flight, share) in modes.items():
                for n in order:
                    s = servers[n]
                    if mode == "1x8-wrk":
                        rates[n][mode].append(wrk_load(s.url, s.model, texts, flight, args.wrk_seconds))
                        continue
                    secs = asyncio.run(http_load(s.url, s.model, share, per, flight))
                    rates[n][mode].append(len(share) / secs)
            print(f"http round {r + 1}: " + ", ".join(
                f"{n} " + "/".join(f"{rates[n][m][-1]:.0f}" for m in modes) for n in names)
                + f"; load {os.getloadavg()[0]:.1f}", file=sys.stderr)
        out: dict[str, Any] = {}
        for n in names:
            out[n] = {}
            for m in modes:
                entry = summary(rates[n][m])
                for other in ("numpy", "infinity"):
                    if other in rates and other != n:
                        ratios = [x / y for x, y in zip(rates[n][m], rates[other][m])]
                        entry[f"vs_{other}_per_round"] = [min(ratios), statistics.median(ratios), max(ratios)]
                out[n][m] = entry
        return out
    finally:
        for s in servers.values():
            s.stop()


if __name__ == "__main__":
    main()
