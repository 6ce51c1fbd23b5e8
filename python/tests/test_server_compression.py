"""Request decompression (bounded, streamed) and response compression, as units."""

from __future__ import annotations

import asyncio
import gzip
import os
import resource
import zlib

import brotli
import pytest
import zstandard

from densewire import MalformedError, PayloadTooLargeError, UnsupportedMediaTypeError
from densewire._server.compression import compress, read_body

LIMIT = 1 << 20


async def _chunks(data: bytes, size: int):
    for i in range(0, len(data), size):
        yield data[i:i + size]


def read(data: bytes, encoding: str | None, *, size: int = 4096, limit: int = LIMIT,
         content_length: str | None = None) -> bytes:
    return asyncio.run(read_body(_chunks(data, size), limit=limit, content_encoding=encoding,
                                 content_length=content_length))


PAYLOAD = os.urandom(3000) + b"x" * 200_000 + os.urandom(3000)


def _raw_deflate(data: bytes) -> bytes:
    c = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    return c.compress(data) + c.flush()


@pytest.mark.parametrize("size", [1, 7, 4096, 1 << 20])
@pytest.mark.parametrize("encoding, packed", [
    (None, PAYLOAD),
    ("identity", PAYLOAD),
    ("gzip", gzip.compress(PAYLOAD)),
    ("GZIP", gzip.compress(PAYLOAD)),
    ("x-gzip", gzip.compress(PAYLOAD)),
    ("zstd", zstandard.ZstdCompressor().compress(PAYLOAD)),
    ("zstd", zstandard.ZstdCompressor(write_content_size=False).compress(PAYLOAD)),
    ("br", brotli.compress(PAYLOAD)),
    ("deflate", zlib.compress(PAYLOAD)),  # RFC 9110's deflate: the zlib format
    ("deflate", _raw_deflate(PAYLOAD)),  # what some clients send instead: a bare deflate stream
])
def test_round_trip_any_chunking(encoding, packed, size) -> None:
    if size == 1 and len(packed) > 50_000:
        size = 3  # keep the one-byte-ish case fast
    assert read(packed, encoding, size=size) == PAYLOAD


def test_gzip_multi_member() -> None:
    assert read(gzip.compress(b"abc") + gzip.compress(b"def"), "gzip", size=5) == b"abcdef"


def _bomb(encoding: str, total: int) -> bytes:
    """``total`` zero bytes compressed, made chunk by chunk so that this test's own memory stays low."""
    chunk = b"\0" * (1 << 20)
    c = {"gzip": lambda: zlib.compressobj(9, zlib.DEFLATED, 31),
         "deflate": lambda: zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS),
         "zstd": lambda: zstandard.ZstdCompressor(level=3).compressobj(),
         "br": lambda: _BrotliCompressObj()}[encoding]()
    parts = [c.compress(chunk) for _ in range(total // len(chunk))]
    return b"".join(parts) + c.flush()


class _BrotliCompressObj:
    def __init__(self) -> None:
        self._c = brotli.Compressor(quality=5)

    def compress(self, data: bytes) -> bytes:
        return self._c.process(data)

    def flush(self) -> bytes:
        return self._c.finish()


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "br", "zstd"])
def test_bomb_is_never_inflated(encoding) -> None:
    bomb = _bomb(encoding, 512 << 20)  # 512 MiB of zeros in well under 1 MiB
    assert len(bomb) < LIMIT
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(PayloadTooLargeError):
        read(bomb, encoding, size=64 * 1024)
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown_kib < 64 * 1024, f"peak memory grew by {grown_kib} KiB"


def test_limit_is_exact() -> None:
    assert read(b"a" * LIMIT, None) == b"a" * LIMIT
    with pytest.raises(PayloadTooLargeError):
        read(b"a" * (LIMIT + 1), None)
    assert read(gzip.compress(b"a" * LIMIT), "gzip") == b"a" * LIMIT
    with pytest.raises(PayloadTooLargeError):
        read(gzip.compress(b"a" * (LIMIT + 1)), "gzip")
    with pytest.raises(PayloadTooLargeError):
        read(zstandard.ZstdCompressor().compress(b"a" * (LIMIT + 1)), "zstd")


def test_declared_length_over_limit_fails_before_reading() -> None:
    async def never():
        raise AssertionError("the body was read")
        yield b""  # pragma: no cover

    with pytest.raises(PayloadTooLargeError):
        asyncio.run(read_body(never(), limit=10, content_encoding=None, content_length="11"))


def test_one_br_chunk_is_inflated_a_block_at_a_time() -> None:
    """The whole bomb in one chunk: brotli yields it a block at a time, so the limit stops it early."""
    bomb = _bomb("br", 256 << 20)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(PayloadTooLargeError):
        read(bomb, "br", size=len(bomb))
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown_kib < 64 * 1024, f"peak memory grew by {grown_kib} KiB"


@pytest.mark.parametrize("encoding", ["compress", "gzip, zstd", "x-deflate", "bogus"])
def test_unsupported_encoding(encoding) -> None:
    with pytest.raises(UnsupportedMediaTypeError) as ei:
        read(b"{}", encoding)
    assert ei.value.field == "Content-Encoding"


@pytest.mark.parametrize("encoding, data", [
    ("gzip", b"not gzip at all"),
    ("gzip", gzip.compress(b"x" * 1000)[:-9]),
    ("gzip", b""),
    ("zstd", b"not zstd at all"),
    ("br", b"not brotli at all"),
    ("br", brotli.compress(b"x" * 1000)[:-3]),
    ("br", brotli.compress(b"x") + b"trailing"),
    ("br", b""),
    ("deflate", b"not deflate at all"),
    ("deflate", zlib.compress(b"x" * 1000)[:-5]),
    ("deflate", zlib.compress(b"x") + b"trailing"),
    ("deflate", b""),
    ("deflate", b"\x78"),
])
def test_corrupt_streams(encoding, data) -> None:
    with pytest.raises(MalformedError) as ei:
        read(data, encoding)
    assert ei.value.field == "Content-Encoding"


@pytest.mark.parametrize("encoding", ["zstd", "br", "gzip"])
def test_compress_round_trip(encoding) -> None:
    out = compress(memoryview(PAYLOAD), encoding)
    back = {"zstd": lambda b: zstandard.ZstdDecompressor().decompress(b, max_output_size=len(PAYLOAD)),
            "br": brotli.decompress, "gzip": gzip.decompress}[encoding](out)
    assert back == PAYLOAD
    assert len(out) < len(PAYLOAD)
    with pytest.raises(ValueError):
        compress(PAYLOAD, "lz4")
