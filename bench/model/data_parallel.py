"""One model call on 2 intra-op threads against two calls at once on 1 thread each.

    .venv/bin/python bench/model/data_parallel.py [--rounds 5]

The same ONNX engine (today's packed graph) and the same sentences: "1 call x 2 threads" embeds
calls of B sentences one after the other on a backend of 2 intra-op threads (what `densewire serve`
runs by default); "2 calls x 1 thread" has two Python threads embed calls of B at the same time on
one backend of 1 intra-op thread (`--model-threads 2 --blas-threads 1`). Sentences/s, median of the
interleaved rounds.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench import sentences  # noqa: E402

from densewire._backends import OnnxBertBackend, default_model_path  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    texts = sentences()
    two_threads = OnnxBertBackend(default_model_path(), threads=2)
    one_thread = OnnxBertBackend(default_model_path(), threads=1)

    def serial(n: int, off: int, batch: int) -> float:
        t = time.perf_counter()
        for i in range(off, off + n, batch):
            two_threads.embed(texts[i:i + batch])
        return n / (time.perf_counter() - t)

    def parallel(n: int, off: int, batch: int) -> float:
        def work(start: int) -> None:
            for i in range(start, start + n // 2, batch):
                one_thread.embed(texts[i:i + batch])

        threads = [threading.Thread(target=work, args=(off + k * n // 2,)) for k in range(2)]
        t = time.perf_counter()
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        return n / (time.perf_counter() - t)

    cases = [("1 call x 2 threads", serial, b) for b in (1, 8)] + [("2 calls x 1 thread", parallel, b) for b in (1, 4, 8)]
    rates: dict[tuple[str, int], list[float]] = {(name, b): [] for name, _, b in cases}
    for r in range(args.rounds):
        off = (r * 48) % 200
        for name, fn, b in (cases if r % 2 == 0 else cases[::-1]):
            rates[(name, b)].append(fn(48 if b == 1 else 96, off, b))
    for (name, b), v in rates.items():
        print(f"{name}, calls of {b}: {statistics.median(v):6.1f} sentences/s (best {max(v):.1f})")


if __name__ == "__main__":
    main()
