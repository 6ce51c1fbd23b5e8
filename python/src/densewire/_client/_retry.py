"""When to retry and how long to wait: SPEC.md section 18, the schedule of every densewire client.

Retried: 429 and 503 (the server shed the request before doing its work) and connection errors
before any byte of an answer arrived (refused, reset, closed on a pooled connection). Never retried:
any other status (4xx: the caller's fault; 500, 502, 504), timeouts, and answers that broke while
the body arrived. Retry ``n`` waits ``draw * min(cap, base * 2**(n-1))`` seconds (full jitter) on top
of the server's ``Retry-After``; a ``Retry-After`` over 60 s gives up at once. The defaults are the
OpenAI SDKs': 2 retries, 0.5 s doubling to 8 s.
"""

from __future__ import annotations

import math
import random as _random
import time
from collections.abc import Callable
from dataclasses import dataclass
from email.utils import parsedate_to_datetime

__all__ = ["RetryPolicy", "RETRY_STATUSES", "MAX_RETRY_AFTER", "parse_retry_after"]

RETRY_STATUSES = frozenset({429, 503})
#: A ``Retry-After`` longer than this (seconds) is not waited for: the error is raised at once.
MAX_RETRY_AFTER = 60.0


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """``Retry-After`` in seconds from ``now`` (Unix seconds; the clock by default), SPEC.md 18.2:
    delay-seconds (ASCII digits) or an HTTP date (a past one is 0); None if absent or anything else."""
    if value is None:
        return None
    value = value.strip(" \t")
    if value.isascii() and value.isdigit():
        return float(int(value))
    if not value[:3].isalpha():
        return None
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when is None or when.tzinfo is None:
        return None
    return max(0.0, float(int(when.timestamp())) - (time.time() if now is None else now))


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """``max_retries`` retries after the first attempt; retry ``n`` (1, 2, ...) waits
    ``random() * min(backoff_cap, backoff_base * 2**(n-1))`` seconds (full jitter) added to the
    server's ``Retry-After`` (SPEC.md 18.2). ``random`` is the source of the draws, uniform in
    [0, 1): pass a seeded ``random.Random().random`` for a reproducible schedule, or a constant to
    test one wait."""

    max_retries: int = 2
    backoff_base: float = 0.5
    backoff_cap: float = 8.0
    random: Callable[[], float] = _random.random

    def __post_init__(self) -> None:
        if not isinstance(self.max_retries, int) or self.max_retries < 0:
            raise ValueError(f"max_retries must be a non-negative integer, got {self.max_retries!r}")
        if not (self.backoff_base >= 0 and self.backoff_cap >= 0):
            raise ValueError("backoff_base and backoff_cap must be non-negative numbers")

    def backoff(self, retry: int) -> float:
        """The jitter of retry ``retry`` (1 for the first): a draw times ``min(cap, base * 2**(retry-1))``."""
        try:
            product = math.ldexp(self.backoff_base, retry - 1)  # base * 2**(n-1), exact: 0 stays 0 for any n
        except OverflowError:
            product = float("inf")
        return self.random() * min(self.backoff_cap, product)

    def wait(self, retry: int, *, status: int = 0, retry_after: str | None = None,
             now: float | None = None) -> float | None:
        """Seconds to wait before retry ``retry`` (1 for the first) of a request that failed with
        ``status`` (0: the connection failed before any answer) and this ``Retry-After`` header value;
        None: do not retry (not a retried status, the retries are spent, or the server asked for more
        than :data:`MAX_RETRY_AFTER` seconds). The retry loop's only rule (SPEC.md 18.2)."""
        if status != 0 and status not in RETRY_STATUSES:
            return None
        if retry > self.max_retries:
            return None
        seconds = parse_retry_after(retry_after, now)
        if seconds is not None and seconds > MAX_RETRY_AFTER:
            return None
        jitter = self.backoff(retry)
        return jitter if seconds is None else seconds + jitter
