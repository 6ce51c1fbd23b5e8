"""Sparse output (SPLADE) of a model with a sparse head, on the shared service: the model call, its
limits and its cache (:func:`embed_sparse`), and TEI's ``POST /embed_sparse`` route (:func:`tei_embed_sparse`).

TEI's EmbedSparseRequest ``{"inputs", "truncate", "truncation_direction", "prompt_name"}`` answers
``[[{"index": i, "value": v}, ...], ...]`` (the non-zero entries of each input, ascending indices) in JSON;
``Accept`` selects densewire's sparse tensor (SPEC.md 20.2) in raw, MessagePack, Protobuf or Arrow,
with the vocabulary size as its second dimension. ``max_active_dims`` (sentence-transformers'
``SparseEncoder.encode`` name) keeps each vector's largest weights only.

A backend serves sparse output when it has ``embed_sparse(texts) -> (indices, values, nnz)`` (uint32
indices strictly ascending per text, float32 values, the count of each text's, all texts back to back)
and ``sparse_vocab_size``; the hash model does (``_backends/hash.py``), and SPLADE checkpoints served with
``--pooling splade``.
"""

from __future__ import annotations

import asyncio

import numpy as np
import orjson
from starlette.requests import Request
from starlette.responses import Response

from densewire import Embeddings, InvalidFieldError, PayloadTooLargeError, SparseVectors, Usage

from .dialects import _length_error, _object, _optional, _tei_direction, _tei_inputs, _with_status, tei_error
from .embedder import Embedder, too_long
from .pipeline import Call, run_call

__all__ = ["embed_sparse", "tei_embed_sparse", "SPARSE", "sparse_vocab_size", "top_k"]

#: the memory cache's ``dims`` part of the key for sparse vectors (vectors use 0 or their dimensions,
#: token states TOKEN_STATES = -1); an entry is the vector's indices (as float32 bits) then its values
SPARSE = -2


def sparse_vocab_size(service: Embedder) -> int | None:
    """The vocabulary size of the served model's sparse output, None when it gives none."""
    backend = service.backend
    if getattr(backend, "embed_sparse", None) is None:
        return None
    return int(backend.sparse_vocab_size)


def _no_sparse(service: Embedder, field: str = "model") -> InvalidFieldError:
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


async def embed_sparse(service: Embedder, texts: list[str], *, truncate: bool, max_active_dims: int | None = None,
                       field: str = "input") -> tuple[SparseVectors, list[int], list[int]]:
    """``(sparse vectors, token counts, indexes cut)`` of ``texts`` by the served model's sparse head.

    Checked before the model runs: a model without one is ``invalid_field`` on ``model``; with
    ``truncate`` False a text longer than the model's maximum is ``too_long``. After: an answer of
    more than ``--max-token-output-bytes`` (8 bytes per non-zero, index and value, with the offsets) is
    413 ``payload_too_large`` naming the limit. Vectors are cached in memory under their own kind
    (``(SPARSE, text)``), whole: ``max_active_dims`` prunes the cached vector.
    """
    fn = getattr(service.backend, "embed_sparse", None)
    if fn is None:
        raise _no_sparse(service)
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
    for t in dict.fromkeys(texts):
        entry = mem.get((SPARSE, t)) if mem.max_bytes > 0 else None
        if entry is not None:
            half = entry[0].size // 2
            found[t] = (entry[0][:half].view(np.uint32), entry[0][half:])
    if found:
        service.metrics.cache_hits.labels("memory").inc(len(found))
    missing = [t for t in dict.fromkeys(texts) if t not in found]
    if missing:
        service.metrics.cache_misses.inc(len(missing))
        loop = asyncio.get_running_loop()
        indices, values, nnz = await loop.run_in_executor(service._model_pool, fn, missing)
        offsets = np.concatenate([[0], np.cumsum(nnz)]).astype(np.int64)
        for j, t in enumerate(missing):
            a, b = offsets[j], offsets[j + 1]
            found[t] = (indices[a:b], values[a:b])
            mem.put((SPARSE, t), np.concatenate([indices[a:b].view(np.float32), values[a:b]]), count_of[t])
        service._update_cache_gauges()
    parts = [top_k(*found[t], max_active_dims) for t in texts]
    nnz_all = [p[0].size for p in parts]
    nbytes = 8 * sum(nnz_all) + 4 * (len(texts) + 1)
    if nbytes > service.cfg.max_token_output_bytes:
        raise PayloadTooLargeError(
            f"{sum(nnz_all)} non-zero weights x 8 bytes (index and value) = {nbytes} bytes of sparse output is over "
            f"the limit of {service.cfg.max_token_output_bytes} bytes (--max-token-output-bytes); send fewer "
            "inputs or ask for max_active_dims", field="input")
    service.metrics.inputs.inc(len(texts))
    sparse = SparseVectors(np.concatenate([p[0] for p in parts]).astype(np.uint32, copy=False),
                           np.concatenate([p[1] for p in parts]).astype(np.float32, copy=False),
                           np.concatenate([[0], np.cumsum(nnz_all)]), vocab)
    return sparse, kept, [i for i, c in enumerate(counts) if c > limit]


def _max_active_dims(doc: dict) -> int | None:
    k = _optional(doc, "max_active_dims", int, "a positive integer")
    if k is not None and k < 1:
        raise InvalidFieldError(f"must be a positive integer, not {k}", field="max_active_dims")
    return k


def tei_sparse_json(sparse: SparseVectors) -> bytes:
    """TEI's EmbedSparseResponse: ``[[{"index": i, "value": v}, ...], ...]``."""
    values = sparse.values_float32()
    out = []
    for i in range(sparse.n):
        a, b = int(sparse.offsets[i]), int(sparse.offsets[i + 1])
        out.append([{"index": int(j), "value": v} for j, v in zip(sparse.indices[a:b], values[a:b])])
    return orjson.dumps(out, option=orjson.OPT_SERIALIZE_NUMPY)  # float32 values in float32's shortest form


async def tei_embed_sparse(request: Request) -> Response:
    """``POST /embed_sparse``: TEI's EmbedSparseRequest -> ``[[{"index", "value"}, ...], ...]``."""

    async def handle(call: Call) -> Response:
        fmt, coding = call.negotiate()
        doc = _object(await call.json_body())
        cfg, service = call.st.cfg, call.service
        if sparse_vocab_size(service) is None:  # TEI: 424 "model is not an embedding model with SPLADE pooling"
            raise _with_status(_no_sparse(service), 400, "Validation")
        texts, ids = _tei_inputs(doc.get("inputs"), cfg.max_client_batch_size)
        if texts is None:
            raise _with_status(InvalidFieldError("token-id inputs are not served on /embed_sparse; send the texts",
                                                 field="inputs"), 422, "Validation")
        truncate = _optional(doc, "truncate", bool, "a boolean")
        if _tei_direction(doc) != "right":
            raise _with_status(InvalidFieldError("only 'Right' truncation is served for sparse output",
                                                 field="truncation_direction"), 422, "Validation")
        prompt = _optional(doc, "prompt_name", str, "a string")
        if prompt is not None:
            raise _with_status(InvalidFieldError(
                f"prompt_name {prompt!r} is not a prompt of the model (it defines none)", field="prompt_name"),
                422, "Validation")
        k = _max_active_dims(doc)
        try:
            sparse, counts, cut = await embed_sparse(service, texts, truncate=cfg.auto_truncate if truncate is None
                                                     else truncate, max_active_dims=k)
        except InvalidFieldError as err:
            raise _length_error(err, "inputs", "send truncate: true to embed its first tokens, or run the server "
                                "with --auto-truncate", tei=True) from None
        call.truncated = cut
        if fmt != "json":
            tokens = sum(counts)
            return await call.render(Embeddings(sparse, model=service.model_id, usage=Usage(tokens, tokens)),
                                     fmt, coding)
        return call.prepared(tei_sparse_json(sparse), {}, coding)

    return await run_call(request, "/embed_sparse", handle, tei_error)
