"""RaggedTensor, SparseVectors and maxsim (densewire._ragged, SPEC.md 19.1-19.2): views over one buffer,
the checks of offsets and indices with their offsets, scipy conversion, and MaxSim against a direct
double loop."""

from __future__ import annotations

import numpy as np
import pytest

import densewire
from densewire import InvalidFieldError, RaggedTensor, SparseVectors, maxsim


def test_ragged_indexing_gives_views_of_one_buffer() -> None:
    rng = np.random.default_rng(0)
    mats = [rng.standard_normal((m, 4)).astype(np.float32) for m in (3, 0, 1, 5)]
    r = RaggedTensor.from_arrays(mats)
    assert len(r) == 4 and r.shape == (4, 4) and r.dtype == "float32"
    assert r.offsets.tolist() == [0, 3, 3, 4, 9] and r.lengths.tolist() == [3, 0, 1, 5]
    assert r.values.shape == (9, 4)
    for i, m in enumerate(mats):
        assert np.array_equal(r[i], m)
        if m.size:
            assert np.shares_memory(r[i], r.values)
    assert np.array_equal(r[-1], mats[-1])
    assert [x.shape[0] for x in r] == [3, 0, 1, 5]
    with pytest.raises(IndexError):
        r[4]


def test_ragged_from_lengths_is_a_view() -> None:
    rows = np.arange(12, dtype=np.float32).reshape(6, 2)
    r = RaggedTensor.from_lengths(rows, [2, 4])
    assert np.shares_memory(r[1], rows) and r[1].tolist() == rows[2:].tolist()


def test_ragged_dtypes_and_empty_batch() -> None:
    empty = RaggedTensor.from_arrays([], "float16", 8)
    assert empty.shape == (0, 8) and empty.offsets.tolist() == [0] and empty.values.shape == (0, 8)
    bits = RaggedTensor.from_arrays([np.array([[0xB3, 0xF0]], np.uint8)], "binary", 12)
    assert bits.d == 12 and bits.values.shape == (1, 2)
    bf = RaggedTensor.from_arrays([np.array([[0x3F80, 0xC000]], np.uint16)], "bfloat16")
    assert bf.to_float32().tolist() == [[1.0, -2.0]]


def test_ragged_rejects_bad_offsets() -> None:
    rows = densewire.Tensor.from_array(np.zeros((3, 2), np.float32))
    with pytest.raises(InvalidFieldError) as info:
        RaggedTensor(rows, [0, 2, 1, 3])
    assert (info.value.field, info.value.offset) == ("offsets", 8)
    with pytest.raises(InvalidFieldError) as info:
        RaggedTensor(rows, [1, 3])
    assert info.value.offset == 0
    with pytest.raises(ValueError, match="offsets end at 2"):
        RaggedTensor(rows, [0, 2])


def test_sparse_vectors_views_scipy_and_dense() -> None:
    s = SparseVectors([5, 9, 1, 2], np.array([0.5, 1.0, 2.0, -3.0], np.float32), [0, 2, 2, 4], 10)
    assert len(s) == 3 and s.shape == (3, 10) and s.nnz.tolist() == [2, 0, 2]
    idx, val = s[2]
    assert idx.tolist() == [1, 2] and val.tolist() == [2.0, -3.0] and np.shares_memory(val, s.values)
    dense = s.to_dense()
    assert dense[0, 5] == 0.5 and dense[0, 9] == 1.0 and not dense[1].any() and dense[2, 2] == -3.0
    csr = s.to_scipy()
    assert csr.shape == (3, 10) and np.array_equal(csr.toarray(), dense)


def test_sparse_bfloat16_values_widen() -> None:
    s = SparseVectors([2, 15], np.array([0x3F80, 0x4040], np.uint16), [0, 2], 16, "bfloat16")
    assert s.values_float32().tolist() == [1.0, 3.0] and s.to_scipy().toarray()[0, 15] == 3.0


@pytest.mark.parametrize("indices, offsets, vocab, offset", [
    ([3, 3], [0, 2], 10, 4),        # repeated
    ([5, 3], [0, 2], 10, 4),        # descending
    ([1, 10], [0, 2], 10, 4),       # not below the vocabulary
    ([9, 1, 0], [0, 1, 3], 10, 8),  # the second vector starts again, then descends
])
def test_sparse_rejects_bad_indices(indices, offsets, vocab, offset) -> None:
    with pytest.raises(InvalidFieldError) as info:
        SparseVectors(indices, np.ones(len(indices), np.float32), offsets, vocab)
    assert (info.value.field, info.value.offset) == ("indices", offset)


def test_sparse_boundaries_reset_the_order_and_largest_index() -> None:
    SparseVectors([5, 9, 1, 2], np.ones(4, np.float32), [0, 2, 4], 10)
    SparseVectors([0, 4294967295], np.ones(2, np.float32), [0, 2], 1 << 32)
    with pytest.raises(InvalidFieldError):
        SparseVectors([1], np.ones(1, np.int8), [0, 1], 10, "int8")
    with pytest.raises(InvalidFieldError):
        SparseVectors([], np.ones(0, np.float32), [0], 0)


def _maxsim_reference(q: np.ndarray, docs: list[np.ndarray]) -> np.ndarray:
    out = []
    for doc in docs:
        total = 0.0
        for qv in q:
            total += max((float(np.dot(qv.astype(np.float64), dv.astype(np.float64))) for dv in doc), default=0.0)
        out.append(total)
    return np.array(out)


@pytest.mark.parametrize("block_rows", [1, 3, 1 << 16])
def test_maxsim_matches_the_double_loop(block_rows: int) -> None:
    rng = np.random.default_rng(1)
    docs = [rng.standard_normal((m, 8)).astype(np.float32) for m in (4, 1, 0, 7, 2)]
    q = rng.standard_normal((3, 8)).astype(np.float32)
    got = maxsim(q, RaggedTensor.from_arrays(docs), block_rows=block_rows)
    assert got.shape == (5,) and got[2] == 0.0
    np.testing.assert_allclose(got, _maxsim_reference(q, docs), rtol=1e-5, atol=1e-5)


def test_maxsim_of_ragged_queries_and_float16() -> None:
    rng = np.random.default_rng(2)
    docs = [rng.standard_normal((m, 4)).astype(np.float16) for m in (2, 5)]
    queries = [rng.standard_normal((m, 4)).astype(np.float16) for m in (1, 3, 2)]
    got = maxsim(RaggedTensor.from_arrays(queries), RaggedTensor.from_arrays(docs))
    assert got.shape == (3, 2)
    want = np.stack([_maxsim_reference(q.astype(np.float32), [d.astype(np.float32) for d in docs]) for q in queries])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="d=3"):
        maxsim(np.ones((1, 3), np.float32), RaggedTensor.from_arrays(docs))


def test_docstring_examples() -> None:
    import doctest

    from densewire import _ragged

    result = doctest.testmod(_ragged)
    assert result.attempted >= 3 and result.failed == 0
