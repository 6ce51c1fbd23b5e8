"""The pipeline every embeddings call shares, whatever carries it: the HTTP routes (``POST /v1/embeddings``
and the other servers' routes of dialects.py) and the gRPC methods (grpc_call.py). :func:`run_pipeline` runs
auth, admission and the call's handler, and turns every failure into a :class:`Failure` (the error and
its headers); a handler gets a :class:`Call`, which reads the body, calls the model (``_embed``: caches,
token ids, truncation) and renders densewire's formats. The call itself is an :class:`Incoming`: its
headers (HTTP headers or gRPC metadata), its query, its body, the client's deadline and a signal that
the client has gone, so HTTP and gRPC are two thin adapters: :func:`run_call` (a Starlette request, the
route's error envelope) and grpc_call.py's (a ``grpc.aio`` context, status codes).

One named step per concern: ``_authorize`` (API key, model loaded) -> ``ServerState.admit``
(admission.py) -> ``Call.negotiate`` (Accept, Accept-Encoding) -> ``_read_body`` (Content-Type, size,
decompression) -> the route's parsing -> ``_embed`` (embedder.Embedder) -> ``_to_embeddings``
(the requested dtype) -> ``_render_format`` (responses.render_embeddings) -> ``record`` (metrics).
"""

from __future__ import annotations

import asyncio
import time
from functools import partial
from typing import Any, AsyncIterator, Awaitable, Callable, Mapping, TypeVar

import numpy as np
import orjson
from starlette.background import BackgroundTask
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from densewire import (
    DensewireError,
    Embeddings,
    InvalidFieldError,
    MalformedError,
    RateLimitedError,
    Tensor,
    UnavailableError,
    UnsupportedMediaTypeError,
    Usage,
    convert,
)

from .admission import ClientGone, ShuttingDown, Ticket, await_while_connected, wait_disconnect
from .compression import compress, read_body
from .config import ServerConfig
from .embedder import Embedder, too_long
from .limits import TRIM_AFTER_BYTES, release_memory
from .logs import log
from .metrics import Metrics
from .quantization import answer_dtype
from .negotiation import VARY, negotiate_encoding, negotiate_format
from .request import EmbeddingsRequest, parse_embeddings_request
from .responses import RESPONSE_CLASSES, ErrorResponse, render_embeddings
from .tokenids import cl100k, cl100k_loaded, reject_token_ids

__all__ = ["Call", "Incoming", "Failure", "run_pipeline", "run_call", "record", "ErrorRenderer", "openai_error",
           "TRUNCATED_HEADER"]

R = TypeVar("R")

#: Encoding cost per vector element, relative to copying it, by format; an encoding whose
#: estimated cost (elements x factor) reaches _THREAD_ENCODE_COST runs in the CPU pool, cheaper
#: ones on the event loop (a hop to a thread costs more than copying a few megabytes).
_ENCODE_FACTOR = {"raw": 0, "msgpack": 1, "protobuf": 1, "arrow": 2, "base64": 4, "float": 200}
_THREAD_ENCODE_COST = 4 << 20
_COMPRESS_FACTOR = 50
#: Request bodies from this size on are parsed in the CPU pool.
_THREAD_PARSE_BYTES = 256 * 1024



def _state(request: Request) -> Any:
    return request.app.state.densewire


class Incoming:
    """One call as the pipeline reads it, whatever carries it.

    ``headers``: lowercase names to values (HTTP headers, or gRPC metadata); ``query``: the URL's query
    (empty over gRPC); ``stream``: the body's chunks (None when the transport has decoded the call
    already, as gRPC has); ``gone``: an awaitable that returns when the client has left (None when the
    transport cancels the call itself, as ``grpc.aio`` does); ``deadline``: the client's own deadline
    (``time.monotonic()`` seconds; gRPC's ``grpc-timeout``), which shortens the server's
    ``--request-timeout``."""

    __slots__ = ("headers", "query", "stream", "gone", "deadline")

    def __init__(self, headers: Mapping[str, str], *, query: Mapping[str, str] | None = None,
                 stream: Callable[[], AsyncIterator[bytes]] | None = None,
                 gone: Callable[[], Awaitable[Any]] | None = None, deadline: float | None = None) -> None:
        self.headers, self.query, self.stream = headers, query or {}, stream
        self.gone, self.deadline = gone, deadline

    @classmethod
    def of_request(cls, request: Request) -> "Incoming":
        """An HTTP request: its headers, query and body; gone when the client disconnects."""
        return cls(request.headers, query=request.query_params, stream=request.stream,
                   gone=partial(wait_disconnect, request.receive))


class Failure:
    """A call that failed: the error to answer and the headers to answer it with (``Retry-After``, ...);
    ``error`` is None when the client has gone (nobody is left to answer); ``deadline``: the client's own
    deadline passed (gRPC answers DEADLINE_EXCEEDED, not the server's --request-timeout)."""

    __slots__ = ("error", "headers", "deadline")

    def __init__(self, error: DensewireError | None, headers: dict[str, str] | None = None, *,
                 deadline: bool = False) -> None:
        self.error, self.headers, self.deadline = error, headers or {}, deadline



def _encode_cost(fmt: str, encoding_format: str, nbytes: int, content_encoding: str | None) -> int:
    key = encoding_format if fmt == "json" else fmt
    cost = nbytes * _ENCODE_FACTOR[key]
    if content_encoding is not None:
        cost += nbytes * _COMPRESS_FACTOR
    return cost


def _check_content_type(value: str | None) -> None:
    if value is None:
        return  # curl -d without -H; the body must still be JSON
    media = value.split(";", 1)[0].strip().lower()
    if media == "application/json" or (media.startswith("application/") and media.endswith("+json")):
        return
    raise UnsupportedMediaTypeError(
        f"{value[:100]!r} is not supported; send application/json",
        field="Content-Type")


class Call:
    """One embeddings request in flight, whatever its dialect: what a route's handler needs from the
    shared pipeline (the body, the model call, the rendering) and what the runner records."""

    def __init__(self, st: Any, service: Embedder, incoming: Incoming, ticket: Ticket) -> None:
        self.st, self.service, self.incoming, self.ticket = st, service, incoming, ticket
        self.fmt = "json"  # the metrics label of the answer
        self.body_size = 0
        #: indexes of the inputs that were cut (Densewire-Truncated); empty when none was
        self.truncated: list[int] = []

    def negotiate(self) -> tuple[str, str | None]:
        """The negotiated format and content coding (SPEC.md 12)."""
        headers = self.incoming.headers
        self.fmt = negotiate_format(headers.get("accept"), self.incoming.query.get("format"))
        return self.fmt, negotiate_encoding(headers.get("accept-encoding"))

    async def body(self, *, any_content_type: bool = False) -> bytes:
        async with asyncio.timeout(self.ticket.remaining()):
            body = await _read_body(self.st.cfg, self.incoming, check_content_type=not any_content_type)
        self.body_size = len(body)
        return body

    async def json_body(self, *, any_content_type: bool = False) -> Any:
        """The body parsed as JSON (``malformed`` when it is not), in the CPU pool when large;
        ``any_content_type``: whatever ``Content-Type`` says (Ollama reads every body as JSON)."""
        body = await self.body(any_content_type=any_content_type)
        def parse() -> Any:
            try:
                return orjson.loads(body)
            except orjson.JSONDecodeError as exc:
                raise MalformedError(f"request body is not valid JSON: {exc}",
                                     offset=getattr(exc, "pos", None)) from None
        return parse() if len(body) < _THREAD_PARSE_BYTES else await self.service.in_cpu_pool(parse)

    async def embed(self, req: EmbeddingsRequest) -> tuple[np.ndarray, int]:
        """The model call, abandoned when the client leaves, the deadline passes or the server drains.
        The indexes of the inputs it cut are kept in ``truncated`` (the runner reports them)."""
        vectors, tokens, cut = await await_while_connected(
            _embed(self.service, req, self.st.metrics), self.incoming.gone, self.ticket, self.st.lifecycle.expired)
        self.truncated = cut
        return vectors, tokens

    async def embeddings(self, req: EmbeddingsRequest, vectors: np.ndarray, prompt_tokens: int) -> Embeddings:
        return await _to_embeddings(self.service, req, vectors, prompt_tokens)

    async def quantized(self, vectors: np.ndarray, dtype: str, dimensions: int | None) -> tuple[Tensor, str | None]:
        """The vectors in ``dtype`` (int8/uint8 with the server's calibrated ranges) and the quantization id."""
        tensor, quantization = await answer_dtype(self.service, vectors, dtype, dimensions)
        return tensor, quantization.id if quantization is not None else None

    async def render(self, emb: Embeddings, fmt: str, content_encoding: str | None, *,
                     encoding_format: str = "base64", byteorder: str = "little") -> Response:
        """densewire's negotiated body (SPEC.md 6-10), in the CPU pool when costly."""
        return await _render_format(self.st.cfg, self.service, emb, fmt, content_encoding,
                                    encoding_format=encoding_format, byteorder=byteorder)

    def prepared(self, body: bytes | memoryview, headers: dict[str, str], content_encoding: str | None,
                 media_type: str = "application/json") -> Response:
        """A dialect's own body, compressed like every answer, with ``Vary``."""
        headers = {**headers, "Vary": VARY}
        if content_encoding is not None and len(body) >= self.st.cfg.compress_min_bytes:
            body = compress(body, content_encoding)
            headers["Content-Encoding"] = content_encoding
        headers.setdefault("Content-Type", media_type)
        response = Response(bytes(body) if isinstance(body, memoryview) else body, 200)
        response.headers.update(headers)
        return response


#: a route's error envelope: (error, headers) -> response
ErrorRenderer = Callable[[DensewireError, dict[str, str]], Response]


async def run_pipeline(st: Any, incoming: Incoming, handle: Callable[[Call], Awaitable[R]]) -> tuple[Call | None, R | Failure]:
    """The steps every embeddings call shares, whatever its transport: auth (unauthorized), a loaded
    model (unavailable), admission (rate_limited, or unavailable while draining), the handler (which
    reads, parses, embeds and renders), the deadline (unavailable), a client that left (a Failure
    without error), a bug (internal_error). Returns the call (None when refused before admission) and
    the handler's answer or the Failure; the admission slot is given back either way."""
    ticket: Ticket | None = None
    call: Call | None = None
    try:
        service = _authorize(st, incoming)
        ticket = st.admit()
        ticket.shorten(incoming.deadline)
        call = Call(st, service, incoming, ticket)
        answer = await handle(call)
        ticket.release(completed=True)
        return call, answer
    except DensewireError as err:
        return call, Failure(err, _error_headers(st, err))
    except TimeoutError:
        err = st.admission.timed_out()
        if ticket is not None and incoming.deadline is not None and ticket.deadline == incoming.deadline:
            return call, Failure(UnavailableError("the call's deadline passed before the model answered"),
                                 deadline=True)
        return call, Failure(err, {"Retry-After": str(st.admission.retry_after())})
    except ShuttingDown:
        return call, Failure(UnavailableError("the server is shutting down; retry on another replica"),
                             {"Connection": "close", "Retry-After": "1"})
    except (ClientDisconnect, ClientGone):
        st.metrics.admission_rejections.labels("disconnected").inc()
        return call, Failure(None)
    except Exception as exc:  # noqa: BLE001 - a bug must still answer with the envelope
        log.exception("unexpected error", exc_info=exc)
        return call, Failure(DensewireError(f"internal server error ({type(exc).__name__})"))
    finally:
        if ticket is not None:
            ticket.release()


async def run_call(request: Request, route: str, handle: Callable[[Call], Awaitable[Response]],
                   error: ErrorRenderer = ErrorResponse) -> Response:
    """The HTTP adapter of :func:`run_pipeline`: a failure answered in the route's error envelope (401,
    503, 429 with ``Retry-After``, 4xx, 500), a client that left answered nothing (counted as 499),
    ``Densewire-Truncated`` on an answer that cut inputs, and the metrics."""
    st = _state(request)
    t0 = time.perf_counter()
    call, answer = await run_pipeline(st, Incoming.of_request(request), handle)
    fmt = call.fmt if call else "json"
    if isinstance(answer, Failure):
        if answer.error is None:
            st.metrics.requests.labels(route, "499", fmt).inc()
            return Response(status_code=400)
        response = error(answer.error, answer.headers)
    else:
        response = answer
        if call is not None and call.truncated and response.status_code == 200:
            _report_truncated(st.metrics, route, call.truncated, response)
        if max(call.body_size if call else 0, len(response.body)) >= TRIM_AFTER_BYTES:
            response.background = BackgroundTask(release_memory)  # after the response is sent
    status = response.status_code
    nbytes = len(response.body) if status == 200 else 0
    record(st.metrics, route, fmt, str(status), t0, nbytes, response.headers.get("content-encoding", "identity"))
    return response



#: the response header that says how many inputs were cut (issue 27: no silent truncation)
TRUNCATED_HEADER = "Densewire-Truncated"


def _report_truncated(m: Metrics, route: str, cut: list[int], response: Response) -> None:
    """Say that inputs were cut: the header (their count), the counter, a log line with the indexes."""
    response.headers[TRUNCATED_HEADER] = str(len(cut))
    m.truncated_inputs.labels(route).inc(len(cut))
    shown = ", ".join(map(str, cut[:20])) + (", ..." if len(cut) > 20 else "")
    log.info("%s: cut %d input(s) to the token limit: index %s", route, len(cut), shown)


def _error_headers(st: Any, err: DensewireError) -> dict[str, str]:
    """``Retry-After`` on a 429; ``Connection: close`` on the 503 of a draining server."""
    if isinstance(err, RateLimitedError):  # admission's 429 carries the seconds it promised the client
        return {"Retry-After": str(getattr(err, "retry_after", None) or st.admission.retry_after())}
    if isinstance(err, UnavailableError) and st.lifecycle.draining:
        return {"Connection": "close", "Retry-After": "1"}
    return {}


def _authorize(st: Any, incoming: Incoming) -> Embedder:
    """Auth: the API key (401), then a loaded model (503)."""
    st.check_auth(incoming)
    return st.require_embedder()


async def _read_body(cfg: ServerConfig, incoming: Incoming, *, check_content_type: bool = True) -> bytes:
    """Body reading: a JSON ``Content-Type`` (415), the body decompressed, at most ``--max-body-bytes`` (413)."""
    if incoming.stream is None:
        raise RuntimeError("this call's transport decoded its body: the handler reads its fields")
    if check_content_type:
        _check_content_type(incoming.headers.get("content-type"))
    return await read_body(
        incoming.stream(), limit=cfg.max_body_bytes,
        content_encoding=incoming.headers.get("content-encoding"),
        content_length=incoming.headers.get("content-length"),
    )


async def _parse(cfg: ServerConfig, service: Embedder, body: bytes) -> EmbeddingsRequest:
    """Parsing: the OpenAI request (in the CPU pool when large), the model judged first (a 404 that names
    it, whatever else is wrong), then the fields, then ``dimensions`` against the model's Matryoshka sizes."""
    parse = partial(parse_embeddings_request, body, max_inputs=cfg.max_client_batch_size,
                    native_dimensions=service.dimensions, max_tokens=service.max_tokens,
                    auto_truncate=cfg.auto_truncate, check_model=service.check_model)
    req = parse() if len(body) < _THREAD_PARSE_BYTES else await service.in_cpu_pool(parse)
    service.check_dimensions(req.dimensions)
    return req


def openai_error(err: DensewireError, headers: dict[str, str]) -> Response:
    """The OpenAI/vLLM route's errors: OpenAI's envelope, and 400 for an invalid parameter, as OpenAI and
    vLLM answer it (their SDKs raise BadRequestError on 400), with densewire's code, param and offset."""
    return ErrorResponse(err, headers, status=400 if isinstance(err, InvalidFieldError) else None)


async def _embed(service: Embedder, req: EmbeddingsRequest, m: Metrics) -> tuple[np.ndarray, int, list[int]]:
    """The model call: texts or token ids to float32 vectors, the prompt tokens counted, and the indexes
    of the inputs that were cut (to the model's maximum or to ``truncate_prompt_tokens``).

    Token ids are read as ``--token-ids`` says (tokenids.py): decoded from cl100k_base to text (then
    counted, and cut, in the model's own tokens), refused, or the model's own ids."""
    max_tokens = service.max_tokens
    texts = req.texts
    mode = req.token_ids_as or service.token_ids
    if texts is None and mode != "model":
        if mode == "reject":
            raise reject_token_ids()
        seqs = req.token_ids or []
        fields = ["input"] if req.flat else [f"input[{i}]" for i in range(len(seqs))]
        vocabulary = cl100k() if cl100k_loaded() else await service.in_cpu_pool(cl100k)
        texts = vocabulary.decode_all(seqs, fields)
    cut: list[int]
    if texts is not None:
        cutting = req.truncate or req.token_limit is not None
        if cutting and (req.truncation_side == "left" or (req.token_limit is not None and req.token_limit < max_tokens)):
            field = "truncate_prompt_tokens" if req.token_limit is not None else "truncation_side"
            vectors, counts, cut = await service.embed_texts_cut(texts, req.dimensions, req.token_limit,
                                                                 req.truncation_side, field)
        else:
            vectors, counts = await service.embed_texts(texts, req.dimensions, truncate=req.truncate)
            cut = [i for i, c in enumerate(counts) if c > max_tokens]
    else:
        counts = [len(s) for s in req.token_ids]  # type: ignore[union-attr]
        if not req.truncate:
            for i, c in enumerate(counts):
                if c > max_tokens:
                    raise too_long(i, c, max_tokens)
        ids = req.token_ids or []
        keep = min(req.token_limit or max_tokens, max_tokens)
        cut = [i for i, c in enumerate(counts) if c > keep]
        if req.token_limit is not None or req.truncation_side == "left":
            ids = [s[:keep] if req.truncation_side == "right" else s[len(s) - keep:] for s in ids]
            counts = [len(s) for s in ids]
        vectors = await service.embed_token_ids(ids, req.dimensions)
    m.inputs.inc(len(counts))
    return vectors, sum(min(c, max_tokens) for c in counts), cut


async def _to_embeddings(service: Embedder, req: EmbeddingsRequest, vectors: np.ndarray,
                         prompt_tokens: int) -> Embeddings:
    """Conversion: the vectors in the requested dtype (SPEC.md 3; int8/uint8 quantized by SPEC.md 17,
    named by their quantization id), with the model and usage."""
    tensor, quantization = await answer_dtype(service, vectors, req.dtype, req.dimensions)
    return Embeddings(tensor, model=service.model_id, usage=Usage(prompt_tokens, prompt_tokens),
                      quantization=quantization.id if quantization is not None else None)


async def _render_format(cfg: ServerConfig, service: Embedder, emb: Embeddings, fmt: str,
                         content_encoding: str | None, *, encoding_format: str, byteorder: str) -> Response:
    """Rendering: the negotiated format and content coding, in the CPU pool when costly."""
    render = partial(render_embeddings, emb, fmt, encoding_format=encoding_format,
                     byteorder=byteorder, content_encoding=content_encoding,
                     compress_min_bytes=cfg.compress_min_bytes)
    if _encode_cost(fmt, encoding_format, emb.array.nbytes, content_encoding) >= _THREAD_ENCODE_COST:
        out, headers = await service.in_cpu_pool(render)
    else:
        out, headers = render()
    return RESPONSE_CLASSES[fmt].prepared(out, headers)


def record(m: Metrics, route: str, fmt: str, status: str, t0: float, nbytes: int = 0,
           encoding: str = "identity") -> None:
    """Metrics: the call by route (an HTTP path or a gRPC method), status (HTTP's, or the HTTP status of
    a gRPC code's category) and format, its latency, and the bytes of an answer."""
    if status == "200":
        m.bytes_out.labels(fmt, encoding).inc(nbytes)
    m.requests.labels(route, status, fmt).inc()
    m.latency.labels(route).observe(time.perf_counter() - t0)
