"""Bounded admission of ``POST /v1/embeddings`` (``--max-concurrent-requests``, ``--request-timeout``).

TEI's meaning: at most ``max_concurrent_requests`` embeddings requests are being processed or are
waiting for the model at any time; one more is answered at once with 429, the OpenAI error envelope
and ``Retry-After`` (the time the queue needs to drain, from the recent request durations). Nothing
else goes through admission: tables, ``/health``, ``/ready`` and ``/metrics`` never wait behind
embeddings traffic.

An admitted request has a deadline (``--request-timeout`` from its admission): past it, or as soon
as its client has gone, it leaves: its inputs still queued are taken out of the micro-batcher's
queue (they never reach the model) and its slot is freed.
"""

from __future__ import annotations

import asyncio
import math
import time
from typing import Any, Awaitable, Callable, TypeVar

from densewire import RateLimitedError, UnavailableError

from .metrics import Metrics

__all__ = ["Admission", "Ticket", "ClientGone", "ShuttingDown", "await_while_connected"]

T = TypeVar("T")

#: Weight of the latest request in the running mean of request durations (for ``Retry-After``).
_EWMA_WEIGHT = 0.2


class ClientGone(Exception):
    """The client closed its connection while its request waited; nobody is left to answer."""


class Ticket:
    """One admitted request: its slot is given back by :meth:`release` (once)."""

    __slots__ = ("_admission", "admitted_at", "deadline", "_released")

    def __init__(self, admission: "Admission", now: float, timeout: float) -> None:
        self._admission = admission
        self.admitted_at = now
        self.deadline = now + timeout if timeout > 0 else math.inf
        self._released = False

    def remaining(self) -> float | None:
        """Seconds left before the deadline (None: no deadline)."""
        if self.deadline == math.inf:
            return None
        return self.deadline - time.monotonic()

    def release(self, completed: bool = False) -> None:
        if not self._released:
            self._released = True
            self._admission._release(self, completed)


class Admission:
    """The admission counter of one server (all on the event loop: no locks needed)."""

    def __init__(self, limit: int, timeout: float, metrics: Metrics) -> None:
        self.limit = limit
        self.timeout = timeout
        self.active = 0
        self._metrics = metrics
        self._mean_seconds = 0.0
        metrics.admission_limit.set(limit)

    @property
    def full(self) -> bool:
        return self.active >= self.limit

    def retry_after(self) -> int:
        """Whole seconds after which a slot is likely free: one mean request duration, at least 1."""
        return max(1, math.ceil(self._mean_seconds))

    def admit(self) -> Ticket:
        """A ticket, or ``RateLimitedError`` (429) when ``limit`` requests are already admitted."""
        if self.active >= self.limit:
            self._metrics.admission_rejections.labels("full").inc()
            raise RateLimitedError(
                f"the server is at its limit of {self.limit} concurrent embeddings requests "
                f"(--max-concurrent-requests); retry after {self.retry_after()} s")
        self.active += 1
        self._metrics.admission_active.set(self.active)
        return Ticket(self, time.monotonic(), self.timeout)

    def _release(self, ticket: Ticket, completed: bool) -> None:
        self.active -= 1
        self._metrics.admission_active.set(self.active)
        if completed:
            took = time.monotonic() - ticket.admitted_at
            self._mean_seconds += _EWMA_WEIGHT * (took - self._mean_seconds)

    def timed_out(self) -> UnavailableError:
        self._metrics.admission_rejections.labels("timeout").inc()
        return UnavailableError(
            f"not answered within {self.timeout:g} s (--request-timeout): the server is overloaded; retry")


class ShuttingDown(Exception):
    """The drain's time (``--timeout-graceful-shutdown``) is over; the request is answered 503."""


async def await_while_connected(work: Awaitable[T], receive: Callable[[], Awaitable[Any]],
                                ticket: Ticket, stop: asyncio.Event) -> T:
    """``await work``, unless the client disconnects (``ClientGone``), the ticket's deadline passes
    (``TimeoutError``) or ``stop`` is set (``ShuttingDown``) first; in each case ``work`` is cancelled,
    which takes its inputs out of the queue.

    ``receive`` is the ASGI receive of a request whose body was read: its next message is
    ``http.disconnect``, sent when the client closes the connection.
    """
    task = asyncio.ensure_future(work)
    watcher = asyncio.ensure_future(_wait_disconnect(receive))
    stopper = asyncio.ensure_future(stop.wait())
    try:
        done, _ = await asyncio.wait({task, watcher, stopper}, timeout=ticket.remaining(),
                                     return_when=asyncio.FIRST_COMPLETED)
        if task in done:
            return task.result()
        if watcher in done:
            raise ClientGone()
        if stopper in done:
            raise ShuttingDown()
        raise TimeoutError()
    finally:
        watcher.cancel()
        stopper.cancel()
        if not task.done():
            task.cancel()
            try:
                await task
            except BaseException:  # noqa: BLE001 - cancelled work: its outcome is not wanted
                pass


async def _wait_disconnect(receive: Callable[[], Awaitable[Any]]) -> None:
    while True:
        message = await receive()
        if message.get("type") == "http.disconnect":
            return
