"""The routes of sparse output (``sparse.embed_sparse``): TEI's ``POST /embed_sparse``
(:func:`tei_embed_sparse`) and vLLM's ``POST /pooling`` with ``"task": "embed"`` on a SPLADE model
(:func:`vllm_sparse_pooling`, reached from ``tokens.vllm_pooling``).

TEI's EmbedSparseRequest ``{"inputs", "truncate", "truncation_direction", "prompt_name"}`` answers
``[[{"index": i, "value": v}, ...], ...]`` (the non-zero entries of each input, ascending indices) in JSON;
``Accept`` selects densewire's sparse tensor (SPEC.md 20.2) in raw, MessagePack, Protobuf or Arrow,
with the vocabulary size as its second dimension. ``max_active_dims`` (sentence-transformers'
``SparseEncoder.encode`` name) keeps each vector's largest weights only.
"""

from __future__ import annotations

import json
import time

import orjson
import pybase64
from starlette.requests import Request
from starlette.responses import Response

from densewire import Embeddings, InvalidFieldError, SparseVectors, Usage

from .dialects import (_length_error, _object, _optional, _tei_direction, _tei_inputs, _tei_no_prompt, _with_status,
                       tei_error)
from .pipeline import Call, run_call
from .request import _integer
from .sparse import embed_sparse, embed_sparse_ids, no_sparse, sparse_vocab_size
from .vllm import _POOLING_DTYPES, _choice, _pooling_inputs, _vllm_matrix_bytes

__all__ = ["tei_embed_sparse", "vllm_sparse_pooling", "tei_sparse_json"]


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
            raise _with_status(no_sparse(service), 400, "Validation")
        texts, ids = _tei_inputs(doc.get("inputs"), cfg.max_client_batch_size)
        truncate = _optional(doc, "truncate", bool, "a boolean")
        side = _tei_direction(doc)
        _tei_no_prompt(doc)
        k = _max_active_dims(doc)
        cut_long = cfg.auto_truncate if truncate is None else truncate
        try:
            if texts is None:  # token ids (TEI's inputs may be ids)
                sparse, counts, cut = await embed_sparse_ids(service, ids, truncate=cut_long, max_active_dims=k, side=side)
            else:
                sparse, counts, cut = await embed_sparse(service, texts, truncate=cut_long, max_active_dims=k, side=side)
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


# -- vLLM ----------------------------------------------------------------------------------------------

async def vllm_sparse_pooling(call: Call, doc: dict, fmt: str, coding: str | None, rid: str) -> Response:
    """vLLM's ``POST /pooling`` with ``"task": "embed"`` on a SPLADE model (vLLM's
    ``BertSpladeSparseEmbeddingModel`` answers that task with its SPLADE pooler): each item's ``data`` is the
    vocabulary-sized weight vector (``float``: numbers; ``base64``: its bytes in ``embed_dtype`` and
    ``endianness``; ``bytes``/``bytes_only``: the vectors back to back, vLLM's ``metadata`` header with
    ``shape: [V]``). ``Accept`` gives densewire's sparse tensor instead: the non-zeros only."""
    service = call.service
    texts = _pooling_inputs(doc.get("input"), call.st.cfg.max_client_batch_size)
    encoding = _choice(doc, "encoding_format", ("float", "base64", "bytes", "bytes_only"), "float")
    embed_dtype = _choice(doc, "embed_dtype", _POOLING_DTYPES, "float32")
    endianness = _choice(doc, "endianness", ("native", "big", "little"), "native")
    if doc.get("normalize") is True:  # TEI: "`normalize` is not available for SPLADE models"
        raise InvalidFieldError("normalize: true is not available for SPLADE models (their weights are not "
                                "normalised)", field="normalize")
    if doc.get("dimensions") is not None:
        raise InvalidFieldError("sparse output is not cut to dimensions", field="dimensions")
    if doc.get("priority") not in (None, 0):
        raise InvalidFieldError("only priority 0 is served", field="priority")
    limit = doc.get("truncate_prompt_tokens")
    if limit is not None:
        limit = _integer(limit, "truncate_prompt_tokens", -1, service.max_tokens)
        if limit not in (-1, service.max_tokens):
            raise InvalidFieldError("sparse output is cut at the model's maximum only: send -1",
                                    field="truncate_prompt_tokens")
    k = _max_active_dims(doc)
    try:
        sparse, counts, cut = await embed_sparse(service, texts, truncate=limit is not None or call.st.cfg.auto_truncate,
                                                 max_active_dims=k)
    except InvalidFieldError as err:
        raise _length_error(err, "input", "send truncate_prompt_tokens: -1 to embed its first tokens") from None
    call.truncated = cut
    tokens = sum(counts)
    usage = {"prompt_tokens": tokens, "total_tokens": tokens}
    if fmt != "json" and encoding not in ("bytes", "bytes_only"):
        return await call.render(Embeddings(sparse, model=service.model_id, usage=Usage(tokens, tokens)), fmt, coding)
    dense = sparse.to_dense()
    if encoding in ("bytes", "bytes_only"):
        parts, items, at = [], [], 0
        for i, row in enumerate(dense):
            b = _vllm_matrix_bytes(row[None, :], embed_dtype, endianness)
            parts.append(b)
            items.append({"index": i, "embed_dtype": embed_dtype, "endianness": endianness, "start": at,
                          "end": at + len(b), "shape": [sparse.vocab_size]})
            at += len(b)
        meta = {"id": rid, "created": int(time.time()), "model": service.model_id, "data": items, "usage": usage}
        headers = {"metadata": json.dumps(meta)} if encoding == "bytes" else {}
        return call.prepared(b"".join(parts), headers, coding, media_type="application/octet-stream")
    if encoding == "float":
        data = [{"index": i, "object": "pooling", "data": row} for i, row in enumerate(dense)]
    else:
        data = [{"index": i, "object": "pooling",
                 "data": pybase64.b64encode(_vllm_matrix_bytes(row[None, :], embed_dtype, endianness)).decode()}
                for i, row in enumerate(dense)]
    body = orjson.dumps({"id": rid, "object": "list", "created": int(time.time()), "model": service.model_id,
                         "data": data, "usage": {**usage, "completion_tokens": 0, "prompt_tokens_details": None}},
                        option=orjson.OPT_SERIALIZE_NUMPY)
    return call.prepared(body, {}, coding)
