"""Per-token output (token embeddings) of any served transformer model, on other servers' routes:

* TEI's ``POST /embed_all``: ``{"inputs", "truncate", "truncation_direction", "prompt_name"}`` ->
  ``[[[f32, ...], ...], ...]`` (one matrix of ``tokens x hidden`` per input, special tokens included);
* vLLM's ``POST /pooling`` with ``"task": "token_embed"``: ``{"model", "input", "encoding_format",
  "embed_dtype", "endianness", "truncate_prompt_tokens", ...}`` -> ``{"id": "pool-…", "object": "list",
  "created", "model", "data": [{"index", "object": "pooling", "data": [[...]] | Base64}], "usage"}``;
  ``encoding_format: "bytes"`` answers the matrices' bytes back to back with vLLM's ``metadata`` header
  (``bytes_only``: without it).

On a multi-vector (ColBERT) model both answer its normalized per-token vectors, of the inputs as
documents, or as queries with ``"is_query": true`` (PyLate's name; ``_backends/colbert.py``).

JSON is each route's own shape; ``Accept`` selects densewire's ragged tensor (SPEC.md 20) in raw,
MessagePack, Protobuf or Arrow. Both routes run on the shared pipeline (auth, admission, metrics,
errors in the route's envelope), with the model's truncation rules and ``--max-token-output-bytes``.
"""

from __future__ import annotations

import json
import time
import uuid

import orjson
import pybase64
from starlette.requests import Request
from starlette.responses import Response

from densewire import Embeddings, InvalidFieldError, RaggedTensor, Usage

from .dialects import (_length_error, _object, _optional, _tei_direction, _tei_inputs, _tei_no_prompt, _with_status,
                       tei_error)
from .pipeline import Call, openai_error, run_call
from .request import _integer
from .sparse_routes import vllm_sparse_pooling
from .vllm import _POOLING_DTYPES, _choice, _pooling_inputs, _vllm_matrix_bytes

__all__ = ["tei_embed_all", "vllm_pooling", "POOLING_FIELDS"]

#: the fields of vLLM's PoolingCompletionRequest that /pooling reads (others are invalid_field)
POOLING_FIELDS = ("model", "input", "task", "encoding_format", "embed_dtype", "endianness", "truncate_prompt_tokens",
                  "request_id", "user", "priority", "add_special_tokens", "use_activation", "normalize",
                  "cache_salt", "mm_processor_kwargs", "dimensions", "max_active_dims", "is_query")


async def _states(call: Call, texts: list[str], truncate: bool, field: str, hint: str, *, tei: bool,
                  is_query: bool | None = None) -> Embeddings:
    """The model's per-token output of ``texts`` (a ColBERT model's vectors: documents, or queries with
    ``is_query``), as Embeddings holding a RaggedTensor."""
    try:
        ragged, counts, cut = await call.service.embed_token_states(texts, truncate=truncate, is_query=is_query)
    except InvalidFieldError as err:
        raise _length_error(err, field, hint, tei=tei) from None
    call.truncated = cut
    tokens = sum(counts)
    return Embeddings(ragged, model=call.service.model_id, usage=Usage(tokens, tokens))


# -- TEI -----------------------------------------------------------------------------------------------

async def tei_embed_all(request: Request) -> Response:
    """``POST /embed_all``: TEI's EmbedAllRequest -> ``[[[float, ...], ...], ...]``."""

    async def handle(call: Call) -> Response:
        fmt, coding = call.negotiate()
        doc = _object(await call.json_body())
        cfg = call.st.cfg
        texts, ids = _tei_inputs(doc.get("inputs"), cfg.max_client_batch_size)
        if texts is None:
            raise _with_status(InvalidFieldError("token-id inputs are not served on /embed_all; send the texts",
                                                 field="inputs"), 422, "Validation")
        truncate = _optional(doc, "truncate", bool, "a boolean")
        if _tei_direction(doc) != "right":
            raise _with_status(InvalidFieldError("only 'Right' truncation is served for per-token output",
                                                 field="truncation_direction"), 422, "Validation")
        _tei_no_prompt(doc)
        is_query = _optional(doc, "is_query", bool, "a boolean")
        emb = await _states(call, texts, cfg.auto_truncate if truncate is None else truncate, "inputs",
                            "send truncate: true to embed its first tokens, or run the server with --auto-truncate",
                            tei=True, is_query=is_query)
        if fmt != "json":
            return await call.render(emb, fmt, coding)
        ragged = emb.tensor
        body = b"[" + b",".join(orjson.dumps(m, option=orjson.OPT_SERIALIZE_NUMPY) if len(m) else b"[]"
                                for m in ragged) + b"]"
        return call.prepared(body, {}, coding)

    return await run_call(request, "/embed_all", handle, tei_error)


# -- vLLM ----------------------------------------------------------------------------------------------

async def vllm_pooling(request: Request) -> Response:
    """``POST /pooling`` with ``"task": "token_embed"``: vLLM's PoolingResponse of per-token embeddings."""

    async def handle(call: Call) -> Response:
        fmt, coding = call.negotiate()
        doc = _object(await call.json_body())
        unknown = [k for k in doc if k not in POOLING_FIELDS]
        if unknown:
            raise InvalidFieldError(f"unknown field; /pooling accepts {', '.join(POOLING_FIELDS)}", field=unknown[0])
        call.service.check_model(doc.get("model"))
        task = doc.get("task")
        rid = "pool-" + (doc.get("request_id") if isinstance(doc.get("request_id"), str) else None
                         or request.headers.get("x-request-id") or uuid.uuid4().hex)
        if task == "embed" and getattr(call.service.backend, "embed_sparse", None) is not None:
            return await vllm_sparse_pooling(call, doc, fmt, coding, rid)  # vLLM's SPLADE model answers "embed"
        if doc.get("max_active_dims") is not None:
            raise InvalidFieldError("max_active_dims prunes sparse output (task embed on a SPLADE model)",
                                    field="max_active_dims")
        if task != "token_embed":
            raise InvalidFieldError(f"task {task!r} is not served on /pooling: densewire answers 'token_embed' here, "
                                    "and 'embed' on a SPLADE model (pooled vectors: POST /v1/embeddings)", field="task")
        texts = _pooling_inputs(doc.get("input"), call.st.cfg.max_client_batch_size)
        encoding = _choice(doc, "encoding_format", ("float", "base64", "bytes", "bytes_only"), "float")
        embed_dtype = _choice(doc, "embed_dtype", _POOLING_DTYPES, "float32")
        endianness = _choice(doc, "endianness", ("native", "big", "little"), "native")
        for key, value in (("normalize", False), ("use_activation", False), ("add_special_tokens", False)):
            if doc.get(key) is value:
                raise InvalidFieldError(f"{key}: {str(value).lower()} is not served: per-token states are answered "
                                        "as the model computes them, special tokens included", field=key)
        if doc.get("dimensions") is not None:
            raise InvalidFieldError("per-token output is not cut to dimensions", field="dimensions")
        if doc.get("priority") not in (None, 0):
            raise InvalidFieldError("only priority 0 is served", field="priority")
        limit = doc.get("truncate_prompt_tokens")
        if limit is not None:
            limit = _integer(limit, "truncate_prompt_tokens", -1, call.service.max_tokens)
            if limit not in (-1, call.service.max_tokens):
                raise InvalidFieldError("per-token output is cut at the model's maximum only: send -1",
                                        field="truncate_prompt_tokens")
        is_query = doc.get("is_query")
        if is_query is not None and not isinstance(is_query, bool):
            raise InvalidFieldError(f"must be a boolean, not {_type_name(is_query)}", field="is_query")
        emb = await _states(call, texts, limit is not None or call.st.cfg.auto_truncate, "input",
                            "send truncate_prompt_tokens: -1 to embed its first tokens", tei=False, is_query=is_query)
        ragged: RaggedTensor = emb.tensor
        usage = {"prompt_tokens": emb.usage.prompt_tokens, "total_tokens": emb.usage.total_tokens}
        if encoding in ("bytes", "bytes_only"):
            parts, items, at = [], [], 0
            for i, m in enumerate(ragged):
                b = _vllm_matrix_bytes(m, embed_dtype, endianness)
                parts.append(b)
                items.append({"index": i, "embed_dtype": embed_dtype, "endianness": endianness, "start": at,
                              "end": at + len(b), "shape": list(m.shape)})
                at += len(b)
            meta = {"id": rid, "created": int(time.time()), "model": emb.model, "data": items, "usage": usage}
            headers = {"metadata": json.dumps(meta)} if encoding == "bytes" else {}  # bytes_only: the body alone
            return call.prepared(b"".join(parts), headers, coding, media_type="application/octet-stream")
        if fmt != "json":
            return await call.render(emb, fmt, coding)
        if encoding == "float":
            data = [{"index": i, "object": "pooling", "data": m} for i, m in enumerate(ragged)]
        else:
            data = [{"index": i, "object": "pooling",
                     "data": pybase64.b64encode(_vllm_matrix_bytes(m, embed_dtype, endianness)).decode()}
                    for i, m in enumerate(ragged)]
        body = orjson.dumps({"id": rid, "object": "list", "created": int(time.time()), "model": emb.model,
                             "data": data, "usage": {**usage, "completion_tokens": 0, "prompt_tokens_details": None}},
                            option=orjson.OPT_SERIALIZE_NUMPY)
        return call.prepared(body, {}, coding)

    return await run_call(request, "/pooling", handle, openai_error)
