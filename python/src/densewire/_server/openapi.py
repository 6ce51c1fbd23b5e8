"""The OpenAPI 3.0 document of the server, written by hand to match the handlers exactly: the core
routes here, each other route family's part beside its handlers (dialects_openapi.py, kserve_routes.py,
tables/openapi.py), shared pieces in openapi_parts.py.

``tests/test_server_openapi.py`` runs schemathesis against it.
"""

from __future__ import annotations

from typing import Any

from densewire import FORMATS, MEDIA_TYPES
from densewire._formats import MEDIA_TYPE_ALIASES

from .dialects_openapi import DIALECT_SCHEMAS, dialect_paths
from .kserve_routes import KSERVE_SCHEMAS, kserve_paths
from .openapi_parts import (BINARY, MULTI_VECTOR_INFO, MULTIVECTOR_FIELDS, PRECISION_FIELDS, error_response,
                            error_response_with, nullable)
from .request import EMBED_DTYPES, ENCODING_FORMATS, ENDIANNESS, SERVED_DTYPES
from .tables.openapi import table_paths

__all__ = ["build_openapi"]


def build_openapi(*, model_id: str | None, dimensions: int | None, max_inputs: int, api_key: bool,
                  vocab_size: int | None = None, tables: list[str] | None = None,
                  public_tables: bool = False, can_cut: bool = True, tokenizer: bool = True,
                  max_tokens: int | None = None, quantize: bool = False,
                  token_ids_mode: str = "model", sparse: bool = False,
                  per_token: str | None = None) -> dict[str, Any]:
    max_dims = dimensions or 65536
    text = {"type": "string", "minLength": 1}
    token_ids = {"type": "array", "minItems": 1,
                 "items": {"type": "integer", "minimum": 0, "maximum": (vocab_size or (1 << 32)) - 1}}
    # /v1/embeddings reads token ids as --token-ids says: cl100k_base's ids (0-100255), the model's own,
    # or none at all
    openai_ids = ({"type": "array", "minItems": 1, "items": {"type": "integer", "minimum": 0, "maximum": 100255}}
                  if token_ids_mode == "cl100k_base" else token_ids)
    openai_inputs = [text, {"type": "array", "minItems": 1, "maxItems": max_inputs, "items": text}]
    if token_ids_mode != "reject":
        openai_inputs += [openai_ids, {"type": "array", "minItems": 1, "maxItems": max_inputs, "items": openai_ids}]
    optional = {
        "model": {"type": "string", "description": "model id from GET /v1/models; default: the served model"
                  + (f" ({model_id})" if model_id else "")},
        "encoding_format": {"type": "string", "enum": list(ENCODING_FORMATS), "default": "float",
                            "description": "float or base64 (OpenAI's); bytes or bytes_only: vLLM's binary response "
                                           "(application/octet-stream, with or without the metadata header)"},
        "dimensions": {"type": "integer", "minimum": 1, "maximum": max_dims,
                       "description": "cut each vector to this many dimensions, then L2-normalise"},
        "user": {"type": "string", "description": "accepted and ignored"},
        "dtype": {"type": "string", "enum": list(SERVED_DTYPES), "default": "float32",
                  "description": "int8 and uint8 are quantized with the model's published ranges (SPEC.md 17), "
                                 "named by the response's quantization id"},
        "byteorder": {"type": "string", "enum": ["little", "big"], "default": "little",
                      "description": "byte order of Base64 strings in JSON; numbers and binary bodies "
                                     "are little-endian whatever is asked"},
        "truncate": {"type": "boolean", "default": False,
                     "description": "cut inputs longer than the model's maximum tokens (the answer lists them in "
                                    "truncated and Densewire-Truncated); absent: the server's --auto-truncate, off "
                                    "by default: such an input is a 400 naming it, its token count and the limit"},
        # vLLM's fields (SPEC.md 6.3)
        "embed_dtype": {"type": "string", "enum": list(EMBED_DTYPES),
                        "description": "vLLM: the row type of base64 and bytes (float numbers stay float32); "
                                       "must agree with dtype when both are sent"},
        "endianness": {"type": "string", "enum": list(ENDIANNESS),
                       "description": "vLLM: byte order of base64 and bytes rows (native: the server's); must "
                                      "agree with byteorder when both are sent"},
        "truncate_prompt_tokens": {"type": "integer", "minimum": -1, "not": {"enum": [0]},
                                   **({} if can_cut else {"enum": [-1]}),
                                   "description": "vLLM: cut each input to this many tokens (-1: the model's "
                                                  "maximum; more than the maximum is a 400)"},
        "truncation_side": {"type": "string", "enum": ["left", "right"] if can_cut else ["right"],
                            "description": "vLLM: left keeps the last tokens of a cut input, right the first"},
        "request_id": {"type": "string", "description": "vLLM: the response id is embd-<request_id>"},
        "priority": {"type": "integer", "enum": [0], "description": "vLLM: only 0 (no priority scheduling)"},
        "add_special_tokens": {"type": "boolean", "enum": [True], "description": "vLLM: only true"},
        "use_activation": {"type": "boolean", "enum": [True], "description": "vLLM: only true"},
        "normalize": {"type": "boolean", "enum": [True], "description": "vLLM (older name): only true"},
        "padding": {"type": "string", "enum": ["do_not_pad"], "description": "vLLM: only do_not_pad"},
        "cache_salt": {"type": "string", "minLength": 1, "maxLength": 1024, "description": "vLLM: accepted, ignored"},
        "mm_processor_kwargs": {"type": "object", "description": "vLLM: accepted, ignored (text only)"},
    }
    # per-token output on /v1/embeddings (multivector.py): "states" for a transformer model (return_multivector
    # optional), "multi_vector" for a ColBERT model (return_multivector required: a pooled call is a 400)
    if per_token == "states":
        optional["return_multivector"] = MULTIVECTOR_FIELDS["return_multivector"]
    elif per_token == "multi_vector":
        optional.update(MULTIVECTOR_FIELDS)
        optional["return_multivector"] = {"type": "boolean", "enum": [True],
                                          "description": MULTIVECTOR_FIELDS["return_multivector"]["description"]}
        optional.pop("dimensions")  # what a ColBERT model's per-token output takes (multivector.py)
        for name, values in (("dtype", ["float32", "float16", "bfloat16"]), ("encoding_format", ["float", "base64"]),
                             ("embed_dtype", ["float32", "float16", "bfloat16"]), ("truncation_side", ["right"]),
                             ("truncate_prompt_tokens", [-1])):
            optional[name] = {**optional[name], "enum": values}
    request_schema = {
        "type": "object",
        "additionalProperties": False,
        "required": ["input", "return_multivector"] if per_token == "multi_vector" else ["input"],
        "properties": {
            "input": {
                "description": "a text, an array of texts, an array of token ids, or an array of arrays of "
                               "token ids; at most max inputs, none empty",
                "anyOf": openai_inputs,
            },
            **{name: schema if per_token == "multi_vector" and name == "return_multivector" else nullable(schema)
               for name, schema in optional.items()},
        },
    }
    embedding_item = {
        "type": "object",
        "required": ["object", "index", "embedding"],
        "properties": {
            "object": {"type": "string", "enum": ["embedding"]},
            "index": {"type": "integer", "minimum": 0},
            "embedding": {"anyOf": [{"type": "array", "items": {"type": "number"}}, {"type": "string"},
                                    {"type": "array", "items": {"type": "array", "items": {"type": "number"}},
                                     "description": "return_multivector: a row per token (SPEC.md 20.3)"}]},
            "shape": {"type": "array", "items": {"type": "integer", "minimum": 0}, "minItems": 2, "maxItems": 2,
                      "description": "return_multivector: [tokens, dimensions] of the item's matrix"},
        },
    }
    usage = {"type": "object", "required": ["prompt_tokens", "total_tokens"],
             "properties": {"prompt_tokens": {"type": "integer", "minimum": 0},
                            "total_tokens": {"type": "integer", "minimum": 0}}}
    response_schema = {
        "type": "object",
        "required": ["object", "data", "model", "usage"],
        "properties": {
            "object": {"type": "string", "enum": ["list"]},
            "data": {"type": "array", "items": embedding_item},
            "model": {"type": "string"},
            "usage": usage,
            "dtype": {"type": "string", "enum": [*SERVED_DTYPES, "fp8_e4m3", "fp8_e5m2"],
                      "description": "fp8 only in vLLM's dialect (embed_dtype)"},
            "byteorder": {"type": "string", "enum": ["little", "big"]},
            "id": {"type": "string", "description": "vLLM's dialect: embd-<request_id>"},
            "created": {"type": "integer", "description": "vLLM's dialect"},
            "dimensions": {"type": "integer", "minimum": 1},
            "kind": {"type": "string", "enum": ["ragged"], "description": "return_multivector: a ragged tensor"},
            "quantization": {"type": "string", "description": "int8/uint8 responses: the id of the ranges "
                             "(GET /v1/quantization/{id})"},
            "truncated": {"type": "array", "items": {"type": "integer", "minimum": 0},
                          "description": "indexes of the inputs cut to the token limit (absent when none was)"},
        },
    }
    quantization = {
        "type": "object",
        "description": "per-dimension ranges int8/uint8 answers are quantized with (SPEC.md 17.6)",
        "required": ["id", "method", "dimensions", "lower", "upper"],
        "properties": {
            "object": {"type": "string", "enum": ["quantization"]},
            "id": {"type": "string", "description": "16 hex digits of sha256(lower || upper || d)"},
            "model": {"type": "string"},
            "method": {"type": "string", "enum": ["minmax-per-dimension"]},
            "calibration": {"type": "object", "properties": {
                "name": {"type": "string"}, "texts": {"type": "integer"}, "sha256": {"type": "string"}}},
            "dimensions": {"type": "integer", "minimum": 0},
            "lower": {"type": "string", "format": "byte", "description": "Base64 of d float32, little-endian"},
            "upper": {"type": "string", "format": "byte", "description": "Base64 of d float32, little-endian"},
        },
    }
    error_envelope = {
        "type": "object",
        "required": ["error"],
        "properties": {"error": {
            "type": "object",
            "required": ["message", "type", "param", "code"],
            "properties": {
                "message": {"type": "string"},
                "type": {"type": "string", "enum": ["invalid_request_error", "server_error"]},
                "param": {"type": "string", "nullable": True},
                "code": {"type": "string"},
                "offset": {"type": "integer", "nullable": True},
            },
        }},
    }
    model_card = {
        "type": "object",
        "required": ["id", "object", "created", "owned_by"],
        "properties": {"id": {"type": "string"}, "object": {"type": "string", "enum": ["model"]},
                       "created": {"type": "integer"}, "owned_by": {"type": "string"},
                       "dimensions": {"type": "integer"}, "max_tokens": {"type": "integer"},
                       "engine": {"type": "string"}, "execution_provider": {"type": "string", "nullable": True},
                       **PRECISION_FIELDS, **MULTI_VECTOR_INFO,
                       "quantization": {"$ref": "#/components/schemas/Quantization"}},
    }
    vary = {"Vary": {"description": "always 'Accept, Accept-Encoding'", "schema": {"type": "string"}}}
    ok_content: dict[str, Any] = {"application/json": {"schema": {"$ref": "#/components/schemas/EmbeddingsResponse"}}}
    for fmt in FORMATS[1:]:
        ok_content[MEDIA_TYPES[fmt]] = BINARY
    for alias in MEDIA_TYPE_ALIASES:
        ok_content[alias] = BINARY
    retry_after = {"description": "seconds to wait before retrying: on a 429, and on the 503 of a request that "
                                  "waited past --request-timeout, one mean request duration at the recent pace (at "
                                  "least 1); on the 503 of a draining server, 1",
                   "schema": {"type": "integer", "minimum": 0}}
    ready_schema = {
        "type": "object", "required": ["status", "admitted", "max_concurrent_requests", "draining"],
        "properties": {
            "status": {"type": "string", "enum": ["ready", "unavailable"]},
            "admitted": {"type": "integer", "minimum": 0,
                         "description": "embeddings requests being processed or waiting for the model"},
            "max_concurrent_requests": {"type": "integer", "minimum": 1},
            "draining": {"type": "boolean"},
            "reason": {"type": "string", "description": "why not ready (503 only)"},
        },
    }
    auth_errors = {"401": error_response("missing or wrong API key")} if api_key else {}
    security = [{"bearer": []}] if api_key else []

    doc: dict[str, Any] = {
        "openapi": "3.0.3",
        "info": {
            "title": "densewire embeddings server",
            "version": "1.0",
            "description": "OpenAI-compatible embeddings with densewire's binary formats (SPEC.md sections "
                           "6 and 12). Responses are negotiated by Accept among " +
                           ", ".join(MEDIA_TYPES[f] for f in FORMATS) + "; errors are always the JSON "
                           "error envelope.",
        },
        "paths": {
            "/v1/embeddings": {"post": {
                "operationId": "createEmbeddings",
                "security": security,
                "parameters": [{
                    "name": "format", "in": "query", "required": False,
                    "description": "overrides Accept",
                    "schema": {"type": "string", "enum": list(FORMATS)},
                }],
                "requestBody": {"required": True, "content": {
                    "application/json": {"schema": {"$ref": "#/components/schemas/EmbeddingsRequest"}}}},
                "responses": {
                    "200": {"description": "the embeddings, in the negotiated format", "headers": {
                        **vary, "Densewire-Truncated": {
                            "description": "how many inputs were cut to the token limit (absent when none was); "
                                           "a JSON answer lists their indexes in truncated",
                            "schema": {"type": "integer", "minimum": 1}}},
                            "content": ok_content},
                    "400": error_response("malformed body, unknown dtype, or (invalid_field, as OpenAI and vLLM "
                                           "answer it) a field missing, of the wrong type, out of range or unknown; "
                                           "an input longer than the model reads, not asked to be cut; dimensions "
                                           "on a model without Matryoshka sizes"),
                    **auth_errors,
                    "404": error_response("unknown model (judged before the other fields)"),
                    "406": error_response("no acceptable media type"),
                    "413": error_response("body (or decompressed body) too large"),
                    "415": error_response("unsupported Content-Type or Content-Encoding"),
                    "422": error_response("non_finite: NaN or infinity asked to be written as a JSON number"),
                    "429": error_response_with(
                        "rate_limited: --max-concurrent-requests requests are already being processed or "
                        "waiting for the model; retry after Retry-After seconds",
                        {"Retry-After": retry_after}),
                    "503": error_response_with(
                        "unavailable: the model is not loaded or failed; the server is draining (with "
                        "Connection: close; retry on another replica); or the request waited past "
                        "--request-timeout", {"Retry-After": retry_after}),
                },
            }},
            "/v1/models": {"get": {
                "operationId": "listModels",
                "security": security,
                "responses": {
                    "200": {"description": "the served model", "content": {"application/json": {"schema": {
                        "type": "object", "required": ["object", "data"],
                        "properties": {"object": {"type": "string", "enum": ["list"]},
                                       "data": {"type": "array",
                                                "items": {"$ref": "#/components/schemas/Model"}}}}}}},
                    **auth_errors,
                    "503": error_response("the model is not ready"),
                },
            }},
            "/v1/models/{model_id}": {"get": {
                "operationId": "retrieveModel",
                "security": security,
                "parameters": [{"name": "model_id", "in": "path", "required": True,
                                "schema": {"type": "string", "minLength": 1},
                                **({"example": model_id} if model_id else {})}],
                "responses": {
                    "200": {"description": "the model", "content": {"application/json": {
                        "schema": {"$ref": "#/components/schemas/Model"}}}},
                    **auth_errors,
                    "404": error_response("unknown model"),
                    "503": error_response("the model is not ready"),
                },
            }},
            "/v1/quantization/{id}": {"get": {
                "operationId": "retrieveQuantization",
                "security": security,
                "parameters": [{"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}],
                "responses": {
                    "200": {"description": "the ranges with this id (immutable: cached for a year)",
                            "headers": {"ETag": {"schema": {"type": "string"}},
                                        "Cache-Control": {"schema": {"type": "string"}}},
                            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Quantization"}}}},
                    "304": {"description": "If-None-Match names this id's ETag"},
                    **auth_errors,
                    "404": error_response("no ranges with this id"),
                    "503": error_response("the model is not ready, or its ranges could not be calibrated"),
                },
            }},
            "/health": {"get": {
                "operationId": "health",
                "description": "Liveness (TEI's route): 200 once the model is loaded, and for as long as the "
                               "process serves, also while draining or at its admission limit. Use /ready "
                               "for readiness.",
                "security": [],
                "responses": {
                    "200": {"description": "alive: the model is loaded", "content": {"application/json": {
                        "schema": {
                            "type": "object", "required": ["status"],
                            "properties": {"status": {"type": "string", "enum": ["ok", "degraded"]},
                                           "model": {"type": "string"}, "dimensions": {"type": "integer"},
                                           "engine": {"type": "string"},
                                           "execution_provider": {"type": "string", "nullable": True},
                                           **PRECISION_FIELDS, **MULTI_VECTOR_INFO,
                                           "redis": {"type": "string", "enum": ["up", "down", "disabled"]}}}}}},
                    "503": {"description": "the model is still loading", "content": {"application/json": {
                        "schema": {"type": "object"}}}},
                },
            }},
            "/ready": {"get": {
                "operationId": "ready",
                "description": "Readiness, for a load balancer or a Kubernetes readinessProbe: 200 when a new "
                               "embeddings request would be admitted now; 503 while the model loads, while "
                               "the server drains after SIGTERM, and while admission is full "
                               "(--max-concurrent-requests). Tables, /health and /metrics are served in all "
                               "three cases.",
                "security": [],
                "responses": {
                    "200": {"description": "ready: a new embeddings request would be admitted",
                            "content": {"application/json": {"schema": ready_schema}}},
                    "503": {"description": "not ready: loading, draining or admission full ('reason' says which)",
                            "content": {"application/json": {"schema": ready_schema}}},
                },
            }},
            "/metrics": {"get": {
                "operationId": "metrics",
                "security": [],
                "responses": {"200": {"description": "Prometheus text exposition",
                                      "content": {"text/plain": {"schema": {"type": "string"}}}}},
            }},
            "/openapi.json": {"get": {
                "operationId": "openapi",
                "security": [],
                "responses": {"200": {"description": "this document",
                                      "content": {"application/json": {"schema": {"type": "object"}}}}},
            }},
        },
        "components": {
            "schemas": {
                "EmbeddingsRequest": request_schema,
                "EmbeddingsResponse": response_schema,
                "ErrorEnvelope": error_envelope,
                "Model": model_card,
                "Quantization": quantization,
            },
        },
    }
    doc["paths"].update(dialect_paths(max_inputs=max_inputs, max_dims=max_dims, token_ids=token_ids, text=text,
                                       security=security, auth_errors=auth_errors, can_cut=can_cut,
                                       tokenizer=tokenizer, max_tokens=max_tokens, quantize=quantize, sparse=sparse))
    doc["components"]["schemas"].update(DIALECT_SCHEMAS)
    doc["paths"].update(kserve_paths(model_id=model_id, dimensions=dimensions, max_inputs=max_inputs,
                                     security=security, auth_errors=auth_errors))
    doc["components"]["schemas"].update(KSERVE_SCHEMAS)
    doc["paths"].update(table_paths(list(tables or []), [] if public_tables else security,
                                     {} if public_tables else auth_errors))
    if api_key:
        doc["components"]["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
        doc["security"] = [{"bearer": []}]
    return doc
