"""The vector stores the store-sink tests write into, each started for real for the test session:
OpenSearch 3.5 + k-NN by scripts/opensearch.sh, Chroma by scripts/chroma.sh, Milvus Lite by
scripts/milvus.sh. ``.kill()`` SIGKILLs one and ``.start()`` again restarts it on the same data and port;
:func:`load_through_a_kill` is the job the kill tests run (blocks written, each retried until it is whole).

A store that cannot start fails the tests that need it (its script's error quoted), never skips them.
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from server_support import REPO

__all__ = ["ScriptService", "load_through_a_kill"]


class ScriptService:
    """A service started by ``scripts/NAME.sh start DIR`` (which prints its URL) and stopped by ``stop DIR``."""

    def __init__(self, script: str, *, timeout: float = 600) -> None:
        self.script = str(REPO / "scripts" / script)
        parent = Path(tempfile.mkdtemp(prefix=f"densewire-{Path(script).stem}-"))
        parent.chmod(0o755)  # the service may run as another user (OpenSearch refuses root)
        self.dir = parent / "node"
        self.timeout = timeout
        self.url = ""

    def start(self) -> "ScriptService":
        proc = subprocess.run(["bash", self.script, "start", str(self.dir)], capture_output=True, text=True,
                              timeout=self.timeout)
        if proc.returncode != 0:
            self.stop()
            raise RuntimeError(f"{self.script} start failed:\n{proc.stdout}{proc.stderr[-4000:]}")
        self.url = proc.stdout.strip().splitlines()[-1]
        return self

    def kill(self) -> None:
        """SIGKILL the service (its process group when it leads one: ``chroma run``, Milvus Lite), its data
        left for ``.start()`` to restart on; returns once every process of it is gone."""
        pid = int((self.dir / "pid").read_text().strip())
        group = os.getpgid(pid) == pid
        (os.killpg if group else os.kill)(pid, signal.SIGKILL)
        for _ in range(400):
            try:
                (os.killpg if group else os.kill)(pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.05)
        raise AssertionError(f"{self.script}: pid {pid} still there 20 s after SIGKILL")

    def stop(self) -> None:
        subprocess.run(["bash", self.script, "stop", str(self.dir)], capture_output=True, timeout=120)
        try:
            self.dir.parent.rmdir()
        except OSError:
            pass


def load_through_a_kill(write: Callable[[int], object], blocks: int, kill: Callable[[], None], *,
                        after: int = 3, retry_on: type[BaseException] = Exception,
                        attempts: int = 120) -> list[str]:
    """Write blocks ``0 .. blocks-1`` with ``write(b)`` in a thread, each block again (a second later) until
    it is written whole, as Ray or Spark retry a failed task; ``kill()`` (SIGKILL the store and restart it)
    runs once ``after`` blocks are done, while the next ones are being written. Returns the failures seen
    (``"b<N>: <error>"``); fails when a block never got through."""
    done: list[int] = []
    failures: list[str] = []

    def job() -> None:
        for b in range(blocks):
            for _ in range(attempts):
                try:
                    write(b)
                    break
                except retry_on as exc:
                    failures.append(f"b{b}: {getattr(exc, 'category', type(exc).__name__)}: {exc}"[:300])
                    time.sleep(1)
            else:
                return
            done.append(b)

    worker = threading.Thread(target=job, daemon=True)
    worker.start()
    try:
        while len(done) < after and worker.is_alive():
            time.sleep(0.02)
        kill()
    finally:
        worker.join(timeout=600)
    assert not worker.is_alive(), "the job still running 10 minutes after the restart"
    assert done == list(range(blocks)), (done, failures[-5:])
    return failures
