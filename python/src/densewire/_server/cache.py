"""Vector caches: an in-process LRU bounded in bytes, and Redis shared by replicas.

Both map a key (model, dimensions, text) to the float32 vector that the server returns for that
text at that number of dimensions. Redis stores the vector's little-endian float32 bytes under
``densewire:v1:<model>:<dims>:<blake2b-128 of the text>``.

The Redis cache never stalls requests: calls have short socket timeouts and no retries, and the
first failure opens a circuit breaker; while it is open, lookups and stores are skipped at once
(the server answers uncached) and one background task probes Redis with a growing back-off
(0.5 s doubling to 10 s) until it answers again. The state is logged at each change and exported
as the ``densewire_redis_up`` gauge.
"""

from __future__ import annotations

import asyncio
import hashlib
import sys
import time
from collections import OrderedDict
from typing import Any, Callable, Iterable
from urllib.parse import urlsplit, urlunsplit

import numpy as np
from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ResponseError

from .logs import log

__all__ = ["MemoryCache", "RedisCache", "redis_key", "TOKEN_STATES", "SPARSE", "SPARSE_LEFT", "MULTI_VECTOR_QUERY",
           "MULTI_VECTOR_DOCUMENT"]

#: The memory cache's ``dims`` part of the key of an output that is not a pooled vector (vectors use 0 or
#: their dimensions), one value per kind, all here so that no two kinds share one: per-token states; a
#: sparse vector (the entry is its indices as float32 bits, then its values), and of a text cut keeping its
#: last tokens (truncation_direction Left); a multi-vector (ColBERT) model's vectors of a query, of a document.
TOKEN_STATES, SPARSE, SPARSE_LEFT, MULTI_VECTOR_QUERY, MULTI_VECTOR_DOCUMENT = -1, -2, -3, -4, -5


_ENTRY_OVERHEAD = 200  # dict slot, OrderedDict links, tuple, ndarray header


class MemoryCache:
    """An LRU of ``(float32 vector, token count)`` keyed by ``(dims, text)``, bounded by
    ``max_bytes``. The token count rides along so that a request served from the cache needs no
    tokenizer either. Used from the event loop only (no locking).
    """

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.bytes = 0
        self._d: OrderedDict[tuple[int, str], tuple[np.ndarray, int]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._d)

    @staticmethod
    def _cost(key: tuple[int, str], value: np.ndarray) -> int:
        return value.nbytes + sys.getsizeof(key[1]) + _ENTRY_OVERHEAD

    def get(self, key: tuple[int, str]) -> tuple[np.ndarray, int] | None:
        entry = self._d.get(key)
        if entry is not None:
            self._d.move_to_end(key)
        return entry

    def put(self, key: tuple[int, str], value: np.ndarray, tokens: int) -> None:
        if self.max_bytes <= 0:
            return
        cost = self._cost(key, value)
        if cost > self.max_bytes:
            return
        old = self._d.pop(key, None)
        if old is not None:
            self.bytes -= self._cost(key, old[0])
        value = np.array(value, dtype=np.float32, copy=True)  # own it; never a view of a batch
        value.flags.writeable = False
        self._d[key] = (value, int(tokens))
        self.bytes += cost
        while self.bytes > self.max_bytes:
            k, (v, _) = self._d.popitem(last=False)
            self.bytes -= self._cost(k, v)

    def clear(self) -> None:
        self._d.clear()
        self.bytes = 0


def redis_key(model: str, dims: int, text: str) -> bytes:
    digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()
    return f"densewire:v1:{model}:{dims}:{digest}".encode()


class RedisCache:
    """Redis as a shared vector cache, with a circuit breaker (see the module docstring)."""

    BACKOFF_START = 0.5
    BACKOFF_MAX = 10.0

    def __init__(
        self,
        url: str,
        *,
        ttl: int,
        timeout: float,
        on_state: Callable[[bool], None] | None = None,
    ) -> None:
        self.url = url
        self.ttl = ttl
        self.timeout = timeout
        self._client: Any = Redis.from_url(
            url,
            socket_timeout=timeout,
            socket_connect_timeout=timeout,
            retry=Retry(NoBackoff(), 0),
            retry_on_timeout=False,
            health_check_interval=0,
        )
        self._on_state = on_state or (lambda up: None)
        self.up = False
        self._probe: asyncio.Task[None] | None = None
        self._backoff = self.BACKOFF_START
        self._closed = False
        self.failures = 0
        self._last_refusal_log = -1e9

    @property
    def safe_url(self) -> str:
        """The URL without its password, for logs."""
        parts = urlsplit(self.url)
        if parts.password:
            netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
            return urlunsplit(parts._replace(netloc=netloc))
        return self.url

    async def start(self) -> None:
        """Connect; if Redis is not there yet, serve uncached and keep probing in the background."""
        try:
            await asyncio.wait_for(self._client.ping(), self.timeout * 4)
        except Exception as exc:  # noqa: BLE001 - any failure means "down"
            self._mark_down(exc)
            return
        self._mark_up(first=True)

    async def close(self) -> None:
        self._closed = True
        if self._probe is not None:
            self._probe.cancel()
            try:
                await self._probe
            except (asyncio.CancelledError, Exception):  # noqa: BLE001
                pass
        try:
            await self._client.aclose()
        except Exception:  # noqa: BLE001
            pass

    # -- state -------------------------------------------------------------
    def _mark_up(self, first: bool = False) -> None:
        was = self.up
        self.up = True
        self._backoff = self.BACKOFF_START
        self._on_state(True)
        if first:
            log.info("redis cache at %s is up", self.safe_url)
        elif not was:
            log.warning("redis cache at %s is back; caching through redis again", self.safe_url)

    def _mark_down(self, exc: BaseException) -> None:
        self.failures += 1
        if self.up or self._probe is None:
            log.warning(
                "redis cache at %s is unavailable (%s: %s); answering uncached and retrying "
                "with back-off", self.safe_url, type(exc).__name__, exc,
            )
        self.up = False
        self._on_state(False)
        if (self._probe is None or self._probe.done()) and not self._closed:
            self._probe = asyncio.get_running_loop().create_task(self._recover())

    async def _recover(self) -> None:
        while not self._closed:
            await asyncio.sleep(self._backoff)
            try:
                await asyncio.wait_for(self._client.ping(), self.timeout * 4)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001
                log.debug("redis probe failed: %s", exc)
                self._backoff = min(self._backoff * 2, self.BACKOFF_MAX)
                continue
            self._mark_up()
            return

    # -- operations --------------------------------------------------------
    async def get_many(self, keys: list[bytes]) -> list[bytes | None] | None:
        """Values for ``keys`` (None where absent); None as a whole when Redis is unavailable."""
        if not self.up or not keys:
            return None if not self.up else []
        try:
            return await asyncio.wait_for(self._client.mget(keys), self.timeout * 4)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001
            self._mark_down(exc)
            return None

    async def put_many(self, items: Iterable[tuple[bytes, bytes]]) -> bool:
        """Store values; False (and nothing raised) when Redis is unavailable."""
        if not self.up:
            return False
        pipe = self._client.pipeline(transaction=False)
        count = 0
        for key, value in items:
            if self.ttl:
                pipe.set(key, value, ex=self.ttl)
            else:
                pipe.set(key, value)
            count += 1
        if not count:
            return True
        try:
            await asyncio.wait_for(pipe.execute(), self.timeout * 4)
        except asyncio.CancelledError:
            raise
        except ResponseError as exc:
            # Redis answers but refuses the write (OOM under maxmemory noeviction, READONLY
            # replica): not an outage, so no circuit breaker; say so at most once a minute
            now = time.monotonic()
            if now - self._last_refusal_log > 60:
                self._last_refusal_log = now
                log.warning("redis cache at %s refuses writes: %s", self.safe_url, exc)
            return False
        except Exception as exc:  # noqa: BLE001
            self._mark_down(exc)
            return False
        return True
