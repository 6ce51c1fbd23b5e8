"""The vector stores the store-sink tests write into, each started for real for the test session:
OpenSearch 3.5 + k-NN by scripts/opensearch.sh, ...

A store that cannot start fails the tests that need it (its script's error quoted), never skips them.
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from server_support import REPO

__all__ = ["ScriptService"]


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

    def stop(self) -> None:
        subprocess.run(["bash", self.script, "stop", str(self.dir)], capture_output=True, timeout=120)
        try:
            self.dir.parent.rmdir()
        except OSError:
            pass
