"""Liveness, readiness and the drain on SIGTERM.

* ``GET /health`` (liveness, TEI's route): 200 once the model is loaded, and then for as long as the
  process works, busy or draining; 503 only while the model loads (a Kubernetes ``startupProbe``).
* ``GET /ready`` (readiness): 200 when a new embeddings request would be admitted; 503 while the
  model loads, while draining after SIGTERM, and while admission is full (``--max-concurrent-requests``
  requests admitted), so that a load balancer sends the next request elsewhere.

The drain: uvicorn turns SIGTERM/SIGINT into a graceful shutdown (stop accepting connections, finish
the requests in flight within ``--timeout-graceful-shutdown``, then exit). :class:`Lifecycle` chains
a handler in front of uvicorn's that first marks the server as draining, so that from that moment
``/ready`` says 503 and an embeddings request that still arrives (on a kept-alive connection, or in
the instant before the listening socket closes) is answered 503 with ``Connection: close``, while the
requests already admitted are answered.
"""

from __future__ import annotations

import signal
import threading
from types import FrameType
from typing import Any, Callable

from .logs import log
from .metrics import Metrics

__all__ = ["Lifecycle", "DRAIN_SIGNALS"]

DRAIN_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class Lifecycle:
    def __init__(self, metrics: Metrics) -> None:
        self.draining = False
        self._metrics = metrics
        self._previous: dict[int, Any] = {}

    def begin_drain(self, why: str) -> None:
        if not self.draining:
            self.draining = True
            self._metrics.draining.set(1)
            log.info("draining (%s): /ready answers 503, new embeddings requests 503", why)

    def install_signal_hooks(self) -> None:
        """Put :meth:`begin_drain` in front of the current SIGTERM/SIGINT handlers (uvicorn's, when
        called from the lifespan). Only in the main thread (where signals are delivered)."""
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in DRAIN_SIGNALS:
            previous = signal.getsignal(sig)
            if not callable(previous):
                continue  # SIG_DFL / SIG_IGN: nobody would drain; leave the process's behaviour alone
            self._previous[sig] = previous
            signal.signal(sig, self._chained(previous))

    def _chained(self, previous: Callable[[int, FrameType | None], Any]) -> Callable[[int, FrameType | None], Any]:
        def handler(sig: int, frame: FrameType | None) -> Any:
            self.begin_drain(signal.Signals(sig).name)
            return previous(sig, frame)

        return handler

    def remove_signal_hooks(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)
        self._previous.clear()
