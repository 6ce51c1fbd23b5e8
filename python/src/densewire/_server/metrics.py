"""Prometheus metrics of one server (its own registry, so several apps can live in one process)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, disable_created_metrics, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

disable_created_metrics()  # the *_created series only double the exposition

__all__ = ["Metrics", "CONTENT_TYPE_LATEST"]

_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
_BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)
_TOKEN_BUCKETS = (16, 64, 256, 1024, 4096, 16384, 65536, 262144)


class Metrics:
    def __init__(self) -> None:
        r = self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter(
            "densewire_requests", "HTTP requests answered, by route, status and response format",
            ("route", "status", "format"), registry=r,
        )
        self.latency = Histogram(
            "densewire_request_duration_seconds", "time from request to response body, by route",
            ("route",), buckets=_LATENCY_BUCKETS, registry=r,
        )
        self.bytes_out = Counter(
            "densewire_response_bytes", "response body bytes sent (after compression), by format "
            "and content coding", ("format", "encoding"), registry=r,
        )
        self.inputs = Counter("densewire_inputs", "inputs (texts or token lists) embedded", registry=r)
        self.truncated_inputs = Counter(
            "densewire_truncated_inputs", "inputs cut to the model's maximum tokens or to the request's "
            "truncate_prompt_tokens, by route (each also counted in its answer's Densewire-Truncated header)",
            ("route",), registry=r)
        self.cache_hits = Counter(
            "densewire_cache_hits", "vectors found in a cache, by layer (memory, redis)", ("layer",),
            registry=r,
        )
        self.cache_misses = Counter(
            "densewire_cache_misses", "vectors computed by the model because no cache held them",
            registry=r,
        )
        self.cache_bytes = Gauge("densewire_cache_bytes", "bytes held by the in-process cache", registry=r)
        self.cache_entries = Gauge("densewire_cache_entries", "vectors in the in-process cache", registry=r)
        self.batch_size = Histogram(
            "densewire_batch_size", "inputs per model call", buckets=_BATCH_BUCKETS, registry=r,
        )
        self.batch_tokens = Histogram(
            "densewire_batch_tokens", "tokens per model call", buckets=_TOKEN_BUCKETS, registry=r,
        )
        self.model_seconds = Histogram(
            "densewire_model_duration_seconds", "time of one model call", buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.queue_inputs = Gauge(
            "densewire_queue_inputs", "inputs waiting for a model call", registry=r,
        )
        self.queue_wait = Histogram(
            "densewire_queue_wait_seconds", "time a chunk of inputs waited in the queue before its model call",
            buckets=_LATENCY_BUCKETS, registry=r,
        )
        self.queue_dropped_inputs = Counter(
            "densewire_queue_dropped_inputs", "queued inputs taken out before any model call because every "
            "request waiting for them left (deadline passed or client gone)", registry=r,
        )
        # admission (--max-concurrent-requests, --request-timeout): see admission.py
        self.admission_limit = Gauge(
            "densewire_admission_limit", "most embeddings requests admitted at once (--max-concurrent-requests)",
            registry=r,
        )
        self.admission_active = Gauge(
            "densewire_admission_active", "embeddings requests admitted: being processed or waiting for the model",
            registry=r,
        )
        self.admission_rejections = Counter(
            "densewire_admission_rejections", "embeddings requests not served, by reason: full (429), draining "
            "(503 after SIGTERM), timeout (503 past --request-timeout), disconnected (the client left while "
            "waiting)", ("reason",), registry=r,
        )
        self.draining = Gauge("densewire_draining", "1 after SIGTERM, while admitted requests finish", registry=r)
        self.redis_up = Gauge(
            "densewire_redis_up", "1 when the Redis cache answers, 0 when it is down or not configured",
            registry=r,
        )
        self.redis_errors = Counter(
            "densewire_redis_errors", "Redis calls that failed (each opens the circuit breaker)",
            registry=r,
        )
        self.prewarm_texts = Gauge(
            "densewire_prewarm_texts", "texts in the pre-warm file at its last run", registry=r,
        )
        self.prewarm_runs = Counter("densewire_prewarm_runs", "completed pre-warm runs", registry=r)
        self.ready = Gauge("densewire_ready", "1 once the model is loaded and pre-warmed", registry=r)
        # tables (GET /v1/tables/{name}): every representation is built ahead of the requests
        self.table_requests = Counter(
            "densewire_table_requests", "table requests by table, format, content coding and how they were "
            "answered: warm (from the ready snapshot, nothing serialized), waited (waited for the first load), "
            "not_modified (304), unavailable (503)", ("table", "format", "encoding", "result"), registry=r,
        )
        self.table_response_bytes = Counter(
            "densewire_table_response_bytes", "table response body bytes sent, by table, format and coding",
            ("table", "format", "encoding"), registry=r,
        )
        self.table_serializations = Counter(
            "densewire_table_serializations", "table bodies serialized (in the build process), by table and "
            "format: once per version, never per request", ("table", "format"), registry=r,
        )
        self.table_serialization_seconds = Counter(
            "densewire_table_serialization_seconds", "seconds spent serializing table bodies",
            ("table", "format"), registry=r,
        )
        self.table_compressions = Counter(
            "densewire_table_compressions", "table bodies compressed (in the build process), by table, format "
            "and coding", ("table", "format", "encoding"), registry=r,
        )
        self.table_compression_seconds = Counter(
            "densewire_table_compression_seconds", "seconds spent compressing table bodies",
            ("table", "format", "encoding"), registry=r,
        )
        self.table_loads = Counter(
            "densewire_table_loads", "table source loads, by result: changed (a new version), unchanged, failed",
            ("table", "result"), registry=r,
        )
        self.table_load_seconds = Counter(
            "densewire_table_load_seconds", "seconds spent reading table sources", ("table",), registry=r,
        )
        self.table_refresh_failures = Counter(
            "densewire_table_refresh_failures", "table loads that failed (the last good version is still served)",
            ("table",), registry=r,
        )
        self.table_last_success = Gauge(
            "densewire_table_last_success_timestamp_seconds", "Unix time of the table's last successful load",
            ("table",), registry=r,
        )
        self.table_age = Gauge(
            "densewire_table_age_seconds", "seconds since the table's last successful load (-1 before the first)",
            ("table",), registry=r,
        )
        self.table_rows = Gauge("densewire_table_rows", "rows of the served version", ("table",), registry=r)
        self.table_warm = Gauge(
            "densewire_table_warm", "1 when every representation of the served version is built, else 0",
            ("table",), registry=r,
        )
        self.table_representation_bytes = Gauge(
            "densewire_table_representation_bytes", "size of each pre-built representation of the served version",
            ("table", "format", "encoding"), registry=r,
        )

    def render(self) -> bytes:
        return generate_latest(self.registry)
