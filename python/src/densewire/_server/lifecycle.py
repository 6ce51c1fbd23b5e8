"""Liveness, readiness and the drain on SIGTERM.

* ``GET /health`` (liveness, TEI's route): 200 once the model is loaded, and then for as long as the
  process works, busy or draining; 503 only while the model loads (a Kubernetes ``startupProbe``).
* ``GET /ready`` (readiness): 200 when a new embeddings request would be admitted; 503 while the
  model loads, while draining after SIGTERM, and while admission is full (``--max-concurrent-requests``
  requests admitted), so that a load balancer sends the next request elsewhere.

The drain, on SIGTERM (or SIGINT): :class:`Lifecycle` puts a handler in front of uvicorn's. It marks
the server as draining at once: ``/ready`` answers 503 (the load balancer or Kubernetes takes the
replica out), a new embeddings request is answered 503 with ``Connection: close`` and
``Retry-After: 1`` (its client retries elsewhere), and everything else is still served; the
gRPC server (``--grpc-port``) sends GOAWAY: no new calls, the calls in flight finish. When the
last admitted embeddings request (HTTP or gRPC) has been answered, uvicorn's own graceful shutdown runs (stop
listening, close idle connections, finish the responses being sent, run the lifespan shutdown) and
the process exits. Admitted requests still waiting for the model when ``--timeout-graceful-shutdown``
has passed are answered 503 then, so the process exits within that time plus the few milliseconds
of uvicorn's own steps. A second signal skips the wait.
"""

from __future__ import annotations

import asyncio
import signal
import threading
import time
from types import FrameType
from typing import Any, Callable

from .admission import Admission
from .logs import log
from .metrics import Metrics

__all__ = ["Lifecycle", "DRAIN_SIGNALS"]

DRAIN_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class Lifecycle:
    def __init__(self, metrics: Metrics, admission: Admission, timeout: float) -> None:
        self.draining = False
        self.timeout = timeout
        self._metrics = metrics
        self._admission = admission
        self._previous: dict[int, Any] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._drain_task: asyncio.Task[None] | None = None
        #: set when --timeout-graceful-shutdown has passed: requests still waiting give up (503)
        self.expired = asyncio.Event()
        #: called in the event loop when the drain starts (the gRPC server's GOAWAY)
        self._drain_hooks: list[Callable[[], None]] = []

    def on_drain(self, hook: Callable[[], None]) -> None:
        """Call ``hook()`` in the event loop when the drain starts (at once if it has)."""
        self._drain_hooks.append(hook)

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
        self._loop = asyncio.get_running_loop()
        for sig in DRAIN_SIGNALS:
            previous = signal.getsignal(sig)
            if not callable(previous):
                continue  # SIG_DFL / SIG_IGN: nobody would drain; leave the process's behaviour alone
            self._previous[sig] = previous
            signal.signal(sig, self._chained(previous))

    def _chained(self, previous: Callable[[int, FrameType | None], Any]) -> Callable[[int, FrameType | None], Any]:
        def handler(sig: int, frame: FrameType | None) -> Any:
            if self.draining or self._loop is None or self._loop.is_closed():
                return previous(sig, frame)  # a second signal: no more waiting
            self.begin_drain(signal.Signals(sig).name)
            self._loop.call_soon_threadsafe(self._start_drain, previous, sig, frame)
            return None

        return handler

    def _start_drain(self, previous: Callable[[int, FrameType | None], Any], sig: int,
                     frame: FrameType | None) -> None:
        for hook in self._drain_hooks:
            try:
                hook()
            except Exception:  # noqa: BLE001 - one failing hook must not stop the drain
                log.exception("drain hook %r failed", hook)
        self._drain_task = asyncio.get_running_loop().create_task(self._drain(previous, sig, frame))

    async def _drain(self, previous: Callable[[int, FrameType | None], Any], sig: int,
                     frame: FrameType | None) -> None:
        """Wait for the admitted requests (at most ``timeout``), then hand over to uvicorn."""
        deadline = time.monotonic() + self.timeout
        try:
            while self._admission.active and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
            if self._admission.active:
                log.warning("%d admitted request(s) still waiting after %g s (--timeout-graceful-shutdown): "
                            "answering them 503", self._admission.active, self.timeout)
                self.expired.set()
                while self._admission.active:
                    await asyncio.sleep(0.01)
        finally:
            previous(sig, frame)

    def remove_signal_hooks(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)
        self._previous.clear()
