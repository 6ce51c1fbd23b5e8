"""A fleet of ``densewire serve`` replicas behind one worker: requests spread, failures skipped.

Each request goes to the healthy replica with the fewest requests in flight from this worker (ties
taken round robin, so a fleet of equals is used in turn). A replica that does not answer (connection
refused or reset, a timeout) or answers 503 (loading, draining, full) is marked down and skipped;
a background probe asks its ``GET /ready`` until it answers 200, and then it takes requests again.
The request that failed is sent again to another replica (the client's :class:`RetryPolicy`: up to
``retries`` more attempts, after its backoff when no other replica is healthy; 429 honours
``Retry-After``). When no replica answers for ``timeout`` seconds the job stops with a
:class:`BatchError` (``unavailable``) naming each replica and why it is down.

The answers are asked for raw first (then MessagePack, Protobuf, JSON: whatever the server speaks)
and decoded as views of the one buffer each body was read into, so the vectors reach the Arrow
column with no per-row object and no copy.
"""

from __future__ import annotations

import asyncio
import itertools
import re
import time
from collections.abc import Callable, Sequence
from typing import Any

import orjson
import yarl

from .._client._embeddings import (DEFAULT_ACCEPT, _decode_response, _decode_sparse, _decode_tokens, _request_body,
                                   auth_headers, base_url_of)
from .._client._errors import APIConnectionError, APIError
from .._client._retry import RETRY_STATUSES, RetryPolicy
from .._client._transport import Transport
from .._ragged import RaggedTensor, SparseVectors
from .._tensor import Tensor
from ._errors import BatchError

__all__ = ["Fleet", "Replica"]

#: seconds between two probes of a replica that is down, doubling up to PROBE_CAP
PROBE_FIRST, PROBE_CAP, PROBE_TIMEOUT = 0.2, 2.0, 5.0
_INPUT_INDEX = re.compile(r"^input\[(\d+)\]")


class Replica:
    """One server: its URLs, requests in flight, and whether (and why) it is down."""

    def __init__(self, url: str) -> None:
        self.base = base_url_of(url)
        self.embeddings = yarl.URL(f"{self.base}/v1/embeddings")
        self.embed_all = yarl.URL(f"{self.base}/embed_all")
        self.embed_sparse = yarl.URL(f"{self.base}/embed_sparse")
        self.in_flight = 0
        self.sent = 0
        self.down: str | None = None  # why, while it is down
        self.probe: asyncio.Task | None = None

    def __repr__(self) -> str:
        return f"Replica({self.base!r}, in_flight={self.in_flight}, down={self.down!r})"


class Fleet:
    """The replicas, one transport (one aiohttp connection pool) and the retry policy; used on one
    event loop."""

    def __init__(self, urls: Sequence[str], *, model: str | None, dtype: str, timeout: float | None,
                 retries: int, api_key: str | None, max_in_flight: int) -> None:
        if not urls:
            raise BatchError("url names no replica", column=None)
        self.replicas = [Replica(u) for u in urls]
        self.model, self.dtype, self.timeout = model, dtype, timeout
        self.retry = RetryPolicy(retries)
        self._headers = {"Accept": DEFAULT_ACCEPT, "Accept-Encoding": "identity",
                         "Content-Type": "application/json", **auth_headers(api_key)}
        # no retries inside the transport: a failed request moves to another replica here
        self._transport = Transport(timeout=timeout, retry=RetryPolicy(0),
                                    max_connections=max(8, 2 * max_in_flight * len(self.replicas)))
        self._turn = itertools.count()

    async def close(self) -> None:
        for r in self.replicas:
            if r.probe is not None:
                r.probe.cancel()
                r.probe = None
        await self._transport.close()

    # -------------------------------------------------------------------------------- requests
    async def embed(self, texts: list[str], *, block: str | None, row0: int) -> Tensor:
        """The vectors of ``texts`` (rows ``row0 ...`` of ``block``) from one replica."""
        body = _request_body(texts, self.model, None, self.dtype)
        return await self._post("embeddings", body, lambda r: _decode_response(r).tensor, texts, block, row0)

    async def embed_tokens(self, texts: list[str], *, block: str | None, row0: int) -> RaggedTensor:
        """The per-token states of ``texts`` (TEI's ``POST /embed_all``, densewire's ragged raw body asked
        for first) from one replica, as a RaggedTensor over the body's buffer."""
        body = orjson.dumps({"inputs": texts})
        return await self._post("embed_all", body, lambda r: _decode_tokens(r).tensor, texts, block, row0)

    async def embed_sparse(self, texts: list[str], *, block: str | None, row0: int,
                           vocab_size: int | None = None) -> SparseVectors:
        """The sparse vectors of ``texts`` (TEI's ``POST /embed_sparse``, densewire's sparse raw body, which
        states the vocabulary size, asked for first; TEI's JSON read with ``vocab_size``) from one replica."""
        body = orjson.dumps({"inputs": texts})
        return await self._post("embed_sparse", body, lambda r: _decode_sparse(r, vocab_size), texts, block, row0)

    async def _post(self, route: str, body: bytes, decode: Callable[[Any], Any], texts: list[str],
                    block: str | None, row0: int) -> Any:
        """``body`` to the replica URL ``route`` names, moved to another replica on failure; its answer
        through ``decode``."""
        attempt = 0
        while True:
            replica = await self._pick(block)
            status, retry_after = 0, None  # 0: no answer (SPEC.md 18.1)
            replica.in_flight += 1
            replica.sent += 1
            try:
                response = await self._transport.request("POST", getattr(replica, route), self._headers, body)
            except APIConnectionError as exc:
                self._mark_down(replica, str(exc))
                why = f"{replica.base}: {exc}"
            else:
                if response.status not in RETRY_STATUSES:
                    try:
                        return decode(response)
                    except APIError as exc:
                        raise _request_error(exc, replica, block, row0) from exc
                status, retry_after = response.status, response.header("Retry-After")
                why = f"{replica.base} answered HTTP {response.status}"
                if response.status == 503:
                    self._mark_down(replica, why)
            finally:
                replica.in_flight -= 1
            attempt += 1
            wait = self.retry.wait(attempt, status=status, retry_after=retry_after)  # SPEC.md 18.2
            if wait is None:
                raise BatchError(f"no replica embedded rows {row0}-{row0 + len(texts) - 1} after {attempt} attempts; "
                                 f"the last: {why}", category="unavailable", block=block)
            if retry_after is not None or not self._healthy():  # else another replica is tried at once
                await asyncio.sleep(wait)

    def _healthy(self) -> list[Replica]:
        return [r for r in self.replicas if r.down is None]

    async def _pick(self, block: str | None) -> Replica:
        """The healthy replica with the fewest requests in flight; waits up to ``timeout`` seconds for
        a probe to bring one back when all are down."""
        deadline = None if self.timeout is None else time.monotonic() + self.timeout
        wait = 0.02
        while True:
            healthy = self._healthy()
            if healthy:
                start = next(self._turn) % len(healthy)
                turn = healthy[start:] + healthy[:start]
                return min(turn, key=lambda r: r.in_flight)
            if deadline is not None and time.monotonic() > deadline:
                why = "; ".join(f"{r.base}: {r.down}" for r in self.replicas)
                raise BatchError(f"no replica is ready after {self.timeout} s: {why}", category="unavailable",
                                 block=block)
            await asyncio.sleep(wait)
            wait = min(0.25, wait * 2)

    # ---------------------------------------------------------------------------------- probes
    def _mark_down(self, replica: Replica, why: str) -> None:
        replica.down = why
        if replica.probe is None or replica.probe.done():
            replica.probe = asyncio.ensure_future(self._probe(replica))

    async def _probe(self, replica: Replica) -> None:
        """``GET /ready`` until it answers 200; then the replica takes requests again."""
        delay = PROBE_FIRST
        url = f"{replica.base}/ready"
        while replica.down is not None:
            await asyncio.sleep(delay)
            try:
                response = await asyncio.wait_for(self._transport.request("GET", url, self._headers), PROBE_TIMEOUT)
            except (APIConnectionError, asyncio.TimeoutError) as exc:
                replica.down = f"{replica.down.split(' (probe:')[0]} (probe: {exc or 'timed out'})"
            else:
                if response.status == 200:
                    replica.down = None
                    break
            delay = min(PROBE_CAP, delay * 2)
        replica.probe = None


def _request_error(exc: APIError, replica: Replica, block: str | None, row0: int) -> BatchError:
    """A refused request as the error of the row it names (``param`` ``input[3]``: row row0 + 3)."""
    row = None
    if exc.param and (m := _INPUT_INDEX.match(exc.param)):
        row = row0 + int(m.group(1))
    category = exc.code if exc.code else "internal_error"
    return BatchError(f"{replica.base} refused the request: {exc}", category=category, row=row, block=block)

