"""The sync clients' private event loop: one daemon thread per client runs the async core, so the
sync and async clients share one transport, one retry loop and one connection pool each."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["LoopThread", "close_on_loop"]

T = TypeVar("T")


class LoopThread:
    """Started on the first :meth:`run`; :meth:`close` runs a last coroutine and stops the thread."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def _start(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, name=self._name, daemon=True)
                thread.start()
                self._loop, self._thread = loop, thread
            return self._loop

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the loop thread and wait for its result (its exception is raised here)."""
        loop = self._loop or self._start()
        future = asyncio.run_coroutine_threadsafe(coro, loop)
        try:
            return future.result()
        except BaseException:
            future.cancel()  # KeyboardInterrupt while waiting: do not leave the request running
            raise

    def close(self, last: Coroutine[Any, Any, Any] | None = None) -> None:
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None or thread is None:
            if last is not None:
                last.close()
            return
        if threading.current_thread() is thread:  # collected on the loop itself: cannot wait for it
            if last is not None:
                loop.create_task(last).add_done_callback(lambda _t: loop.stop())
            else:
                loop.stop()
            return
        try:
            if last is not None:
                asyncio.run_coroutine_threadsafe(last, loop).result()
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join()
            loop.close()


def close_on_loop(loop: LoopThread, client: Any) -> None:
    """Close an async client on its loop thread, then stop the thread (a sync client's ``close()``,
    also run by its ``weakref.finalize`` when it is collected or at exit)."""
    loop.close(client.aclose())
