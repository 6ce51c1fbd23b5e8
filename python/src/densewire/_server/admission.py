"""Bounded admission of ``POST /v1/embeddings`` (``--max-concurrent-requests``, ``--request-timeout``).

TEI's meaning: at most ``max_concurrent_requests`` embeddings requests are being processed or are
waiting for the model at any time; one more is answered at once with 429, the OpenAI error envelope
and ``Retry-After`` (SPEC.md 18.3): the clients turned away are spread over the time the queue needs
to drain, each told to come back when the one told before it should be done, from the recent request
durations, instead of all being told the same second. Nothing
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

__all__ = ["Admission", "Ticket", "ClientGone", "ShuttingDown", "await_while_connected", "wait_disconnect"]

T = TypeVar("T")

#: Weight of the latest request in the running mean of request durations (RFC 6298's 1/8).
_MEAN_GAIN = 0.125
#: How long after its ``Retry-After`` a client may come back: SPEC.md 18.2's jitter with the default
#: base (at most 0.5 s on the first retry, 1 s on the second).
_CLIENT_JITTER = 1.0
#: The longest ``Retry-After`` a client waits for (SPEC.md 18.2); one told more does not come back.
_CLIENT_MAX_RETRY_AFTER = 60


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

    def shorten(self, deadline: float | None) -> None:
        """Keep the client's own deadline (``time.monotonic()`` seconds) when it comes first."""
        if deadline is not None and deadline < self.deadline:
            self.deadline = deadline

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
        self._mean = 0.0  # seconds of one request, smoothed (as RFC 6298's SRTT)
        self._measured = False
        self._next = 0.0  # monotonic time a slot is expected free for the next client turned away
        metrics.admission_limit.set(limit)

    @property
    def full(self) -> bool:
        return self.active >= self.limit

    def estimate(self) -> float:
        """Seconds one request is expected to take: the smoothed mean of the requests completed.
        (Adding their deviation, as RFC 6298 does for a timeout, was tried: it lengthens the queue of
        promises past the clients' 60 s under load more often than it saves a client a retry.)"""
        return self._mean

    def retry_after(self, now: float | None = None) -> int:
        """Whole seconds (at least 1) a client turned away now should wait, and a place kept for it:
        the first time a slot is expected free after the clients already told to come back, each of
        which may come back up to a second late (its jitter) and keeps a slot for one request's time
        (SPEC.md 18.3)."""
        now = time.monotonic() if now is None else now
        share = self.estimate() / self.limit
        wait = max(1, math.ceil(max(self._next, now + share) - now))
        if wait <= _CLIENT_MAX_RETRY_AFTER:  # a client told more gives up (SPEC.md 18.2): no place kept
            self._next = now + wait + (_CLIENT_JITTER + self.estimate()) / self.limit
        return wait

    def admit(self) -> Ticket:
        """A ticket, or ``RateLimitedError`` (429, with its ``retry_after`` in whole seconds) when
        ``limit`` requests are already admitted."""
        if self.active >= self.limit:
            self._metrics.admission_rejections.labels("full").inc()
            wait = self.retry_after()
            error = RateLimitedError(
                f"the server is at its limit of {self.limit} concurrent embeddings requests "
                f"(--max-concurrent-requests); retry after {wait} s")
            error.retry_after = wait
            raise error
        self.active += 1
        self._metrics.admission_active.set(self.active)
        return Ticket(self, time.monotonic(), self.timeout)

    def _release(self, ticket: Ticket, completed: bool) -> None:
        self.active -= 1
        self._metrics.admission_active.set(self.active)
        if completed:
            took = time.monotonic() - ticket.admitted_at
            if not self._measured:  # the first measurement is the mean (RFC 6298 2.2)
                self._mean, self._measured = took, True
            else:
                self._mean += _MEAN_GAIN * (took - self._mean)

    def timed_out(self) -> UnavailableError:
        self._metrics.admission_rejections.labels("timeout").inc()
        return UnavailableError(
            f"not answered within {self.timeout:g} s (--request-timeout): the server is overloaded; retry")


class ShuttingDown(Exception):
    """The drain's time (``--timeout-graceful-shutdown``) is over; the request is answered 503."""


async def await_while_connected(work: Awaitable[T], gone: Callable[[], Awaitable[Any]] | None,
                                ticket: Ticket, stop: asyncio.Event) -> T:
    """``await work``, unless the client disconnects (``ClientGone``), the ticket's deadline passes
    (``TimeoutError``) or ``stop`` is set (``ShuttingDown``) first; in each case ``work`` is cancelled,
    which takes its inputs out of the queue (as it is when the caller itself is cancelled: grpc.aio
    cancels the handler of a call its client cancelled).

    ``gone()`` returns when the client has left (:func:`wait_disconnect` over HTTP); None: never.
    """
    task = asyncio.ensure_future(work)
    watcher = asyncio.ensure_future(gone() if gone is not None else asyncio.Event().wait())
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


async def wait_disconnect(receive: Callable[[], Awaitable[Any]]) -> None:
    """Returns when the client of an ASGI request whose body was read disconnects: the next message of
    its ``receive`` is ``http.disconnect``."""
    while True:
        message = await receive()
        if message.get("type") == "http.disconnect":
            return
