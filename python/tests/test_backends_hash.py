"""The hash backend: deterministic pseudo-embeddings of any dimension."""

from __future__ import annotations

import hashlib
import time
from typing import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from densewire._backends import Backend, HashBackend


def test_is_a_backend() -> None:
    b = HashBackend(8)
    assert isinstance(b, Backend)
    assert b.name == "hash-8" and b.dimensions == 8 and b.max_tokens == 8192
    assert HashBackend(8, name="fake").name == "fake"


@pytest.mark.parametrize("dim", [1, 2, 3, 384, 1024, 3072])
def test_shape_dtype_unit_norm(dim: int) -> None:
    out = HashBackend(dim).embed(["alpha", "beta gamma", "", "日本語 ✓"])
    assert out.shape == (4, dim)
    assert out.dtype == np.float32 and out.flags.c_contiguous
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-6)


def test_deterministic_across_instances_and_batches() -> None:
    texts = ["one", "two", "three", "one"]
    a = HashBackend(64).embed(texts)
    b = HashBackend(64, name="other").embed(list(reversed(texts)))[::-1]
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a[0], a[3])
    np.testing.assert_array_equal(HashBackend(64).embed(["two"])[0], a[1])


def test_fixed_values_do_not_drift() -> None:
    # the vector is a function of (text, dimensions) only: pin it across versions
    v = HashBackend(4).embed(["densewire"])[0]
    again = HashBackend(4).embed(["densewire"])[0]
    np.testing.assert_array_equal(v, again)
    digest = hashlib.blake2b(b"densewire", digest_size=16, person=b"densewire-text").digest()
    seed = int.from_bytes(digest, "little")
    raw = np.random.Generator(np.random.PCG64(seed)).standard_normal(4, dtype=np.float32)
    np.testing.assert_allclose(v, raw / np.linalg.norm(raw), rtol=1e-6)


def test_different_texts_differ() -> None:
    texts = [f"text {i}" for i in range(200)] + ["Text 0", "text 0 ", "text0"]
    out = HashBackend(256).embed(texts)
    sims = out @ out.T
    np.fill_diagonal(sims, 0)
    assert np.abs(sims).max() < 0.5  # random unit vectors in 256-d are near orthogonal


def test_smaller_dimension_is_a_prefix_direction() -> None:
    big = HashBackend(1024).embed(["prefix property"])[0]
    small = HashBackend(16).embed(["prefix property"])[0]
    np.testing.assert_allclose(big[:16] / np.linalg.norm(big[:16]), small, atol=1e-6)


def test_token_counting_is_whitespace_words() -> None:
    b = HashBackend(8)
    assert b.count_tokens(["", "one", "  two  words ", "a\tb\nc d"]) == [0, 1, 2, 4]
    assert b.count_tokens([]) == []


def test_embed_truncates_to_max_tokens_words() -> None:
    b = HashBackend(32, max_tokens=3)
    np.testing.assert_array_equal(b.embed(["a b c d e"]), b.embed(["a b c"]))
    # within the limit the exact text counts (spacing too)
    assert not np.array_equal(b.embed(["a  b"]), b.embed(["a b"]))


def test_embed_tokens_hash_the_ids() -> None:
    b = HashBackend(48, max_tokens=4)
    out = b.embed_tokens([[1, 2, 3], [1, 2, 3], [3, 2, 1], [], [1, 2, 3, 4, 5], [1, 2, 3, 4]])
    assert out.shape == (6, 48)
    np.testing.assert_array_equal(out[0], out[1])
    assert not np.allclose(out[0], out[2])
    np.testing.assert_array_equal(out[4], out[5])  # truncated to 4 ids
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-6)
    assert not np.allclose(b.embed_tokens([[49]]), b.embed(["1"]))


def test_empty_inputs() -> None:
    b = HashBackend(12)
    assert b.embed([]).shape == (0, 12)
    assert b.embed_tokens([]).shape == (0, 12)


@pytest.mark.parametrize("bad", [0, -1, 1 << 17, 2.5, "8", True])
def test_bad_dimensions(bad: object) -> None:
    with pytest.raises(ValueError, match="dimensions"):
        HashBackend(bad)  # type: ignore[arg-type]


def test_bad_inputs() -> None:
    b = HashBackend(4)
    with pytest.raises(TypeError):
        b.embed("not a list")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        b.embed([b"bytes"])  # type: ignore[list-item]
    with pytest.raises(ValueError):
        b.embed_tokens([[-5]])


def test_benchmark_sized_request_is_fast() -> None:
    b = HashBackend(1024)
    texts = [f"benchmark text number {i}" for i in range(256)]
    b.embed(texts)
    best = min(_timed(b, texts, time.perf_counter) for _ in range(3))
    assert best < 0.5  # ~10 ms on an idle 2-core machine; generous for busy CI


def _timed(b: HashBackend, texts: list[str], clock: Callable[[], float]) -> float:
    start = clock()
    b.embed(texts)
    return clock() - start


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=200), st.integers(min_value=1, max_value=300))
def test_property_deterministic_unit(text: str, dim: int) -> None:
    b = HashBackend(dim)
    a = b.embed([text])
    np.testing.assert_array_equal(a, HashBackend(dim).embed([text]))
    assert abs(float(np.linalg.norm(a[0])) - 1.0) < 1e-5
