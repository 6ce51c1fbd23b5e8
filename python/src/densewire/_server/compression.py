"""Response compression (zstd, br, gzip) and bounded, streamed request decompression.

Request bodies in every coding the server writes (``zstd``, ``br``, ``gzip``) and in ``deflate`` (the
other coding of RFC 9110 that HTTP clients send) are decompressed chunk by chunk as they arrive, each
decompressor asked for at most one output block at a time, with the output counted as it is produced:
a body whose decompressed size passes the limit is refused (413) after inflating at most the limit
plus one output block, whatever its compression ratio (SPEC.md section 12).
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

#: Request ``Content-Encoding`` values accepted (``x-gzip`` too, as an alias of gzip).
REQUEST_ENCODINGS = ("gzip", "deflate", "br", "zstd")


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


def _zlib_header(head: bytes) -> bool:
    """RFC 1950's two header bytes: deflate method (8), a window of at most 32 KiB, and the check bits."""
    return head[0] & 0x0F == 8 and head[0] >> 4 <= 7 and (head[0] << 8 | head[1]) % 31 == 0


class _Inflate:
    """gzip (RFC 1952, several members allowed), or deflate: RFC 9110's ``deflate`` is the zlib format
    (RFC 1950), but some clients send a bare deflate stream (RFC 1951); the first two bytes tell which."""

    def __init__(self, limit: int, *, gzip: bool) -> None:
        self.sink = _LimitedSink(limit)
        self._gzip = gzip
        self._name = "gzip" if gzip else "deflate"
        self._d = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS) if gzip else None
        self._head = b""

    def feed(self, chunk: bytes) -> None:
        data = chunk
        if self._d is None:  # deflate: wait for the two bytes that tell zlib from a bare stream
            self._head += data
            if len(self._head) < 2:
                return
            data, self._head = self._head, b""
            self._d = zlib.decompressobj(wbits=zlib.MAX_WBITS if _zlib_header(data) else -zlib.MAX_WBITS)
        while True:
            if self._d.eof:
                data = self._d.unused_data + data
                if not data:
                    return
                if not self._gzip:
                    raise zlib.error(f"{len(data)} bytes after the end of the deflate stream")
                # RFC 1952 allows several members: start a new one on the bytes that follow
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
        if self._d is None or not self._d.eof:
            raise zlib.error(f"{self._name} stream ended early")
        return b"".join(self.sink.parts)


class _Unbrotli:
    """brotli >= 1.2: ``process`` with ``output_buffer_limit`` yields at most one block per call, the
    rest on the following calls with no input (brotli 1.1 inflated a whole chunk at once)."""

    def __init__(self, limit: int) -> None:
        self.sink = _LimitedSink(limit)
        self._d = brotli.Decompressor()

    def feed(self, chunk: bytes) -> None:
        out = self._d.process(chunk, output_buffer_limit=_OUT_BLOCK)
        # the decoder may hold more output than one block even when it can take more input: ask until
        # it gives nothing
        while out or not self._d.can_accept_more_data():
            if not out:
                raise brotli.error("brotli decoder made no progress")
            self.sink.write(out)
            out = self._d.process(b"", output_buffer_limit=_OUT_BLOCK)

    def finish(self) -> bytes:
        if not self._d.is_finished():
            raise brotli.error("br stream ended early")
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


def _decoder(encoding: str, limit: int) -> _Inflate | _Unbrotli | _Unzstd | None:
    enc = encoding.strip().lower()
    if enc in ("", "identity"):
        return None
    if enc in ("gzip", "x-gzip"):
        return _Inflate(limit, gzip=True)
    if enc == "deflate":
        return _Inflate(limit, gzip=False)
    if enc == "br":
        return _Unbrotli(limit)
    if enc == "zstd":
        return _Unzstd(limit)
    raise UnsupportedMediaTypeError(
        f"{encoding.strip()[:100]!r} is not supported; use {', '.join(REQUEST_ENCODINGS)} or none",
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
    except (zlib.error, zstandard.ZstdError, brotli.error, EOFError, OSError) as exc:
        raise MalformedError(
            f"request body is not a valid {content_encoding.strip().lower()} stream: {exc}",
            field="Content-Encoding",
        ) from None
