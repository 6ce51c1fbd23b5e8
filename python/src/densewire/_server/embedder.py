"""The embedding service behind the HTTP layer: backend, micro-batcher, caches, pre-warm.

``Embedder.embed_texts`` returns the float32 matrix the server answers with. For each distinct
text it looks in the in-process LRU, then in Redis (one MGET for all), then joins a model call
already computing that text for another request, and only then queues it for a new model call.
Vectors are cut to ``dimensions`` and L2-normalised (as OpenAI does) before they are cached, so
a key is (model, dimensions, text).
"""

from __future__ import annotations

import asyncio
import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from densewire import InvalidFieldError, NotFoundError, PayloadTooLargeError, RaggedTensor, UnavailableError

from .batcher import MicroBatcher
from .cache import MULTI_VECTOR_DOCUMENT, MULTI_VECTOR_QUERY, TOKEN_STATES, MemoryCache, RedisCache, redis_key
from .config import ServerConfig, model_threads_for
from .limits import char_bound, clip_text, too_long
from .logs import log
from .matryoshka import declared_matryoshka
from .metrics import Metrics
from .sparse import embed_sparse

__all__ = ["Embedder", "reduce_dimensions", "too_long"]


#: Token counting of inputs up to this many characters runs on the event loop (a tokenizer does
#: ~32K characters in well under a millisecond; a hop to a thread costs about as much).
_INLINE_COUNT_CHARS = 32 * 1024


def reduce_dimensions(vectors: np.ndarray, dims: int | None) -> np.ndarray:
    """Keep the first ``dims`` columns and L2-normalise each row (rows of zeros stay zero).

    ``dims`` None returns the vectors as the model gave them.
    """
    if dims is None:
        return vectors
    cut = np.ascontiguousarray(vectors[:, :dims], dtype=np.float32)
    norms = np.sqrt(np.einsum("ij,ij->i", cut, cut, dtype=np.float64)).astype(np.float32)
    norms[norms == 0] = 1.0
    return cut / norms[:, None]


def _rows(vectors: list[np.ndarray], d: int) -> np.ndarray:
    """float32 (len(vectors), d) from contiguous float32 rows: one bytes join, far cheaper than
    np.stack for hundreds of rows."""
    return np.frombuffer(b"".join(vectors), dtype=np.float32).reshape(len(vectors), d)


class Embedder:
    def __init__(self, backend: Any, cfg: ServerConfig, metrics: Metrics, cpu_pool: ThreadPoolExecutor) -> None:
        self.backend = backend
        self.cfg = cfg
        self.metrics = metrics
        names = cfg.served_model_name
        if isinstance(names, str):  # ServerConfig(served_model_name="x") from library code
            names = (names,)
        #: the names clients may send as ``model`` and /v1/models lists; the first is the id in responses
        self.served_names: tuple[str, ...] = tuple(dict.fromkeys(names)) or (backend.name,)
        self.model_id: str = self.served_names[0]
        self.aliases = {*self.served_names, backend.name, cfg.model}
        self.accept_any_model = cfg.accept_any_model
        #: how token-id input is read (--token-ids; tokenids.py): an upstream gets the ids as sent
        self.token_ids = cfg.token_ids or ("model" if type(backend).__name__ == "UpstreamBackend" else "cl100k_base")
        self.dimensions = int(backend.dimensions)
        #: the sizes ``dimensions`` may ask for (matryoshka.py): False none, True any, or a tuple of sizes
        self.matryoshka = declared_matryoshka(backend, cfg.matryoshka_dimensions)
        self.max_tokens = int(backend.max_tokens)
        self.char_bound = char_bound(backend)  # texts longer than this are cut first (limits.py)
        self.cpu_pool = cpu_pool
        self.memory = MemoryCache(cfg.cache_bytes)
        self.redis: RedisCache | None = None
        if cfg.redis_url:
            self.redis = RedisCache(cfg.redis_url, ttl=cfg.redis_ttl, timeout=cfg.redis_timeout,
                                    on_state=self._redis_state)
        self.model_threads = model_threads_for(cfg)
        self._model_pool = ThreadPoolExecutor(self.model_threads, thread_name_prefix="densewire-model")
        #: a backend that embeds its own token ids (SentenceEncoder.encode / embed_encoded) is given the ids
        #: counted for the request, so each text is tokenized once; others get the texts
        self._encodes = callable(getattr(backend, "encode", None)) and callable(getattr(backend, "embed_encoded", None))
        self.batcher = MicroBatcher(
            backend.embed_encoded if self._encodes else backend.embed, self._model_pool,
            max_batch_tokens=cfg.max_batch_tokens, max_wait=cfg.max_batch_wait_ms / 1000.0,
            concurrency=self.model_threads, metrics=metrics,
        )
        # text -> (future of a chunk's native vectors, row in the chunk) while a model call runs
        self._inflight: dict[str, tuple[asyncio.Future, int]] = {}
        # chunk future -> requests waiting for it (the last one to leave cancels it)
        self._waiters: dict[asyncio.Future, int] = {}
        self._prewarm_task: asyncio.Task[None] | None = None
        self.prewarm_state: dict[str, Any] = {"file": cfg.prewarm, "texts": 0, "runs": 0, "last_seconds": None}
        #: the model's quantization ranges (quantization.LazyQuantizer), set by the server when the model loads
        self.quantization: Any = None

    @property
    def can_cut(self) -> bool:
        """Whether inputs can be cut at a number of tokens, at either end (embed_texts_cut)."""
        return hasattr(self.backend, "split_tokens") or bool(getattr(self.backend, "tokens_are_words", False))

    def check_model(self, model: str | None, field: str = "model") -> None:
        """A ``NotFoundError`` (404) naming the served names, unless ``model`` is absent, served here, or
        ``--accept-any-model`` is on."""
        if model is None or model in self.aliases or self.accept_any_model:
            return
        raise NotFoundError(f"{model!r} is not served here; this server serves {self.names_text()}", field=field)

    def check_dimensions(self, dims: int | None, field: str = "dimensions") -> None:
        """vLLM's rule: ``dimensions`` other than the model's own size only on a Matryoshka model, and
        only one of its sizes when it lists them; else a 400 in vLLM's words, naming the flag."""
        if dims is None or dims == self.dimensions or self.matryoshka is True:
            return
        if self.matryoshka is False:
            raise InvalidFieldError(
                f"model {self.model_id!r} does not support matryoshka representation, changing output dimensions "
                f"will lead to poor results: it declares no Matryoshka sizes (its vectors have {self.dimensions}; "
                f"--matryoshka-dimensions declares them)", field=field)
        if dims not in self.matryoshka:
            raise InvalidFieldError(
                f"model {self.model_id!r} only supports {list(self.matryoshka)} matryoshka dimensions (and its own "
                f"{self.dimensions}), use other output dimensions will lead to poor results", field=field)

    def names_text(self) -> str:
        return ", ".join(repr(n) for n in self.served_names)

    def _redis_state(self, up: bool) -> None:
        self.metrics.redis_up.set(1 if up else 0)
        if not up:
            self.metrics.redis_errors.inc()

    @property
    def redis_status(self) -> str:
        if self.redis is None:
            return "disabled"
        return "up" if self.redis.up else "down"

    # -- lifecycle -----------------------------------------------------------
    async def start(self) -> None:
        self.batcher.start()
        if self.redis is not None:
            await self.redis.start()
        if self.cfg.prewarm:
            await self.prewarm()
            if self.cfg.prewarm_interval > 0:
                self._prewarm_task = asyncio.get_running_loop().create_task(self._prewarm_loop())

    async def close(self) -> None:
        if self._prewarm_task is not None:
            self._prewarm_task.cancel()
            try:
                await self._prewarm_task
            except (asyncio.CancelledError, Exception):  # noqa: BLE001
                pass
        await self.batcher.close()
        if self.redis is not None:
            await self.redis.close()
        self._model_pool.shutdown(wait=False, cancel_futures=True)  # a stuck model call must not hold the exit
        close = getattr(self.backend, "close", None)
        if close is not None:
            close()

    # -- helpers -------------------------------------------------------------
    async def in_cpu_pool(self, fn: Any, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self.cpu_pool, fn, *args)

    async def count_tokens(self, texts: list[str]) -> list[int]:
        """Untruncated token counts; in the CPU pool for large inputs."""
        if sum(map(len, texts)) <= _INLINE_COUNT_CHARS:
            return list(self.backend.count_tokens(texts))  # cheaper than a hop to a thread
        return list(await self.in_cpu_pool(self.backend.count_tokens, texts))

    async def _encode(self, texts: list[str]) -> list[list[int]]:
        """:meth:`count_tokens`'s tokenization, keeping the ids (``_encodes`` backends)."""
        if sum(map(len, texts)) <= _INLINE_COUNT_CHARS:
            return self.backend.encode(texts)
        return await self.in_cpu_pool(self.backend.encode, texts)

    async def clip_texts(self, texts: list[str]) -> tuple[list[str], set[int]]:
        """Texts longer than ``char_bound`` cut to what the model reads of them (limits.py), and the
        indexes of those that were cut; the others are returned as they are."""
        bound = self.char_bound
        if bound is None:
            return texts, set()
        long = [i for i, t in enumerate(texts) if len(t) > bound]
        if not long:
            return texts, set()
        count = self.backend.count_tokens

        def clip_all() -> list[str]:
            return [clip_text(texts[i], bound, self.max_tokens, count) for i in long]

        clipped = await self.in_cpu_pool(clip_all)
        out = list(texts)
        cut = set()
        for i, c in zip(long, clipped):
            if len(c) < len(texts[i]):
                out[i] = c
                cut.add(i)
        return out, cut

    def _update_cache_gauges(self) -> None:
        self.metrics.cache_bytes.set(self.memory.bytes)
        self.metrics.cache_entries.set(len(self.memory))

    # -- embedding -----------------------------------------------------------
    def check_pooled(self) -> None:
        """A model whose output is not pooled vectors (a SPLADE model: ``pooled = False``) is a 400
        ``invalid_field`` on ``model`` on every route that answers them, naming where its output is."""
        if not getattr(self.backend, "pooled", True):
            raise self.backend._not_pooled()

    async def embed_texts(self, texts: list[str], dims: int | None, *, truncate: bool = True,
                          refresh: bool = False) -> tuple[np.ndarray, list[int]]:
        """``(vectors, token counts)``: float32 ``(len(texts), dims or native)`` and the untruncated
        token count of each text (of the part of it that was kept, a count above the model's maximum,
        for a text cut by ``clip_texts``).

        With ``truncate`` False, a text longer than the model's maximum is an ``InvalidFieldError``
        on ``input[i]`` before anything is computed. ``refresh`` rewrites every vector to Redis.
        """
        self.check_pooled()
        d = dims or self.dimensions
        kd = dims or 0  # cache key: 0 = the model's own vectors, k = cut to k and renormalised
        if not texts:
            return np.zeros((0, d), dtype=np.float32), []
        texts, cut = await self.clip_texts(texts)
        where = dict.fromkeys(texts)  # distinct texts, in order
        missing: list[str] = []
        found: dict[str, np.ndarray] = {}
        counts: dict[str, int] = {}
        mem = self.memory
        use_mem = mem.max_bytes > 0
        for t in where:
            entry = mem.get((kd, t)) if use_mem else None
            if entry is None and kd and use_mem:
                native = mem.get((0, t))  # the model's vector is there: cut it instead of recomputing
                if native is not None:
                    entry = (reduce_dimensions(native[0][None, :], dims)[0], native[1])
                    mem.put((kd, t), *entry)
            if entry is None:
                missing.append(t)
            else:
                found[t], counts[t] = entry
        hits_mem = len(found)
        if hits_mem:
            self.metrics.cache_hits.labels("memory").inc(hits_mem)
        encoded: dict[str, list[int]] = {}
        if missing and self._encodes:
            encoded = dict(zip(missing, await self._encode(missing)))
            counts.update((t, len(ids)) for t, ids in encoded.items())
        elif missing:
            counts.update(zip(missing, await self.count_tokens(missing)))
        if not truncate:
            limit = self.max_tokens
            for i, t in enumerate(texts):
                if counts[t] > limit:
                    raise too_long(i, counts[t], limit, clipped=i in cut)

        if missing and self.redis is not None and self.redis.up:
            keys = [redis_key(self.model_id, kd, t) for t in missing]
            values = await self.redis.get_many(keys)
            if values is not None:
                still: list[str] = []
                nbytes = 4 * d
                hits = 0
                for t, raw in zip(missing, values):
                    if raw is not None and len(raw) == nbytes:
                        v = np.frombuffer(raw, dtype="<f4")
                        found[t] = v
                        if use_mem:
                            mem.put((kd, t), v, counts[t])
                        hits += 1
                    else:
                        still.append(t)
                missing = still
                if hits:
                    self.metrics.cache_hits.labels("redis").inc(hits)

        computed: dict[str, np.ndarray] = {}
        if missing:
            joined: list[tuple[str, asyncio.Future, int]] = []
            new: list[str] = []
            for t in missing:
                running = self._inflight.get(t)
                if running is not None:
                    joined.append((t, running[0], running[1]))
                else:
                    new.append(t)
            if joined:
                self.metrics.cache_hits.labels("inflight").inc(len(joined))
            if new:
                self.metrics.cache_misses.inc(len(new))
                inputs = [encoded[t] for t in new] if self._encodes else new
                chunks = self.batcher.submit(inputs, [min(counts[t], self.max_tokens) for t in new])
                for fut, start, stop in chunks:
                    for j in range(start, stop):
                        self._inflight[new[j]] = (fut, j - start)
                    fut.add_done_callback(
                        lambda _f, keys=new[start:stop]: [self._inflight.pop(k, None) for k in keys]
                    )
                    for j in range(start, stop):
                        joined.append((new[j], fut, j - start))
            futures = list({id(f): f for _, f, _ in joined}.values())
            await self._wait_chunks(futures)
            for f in futures:
                shape = getattr(f.result(), "shape", None)
                if shape is None or len(shape) != 2 or shape[1] != self.dimensions:
                    raise UnavailableError(f"the model returned an array of shape {shape}, "
                                           f"not (n, {self.dimensions})")
            names = [t for t, _, _ in joined]
            native = _rows([np.ascontiguousarray(f.result()[row], dtype=np.float32) for _, f, row in joined],
                           self.dimensions)
            reduced = reduce_dimensions(native, dims)
            for i, (t, v) in enumerate(zip(names, reduced)):
                computed[t] = v
                if use_mem:
                    mem.put((kd, t), v, counts[t])
                    if kd:
                        mem.put((0, t), native[i], counts[t])
            found.update(computed)

        if self.redis is not None and self.redis.up:
            store = found if refresh else computed
            if store:
                await self.redis.put_many(
                    (redis_key(self.model_id, kd, t), np.asarray(v, dtype="<f4").tobytes())
                    for t, v in store.items()
                )
        if use_mem:
            self._update_cache_gauges()

        return _rows([found[t] for t in texts], d), [counts[t] for t in texts]

    @property
    def multi_vector(self) -> Any:
        """The model's ColBERT head (``_backends/colbert.py``), or None for a single-vector model."""
        return getattr(self.backend, "colbert", None)

    async def embed_token_states(self, texts: list[str], *, truncate: bool,
                                 is_query: bool | None = None) -> tuple[RaggedTensor, list[int], list[int]]:
        """``(per-token output, token counts, indexes cut)`` (SPEC.md 20.1) as a RaggedTensor of float32 rows:
        the model's last hidden state of every token of each text (special tokens included) or, for a
        multi-vector (ColBERT) model, its normalized per-token vectors of the texts as documents, or as
        queries with ``is_query`` (colbert.py: markers, query expansion, the documents' skiplist).

        Checked before the model runs: a backend without token states is ``invalid_field`` on ``model``;
        ``is_query`` on a single-vector model is ``invalid_field``; with ``truncate`` False a text longer than
        the model's maximum (a ColBERT model's query or document length) is ``too_long``; an answer of more
        than ``--max-token-output-bytes`` is 413 ``payload_too_large`` naming the limit. Matrices are cached
        in memory under the key of their own kind (states, ColBERT queries, ColBERT documents), apart from
        vectors.
        """
        head = self.multi_vector
        if head is not None:
            query = bool(is_query)
            width, limit, kind = head.dimensions, head.limit(query), MULTI_VECTOR_QUERY if query else MULTI_VECTOR_DOCUMENT
            fixed = limit if query and head.cfg.do_query_expansion else None  # a query's rows, expansion included

            async def count(ts: list[str]) -> list[int]:
                if sum(map(len, ts)) <= _INLINE_COUNT_CHARS:
                    return head.count_tokens(ts, query)
                return await self.in_cpu_pool(head.count_tokens, ts, query)

            def fn(ts: list[str]) -> tuple[np.ndarray, np.ndarray]:
                return head.embed(ts, query)
        else:
            if is_query is not None:
                raise InvalidFieldError(f"is_query applies to multi-vector (ColBERT) models; {self.model_id} gives "
                                        "the same per-token states for queries and documents", field="is_query")
            fn = getattr(self.backend, "embed_token_states", None)
            if fn is None:
                raise InvalidFieldError(f"the model {self.model_id} ({type(self.backend).__name__}) gives no "
                                        "per-token output; serve a transformer model (folder or hub id)", field="model")
            width, limit, kind, fixed, count = int(self.backend.model.hidden), self.max_tokens, TOKEN_STATES, None, \
                self.count_tokens
        if not texts:
            return RaggedTensor.from_arrays([], "float32", width), [], []
        texts, clipped = await self.clip_texts(texts)
        counts = await count(texts)
        if not truncate:
            for i, c in enumerate(counts):
                if c > limit:
                    raise too_long(i, c, limit, clipped=i in clipped)
        kept = [min(c, limit) for c in counts]
        rows = len(texts) * fixed if fixed is not None else sum(kept)
        nbytes = rows * width * 4
        if nbytes > self.cfg.max_token_output_bytes:
            raise PayloadTooLargeError(
                f"{rows} tokens x {width} floats x 4 bytes = {nbytes} bytes of per-token output is over the "
                f"limit of {self.cfg.max_token_output_bytes} bytes (--max-token-output-bytes); send fewer or "
                "shorter inputs", field="input")
        mem, found, count_of = self.memory, {}, dict(zip(texts, kept))
        for t in dict.fromkeys(texts):
            entry = mem.get((kind, t)) if mem.max_bytes > 0 else None
            if entry is not None:
                found[t] = entry[0]
        if found:
            self.metrics.cache_hits.labels("memory").inc(len(found))
        missing = [t for t in dict.fromkeys(texts) if t not in found]
        if missing:
            self.metrics.cache_misses.inc(len(missing))
            loop = asyncio.get_running_loop()
            t0 = time.perf_counter()
            out, lengths = await loop.run_in_executor(self._model_pool, fn, missing)
            self.metrics.model_seconds.observe(time.perf_counter() - t0)
            offsets = np.concatenate([[0], np.cumsum(lengths)])
            for j, t in enumerate(missing):
                found[t] = out[offsets[j]:offsets[j + 1]]
                mem.put((kind, t), found[t], count_of[t])
            self._update_cache_gauges()
        self.metrics.inputs.inc(len(texts))
        return (RaggedTensor.from_arrays([found[t] for t in texts], "float32", width), kept,
                [i for i, c in enumerate(counts) if c > limit])

    async def embed_texts_cut(self, texts: list[str], dims: int | None, limit: int | None, side: str,
                              field: str) -> tuple[np.ndarray, list[int], list[int]]:
        """Embed texts cut to ``limit`` tokens (special tokens included; None: the model's maximum),
        keeping the first tokens (``side`` "right") or the last ("left"); ``(vectors, token counts,
        indexes of the texts that were cut)``. Not cached. A model without a tokenizer of its own is an
        ``InvalidFieldError`` on ``field``."""
        self.check_pooled()
        split = getattr(self.backend, "split_tokens", None)
        if split is None and getattr(self.backend, "tokens_are_words", False):
            keep = min(limit or self.max_tokens, self.max_tokens)
            words = [t.split() for t in texts]
            cut_texts = [" ".join(w[:keep] if side == "right" else w[len(w) - keep:]) for w in words]
            vectors, _ = await self.embed_texts(cut_texts, dims)
            return vectors, [min(len(w), keep) for w in words], [i for i, w in enumerate(words) if len(w) > keep]
        if split is None:
            raise InvalidFieldError(f"the model {self.model_id} cannot cut its inputs at a number of tokens or "
                                    f"from the start (no tokenizer of its own)", field=field)
        ids = await self.in_cpu_pool(split, texts)
        special = int(self.backend.special_token_count)
        keep = max(0, min(limit or self.max_tokens, self.max_tokens) - special)
        cut = [seq[:keep] if side == "right" else seq[len(seq) - keep:] for seq in ids]
        vectors = await self.embed_token_ids(cut, dims)
        return vectors, [len(c) + special for c in cut], [i for i, seq in enumerate(ids) if len(seq) > keep]

    async def _wait_chunks(self, futures: list[asyncio.Future]) -> None:
        """Wait for the model calls of these chunks; a request that stops waiting (cancelled: its
        deadline passed or its client left) cancels each chunk nobody else waits for, which takes
        it out of the batcher's queue before it reaches the model."""
        waiters = self._waiters
        for f in futures:
            waiters[f] = waiters.get(f, 0) + 1
        try:
            await asyncio.gather(*(asyncio.shield(f) for f in futures))
        finally:
            for f in futures:
                left = waiters[f] - 1
                if left:
                    waiters[f] = left
                else:
                    del waiters[f]
                    if not f.done():
                        f.cancel()

    async def embed_token_ids(self, ids: list[list[int]], dims: int | None) -> np.ndarray:
        """Embed token-id inputs (not cached: they are rare and model-specific)."""
        self.check_pooled()
        self.metrics.cache_misses.inc(len(ids))
        loop = asyncio.get_running_loop()
        t0 = time.perf_counter()
        try:
            native = await loop.run_in_executor(self._model_pool, self.backend.embed_tokens, ids)
        except (ValueError, TypeError) as exc:
            raise InvalidFieldError(str(exc), field="input") from None
        except NotImplementedError as exc:
            raise InvalidFieldError(
                f"the model {self.model_id} does not accept token ids ({exc})", field="input"
            ) from None
        except Exception as exc:  # noqa: BLE001
            log.exception("model call on %d token inputs failed", len(ids))
            raise UnavailableError(f"the model failed: {type(exc).__name__}: {exc}") from None
        self.metrics.model_seconds.observe(time.perf_counter() - t0)
        self.metrics.batch_size.observe(len(ids))
        self.metrics.batch_tokens.observe(sum(len(s) for s in ids))
        return reduce_dimensions(np.asarray(native, dtype=np.float32), dims)

    # -- pre-warm ------------------------------------------------------------
    @staticmethod
    def read_prewarm_file(path: str) -> list[str]:
        """Non-empty lines of a UTF-8 file, without their line ends, each once."""
        text = Path(path).read_text(encoding="utf-8")
        seen: dict[str, None] = {}
        for line in text.splitlines():
            if line.strip():
                seen.setdefault(line, None)
        return list(seen)

    async def prewarm(self) -> int:
        """Embed every text of the pre-warm file into the caches (and refresh them in Redis)."""
        path = self.cfg.prewarm
        assert path is not None
        t0 = time.perf_counter()
        texts = await self.in_cpu_pool(self.read_prewarm_file, path)
        step = max(1, min(1024, self.cfg.max_client_batch_size))
        if self.multi_vector is not None:  # a ColBERT model's documents (in memory: Redis keeps vectors)
            for i in range(0, len(texts), step):
                await self.embed_token_states(texts[i:i + step], truncate=True)
        elif not getattr(self.backend, "pooled", True):  # a SPLADE model: its sparse vectors, into their cache
            for i in range(0, len(texts), 32):
                await embed_sparse(self, texts[i:i + 32], truncate=True)
        else:
            for i in range(0, len(texts), step):
                await self.embed_texts(texts[i:i + step], None, refresh=True)
        elapsed = time.perf_counter() - t0
        self.prewarm_state.update(texts=len(texts), runs=self.prewarm_state["runs"] + 1,
                                  last_seconds=round(elapsed, 3))
        self.metrics.prewarm_texts.set(len(texts))
        self.metrics.prewarm_runs.inc()
        log.info("pre-warmed %d texts from %s in %.2f s", len(texts), os.path.basename(path), elapsed)
        return len(texts)

    async def _prewarm_loop(self) -> None:
        while True:
            await asyncio.sleep(self.cfg.prewarm_interval)
            try:
                await self.prewarm()
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - keep refreshing on the next tick
                log.exception("pre-warm refresh failed")
