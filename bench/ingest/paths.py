"""copy_vectors' two sending paths alone, side by side: libpq's (the default) and the socket (direct=True).

    URL=$(bash scripts/postgres.sh start /tmp/dw-paths | tail -1)
    .venv/bin/python bench/ingest/paths.py "$URL" --n 50000 --rounds 6
    bash scripts/postgres.sh stop /tmp/dw-paths

Loads n x 1,536 float32 vectors (standard normal, seed 0) with int8 ids into a vector(1536) table,
alternating the two paths round by round (TRUNCATE and CHECKPOINT before each load, untimed), and
prints each path's median rows/s and client CPU per row (getrusage of this process, user + system).
"""

from __future__ import annotations

import argparse
import resource
import statistics
import time

import numpy as np
import psycopg

from densewire.pgvector import copy_vectors


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("url")
    ap.add_argument("--n", type=int, default=50_000)
    ap.add_argument("--rounds", type=int, default=6)
    args = ap.parse_args()
    x = np.random.default_rng(0).standard_normal((args.n, 1536)).astype(np.float32)
    ids = np.arange(args.n, dtype=np.int64)
    with psycopg.connect(args.url, autocommit=True) as c:
        c.execute("CREATE EXTENSION IF NOT EXISTS vector")
        c.execute("DROP TABLE IF EXISTS dw_paths")
        c.execute("CREATE TABLE dw_paths (id int8, embedding vector(1536))")
    runs: dict[bool, list[tuple[float, float, float]]] = {False: [], True: []}
    for r in range(args.rounds):
        for direct in ((False, True) if r % 2 == 0 else (True, False)):
            with psycopg.connect(args.url, autocommit=True) as c:
                c.execute("TRUNCATE dw_paths")
                c.execute("CHECKPOINT")
                before, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
                copy_vectors(c, "dw_paths", ("id", "embedding"), x, ids, direct=direct)
                wall, after = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF)
            user, system = after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime
            runs[direct].append((args.n / wall, (user + system) / args.n * 1e6, system / args.n * 1e6))
    for direct, v in runs.items():
        print(f"{'socket (direct=True)' if direct else 'libpq (default)':22s} "
              f"rows/s {statistics.median(a for a, _, _ in v):8,.0f}   "
              f"client CPU {statistics.median(b for _, b, _ in v):5.2f} us/row "
              f"(system {statistics.median(c for _, _, c in v):4.2f})")


if __name__ == "__main__":
    main()
