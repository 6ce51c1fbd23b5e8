"""``densewire serve``: flags (each also a ``DENSEWIRE_*`` variable) and the uvicorn runner."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, Callable, Sequence

import orjson

from .._optional import missing, require
from .config import SETTINGS, ServerConfig, config_from_env, config_to_env, env_name, validate
from .logs import configure_logging

__all__ = ["add_serve_command", "add_serve_arguments", "config_from_args", "run_server", "main"]

_DESCRIPTION = """\
Serve embeddings over an OpenAI-compatible HTTP API (POST /v1/embeddings, GET /v1/models),
answering in JSON, raw bytes, MessagePack, Protobuf or Arrow as the client's Accept asks; in the
dialects of other servers' clients too: vLLM's fields on /v1/embeddings (embed_dtype, endianness,
encoding_format bytes), TEI's POST /embed, /tokenize and GET /info, Cohere's POST /v2/embed,
Ollama's POST /api/embed and /api/embeddings; with --grpc-port, gRPC beside HTTP: the Open
Inference Protocol (Triton's and KServe's clients), TEI's tei.v1, health and reflection; and
tables (GET /v1/tables/NAME, from files, SQLite or PostgreSQL; the demo tables 'points' and
'points_f32' by default) in seven formats, every one pre-serialized and pre-compressed.

Every flag can also be set by an environment variable: --max-batch-tokens is
DENSEWIRE_MAX_BATCH_TOKENS, --redis-url is DENSEWIRE_REDIS_URL, and so on. A flag wins over its
variable. The default address is 127.0.0.1:8000; in a container use --host 0.0.0.0."""


def _argument_type(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """``parse`` for argparse: its ValueError's message is shown (argparse would print only
    'invalid _size value')."""

    def argument(text: str) -> Any:
        try:
            return parse(text)
        except ValueError as exc:
            msg = str(exc) or "invalid value"
            raise argparse.ArgumentTypeError(msg if repr(text) in msg else f"{text!r}: {msg}") from None

    return argument


def _no_name() -> str:
    raise ValueError("a model name must not be empty")


def add_serve_arguments(parser: argparse.ArgumentParser) -> None:
    for s in SETTINGS:
        flag = "--" + s.name.replace("_", "-")
        help_text = f"{s.help} [env {env_name(s.name)}]"
        if s.flag_type == "bool":
            parser.add_argument(flag, dest=s.name, action=argparse.BooleanOptionalAction, default=None,
                                help=help_text)
        elif s.flag_type == "append":
            parser.add_argument(flag, dest=s.name, action="append", default=None, metavar=s.metavar,
                                help=help_text)
        elif s.flag_type == "names":
            parser.add_argument(flag, dest=s.name, action="extend", nargs="+", default=None, metavar=s.metavar,
                                type=_argument_type(lambda text: text.strip() or _no_name()), help=help_text)
        else:
            parser.add_argument(flag, dest=s.name, type=_argument_type(s.parse), default=None, metavar=s.metavar,
                                choices=s.choices, help=help_text)
    parser.add_argument(
        "--backend-option", dest="backend_option", action="append", default=None, metavar="KEY=VALUE",
        help="option passed to the backend (repeatable), e.g. model=NAME for 'upstream:URL'; values are "
             "read as JSON when they parse, else as strings [env DENSEWIRE_BACKEND_OPTIONS as a JSON object]")


def _parse_backend_options(items: Sequence[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise SystemExit(f"densewire serve: --backend-option wants KEY=VALUE, not {item!r}")
        try:
            out[key.strip()] = orjson.loads(value)
        except orjson.JSONDecodeError:
            out[key.strip()] = value
    return out


def config_from_args(args: argparse.Namespace, environ: dict[str, str] | None = None) -> ServerConfig:
    """Defaults, overridden by ``DENSEWIRE_*`` variables, overridden by the flags given."""
    env = dict(os.environ if environ is None else environ)
    cfg = config_from_env(env)
    changes = {s.name: (tuple(getattr(args, s.name)) if s.flag_type == "append"
                        else tuple(dict.fromkeys(getattr(args, s.name))) if s.flag_type == "names"
                        else getattr(args, s.name))
               for s in SETTINGS if getattr(args, s.name, None) is not None}
    cfg = cfg.replace(**changes)
    options: dict[str, Any] = {}
    if env.get("DENSEWIRE_BACKEND_OPTIONS"):
        loaded = orjson.loads(env["DENSEWIRE_BACKEND_OPTIONS"])
        if not isinstance(loaded, dict):
            raise ValueError("DENSEWIRE_BACKEND_OPTIONS must be a JSON object")
        options.update(loaded)
    if getattr(args, "backend_option", None):
        options.update(_parse_backend_options(args.backend_option))
    return cfg.replace(backend_options=options)


def run_server(cfg: ServerConfig) -> int:
    """Run uvicorn until SIGINT/SIGTERM (which drains requests in flight), then return 0.

    Connections are served by :class:`densewire._server.protocol.HTTPProtocol`: HTTP/1.1 by httptools
    (upgrade offers answered as HTTP/1.1), HTTP/2 by zttp (prior knowledge, or ALPN h2 with TLS)."""
    uvicorn = require("uvicorn", extra="serve", feature="densewire serve")
    validate(cfg)
    configure_logging(cfg.log_level)
    protocol = require("densewire._server.protocol", extra="serve", feature="densewire serve")
    common: dict[str, Any] = dict(
        host=cfg.host, port=cfg.port, log_level=cfg.log_level, access_log=cfg.access_log,
        timeout_graceful_shutdown=cfg.timeout_graceful_shutdown, timeout_keep_alive=cfg.timeout_keep_alive,
        lifespan="on", server_header=False, proxy_headers=True, forwarded_allow_ips="127.0.0.1",
        http=protocol.HTTPProtocol, ssl_keyfile=cfg.ssl_keyfile, ssl_certfile=cfg.ssl_certfile,
    )
    if cfg.workers > 1:
        os.environ.update(config_to_env(cfg))
        os.environ["DENSEWIRE_BACKEND_OPTIONS"] = orjson.dumps(cfg.backend_options).decode()
        uvicorn.run("densewire._server.app:app_from_env", factory=True, workers=cfg.workers, **common)
        return 0
    app = require("densewire._server.app", extra="serve", feature="densewire serve").create_app(cfg)
    server = uvicorn.Server(uvicorn.Config(app, **common))
    server.run()
    return 0 if server.started else 1


#: The server's own dependencies (densewire[serve]), checked before anything starts.
SERVER_MODULES = ("starlette", "uvicorn", "httptools", "zttp", "orjson", "brotli", "zstandard", "redis", "prometheus_client")


#: What --grpc-port needs besides (densewire[serve] has them).
GRPC_MODULES = ("grpc", "grpc_health", "grpc_reflection", "google.protobuf")


def _missing_grpc_modules() -> list[str]:
    return missing(*GRPC_MODULES)


def _missing_modules() -> list[str]:
    return missing(*SERVER_MODULES)


def _handle(args: argparse.Namespace) -> int:
    missing = _missing_modules()
    if missing:
        print(f"densewire serve needs the server extra: pip install 'densewire[serve]' "
              f"(missing: {', '.join(missing)})", file=sys.stderr)
        return 2
    try:
        cfg = config_from_args(args)
        validate(cfg)
    except ValueError as exc:
        print(f"densewire serve: {exc}", file=sys.stderr)
        return 2
    lacking = _missing_grpc_modules() if cfg.grpc_port is not None else []
    if lacking:
        print(f"densewire serve --grpc-port needs the server extra: pip install 'densewire[serve]' "
              f"(missing: {', '.join(lacking)})", file=sys.stderr)
        return 2
    return run_server(cfg)


def add_serve_command(subparsers: Any) -> None:
    """Register ``serve`` on an argparse subparsers object; its handler is ``args.func(args)``."""
    parser = subparsers.add_parser(
        "serve", help="serve embeddings and tables over HTTP (OpenAI-compatible, negotiated binary formats)",
        description=_DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_serve_arguments(parser)
    parser.set_defaults(func=_handle, handler=_handle)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m densewire.server [flags]``: the same as ``densewire serve [flags]``."""
    parser = argparse.ArgumentParser(prog="densewire serve", description=_DESCRIPTION,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_serve_arguments(parser)
    args = parser.parse_args(argv)
    return _handle(args)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
