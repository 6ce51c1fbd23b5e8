"""TEI's gRPC API (``tei.v1``, proto/tei/v1/tei.proto) on densewire's pipeline, answered as TEI's
router/src/grpc/server.rs answers: ``Info``; ``Embed.Embed`` and ``Embed.EmbedStream`` (one text a
message; ``normalize`` unset means true; ``truncate`` or ``--auto-truncate``; ``dimensions``; the answers of
a stream in its requests' order, its first error ending it); ``Tokenize.Tokenize``/``TokenizeStream`` and
``Tokenize.Decode``/``DecodeStream``; ``Embed.EmbedSparse``/``EmbedSparseStream`` (the non-zero weights of a
sparse head, ascending indices, as ``POST /embed_sparse``: sparse.embed_sparse) and ``Embed.EmbedAll``/
``EmbedAllStream`` (one ``TokenEmbedding`` a token, special tokens included, as ``POST /embed_all``:
Embedder.embed_token_states; a ColBERT model's document vectors). The TEI HTTP routes' rules are the same
functions (dialects.py): the same vectors, the same errors (TEI's Validation/Empty are INVALID_ARGUMENT,
Overloaded RESOURCE_EXHAUSTED, Unhealthy UNAVAILABLE, Backend FAILED_PRECONDITION: a model without the
output asked for; an answer over --max-token-output-bytes RESOURCE_EXHAUSTED). Predict and Rerank answer
UNIMPLEMENTED (densewire serves no classifier or reranker).
"""

from __future__ import annotations

import time
from typing import Any, AsyncIterator

import grpc

from densewire import DensewireError, InvalidFieldError, PayloadTooLargeError, __version__

from .dialects import _length_error, _normalize, _request, _with_status
from .grpc_call import abort, incoming_of, ordered, run_grpc, service, stream, unary, with_grpc_code
from .grpcpb import tei_pb2 as pb
from .pipeline import Call
from .sparse import embed_sparse, no_sparse, sparse_vocab_size

__all__ = ["handlers"]

_EMBED_HINT = "send truncate: true to embed its first tokens, or run the server with --auto-truncate"


def _info(st: Any) -> pb.InfoResponse:
    e = st.require_embedder()
    cfg = st.cfg
    return pb.InfoResponse(version=__version__, model_id=e.model_id, model_dtype="float32",
                           model_type=pb.MODEL_TYPE_EMBEDDING, max_concurrent_requests=cfg.max_concurrent_requests,
                           max_input_length=e.max_tokens, max_batch_tokens=cfg.max_batch_tokens,
                           max_client_batch_size=cfg.max_client_batch_size, tokenization_workers=1)


def _checked(msg: Any) -> None:
    """What Embed, EmbedSparse and EmbedAll check of their request before the model runs (as TEI's tokenization)."""
    if not msg.inputs:
        raise _with_status(InvalidFieldError("`inputs` cannot be empty", field="inputs"), 400, "Empty")
    if msg.HasField("prompt_name"):
        raise InvalidFieldError(f"prompt_name {msg.prompt_name!r} is not a prompt of the model (it defines none)",
                                field="prompt_name")


async def _embed_one(call: Call, msg: pb.EmbedRequest) -> pb.EmbedResponse:
    """One EmbedRequest, as POST /embed reads one text."""
    t0 = time.perf_counter_ns()
    cfg, service_ = call.st.cfg, call.service
    _checked(msg)
    dims = None
    if msg.HasField("dimensions"):
        dims = msg.dimensions
        if not 1 <= dims <= service_.dimensions:
            raise InvalidFieldError(f"must be in [1, {service_.dimensions}], not {dims}", field="dimensions")
    side = "left" if msg.truncation_direction == pb.TRUNCATION_DIRECTION_LEFT else "right"
    req = _request([msg.inputs], None, dims=dims, truncate=msg.truncate or cfg.auto_truncate, side=side,
                   token_ids_as="model")
    try:
        vectors, tokens = await call.embed(req)
    except InvalidFieldError as err:
        raise _length_error(err, "inputs", _EMBED_HINT, tei=True) from None
    if not msg.HasField("normalize") or msg.normalize:
        vectors = _normalize(vectors)
    meta = pb.Metadata(compute_chars=len(msg.inputs), compute_tokens=tokens,
                       total_time_ns=time.perf_counter_ns() - t0)
    return pb.EmbedResponse(embeddings=vectors[0], metadata=meta)


def _on_inputs(err: DensewireError) -> DensewireError:
    """An error of the pipeline's ``input`` list placed on TEI's field ``inputs`` (one text a message)."""
    err = _length_error(err, "inputs", _EMBED_HINT, tei=True)
    if err.field == "input":  # over --max-token-output-bytes
        err.field = "inputs"
    return err


async def _embed_sparse_one(call: Call, msg: pb.EmbedSparseRequest) -> pb.EmbedSparseResponse:
    """One EmbedSparseRequest, as POST /embed_sparse reads one text; TEI answers a model without a sparse
    head (not SPLADE) FAILED_PRECONDITION, before it reads the text."""
    t0 = time.perf_counter_ns()
    service_ = call.service
    if sparse_vocab_size(service_) is None:
        err = no_sparse(service_)
        raise with_grpc_code(InvalidFieldError(f"Model is not an embedding model with SPLADE pooling: {err.message}",
                                               field="model"), grpc.StatusCode.FAILED_PRECONDITION)
    _checked(msg)
    side = "left" if msg.truncation_direction == pb.TRUNCATION_DIRECTION_LEFT else "right"
    try:
        sparse, counts, cut = await embed_sparse(service_, [msg.inputs], side=side,
                                                 truncate=msg.truncate or call.st.cfg.auto_truncate)
    except (InvalidFieldError, PayloadTooLargeError) as err:
        raise _on_inputs(err) from None
    call.truncated = cut
    values = sparse.values_float32()
    meta = pb.Metadata(compute_chars=len(msg.inputs), compute_tokens=sum(counts),
                       total_time_ns=time.perf_counter_ns() - t0)
    return pb.EmbedSparseResponse(sparse_embeddings=[pb.SparseValue(index=i, value=v) for i, v in
                                                     zip(sparse.indices.tolist(), values.tolist())], metadata=meta)


async def _embed_all_one(call: Call, msg: pb.EmbedAllRequest) -> pb.EmbedAllResponse:
    """One EmbedAllRequest, as POST /embed_all reads one text: the model's output of each of its tokens (a
    model without per-token output, as TEI's SPLADE models, is FAILED_PRECONDITION)."""
    t0 = time.perf_counter_ns()
    states = call.service.embed_token_states
    try:  # no texts: the model's check alone (TEI's comes before it reads the text)
        await states([], truncate=False)
    except InvalidFieldError as err:
        raise with_grpc_code(err, grpc.StatusCode.FAILED_PRECONDITION) from None
    _checked(msg)
    if msg.truncation_direction == pb.TRUNCATION_DIRECTION_LEFT:
        raise InvalidFieldError("only TRUNCATION_DIRECTION_RIGHT is served for per-token output",
                                field="truncation_direction")
    try:
        ragged, counts, cut = await states([msg.inputs], truncate=msg.truncate or call.st.cfg.auto_truncate)
    except (InvalidFieldError, PayloadTooLargeError) as err:
        raise _on_inputs(err) from None
    call.truncated = cut
    meta = pb.Metadata(compute_chars=len(msg.inputs), compute_tokens=sum(counts),
                       total_time_ns=time.perf_counter_ns() - t0)
    (matrix,) = ragged
    return pb.EmbedAllResponse(token_embeddings=[pb.TokenEmbedding(embeddings=row) for row in matrix.tolist()],
                               metadata=meta)


async def _tokenize_one(call: Call, msg: pb.EncodeRequest) -> pb.EncodeResponse:
    """One EncodeRequest, as POST /tokenize reads one text (byte offsets, as TEI's)."""
    if msg.HasField("prompt_name"):
        raise InvalidFieldError(f"prompt_name {msg.prompt_name!r} is not a prompt of the model (it defines none)",
                                field="prompt_name")
    spans = getattr(call.service.backend, "token_spans", None)
    if spans is None:
        raise InvalidFieldError(f"the model {call.service.model_id} has no tokenizer to show", field="inputs")
    text = msg.inputs
    (row,) = await call.service.in_cpu_pool(spans, [text], msg.add_special_tokens)
    tokens = []
    for tok_id, token, special, start, stop in row:
        if special:
            tokens.append(pb.SimpleToken(id=tok_id, text=token, special=True))
        else:
            tokens.append(pb.SimpleToken(id=tok_id, text=text[start:stop], special=False,
                                         start=len(text[:start].encode()), stop=len(text[:stop].encode())))
    return pb.EncodeResponse(tokens=tokens)


async def _decode_one(call: Call, msg: pb.DecodeRequest) -> pb.DecodeResponse:
    decode = getattr(call.service.backend, "decode_ids", None)
    if decode is None:
        raise InvalidFieldError(f"the model {call.service.model_id} has no tokenizer to decode with", field="ids")
    return pb.DecodeResponse(text=await call.service.in_cpu_pool(decode, list(msg.ids), msg.skip_special_tokens))


def handlers(st: Any) -> list[grpc.GenericRpcHandler]:
    def method(name: str, one: Any) -> tuple[Any, Any]:
        """A unary method and its stream over ``one(call, message)``, each message through the pipeline."""
        full = f"/tei.v1.{name}"

        async def single(msg: Any, context: grpc.aio.ServicerContext) -> Any:
            return await run_grpc(st, context, full, lambda call: one(call, msg))

        async def streamed(msgs: AsyncIterator[Any], context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
            async def each(msg: Any) -> Any:
                if isinstance(msg, DensewireError):
                    await abort(context, msg)
                return await run_grpc(st, context, full + "Stream", lambda call: one(call, msg))

            async for out in ordered(msgs, each):
                yield out

        return single, streamed

    async def info(_msg: pb.InfoRequest, context: grpc.aio.ServicerContext) -> pb.InfoResponse:
        try:
            st.check_auth(incoming_of(context))
            return _info(st)
        except DensewireError as err:
            await abort(context, err)
            raise

    embed, embed_stream = method("Embed/Embed", _embed_one)
    sparse, sparse_stream = method("Embed/EmbedSparse", _embed_sparse_one)
    every, every_stream = method("Embed/EmbedAll", _embed_all_one)
    tokenize, tokenize_stream = method("Tokenize/Tokenize", _tokenize_one)
    decode, decode_stream = method("Tokenize/Decode", _decode_one)
    return [
        service("tei.v1.Info", [("Info", unary(st, info, pb.InfoRequest, pb.InfoResponse))]),
        service("tei.v1.Embed", [
            ("Embed", unary(st, embed, pb.EmbedRequest, pb.EmbedResponse)),
            ("EmbedStream", stream(st, embed_stream, pb.EmbedRequest, pb.EmbedResponse)),
            ("EmbedSparse", unary(st, sparse, pb.EmbedSparseRequest, pb.EmbedSparseResponse)),
            ("EmbedSparseStream", stream(st, sparse_stream, pb.EmbedSparseRequest, pb.EmbedSparseResponse)),
            ("EmbedAll", unary(st, every, pb.EmbedAllRequest, pb.EmbedAllResponse)),
            ("EmbedAllStream", stream(st, every_stream, pb.EmbedAllRequest, pb.EmbedAllResponse)),
        ]),
        service("tei.v1.Tokenize", [
            ("Tokenize", unary(st, tokenize, pb.EncodeRequest, pb.EncodeResponse)),
            ("TokenizeStream", stream(st, tokenize_stream, pb.EncodeRequest, pb.EncodeResponse)),
            ("Decode", unary(st, decode, pb.DecodeRequest, pb.DecodeResponse)),
            ("DecodeStream", stream(st, decode_stream, pb.DecodeRequest, pb.DecodeResponse)),
        ]),
    ]

