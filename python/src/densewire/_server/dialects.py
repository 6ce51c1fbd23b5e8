"""The routes of other embedding servers (SPEC.md 6.4), each with its own request, response and error shapes,
on densewire's pipeline (auth, admission, caches, the model, metrics: app.run_call):

* TEI (text-embeddings-inference): ``POST /embed`` (and ``POST /``, as TEI serves an embedding model at its
  root, where ``huggingface_hub.InferenceClient(model=URL)`` posts), ``POST /tokenize``, ``GET /info``;
* Cohere: ``POST /v2/embed`` (texts, input_type, embedding_types, output_dimension, max_tokens, truncate);
* Ollama: ``POST /api/embed`` and its older form ``POST /api/embeddings``.

Where a route answers vectors, densewire's binary formats stay available by ``Accept`` (raw, MessagePack,
Protobuf, Arrow of the float32 vectors); JSON is the route's own shape. Errors are each server's shape:
TEI ``{"error", "error_type"}``, Cohere ``{"message"}``, Ollama ``{"error"}``, with the field in the text.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import numpy as np
import orjson
from starlette.requests import Request
from starlette.responses import Response

import pybase64

from densewire import (DensewireError, Embeddings, InvalidFieldError, NotAcceptableError, NotFoundError, Tensor,
                       Usage, __version__, convert)

from .pipeline import Call, _state, run_call
from .negotiation import VARY
from .request import EmbeddingsRequest, _integer, _is_int, _token_list, _type_name

__all__ = ["tei_embed", "tei_tokenize", "tei_info", "cohere_embed", "ollama_embed", "ollama_embeddings",
           "COHERE_TYPES", "COHERE_INPUT_TYPES"]


def _with_status(err: DensewireError, status: int, kind: str | None = None) -> DensewireError:
    """Give an error the status (and TEI error_type) of the server whose dialect it answers."""
    err.dialect_status = status  # type: ignore[attr-defined]
    if kind is not None:
        err.dialect_type = kind  # type: ignore[attr-defined]
    return err


def _status(err: DensewireError) -> int:
    return getattr(err, "dialect_status", err.http_status)


def _text(err: DensewireError) -> str:
    return f"{err.field}: {err.message}" if err.field else err.message


def _error_json(doc: dict[str, Any], status: int, headers: dict[str, str]) -> Response:
    response = Response(orjson.dumps(doc), status, media_type="application/json")
    response.headers.update({**headers, "Vary": VARY})
    return response


def _vectors(call: Call, req: EmbeddingsRequest, vectors: np.ndarray, tokens: int) -> Embeddings:
    return Embeddings(Tensor.from_array(np.ascontiguousarray(vectors, dtype=np.float32)),
                      model=call.service.model_id, usage=Usage(tokens, tokens))


def _numbers(rows: np.ndarray) -> bytes:
    return orjson.dumps(rows, option=orjson.OPT_SERIALIZE_NUMPY)


def _request(texts: list[str] | None, ids: list[list[int]] | None, *, dims: int | None = None,
             truncate: bool = True, limit: int | None = None, side: str = "right",
             token_ids_as: str | None = None) -> EmbeddingsRequest:
    return EmbeddingsRequest(texts=texts, token_ids=ids, model=None, encoding_format="float", dimensions=dims,
                             dtype="float32", byteorder="little", truncate=truncate, token_limit=limit,
                             truncation_side=side, token_ids_as=token_ids_as)


def _object(doc: Any) -> dict[str, Any]:
    if not isinstance(doc, dict):
        raise InvalidFieldError(f"request body must be a JSON object, not {_type_name(doc)}")
    return doc


def _optional(doc: dict[str, Any], key: str, kind: type, what: str) -> Any:
    v = doc.get(key)
    if v is None:
        return None
    if not isinstance(v, kind) or (kind is int and isinstance(v, bool)):
        raise InvalidFieldError(f"must be {what}, not {_type_name(v)}", field=key)
    return v


def _normalize(vectors: np.ndarray) -> np.ndarray:
    norms = np.sqrt(np.einsum("ij,ij->i", vectors, vectors, dtype=np.float64)).astype(np.float32)
    norms[norms == 0] = 1.0
    return vectors / norms[:, None]


def _length_error(err: DensewireError, field: str, hint: str, *, tei: bool = False) -> DensewireError:
    """An input longer than the model's maximum, not to be cut: placed on the route's own field, with the
    route's own way to ask for a cut; TEI's is its 413 Validation error ("must have less than N tokens")."""
    if isinstance(err, InvalidFieldError) and (err.field or "").startswith("input["):
        where = field + err.field[len("input"):]  # type: ignore[index]
        numbers = getattr(err, "too_long", None)
        if numbers is None:
            located = InvalidFieldError(err.message, field=where)
        else:
            _, count, limit, clipped = numbers
            many = f"more than {count}" if clipped else str(count)
            text = (f"`{field}` must have less than {limit} tokens. Given: {many}; {hint}" if tei else
                    f"this model's maximum context length is {limit} tokens, however you requested {many} tokens "
                    f"in this input; {hint}")
            located = InvalidFieldError(text, field=where)
        return _with_status(located, 413, "Validation") if tei else located
    return err


# -- TEI -----------------------------------------------------------------------------------------------

_TEI_TYPES = {429: "Overloaded", 503: "Unhealthy", 500: "Backend"}


def tei_error(err: DensewireError, headers: dict[str, str]) -> Response:
    """TEI's ``{"error": ..., "error_type": ...}`` (router/src/lib.rs ErrorResponse)."""
    status = _status(err)
    kind = getattr(err, "dialect_type", None) or _TEI_TYPES.get(status, "Validation")
    if status == 401:
        headers = {**headers, "WWW-Authenticate": 'Bearer realm="densewire"'}
    return _error_json({"error": _text(err), "error_type": kind}, status, headers)


def _tei_inputs(value: Any, max_inputs: int) -> tuple[list[str] | None, list[list[int]] | None]:
    """TEI's ``inputs``: a string, an array of strings, an array of token ids or an array of arrays of ids."""
    if value is None:
        raise InvalidFieldError("is required", field="inputs")
    if isinstance(value, str):
        seqs: list[Any] = [value]
    elif isinstance(value, list):
        if value and _is_int(value[0]):
            return None, [_token_list(value, "inputs")]
        seqs = value
    else:
        raise InvalidFieldError(f"must be a string, an array of strings or an array of token ids, not "
                                f"{_type_name(value)}", field="inputs")
    if not seqs:
        raise _with_status(InvalidFieldError("`inputs` cannot be empty", field="inputs"), 400, "Empty")
    if len(seqs) > max_inputs:
        raise _with_status(InvalidFieldError(
            f"batch size {len(seqs)} > maximum allowed batch size {max_inputs}", field="inputs"), 422, "Validation")
    if all(isinstance(s, str) for s in seqs):
        for i, s in enumerate(seqs):
            if not s:
                raise _with_status(InvalidFieldError("`inputs` cannot be empty", field=f"inputs[{i}]"), 400, "Empty")
        return seqs, None
    if all(isinstance(s, list) for s in seqs):
        return None, [_token_list(s, f"inputs[{i}]") for i, s in enumerate(seqs)]
    first = seqs[0]
    if not isinstance(first, (str, list)):
        raise InvalidFieldError(f"must be a string or an array of token ids, not {_type_name(first)}",
                                field="inputs[0]")
    bad = next(i for i, s in enumerate(seqs) if not isinstance(s, type(first)))
    raise InvalidFieldError(f"must be {'a string' if isinstance(first, str) else 'an array of token ids'} like "
                            f"the first item, not {_type_name(seqs[bad])}", field=f"inputs[{bad}]")


def _tei_direction(doc: dict[str, Any]) -> str:
    v = doc.get("truncation_direction")
    if v is None:
        return "right"
    if isinstance(v, str) and v.lower() in ("left", "right"):
        return v.lower()
    raise InvalidFieldError(f"must be 'Left' or 'Right', not {v!r}", field="truncation_direction")


def _tei_no_prompt(doc: dict[str, Any]) -> None:
    """TEI's ``prompt_name``: the served models define no prompts, so any name is TEI's 422."""
    prompt = _optional(doc, "prompt_name", str, "a string")
    if prompt is not None:
        raise _with_status(InvalidFieldError(
            f"prompt_name {prompt!r} is not a prompt of the model (it defines none)", field="prompt_name"),
            422, "Validation")


async def tei_embed(request: Request) -> Response:
    """``POST /embed`` (and ``POST /``): TEI's EmbedRequest -> ``[[float, ...], ...]``."""

    async def handle(call: Call) -> Response:
        fmt, coding = call.negotiate()
        doc = _object(await call.json_body())
        cfg, service = call.st.cfg, call.service
        texts, ids = _tei_inputs(doc.get("inputs"), cfg.max_client_batch_size)
        truncate = _optional(doc, "truncate", bool, "a boolean")
        normalize = _optional(doc, "normalize", bool, "a boolean")
        side = _tei_direction(doc)
        _tei_no_prompt(doc)
        dims = doc.get("dimensions")
        if dims is not None:
            dims = _integer(dims, "dimensions", 1, service.dimensions)
        if truncate is None:
            truncate = cfg.auto_truncate  # TEI: truncate.unwrap_or(auto_truncate)
        req = _request(texts, ids, dims=dims, truncate=truncate, side=side, token_ids_as="model")
        try:
            vectors, tokens = await call.embed(req)
        except InvalidFieldError as err:
            raise _length_error(err, "inputs", "send truncate: true to embed its first tokens, or run the "
                                "server with --auto-truncate", tei=True) from None
        if normalize is not False:
            vectors = _normalize(vectors)
        if fmt != "json":
            return await call.render(_vectors(call, req, vectors, tokens), fmt, coding)
        return call.prepared(_numbers(vectors), {}, coding)

    return await run_call(request, "/embed", handle, tei_error)


async def tei_tokenize(request: Request) -> Response:
    """``POST /tokenize``: ``[[{"id", "text", "special", "start", "stop"}, ...], ...]``, byte offsets as TEI's."""

    async def handle(call: Call) -> Response:
        doc = _object(await call.json_body())
        value = doc.get("inputs")
        if isinstance(value, str):
            texts = [value]
        elif isinstance(value, list) and value and all(isinstance(t, str) for t in value):
            texts = value
        else:
            raise InvalidFieldError("must be a string or a non-empty array of strings", field="inputs")
        if len(texts) > call.st.cfg.max_client_batch_size:
            raise _with_status(InvalidFieldError(
                f"batch size {len(texts)} > maximum allowed batch size {call.st.cfg.max_client_batch_size}",
                field="inputs"), 422, "Validation")
        special = _optional(doc, "add_special_tokens", bool, "a boolean")
        spans = getattr(call.service.backend, "token_spans", None)
        if spans is None:
            raise _with_status(InvalidFieldError(f"the model {call.service.model_id} has no tokenizer to show",
                                                 field="inputs"), 422, "Tokenizer")
        rows = await call.service.in_cpu_pool(spans, texts, special is not False)
        out = []
        for text, tokens in zip(texts, rows):
            items = []
            for tok_id, token, is_special, start, stop in tokens:
                if is_special:
                    items.append({"id": tok_id, "text": token, "special": True, "start": None, "stop": None})
                else:
                    a, b = len(text[:start].encode()), len(text[:stop].encode())
                    items.append({"id": tok_id, "text": text[start:stop], "special": False, "start": a, "stop": b})
            out.append(items)
        return call.prepared(orjson.dumps(out), {}, None)

    return await run_call(request, "/tokenize", handle, tei_error)


async def tei_info(request: Request) -> Response:
    """``GET /info``: TEI's Info (model, limits, version)."""
    st = _state(request)
    try:
        st.check_auth(request)
        e = st.require_embedder()
    except DensewireError as err:
        return tei_error(err, {})
    model = getattr(e.backend, "model", None)
    pooling = getattr(model, "pooling", None) or "mean"
    if isinstance(pooling, (list, tuple)):  # sentence-transformers' modes, e.g. ["mean"]; TEI names one
        pooling = "+".join(pooling)
    doc = {"model_id": e.model_id, "model_sha": None, "model_dtype": "float32",
           "model_type": {"embedding": {"pooling": pooling}},
           "max_concurrent_requests": st.cfg.max_concurrent_requests, "max_input_length": e.max_tokens,
           "max_batch_tokens": st.cfg.max_batch_tokens, "max_batch_requests": None,
           "max_client_batch_size": st.cfg.max_client_batch_size, "auto_truncate": st.cfg.auto_truncate,
           "tokenization_workers": 1, "version": __version__, "sha": None, "docker_label": None}
    if e.multi_vector is not None:  # a ColBERT model: a vector per token on /embed_all (multivector.py)
        doc["multi_vector"] = e.multi_vector.cfg.info()
    return Response(orjson.dumps(doc), 200, media_type="application/json")


# -- Cohere --------------------------------------------------------------------------------------------

#: Cohere's embedding_types, and what each is in densewire (SPEC.md 6.4): ubinary is densewire's binary
#: (packed sign bits, MSB first) as uint8; binary the same bytes as int8 (byte - 128); base64 the float32
#: row, little-endian, in Base64; int8/uint8 densewire's calibrated quantization.
COHERE_TYPES = ("float", "int8", "uint8", "binary", "ubinary", "base64")
COHERE_INPUT_TYPES = ("search_document", "search_query", "classification", "clustering", "image")
COHERE_FIELDS = ("texts", "images", "inputs", "model", "input_type", "embedding_types", "output_dimension",
                 "max_tokens", "truncate", "priority")


def cohere_error(err: DensewireError, headers: dict[str, str]) -> Response:
    """Cohere's ``{"message": ...}``; bad requests are 400 as Cohere answers them."""
    status = _status(err)
    if status == 422 and not hasattr(err, "dialect_status"):
        status = 400
    return _error_json({"message": _text(err)}, status, headers)


async def cohere_embed(request: Request) -> Response:
    """``POST /v2/embed``: Cohere's EmbedRequest -> EmbedByTypeResponse."""

    async def handle(call: Call) -> Response:
        fmt, coding = call.negotiate()
        doc = _object(await call.json_body())
        service = call.service
        model = _optional(doc, "model", str, "a string")
        service.check_model(model)  # the model first, as every route judges it
        for key in doc:
            if key not in COHERE_FIELDS:
                raise InvalidFieldError(f"unknown field; the accepted fields are {', '.join(COHERE_FIELDS)}",
                                        field=key)
        for key in ("images", "inputs"):
            if doc.get(key) is not None:
                raise InvalidFieldError("this server embeds texts only: send texts", field=key)
        texts = doc.get("texts")
        if not isinstance(texts, list) or not texts:
            raise InvalidFieldError("is required: a non-empty array of strings", field="texts")
        if len(texts) > call.st.cfg.max_client_batch_size:
            raise InvalidFieldError(f"{len(texts)} texts; at most {call.st.cfg.max_client_batch_size} are allowed",
                                    field="texts")
        for i, t in enumerate(texts):
            if not isinstance(t, str) or not t:
                raise InvalidFieldError(f"must be a non-empty string, not {_type_name(t)}", field=f"texts[{i}]")
        input_type = _optional(doc, "input_type", str, "a string")
        if input_type is not None and input_type not in COHERE_INPUT_TYPES[:-1]:
            raise InvalidFieldError(f"must be one of {', '.join(COHERE_INPUT_TYPES[:-1])} for texts, not "
                                    f"{input_type!r}", field="input_type")
        types = doc.get("embedding_types")
        if types is None:
            types = ["float"]
        if not isinstance(types, list) or not types:
            raise InvalidFieldError(f"must be a non-empty array of {', '.join(COHERE_TYPES)}", field="embedding_types")
        for i, t in enumerate(types):
            if t not in COHERE_TYPES:
                raise InvalidFieldError(f"must be one of {', '.join(COHERE_TYPES)}, not {t!r}",
                                        field=f"embedding_types[{i}]")
        types = list(dict.fromkeys(types))
        dims = doc.get("output_dimension")
        if dims is not None:
            dims = _integer(dims, "output_dimension", 1, service.dimensions)
        limit = doc.get("max_tokens")
        if limit is not None:
            limit = _integer(limit, "max_tokens", 1, 0xFFFFFFFF)
        truncate = doc.get("truncate")
        if truncate is None:
            truncate = "END"
        if not isinstance(truncate, str) or truncate not in ("NONE", "START", "END"):
            raise InvalidFieldError(f"must be NONE, START or END, not {truncate!r}", field="truncate")
        priority = doc.get("priority")
        if priority is not None:
            _integer(priority, "priority", -(2**63), 2**63 - 1)
        if fmt != "json" and (len(types) != 1 or types[0] not in ("float", "ubinary", "int8", "uint8")):
            raise NotAcceptableError(
                f"{fmt} carries one dtype: ask for one of embedding_types float, ubinary, int8 or uint8 with it, "
                "or accept application/json", field="Accept")
        if truncate == "NONE" and limit is not None:
            counts = await service.count_tokens(texts)
            for i, c in enumerate(counts):
                if c > limit:
                    raise InvalidFieldError(f"{c} tokens, more than max_tokens={limit} with truncate NONE",
                                            field=f"texts[{i}]")
        req = _request(texts, None, dims=dims, truncate=truncate != "NONE",
                       limit=limit if truncate != "NONE" else None,
                       side="left" if truncate == "START" else "right")
        try:
            vectors, tokens = await call.embed(req)
        except InvalidFieldError as err:
            raise _length_error(err, "texts", "send truncate END (Cohere's default) or START to cut it") from None
        if fmt != "json":
            kind = types[0]
            qid = None
            if kind == "float":
                tensor = Tensor.from_array(np.ascontiguousarray(vectors, dtype=np.float32))
            elif kind == "ubinary":
                tensor = convert(Tensor.from_array(np.ascontiguousarray(vectors, dtype=np.float32)), "binary")
            else:
                tensor, qid = await call.quantized(vectors, kind, dims)
            emb = Embeddings(tensor, model=service.model_id, usage=Usage(tokens, tokens), quantization=qid)
            return await call.render(emb, fmt, coding)
        embeddings: dict[str, Any] = {}
        headers: dict[str, str] = {}
        packed = None
        for i, kind in enumerate(types):
            if kind == "float":
                embeddings["float"] = vectors
            elif kind == "base64":
                le = np.ascontiguousarray(vectors, dtype="<f4")
                embeddings["base64"] = [pybase64.b64encode(row.tobytes()).decode() for row in le]
            elif kind in ("binary", "ubinary"):
                if packed is None:
                    packed = convert(Tensor.from_array(np.ascontiguousarray(vectors, dtype=np.float32)),
                                     "binary").array
                embeddings[kind] = packed if kind == "ubinary" else (packed.astype(np.int16) - 128).astype(np.int8)
            else:  # int8 / uint8: densewire's calibrated codes; the ranges' id in a header (SPEC.md 17)
                tensor, qid = await call.quantized(vectors, kind, dims)
                embeddings[kind] = tensor.array
                if qid is not None:
                    headers["Densewire-Quantization"] = qid
        body = {"id": str(uuid.uuid4()), "embeddings": embeddings, "texts": texts,
                "meta": {"api_version": {"version": "2"}, "billed_units": {"input_tokens": tokens}},
                "response_type": "embeddings_by_type"}
        return call.prepared(orjson.dumps(body, option=orjson.OPT_SERIALIZE_NUMPY), headers, coding)

    return await run_call(request, "/v2/embed", handle, cohere_error)


# -- Ollama --------------------------------------------------------------------------------------------

def ollama_error(err: DensewireError, headers: dict[str, str]) -> Response:
    """Ollama's ``{"error": ...}``; bad requests are 400 as Ollama answers them."""
    status = _status(err)
    if status == 422 and not hasattr(err, "dialect_status"):
        status = 400
    return _error_json({"error": _text(err)}, status, headers)


def _ollama_model(call: Call, doc: dict[str, Any]) -> str:
    model = doc.get("model")
    if model is None or model == "":
        raise InvalidFieldError("model is required", field="model")
    if not isinstance(model, str):
        raise InvalidFieldError(f"must be a string, not {_type_name(model)}", field="model")
    e = call.service
    if not (model.removesuffix(":latest") in e.aliases or model in e.aliases or e.accept_any_model):
        raise NotFoundError(f"model {model!r} not found; this server serves {e.names_text()}", field="model")
    return model


def _ollama_common(doc: dict[str, Any]) -> None:
    _optional(doc, "options", dict, "an object")
    ka = doc.get("keep_alive")
    if ka is not None and (isinstance(ka, bool) or not isinstance(ka, (str, int, float))):
        raise InvalidFieldError(f"must be a duration (a string such as '5m' or seconds), not {_type_name(ka)}",
                                field="keep_alive")


async def ollama_embed(request: Request) -> Response:
    """``POST /api/embed``: ``{"model", "input", "truncate", "dimensions"}`` -> ``{"model", "embeddings",
    "total_duration", "load_duration", "prompt_eval_count"}`` (vectors L2-normalised, as Ollama's)."""

    async def handle(call: Call) -> Response:
        t0 = time.perf_counter_ns()
        fmt, coding = call.negotiate()
        doc = _object(await call.json_body(any_content_type=True))  # curl -d, as in Ollama's docs
        model = _ollama_model(call, doc)
        _ollama_common(doc)
        value = doc.get("input")
        if value is None or isinstance(value, str):
            texts = [value] if value else []
        elif isinstance(value, list):
            for i, t in enumerate(value):
                if not isinstance(t, str):
                    raise InvalidFieldError(f"must be a string, not {_type_name(t)}", field=f"input[{i}]")
            texts = value
        else:
            raise InvalidFieldError(f"invalid input type: a string or an array of strings, not {_type_name(value)}",
                                    field="input")
        if len(texts) > call.st.cfg.max_client_batch_size:
            raise InvalidFieldError(f"{len(texts)} inputs; at most {call.st.cfg.max_client_batch_size} are allowed",
                                    field="input")
        truncate = _optional(doc, "truncate", bool, "a boolean")
        dims = doc.get("dimensions")
        if dims is not None:
            dims = _integer(dims, "dimensions", 1, call.service.dimensions)
        if texts:
            req = _request(texts, None, dims=dims, truncate=truncate is not False)
            try:
                vectors, tokens = await call.embed(req)
            except InvalidFieldError as err:
                raise _length_error(err, "input", "the input length exceeds the context length: send truncate: "
                                    "true (Ollama's default) to cut it") from None
            vectors = _normalize(vectors)
        else:
            req = _request([], None, dims=dims)
            vectors, tokens = np.zeros((0, dims or call.service.dimensions), dtype=np.float32), 0
        if fmt != "json":
            return await call.render(_vectors(call, req, vectors, tokens), fmt, coding)
        head = orjson.dumps({"model": model})[:-1]
        tail = orjson.dumps({"total_duration": time.perf_counter_ns() - t0, "load_duration": 0,
                             "prompt_eval_count": tokens})[1:]
        return call.prepared(head + b',"embeddings":' + _numbers(vectors) + b"," + tail, {}, coding)

    return await run_call(request, "/api/embed", handle, ollama_error)


async def ollama_embeddings(request: Request) -> Response:
    """``POST /api/embeddings`` (Ollama's older form): ``{"model", "prompt"}`` -> ``{"embedding": [...]}``."""

    async def handle(call: Call) -> Response:
        fmt, coding = call.negotiate()
        doc = _object(await call.json_body(any_content_type=True))  # curl -d, as in Ollama's docs
        _ollama_model(call, doc)
        _ollama_common(doc)
        prompt = doc.get("prompt")
        if prompt is not None and not isinstance(prompt, str):
            raise InvalidFieldError(f"must be a string, not {_type_name(prompt)}", field="prompt")
        if not prompt:
            if fmt != "json":
                raise InvalidFieldError("is empty: there is no vector to send", field="prompt")
            return call.prepared(b'{"embedding":[]}', {}, coding)
        req = _request([prompt], None)
        vectors, tokens = await call.embed(req)
        if fmt != "json":
            return await call.render(_vectors(call, req, vectors, tokens), fmt, coding)
        return call.prepared(b'{"embedding":' + _numbers(vectors[0]) + b"}", {}, coding)

    return await run_call(request, "/api/embeddings", handle, ollama_error)
