"""The thread count of the BLAS library under numpy: one switch for the BERT backend's
``blas_threads`` option and the server's ``--blas-threads``."""

from __future__ import annotations

from densewire._optional import require

__all__ = ["limit_blas_threads"]


def limit_blas_threads(threads: int) -> None:
    """Limit the BLAS library under numpy to ``threads`` threads, process-wide (threadpoolctl)."""
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"blas_threads must be a positive integer, not {threads!r}")
    threadpoolctl = require("threadpoolctl", extra="serve", feature="blas_threads")
    threadpoolctl.threadpool_limits(limits=threads, user_api="blas")
