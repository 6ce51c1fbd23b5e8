"""Pieces every route family's part of the OpenAPI document uses (openapi.py assembles the document)."""

from __future__ import annotations

from typing import Any

__all__ = ["BINARY", "PRECISION_FIELDS", "MULTIVECTOR_FIELDS", "MULTI_VECTOR_INFO", "error_response", "error_response_with", "nullable"]

BINARY = {"schema": {"type": "string", "format": "binary"}}


#: what /v1/models and /health say about the precision the model runs in (issue 26)
PRECISION_FIELDS: dict[str, Any] = {
    "precision": {"type": "string", "nullable": True, "enum": ["fp32", "bf16", "int8", "bf16-emulated", None],
                  "description": "number format of the model's matrix products (--precision; null for a backend "
                                 "that does not run a model here: hash, upstream)"},
    "cpu_features": {"type": "array", "items": {"type": "string"},
                     "description": "the CPU flags that decided precision and engine (amx_bf16, avx512_bf16, "
                                    "amx_int8, avx512_vnni, avx_vnni, amx_tile, avx512f, avx2), those this CPU has"},
}

#: the /v1/embeddings fields of per-token output (multivector.py)
MULTIVECTOR_FIELDS: dict[str, Any] = {
    "return_multivector": {"type": "boolean", "default": False,
                           "description": "answer a vector per token (a ragged tensor, SPEC.md 20): a multi-vector "
                                          "(ColBERT) model's normalized token vectors, another transformer model's "
                                          "last hidden states; required on a ColBERT model (a pooled call is a 400)"},
    "is_query": {"type": "boolean", "default": False,
                 "description": "with return_multivector on a ColBERT model: encode the inputs as queries (query "
                                "marker, [MASK] expansion to the query length) instead of documents"},
}

#: what /v1/models, /health and TEI's /info say about a multi-vector (ColBERT) model
MULTI_VECTOR_INFO: dict[str, Any] = {
    "multi_vector": {"type": "object", "description": "present for a multi-vector (ColBERT) model: its layout "
                     "(pylate or colbert-ai), vector size, markers, query and document lengths and expansion",
                     "properties": {"layout": {"type": "string", "enum": ["pylate", "colbert-ai"]},
                                    "dimensions": {"type": "integer"},
                                    "query_prefix": {"type": "string", "nullable": True},
                                    "document_prefix": {"type": "string", "nullable": True},
                                    "query_length": {"type": "integer"}, "document_length": {"type": "integer"},
                                    "do_query_expansion": {"type": "boolean"},
                                    "attend_to_expansion_tokens": {"type": "boolean"}}},
}


def error_response(description: str) -> dict[str, Any]:
    return {"description": description,
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorEnvelope"}}}}


def error_response_with(description: str, headers: dict[str, Any]) -> dict[str, Any]:
    return {**error_response(description), "headers": headers}


def nullable(schema: dict[str, Any]) -> dict[str, Any]:
    """Optional fields also accept null (meaning: the default), as many OpenAI clients send it."""
    out = dict(schema, nullable=True)
    if "enum" in out:
        out["enum"] = [*out["enum"], None]
    return out
