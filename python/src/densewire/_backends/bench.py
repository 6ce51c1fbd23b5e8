"""Throughput of a backend in sentences per second.

    python -m densewire._backends.bench [SPEC] [--batch 1 32] [--rounds 5] [--threads N]

Texts are synthetic English sentences of 8-20 words (about 19 tokens for
all-MiniLM-L6-v2). Each round embeds the same texts; the best and the median
round are printed, since shared machines are noisy, together with the rate
per CPU-second of the process (what an idle machine would give per busy
core; with one BLAS thread and one client thread it is close to wall-clock
speed on an idle machine, even when measured on a loaded one). ``--threads N`` runs N
client threads against one backend at once (as the server's thread pool does).
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time

import numpy as np

from .base import Backend
from .registry import load_backend

_WORDS = (
    "the quick brown fox jumps over lazy dog embeddings are dense vectors of "
    "floating point numbers served over http with packed float32 buffers and "
    "search engines rank documents by cosine similarity between queries"
).split()


def synthetic_texts(n: int, seed: int = 1) -> list[str]:
    """``n`` pseudo-sentences of 8 to 20 words."""
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(_WORDS, size=int(rng.integers(8, 21)))) for _ in range(n)]


def measure(
    backend: Backend, batch: int, n: int, rounds: int, threads: int = 1
) -> tuple[list[float], list[float]]:
    """Sentences per wall-clock second and per process CPU-second, per round."""
    texts = synthetic_texts(n)
    backend.embed(texts[:batch])  # warm up
    chunks = [texts[i:i + batch] for i in range(0, n, batch)]
    rates, cpu_rates = [], []
    for _ in range(rounds):
        todo = iter(chunks)
        lock = threading.Lock()

        def worker() -> None:
            while True:
                with lock:
                    chunk = next(todo, None)
                if chunk is None:
                    return
                backend.embed(chunk)

        start, cpu_start = time.perf_counter(), time.process_time()
        pool = [threading.Thread(target=worker) for _ in range(threads)]
        for t in pool:
            t.start()
        for t in pool:
            t.join()
        rates.append(n / (time.perf_counter() - start))
        cpu_rates.append(n / max(time.process_time() - cpu_start, 1e-9))
    return rates, cpu_rates


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("spec", nargs="?", default="minilm")
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 32])
    ap.add_argument("--texts", type=int, default=256, help="texts per round")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    backend = load_backend(args.spec)
    print(f"{backend!r} dimensions={backend.dimensions}")
    for batch in args.batch:
        n = max(args.texts if batch > 1 else min(args.texts, 128), batch)
        rates, cpu_rates = measure(backend, batch, n, args.rounds, args.threads)
        print(
            f"batch {batch:4d} threads {args.threads}: best {max(rates):8.1f} "
            f"median {statistics.median(rates):8.1f} sentences/s, "
            f"{statistics.median(cpu_rates):8.1f} per CPU-second ({n} texts x {args.rounds} rounds)"
        )


if __name__ == "__main__":
    main()
