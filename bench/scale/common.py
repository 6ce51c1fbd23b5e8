"""What bench.py (Ray, T1/T2/T4/T5) and spark.py (T3) share: the corpus, interleaved rounds and their
summary, and the machine's description recorded beside every figure."""

from __future__ import annotations

import os
import platform
import statistics
import subprocess
import time
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from typing import Any

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


def _lscpu() -> dict[str, str]:
    out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    return dict((k.strip(), v.strip()) for k, _, v in (line.partition(":") for line in out.splitlines()) if v)


def machine(packages: tuple[str, ...]) -> dict[str, Any]:
    """The CPU (model, cores, the SIMD flags that matter), the load when the run began, Python and the
    versions of ``packages``, and the BLAS variables some machines set."""
    cpu = _lscpu()
    flags = cpu.get("Flags", "").split()
    wanted = ("avx2", "avx512f", "avx512_bf16", "avx512_vnni", "amx_bf16", "amx_int8", "f16c", "fma")

    def ver(p: str) -> str:
        try:
            return version(p)
        except PackageNotFoundError:
            return "not installed"

    return {"cpu": cpu.get("Model name", "?"), "cores": os.cpu_count(), "cpu_flags": [f for f in wanted if f in flags],
            "load_average_at_start": os.getloadavg(), "python": platform.python_version(),
            **{k: os.environ[k] for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE") if k in os.environ},
            **{p: ver(p) for p in packages}}
