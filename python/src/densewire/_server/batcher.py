"""Micro-batching: inputs of concurrent requests are gathered into bounded model calls.

Each request's inputs (texts, or their token ids for a backend that embeds ids: ``embedder.py``) are
cut into *chunks* of at most ``max_batch_tokens`` tokens; a model call
takes whole chunks from the queue, oldest first, while their tokens fit. Before a call that is not
full, the batcher waits up to ``max_wait`` seconds for more input: when the model is idle, so that
requests arriving together share a call; and when a slot has just freed, so that the clients the
last call answered, whose next requests are on their way, join the next call instead of waiting
for the one after. Without that second wait, clients in lock-step split into cohorts that alternate
between calls: 8 one-sentence clients ran as calls of 4 (bench/model/RESULTS.md). Model calls run
in a thread pool, never on the event loop. With several model slots (``--model-threads``), the
inputs waiting when a call is formed are split evenly between the idle slots, so that they run
side by side.

A chunk whose future was cancelled while it waited (every request waiting on it left: deadline
passed or client gone, see ``admission.py``) is dropped when the next call is formed: its inputs
never reach the model. The time each chunk waited is the ``densewire_queue_wait_seconds`` histogram.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from densewire import UnavailableError

from .logs import log
from .metrics import Metrics

__all__ = ["MicroBatcher"]


@dataclass
class _Chunk:
    texts: list  # the inputs: texts or token-id lists, whatever ``fn`` takes
    tokens: int
    future: asyncio.Future = field(repr=False)
    queued_at: float = 0.0
    taken: bool = False  # in a model call (or dropped): no longer counted in the queue


class MicroBatcher:
    def __init__(
        self,
        fn: Callable[[list], np.ndarray],
        executor: Executor,
        *,
        max_batch_tokens: int,
        max_wait: float,
        concurrency: int,
        metrics: Metrics,
    ) -> None:
        self._fn = fn
        self._executor = executor
        self.max_batch_tokens = max(1, max_batch_tokens)
        self.max_wait = max(0.0, max_wait)
        self._queue: deque[_Chunk] = deque()
        self._queued_tokens = 0
        self._queued_inputs = 0
        self.concurrency = max(1, concurrency)
        self._slots = asyncio.Semaphore(self.concurrency)
        self._busy = 0  # slots taken by a model call (or by the call being formed)
        self._shared_out = False  # the last call left queued inputs to the next free slot
        self._more = asyncio.Event()
        self._metrics = metrics
        self._runner: asyncio.Task[None] | None = None
        self._running: set[asyncio.Task[None]] = set()
        self._closed = False

    def start(self) -> None:
        if self._runner is None:
            self._runner = asyncio.get_running_loop().create_task(self._run(), name="densewire-batcher")

    async def close(self) -> None:
        self._closed = True
        if self._runner is not None:
            self._runner.cancel()
            try:
                await self._runner
            except asyncio.CancelledError:
                pass
        if self._running:
            # a model call still running at shutdown (the drain's time is over) is not waited for:
            # its thread cannot be stopped, and the process is about to exit
            for task in list(self._running):
                task.cancel()
            await asyncio.gather(*self._running, return_exceptions=True)
        while self._queue:
            chunk = self._queue.popleft()
            if not chunk.future.done():
                chunk.future.set_exception(UnavailableError("the server is shutting down"))

    def submit(self, texts: list, tokens: list[int]) -> list[tuple[asyncio.Future, int, int]]:
        """Queue inputs (texts or token-id lists, as ``fn`` takes them); returns ``(future, start, stop)`` per chunk: rows ``start:stop`` of the
        input are the rows of the chunk's result array."""
        if self._closed:
            raise UnavailableError("the server is shutting down")
        loop = asyncio.get_running_loop()
        out: list[tuple[asyncio.Future, int, int]] = []
        start, acc = 0, 0
        for i, t in enumerate(tokens):
            t = max(1, t)
            if i > start and acc + t > self.max_batch_tokens:
                out.append(self._enqueue(loop, texts[start:i], acc, start, i))
                start, acc = i, 0
            acc += t
        if start < len(texts):
            out.append(self._enqueue(loop, texts[start:], acc, start, len(texts)))
        self._metrics.queue_inputs.set(self._queued_inputs)
        self._more.set()
        return out

    def _enqueue(self, loop: asyncio.AbstractEventLoop, texts: list, tokens: int,
                 start: int, stop: int) -> tuple[asyncio.Future, int, int]:
        fut = loop.create_future()
        chunk = _Chunk(texts, tokens, fut, time.perf_counter())
        # a failure is read by the requests waiting on it; mark it read for the case none is left
        fut.add_done_callback(lambda f: f.cancelled() or f.exception())
        fut.add_done_callback(lambda f: self._drop(chunk) if f.cancelled() else None)
        self._queue.append(chunk)
        self._queued_tokens += tokens
        self._queued_inputs += len(texts)
        return fut, start, stop

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            while not self._queue:
                self._more.clear()
                await self._more.wait()
            await self._slots.acquire()
            self._busy += 1
            shared, self._shared_out = self._shared_out, False
            if not shared and self.max_wait > 0 and self._queued_tokens < self.max_batch_tokens:
                deadline = loop.time() + self.max_wait
                while self._queued_tokens < self.max_batch_tokens:
                    remaining = deadline - loop.time()
                    if remaining <= 0:
                        break
                    self._more.clear()
                    try:
                        await asyncio.wait_for(self._more.wait(), remaining)
                    except (TimeoutError, asyncio.TimeoutError):
                        break
            share = self._share()
            batch: list[_Chunk] = []
            tokens = 0
            now = time.perf_counter()
            while self._queue:
                chunk = self._queue[0]
                if chunk.taken:  # cancelled while queued: nobody waits for it, it never reaches the model
                    self._queue.popleft()
                    continue
                if batch and (tokens + chunk.tokens > self.max_batch_tokens or tokens >= share):
                    self._shared_out = tokens >= share
                    break
                self._queue.popleft()
                chunk.taken = True
                self._queued_tokens -= chunk.tokens
                self._queued_inputs -= len(chunk.texts)
                batch.append(chunk)
                tokens += chunk.tokens
                self._metrics.queue_wait.observe(now - chunk.queued_at)
            self._metrics.queue_inputs.set(self._queued_inputs)
            if not batch:
                self._release()
                continue
            task = loop.create_task(self._execute(batch, tokens))
            self._running.add(task)
            task.add_done_callback(self._running.discard)

    def _share(self) -> float:
        """The tokens this call takes when other slots are idle too (``--model-threads`` > 1): the
        queue split evenly between them, whole chunks, so that the waiting inputs run side by side
        instead of one call taking them all while the other slots idle."""
        free = self.concurrency - self._busy + 1  # this slot and the idle ones
        if free <= 1:  # one slot (the default) or none idle: no walk over the queue
            return float("inf")
        live = sum(1 for c in self._queue if not c.taken)
        return self._queued_tokens / min(free, live) if live > 1 else float("inf")

    def _release(self) -> None:
        self._busy -= 1
        self._slots.release()

    def _drop(self, chunk: _Chunk) -> None:
        """A queued chunk whose future was cancelled: out of the counts (and of the next call)."""
        if chunk.taken:
            return
        chunk.taken = True
        self._queued_tokens -= chunk.tokens
        self._queued_inputs -= len(chunk.texts)
        self._metrics.queue_inputs.set(self._queued_inputs)
        self._metrics.queue_dropped_inputs.inc(len(chunk.texts))

    async def _execute(self, batch: list[_Chunk], tokens: int) -> None:
        try:
            texts = batch[0].texts if len(batch) == 1 else [t for c in batch for t in c.texts]
            t0 = time.perf_counter()
            try:
                result = await asyncio.get_running_loop().run_in_executor(self._executor, self._fn, texts)
            except asyncio.CancelledError:  # close() while the model runs: nobody will get its answer
                for c in batch:
                    if not c.future.done():
                        c.future.set_exception(UnavailableError("the server is shutting down"))
                raise
            except Exception as exc:  # noqa: BLE001 - a backend failure is the server's, not the client's
                log.exception("model call on %d inputs failed", len(texts))
                err = UnavailableError(f"the model failed: {type(exc).__name__}: {exc}")
                for c in batch:
                    if not c.future.done():
                        c.future.set_exception(err)
                return
            self._metrics.model_seconds.observe(time.perf_counter() - t0)
            self._metrics.batch_size.observe(len(texts))
            self._metrics.batch_tokens.observe(tokens)
            at = 0
            for c in batch:
                rows = result[at:at + len(c.texts)]
                at += len(c.texts)
                if not c.future.done():
                    c.future.set_result(rows)
        finally:
            self._release()
