"""Two replicas behind nginx (deploy/nginx.conf) sharing one Redis: a vector computed through one
replica is a cache hit through the other."""

from __future__ import annotations

import httpx
import numpy as np
import pytest

import densewire
from server_support import NginxProcess, RedisProcess, ServerProcess, metric_value

DIMS = 40


@pytest.fixture(scope="module")
def cluster():
    with RedisProcess() as redis_server:
        replicas = [ServerProcess("--model", f"hash:{DIMS}", "--redis-url", redis_server.url,
                                  "--served-model-name", "shared") for _ in range(2)]
        try:
            for r in replicas:
                r.start()
            with NginxProcess([r.port for r in replicas]) as lb:
                yield lb, replicas, redis_server
        finally:
            for r in replicas:
                r.stop()


def _counts(replica: ServerProcess) -> tuple[float, float, float]:
    m = replica.metrics()
    return (metric_value(m, "densewire_cache_misses_total"),
            metric_value(m, "densewire_cache_hits_total", layer="redis"),
            metric_value(m, "densewire_cache_hits_total", layer="memory"))


def _embed(client: httpx.Client, url: str, text: str, **headers: str) -> httpx.Response:
    r = client.post(url + "/v1/embeddings", json={"input": [text]},
                    headers={"Accept": "application/octet-stream", **headers})
    assert r.status_code == 200, r.text
    return r


def test_miss_on_one_replica_is_hit_on_the_other(cluster) -> None:
    lb, replicas, redis_server = cluster
    text = "computed once, served by every replica"
    with httpx.Client(timeout=30) as c:
        before = [_counts(r) for r in replicas]
        first = _embed(c, lb.url, text)
        after = [_counts(r) for r in replicas]
        computed_by = [i for i in range(2) if after[i][0] == before[i][0] + 1]
        assert len(computed_by) == 1, (before, after)
        a = computed_by[0]
        b = 1 - a
        # nginx spreads requests over both replicas: within a few requests the other one serves it
        for _ in range(10):
            again = _embed(c, lb.url, text)
            now = [_counts(r) for r in replicas]
            if now[b] != after[b]:
                break
        else:
            pytest.fail("nginx sent every request to the same replica")
        assert now[b][1] == after[b][1] + 1, "the other replica did not find the vector in Redis"
        assert now[b][0] == after[b][0], "the other replica recomputed the vector"
        assert now[a][0] == after[a][0]
        assert again.content == first.content
        assert redis_server.dbsize() >= 1


def test_negotiation_and_compression_through_nginx(cluster) -> None:
    lb, _, _ = cluster
    texts = [f"through the load balancer {i}" for i in range(64)]
    with httpx.Client(timeout=30) as c:
        ref = None
        for media, fmt in (("application/octet-stream", "raw"), ("application/vnd.msgpack", "msgpack"),
                           ("application/json", "json"), ("application/vnd.apache.arrow.stream", "arrow")):
            for coding in ("identity", "zstd", "gzip"):
                r = c.post(lb.url + "/v1/embeddings", json={"input": texts},
                           headers={"Accept": media, "Accept-Encoding": coding})
                assert r.status_code == 200
                assert r.headers["vary"] == "Accept, Accept-Encoding"
                if coding != "identity":
                    assert r.headers["content-encoding"] == coding
                arr = densewire.decode(r.content, fmt, r.headers).tensor.array
                if ref is None:
                    ref = arr.copy()
                assert np.array_equal(arr, ref)
        err = c.post(lb.url + "/v1/embeddings", json={"input": []})
        assert err.status_code == 400 and err.json()["error"]["param"] == "input"  # OpenAI's status (SPEC.md 11)


def test_a_full_or_draining_replica_is_skipped_and_ready_answers_for_the_pool() -> None:
    """nginx.conf passes a request refused with 429 (admission full) or 503 (draining) to the other
    replica, and its /ready is 200 while one replica is ready."""
    from concurrent.futures import ThreadPoolExecutor

    from server_support import GatedUpstream, wait_until

    with GatedUpstream() as upstream, ThreadPoolExecutor(1) as pool:
        busy = ServerProcess(*upstream.server_args(), "--max-concurrent-requests", "1", "--cache-bytes", "0")
        free = ServerProcess("--model", "hash:4", "--served-model-name", "gated")
        try:
            busy.start()
            free.start()
            held = pool.submit(httpx.post, busy.url + "/v1/embeddings", json={"input": ["held"]}, timeout=120)
            wait_until(lambda: "held" in upstream.received, "the busy replica's model to hold a request")
            assert httpx.get(busy.url + "/ready").status_code == 503
            with NginxProcess([busy.port, free.port]) as lb, httpx.Client(timeout=30) as client:
                for i in range(6):  # least_conn alternates: half of them try the full replica first
                    r = client.post(lb.url + "/v1/embeddings", json={"input": [f"t{i}"]})
                    assert r.status_code == 200, r.text
                assert client.get(lb.url + "/ready").status_code == 200
            full = metric_value(busy.metrics(), "densewire_admission_rejections_total", reason="full")
            assert full >= 1  # nginx did send some to the full replica, which refused them at once
            upstream.gate.set()
            assert held.result().status_code == 200
        finally:
            upstream.gate.set()
            busy.stop()
            free.stop()
