"""Deterministic pseudo-embeddings of any dimension, for tests and benchmarks.

The vector of a text depends on the text and the dimension only: a PCG64
generator is seeded from the 128-bit BLAKE2b digest of the UTF-8 text, draws
``dimensions`` standard normals (float32), and the result is L2-normalised,
so vectors are unit length and uniformly spread over the sphere. The first
``k`` components of a text's vector before normalisation are the same for
every dimension >= k (a cheap Matryoshka-like property).

Tokens are whitespace-separated words: ``count_tokens`` returns
``len(text.split())``, and :meth:`HashBackend.embed` keeps only the first
``max_tokens`` words of a longer text (joined by single spaces). Token-id
inputs hash the id sequence (in a separate domain from texts).

Sparse output (:meth:`HashBackend.embed_sparse`, TEI's ``/embed_sparse``) is a deterministic stand-in for a
SPLADE model over a vocabulary of :data:`SPARSE_VOCAB_SIZE` (30522, BERT's): each word ``w`` of the text
(after the same cut) gives ``x``, the little-endian uint64 of ``blake2b(utf8(w), digest_size=8,
person=b"densewire-sparse")``; its index is ``x % 30522`` and its weight ``((x >> 40) + 1) / 2**24``
(exact in float32, in ``(0, 1]``). Weights are max-pooled per index, as SPLADE pools over tokens, and
indices come out strictly ascending. A text without words has no non-zeros.
"""

from __future__ import annotations

import hashlib

import numpy as np

from .base import Backend, check_ids, check_texts, empty_result, whitespace_token_counts

__all__ = ["HashBackend", "SPARSE_VOCAB_SIZE"]

_TEXT_DOMAIN = b"densewire-text"  # BLAKE2b personalisation (<= 16 bytes)
_IDS_DOMAIN = b"densewire-ids"
_SPARSE_DOMAIN = b"densewire-sparse"
#: the vocabulary of the hash model's sparse output (BERT's WordPiece vocabulary size)
SPARSE_VOCAB_SIZE = 30522
MAX_HASH_DIMENSIONS = 1 << 16


def _seed(data: bytes, domain: bytes) -> int:
    return int.from_bytes(hashlib.blake2b(data, digest_size=16, person=domain).digest(), "little")


class HashBackend(Backend):
    """Pseudo-embeddings from hashing; no model, instant, any dimension.

    Args:
        dimensions: output dimension, 1..65536.
        name: model id served (default ``hash-{dimensions}``).
        max_tokens: longest input in whitespace words; longer inputs are cut.
    """

    def __init__(self, dimensions: int, name: str | None = None, *, max_tokens: int = 8192) -> None:
        if isinstance(dimensions, bool) or not isinstance(dimensions, (int, np.integer)):
            raise ValueError(f"hash backend dimensions must be an integer, not {dimensions!r}")
        if not 1 <= dimensions <= MAX_HASH_DIMENSIONS:
            raise ValueError(f"hash backend dimensions must be in 1..{MAX_HASH_DIMENSIONS}, not {dimensions}")
        if max_tokens < 1:
            raise ValueError(f"max_tokens must be positive, not {max_tokens}")
        self.dimensions = int(dimensions)
        self.name = name or f"hash-{self.dimensions}"
        self.max_tokens = int(max_tokens)
        # tokens are whitespace-separated words; a cut after max_tokens * 16 characters is checked
        # by counting (server/limits.py), so longer words are still never cut short
        self.max_chars_per_token = 16
        self.tokens_are_words = True
        # Matryoshka by construction (the module doc): a prefix of the vector is the vector of a smaller
        # dimension, so the server accepts any ``dimensions`` (server/matryoshka.py)
        self.matryoshka = True
        self.sparse_vocab_size = SPARSE_VOCAB_SIZE  # of embed_sparse; token-id inputs stay unbounded (int64)

    def count_tokens(self, texts: list[str]) -> list[int]:
        """Whitespace-separated words per text."""
        check_texts(texts)
        return whitespace_token_counts(texts)

    def _truncate(self, text: str) -> str:
        # a text of L characters has at most (L + 1) // 2 words: skip the split when short
        if (len(text) + 1) // 2 <= self.max_tokens:
            return text
        words = text.split()
        return text if len(words) <= self.max_tokens else " ".join(words[: self.max_tokens])

    def _fill(self, seeds: list[int]) -> np.ndarray:
        out = np.empty((len(seeds), self.dimensions), dtype=np.float32)
        for row, seed in zip(out, seeds):
            np.random.Generator(np.random.PCG64(seed)).standard_normal(dtype=np.float32, out=row)
        norms = np.sqrt(np.einsum("ij,ij->i", out, out))
        out /= np.maximum(norms, np.float32(1e-30))[:, None]
        return out

    def embed(self, texts: list[str]) -> np.ndarray:
        check_texts(texts)
        if not texts:
            return empty_result(self.dimensions)
        return self._fill([_seed(self._truncate(t).encode("utf-8"), _TEXT_DOMAIN) for t in texts])

    def embed_tokens(self, ids: list[list[int]]) -> np.ndarray:
        check_ids(ids, 1 << 63)  # hashed as int64
        if not ids:
            return empty_result(self.dimensions)
        seeds = [
            _seed(np.asarray(list(seq)[: self.max_tokens], dtype="<i8").tobytes(), _IDS_DOMAIN)
            for seq in ids
        ]
        return self._fill(seeds)

    def embed_sparse(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Sparse vectors of texts (the module doc): ``(indices, values, nnz)``, the uint32 indices
        (strictly ascending per text) and float32 weights of every text back to back, and the count of
        each text's."""
        check_texts(texts)
        indices, values, nnz = [], [], []
        for text in texts:
            best: dict[int, int] = {}
            for word in self._truncate(text).split():
                x = int.from_bytes(hashlib.blake2b(word.encode("utf-8"), digest_size=8,
                                                   person=_SPARSE_DOMAIN).digest(), "little")
                i, w = x % SPARSE_VOCAB_SIZE, (x >> 40) + 1
                if w > best.get(i, 0):
                    best[i] = w
            keys = sorted(best)
            indices.extend(keys)
            values.extend(best[k] for k in keys)
            nnz.append(len(keys))
        return (np.asarray(indices, np.uint32), (np.asarray(values, np.float64) / (1 << 24)).astype(np.float32),
                np.asarray(nnz, np.int64))
