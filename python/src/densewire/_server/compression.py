"""Response compression (zstd, br, gzip) and bounded, streamed request decompression.

Request bodies are decompressed chunk by chunk as they arrive, with the output counted as it is
produced: a body whose decompressed size passes the limit is refused (413) after inflating at most
the limit plus one output block, whatever its compression ratio.
"""

from __future__ import annotations

import gzip
import zlib
from typing import AsyncIterator

import brotli
import zstandard

from densewire import DensewireError, MalformedError, PayloadTooLargeError, UnsupportedMediaTypeError

__all__ = ["compress", "read_body", "REQUEST_ENCODINGS"]

#: Levels chosen for throughput: embeddings are mostly incompressible noise, so high levels cost
#: CPU for a few percent.
GZIP_LEVEL = 4
BROTLI_QUALITY = 4
ZSTD_LEVEL = 3
_OUT_BLOCK = 64 * 1024

REQUEST_ENCODINGS = ("gzip", "zstd")


def compress(data: bytes | memoryview, encoding: str) -> bytes:
    """``data`` compressed with ``encoding`` (``zstd``, ``br`` or ``gzip``)."""
    if encoding == "zstd":
        return zstandard.ZstdCompressor(level=ZSTD_LEVEL).compress(data)
    if encoding == "br":
        return brotli.compress(bytes(data), quality=BROTLI_QUALITY)
    if encoding == "gzip":
        return gzip.compress(data, compresslevel=GZIP_LEVEL, mtime=0)
    raise ValueError(f"unknown content coding {encoding!r}")


def _too_large(what: str, limit: int) -> PayloadTooLargeError:
    return PayloadTooLargeError(f"request body {what} exceeds the limit of {limit} bytes")


class _LimitedSink:
    """Collects decompressed output and stops decompression once it passes the limit."""

    def __init__(self, limit: int) -> None:
        self.parts: list[bytes] = []
        self.size = 0
        self.limit = limit

    def write(self, data: bytes) -> int:
        self.size += len(data)
        if self.size > self.limit:
            raise _too_large("decompressed", self.limit)
        self.parts.append(bytes(data))
        return len(data)


class _Gunzip:
    def __init__(self, limit: int) -> None:
        self.sink = _LimitedSink(limit)
        self._d = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)

    def feed(self, chunk: bytes) -> None:
        data = chunk
        while True:
            if self._d.eof:
                # RFC 1952 allows several members: start a new one on the bytes that follow
                data = self._d.unused_data + data
                if not data:
                    return
                self._d = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
            out = self._d.decompress(data, _OUT_BLOCK)
            if out:
                self.sink.write(out)
            data = self._d.unconsumed_tail
            if self._d.eof:
                continue
            if not data and len(out) < _OUT_BLOCK:
                return

    def finish(self) -> bytes:
        if not self._d.eof:
            raise zlib.error("gzip stream ended early")
        return b"".join(self.sink.parts)


class _Unzstd:
    def __init__(self, limit: int) -> None:
        self.sink = _LimitedSink(limit)
        self._w = zstandard.ZstdDecompressor().stream_writer(
            self.sink, write_size=_OUT_BLOCK, write_return_read=True, closefd=False
        )

    def feed(self, chunk: bytes) -> None:
        self._w.write(chunk)

    def finish(self) -> bytes:
        self._w.flush()
        return b"".join(self.sink.parts)


def _decoder(encoding: str, limit: int) -> _Gunzip | _Unzstd | None:
    enc = encoding.strip().lower()
    if enc in ("", "identity"):
        return None
    if enc in ("gzip", "x-gzip"):
        return _Gunzip(limit)
    if enc == "zstd":
        return _Unzstd(limit)
    raise UnsupportedMediaTypeError(
        f"{encoding.strip()[:100]!r} is not supported; use gzip, zstd or none",
        field="Content-Encoding",
    )


async def read_body(
    chunks: AsyncIterator[bytes],
    *,
    limit: int,
    content_encoding: str | None,
    content_length: str | None = None,
) -> bytes:
    """Read a request body, decompressing it if needed, never holding more than ``limit`` bytes.

    Raises ``PayloadTooLargeError`` (413) when the body as sent or as decompressed passes
    ``limit``, ``UnsupportedMediaTypeError`` (415) for an unknown coding, and ``MalformedError``
    (400) for a corrupt compressed stream.
    """
    if content_length is not None:
        try:
            declared = int(content_length)
        except ValueError:
            declared = -1
        if declared > limit:
            raise _too_large("size", limit)
    decoder = _decoder(content_encoding or "", limit)
    received = 0
    parts: list[bytes] = []
    try:
        async for chunk in chunks:
            if not chunk:
                continue
            received += len(chunk)
            if received > limit:
                raise _too_large("size", limit)
            if decoder is None:
                parts.append(chunk)
            else:
                decoder.feed(chunk)
        if decoder is None:
            return b"".join(parts)
        return decoder.finish()
    except DensewireError:
        raise
    except (zlib.error, zstandard.ZstdError, EOFError, OSError) as exc:
        raise MalformedError(
            f"request body is not a valid {content_encoding.strip().lower()} stream: {exc}",
            field="Content-Encoding",
        ) from None
