"""The Starlette application of ``densewire serve``.

``create_app(config)`` builds it; the model is loaded (in a thread) and the caches started in the
lifespan, before uvicorn accepts connections. Routes:

* ``POST /v1/embeddings``: OpenAI-compatible embeddings, negotiated response (SPEC.md 6 and 12), and
  vLLM's dialect of it (vllm.py);
* ``POST /embed`` (and ``POST /``), ``POST /tokenize``, ``GET /info``: TEI's routes; ``POST /v2/embed``:
  Cohere's; ``POST /api/embed``, ``POST /api/embeddings``: Ollama's (dialects.py, SPEC.md 6.4);
* ``GET /v2``, ``/v2/health/live``, ``/v2/health/ready``, ``GET /v2/models/{name}[/versions/{v}]`` (and
  ``/ready``), ``POST /v2/models/{name}[/versions/{v}]/infer``: the Open Inference Protocol (KServe v2,
  kserve_routes.py, SPEC.md 19);
* ``GET /v1/models``, ``GET /v1/models/{id}``: the served model names, with their quantization ranges;
* ``GET /v1/quantization/{id}``: the ranges of int8/uint8 answers by id (quantization.py, SPEC.md 17.6);
* ``GET /v1/tables``, ``GET``/``HEAD /v1/tables/{name}``: tables, pre-serialized (tables.py, SPEC.md 15.9);
* ``/demo/``: the demo page (static files);
* ``GET /``, ``GET /docs``: the server's own page and its API documentation (pages.py);
* ``GET /health``: liveness (model, Redis, pre-warm, tables), 200 once the model is loaded, else 503;
* ``GET /ready``: readiness, 503 while the model loads, while draining, while admission is full (lifecycle.py);
* ``GET /metrics``: Prometheus text;
* ``GET /openapi.json``: the OpenAPI 3.1 document.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import os
import time
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any, AsyncIterator

import orjson
from starlette.applications import Starlette
from starlette.datastructures import Headers, MutableHeaders
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route
from starlette.types import Message, Send

from densewire import (
    DensewireError,
    MethodNotAllowedError,
    NotFoundError,
    UnauthorizedError,
    UnavailableError,
)
from densewire._backends.blas import limit_blas_threads
from densewire._backends.registry import load_backend
from densewire._optional import require

from .admission import Admission, Ticket
from .config import ServerConfig, config_from_env, validate
from .dialects import cohere_embed, ollama_embed, ollama_embeddings, tei_embed, tei_info, tei_tokenize
from .sparse import tei_embed_sparse
from .tokens import tei_embed_all, vllm_pooling
from .embedder import Embedder
from .kserve_routes import (kserve_infer, kserve_live, kserve_model_metadata, kserve_model_ready, kserve_ready,
                            kserve_server_metadata)
from .errorlog import ErrorLogMiddleware
from .lifecycle import Lifecycle
from .logs import configure_logging, log
from .metrics import CONTENT_TYPE_LATEST, Metrics
from .negotiation import VARY
from .openapi import build_openapi
from .quantization import LazyQuantizer, calibrates_at_load
from .pages import DocsFiles, cpu_features_of, docs, home, ready_block
from .pipeline import Call, _parse, _state, openai_error, run_call
from .responses import ErrorResponse
from .tables.config import table_specs
from .tables.registry import TableRegistry
from .tables.routes import DemoFiles, get_table, list_tables
from .vllm import check_vllm_format, render_vllm_bytes, render_vllm_json, vllm_id

__all__ = ["create_app", "app_from_env", "ServerState"]


class ServerState:
    """What the handlers share: config, metrics, the embedder once loaded."""

    def __init__(self, cfg: ServerConfig, backend: Any = None) -> None:
        self.cfg = cfg
        self.metrics = Metrics()
        self.cpu_pool = ThreadPoolExecutor(max(2, os.cpu_count() or 2), thread_name_prefix="densewire-cpu")
        self._given_backend = backend
        self.embedder: Embedder | None = None
        self.ready = False
        self.started_at = time.time()
        self.admission = Admission(cfg.max_concurrent_requests, cfg.request_timeout, self.metrics)
        self.lifecycle = Lifecycle(self.metrics, self.admission, cfg.timeout_graceful_shutdown)
        self._api_key = cfg.api_key.encode() if cfg.api_key else None
        self.tables = TableRegistry(table_specs(cfg), metrics=self.metrics, compression=cfg.table_compression,
                                    compress_min_bytes=cfg.compress_min_bytes)

    async def start(self) -> None:
        await self.tables.start()  # tables build in the background while the model loads
        try:
            await self._start_model()
        except BaseException:
            await self.tables.stop()
            raise

    async def _start_model(self) -> None:
        if self.cfg.blas_threads:
            try:
                limit_blas_threads(self.cfg.blas_threads)
            except ImportError:
                log.warning("--blas-threads needs threadpoolctl (pip install threadpoolctl); ignored")
            else:
                log.info("BLAS limited to %d thread(s)", self.cfg.blas_threads)
        backend = self._given_backend
        if backend is None:
            t0 = time.perf_counter()
            log.info("loading model %r", self.cfg.model)
            backend = await asyncio.get_running_loop().run_in_executor(
                self.cpu_pool, partial(load_backend, self.cfg.model, **_engine_options(self.cfg),
                                       **self.cfg.backend_options))
            log.info("model %s loaded (%d dimensions, %d max tokens) in %.1f s", backend.name,
                     backend.dimensions, backend.max_tokens, time.perf_counter() - t0)
        self.embedder = Embedder(backend, self.cfg, self.metrics, self.cpu_pool)
        self.embedder.quantization = LazyQuantizer(backend, self.embedder.model_id)
        if calibrates_at_load(backend):
            try:
                await self.embedder.quantization.load(self.embedder.in_cpu_pool)
            except UnavailableError:
                pass  # logged; int8/uint8 requests try again and answer 503 while it fails
        self.metrics.redis_up.set(0)
        await self.embedder.start()
        self.ready = True
        self.metrics.ready.set(1)

    async def stop(self) -> None:
        self.ready = False
        self.metrics.ready.set(0)
        if self.embedder is not None:
            await self.embedder.close()
        await self.tables.stop()
        self.cpu_pool.shutdown(wait=False, cancel_futures=True)

    def check_auth(self, request: Any, public: bool = False) -> None:
        """Refuse a call without the API key (when one is set), unless the route is ``public``: ``request`` is
        anything with ``headers`` (a Starlette request, a pipeline.Incoming of HTTP headers or gRPC metadata)."""
        if self._api_key is None or public:
            return
        auth = request.headers.get("authorization")
        if not auth:
            raise UnauthorizedError("missing API key: send 'Authorization: Bearer <key>'", field="Authorization")
        scheme, _, token = auth.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(token.strip().encode(), self._api_key):
            raise UnauthorizedError("invalid API key", field="Authorization")

    def admit(self) -> Ticket:
        """Admission (admission.py): 503 with ``Connection: close`` while draining, 429 when full."""
        if self.lifecycle.draining:
            self.metrics.admission_rejections.labels("draining").inc()
            raise UnavailableError("the server is shutting down; retry on another replica")
        return self.admission.admit()

    def readiness(self) -> str | None:
        """Why a new embeddings request would not be served now (None: ready)."""
        if not self.ready:
            return "the model is not loaded yet"
        if self.lifecycle.draining:
            return "draining: the server is shutting down"
        if self.admission.full:
            return f"admission is full ({self.admission.active} of {self.admission.limit} requests)"
        return None

    def require_embedder(self) -> Embedder:
        if self.embedder is None or not self.ready:
            raise UnavailableError("the model is not loaded yet")
        return self.embedder


def _engine_options(cfg: ServerConfig) -> dict[str, Any]:
    """--engine, --precision, --quantize and --blas-threads (intra-op threads) for load_backend (issues 19, 26)."""
    return {"engine": cfg.engine, "precision": cfg.precision, "quantize": cfg.quantize,
            "threads": cfg.blas_threads or None}


def _engine_fields(e: Embedder) -> dict[str, Any]:
    """The engine, execution provider, precision and the CPU features that decided it, for /v1/models and
    /health (issues 19, 26)."""
    return {"engine": getattr(e.backend, "engine", type(e.backend).__name__),
            "execution_provider": getattr(e.backend, "execution_provider", None),
            "precision": getattr(e.backend, "precision", None),
            "cpu_features": list(cpu_features_of(e.backend))}


async def embeddings(request: Request) -> Response:
    """``POST /v1/embeddings``: OpenAI's request and response (SPEC.md 6), densewire's formats by Accept,
    and vLLM's dialect (vllm.py)."""

    async def handle(call: Call) -> Response:
        fmt, content_encoding = call.negotiate()
        body = await call.body()
        req = await _parse(call.st.cfg, call.service, body)
        if req.vllm:
            check_vllm_format(req, fmt)
        vectors, prompt_tokens = await call.embed(req)
        emb = await call.embeddings(req, vectors, prompt_tokens)
        if req.encoding_format in ("bytes", "bytes_only"):
            call.fmt = "raw"
            out, headers = render_vllm_bytes(emb, vectors, req, vllm_id(req, request.headers.get("x-request-id")))
            return call.prepared(out, headers, content_encoding, "application/octet-stream")
        if req.vllm and fmt == "json":
            out = render_vllm_json(emb, vectors, req, vllm_id(req, request.headers.get("x-request-id")))
            return call.prepared(_with_truncated(out, call.truncated), {"Content-Type": "application/json"},
                                 content_encoding)
        # SPEC.md 6.1: byteorder is only meaningful for Base64 strings; numbers and binary bodies are
        # little-endian always, and their responses say so (byteorder field, Densewire-Byteorder)
        byteorder = req.byteorder if fmt == "json" and req.encoding_format == "base64" else "little"
        if fmt == "json" and call.truncated:  # the JSON says which inputs were cut: rendered, then compressed
            plain = await call.render(emb, fmt, None, encoding_format=req.encoding_format, byteorder=byteorder)
            headers = {k: v for k, v in plain.headers.items() if k.lower() not in ("content-length", "vary")}
            return call.prepared(_with_truncated(bytes(plain.body), call.truncated), headers, content_encoding)
        return await call.render(emb, fmt, content_encoding, encoding_format=req.encoding_format,
                                 byteorder=byteorder)

    return await run_call(request, "/v1/embeddings", handle, openai_error)


def _with_truncated(body: bytes, cut: list[int]) -> bytes:
    """A JSON object with ``"truncated": [indexes of the inputs that were cut]`` as its last key (SPEC.md 6.2);
    unchanged when none was."""
    if not cut:
        return body
    return body[:body.rindex(b"}")] + b',"truncated":' + orjson.dumps(cut) + b"}"


def _model_card(e: Embedder, created: int, name: str | None = None) -> dict[str, Any]:
    card = {"id": name or e.model_id, "object": "model", "created": created, "owned_by": "densewire",
            "dimensions": e.dimensions, "max_tokens": e.max_tokens, **_engine_fields(e)}
    quantizer = e.quantization.value if e.quantization is not None else None
    if quantizer is not None:  # SPEC.md 17.6 (an upstream model's after its first int8/uint8 answer)
        card["quantization"] = quantizer.native.to_json()
    return card


def _json(doc: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(doc), status, media_type="application/json")


async def models(request: Request) -> Response:
    st = _state(request)
    try:
        st.check_auth(request)
        e = st.require_embedder()
        response = _json({"object": "list", "data": [_model_card(e, int(st.started_at), n) for n in e.served_names]})
    except DensewireError as err:
        response = ErrorResponse(err)
    st.metrics.requests.labels("/v1/models", str(response.status_code), "json").inc()
    return response


async def model(request: Request) -> Response:
    st = _state(request)
    try:
        st.check_auth(request)
        e = st.require_embedder()
        wanted = request.path_params["model_id"]
        if wanted not in e.aliases:
            raise NotFoundError(f"{wanted!r} is not served here; this server serves {e.names_text()}",
                                field="model")
        response = _json(_model_card(e, int(st.started_at), wanted if wanted in e.served_names else None))
    except DensewireError as err:
        response = ErrorResponse(err)
    st.metrics.requests.labels("/v1/models/{model}", str(response.status_code), "json").inc()
    return response


async def root(request: Request) -> Response:
    """``GET /``: the server's page; ``POST /``: TEI's /embed, at the root as TEI serves an embedding model
    (where ``huggingface_hub.InferenceClient(model=URL)`` posts)."""
    if request.method == "POST":
        return await tei_embed(request)
    return await home(request)


_IMMUTABLE = "public, max-age=31536000, immutable"


async def quantization(request: Request) -> Response:
    """``GET /v1/quantization/{id}``: the ranges with this id (SPEC.md 17.6), immutable."""
    st = _state(request)
    try:
        st.check_auth(request)
        e = st.require_embedder()
        qid = request.path_params["id"]
        quantizer = await e.quantization.load(e.in_cpu_pool)
        found = await e.in_cpu_pool(quantizer.by_id, qid)
        if found is None:
            raise NotFoundError(f"no quantization ranges with id {qid!r} for the model {e.model_id!r}; "
                                f"its native ones are {quantizer.native.id!r}", field="id")
        etag = f'"{found.id}"'
        headers = {"ETag": etag, "Cache-Control": _IMMUTABLE}
        if _etag_matches(request.headers.get("if-none-match"), etag):
            response = Response(status_code=304, headers=headers)
        else:
            response = Response(orjson.dumps(found.to_json()), 200, headers, media_type="application/json")
    except DensewireError as err:
        response = ErrorResponse(err)
    st.metrics.requests.labels("/v1/quantization/{id}", str(response.status_code), "json").inc()
    return response


def _etag_matches(header: str | None, etag: str) -> bool:
    if header is None:
        return False
    tags = [t.strip().removeprefix("W/") for t in header.split(",")]
    return "*" in tags or etag in tags


async def health(request: Request) -> Response:
    st = _state(request)
    e = st.embedder
    doc: dict[str, Any] = {"status": "ok" if st.ready else "unavailable"}
    if e is not None:
        doc.update(model=e.model_id, dimensions=e.dimensions, **_engine_fields(e), redis=e.redis_status,
                   cache={"entries": len(e.memory), "bytes": e.memory.bytes, "max_bytes": e.memory.max_bytes},
                   prewarm=e.prewarm_state)
    if st.tables.entries:
        doc["tables"] = st.tables.health()
        if st.ready and st.tables.degraded:
            doc["status"] = "degraded"  # a table failed to load or refresh; everything else answers
    return _json(doc, 200 if st.ready else 503)


async def ready(request: Request) -> Response:
    """Readiness (lifecycle.py): 200 when a new embeddings request would be admitted, else 503."""
    st = _state(request)
    why = st.readiness()
    doc = {"status": "ready" if why is None else "unavailable", "admitted": st.admission.active,
           "max_concurrent_requests": st.admission.limit, "draining": st.lifecycle.draining}
    if why is not None:
        doc["reason"] = why
    return _json(doc, 200 if why is None else 503)


async def metrics(request: Request) -> Response:
    st = _state(request)
    if st.embedder is not None:
        st.metrics.cache_bytes.set(st.embedder.memory.bytes)
        st.metrics.cache_entries.set(len(st.embedder.memory))
    st.tables.update_gauges()
    return Response(st.metrics.render(), 200, media_type=CONTENT_TYPE_LATEST)


def _vocab_size(backend: Any) -> int | None:
    for attr in ("vocab_size", "_vocab"):
        v = getattr(backend, attr, None)
        if isinstance(v, int) and v > 0:
            return v
    return None


async def openapi(request: Request) -> Response:
    st = _state(request)
    e = st.embedder
    doc = build_openapi(
        model_id=e.model_id if e else None, dimensions=e.dimensions if e else None,
        max_inputs=st.cfg.max_client_batch_size, api_key=st.cfg.api_key is not None,
        vocab_size=_vocab_size(e.backend) if e else None, tables=st.tables.names,
        public_tables=st.cfg.public_tables, can_cut=e.can_cut if e else True,
        tokenizer=hasattr(e.backend, "token_spans") if e else True, max_tokens=e.max_tokens if e else None,
        quantize=getattr(e, "quantization", None) is not None if e else False, token_ids_mode=e.token_ids if e else "cl100k_base",
    )
    return _json(doc)


async def _http_exception(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if exc.status_code == 404:
        return ErrorResponse(NotFoundError(f"no route {request.method} {request.url.path}"))
    if exc.status_code == 405:
        return ErrorResponse(MethodNotAllowedError(f"{request.method} is not allowed on {request.url.path}"),
                             dict(exc.headers or {}))
    body = {"error": {"message": str(exc.detail), "type": "invalid_request_error", "param": None,
                      "code": str(exc.status_code), "offset": None}}
    return Response(orjson.dumps(body), exc.status_code, {**(exc.headers or {}), "Vary": VARY},
                    media_type="application/json")


def create_app(cfg: ServerConfig | None = None, *, backend: Any = None) -> Starlette:
    """The ASGI app. ``backend``: an already loaded ``Backend`` (else ``cfg.model`` is loaded)."""
    cfg = cfg or ServerConfig()
    validate(cfg)
    state = ServerState(cfg, backend)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await state.start()
        grpc_server = None
        if cfg.grpc_port is not None:  # gRPC beside HTTP, in this event loop (grpc_server.py)
            grpc_server = require("densewire._server.grpc_server", extra="serve", feature="--grpc-port").GrpcServer(state)
            try:
                await grpc_server.start()
            except BaseException:
                await grpc_server.stop()
                await state.stop()
                raise
        log.info("%s", ready_block(app, state))
        state.lifecycle.install_signal_hooks()
        try:
            yield
        finally:
            state.lifecycle.remove_signal_hooks()
            if grpc_server is not None:
                await grpc_server.stop()
            await state.stop()

    routes = [
        Route("/", root, methods=["GET", "POST"]),
        Route("/docs", docs, methods=["GET"]),
        Mount("/docs", app=DocsFiles()),
        Route("/v1/embeddings", embeddings, methods=["POST"]),
        Route("/embed", tei_embed, methods=["POST"]),
        Route("/embed_all", tei_embed_all, methods=["POST"]),
        Route("/embed_sparse", tei_embed_sparse, methods=["POST"]),
        Route("/pooling", vllm_pooling, methods=["POST"]),
        Route("/tokenize", tei_tokenize, methods=["POST"]),
        Route("/info", tei_info, methods=["GET"]),
        Route("/v2/embed", cohere_embed, methods=["POST"]),
        Route("/api/embed", ollama_embed, methods=["POST"]),
        Route("/api/embeddings", ollama_embeddings, methods=["POST"]),
        Route("/v2", kserve_server_metadata, methods=["GET"]),
        Route("/v2/health/live", kserve_live, methods=["GET"]),
        Route("/v2/health/ready", kserve_ready, methods=["GET"]),
        Route("/v2/models/{model_name:path}/versions/{version}/infer", kserve_infer, methods=["POST"]),
        Route("/v2/models/{model_name:path}/infer", kserve_infer, methods=["POST"]),
        Route("/v2/models/{model_name:path}/versions/{version}/ready", kserve_model_ready, methods=["GET"]),
        Route("/v2/models/{model_name:path}/ready", kserve_model_ready, methods=["GET"]),
        Route("/v2/models/{model_name:path}/versions/{version}", kserve_model_metadata, methods=["GET"]),
        Route("/v2/models/{model_name:path}", kserve_model_metadata, methods=["GET"]),
        Route("/v1/models", models, methods=["GET"]),
        Route("/v1/models/{model_id:path}", model, methods=["GET"]),
        Route("/v1/quantization/{id}", quantization, methods=["GET"]),
        Route("/v1/tables", list_tables, methods=["GET"]),
        Route("/v1/tables/{name}", get_table, methods=["GET"]),
        Mount("/demo", app=DemoFiles()),
        Route("/health", health, methods=["GET"]),
        Route("/ready", ready, methods=["GET"]),
        Route("/metrics", metrics, methods=["GET"]),
        Route("/openapi.json", openapi, methods=["GET"]),
    ]
    middleware = [Middleware(ErrorLogMiddleware)]
    if cfg.cors_origins:
        middleware.append(_cors(cfg.cors_origins))
    app = Starlette(routes=routes, lifespan=lifespan, middleware=middleware,
                    exception_handlers={HTTPException: _http_exception})
    app.state.densewire = state
    return app


# what a page on another origin may send, and what its scripts may read of the answer: without
# Access-Control-Expose-Headers a browser hides Densewire-Shape, Densewire-Columns and ETag from fetch
CORS_REQUEST_HEADERS = ("Authorization", "Content-Type", "Content-Encoding", "If-None-Match",
                        "Densewire-Shape", "Densewire-Dtype", "Densewire-Byteorder", "Inference-Header-Content-Length")
CORS_EXPOSED_HEADERS = ("ETag", "Content-Encoding", "Retry-After", "X-Request-Id", "Densewire-Version", "Densewire-Model",
                        "Densewire-Shape", "Densewire-Dtype", "Densewire-Byteorder", "Densewire-Prompt-Tokens",
                        "Densewire-Total-Tokens", "Densewire-Truncated", "Densewire-Quantization", "Densewire-Table", "Densewire-Rows", "Densewire-Columns",
                        "Inference-Header-Content-Length")


def _cors(origins: tuple[str, ...]) -> Middleware:
    class CORSWithTiming(CORSMiddleware):
        """Starlette's CORS, plus ``Timing-Allow-Origin`` for the allowed origins: without it a page
        on another origin sees 0 for the sizes and times of Resource Timing (what /demo measures)."""

        async def send(self, message: Message, send: Send, request_headers: Headers) -> None:
            origin = request_headers.get("origin")
            if message["type"] == "http.response.start" and origin is not None and self.is_allowed_origin(origin):
                MutableHeaders(scope=message)["Timing-Allow-Origin"] = origin
            await super().send(message, send, request_headers)

    return Middleware(CORSWithTiming, allow_origins=list(origins), allow_methods=["GET", "HEAD", "POST"],
                      allow_headers=list(CORS_REQUEST_HEADERS), expose_headers=list(CORS_EXPOSED_HEADERS),
                      max_age=600)


def app_from_env() -> Starlette:
    """uvicorn factory for ``--workers N``: settings from ``DENSEWIRE_*`` variables."""
    cfg = config_from_env()
    extra = os.environ.get("DENSEWIRE_BACKEND_OPTIONS")
    if extra:
        cfg = cfg.replace(backend_options=orjson.loads(extra))
    configure_logging(cfg.log_level)
    return create_app(cfg)
