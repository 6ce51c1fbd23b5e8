"""Redis as the shared cache: hits, an outage in the middle of a run (the server keeps answering,
uncached, says so in its log and metrics) and the recovery when redis-server comes back."""

from __future__ import annotations

import time

import httpx
import numpy as np
import pytest

import densewire
from server_support import RedisProcess, ServerProcess, metric_value

DIMS = 48


def embed(client: httpx.Client, url: str, texts: list[str], **extra) -> np.ndarray:
    r = client.post(url + "/v1/embeddings", json={"input": texts, **extra},
                    headers={"Accept": "application/octet-stream"})
    assert r.status_code == 200, r.text
    return densewire.decode(r.content, "raw", r.headers).tensor.array.copy()


def wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


@pytest.fixture()
def redis_server():
    with RedisProcess() as r:
        yield r


def test_outage_and_recovery(redis_server: RedisProcess) -> None:
    # --cache-bytes 0: no in-process cache, so every hit below comes from Redis
    with ServerProcess("--model", f"hash:{DIMS}", "--redis-url", redis_server.url, "--cache-bytes", "0",
                       "--redis-timeout", "0.2") as server, httpx.Client(timeout=30) as c:
        m = server.metrics()
        assert metric_value(m, "densewire_redis_up") == 1
        a = [f"before outage {i}" for i in range(10)]
        first = embed(c, server.url, a)
        m = server.metrics()
        assert metric_value(m, "densewire_cache_misses_total") == 10
        assert redis_server.dbsize() == 10
        again = embed(c, server.url, a)
        assert again.tobytes() == first.tobytes()
        m = server.metrics()
        assert metric_value(m, "densewire_cache_hits_total", layer="redis") == 10
        assert metric_value(m, "densewire_cache_misses_total") == 10

        # dimensions are part of the key
        embed(c, server.url, a[:3], dimensions=8)
        assert redis_server.dbsize() == 13

        # -- outage: kill -9, as a crash would
        port = redis_server.port
        redis_server.kill()
        b = [f"during outage {i}" for i in range(5)]
        for i in range(6):
            t0 = time.monotonic()
            got = embed(c, server.url, a if i % 2 else b)  # answered, uncached
            assert time.monotonic() - t0 < 3.0, "a request stalled on the dead Redis"
        assert got.tobytes() == first.tobytes()
        m = server.metrics()
        assert metric_value(m, "densewire_redis_up") == 0
        assert metric_value(m, "densewire_redis_errors_total") >= 1
        assert "unavailable" in server.log_text()
        health = c.get(server.url + "/health").json()
        assert health["status"] == "ok" and health["redis"] == "down"

        # -- recovery: a new redis-server on the same port (empty)
        revived = RedisProcess(port=port).start()
        try:
            wait_for(lambda: metric_value(server.metrics(), "densewire_redis_up") == 1, 40, "redis_up == 1")
            assert "is back" in server.log_text()
            misses0 = metric_value(server.metrics(), "densewire_cache_misses_total")
            hits0 = metric_value(server.metrics(), "densewire_cache_hits_total", layer="redis")
            cc = [f"after recovery {i}" for i in range(4)]
            x = embed(c, server.url, cc)
            y = embed(c, server.url, cc)
            assert x.tobytes() == y.tobytes()
            m = server.metrics()
            assert metric_value(m, "densewire_cache_misses_total") == misses0 + 4
            assert metric_value(m, "densewire_cache_hits_total", layer="redis") == hits0 + 4
            assert revived.dbsize() == 4
        finally:
            revived.stop()
        assert "Traceback" not in server.log_text()


def test_redis_down_at_start(redis_server: RedisProcess) -> None:
    """The server starts and answers while Redis is not there yet, and uses it once it is."""
    port = redis_server.port
    redis_server.stop()
    with ServerProcess("--model", f"hash:{DIMS}", "--redis-url", f"redis://127.0.0.1:{port}/0",
                       "--cache-bytes", "0") as server, httpx.Client(timeout=30) as c:
        assert metric_value(server.metrics(), "densewire_redis_up") == 0
        embed(c, server.url, ["no redis yet"])
        late = RedisProcess(port=port).start()
        try:
            wait_for(lambda: metric_value(server.metrics(), "densewire_redis_up") == 1, 40, "redis_up == 1")
            embed(c, server.url, ["now cached"])
            assert late.dbsize() == 1
        finally:
            late.stop()


def test_prewarm_fills_redis_and_refreshes(redis_server: RedisProcess, tmp_path) -> None:
    texts = [f"prewarmed sentence {i}" for i in range(50)]
    f = tmp_path / "prewarm.txt"
    f.write_text("\n".join(texts) + "\n\n" + texts[0] + "\n", encoding="utf-8")  # blank and duplicate lines
    with ServerProcess("--model", f"hash:{DIMS}", "--redis-url", redis_server.url, "--prewarm", str(f),
                       "--prewarm-interval", "0.5") as server, httpx.Client(timeout=30) as c:
        # ready only after the first pre-warm: everything is in both caches already
        assert redis_server.dbsize() == 50
        m = server.metrics()
        assert metric_value(m, "densewire_prewarm_texts") == 50
        assert metric_value(m, "densewire_cache_misses_total") == 50
        embed(c, server.url, texts[:20])
        m = server.metrics()
        assert metric_value(m, "densewire_cache_misses_total") == 50
        assert metric_value(m, "densewire_cache_hits_total", layer="memory") >= 20
        # the refresh writes the vectors again: a flushed Redis is filled by the next run
        import redis

        redis.Redis(port=redis_server.port).flushall()
        wait_for(lambda: redis_server.dbsize() == 50, 10, "the pre-warm refresh to refill Redis")
        assert metric_value(server.metrics(), "densewire_prewarm_runs_total") >= 2
