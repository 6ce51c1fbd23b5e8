"""When to retry and how long to wait: exponential backoff with full jitter, honouring Retry-After.

Retried: 429 and 503 (the server shed the request before doing its work) and connection errors
before any byte of an answer arrived (refused, reset, closed on a pooled connection). Never retried:
any other 4xx (the caller's fault, the same request fails again), other 5xx, timeouts, and answers
that broke while the body arrived. The defaults are the OpenAI SDKs': 2 retries, 0.5 s doubling to 8 s.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from email.utils import parsedate_to_datetime

__all__ = ["RetryPolicy", "RETRY_STATUSES", "parse_retry_after"]

RETRY_STATUSES = frozenset({429, 503})


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """``Retry-After`` in seconds from now: delta-seconds or an HTTP date (RFC 9110 10.2.3); None if
    absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    if value.isascii() and value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None or when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """``max_retries`` retries after the first attempt; the n-th waits a uniformly random time in
    ``[0, min(backoff_cap, backoff_base * 2**n)]`` (full jitter), and at least the server's
    ``Retry-After`` (capped at ``max_retry_after`` seconds)."""

    max_retries: int = 2
    backoff_base: float = 0.5
    backoff_cap: float = 8.0
    max_retry_after: float = 60.0

    def __post_init__(self) -> None:
        if not isinstance(self.max_retries, int) or self.max_retries < 0:
            raise ValueError(f"max_retries must be a non-negative integer, got {self.max_retries!r}")
        if self.backoff_base < 0 or self.backoff_cap < 0:
            raise ValueError("backoff_base and backoff_cap must not be negative")

    def delay(self, retry: int, retry_after: float | None = None) -> float:
        """Seconds to wait before retry number ``retry`` (0 for the first retry)."""
        wait = random.uniform(0.0, min(self.backoff_cap, self.backoff_base * (2 ** retry)))
        if retry_after is not None:
            wait = max(wait, min(retry_after, self.max_retry_after))
        return wait
