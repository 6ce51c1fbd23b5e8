"""The server introduces itself: ``GET /`` (a small HTML page: the model, the routes, copy-paste
examples with this server's own URL, links), ``GET /docs`` (Swagger UI over ``/openapi.json``, its
assets shipped in the package: no CDN, works offline) and the block the log prints at start.

The page and the log are built from the app's own route table, so they list what is served.
Everything taken from the request (the ``Host`` header) is HTML-escaped before it is written.
"""

from __future__ import annotations

import html
import re
import string
from pathlib import Path
from typing import Any, Iterable

from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import Receive, Scope, Send

from densewire import NotFoundError
from densewire._backends.precision import cpu_features, cpu_flags

from .config import ServerConfig
from .responses import ErrorResponse

__all__ = ["home", "docs", "DocsFiles", "STATIC_DIR", "DOCS_DIR", "route_lines", "startup_block", "ready_block", "engine_of",
           "cpu_features_of", "precision_line",
           "display_url"]

STATIC_DIR = Path(__file__).resolve().parent / "static"
#: Swagger UI (the npm package swagger-ui-dist) and its initializer, copied here by typescript/docs/build.mjs.
DOCS_DIR = STATIC_DIR / "docs"
_HOME = string.Template((STATIC_DIR / "home.html").read_text(encoding="utf-8"))

#: What each route does, for the page and the log (a route missing here is still listed).
_ABOUT = {
    "/": "this page (GET); TEI's /embed (POST), where huggingface_hub's InferenceClient(model=URL) posts",
    "/docs": "interactive API documentation (Swagger UI over /openapi.json)",
    "/v1/embeddings": "OpenAI-compatible embeddings (and vLLM's embed_dtype, endianness, bytes); JSON, raw, "
                      "MessagePack, Protobuf or Arrow by Accept",
    "/embed": "TEI's embeddings: {\"inputs\": [...]} -> [[...]]",
    "/tokenize": "TEI's tokenizer view: ids, tokens and byte offsets",
    "/embed_all": "TEI's per-token embeddings: [[[...]]], or a ragged tensor by Accept",
    "/embed_sparse": "TEI's sparse (SPLADE) embeddings: [[{index, value}]], or a sparse tensor by Accept",
    "/pooling": "vLLM's pooling, task token_embed: a matrix per input (float, base64, bytes)",
    "/info": "TEI's model and limits",
    "/v2/embed": "Cohere's embeddings: float, int8, uint8, binary, ubinary, base64",
    "/api/embed": "Ollama's embeddings",
    "/api/embeddings": "Ollama's older single-prompt embeddings",
    "/v2": "KServe v2 / Triton server metadata (Open Inference Protocol, SPEC.md 19)",
    "/v2/health/live": "KServe v2 liveness",
    "/v2/health/ready": "KServe v2 readiness (as /ready)",
    "/v2/models/{model_name:path}/versions/{version}/infer": "KServe v2 inference, one version",
    "/v2/models/{model_name:path}/infer": "KServe v2 inference: BYTES texts in, the embedding tensor out (JSON or binary)",
    "/v2/models/{model_name:path}/versions/{version}/ready": "KServe v2 model readiness, one version",
    "/v2/models/{model_name:path}/ready": "KServe v2 model readiness",
    "/v2/models/{model_name:path}/versions/{version}": "KServe v2 model metadata, one version",
    "/v2/models/{model_name:path}": "KServe v2 model metadata: tensors, datatypes, shapes",
    "/v1/models": "the served model names",
    "/v1/models/{model_id:path}": "one model",
    "/v1/quantization/{id}": "the ranges of int8/uint8 answers, by id (immutable)",
    "/v1/tables": "the served tables, with their build state",
    "/v1/tables/{name}": "a table in 7 formats, pre-serialized and pre-compressed",
    "/demo": "the tables on a map, every format measured in the browser",
    "/health": "liveness: model, Redis, tables",
    "/ready": "readiness: 503 while loading, draining or at --max-concurrent-requests",
    "/metrics": "Prometheus metrics",
    "/openapi.json": "the OpenAPI document",
}
_NO_CACHE = {"Cache-Control": "no-cache"}
_CONVERTER = re.compile(r":\w+}")  # {model_id:path} -> {model_id}


def _routes(routes: Iterable[BaseRoute]) -> list[tuple[str, str, str]]:
    """(methods, path, what) of each route, HEAD left out (it follows GET)."""
    out = []
    for r in routes:
        if isinstance(r, Route):
            methods = ", ".join(sorted(m for m in (r.methods or ()) if m != "HEAD")) or "GET"
            out.append((methods, _CONVERTER.sub("}", r.path), _ABOUT.get(f"{methods} {r.path}", _ABOUT.get(r.path, ""))))
        elif isinstance(r, Mount):
            if r.path == "/docs":
                continue  # the assets of /docs
            out.append(("GET", r.path + "/", _ABOUT.get(r.path, "")))
    return out


def route_lines(routes: Iterable[BaseRoute]) -> list[str]:
    """One line a route, ``GET    /v1/models   the served model``, for the start-up log."""
    rows = _routes(routes)
    wm = max(len(m) for m, _, _ in rows)
    wp = max(len(p) for _, p, _ in rows)
    return [f"{m:<{wm}}  {p:<{wp}}  {what}".rstrip() for m, p, what in rows]


def display_url(cfg: ServerConfig) -> str:
    """The URL a user on this machine opens: a wildcard bind address is reached through loopback;
    https when the server has a certificate (--ssl-certfile)."""
    host = {"0.0.0.0": "127.0.0.1", "::": "[::1]", "": "127.0.0.1"}.get(cfg.host, cfg.host)
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"{'https' if cfg.ssl_certfile else 'http'}://{host}:{cfg.port}"


def engine_of(backend: Any) -> str:
    """How the model runs: the backend's ``engine`` when it states one, else its class."""
    engine = getattr(backend, "engine", None)
    if isinstance(engine, str) and engine:
        return engine
    cls = type(backend)
    return f"{cls.__name__} ({cls.__module__})"


def cpu_features_of(backend: Any) -> tuple[str, ...]:
    """The CPU features that decided the backend's precision (issue 26): its own record, else this CPU's."""
    features = getattr(backend, "cpu_features", None)
    if features is None:
        features = cpu_features(cpu_flags())
    return tuple(features)


def precision_line(backend: Any) -> str:
    """``precision fp32 (CPU features: avx2)``, with the reason the engine chose it when it gave one."""
    precision = getattr(backend, "precision", None) or "not stated by the backend"
    features = ", ".join(cpu_features_of(backend)) or "none that decide precision"
    reason = getattr(backend, "precision_reason", None)
    return f"precision {precision} (CPU features: {features})" + (f": {reason}" if reason else "")


def startup_block(cfg: ServerConfig, routes: Iterable[BaseRoute], *, model: str, dimensions: int, max_tokens: int,
                  engine: str, tables: list[str], precision: str | None = None) -> str:
    """The one block the log prints when the server is ready: URL, model, engine, routes, demo."""
    url = display_url(cfg)
    where = f" (listening on all interfaces, {cfg.host})" if cfg.host in ("0.0.0.0", "::", "") else ""
    lines = [f"densewire serve is ready at {url}/{where}",
             f"  model    {model} ({dimensions} dimensions, {max_tokens} max tokens)",
             f"  engine   {engine}"]
    if precision:
        lines.append(f"           {precision}")
    if cfg.workers > 1:
        lines.append(f"  workers  {cfg.workers} (this block is printed by each)")
    if cfg.api_key:
        lines.append("  auth     Authorization: Bearer <--api-key> on /v1/*"
                     + (" (tables public)" if cfg.public_tables else ""))
    lines.append(f"  docs     {url}/docs   (OpenAPI: {url}/openapi.json)")
    if tables:
        lines.append(f"  demo     {url}/demo/   (tables: {', '.join(tables)})")
    else:
        lines.append("  demo     off: no tables are served (--no-demo-tables)")
    lines.append("  routes")
    lines.extend("    " + line for line in route_lines(routes))
    lines.append(f"  try      curl -s {url}/v1/embeddings -H 'Content-Type: application/json' "
                 "-d '{\"input\": [\"hello\"]}'")
    return "\n".join(lines)


def ready_block(app: Any, state: Any) -> str:
    """:func:`startup_block` of a started app (``state``: its ``ServerState``, the model loaded)."""
    e = state.embedder
    return startup_block(state.cfg, app.routes, model=e.model_id, dimensions=e.dimensions, max_tokens=e.max_tokens,
                         engine=engine_of(e.backend), tables=state.tables.names, precision=precision_line(e.backend))


def _base_url(request: Request) -> str:
    """This server as the client reached it (scheme and ``Host``), without a trailing slash."""
    return str(request.base_url).rstrip("/")


async def home(request: Request) -> Response:
    """``GET /``: what this server is and how to call it, with its own URL."""
    st = request.app.state.densewire
    e = st.embedder
    url = _base_url(request)
    if e is not None:
        model, model_line = e.model_id, (f"<strong>{html.escape(e.model_id)}</strong>: {e.dimensions} dimensions, "
                                         f"at most {e.max_tokens} tokens an input, run by {html.escape(engine_of(e.backend))} "
                                         f"in {html.escape(precision_line(e.backend))}")
    else:
        model, model_line = st.cfg.model, f"<strong>{html.escape(st.cfg.model)}</strong> is still loading"
    auth = " \\\n     -H \"Authorization: Bearer $DENSEWIRE_API_KEY\"" if st.cfg.api_key else ""
    api_key = 'os.environ["DENSEWIRE_API_KEY"]' if st.cfg.api_key else '"unused"'
    curl = (f"curl -s {url}/v1/embeddings -H 'Content-Type: application/json'{auth} \\\n"
            f"     -d '{{\"input\": [\"hello\", \"world\"]}}'")
    curl_raw = (f"curl -s {url}/v1/embeddings -H 'Content-Type: application/json'{auth} \\\n"
                "     -H 'Accept: application/octet-stream' -d '{\"input\": [\"hello\"], \"dtype\": \"float16\"}' "
                "-D - -o /dev/null")
    sdk = ("import os\nfrom openai import OpenAI\n\n" if st.cfg.api_key else "from openai import OpenAI\n\n") + (
        f"client = OpenAI(base_url=\"{url}/v1\", api_key={api_key})\n"
        f"response = client.embeddings.create(model=\"{model}\", input=[\"hello\", \"world\"])\n"
        "print(len(response.data[0].embedding))")
    rows = "\n".join(
        f"<tr><td>{html.escape(m)}</td><td><code>{_link(p) if 'GET' in m.split(', ') else html.escape(p)}</code>"
        f"</td><td>{html.escape(what)}</td></tr>"
        for m, p, what in _routes(request.app.routes))
    tables = st.tables.names
    page = _HOME.substitute(
        url=html.escape(url), model_line=model_line, routes=rows, curl=html.escape(curl),
        curl_raw=html.escape(curl_raw), sdk=html.escape(sdk),
        demo=(f'<a href="/demo/">/demo/</a>: the tables {html.escape(", ".join(tables))} on a map, every format '
              "fetched, decoded and measured in your browser" if tables else
              "<code>/demo/</code> is off: this server serves no tables"),
    )
    return HTMLResponse(page, headers=_NO_CACHE)


def _link(path: str) -> str:
    text = html.escape(path)
    if "{" in path or path in ("/v1/embeddings", "/"):
        return text
    return f'<a href="{text}">{text}</a>'


async def docs(request: Request) -> Response:
    """``GET /docs``: Swagger UI of ``/openapi.json``, from the package."""
    index = DOCS_DIR / "index.html"
    if not index.is_file():
        return ErrorResponse(NotFoundError(
            f"the API documentation is not built: {DOCS_DIR} has no index.html (typescript/docs/build.mjs "
            "copies Swagger UI there)", field="path"))
    return FileResponse(index, headers=_NO_CACHE)


class DocsFiles:
    """The assets of ``/docs`` (``/docs/swagger-ui-bundle.js``, ...), from ``DOCS_DIR``."""

    def __init__(self, directory: Path = DOCS_DIR) -> None:
        self._static = StaticFiles(directory=str(directory), check_dir=False)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._static(scope, receive, send)
