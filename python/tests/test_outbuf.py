"""Result buffers written in place (densewire._outbuf): every encode gets its own immutable ``bytes``,
nothing is shared between results or threads, and fresh memory is backed before it is written."""

from __future__ import annotations

import ctypes
import json
import mmap
import sys
import threading

import numpy as np
import pytest

import densewire
from densewire import Embeddings, Tensor, Usage
from densewire import _outbuf
from densewire._outbuf import OutBuffer, prefault, resident

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="madvise/mincore are Linux's")


def _emb(seed: int, n: int = 300, d: int = 96) -> Embeddings:
    values = np.random.default_rng(seed).standard_normal((n, d)).astype(np.float32)
    return Embeddings(Tensor.from_array(values), f"m{seed}", Usage(seed, seed + 1))


def _rows(body: bytes) -> np.ndarray:
    doc = json.loads(body)
    return np.stack([densewire.decode_base64(item["embedding"]) for item in doc["data"]])


def test_every_result_is_its_own_bytes() -> None:
    """Two encodes in a row: two bytes objects, the first unchanged by the second, each hashing like a copy
    of itself (the hash is computed after the writes), each the JSON of its own tensor."""
    a, b = _emb(1), _emb(2)
    first = densewire.encode_json(a)
    snapshot = bytes(bytearray(first))
    second = densewire.encode_json(b)
    assert type(first) is bytes and type(second) is bytes and first is not second
    assert first == snapshot and hash(first) == hash(snapshot)
    assert np.array_equal(_rows(first), a.tensor.array) and np.array_equal(_rows(second), b.tensor.array)
    assert json.loads(second)["model"] == "m2"
    third = densewire.encode_json(a)  # the same input again: an equal, separate object
    assert third == first and third is not first


def test_large_results_do_not_alias() -> None:
    """Results above the prefault size (1 MiB) take the madvise path; they stay distinct while alive."""
    kept = [densewire.encode_json(_emb(seed, 900, 512)) for seed in range(3)]
    assert all(len(body) > _outbuf.PREFAULT_MIN for body in kept)
    for seed, body in enumerate(kept):
        assert np.array_equal(_rows(body), _emb(seed, 900, 512).tensor.array)


def test_concurrent_encodes_get_their_own_results() -> None:
    embs = [_emb(seed, 200, 64) for seed in range(8)]
    expected = [densewire.encode_json(e) for e in embs]
    got: dict[int, list[bytes]] = {}
    start = threading.Barrier(len(embs))

    def work(k: int) -> None:
        start.wait()
        got[k] = [densewire.encode_json(embs[k]) for _ in range(20)]

    threads = [threading.Thread(target=work, args=(k,)) for k in range(len(embs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k, bodies in got.items():
        assert all(body == expected[k] for body in bodies)
        assert len({id(body) for body in bodies}) == len(bodies)  # all alive: 20 separate objects


def test_out_buffer_gives_exactly_what_was_written() -> None:
    for size in (0, 1, 2, 4095, 1 << 20, (3 << 20) + 7):
        out = OutBuffer(size)
        assert out.array.shape == (size,) and out.array.flags.writeable
        pattern = (np.arange(size) * 7 % 251).astype(np.uint8)
        out.array[:] = pattern
        result = out.finish()
        assert type(result) is bytes and len(result) == size
        assert result == pattern.tobytes()
        assert out.array is None  # no writable view is left behind


@linux_only
def test_prefault_backs_fresh_memory_and_keeps_its_contents() -> None:
    size = 4 << 20
    m = mmap.mmap(-1, size)
    anchor = ctypes.c_char.from_buffer(m)
    try:
        addr = ctypes.addressof(anchor)
        assert resident(addr, size) is False  # a new anonymous mapping: nothing backed yet
        m[100:105] = b"hello"  # one page touched: the rest is still fresh
        done = prefault(addr, size)
        if not _outbuf._populate_works:
            pytest.skip("this kernel has no MADV_POPULATE_WRITE (Linux 5.14+)")
        assert done and resident(addr, size) is True
        assert m[100:105] == b"hello" and m[:100] == bytes(100) and m[105:4096] == bytes(4096 - 105)
        assert prefault(addr, size) is False  # resident already: left alone
    finally:
        del anchor
        m.close()


@linux_only
def test_small_or_resident_memory_is_left_alone() -> None:
    buf = bytearray(64 << 10)
    addr = ctypes.addressof(ctypes.c_char.from_buffer(buf))
    assert prefault(addr, len(buf)) is False  # below PREFAULT_MIN
