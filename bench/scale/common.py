"""What bench.py (Ray, T1/T2/T4/T5) and spark.py (T3) share: the corpus, interleaved rounds and their
summary, and the machine's description recorded beside every figure."""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from typing import Any

from densewire._backends import cpu_features, cpu_flags
from densewire._bench import machine_info

__all__ = ["D", "texts", "rounds", "summary", "machine"]

D = 1536  # the dimension (OpenAI's text-embedding-3-small)


def texts(n: int) -> list[str]:
    return [f"passage {i}: the quick brown fox jumps over the lazy dog, item {i * 7919 % 100003}" for i in range(n)]


def summary(rows: int, seconds: list[float]) -> dict[str, float]:
    rates = [rows / s for s in seconds]
    return {"best_rows_per_s": max(rates), "median_rows_per_s": statistics.median(rates), "rounds": len(rates),
            "rows_per_s_each_round": rates}


def rounds(label: str, rows: int, runs: dict[str, Callable[[], Any]], n: int, *, quiet: bool = False
           ) -> dict[str, dict[str, float]]:
    """Every contender once a round, in an order rotated each round; each one's rows/s summary."""
    times: dict[str, list[float]] = {k: [] for k in runs}
    names = list(runs)
    for r in range(n):
        for name in names[r % len(names):] + names[:r % len(names)]:
            began = time.perf_counter()
            runs[name]()
            times[name].append(time.perf_counter() - began)
            if not quiet:
                print(f"{label} round {r} {name}: {rows / times[name][-1]:.0f} rows/s", flush=True)
    return {k: summary(rows, v) for k, v in times.items()}


def machine(packages: tuple[str, ...]) -> dict[str, Any]:
    """:func:`densewire._bench.machine_info` (CPU model, cores, Python, the versions of ``packages``) with
    the CPU features that decide the engine (precision.cpu_features), the load when the run began, and
    the BLAS variables some machines set."""
    return {**machine_info(packages), "cpu_features": list(cpu_features(cpu_flags())),
            "load_average_at_start": os.getloadavg(),
            **{k: os.environ[k] for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE") if k in os.environ}}
