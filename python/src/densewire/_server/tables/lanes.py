"""The background builder of the table registry: priority queues of build jobs ("lanes"), each
feeding one build process (a ``ProcessPoolExecutor`` of one spawned worker at a lower CPU priority),
replaced when it dies."""

from __future__ import annotations

import asyncio
import itertools
import multiprocessing
from concurrent.futures import Executor, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Callable

from ..logs import log
from .build import worker_init

__all__ = ["Lane", "process_pool"]


#: (priority, sequence, function, arguments, future of its result)
_Job = tuple[int, int, Callable[..., Any], tuple[Any, ...], "asyncio.Future[Any]"]


class Lane:
    """A priority queue of build jobs feeding one build process. Two lanes: ``load`` (reading sources
    and serializing: a request may be waiting for it) and ``compress`` (the slow high-level
    compressions: the identity body is served meanwhile), each its own process and CPU priority."""

    def __init__(self, kind: str, factory: Callable[[str], Executor]) -> None:
        self.kind = kind
        self._factory = factory
        self._executor: Executor | None = None
        self._queue: asyncio.PriorityQueue[_Job] = asyncio.PriorityQueue()
        self._seq = itertools.count()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._consume(), name=f"densewire-table-{self.kind}")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):  # noqa: BLE001
                pass
        _shutdown(self._executor)
        self._executor = None

    def submit(self, prio: int, fn: Callable[..., Any], *args: Any) -> "asyncio.Future[Any]":
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._queue.put_nowait((prio, next(self._seq), fn, args, fut))
        return fut

    async def _consume(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            _, _, fn, args, fut = await self._queue.get()
            if fut.done():
                continue
            try:
                if self._executor is None:
                    self._executor = self._factory(self.kind)
                result = await loop.run_in_executor(self._executor, fn, *args)
            except asyncio.CancelledError:
                fut.cancel()
                raise
            except Exception as exc:  # noqa: BLE001 - e.g. the build process died (OOM killer)
                if isinstance(exc, BrokenProcessPool):
                    log.error("the table %s process died (%s); starting a new one", self.kind, exc)
                    _shutdown(self._executor)
                    self._executor = None
                if not fut.done():
                    fut.set_exception(exc)
                continue
            if not fut.done():
                fut.set_result(result)


#: CPU priority (nice) of the build processes: loads above compressions, both below the server.
_NICE = {"load": 5, "compress": 10}


def process_pool(kind: str) -> Executor:
    return ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"),
                               initializer=worker_init, initargs=(_NICE[kind],))


def _shutdown(executor: Executor | None) -> None:
    """Stop the build process now (a br-11 compression in progress is not waited for), and wait until
    the executor's manager thread has closed its queues and let them go: their semaphores are released
    only then. A server stopped by SIGTERM exits by the signal (uvicorn re-raises it), when no finalizer
    runs: a queue still held then is what multiprocessing's resource_tracker reported as "There appear
    to be 5 leaked semaphore objects" (a call queue's 3 and a result queue's 2)."""
    if executor is None:
        return
    procs = list((getattr(executor, "_processes", None) or {}).values())
    manager = getattr(executor, "_executor_manager_thread", None)
    executor.shutdown(wait=False, cancel_futures=True)
    for p in procs:
        try:
            if p.is_alive():
                p.terminate()
        except (OSError, ValueError, AttributeError):
            pass
    for p in procs:
        try:
            p.join(2)
        except (OSError, ValueError, AttributeError, AssertionError):
            pass
    if manager is not None:
        manager.join(5)  # the processes are gone: it closes the queues and ends at once
