"""HTTP for the clients: one aiohttp session, each body read into one buffer, retries.

A body with a ``Content-Length`` is read into one buffer of that size (``numpy.empty``: not zeroed
first), chunk by chunk as the socket delivers it, so the decoders' arrays are writable views of it
with no further copy.
aiohttp's own decompression is off: a compressed body is read the same way and then inflated once,
bounded by ``max_body``.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import aiohttp
import numpy as np
import orjson

from .._errors import DensewireError, PayloadTooLargeError
from ._compression import decompress
from ._errors import APIConnectionError, APIError, APITimeoutError, status_error
from ._retry import RETRY_STATUSES, RetryPolicy, parse_retry_after

__all__ = ["Response", "Transport", "raise_for_status"]

_NO_BODY = frozenset({204, 304})


@dataclass(slots=True)
class Response:
    status: int
    headers: Any  # a case-insensitive mapping (aiohttp's CIMultiDictProxy)
    body: memoryview | bytes  # of one numpy uint8 buffer when Content-Length was known
    attempts: int = 1

    def header(self, name: str, default: str | None = None) -> str | None:
        return self.headers.get(name, default)


def raise_for_status(response: Response) -> None:
    """Raise the typed :class:`APIError` of an error answer (status >= 400) with its envelope's fields."""
    status = response.status
    if status < 400:
        return
    cls = status_error(status)
    retry_after = parse_retry_after(response.header("Retry-After"))
    try:
        err = orjson.loads(response.body)["error"]
        message = err.get("message", "")
        fields = (err.get("code"), err.get("param"), err.get("offset"))
    except (ValueError, KeyError, TypeError, AttributeError):
        message = bytes(response.body[:500]).decode("utf-8", "replace") or f"HTTP {status}"
        fields = (None, None, None)
    raise cls(status, message, *fields, attempts=response.attempts, retry_after=retry_after)


class Transport:
    """An aiohttp session made on first use (in the loop that uses it), up to ``max_connections``
    connections kept alive, and the retry policy."""

    def __init__(self, *, timeout: float | None, retry: RetryPolicy, max_connections: int = 64,
                 max_body: int = 1 << 30, session: aiohttp.ClientSession | None = None) -> None:
        if session is not None and not isinstance(session, aiohttp.ClientSession):
            raise TypeError(f"http_client must be an aiohttp.ClientSession, got {type(session).__name__}")
        if session is not None and session.auto_decompress:
            raise ValueError("http_client must be made with aiohttp.ClientSession(auto_decompress=False): the client "
                             "reads each body into one buffer and decodes its content coding itself")
        self.retry = retry
        self.max_body = max_body
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._max_connections = max_connections
        self._session = session
        self._own_session = session is None
        self._closer: Any = None

    def _get_session(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=self._max_connections, limit_per_host=0),
                timeout=self._timeout, auto_decompress=False, skip_auto_headers=("User-Agent",))
            self._closer = self._close_at_loop_end(self._session)
            try:  # run it to its yield: the loop's firstiter hook now knows it
                self._closer.__anext__().send(None)
            except StopIteration:
                pass
        return self._session

    async def _close_at_loop_end(self, session: aiohttp.ClientSession):
        """An async generator parked at its yield, so that the loop closes our session when it ends:
        ``asyncio.run`` (and every loop runner) calls ``loop.shutdown_asyncgens()``, which closes it;
        so does :meth:`close`. Without it a client not closed by its user leaves an open session,
        and aiohttp's "Unclosed client session" warning, when its loop is gone."""
        try:
            yield
        finally:
            if self._session is session:
                self._session = None
            await session.close()

    async def close(self) -> None:
        closer, self._closer = self._closer, None
        if closer is not None:  # our own session: its closer closes it
            await closer.aclose()
        if self._own_session:
            self._session = None

    async def request(self, method: str, url: str, headers: dict[str, str], body: bytes | None = None) -> Response:
        """Send with retries (SPEC.md 18); returns the last answer (an error status included) with
        ``attempts``. Raises :class:`APIConnectionError` when no answer came."""
        retry = self.retry
        attempt = 0
        while True:
            attempt += 1
            try:
                response = await self._once(method, url, headers, body)
            except _Retryable as exc:
                wait = retry.wait(attempt)
                if wait is None:
                    raise APIConnectionError(f"{method} {url}: {exc.__cause__ or exc}", attempts=attempt) \
                        from exc.__cause__
                await asyncio.sleep(wait)
                continue
            except (APIConnectionError, APIError) as exc:  # not retried: say which attempt it was
                exc.attempts = attempt
                raise
            response.attempts = attempt
            if response.status not in RETRY_STATUSES:
                return response
            wait = retry.wait(attempt, status=response.status, retry_after=response.header("Retry-After"))
            if wait is None:
                return response
            await asyncio.sleep(wait)

    async def _once(self, method: str, url: str, headers: dict[str, str], body: bytes | None) -> Response:
        session = self._get_session()
        try:
            async with session.request(method, url, headers=headers, data=body) as resp:
                status = resp.status
                if method == "HEAD" or status in _NO_BODY:
                    return Response(status, resp.headers, b"")
                data = await self._read(resp)
        except asyncio.TimeoutError as exc:
            raise APITimeoutError(f"{method} {url} timed out after {self._timeout.total} s") from exc
        except (aiohttp.ClientConnectorError, aiohttp.ServerDisconnectedError) as exc:
            raise _Retryable() from exc  # no byte of an answer arrived
        except aiohttp.ClientOSError as exc:  # reset while sending or before the answer's head
            raise _Retryable() from exc
        except aiohttp.ClientPayloadError as exc:
            raise APIConnectionError(f"{method} {url}: the answer broke off: {exc}") from exc
        except aiohttp.ClientResponseError as exc:
            raise APIConnectionError(f"{method} {url}: malformed HTTP answer: {exc}") from exc
        coding = resp.headers.get("Content-Encoding")
        if coding and coding.strip().lower() != "identity" and data:
            try:
                data = decompress(coding, data, self.max_body)
            except DensewireError as exc:
                raise APIError(status, f"the response body does not decode: {exc}", exc.category, exc.field) from exc
        return Response(status, resp.headers, data)

    async def _read(self, resp: aiohttp.ClientResponse) -> memoryview | bytes:
        n = resp.content_length
        if n is None:  # chunked or close-delimited: aiohttp gathers it
            data = await resp.read()
            if len(data) > self.max_body:
                raise APIError(resp.status, f"the response is larger than max_body={self.max_body} bytes",
                               "payload_too_large", "Content-Length")
            return data
        if n > self.max_body:
            raise APIError(resp.status, f"the response's Content-Length {n} is over max_body={self.max_body}",
                           PayloadTooLargeError.category, "Content-Length")
        buf = np.empty(n, np.uint8)
        view = memoryview(buf)
        pos = 0
        content = resp.content
        while pos < n:
            chunk = await content.readany()
            if not chunk:
                raise aiohttp.ClientPayloadError(f"the body ended after {pos} of {n} bytes")
            end = pos + len(chunk)
            view[pos:end] = chunk
            pos = end
        return view


class _Retryable(Exception):
    """A connection error before any byte of an answer arrived (its cause is the aiohttp error)."""
