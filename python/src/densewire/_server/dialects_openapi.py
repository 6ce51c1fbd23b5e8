"""The OpenAPI part of TEI's, Cohere's and Ollama's routes (dialects.py, SPEC.md 6.4); openapi.py
assembles the document."""

from __future__ import annotations

from typing import Any

from densewire import FORMATS, MEDIA_TYPES

from .openapi_parts import BINARY

__all__ = ["dialect_paths", "DIALECT_SCHEMAS"]


def _dialect_error(description: str, schema: str) -> dict[str, Any]:
    return {"description": description,
            "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{schema}"}}}}


DIALECT_SCHEMAS = {
    "TeiError": {"type": "object", "required": ["error", "error_type"],
                 "properties": {"error": {"type": "string"}, "error_type": {"type": "string"}}},
    "CohereError": {"type": "object", "required": ["message"], "properties": {"message": {"type": "string"}}},
    "OllamaError": {"type": "object", "required": ["error"], "properties": {"error": {"type": "string"}}},
}


def dialect_paths(*, max_inputs: int, max_dims: int, token_ids: dict[str, Any], text: dict[str, Any],
                   security: list[Any], auth_errors: dict[str, Any], can_cut: bool, tokenizer: bool,
                   max_tokens: int | None, quantize: bool, sparse: bool = False) -> dict[str, Any]:
    """TEI's, Cohere's and Ollama's routes (dialects.py, SPEC.md 6.4). A model that cannot cut inputs at
    either end (no tokenizer of its own) is documented without the values that ask for it; a model without
    a tokenizer to show has no /tokenize, and a model without sparse output no /embed_sparse."""
    binary = {MEDIA_TYPES[f]: BINARY for f in FORMATS[1:]}
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
    if sparse:
        sparse_request = {"type": "object", "required": ["inputs"], "properties": {
            "inputs": tei_request["properties"]["inputs"],
            "truncate": tei_request["properties"]["truncate"],
            "truncation_direction": tei_request["properties"]["truncation_direction"],
            "prompt_name": tei_request["properties"]["prompt_name"],
            "max_active_dims": {"type": "integer", "minimum": 1, "nullable": True,
                                "description": "densewire: keep each vector's largest weights only"}}}
        value = {"type": "object", "required": ["index", "value"],
                 "properties": {"index": {"type": "integer", "minimum": 0}, "value": {"type": "number"}}}
        paths["/embed_sparse"] = {"post": {
            "operationId": "teiEmbedSparse", "security": security,
            "requestBody": {"required": True, "content": {"application/json": {"schema": sparse_request}}},
            "responses": {"200": {"description": "each input's non-zero weights, indices ascending (or densewire's "
                                                 "sparse tensor by Accept)",
                                  "content": {"application/json": {"schema": {
                                      "type": "array", "items": {"type": "array", "items": value}}}, **binary}},
                          **errors("TeiError", s400="empty inputs (Empty), malformed JSON",
                                   s406="no acceptable media type",
                                   s413="too many inputs or an input too long with truncate false (Validation); "
                                        "a body too large, or an answer over --max-token-output-bytes",
                                   s415="unsupported Content-Type",
                                   s422="a field of the wrong type or out of range, a token id outside the "
                                        "vocabulary, a prompt_name",
                                   s429="overloaded", s503="the model is not ready")},
        }}
    if not tokenizer:
        del paths["/tokenize"]
    return paths
