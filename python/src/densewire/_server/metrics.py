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

    def render(self) -> bytes:
        return generate_latest(self.registry)
