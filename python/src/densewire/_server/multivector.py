"""Per-token output on ``POST /v1/embeddings``: ``"return_multivector": true`` (Jina's name for it on its
embeddings API) answers a ragged tensor (SPEC.md 20) instead of one vector per input, in every format
(the JSON envelope of 20.3 by default, raw, MessagePack, Protobuf or Arrow by ``Accept``).

On a multi-vector (ColBERT) model the rows are its normalized per-token vectors of each input as a
document, or as a query with ``"is_query": true`` (PyLate's name); on any other transformer model they
are its last hidden states per token, as ``/embed_all`` answers. A pooled call on a ColBERT model is a
400 naming ``return_multivector`` (``Embedder.refuse_pooled``); ``is_query`` without per-token output
is a 400 too. Admission, ``--max-token-output-bytes``, truncation, the cache (keyed by output kind and
mode), metrics and errors are the pipeline's and ``Embedder.embed_token_states``'s.
"""

from __future__ import annotations

from starlette.responses import Response

from densewire import Embeddings, InvalidFieldError, RaggedTensor, Usage, convert

from .pipeline import Call
from .request import EmbeddingsRequest

__all__ = ["check_pooled_request", "multivector_embeddings", "MULTIVECTOR_DTYPES"]

MULTIVECTOR_DTYPES = ("float32", "float16", "bfloat16")


def check_pooled_request(req: EmbeddingsRequest) -> None:
    """A pooled request (no ``return_multivector``) that sends ``is_query``: a 400 saying what it needs."""
    if req.is_query is not None and not req.multivector:
        raise InvalidFieldError("is_query selects a multi-vector model's query mode: send it with "
                                "\"return_multivector\": true", field="is_query")


async def multivector_embeddings(call: Call, req: EmbeddingsRequest, fmt: str, content_encoding: str | None,
                                 with_truncated) -> Response:  # noqa: ANN001 (app._with_truncated)
    """The ragged answer of a ``return_multivector`` request, in the negotiated format."""
    if req.texts is None:
        raise InvalidFieldError("per-token output is computed from texts: send the texts, not token ids",
                                field="input")
    if req.dimensions is not None:
        raise InvalidFieldError("per-token output is not cut to dimensions", field="dimensions")
    if req.encoding_format in ("bytes", "bytes_only"):
        raise InvalidFieldError("vLLM's bytes of per-token output are served on POST /pooling (task token_embed)",
                                field="encoding_format")
    dtype, field = (req.dtype, "dtype") if req.dtype != "float32" else (req.embed_dtype, "embed_dtype")
    if dtype not in MULTIVECTOR_DTYPES:
        raise InvalidFieldError(f"per-token output is answered in {', '.join(MULTIVECTOR_DTYPES)}, not {dtype!r}",
                                field=field)
    if req.truncation_side == "left":
        raise InvalidFieldError("per-token output keeps the first tokens only: send truncation_side 'right'",
                                field="truncation_side")
    service = call.service
    if req.token_limit is not None and req.token_limit not in (-1, service.max_tokens):
        raise InvalidFieldError("per-token output is cut at the model's maximum only: send -1",
                                field="truncate_prompt_tokens")
    ragged, counts, cut = await service.embed_token_states(req.texts, truncate=req.truncate or req.token_limit is not None,
                                                           is_query=req.is_query)
    call.truncated = cut
    if dtype != "float32":
        ragged = RaggedTensor(convert(ragged.rows, dtype), ragged.offsets)
    tokens = sum(counts)
    emb = Embeddings(ragged, model=service.model_id, usage=Usage(tokens, tokens))
    byteorder = req.byteorder if fmt == "json" and req.encoding_format == "base64" else "little"
    if fmt == "json" and cut:  # the JSON says which inputs were cut (SPEC.md 6.2)
        plain = await call.render(emb, fmt, None, encoding_format=req.encoding_format, byteorder=byteorder)
        headers = {k: v for k, v in plain.headers.items() if k.lower() not in ("content-length", "vary")}
        return call.prepared(with_truncated(bytes(plain.body), cut), headers, content_encoding)
    return await call.render(emb, fmt, content_encoding, encoding_format=req.encoding_format, byteorder=byteorder)
