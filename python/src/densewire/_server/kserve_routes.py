"""The Open Inference Protocol's HTTP/REST routes (KServe v2, SPEC.md 19), one handler per route, and
their part of the OpenAPI document (``kserve_paths``), on the same pipeline as ``/v1/embeddings``
(pipeline.run_call: auth, admission and its 429 + Retry-After, limits, caches, metrics). The protocol
itself (requests to texts, embeddings to output tensors) is kserve.py's, which gRPC shares.

* ``GET /v2``: server metadata; ``GET /v2/health/live``, ``GET /v2/health/ready``;
* ``GET /v2/models/{name}[/versions/{v}]``: model metadata; ``GET .../ready``: model readiness;
* ``POST /v2/models/{name}[/versions/{v}]/infer``: JSON tensors or the binary tensor extension.

Errors are KServe's ``{"error": message}`` with densewire's ``code``, ``param`` and ``offset`` beside it.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response

from densewire import DensewireError, UnsupportedMediaTypeError, encode_kserve

from .kserve import (INPUT, OUTPUT, SERVED_DATATYPES, VERSION, embed_infer, find_model, kserve_error_doc,
                     kserve_status, model_metadata, parse_http_infer, server_metadata)
from .negotiation import VARY, negotiate_encoding
from .pipeline import Call, _state, run_call

__all__ = ["kserve_server_metadata", "kserve_live", "kserve_ready", "kserve_model_metadata", "kserve_model_ready",
           "kserve_infer", "kserve_error", "kserve_paths"]

#: JSON output elements from this many on are written in the CPU pool
_THREAD_JSON_ELEMENTS = 16384
_THREAD_PARSE_BYTES = 256 * 1024


def kserve_error(err: DensewireError, headers: dict[str, str]) -> Response:
    status = kserve_status(err)
    extra = {"WWW-Authenticate": 'Bearer realm="densewire"'} if status == 401 else {}
    return Response(orjson.dumps(kserve_error_doc(err)), status, {**headers, **extra, "Vary": VARY},
                    media_type="application/json")


def _json(doc: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(doc), status, media_type="application/json")


def _count(request: Request, route: str, response: Response) -> Response:
    _state(request).metrics.requests.labels(route, str(response.status_code), "json").inc()
    return response


async def kserve_server_metadata(request: Request) -> Response:
    """``GET /v2``: the server's name, version and extensions."""
    return _count(request, "/v2", _json(server_metadata()))


async def kserve_live(request: Request) -> Response:
    """``GET /v2/health/live``: 200 while the process serves."""
    return _count(request, "/v2/health/live", _json({"live": True}))


async def kserve_ready(request: Request) -> Response:
    """``GET /v2/health/ready``: 200 when a new inference request would be admitted (as ``/ready``)."""
    ready = _state(request).readiness() is None
    return _count(request, "/v2/health/ready", _json({"ready": ready}, 200 if ready else 503))


async def kserve_model_metadata(request: Request) -> Response:
    """``GET /v2/models/{name}[/versions/{v}]``: the model's input and output tensors."""
    st = _state(request)
    try:
        st.check_auth(request)
        e = st.require_embedder()
        name = request.path_params["model_name"]
        find_model(e, name, request.path_params.get("version"))
        response = _json(model_metadata(e, name))
    except DensewireError as err:
        response = kserve_error(err, {})
    return _count(request, "/v2/models/{name}", response)


async def kserve_model_ready(request: Request) -> Response:
    """``GET /v2/models/{name}[/versions/{v}]/ready``: 200 once the model is loaded (public, for probes)."""
    st = _state(request)
    try:
        e = st.require_embedder()
        name = request.path_params["model_name"]
        find_model(e, name, request.path_params.get("version"))
        response = _json({"name": name, "ready": True})
    except DensewireError as err:
        response = kserve_error(err, {})
    return _count(request, "/v2/models/{name}/ready", response)


def _check_content_type(value: str | None) -> None:
    media = (value or "application/json").split(";", 1)[0].strip().lower()
    if media not in ("application/json", "application/octet-stream") and not media.endswith("+json"):
        raise UnsupportedMediaTypeError(f"{value[:100]!r} is not supported; send application/json, or "  # type: ignore[index]
                                        "application/octet-stream with Inference-Header-Content-Length",
                                        field="Content-Type")


async def kserve_infer(request: Request) -> Response:
    """``POST /v2/models/{name}[/versions/{v}]/infer``: texts as the BYTES input ``text``, the embeddings as
    the output ``embedding`` (JSON or binary data, in the requested datatype)."""
    name = request.path_params["model_name"]

    async def handle(call: Call) -> Response:
        coding = negotiate_encoding(request.headers.get("accept-encoding"))
        find_model(call.service, name, request.path_params.get("version"))  # the model first
        _check_content_type(request.headers.get("content-type"))
        body = await call.body(any_content_type=True)
        parse = partial(parse_http_infer, body, request.headers, max_inputs=call.st.cfg.max_client_batch_size,
                        native_dimensions=call.service.dimensions)
        req = parse() if len(body) < _THREAD_PARSE_BYTES else await call.service.in_cpu_pool(parse)
        output, tokens = await embed_infer(call, req)
        call.fmt = "kserve-binary" if output.binary else "kserve-json"

        def render() -> tuple[bytes, dict[str, str]]:
            return encode_kserve([output], model_name=name, model_version=VERSION, id=req.id,
                                 parameters={"prompt_tokens": tokens})
        if not output.binary and output.tensor.array.size >= _THREAD_JSON_ELEMENTS:  # type: ignore[union-attr]
            out, headers = await call.service.in_cpu_pool(render)
        else:
            out, headers = render()
        return call.prepared(out, headers, coding, headers["Content-Type"])

    return await run_call(request, "/v2/models/{name}/infer", handle, kserve_error)


# -- OpenAPI -------------------------------------------------------------------------------------------

def _error(description: str) -> dict[str, Any]:
    return {"description": description,
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/KServeError"}}}}


KSERVE_SCHEMAS: dict[str, Any] = {
    "KServeError": {"type": "object", "required": ["error"], "properties": {
        "error": {"type": "string"}, "code": {"type": "string"}, "param": {"type": "string", "nullable": True},
        "offset": {"type": "integer", "nullable": True}}},
}


def kserve_paths(*, model_id: str | None, dimensions: int | None, max_inputs: int, security: list[Any],
                 auth_errors: dict[str, Any]) -> dict[str, Any]:
    """The OpenAPI paths of these routes (SPEC.md 19.5)."""
    name = {"name": "model_name", "in": "path", "required": True, "schema": {"type": "string", "minLength": 1},
            **({"example": model_id.rsplit("/", 1)[-1]} if model_id else {})}
    version = {"name": "version", "in": "path", "required": True, "schema": {"type": "string", "enum": [VERSION]}}
    auth401 = {"401": _error("missing or wrong API key")} if auth_errors else {}
    tensor_meta = {"type": "object", "required": ["name", "datatype", "shape"], "properties": {
        "name": {"type": "string"}, "datatype": {"type": "string"},
        "shape": {"type": "array", "items": {"type": "integer"}}}}
    metadata = {"type": "object", "required": ["name", "versions", "platform", "inputs", "outputs"], "properties": {
        "name": {"type": "string"}, "versions": {"type": "array", "items": {"type": "string"}},
        "platform": {"type": "string"}, "inputs": {"type": "array", "items": tensor_meta},
        "outputs": {"type": "array", "items": tensor_meta}}}
    text = {"type": "string", "minLength": 1}
    bool_or_null = {"type": "boolean", "nullable": True}
    datatype = {"type": "string", "enum": [*SERVED_DATATYPES, None], "nullable": True}
    request = {
        "type": "object", "required": ["inputs"],
        "properties": {
            "id": {"type": "string", "nullable": True, "description": "echoed in the response"},
            "inputs": {"type": "array", "minItems": 1, "maxItems": 1, "items": {
                "type": "object", "required": ["name", "datatype", "shape", "data"], "properties": {
                    "name": {"type": "string", "enum": [INPUT]},
                    "datatype": {"type": "string", "enum": ["BYTES"]},
                    "shape": {"type": "array", "minItems": 1, "maxItems": 2,
                              "items": {"type": "integer", "minimum": 1, "maximum": max_inputs},
                              "description": "[N] or [N, 1]: N the number of texts in data"},
                    "data": {"type": "array", "minItems": 1, "maxItems": max_inputs, "items": text}}}},
            "outputs": {"type": "array", "nullable": True, "items": {
                "type": "object", "required": ["name"], "properties": {
                    "name": {"type": "string", "enum": [OUTPUT]},
                    "parameters": {"type": "object", "nullable": True, "properties": {
                        "binary_data": bool_or_null, "datatype": datatype}}}}},
            "parameters": {"type": "object", "nullable": True, "properties": {
                "binary_data_output": bool_or_null, "datatype": datatype, "truncate": bool_or_null,
                "dimensions": {"type": "integer", "minimum": 1, "maximum": dimensions or 65536, "nullable": True}}},
        },
        "description": "the shape's one entry is the number of texts in data; binary tensor data "
                       "(application/octet-stream with Inference-Header-Content-Length) is accepted too",
    }
    response = {"type": "object", "required": ["model_name", "outputs"], "properties": {
        "model_name": {"type": "string"}, "model_version": {"type": "string"}, "id": {"type": "string"},
        "parameters": {"type": "object"},
        "outputs": {"type": "array", "items": {"type": "object", "required": ["name", "datatype", "shape"],
                                               "properties": {**tensor_meta["properties"],
                                                              "parameters": {"type": "object"},
                                                              "data": {"type": "array", "items": {"type": "number"}}}}}}}
    retry_after = {"Retry-After": {"description": "seconds to wait before retrying", "schema": {"type": "integer"}}}
    infer = {"post": {
        "security": security,
        "requestBody": {"required": True, "content": {"application/json": {"schema": request}}},
        "responses": {
            "200": {"description": "the output 'embedding' (JSON data, or binary data after a JSON header of "
                                   "Inference-Header-Content-Length bytes)",
                    "content": {"application/json": {"schema": response},
                                "application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}},
            "400": _error("a tensor, field or body that is not valid (the message names it, and the offset)"),
            **auth401,
            "404": _error("unknown model, version or output"),
            "413": _error("body (or decompressed body) too large"),
            "415": _error("unsupported Content-Type or Content-Encoding"),
            "422": _error("non_finite: a value with no JSON number form (ask for binary data)"),
            "429": {**_error("admission is full (--max-concurrent-requests)"), "headers": retry_after},
            "503": {**_error("the model is not ready, the server is draining, or the request waited too long"),
                    "headers": retry_after},
        }}}
    meta = {"get": {"security": security, "responses": {
        "200": {"description": "the model's tensors", "content": {"application/json": {"schema": metadata}}},
        **auth401, "404": _error("unknown model or version"), "503": _error("the model is not loaded yet")}}}
    model_ready = {"get": {"security": [], "responses": {
        "200": {"description": "the model is loaded", "content": {"application/json": {"schema": {"type": "object"}}}},
        "404": _error("unknown model or version"), "503": _error("the model is not loaded yet")}}}
    flag = {"type": "object"}
    paths = {
        "/v2": {"get": {"operationId": "kserveServerMetadata", "security": [], "responses": {"200": {
            "description": "name, version, extensions", "content": {"application/json": {"schema": flag}}}}}},
        "/v2/health/live": {"get": {"operationId": "kserveLive", "security": [], "responses": {
            "200": {"description": "live", "content": {"application/json": {"schema": flag}}}}}},
        "/v2/health/ready": {"get": {"operationId": "kserveReady", "security": [], "responses": {
            "200": {"description": "ready", "content": {"application/json": {"schema": flag}}},
            "503": {"description": "loading, draining or admission full",
                    "content": {"application/json": {"schema": flag}}}}}},
    }
    for suffix, params in (("", [name]), ("/versions/{version}", [name, version])):
        base = "/v2/models/{model_name}" + suffix
        op = "Version" if suffix else ""
        paths[base] = {"get": {**meta["get"], "operationId": f"kserveModelMetadata{op}", "parameters": params}}
        paths[base + "/ready"] = {"get": {**model_ready["get"], "operationId": f"kserveModelReady{op}",
                                          "parameters": params}}
        paths[base + "/infer"] = {"post": {**infer["post"], "operationId": f"kserveInfer{op}", "parameters": params}}
    return paths
