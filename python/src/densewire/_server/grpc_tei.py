"""TEI's gRPC API (``tei.v1``, proto/tei/v1/tei.proto) on densewire's pipeline, answered as TEI's
router/src/grpc/server.rs answers: ``Info``; ``Embed.Embed`` and ``Embed.EmbedStream`` (one text a
message; ``normalize`` unset means true; ``truncate`` or ``--auto-truncate``; ``dimensions``; the answers of
a stream in its requests' order, its first error ending it); ``Tokenize.Tokenize``/``TokenizeStream`` and
``Tokenize.Decode``/``DecodeStream``. The TEI HTTP routes' rules are the same functions (dialects.py):
the same vectors, the same errors (TEI's Validation/Empty are INVALID_ARGUMENT, Overloaded
RESOURCE_EXHAUSTED, Unhealthy UNAVAILABLE). The other methods of tei.proto answer UNIMPLEMENTED.
"""

from __future__ import annotations

import time
from typing import Any, AsyncIterator

import grpc

from densewire import DensewireError, InvalidFieldError, __version__

from .dialects import _length_error, _normalize, _request, _with_status
from .grpc_call import abort, incoming_of, ordered, run_grpc, service, stream, unary
from .grpcpb import tei_pb2 as pb
from .pipeline import Call

__all__ = ["handlers"]

_EMBED_HINT = "send truncate: true to embed its first tokens, or run the server with --auto-truncate"


def _info(st: Any) -> pb.InfoResponse:
    e = st.require_embedder()
    cfg = st.cfg
    return pb.InfoResponse(version=__version__, model_id=e.model_id, model_dtype="float32",
                           model_type=pb.MODEL_TYPE_EMBEDDING, max_concurrent_requests=cfg.max_concurrent_requests,
                           max_input_length=e.max_tokens, max_batch_tokens=cfg.max_batch_tokens,
                           max_client_batch_size=cfg.max_client_batch_size, tokenization_workers=1)


async def _embed_one(call: Call, msg: pb.EmbedRequest) -> pb.EmbedResponse:
    """One EmbedRequest, as POST /embed reads one text."""
    t0 = time.perf_counter_ns()
    cfg, service_ = call.st.cfg, call.service
    if not msg.inputs:
        raise _with_status(InvalidFieldError("`inputs` cannot be empty", field="inputs"), 400, "Empty")
    if msg.HasField("prompt_name"):
        raise InvalidFieldError(f"prompt_name {msg.prompt_name!r} is not a prompt of the model (it defines none)",
                                field="prompt_name")
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
    tokenize, tokenize_stream = method("Tokenize/Tokenize", _tokenize_one)
    decode, decode_stream = method("Tokenize/Decode", _decode_one)
    return [
        service("tei.v1.Info", [("Info", unary(st, info, pb.InfoRequest, pb.InfoResponse))]),
        service("tei.v1.Embed", [
            ("Embed", unary(st, embed, pb.EmbedRequest, pb.EmbedResponse)),
            ("EmbedStream", stream(st, embed_stream, pb.EmbedRequest, pb.EmbedResponse)),
        ]),
        service("tei.v1.Tokenize", [
            ("Tokenize", unary(st, tokenize, pb.EncodeRequest, pb.EncodeResponse)),
            ("TokenizeStream", stream(st, tokenize_stream, pb.EncodeRequest, pb.EncodeResponse)),
            ("Decode", unary(st, decode, pb.DecodeRequest, pb.DecodeResponse)),
            ("DecodeStream", stream(st, decode_stream, pb.DecodeRequest, pb.DecodeResponse)),
        ]),
    ]

