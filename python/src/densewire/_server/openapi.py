"""The OpenAPI 3.0 document of the server, written by hand to match the handlers exactly.

``tests/test_server_openapi.py`` runs schemathesis against it.
"""

from __future__ import annotations

from typing import Any

from densewire import FORMATS, MEDIA_TYPES, TABLE_FORMATS, TABLE_MEDIA_TYPES
from densewire._formats import MEDIA_TYPE_ALIASES
from densewire._tables import TABLE_MEDIA_TYPE_ALIASES

from .request import EMBED_DTYPES, ENCODING_FORMATS, ENDIANNESS, SERVED_DTYPES

__all__ = ["build_openapi"]

_BINARY = {"schema": {"type": "string", "format": "binary"}}


#: what /v1/models and /health say about the precision the model runs in (issue 26)
_PRECISION_FIELDS: dict[str, Any] = {
    "precision": {"type": "string", "nullable": True, "enum": ["fp32", "bf16", "int8", "bf16-emulated", None],
                  "description": "number format of the model's matrix products (--precision; null for a backend "
                                 "that does not run a model here: hash, upstream)"},
    "cpu_features": {"type": "array", "items": {"type": "string"},
                     "description": "the CPU flags that decided precision and engine (amx_bf16, avx512_bf16, "
                                    "amx_int8, avx512_vnni, avx_vnni, amx_tile, avx512f, avx2), those this CPU has"},
}

def _error_response(description: str) -> dict[str, Any]:
    return {"description": description,
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorEnvelope"}}}}


def _error_response_with(description: str, headers: dict[str, Any]) -> dict[str, Any]:
    return {**_error_response(description), "headers": headers}


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    """Optional fields also accept null (meaning: the default), as many OpenAI clients send it."""
    out = dict(schema, nullable=True)
    if "enum" in out:
        out["enum"] = [*out["enum"], None]
    return out


def _table_paths(tables: list[str], security: list[Any], auth_errors: dict[str, Any]) -> dict[str, Any]:
    str_schema = {"schema": {"type": "string"}}
    headers = {
        "Vary": {"description": "always 'Accept, Accept-Encoding'", "schema": {"type": "string"}},
        "ETag": {"description": "strong; differs per format and content coding", "schema": {"type": "string"}},
        "Last-Modified": {"description": "when this version of the data was loaded", **str_schema},
        "Cache-Control": {"description": "server configuration (default no-cache)", **str_schema},
        "Densewire-Version": {"description": "1", **str_schema},
        "Densewire-Table": {"description": "the table name", **str_schema},
        "Densewire-Rows": {"description": "n in decimal", **str_schema},
        "Densewire-Columns": {"description": "name=type,... (SPEC.md 15.2)", **str_schema},
    }
    value = {"description": "a cell: boolean, integer, number, string (text, uuid) or array of numbers"}
    content: dict[str, Any] = {
        "application/json": {"schema": {"type": "array", "items": {"type": "object", "additionalProperties": value}}},
        TABLE_MEDIA_TYPES["json-rows"]: {"schema": {"type": "object", "required": ["name", "columns", "rows"]}},
        TABLE_MEDIA_TYPES["json-columns"]: {"schema": {"type": "object", "required": ["name", "rows", "columns"]}},
        "text/csv": str_schema,
    }
    for fmt in ("msgpack", "protobuf", "arrow"):
        content[TABLE_MEDIA_TYPES[fmt]] = _BINARY
    for alias in TABLE_MEDIA_TYPE_ALIASES:
        content[alias] = _BINARY
    column = {"type": "object", "required": ["name", "type"],
              "properties": {"name": {"type": "string"}, "type": {"type": "string"}}}
    table_card = {
        "type": "object",
        "required": ["object", "name", "rows", "columns", "version", "refreshed_at", "formats", "status"],
        "properties": {
            "object": {"type": "string", "enum": ["table"]},
            "name": {"type": "string"},
            "rows": {"type": "integer", "minimum": 0, "nullable": True},
            "columns": {"type": "array", "items": column, "nullable": True},
            "version": {"type": "string", "nullable": True,
                        "description": "opaque; changes when the data does"},
            "refreshed_at": {"type": "string", "format": "date-time", "nullable": True,
                             "description": "the last successful load"},
            "formats": {"type": "array", "items": {"type": "string", "enum": list(TABLE_FORMATS)}},
            "status": {"type": "string", "enum": ["loading", "warming", "ready", "stale", "failed"]},
            "refresh_error": {"type": "string", "nullable": True,
                              "description": "why the last load failed (the last good version is served)"},
        },
    }
    name_param = {"name": "name", "in": "path", "required": True,
                  "schema": {"type": "string", "minLength": 1, "pattern": "^[^/]+$"},
                  **({"example": tables[0]} if tables else {})}
    return {
        "/v1/tables": {"get": {
            "operationId": "listTables",
            "security": security,
            "responses": {
                "200": {"description": "the served tables", "content": {"application/json": {"schema": {
                    "type": "object", "required": ["object", "data"],
                    "properties": {"object": {"type": "string", "enum": ["list"]},
                                   "data": {"type": "array", "items": table_card}}}}}},
                **auth_errors,
            },
        }},
        "/v1/tables/{name}": {"get": {
            "operationId": "getTable",
            "description": "The table in the format that Accept or ?format= asks for (SPEC.md 15.9), from "
                           "bodies serialized and compressed before the request; 304 on If-None-Match.",
            "security": security,
            "parameters": [
                name_param,
                {"name": "format", "in": "query", "required": False, "description": "overrides Accept",
                 "schema": {"type": "string", "enum": list(TABLE_FORMATS)}},
            ],
            "responses": {
                "200": {"description": "the table", "headers": headers, "content": content},
                "304": {"description": "not modified (If-None-Match named the current ETag, or *)",
                        "headers": {"ETag": headers["ETag"], "Vary": headers["Vary"]}},
                **auth_errors,
                "404": _error_response("unknown table"),
                "406": _error_response("no acceptable media type (the message lists the table media types)"),
                "422": _error_response("the data cannot be written in this format (JSON and NaN)"),
                "503": _error_response("the table is still loading or its first load failed (Retry-After)"),
            },
        }},
        "/demo/": {"get": {
            "operationId": "demoPage",
            "security": [],
            "responses": {
                "200": {"description": "the demo page", "content": {"text/html": str_schema}},
                "404": _error_response("the demo page is not built"),
            },
        }},
    }


def _dialect_error(description: str, schema: str) -> dict[str, Any]:
    return {"description": description,
            "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{schema}"}}}}


_DIALECT_SCHEMAS = {
    "TeiError": {"type": "object", "required": ["error", "error_type"],
                 "properties": {"error": {"type": "string"}, "error_type": {"type": "string"}}},
    "CohereError": {"type": "object", "required": ["message"], "properties": {"message": {"type": "string"}}},
    "OllamaError": {"type": "object", "required": ["error"], "properties": {"error": {"type": "string"}}},
}


def _dialect_paths(*, max_inputs: int, max_dims: int, token_ids: dict[str, Any], text: dict[str, Any],
                   security: list[Any], auth_errors: dict[str, Any], can_cut: bool, tokenizer: bool,
                   max_tokens: int | None, quantize: bool) -> dict[str, Any]:
    """TEI's, Cohere's and Ollama's routes (dialects.py, SPEC.md 6.4). A model that cannot cut inputs at
    either end (no tokenizer of its own) is documented without the values that ask for it; a model without
    a tokenizer to show has no /tokenize."""
    binary = {MEDIA_TYPES[f]: _BINARY for f in FORMATS[1:]}
    rows = {"type": "array", "items": {"type": "array", "items": {"type": "number"}}}

    def errors(schema: str, **codes: str) -> dict[str, Any]:
        out = {code.removeprefix("s"): _dialect_error(why, schema) for code, why in codes.items()}
        if auth_errors:
            out["401"] = _dialect_error("missing or wrong API key", schema)
        return out

    tei_errors = errors("TeiError", s400="empty inputs (Empty), malformed JSON", s406="no acceptable media type",
                        s413="too many inputs or an input too long with truncate false (Validation); "
                             "a body too large", s415="unsupported Content-Type",
                        s422="a field of the wrong type or out of range, or a prompt_name", s429="overloaded",
                        s503="the model is not ready")
    tei_request = {
        "type": "object", "required": ["inputs"],
        "properties": {
            "inputs": {"anyOf": [text, {"type": "array", "minItems": 1, "maxItems": max_inputs, "items": text},
                                 token_ids,
                                 {"type": "array", "minItems": 1, "maxItems": max_inputs, "items": token_ids}]},
            "truncate": {"type": "boolean", "nullable": True, "default": False,
                         "description": "cut inputs longer than the model's maximum; absent: the server's "
                                        "--auto-truncate (off by default: such an input is a 413)"},
            "truncation_direction": {"type": "string", "nullable": True,
                                     "enum": [*(["Left", "Right", "left", "right"] if can_cut else ["Right", "right"]),
                                              None]},
            "normalize": {"type": "boolean", "default": True, "nullable": True},
            "dimensions": {"type": "integer", "minimum": 1, "maximum": max_dims, "nullable": True},
            "prompt_name": {"type": "string", "nullable": True, "enum": [None],
                            "description": "the model defines no prompts: only null"},
        },
    }
    tei_embed = {
        "security": security,
        "requestBody": {"required": True, "content": {"application/json": {"schema": tei_request}}},
        "responses": {"200": {"description": "one array of numbers per input (or a densewire format by Accept)",
                              "content": {"application/json": {"schema": rows}, **binary}},
                      **tei_errors},
    }
    token = {"type": "object", "required": ["id", "text", "special", "start", "stop"],
             "properties": {"id": {"type": "integer"}, "text": {"type": "string"}, "special": {"type": "boolean"},
                            "start": {"type": "integer", "nullable": True},
                            "stop": {"type": "integer", "nullable": True}}}
    cohere_types = ["float", *(["int8", "uint8"] if quantize else []), "binary", "ubinary", "base64"]
    cohere_request = {
        "type": "object", "additionalProperties": False, "required": ["texts"],
        "properties": {
            "texts": {"type": "array", "minItems": 1, "maxItems": max_inputs, "items": text},
            "model": {"type": "string", "nullable": True},
            "input_type": {"type": "string", "nullable": True,
                           "enum": ["search_document", "search_query", "classification", "clustering", None]},
            "embedding_types": {"type": "array", "minItems": 1, "nullable": True,
                                "items": {"type": "string", "enum": cohere_types}},
            "output_dimension": {"type": "integer", "minimum": 1, "maximum": max_dims, "nullable": True},
            "max_tokens": {"type": "integer", "minimum": 1 if can_cut or not max_tokens else max_tokens,
                           "maximum": 0xFFFFFFFF, "nullable": True},
            "truncate": {"type": "string", "nullable": True,
                         "enum": [*(["NONE", "START", "END"] if can_cut else ["NONE", "END"]), None], "default": "END"},
            "priority": {"type": "integer", "nullable": True},
        },
    }
    cohere_response = {
        "type": "object", "required": ["id", "embeddings", "meta"],
        "properties": {"id": {"type": "string"}, "texts": {"type": "array", "items": {"type": "string"}},
                       "embeddings": {"type": "object", "properties": {
                           k: ({"type": "array", "items": {"type": "string"}} if k == "base64" else rows)
                           for k in cohere_types}},
                       "meta": {"type": "object"}, "response_type": {"type": "string"}},
    }
    ollama_model = {"type": "string", "minLength": 1, "description": "a served name (':latest' may follow)"}
    keep_alive = {"nullable": True, "anyOf": [{"type": "string"}, {"type": "number"}]}
    ollama_errors = errors("OllamaError", s400="a field missing, of the wrong type or out of range, an input too "
                           "long with truncate false", s404="unknown model", s406="no acceptable media type",
                           s413="body too large", s415="unsupported Content-Type", s429="overloaded",
                           s503="the model is not ready")
    paths = {
        "/": {"get": {"operationId": "home", "security": [],
                      "responses": {"200": {"description": "the server's own page",
                                            "content": {"text/html": {"schema": {"type": "string"}}}}}},
              "post": {"operationId": "teiRoot", "description": "TEI's /embed at the root, as TEI serves it",
                       **tei_embed}},
        "/embed": {"post": {"operationId": "teiEmbed", **tei_embed}},
        "/tokenize": {"post": {
            "operationId": "teiTokenize", "security": security,
            "requestBody": {"required": True, "content": {"application/json": {"schema": {
                "type": "object", "required": ["inputs"],
                "properties": {"inputs": {"anyOf": [{"type": "string"}, {"type": "array", "minItems": 1,
                                                                         "maxItems": max_inputs,
                                                                         "items": {"type": "string"}}]},
                               "add_special_tokens": {"type": "boolean", "default": True, "nullable": True}}}}}},
            "responses": {"200": {"description": "the tokens of each input; start/stop are byte offsets",
                                  "content": {"application/json": {"schema": {
                                      "type": "array", "items": {"type": "array", "items": token}}}}},
                          **errors("TeiError", s400="malformed JSON", s413="too many inputs; a body too large",
                                   s415="unsupported Content-Type",
                                   s422="a field of the wrong type, or a model without a tokenizer (Tokenizer)",
                                   s429="overloaded", s503="the model is not ready")},
        }},
        "/info": {"get": {
            "operationId": "teiInfo", "security": security,
            "responses": {"200": {"description": "TEI's Info", "content": {"application/json": {"schema": {
                "type": "object", "required": ["model_id", "max_input_length", "max_client_batch_size"],
                "properties": {"model_id": {"type": "string"}, "max_input_length": {"type": "integer"},
                               "max_client_batch_size": {"type": "integer"}}}}}},
                          **errors("TeiError", s503="the model is not ready")},
        }},
        "/v2/embed": {"post": {
            "operationId": "cohereEmbed", "security": security,
            "requestBody": {"required": True, "content": {"application/json": {"schema": cohere_request}}},
            "responses": {"200": {"description": "embeddings by type (or one type in a densewire format by Accept)",
                                  "content": {"application/json": {"schema": cohere_response}, **binary}},
                          **errors("CohereError", s400="a field missing, unknown, of the wrong type or out of range",
                                   s404="unknown model", s406="no acceptable media type, or a binary format "
                                   "with several embedding types", s413="body too large",
                                   s415="unsupported Content-Type",
                                   s422="int8/uint8 when the server does not quantize", s429="overloaded",
                                   s503="the model is not ready")},
        }},
        "/api/embed": {"post": {
            "operationId": "ollamaEmbed", "security": security,
            "requestBody": {"required": True, "content": {"application/json": {"schema": {
                "type": "object", "required": ["model"],
                "properties": {"model": ollama_model,
                               "input": {"nullable": True,
                                         "anyOf": [{"type": "string"},
                                                   {"type": "array", "maxItems": max_inputs,
                                                    "items": {"type": "string"}}]},
                               "truncate": {"type": "boolean", "default": True, "nullable": True},
                               "dimensions": {"type": "integer", "minimum": 1, "maximum": max_dims, "nullable": True},
                               "options": {"type": "object", "nullable": True}, "keep_alive": keep_alive}}}}},
            "responses": {"200": {"description": "L2-normalised vectors, one per input",
                                  "content": {"application/json": {"schema": {
                                      "type": "object", "required": ["model", "embeddings"],
                                      "properties": {"model": {"type": "string"}, "embeddings": rows,
                                                     "total_duration": {"type": "integer"},
                                                     "load_duration": {"type": "integer"},
                                                     "prompt_eval_count": {"type": "integer"}}}}, **binary}},
                          **ollama_errors},
        }},
        "/api/embeddings": {"post": {
            "operationId": "ollamaEmbeddings", "security": security,
            "requestBody": {"required": True, "content": {"application/json": {"schema": {
                "type": "object", "required": ["model"],
                "properties": {"model": ollama_model, "prompt": {"type": "string", "nullable": True},
                               "options": {"type": "object", "nullable": True}, "keep_alive": keep_alive}}}}},
            "responses": {"200": {"description": "one vector ([] for an empty prompt)",
                                  "content": {"application/json": {"schema": {
                                      "type": "object", "required": ["embedding"],
                                      "properties": {"embedding": {"type": "array", "items": {"type": "number"}}}}},
                                      **binary}},
                          **ollama_errors},
        }},
    }
    if not tokenizer:
        del paths["/tokenize"]
    return paths


def build_openapi(*, model_id: str | None, dimensions: int | None, max_inputs: int, api_key: bool,
                  vocab_size: int | None = None, tables: list[str] | None = None,
                  public_tables: bool = False, can_cut: bool = True, tokenizer: bool = True,
                  max_tokens: int | None = None, quantize: bool = False,
                  token_ids_mode: str = "model") -> dict[str, Any]:
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
    request_schema = {
        "type": "object",
        "additionalProperties": False,
        "required": ["input"],
        "properties": {
            "input": {
                "description": "a text, an array of texts, an array of token ids, or an array of arrays of "
                               "token ids; at most max inputs, none empty",
                "anyOf": openai_inputs,
            },
            **{name: _nullable(schema) for name, schema in optional.items()},
        },
    }
    embedding_item = {
        "type": "object",
        "required": ["object", "index", "embedding"],
        "properties": {
            "object": {"type": "string", "enum": ["embedding"]},
            "index": {"type": "integer", "minimum": 0},
            "embedding": {"anyOf": [{"type": "array", "items": {"type": "number"}}, {"type": "string"}]},
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
                       **_PRECISION_FIELDS,
                       "quantization": {"$ref": "#/components/schemas/Quantization"}},
    }
    vary = {"Vary": {"description": "always 'Accept, Accept-Encoding'", "schema": {"type": "string"}}}
    ok_content: dict[str, Any] = {"application/json": {"schema": {"$ref": "#/components/schemas/EmbeddingsResponse"}}}
    for fmt in FORMATS[1:]:
        ok_content[MEDIA_TYPES[fmt]] = _BINARY
    for alias in MEDIA_TYPE_ALIASES:
        ok_content[alias] = _BINARY
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
    auth_errors = {"401": _error_response("missing or wrong API key")} if api_key else {}
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
                    "400": _error_response("malformed body, unknown dtype, or (invalid_field, as OpenAI and vLLM "
                                           "answer it) a field missing, of the wrong type, out of range or unknown; "
                                           "an input longer than the model reads, not asked to be cut; dimensions "
                                           "on a model without Matryoshka sizes"),
                    **auth_errors,
                    "404": _error_response("unknown model (judged before the other fields)"),
                    "406": _error_response("no acceptable media type"),
                    "413": _error_response("body (or decompressed body) too large"),
                    "415": _error_response("unsupported Content-Type or Content-Encoding"),
                    "422": _error_response("non_finite: NaN or infinity asked to be written as a JSON number"),
                    "429": _error_response_with(
                        "rate_limited: --max-concurrent-requests requests are already being processed or "
                        "waiting for the model; retry after Retry-After seconds",
                        {"Retry-After": retry_after}),
                    "503": _error_response_with(
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
                    "503": _error_response("the model is not ready"),
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
                    "404": _error_response("unknown model"),
                    "503": _error_response("the model is not ready"),
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
                    "404": _error_response("no ranges with this id"),
                    "503": _error_response("the model is not ready, or its ranges could not be calibrated"),
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
                                           **_PRECISION_FIELDS,
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
    doc["paths"].update(_dialect_paths(max_inputs=max_inputs, max_dims=max_dims, token_ids=token_ids, text=text,
                                       security=security, auth_errors=auth_errors, can_cut=can_cut,
                                       tokenizer=tokenizer, max_tokens=max_tokens, quantize=quantize))
    doc["components"]["schemas"].update(_DIALECT_SCHEMAS)
    doc["paths"].update(_table_paths(list(tables or []), [] if public_tables else security,
                                     {} if public_tables else auth_errors))
    if api_key:
        doc["components"]["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
        doc["security"] = [{"bearer": []}]
    return doc
