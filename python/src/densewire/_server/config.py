"""Server settings: one dataclass, filled from command-line flags or ``DENSEWIRE_*`` variables.

Every setting has a flag (``--max-batch-tokens``) and an environment variable made from the flag
(``DENSEWIRE_MAX_BATCH_TOKENS``). A flag given on the command line wins over the variable, which
wins over the default. With ``--workers N`` the parent process passes the settings to its workers
through these variables, so the two paths cannot drift apart.
"""

from __future__ import annotations

import dataclasses
import os
import re
import ssl
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping
from urllib.parse import urlsplit

from densewire._backends.precision import choose, merge_quantize

from .matryoshka import parse_matryoshka
from .tables.config import parse_compression, table_specs

__all__ = ["ServerConfig", "SETTINGS", "Setting", "config_from_env", "config_to_env", "cores", "env_name",
           "model_threads_for"]

MiB = 1 << 20


def _bool(text: str) -> bool:
    low = text.strip().lower()
    if low in ("1", "true", "yes", "on"):
        return True
    if low in ("0", "false", "no", "off", ""):
        return False
    raise ValueError(f"not a boolean: {text!r} (use true/false)")


def _size(text: str) -> int:
    """An integer byte count, with an optional K/M/G (binary) suffix: ``256M``, ``1G``, ``4096``."""
    t = text.strip().upper().removesuffix("B").removesuffix("I")
    mult = 1
    if t and t[-1] in "KMG":
        mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[t[-1]]
        t = t[:-1]
    value = int(float(t) * mult)
    if value < 0:
        raise ValueError(f"size must not be negative: {text!r}")
    return value


def _opt_str(text: str) -> str | None:
    return text or None


def _opt_port(text: str) -> int | None:
    return None if text.strip().lower() in ("", "none", "off") else int(text)


def _origins(text: str) -> tuple[str, ...]:
    """``*`` or a comma-separated list of origins (``https://maps.example.com,http://localhost:5173``)."""
    out = []
    for raw in text.split(","):
        origin = raw.strip()
        if not origin:
            continue
        if origin != "*":
            parts = urlsplit(origin)
            if parts.scheme not in ("http", "https") or not parts.netloc or parts.path or parts.query or parts.fragment:
                raise ValueError(f"{origin!r} is not an origin like https://maps.example.com (scheme and host, "
                                 "optionally a port, no path) or *")
            origin = origin.lower()
        out.append(origin)
    if "*" in out and len(out) > 1:
        raise ValueError("'*' allows every origin: give it alone")
    return tuple(out)


def _names(text: str) -> tuple[str, ...]:
    """Model names from a variable: comma- or whitespace-separated (``DENSEWIRE_SERVED_MODEL_NAME="a,b"``)."""
    return tuple(dict.fromkeys(n for n in re.split(r"[,\s]+", text) if n))


def _lines(text: str) -> tuple[str, ...]:
    """A repeatable flag's values from its variable: one a line."""
    return tuple(line.strip() for line in text.splitlines() if line.strip())


@dataclass(frozen=True)
class Setting:
    name: str  # the ServerConfig attribute
    parse: Callable[[str], Any]
    help: str
    metavar: str | None = None
    choices: tuple[str, ...] | None = None
    flag_type: str = "value"  # or "bool" (--x / --no-x), "append" (repeatable; the variable: one a line),
    # or "names" (one or more values after the flag, as vLLM's --served-model-name; the variable: comma-separated)


@dataclass
class ServerConfig:
    """Everything ``densewire serve`` can be told. Defaults are the documented ones."""

    host: str = "127.0.0.1"
    port: int = 8000
    grpc_port: int | None = None  # None: no gRPC server
    model: str = "minilm"
    served_model_name: tuple[str, ...] = ()
    accept_any_model: bool = False
    token_ids: str | None = None  # None: cl100k_base, or model for a backend that forwards ids (upstream:)
    auto_truncate: bool = False
    matryoshka_dimensions: Any = None  # matryoshka.Matryoshka: None = as the model declares
    workers: int = 1
    redis_url: str | None = None
    redis_ttl: int = 7 * 24 * 3600
    redis_timeout: float = 0.25
    api_key: str | None = None
    public_tables: bool = False
    cors_origins: tuple[str, ...] = ()
    max_batch_tokens: int = 16384
    max_batch_wait_ms: float = 2.0
    max_client_batch_size: int = 2048
    max_body_bytes: int = 16 * MiB
    max_token_output_bytes: int = 64 * MiB
    max_concurrent_requests: int = 128
    request_timeout: float = 30.0
    model_threads: int = 0  # 0: model_threads_for(cfg), as many calls as the cores hold
    blas_threads: int = 0
    engine: str | None = None  # issue 26: None = auto (precision.choose), or onnx, openvino, numpy
    precision: str = "auto"  # issue 26: auto (bf16 on a CPU with AMX/AVX512_BF16, else fp32), fp32, bf16, int8
    quantize: str = "none"  # the older name of --precision int8
    pooling: str | None = None  # TEI's --pooling: splade serves a BertForMaskedLM checkpoint's sparse vectors
    cache_bytes: int = 256 * MiB
    prewarm: str | None = None
    prewarm_interval: float = 0.0
    compress_min_bytes: int = 1024
    log_level: str = "info"
    access_log: bool = False
    timeout_graceful_shutdown: float = 30.0
    timeout_keep_alive: int = 5
    ssl_keyfile: str | None = None
    ssl_certfile: str | None = None
    table: tuple[str, ...] = ()
    tables_config: str | None = None
    demo_tables: bool = True
    table_refresh: float = 0.0
    table_compression: str = "fast"
    table_load_timeout: float = 30.0
    table_cache_control: str = "no-cache"
    backend_options: dict[str, Any] = field(default_factory=dict)

    def replace(self, **changes: Any) -> "ServerConfig":
        return dataclasses.replace(self, **changes)


SETTINGS: tuple[Setting, ...] = (
    Setting("host", str, "address to bind (default 127.0.0.1; use 0.0.0.0 in a container)", "HOST"),
    Setting("port", int, "port to bind (default 8000)", "PORT"),
    Setting("grpc_port", _opt_port, "also serve gRPC on this port, in the same process as HTTP and sharing its "
            "model, batcher, cache, admission, limits and metrics: the Open Inference Protocol "
            "(inference.GRPCInferenceService, as Triton's and KServe's clients call it), TEI's tei.v1, "
            "grpc.health.v1 and server reflection (default: off)", "PORT"),
    Setting("model", str, "backend spec: 'minilm' (default, the built-in all-MiniLM-L6-v2), "
            "a BERT-family model folder, a Hugging Face id such as BAAI/bge-small-en-v1.5 (from the "
            "local Hugging Face cache, downloaded when online), 'hash:DIM', 'st:NAME' or 'upstream:URL'; "
            "a ColBERT checkpoint (PyLate's or colbert-ai's layout) serves a vector per token",
            "SPEC"),
    Setting("served_model_name", _names, "model names to serve, one or more (as vLLM's flag): the first is the id "
            "in responses; each is listed by /v1/models and accepted as 'model' (default: the backend's name)",
            "NAME", flag_type="names"),
    Setting("accept_any_model", _bool, "answer a request naming any 'model' with the served model, for clients "
            "that hard-code text-embedding-ada-002 or text-embedding-3-small (default off: an unknown model is a 404 "
            "that lists the served names)", flag_type="bool"),
    Setting("token_ids", _opt_str, "how token-id input of /v1/embeddings is read: cl100k_base (the default for a local "
            "model: ids are decoded with OpenAI's cl100k_base vocabulary, shipped with densewire, as LangChain's "
            "OpenAIEmbeddings sends them, and the text is embedded with the model's own tokenizer), model (the ids "
            "are the model's own tokenizer's; the default for upstream:), or reject (a 400 that names LangChain's "
            "check_embedding_ctx_length setting)", "MODE", choices=("cl100k_base", "model", "reject")),
    Setting("auto_truncate", _bool, "cut inputs longer than the model's maximum tokens to their first tokens "
            "instead of refusing them (TEI's flag; default off: such an input is a 400 on /v1/embeddings, 413 on "
            "TEI's /embed, naming it, unless the request asks to truncate). Every cut is reported in the "
            "Densewire-Truncated header and counted", flag_type="bool"),
    Setting("matryoshka_dimensions", parse_matryoshka, "the vector sizes 'dimensions' may ask for: any, none, or "
            "sizes such as 768,512,256 (default: as the model declares them, with is_matryoshka or "
            "matryoshka_dimensions in its config.json, as vLLM reads them; a model that declares none answers "
            "'dimensions' other than its own size with vLLM's 400 'does not support matryoshka representation')",
            "SIZES"),
    Setting("workers", int, "worker processes, each with its own model and in-process cache "
            "(default 1)", "N"),
    Setting("redis_url", _opt_str, "Redis URL for a vector cache shared by replicas, "
            "e.g. redis://127.0.0.1:6379/0", "URL"),
    Setting("redis_ttl", int, "seconds a vector stays in Redis (default 604800; 0 = no expiry)", "SECONDS"),
    Setting("redis_timeout", float, "socket timeout of Redis calls in seconds (default 0.25)", "SECONDS"),
    Setting("api_key", _opt_str, "require 'Authorization: Bearer KEY' on /v1/* (default: none)", "KEY"),
    Setting("public_tables", _bool, "serve GET /v1/tables* without the API key, for browsers, which cannot "
            "keep a key secret (default off: --api-key applies to the tables too)", flag_type="bool"),
    Setting("cors_origins", _origins, "let web pages from these origins call the API: comma-separated, e.g. "
            "https://maps.example.com, or * for any (default: none, same-origin only). The Densewire-* "
            "headers and ETag are exposed to their scripts", "ORIGINS"),
    Setting("max_batch_tokens", int, "most tokens in one model call (default 16384)", "N"),
    Setting("max_batch_wait_ms", float, "how long a model call that is not full waits for "
            "more inputs (default 2)", "MS"),
    Setting("max_client_batch_size", int, "most inputs in one request (default 2048)", "N"),
    Setting("max_body_bytes", _size, "largest request body, compressed and decompressed "
            "(default 16M)", "BYTES"),
    Setting("max_token_output_bytes", _size, "largest per-token answer (POST /embed_all, /pooling): its "
            "tokens x hidden size x 4 bytes, checked before the model runs, and sparse answer (POST "
            "/embed_sparse): 8 bytes per non-zero; over it the request is a 413 naming the limit (gRPC "
            "EmbedAll/EmbedSparse: RESOURCE_EXHAUSTED) (default 64M: 1,000 texts x 512 tokens x 384 floats is 750 MB)", "BYTES"),
    Setting("max_concurrent_requests", int, "most embeddings requests being processed or waiting for the "
            "model at once; one more is answered at once with 429 and Retry-After (default 128, so that a burst "
            "of short requests is admitted; at the 9.6 answers/s measured on a loaded 2-core machine "
            "(bench/load/RESULTS.md) a full queue waits about 13 s, bounded by --request-timeout; set it to "
            "throughput x the seconds of queue you accept)", "N"),
    Setting("request_timeout", float, "seconds an admitted embeddings request may take until the model "
            "answered it; past it, or when its client has gone, it leaves the queue without using the "
            "model, with 503 and Retry-After (default 30; 0 = no deadline)", "SECONDS"),
    Setting("model_threads", int, "model calls running at the same time; each call uses --blas-threads "
            "intra-op threads (default 0: as many calls as the cores hold, cores / --blas-threads: 1 with "
            "the default --blas-threads 0, one per core with --blas-threads 1, so that a request arriving "
            "while a call runs does not wait for it; inputs waiting together are split evenly between "
            "the idle calls)", "N"),
    Setting("blas_threads", int, "intra-op threads of one model call: ONNX Runtime's "
            "intra_op_num_threads with --engine onnx, the BLAS library's (OpenBLAS, MKL) threads with "
            "--engine numpy (default 0: one per core; 1 is best on a machine shared with other work)",
            "N"),
    Setting("engine", _opt_str, "engine of BERT-family models: auto (default: the engine measured fastest "
            "for the precision on this CPU: openvino for bf16, onnx for fp32 and int8), onnx (ONNX Runtime, "
            "the graph built from the model's files and cached in ~/.cache/densewire/onnx), openvino "
            "(OpenVINO's CPU plugin, fp32 or bf16; cached in ~/.cache/densewire/openvino) or numpy (the "
            "reference engine, about 2x slower; the fallback where onnxruntime has no wheel)", "ENGINE",
            choices=("auto", "onnx", "openvino", "numpy")),
    Setting("precision", str, "number format of the model's matrix products: auto (default: bf16 where the "
            "CPU multiplies it natively, amx_bf16 or avx512_bf16 in /proc/cpuinfo, else fp32), fp32, bf16 "
            "(a start-up error on a CPU without those units) or int8 (ONNX Runtime dynamic quantization: "
            "faster, cosine about 0.98 to fp32; see README, Precision)", "PRECISION",
            choices=("auto", "fp32", "bf16", "int8")),
    Setting("quantize", str, "the older name of --precision int8: none (default) or int8; it may not "
            "disagree with --precision", "MODE", choices=("none", "int8")),
    Setting("pooling", _opt_str, "TEI's --pooling: splade serves a BertForMaskedLM checkpoint (a folder or "
            "Hub id) as a SPLADE model, sparse vectors on POST /embed_sparse and vLLM's /pooling (a "
            "sentence-transformers SparseEncoder folder is recognised without it); cls, mean or last-token "
            "override a dense model's pooling (default: the model's own config)", "POOLING",
            choices=("splade", "cls", "mean", "last-token")),
    Setting("cache_bytes", _size, "size of the in-process vector cache (default 256M; 0 = off)", "BYTES"),
    Setting("prewarm", _opt_str, "file of texts, one a line, embedded into the cache at start", "FILE"),
    Setting("prewarm_interval", float, "re-run the pre-warm every SECONDS (default 0 = only at start)",
            "SECONDS"),
    Setting("compress_min_bytes", _size, "compress responses from this size on (default 1024)", "BYTES"),
    Setting("log_level", str, "log level (default info)", "LEVEL",
            choices=("critical", "error", "warning", "info", "debug", "trace")),
    Setting("access_log", _bool, "log every request (default off)", flag_type="bool"),
    Setting("timeout_graceful_shutdown", float, "seconds to drain on SIGTERM: /ready answers 503, new "
            "embeddings requests 503 with Connection: close, admitted ones are answered; the process exits "
            "within this time (default 30)", "SECONDS"),
    Setting("timeout_keep_alive", int, "seconds an idle keep-alive connection stays open (default 5)",
            "SECONDS"),
    Setting("ssl_keyfile", _opt_str, "private key (PEM) of --ssl-certfile: serve HTTPS, HTTP/2 (h2) "
            "negotiated by ALPN, else HTTP/1.1 (default: plain HTTP)", "FILE"),
    Setting("ssl_certfile", _opt_str, "certificate chain (PEM) to serve HTTPS with (and gRPC, with "
            "--grpc-port); the key is read from --ssl-keyfile, or from this file when no key file is given", "FILE"),
    Setting("table", _lines, "serve a table at GET /v1/tables/NAME (repeatable). SOURCE: a .csv, .jsonl, "
            ".parquet or .arrow file; sqlite:PATH or postgresql://URL, optionally followed by a space and "
            "a SQL query (default: SELECT * FROM \"NAME\"); or demo:[rows=N,coordinates=float32]",
            "NAME=SOURCE", flag_type="append"),
    Setting("tables_config", _opt_str, "TOML file of tables: per table source, query, refresh, "
            "cache_control and column types (see README)", "FILE"),
    Setting("demo_tables", _bool, "serve the demo tables 'points' and 'points_f32' (default on; a "
            "configured table of the same name replaces one)", flag_type="bool"),
    Setting("table_refresh", float, "reload tables every SECONDS, swapping in a new version when the data "
            "changed (default 0 = load once; a config file can set it per table)", "SECONDS"),
    Setting("table_compression", str, "pre-built compressions of table responses: fast (gzip 4, zstd 1, br 1: "
            "the default, the demo tables ready in seconds), max (9, 19, 11: about 5 per cent smaller, minutes of CPU per "
            "table version), off, or e.g. br=9,zstd=15,gzip=6", "LEVELS"),
    Setting("table_load_timeout", float, "how long a request waits for a table that is still loading "
            "before a 503 (default 30)", "SECONDS"),
    Setting("table_cache_control", str, "Cache-Control of table responses (default no-cache: clients "
            "revalidate with the ETag)", "VALUE"),
)


def env_name(setting_name: str) -> str:
    return "DENSEWIRE_" + setting_name.upper()


def config_from_env(environ: Mapping[str, str] | None = None, base: ServerConfig | None = None) -> ServerConfig:
    """A config whose fields come from ``DENSEWIRE_*`` variables where set, else from ``base``."""
    env = os.environ if environ is None else environ
    cfg = base or ServerConfig()
    changes: dict[str, Any] = {}
    for s in SETTINGS:
        raw = env.get(env_name(s.name))
        if raw is None:
            continue
        try:
            changes[s.name] = s.parse(raw)
        except ValueError as exc:
            raise ValueError(f"{env_name(s.name)}={raw!r}: {exc}") from None
    return cfg.replace(**changes)


def config_to_env(cfg: ServerConfig) -> dict[str, str]:
    """The ``DENSEWIRE_*`` variables that reproduce ``cfg`` (for worker processes)."""
    out: dict[str, str] = {}
    for s in SETTINGS:
        value = getattr(cfg, s.name)
        if value is None:
            out[env_name(s.name)] = ""
        elif s.flag_type == "append":
            out[env_name(s.name)] = "\n".join(value)
        elif s.flag_type == "names":
            out[env_name(s.name)] = ",".join(value)
        elif isinstance(value, bool):
            out[env_name(s.name)] = "true" if value else "false"
        elif isinstance(value, tuple):
            out[env_name(s.name)] = ",".join(map(str, value))
        else:
            out[env_name(s.name)] = str(value)
    return out


def cores() -> int:
    """The CPUs this process may run on (its affinity mask, which a container's cpuset narrows)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not Linux
        return max(1, os.cpu_count() or 1)


def model_threads_for(cfg: ServerConfig) -> int:
    """``--model-threads``, or when 0 (the default) as many model calls as the cores hold at
    ``--blas-threads`` threads each: 1 when a call already uses every core (``--blas-threads 0``)."""
    if cfg.model_threads > 0:
        return cfg.model_threads
    if cfg.blas_threads <= 0:
        return 1
    return max(1, cores() // cfg.blas_threads)


def validate(cfg: ServerConfig) -> None:
    """Raise ValueError naming the setting when a value is out of range."""
    checks = (
        ("port", 0 <= cfg.port <= 65535, "must be in [0, 65535]"),
        ("grpc_port", cfg.grpc_port is None or 0 <= cfg.grpc_port <= 65535, "must be in [0, 65535]"),
        ("workers", cfg.workers >= 1, "must be at least 1"),
        ("max_batch_tokens", cfg.max_batch_tokens >= 1, "must be at least 1"),
        ("max_batch_wait_ms", cfg.max_batch_wait_ms >= 0, "must not be negative"),
        ("max_client_batch_size", cfg.max_client_batch_size >= 1, "must be at least 1"),
        ("max_body_bytes", cfg.max_body_bytes >= 1, "must be at least 1"),
        ("max_token_output_bytes", cfg.max_token_output_bytes >= 1, "must be at least 1"),
        ("model_threads", cfg.model_threads >= 0, "must not be negative"),
        ("max_concurrent_requests", cfg.max_concurrent_requests >= 1, "must be at least 1"),
        ("request_timeout", cfg.request_timeout >= 0, "must not be negative"),
        ("blas_threads", cfg.blas_threads >= 0, "must not be negative"),
        ("prewarm_interval", cfg.prewarm_interval >= 0, "must not be negative"),
        ("redis_ttl", cfg.redis_ttl >= 0, "must not be negative"),
        ("redis_timeout", cfg.redis_timeout > 0, "must be positive"),
        ("table_refresh", cfg.table_refresh >= 0, "must not be negative"),
        ("table_load_timeout", cfg.table_load_timeout > 0, "must be positive"),
    )
    for name, ok, why in checks:
        if not ok:
            raise ValueError(f"--{name.replace('_', '-')} {why} (got {getattr(cfg, name)!r})")
    if cfg.token_ids not in (None, "cl100k_base", "model", "reject"):
        raise ValueError(f"--token-ids must be cl100k_base, model or reject (got {cfg.token_ids!r})")
    if cfg.engine not in (None, "auto", "onnx", "openvino", "numpy"):
        raise ValueError(f"--engine must be auto, onnx, openvino or numpy (got {cfg.engine!r})")
    if cfg.pooling not in (None, "splade", "cls", "mean", "last-token"):
        raise ValueError(f"--pooling must be splade, cls, mean or last-token (got {cfg.pooling!r})")
    if cfg.pooling is not None and cfg.model.strip().lower().startswith(("hash:", "st:", "upstream:")):
        raise ValueError(f"--pooling applies only to BERT-family models (a model folder or a Hugging Face id), "
                         f"not --model {cfg.model}")
    if cfg.precision not in ("auto", "fp32", "bf16", "int8"):
        raise ValueError(f"--precision must be auto, fp32, bf16 or int8 (got {cfg.precision!r})")
    if cfg.quantize not in ("none", "int8"):
        raise ValueError(f"--quantize must be none or int8 (got {cfg.quantize!r})")
    if not cfg.model.strip().lower().startswith(("hash:", "st:", "upstream:")):
        # a BERT-family model: a precision or engine this CPU cannot run is refused before the server starts
        choose(cfg.engine, merge_quantize(cfg.precision, cfg.quantize))
    elif cfg.precision != "auto" or cfg.quantize != "none":
        raise ValueError(f"--precision {cfg.precision} / --quantize {cfg.quantize} apply only to BERT-family "
                         f"models (minilm, a model folder or a Hugging Face id), not --model {cfg.model}")
    if cfg.grpc_port is not None and cfg.workers > 1:
        raise ValueError("--grpc-port serves one process's gRPC server: use it with --workers 1 (run replicas "
                         "behind a load balancer instead)")
    if cfg.grpc_port is not None and cfg.grpc_port == cfg.port:
        raise ValueError(f"--grpc-port {cfg.grpc_port} is the HTTP --port: give gRPC a port of its own")
    if cfg.prewarm_interval and not cfg.prewarm:
        raise ValueError("--prewarm-interval needs --prewarm FILE")
    validate_tls(cfg)
    parse_compression(cfg.table_compression)
    table_specs(cfg)


def validate_tls(cfg: ServerConfig) -> None:
    """--ssl-keyfile / --ssl-certfile: both files readable and the key matching the certificate,
    checked before anything starts (uvicorn would fail later with a bare ``ssl.SSLError``)."""
    if cfg.ssl_keyfile and not cfg.ssl_certfile:
        raise ValueError(f"--ssl-keyfile {cfg.ssl_keyfile!r} needs --ssl-certfile (the certificate to serve "
                         "with the key)")
    if not cfg.ssl_certfile:
        return
    for flag, path in (("--ssl-certfile", cfg.ssl_certfile), ("--ssl-keyfile", cfg.ssl_keyfile)):
        if path is None:
            continue
        try:
            with open(path, "rb"):
                pass
        except OSError as exc:
            raise ValueError(f"{flag} {path!r}: cannot read it ({exc.strerror or exc})") from None

    def encrypted() -> str:  # instead of OpenSSL's prompt on the terminal
        raise ValueError("the private key is encrypted; give an unencrypted key file")

    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(cfg.ssl_certfile, cfg.ssl_keyfile, password=encrypted)
    except (ssl.SSLError, OSError, ValueError) as exc:
        keyfile = f"--ssl-keyfile {cfg.ssl_keyfile!r}" if cfg.ssl_keyfile else "its own key (no --ssl-keyfile)"
        raise ValueError(f"--ssl-certfile {cfg.ssl_certfile!r} with {keyfile}: not a PEM certificate chain and "
                         f"its matching private key ({exc})") from None
