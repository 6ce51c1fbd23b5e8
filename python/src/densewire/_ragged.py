"""Ragged and sparse tensors (SPEC.md section 20): the types, the checks every format shares, MaxSim.

A :class:`RaggedTensor` is ``n`` matrices of ``m_i x d`` (token embeddings, ColBERT multi-vectors)
held as one ``(N, d)`` :class:`Tensor` of rows and ``n + 1`` uint32 offsets: indexing gives numpy views
into that one buffer, never copies. A :class:`SparseVectors` is ``n`` sparse vectors (SPLADE) of a
vocabulary: strictly ascending uint32 indices and their values per vector, in two flat arrays with the
same offsets. The decoders of every format build them over the received body without copying.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from ._errors import InvalidFieldError, LengthMismatchError
from ._optional import require
from ._tensor import Tensor, check_dtype, row_bytes, storage_dtype, widen

__all__ = ["RaggedTensor", "SparseVectors", "SPARSE_DTYPES", "KINDS", "maxsim", "read_offsets", "check_offsets",
           "check_indices", "check_vocab_size"]

#: SPEC.md 20.2: the dtypes of sparse values
SPARSE_DTYPES = ("float32", "float16", "bfloat16", "float64")
#: the kinds of tensor a body can hold (SPEC.md 20)
KINDS = ("tensor", "ragged", "sparse")
_U32 = np.dtype("<u4")
MAX_VOCAB = 1 << 32


def read_offsets(buf, n: int, field: str = "offsets", base: int = 0) -> np.ndarray:
    """``n + 1`` little-endian uint32 offsets over ``buf`` (a view), checked (SPEC.md 20.1 steps 2-3);
    error offsets are ``base`` plus bytes into ``buf``."""
    size = memoryview(buf).nbytes
    expected = 4 * (n + 1)
    if size != expected:
        raise LengthMismatchError(f"{size} bytes of offsets, {n} inputs need {expected}",
                                  offset=base + min(size, expected), field=field)
    offsets = np.frombuffer(buf, _U32, count=n + 1)
    check_offsets(offsets, field, base)
    return offsets


def check_offsets(offsets: np.ndarray, field: str = "offsets", base: int = 0) -> None:
    """offsets[0] == 0 and never decreasing: else invalid_field at 4k of the first entry that breaks it."""
    if offsets.size == 0 or offsets[0] != 0:
        raise InvalidFieldError(f"the first offset must be 0, got {int(offsets[0]) if offsets.size else None}",
                                offset=base, field=field)
    if offsets.size > 1:
        down = np.flatnonzero(offsets[1:] < offsets[:-1])
        if down.size:
            k = int(down[0]) + 1
            raise InvalidFieldError(f"offsets[{k}] = {int(offsets[k])} is below offsets[{k - 1}] = {int(offsets[k - 1])}",
                                    offset=base + 4 * k, field=field)


def check_indices(indices: np.ndarray, offsets: np.ndarray, vocab_size: int, field: str = "indices",
                  base: int = 0) -> None:
    """SPEC.md 20.2 step 5: every index below the vocabulary size and above the one before it in its
    vector; else invalid_field at 4j of the first entry j that is not."""
    k = indices.size
    if not k:
        return
    faults = []
    if vocab_size < MAX_VOCAB:
        past = np.flatnonzero(indices >= vocab_size)
        if past.size:
            faults.append(int(past[0]))
    if k > 1:
        starts = np.zeros(k, bool)
        first = offsets[:-1][offsets[:-1] < offsets[1:]]  # where each non-empty vector starts
        starts[first] = True
        down = np.flatnonzero(~starts[1:] & (indices[1:] <= indices[:-1]))
        if down.size:
            faults.append(int(down[0]) + 1)
    if faults:
        j = min(faults)
        why = (f"{int(indices[j])} is not below the vocabulary size {vocab_size}" if indices[j] >= vocab_size
               else f"{int(indices[j])} is not above the index before it ({int(indices[j - 1])}): indices must be "
                    "strictly ascending within a vector")
        raise InvalidFieldError(f"index {j}: {why}", offset=base + 4 * j, field=field)


def check_vocab_size(v: object, field: str) -> int:
    if not isinstance(v, int) or isinstance(v, bool) or not 1 <= v <= MAX_VOCAB:
        raise InvalidFieldError(f"the vocabulary size must be an integer from 1 to 2^32, got {v!r}", field=field)
    return v


def check_sparse_dtype(dtype: object, field: str = "dtype") -> str:
    dtype = check_dtype(dtype, field)
    if dtype not in SPARSE_DTYPES:
        raise InvalidFieldError(f"sparse values are {', '.join(SPARSE_DTYPES)}, not {dtype}", field=field)
    return dtype


def _as_u32(offsets) -> np.ndarray:
    a = np.asarray(offsets)
    if a.ndim != 1 or (a.size and (a.min() < 0 or a.max() >= 1 << 32)):
        raise ValueError("offsets must be one row of integers from 0 to 2^32 - 1")
    return a.astype(_U32, copy=False)


@dataclass(frozen=True, slots=True)
class RaggedTensor:
    """``n`` matrices of ``m_i x d`` over one buffer: ``rows`` is the ``(N, d)`` Tensor of every
    matrix's rows back to back, ``offsets`` the ``n + 1`` uint32 row offsets (SPEC.md 20.1).

    >>> import numpy as np
    >>> r = RaggedTensor.from_arrays([np.ones((2, 3), np.float32), np.zeros((1, 3), np.float32)])
    >>> len(r), r.lengths.tolist(), r[1].shape, r.offsets.tolist()
    (2, [2, 1], (1, 3), [0, 2, 3])
    """

    rows: Tensor
    offsets: np.ndarray

    def __post_init__(self) -> None:
        object.__setattr__(self, "offsets", _as_u32(self.offsets))
        check_offsets(self.offsets)
        if int(self.offsets[-1]) != self.rows.n:
            raise ValueError(f"offsets end at {int(self.offsets[-1])}, the rows are {self.rows.n}")

    @classmethod
    def from_arrays(cls, matrices: Sequence, dtype: str | None = None, d: int | None = None) -> "RaggedTensor":
        """One buffer from a list of ``(m_i, d)`` arrays (one copy); ``dtype`` and ``d`` as
        :meth:`Tensor.from_array` (needed for bfloat16 bits, binary, and an empty list)."""
        arrays = [np.asarray(m) for m in matrices]
        if any(a.ndim != 2 for a in arrays):
            raise ValueError("each matrix must be 2-D, (m_i, d)")
        if not arrays:
            if d is None:
                raise ValueError("an empty batch needs d")
            dt = dtype or "float32"
            width = row_bytes(dt, d) if dt == "binary" else d
            return cls(Tensor(np.empty((0, width), storage_dtype(dt)), dt, d), np.zeros(1, _U32))
        lengths = [a.shape[0] for a in arrays]
        return cls(Tensor.from_array(np.concatenate(arrays), dtype, d), np.concatenate([[0], np.cumsum(lengths)]))

    @classmethod
    def from_lengths(cls, rows: Tensor | np.ndarray, lengths: Sequence[int]) -> "RaggedTensor":
        """A view of ``rows`` split into matrices of ``lengths`` rows (no copy)."""
        rows = rows if isinstance(rows, Tensor) else Tensor.from_array(rows)
        return cls(rows, np.concatenate([[0], np.cumsum(np.asarray(lengths, np.int64))]))

    @property
    def dtype(self) -> str:
        return self.rows.dtype

    @property
    def d(self) -> int:
        return self.rows.d

    @property
    def n(self) -> int:
        return self.offsets.size - 1

    @property
    def shape(self) -> tuple[int, int]:
        """``(n, d)``, as SPEC.md 20.1 names it."""
        return (self.n, self.d)

    @property
    def values(self) -> np.ndarray:
        """The ``(N, d)`` storage of every row (uint16 bits for bfloat16, packed bytes for binary)."""
        return self.rows.array

    @property
    def lengths(self) -> np.ndarray:
        """Rows of each matrix (``m_i``)."""
        return np.diff(self.offsets.astype(np.int64))

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> np.ndarray:
        """Matrix ``i`` as a view into :attr:`values`."""
        if not -self.n <= i < self.n:
            raise IndexError(f"matrix {i} of {self.n}")
        i %= self.n
        return self.rows.array[int(self.offsets[i]):int(self.offsets[i + 1])]

    def __iter__(self) -> Iterator[np.ndarray]:
        return (self[i] for i in range(self.n))

    def to_float32(self) -> np.ndarray:
        """Every row widened to float32 (section 3 rules), ``(N, d)``."""
        return widen(self.rows)


@dataclass(frozen=True, slots=True)
class SparseVectors:
    """``n`` sparse vectors of ``vocab_size`` dimensions (SPEC.md 20.2): vector ``i`` is
    ``indices[offsets[i]:offsets[i+1]]`` (uint32, strictly ascending) with as many ``values`` (the
    storage of ``dtype``: uint16 bits for bfloat16).

    >>> import numpy as np
    >>> s = SparseVectors([5, 9, 1], np.array([0.5, 1.0, 2.0], np.float32), [0, 2, 3], 10)
    >>> len(s), s.nnz.tolist(), s[0][0].tolist(), s.to_dense()[1].tolist()
    (2, [2, 1], [5, 9], [0.0, 2.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0])
    """

    indices: np.ndarray
    values: np.ndarray
    offsets: np.ndarray
    vocab_size: int
    dtype: str = "float32"

    def __post_init__(self) -> None:
        check_sparse_dtype(self.dtype)
        check_vocab_size(self.vocab_size, "vocab_size")
        object.__setattr__(self, "offsets", _as_u32(self.offsets))
        object.__setattr__(self, "indices", _as_u32(self.indices))
        values = np.asarray(self.values)
        target = storage_dtype(self.dtype)
        if values.dtype != target:
            if values.dtype.kind != target.kind or values.dtype.itemsize != target.itemsize:
                raise ValueError(f"{self.dtype} values cannot be a numpy {values.dtype} array")
            values = values.astype(target)
        object.__setattr__(self, "values", values)
        check_offsets(self.offsets)
        k = int(self.offsets[-1])
        if self.indices.shape != (k,) or values.shape != (k,):
            raise ValueError(f"offsets end at {k}: {self.indices.shape[0]} indices and {values.shape[0]} values given")
        check_indices(self.indices, self.offsets, self.vocab_size)

    @property
    def n(self) -> int:
        return self.offsets.size - 1

    @property
    def shape(self) -> tuple[int, int]:
        """``(n, vocab_size)``."""
        return (self.n, self.vocab_size)

    @property
    def nnz(self) -> np.ndarray:
        """Non-zero entries of each vector."""
        return np.diff(self.offsets.astype(np.int64))

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """Vector ``i`` as (indices, values) views."""
        if not -self.n <= i < self.n:
            raise IndexError(f"vector {i} of {self.n}")
        i %= self.n
        a, b = int(self.offsets[i]), int(self.offsets[i + 1])
        return self.indices[a:b], self.values[a:b]

    def slice(self, start: int, stop: int) -> "SparseVectors":
        """Vectors ``start`` to ``stop`` (exclusive) over the same index and value buffers."""
        a, b = int(self.offsets[start]), int(self.offsets[stop])
        return SparseVectors(self.indices[a:b], self.values[a:b], self.offsets[start:stop + 1] - a, self.vocab_size,
                             self.dtype)

    def values_float32(self) -> np.ndarray:
        if self.dtype == "bfloat16":
            return (self.values.astype(np.uint32) << 16).view(np.float32)
        return self.values.astype(np.float32, copy=False)

    def to_scipy(self):
        """A ``scipy.sparse.csr_array`` of shape ``(n, vocab_size)`` over the same indices and offsets
        (the ``densewire[sparse]`` extra); values widened to float32 (float64 kept)."""
        sp = require("scipy.sparse", extra="sparse", feature="SparseVectors.to_scipy")
        data = self.values if self.dtype == "float64" else self.values_float32()
        return sp.csr_array((data, self.indices, self.offsets), shape=self.shape)

    def to_dense(self) -> np.ndarray:
        """The ``(n, vocab_size)`` float32 (float64) matrix: for small vocabularies only."""
        out = np.zeros(self.shape, np.float64 if self.dtype == "float64" else np.float32)
        rows = np.repeat(np.arange(self.n), self.nnz)
        out[rows, self.indices.astype(np.int64)] = self.values if self.dtype == "float64" else self.values_float32()
        return out


def _float_rows(x) -> np.ndarray:
    if isinstance(x, Tensor):
        if x.dtype == "binary":
            raise ValueError("MaxSim needs numbers, not packed bits")
        return widen(x) if x.dtype in ("bfloat16", "float16") else x.array.astype(np.float32, copy=False)
    a = np.asarray(x)
    if a.ndim != 2:
        raise ValueError(f"a query is an (m, d) matrix, got shape {a.shape}")
    return a if a.dtype in (np.float32, np.float64) else a.astype(np.float32)


def maxsim(query: RaggedTensor | np.ndarray, docs: RaggedTensor, *, block_rows: int = 1 << 16) -> np.ndarray:
    """ColBERT's late-interaction score: for each document, the sum over query tokens of the largest
    dot product with any of the document's tokens.

    ``query`` is one ``(m, d)`` matrix (the result has one score per document, shape ``(n_docs,)``)
    or a RaggedTensor of queries (shape ``(n_queries, n_docs)``). Vectors are used as given (ColBERT
    normalises them, so dot products are cosines). A document without tokens scores 0. Documents are
    scored ``block_rows`` token rows at a time, so memory stays ``m x block_rows`` floats.

    >>> import numpy as np
    >>> q = np.array([[1.0, 0.0], [0.0, 1.0]], np.float32)
    >>> docs = RaggedTensor.from_arrays([np.array([[1.0, 0.0], [0.6, 0.8]], np.float32), np.array([[0.0, 1.0]], np.float32)])
    >>> [round(float(s), 3) for s in maxsim(q, docs)]
    [1.8, 1.0]
    """
    if docs.dtype == "binary":
        raise ValueError("MaxSim needs numbers, not packed bits")
    if isinstance(query, RaggedTensor):
        if query.d != docs.d:
            raise ValueError(f"queries of d={query.d}, documents of d={docs.d}")
        rows = _float_rows(query.rows)
        return np.stack([_maxsim_one(rows[int(a):int(b)], docs, block_rows)
                         for a, b in zip(query.offsets[:-1], query.offsets[1:])]) if query.n else np.zeros((0, docs.n))
    q = _float_rows(query)
    if q.shape[1] != docs.d:
        raise ValueError(f"a query of d={q.shape[1]}, documents of d={docs.d}")
    return _maxsim_one(q, docs, block_rows)


def _maxsim_one(q: np.ndarray, docs: RaggedTensor, block_rows: int) -> np.ndarray:
    dtype = np.float64 if q.dtype == np.float64 else np.float32
    scores = np.zeros(docs.n, dtype)
    offsets = docs.offsets.astype(np.int64)
    lengths = np.diff(offsets)
    i = 0
    while i < docs.n:  # a block of whole documents, at least one, of about block_rows rows
        j = max(i + 1, int(np.searchsorted(offsets, offsets[i] + block_rows, side="right")) - 1)
        j = min(j, docs.n)
        a, b = offsets[i], offsets[j]
        if b > a:
            d = _float_rows(Tensor(docs.values[a:b], docs.dtype, docs.d))
            sim = q.astype(dtype, copy=False) @ d.astype(dtype, copy=False).T  # (m, rows of the block)
            nonempty = np.flatnonzero(lengths[i:j])
            best = np.maximum.reduceat(sim, (offsets[i:j][nonempty] - a), axis=1)  # (m, non-empty docs)
            scores[i + nonempty] = best.sum(axis=0)
        i = j
    return scores
