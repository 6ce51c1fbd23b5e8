"""The in-process LRU, dimension reduction, the micro-batcher and the embedder's cache layers."""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import numpy as np
import pytest

from densewire import UnavailableError
from densewire._server.batcher import MicroBatcher
from densewire._server.cache import MemoryCache, redis_key
from densewire._server.config import ServerConfig
from densewire._server.embedder import Embedder, reduce_dimensions
from densewire._server.metrics import Metrics
from server_support import ServerProcess, metric_value, parse_metrics


# -- MemoryCache ----------------------------------------------------------------------------------
def test_lru_bounded_in_bytes() -> None:
    vec = np.ones(256, dtype=np.float32)  # 1 KiB each
    cache = MemoryCache(10 * 1024)
    for i in range(50):
        cache.put((0, f"t{i}"), vec, 3)
        assert cache.bytes <= cache.max_bytes
    assert 0 < len(cache) < 10
    assert cache.get((0, "t0")) is None
    assert cache.get((0, "t49")) is not None


def test_lru_order_and_copy() -> None:
    cache = MemoryCache(3 * (4 * 4 + 300))
    src = np.arange(4, dtype=np.float32)
    for k in "abc":
        cache.put((0, k), src, 1)
    src[:] = -1  # the cache holds its own copy
    assert cache.get((0, "a")) is not None  # a becomes most recent
    cache.put((0, "d"), src, 1)
    assert cache.get((0, "b")) is None
    vec, tokens = cache.get((0, "a"))
    assert vec.tolist() == [0, 1, 2, 3] and tokens == 1
    with pytest.raises(ValueError):
        vec[0] = 5  # read-only


def test_lru_disabled_and_oversized() -> None:
    off = MemoryCache(0)
    off.put((0, "a"), np.ones(4, np.float32), 1)
    assert len(off) == 0
    small = MemoryCache(100)
    small.put((0, "a"), np.ones(1000, np.float32), 1)
    assert len(small) == 0 and small.bytes == 0


def test_redis_key() -> None:
    k = redis_key("m", 0, "hello")
    assert k.startswith(b"densewire:v1:m:0:") and len(k) == len(b"densewire:v1:m:0:") + 32
    assert redis_key("m", 8, "hello") != k and redis_key("n", 0, "hello") != k
    assert redis_key("m", 0, "\ud800") != k  # lone surrogates do not crash


def test_reduce_dimensions() -> None:
    v = np.array([[3, 4, 12], [0, 0, 5]], dtype=np.float32)
    out = reduce_dimensions(v, 2)
    np.testing.assert_allclose(out, [[0.6, 0.8], [0, 0]])
    assert out.dtype == np.float32 and out.flags.c_contiguous
    assert reduce_dimensions(v, None) is v


# -- MicroBatcher ---------------------------------------------------------------------------------
class Recorder:
    def __init__(self, delay: float = 0.0) -> None:
        self.calls: list[list[str]] = []
        self.delay = delay
        self.lock = threading.Lock()

    def __call__(self, texts: list[str]) -> np.ndarray:
        with self.lock:
            self.calls.append(list(texts))
        time.sleep(self.delay)
        return np.array([[len(t), i] for i, t in enumerate(texts)], dtype=np.float32)


async def _batched(fn: Recorder, requests: list[list[str]], **kw) -> list[np.ndarray]:
    pool = ThreadPoolExecutor(1)
    b = MicroBatcher(fn, pool, metrics=Metrics(), **kw)
    b.start()

    async def one(texts: list[str]) -> np.ndarray:
        parts = b.submit(texts, [len(t.split()) for t in texts])
        res = await asyncio.gather(*(f for f, _, _ in parts))
        return np.concatenate(res)

    try:
        return await asyncio.gather(*(one(r) for r in requests))
    finally:
        await b.close()
        pool.shutdown()


def test_concurrent_requests_share_model_calls() -> None:
    fn = Recorder(delay=0.02)
    reqs = [[f"r{i} a", f"r{i} bb"] for i in range(30)]
    out = asyncio.run(_batched(fn, reqs, max_batch_tokens=1000, max_wait=0.005, concurrency=1))
    assert len(fn.calls) < 10, f"{len(fn.calls)} model calls for 30 requests"
    assert sum(len(c) for c in fn.calls) == 60
    for r, o in zip(reqs, out):
        assert o[:, 0].tolist() == [len(t) for t in r]


def test_clients_in_lock_step_do_not_split_into_cohorts() -> None:
    """8 clients, each sending its next request as soon as it has its answer (one request in flight
    each), starting in two groups of 4. A call that started the moment the previous one ended would
    take only the group that waited through it, and the groups would alternate for ever (calls of 4);
    waiting for the answered clients' next requests merges them into calls of 8."""
    fn = Recorder(delay=0.03)

    async def run() -> None:
        pool = ThreadPoolExecutor(1)
        b = MicroBatcher(fn, pool, metrics=Metrics(), max_batch_tokens=1000, max_wait=0.05, concurrency=1)
        b.start()

        async def client(k: int, delay: float) -> None:
            await asyncio.sleep(delay)
            for i in range(8):
                (fut, _, _), = b.submit([f"c{k} r{i}"], [2])
                await fut
                await asyncio.sleep(0.002)  # the client reads the answer and sends its next request

        try:
            await asyncio.gather(*(client(k, 0.0 if k < 4 else 0.06) for k in range(8)))
        finally:
            await b.close()
            pool.shutdown()

    asyncio.run(run())
    sizes = [len(c) for c in fn.calls]
    assert sum(sizes) == 64
    assert sizes[0] == 4  # the first group alone; the second started while it ran
    assert min(sizes[2:-1]) == 8, sizes  # merged from the second call on (old rule: 4, 4, 4, ...)


class Overlap(Recorder):
    """A Recorder that also counts how many of its calls ran at once."""

    def __init__(self, delay: float = 0.0) -> None:
        super().__init__(delay)
        self.running = self.most = 0

    def __call__(self, texts: list[str]) -> np.ndarray:
        with self.lock:
            self.running += 1
            self.most = max(self.most, self.running)
        try:
            return super().__call__(texts)
        finally:
            with self.lock:
                self.running -= 1


def test_waiting_inputs_are_split_across_idle_slots() -> None:
    """8 requests waiting and 2 idle slots (--model-threads 2): two calls of 4 side by side, not one
    call of 8 while the other slot idles (the rule before: the first slot took everything that fit)."""
    fn = Overlap(delay=0.05)

    async def run() -> list[np.ndarray]:
        pool = ThreadPoolExecutor(2)
        b = MicroBatcher(fn, pool, metrics=Metrics(), max_batch_tokens=1000, max_wait=0.01, concurrency=2)
        b.start()
        try:
            first = await asyncio.gather(*(b.submit([f"t{i}"], [2])[0][0] for i in range(8)))
            lone = await b.submit(["alone"], [2])[0][0]  # one chunk: one call, nothing to split
            return [*first, lone]
        finally:
            await b.close()
            pool.shutdown()

    out = asyncio.run(run())
    assert sorted(len(c) for c in fn.calls[:2]) == [4, 4] and fn.most == 2, fn.calls
    assert fn.calls[2:] == [["alone"]]
    assert [o[0, 0] for o in out] == [2.0] * 8 + [5.0]  # every request its own row


def test_batch_token_bound() -> None:
    fn = Recorder()
    reqs = [["w " * 10] * 5 for _ in range(4)]  # 50 tokens per request, 10 per text
    asyncio.run(_batched(fn, reqs, max_batch_tokens=30, max_wait=0.01, concurrency=1))
    assert all(len(c) <= 3 for c in fn.calls)
    assert sum(len(c) for c in fn.calls) == 20


def test_single_oversized_input_still_runs() -> None:
    fn = Recorder()
    out = asyncio.run(_batched(fn, [["w " * 100]], max_batch_tokens=10, max_wait=0, concurrency=2))
    assert len(out[0]) == 1


def test_model_failure_is_unavailable() -> None:
    def boom(texts: list[str]) -> np.ndarray:
        raise RuntimeError("model crashed")

    with pytest.raises(UnavailableError, match="model crashed"):
        asyncio.run(_batched(boom, [["a"]], max_batch_tokens=10, max_wait=0, concurrency=1))  # type: ignore[arg-type]


# -- Embedder (in process, with a small counting backend) -----------------------------------------
class CountingBackend:
    name = "counting"
    dimensions = 8
    max_tokens = 64

    def __init__(self) -> None:
        self.embedded: list[str] = []

    def count_tokens(self, texts: list[str]) -> list[int]:
        return [len(t.split()) for t in texts]

    def embed(self, texts: list[str]) -> np.ndarray:
        self.embedded.extend(texts)
        time.sleep(0.01)
        out = np.zeros((len(texts), 8), np.float32)
        for i, t in enumerate(texts):
            out[i, :] = [len(t) + j for j in range(8)]
        return out

    def embed_tokens(self, ids: list[list[int]]) -> np.ndarray:
        return np.ones((len(ids), 8), np.float32)


def test_embedder_dedupes_and_joins_inflight() -> None:
    async def run() -> tuple[CountingBackend, Metrics, list[np.ndarray]]:
        backend, metrics = CountingBackend(), Metrics()
        pool = ThreadPoolExecutor(2)
        e = Embedder(backend, ServerConfig(model="counting"), metrics, pool)
        await e.start()
        try:
            texts = ["x y", "z", "x y", "long text here"]
            res = await asyncio.gather(*(e.embed_texts(texts, None) for _ in range(5)))
            assert all(counts == [2, 1, 2, 3] for _, counts in res)
            outs = [v for v, _ in res]
            outs.append((await e.embed_texts(["z"], 4))[0])
        finally:
            await e.close()
            pool.shutdown()
        return backend, metrics, outs

    backend, metrics, outs = asyncio.run(run())
    assert sorted(backend.embedded) == ["long text here", "x y", "z"]  # each text computed once
    for o in outs[:5]:
        assert o[:, 0].tolist() == [3, 1, 3, 14]
    z = np.arange(1, 5, dtype=np.float32)
    np.testing.assert_allclose(outs[5][0], z / np.linalg.norm(z), rtol=1e-6)
    reg = parse_metrics(metrics.render().decode())
    assert metric_value(reg, "densewire_cache_misses_total") == 3
    assert metric_value(reg, "densewire_cache_hits_total", layer="inflight") == 12


# -- over HTTP: micro-batching and the memory cache ------------------------------------------------
@pytest.fixture(scope="module")
def server():
    with ServerProcess("--model", "hash:32", "--max-batch-wait-ms", "20") as s:
        yield s


def test_http_requests_are_batched(server) -> None:
    async def run() -> None:
        async with httpx.AsyncClient(timeout=30) as c:
            rs = await asyncio.gather(*(c.post(server.url + "/v1/embeddings", json={"input": [f"batch me {i}"]})
                                        for i in range(40)))
        assert all(r.status_code == 200 for r in rs)

    before = server.metrics()
    asyncio.run(run())
    m = server.metrics()
    calls = metric_value(m, "densewire_batch_size_count") - metric_value(before, "densewire_batch_size_count")
    inputs = metric_value(m, "densewire_batch_size_sum") - metric_value(before, "densewire_batch_size_sum")
    assert inputs == 40
    assert calls < 40, "no two requests shared a model call"


def test_http_memory_cache(server) -> None:
    texts = [f"cache me {i}" for i in range(7)]
    with httpx.Client(timeout=30) as c:
        a = c.post(server.url + "/v1/embeddings", json={"input": texts}).json()
        m0 = server.metrics()
        b = c.post(server.url + "/v1/embeddings", json={"input": texts}).json()
        m1 = server.metrics()
    assert a["data"] == b["data"]
    assert metric_value(m1, "densewire_cache_hits_total", layer="memory") - \
        metric_value(m0, "densewire_cache_hits_total", layer="memory") == 7
    assert metric_value(m1, "densewire_cache_misses_total") == metric_value(m0, "densewire_cache_misses_total")
    assert metric_value(m1, "densewire_cache_entries") >= 7
    assert 0 < metric_value(m1, "densewire_cache_bytes")
    assert metric_value(m1, "densewire_requests_total", route="/v1/embeddings", status="200", format="json") >= 2
    assert metric_value(m1, "densewire_response_bytes_total", format="json", encoding="identity") > 0 or \
        any(k.startswith("densewire_response_bytes_total") for k in m1)
    assert metric_value(m1, "densewire_redis_up") == 0
