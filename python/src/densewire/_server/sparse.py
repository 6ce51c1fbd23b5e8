"""Sparse output (SPLADE) of a model with a sparse head, on the shared service: the model call, its limits
and its cache (:func:`embed_sparse`); the routes that answer it are in ``sparse_routes.py``.

A backend serves sparse output when it has ``embed_sparse(texts, side) -> (indices, values, nnz)`` (``side``
"right" or "left": which end of a text over ``max_tokens`` is kept; uint32
indices strictly ascending per text, float32 values, the count of each text's, all texts back to back)
and ``sparse_vocab_size``; the hash model does (``_backends/hash.py``), and SPLADE checkpoints served with
``--pooling splade``.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import numpy as np

from densewire import InvalidFieldError, PayloadTooLargeError, SparseVectors

from .cache import SPARSE, SPARSE_LEFT
from .limits import too_long

if TYPE_CHECKING:
    from .embedder import Embedder

__all__ = ["embed_sparse", "embed_sparse_ids", "no_sparse", "sparse_vocab_size", "top_k"]


def sparse_vocab_size(service: "Embedder") -> int | None:
    """The vocabulary size of the served model's sparse output, None when it gives none."""
    backend = service.backend
    if getattr(backend, "embed_sparse", None) is None:
        return None
    return int(backend.sparse_vocab_size)


def no_sparse(service: "Embedder", field: str = "model") -> InvalidFieldError:
    return InvalidFieldError(
        f"the model {service.model_id} ({type(service.backend).__name__}) has no sparse head: serve a SPLADE "
        "model (a BertForMaskedLM checkpoint) with --pooling splade, or a sentence-transformers SparseEncoder",
        field=field)


def top_k(indices: np.ndarray, values: np.ndarray, k: int | None) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` largest weights of one vector (ties: the lower index), indices kept ascending."""
    if k is None or indices.size <= k:
        return indices, values
    order = np.lexsort((indices, -values.astype(np.float64)))[:k]  # by weight descending, then index
    order.sort()  # positions in an ascending vector: ascending positions are ascending indices
    return indices[order], values[order]


async def embed_sparse(service: "Embedder", texts: list[str], *, truncate: bool, max_active_dims: int | None = None,
                       side: str = "right", field: str = "input") -> tuple[SparseVectors, list[int], list[int]]:
    """``(sparse vectors, token counts, indexes cut)`` of ``texts`` by the served model's sparse head.

    Checked before the model runs: a model without one is ``invalid_field`` on ``model``; with
    ``truncate`` False a text longer than the model's maximum is ``too_long``. After: an answer of
    more than ``--max-token-output-bytes`` (8 bytes per non-zero, index and value, with the offsets) is
    413 ``payload_too_large`` naming the limit. Vectors are cached in memory under their own kind
    (``(SPARSE, text)``; ``SPARSE_LEFT`` for ``side`` "left", a long text keeping its last tokens), whole:
    ``max_active_dims`` prunes the cached vector.
    """
    fn = getattr(service.backend, "embed_sparse", None)
    if fn is None:
        raise no_sparse(service)
    vocab = int(service.backend.sparse_vocab_size)
    if not texts:
        return SparseVectors(np.zeros(0, np.uint32), np.zeros(0, np.float32), [0], vocab), [], []
    texts, clipped = await service.clip_texts(texts)
    counts = await service.count_tokens(texts)
    limit = service.max_tokens
    if not truncate:
        for i, c in enumerate(counts):
            if c > limit:
                raise too_long(i, c, limit, clipped=i in clipped)
    kept = [min(c, limit) for c in counts]
    mem, found, count_of = service.memory, {}, dict(zip(texts, kept))
    kind = SPARSE if side == "right" else SPARSE_LEFT
    for t in dict.fromkeys(texts):
        entry = mem.get((kind, t)) if mem.max_bytes > 0 else None
        if entry is not None:
            half = entry[0].size // 2
            found[t] = (entry[0][:half].view(np.uint32), entry[0][half:])
    if found:
        service.metrics.cache_hits.labels("memory").inc(len(found))
    missing = [t for t in dict.fromkeys(texts) if t not in found]
    if missing:
        service.metrics.cache_misses.inc(len(missing))
        loop = asyncio.get_running_loop()
        indices, values, nnz = await loop.run_in_executor(service._model_pool, fn, missing, side)
        offsets = np.concatenate([[0], np.cumsum(nnz)]).astype(np.int64)
        for j, t in enumerate(missing):
            a, b = offsets[j], offsets[j + 1]
            found[t] = (indices[a:b], values[a:b])
            mem.put((kind, t), np.concatenate([indices[a:b].view(np.float32), values[a:b]]), count_of[t])
        service._update_cache_gauges()
    sparse = _answer(service, [top_k(*found[t], max_active_dims) for t in texts], vocab)
    service.metrics.inputs.inc(len(texts))
    return sparse, kept, [i for i, c in enumerate(counts) if c > limit]


async def embed_sparse_ids(service: "Embedder", ids: list[list[int]], *, truncate: bool,
                           max_active_dims: int | None = None, side: str = "right") -> tuple[SparseVectors, list[int], list[int]]:
    """:func:`embed_sparse` of token-id inputs (TEI's ``inputs`` as ids): each sequence as the backend's
    ``embed_sparse_ids`` takes it (the tokenizer's ids; the special tokens added unless it has them), cut
    at the model's maximum only with ``truncate``. Not cached (as token-id vectors are not)."""
    backend = service.backend
    fn = getattr(backend, "embed_sparse_ids", None)
    if fn is None:
        raise no_sparse(service, "inputs") if getattr(backend, "embed_sparse", None) is None else InvalidFieldError(
            f"the model {service.model_id} takes no token-id inputs for sparse output; send the texts", field="inputs")
    bound = getattr(backend, "_vocab", None)  # a tokenizer's vocabulary (the hash model has none)
    for i, seq in enumerate(ids):
        if bound and len(seq) and max(seq) >= bound:
            raise InvalidFieldError(f"token id {max(seq)} is not in the vocabulary of {bound} tokens", field=f"inputs[{i}]")
    special = int(getattr(backend, "special_token_count", 0))
    counts = [len(seq) + special for seq in ids]
    limit = service.max_tokens
    if not truncate:
        for i, c in enumerate(counts):
            if c > limit:
                raise too_long(i, c, limit)
    service.metrics.cache_misses.inc(len(ids))
    loop = asyncio.get_running_loop()
    indices, values, nnz = await loop.run_in_executor(service._model_pool, fn, ids, side)
    offsets = np.concatenate([[0], np.cumsum(nnz)]).astype(np.int64)
    parts = [top_k(indices[a:b], values[a:b], max_active_dims) for a, b in zip(offsets[:-1], offsets[1:])]
    sparse = _answer(service, parts, int(backend.sparse_vocab_size))
    service.metrics.inputs.inc(len(ids))
    return sparse, [min(c, limit) for c in counts], [i for i, c in enumerate(counts) if c > limit]


def _answer(service: "Embedder", parts: list[tuple[np.ndarray, np.ndarray]], vocab: int) -> SparseVectors:
    """The answer of ``parts`` (each input's indices and values), refused past --max-token-output-bytes."""
    nnz_all = [p[0].size for p in parts]
    nbytes = 8 * sum(nnz_all) + 4 * (len(parts) + 1)
    if nbytes > service.cfg.max_token_output_bytes:
        raise PayloadTooLargeError(
            f"{sum(nnz_all)} non-zero weights x 8 bytes (index and value) = {nbytes} bytes of sparse output is over "
            f"the limit of {service.cfg.max_token_output_bytes} bytes (--max-token-output-bytes); send fewer "
            "inputs or ask for max_active_dims", field="input")
    return SparseVectors(np.concatenate([p[0] for p in parts]).astype(np.uint32, copy=False),
                         np.concatenate([p[1] for p in parts]).astype(np.float32, copy=False),
                         np.concatenate([[0], np.cumsum(nnz_all)]), vocab)
