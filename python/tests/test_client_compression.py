"""The client's content decoding: each coding round-trips, inflating stops at max_body, corrupt and
unknown codings fail with the spec's error categories."""

from __future__ import annotations

import gzip
import zlib

import brotli
import pytest
import zstandard

import densewire
from densewire._client._compression import decompress

BODY = bytes(range(256)) * 400

ENCODERS = {"gzip": gzip.compress, "x-gzip": gzip.compress, "deflate": zlib.compress, "br": brotli.compress,
            "zstd": zstandard.ZstdCompressor().compress}


@pytest.mark.parametrize("coding", ENCODERS)
def test_each_coding_round_trips(coding: str) -> None:
    assert bytes(decompress(coding, ENCODERS[coding](BODY), 1 << 20)) == BODY
    assert bytes(decompress(coding.upper(), memoryview(ENCODERS[coding](BODY)), 1 << 20)) == BODY


@pytest.mark.parametrize("coding", ["gzip", "br", "zstd"])
def test_a_bomb_stops_at_max_body(coding: str) -> None:
    bomb = ENCODERS[coding](bytes(64 << 20))  # 64 MiB of zeros in a few KiB
    assert len(bomb) < 1 << 20
    with pytest.raises(densewire.PayloadTooLargeError, match="inflates past the limit of 1048576 bytes"):
        decompress(coding, bomb, 1 << 20)


@pytest.mark.parametrize("coding", ["gzip", "br", "zstd"])
def test_corrupt_bodies_are_malformed(coding: str) -> None:
    with pytest.raises(densewire.MalformedError) as info:
        decompress(coding, b"\x1f\x8b\x08 certainly not " + bytes(40), 1 << 20)
    assert info.value.field == "Content-Encoding"


def test_a_truncated_gzip_body_is_malformed() -> None:
    with pytest.raises(densewire.MalformedError, match="truncated"):
        decompress("gzip", gzip.compress(BODY)[:-20], 1 << 20)


def test_an_unknown_coding_is_unsupported() -> None:
    with pytest.raises(densewire.UnsupportedMediaTypeError, match="'compress'"):
        decompress("compress", b"x", 100)
