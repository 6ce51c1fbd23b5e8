"""The gRPC transport of the pipeline (grpc_server.py serves it): ``densewire serve --grpc-port PORT``.

Served: the Open Inference Protocol's ``inference.GRPCInferenceService`` (grpc_kserve.py), TEI's
``tei.v1`` (grpc_tei.py), the standard ``grpc.health.v1.Health`` (grpcio-health-checking) and server
reflection (grpcio-reflection). Each embeddings method is a thin adapter over the pipeline the HTTP
routes run (pipeline.run_pipeline): the same auth, admission, model, micro-batcher, caches, limits and
metrics. What this module adds is the transport:

* ``--api-key``: ``authorization: Bearer KEY`` metadata, else ``UNAUTHENTICATED``; health and reflection
  (what probes and tools call) and ``ServerLive``/``ServerReady`` need no key, as ``/health`` and ``/ready``;
* errors: :func:`grpc_code` maps SPEC.md 11's categories onto status codes (bad input ``INVALID_ARGUMENT``,
  an unknown model ``NOT_FOUND``, admission full ``RESOURCE_EXHAUSTED`` with ``grpc-retry-pushback-ms``,
  a draining or loading server ``UNAVAILABLE``), the message naming the field and offset; a bug is
  ``INTERNAL``, never bad input;
* message size: requests are received as bytes and parsed here, so that one over ``--max-body-bytes`` is
  ``RESOURCE_EXHAUSTED`` naming the flag (grpc's own limit, past which the core refuses the message
  itself, is kept at 4 times that to bound memory) and an unparsable one ``INVALID_ARGUMENT``;
* deadlines: the client's ``grpc-timeout`` shortens ``--request-timeout``; a call cancelled by its client or
  its deadline is cancelled here (``grpc.aio`` cancels its task), which takes its inputs out of the batcher;
* SIGTERM: the drain (lifecycle.py) sets the health statuses to ``NOT_SERVING`` and stops the gRPC server
  with the grace of ``--timeout-graceful-shutdown``: GOAWAY at once (no new calls), the calls in flight
  finish; the process exits when the admitted calls of both servers are answered.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, AsyncIterator, Awaitable, Callable, Iterable, TypeVar

import grpc
from google.protobuf.message import DecodeError, Message

from densewire import DensewireError, MalformedError, PayloadTooLargeError, RateLimitedError, UnavailableError

from .logs import log
from .pipeline import Call, Failure, Incoming, record, run_pipeline

__all__ = ["grpc_code", "with_grpc_code", "error_text", "incoming_of", "run_grpc", "abort", "unary", "stream",
           "ordered", "service", "STREAM_WINDOW"]

T = TypeVar("T")

#: SPEC.md 11's categories as gRPC status codes (what is not here is INVALID_ARGUMENT: bad input).
_CODES = {
    "unauthorized": grpc.StatusCode.UNAUTHENTICATED,
    "not_found": grpc.StatusCode.NOT_FOUND,
    "rate_limited": grpc.StatusCode.RESOURCE_EXHAUSTED,
    "payload_too_large": grpc.StatusCode.RESOURCE_EXHAUSTED,
    "unavailable": grpc.StatusCode.UNAVAILABLE,
    "method_not_allowed": grpc.StatusCode.UNIMPLEMENTED,
    "internal_error": grpc.StatusCode.INTERNAL,
}
#: requests of one stream being processed at once (their answers are sent in order)
STREAM_WINDOW = 16


def grpc_code(err: DensewireError) -> grpc.StatusCode:
    """The error's status code: one a dialect gave it (``with_grpc_code``, as TEI's FAILED_PRECONDITION for
    a model without the output asked for), else its category's."""
    return getattr(err, "grpc_code", None) or _CODES.get(err.category, grpc.StatusCode.INVALID_ARGUMENT)


def with_grpc_code(err: DensewireError, code: grpc.StatusCode) -> DensewireError:
    """Give an error the status code of the gRPC API whose dialect it answers (as dialects._with_status)."""
    err.grpc_code = code  # type: ignore[attr-defined]
    return err


def error_text(err: DensewireError) -> str:
    """The status message: the HTTP error's text (the field first), and the offset where there is one."""
    text = f"{err.field}: {err.message}" if err.field else err.message
    return text + (f" (offset {err.offset})" if err.offset is not None else "")


def incoming_of(context: grpc.aio.ServicerContext) -> Incoming:
    """The call as the pipeline reads it: the metadata as headers, the client's deadline; no body (the
    message is decoded) and no gone signal (grpc.aio cancels the call's task when its client leaves)."""
    headers = {k.lower(): v for k, v in (context.invocation_metadata() or ()) if isinstance(v, str)}
    remaining = context.time_remaining()
    deadline = time.monotonic() + remaining if remaining is not None and remaining < 1e9 else None
    return Incoming(headers, deadline=deadline)


def _trailers(err: DensewireError, headers: dict[str, str]) -> tuple[tuple[str, str], ...]:
    """``grpc-retry-pushback-ms`` (gRFC A6) on RESOURCE_EXHAUSTED from admission, and on UNAVAILABLE while
    draining, from the seconds the HTTP answer puts in ``Retry-After``."""
    retry = getattr(err, "retry_after", None) or headers.get("Retry-After")
    if retry is None or not isinstance(err, (RateLimitedError, UnavailableError)):
        return ()
    return (("grpc-retry-pushback-ms", str(int(float(retry) * 1000))),)


async def abort(context: grpc.aio.ServicerContext, err: DensewireError, headers: dict[str, str] | None = None) -> None:
    """End the call with the error's status code and message (raises, as ``context.abort`` does)."""
    await context.abort(grpc_code(err), error_text(err), trailing_metadata=_trailers(err, headers or {}))


async def run_grpc(st: Any, context: grpc.aio.ServicerContext, method: str,
                   handle: Callable[[Call], Awaitable[T]]) -> T:
    """The gRPC adapter of pipeline.run_pipeline: the handler's message, or the call aborted with the
    failure's status code; the metrics under the method's full name (status: the HTTP status of the
    error's category, 499 for a call its client cancelled)."""
    t0 = time.perf_counter()
    try:
        call, answer = await run_pipeline(st, incoming_of(context), handle)
    except asyncio.CancelledError:  # the client cancelled, or its deadline passed: grpc.aio cancelled us
        st.metrics.admission_rejections.labels("disconnected").inc()
        record(st.metrics, method, "grpc", "499", t0)
        raise
    if isinstance(answer, Failure):
        err = answer.error
        if err is None:  # the client left (nobody to answer)
            record(st.metrics, method, "grpc", "499", t0)
            await context.abort(grpc.StatusCode.CANCELLED, "the client cancelled the call")
        if answer.deadline:
            record(st.metrics, method, "grpc", "504", t0)
            await context.abort(grpc.StatusCode.DEADLINE_EXCEEDED, error_text(err))
        record(st.metrics, method, "grpc", str(err.http_status), t0)
        await abort(context, err, answer.headers)
    record(st.metrics, method, "grpc", "200", t0, answer.ByteSize() if isinstance(answer, Message) else 0)
    return answer  # type: ignore[return-value]


def parse_message(st: Any, raw: bytes, kind: type[Message]) -> Message:
    """A request received as bytes: over ``--max-body-bytes`` is payload_too_large, unparsable malformed."""
    limit = st.cfg.max_body_bytes
    if len(raw) > limit:
        raise PayloadTooLargeError(f"the {kind.DESCRIPTOR.full_name} message is {len(raw)} bytes, over the limit "
                                   f"of {limit} bytes (--max-body-bytes)")
    try:
        return kind.FromString(raw)
    except DecodeError as exc:
        raise MalformedError(f"not a valid {kind.DESCRIPTOR.full_name} message: {exc}") from None


Unary = Callable[[Any, grpc.aio.ServicerContext], Awaitable[Message]]
Streaming = Callable[[AsyncIterator[Any], grpc.aio.ServicerContext], AsyncIterator[Message]]


async def _internal(context: grpc.aio.ServicerContext, exc: Exception) -> None:
    """A bug: INTERNAL with the exception's type (grpc.aio would answer UNKNOWN), and the traceback logged."""
    log.exception("unexpected error in a gRPC call", exc_info=exc)
    await context.abort(grpc.StatusCode.INTERNAL, f"internal server error ({type(exc).__name__})")


def unary(st: Any, fn: Unary, request: type[Message], response: type[Message]) -> grpc.RpcMethodHandler:
    async def handler(raw: bytes, context: grpc.aio.ServicerContext) -> Message:
        try:
            msg = parse_message(st, raw, request)
        except DensewireError as err:
            await abort(context, err)
        try:
            return await fn(msg, context)
        except grpc.aio.AbortError:
            raise
        except Exception as exc:  # noqa: BLE001 - a bug still answers with a status of its own
            await _internal(context, exc)
            raise

    return grpc.unary_unary_rpc_method_handler(handler, response_serializer=response.SerializeToString)


def stream(st: Any, fn: Streaming, request: type[Message], response: type[Message]) -> grpc.RpcMethodHandler:
    async def handler(raws: AsyncIterator[bytes], context: grpc.aio.ServicerContext) -> AsyncIterator[Message]:
        async def messages() -> AsyncIterator[Any]:
            async for raw in raws:
                try:
                    yield parse_message(st, raw, request)
                except DensewireError as err:
                    yield err  # the method answers it in its stream's way
        try:
            async for out in fn(messages(), context):
                yield out
        except grpc.aio.AbortError:
            raise
        except Exception as exc:  # noqa: BLE001 - a bug still answers with a status of its own
            await _internal(context, exc)
            raise

    return grpc.stream_stream_rpc_method_handler(handler, response_serializer=response.SerializeToString)


async def ordered(requests: AsyncIterator[Any], fn: Callable[[Any], Awaitable[T]],
                  window: int = STREAM_WINDOW) -> AsyncIterator[T]:
    """``fn`` of each request of a stream, up to ``window`` at once, the answers in the requests' order
    (as TEI's streams answer); the ones in flight are cancelled when the stream ends early."""
    pending: asyncio.Queue[asyncio.Task[T] | None] = asyncio.Queue(window)

    async def feed() -> None:
        try:
            async for req in requests:
                await pending.put(asyncio.ensure_future(fn(req)))
        finally:
            await pending.put(None)

    feeder = asyncio.ensure_future(feed())
    inflight: list[asyncio.Task[T]] = []
    try:
        while True:
            task = await pending.get()
            if task is None:
                break
            inflight.append(task)
            try:
                yield await task
            finally:
                inflight.remove(task)
        await feeder  # a broken request stream raises here
    finally:
        feeder.cancel()
        while not pending.empty():
            t = pending.get_nowait()
            if t is not None:
                t.cancel()
        for t in inflight:
            t.cancel()


def service(name: str, methods: Iterable[tuple[str, grpc.RpcMethodHandler]]) -> grpc.GenericRpcHandler:
    return grpc.method_handlers_generic_handler(name, dict(methods))
