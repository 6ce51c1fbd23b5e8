"""A real single-node Elasticsearch 9.5.3 for the tests of the ES destination (scripts/elasticsearch.sh).

``EsNode().start()`` runs ``scripts/elasticsearch.sh start DIR`` (the distribution fetched with Maven into
~/.m2, a JDK >= 21, security off, 512 MB heap, a free loopback port) and ``.stop()`` removes it. ``.kill()``
SIGKILLs the node and ``.start()`` again restarts it on the same data directory and port. ``secure=True``
starts one with security and HTTPS (``.ca``: its CA file, ``.password``: the ``elastic`` user's). A
missing JDK or Maven fails the test with the script's message: nothing is skipped.
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
from server_support import REPO

__all__ = ["EsNode", "SCRIPT", "ES_URL_ENV", "es_docs"]

SCRIPT = REPO / "scripts" / "elasticsearch.sh"
#: set it to the URL of a running node (security off) to use that one instead of starting one
ES_URL_ENV = "DENSEWIRE_ES_URL"


class EsNode:
    """One node started by scripts/elasticsearch.sh (``.url``), or the one ``DENSEWIRE_ES_URL`` names."""

    def __init__(self, *, secure: bool = False, url: str | None = None) -> None:
        self.secure = secure
        self.password = "densewire-test"
        self.url = url
        self.dir: Path | None = None  # None: a node this process did not start (DENSEWIRE_ES_URL)

    @property
    def ca(self) -> str:
        assert self.dir is not None
        return str(self.dir / "ca.crt")

    def start(self) -> "EsNode":
        if self.dir is None:
            # under /tmp itself: as root the node runs as the densewire-es user, who cannot enter pytest's tmp
            self.dir = Path(tempfile.mkdtemp(prefix="densewire-es."))
        args = ["bash", str(SCRIPT), "start", str(self.dir)] + (["--secure"] if self.secure else [])
        env = dict(os.environ, ES_PASSWORD=self.password)
        proc = subprocess.run(args, capture_output=True, text=True, timeout=600, env=env)
        if proc.returncode != 0:
            raise RuntimeError(f"scripts/elasticsearch.sh could not start a node:\n{proc.stdout}{proc.stderr}")
        self.url = proc.stdout.strip().splitlines()[-1]
        return self

    @property
    def pid(self) -> int:
        assert self.dir is not None, "a node from DENSEWIRE_ES_URL cannot be killed by the tests"
        return int((self.dir / "pid").read_text().strip())

    def kill(self) -> None:
        """SIGKILL the node (its data directory stays, for ``.start()`` to restart on)."""
        pid = self.pid
        os.kill(pid, signal.SIGKILL)
        for _ in range(200):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.05)

    def stop(self) -> None:
        if self.dir is not None:
            subprocess.run(["bash", str(SCRIPT), "stop", str(self.dir)], capture_output=True, timeout=120)

    @classmethod
    def session(cls) -> "EsNode":
        url = os.environ.get(ES_URL_ENV)
        return cls(url=url.rstrip("/")) if url else cls().start()


def es_docs(url: str, index: str, field: str, **client: object) -> dict[str, np.ndarray]:
    """Every document of ``index`` (refreshed first): ``_id`` -> its ``field`` as float32 (the values the
    node holds: ``_source`` with ``exclude_vectors: false``, since 9.2 drops vectors from it by default)."""
    import httpx

    with httpx.Client(base_url=url, timeout=60, **client) as c:
        c.post(f"/{index}/_refresh").raise_for_status()
        out: dict[str, np.ndarray] = {}
        answer = c.post(f"/{index}/_search?scroll=1m", json={
            "size": 5000, "sort": ["_doc"], "_source": {"includes": [field], "exclude_vectors": False}}).json()
        while answer["hits"]["hits"]:
            for hit in answer["hits"]["hits"]:
                assert hit["_id"] not in out, f"id {hit['_id']} twice"
                out[hit["_id"]] = np.asarray(hit["_source"][field], np.float32)
            answer = c.post("/_search/scroll", json={"scroll": "1m", "scroll_id": answer["_scroll_id"]}).json()
        c.request("DELETE", "/_search/scroll", json={"scroll_id": answer["_scroll_id"]})
        assert c.get(f"/{index}/_count").json()["count"] == len(out)
        return out
