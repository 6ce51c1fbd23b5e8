"""lifecycle.py with a real server process: /health (alive) and /ready (admissible), and the drain on
SIGTERM: admitted requests are answered, new embeddings requests get 503 with Connection: close, the
other routes still answer, and the process exits within --timeout-graceful-shutdown."""

from __future__ import annotations

import signal
from concurrent.futures import ThreadPoolExecutor

import httpx

from server_support import GatedUpstream, ServerProcess, metric_value, wait_until


def _post(url: str, texts: list[str]) -> httpx.Response:
    return httpx.post(url + "/v1/embeddings", json={"input": texts}, timeout=120)


def _serve(upstream: GatedUpstream, grace: str) -> ServerProcess:
    return ServerProcess(*upstream.server_args(), "--max-batch-wait-ms", "0", "--cache-bytes", "0",
                         "--table", "t=demo:rows=10", "--table-compression", "off",
                         "--timeout-graceful-shutdown", grace)


def test_sigterm_answers_admitted_work_refuses_new_work_and_exits() -> None:
    with GatedUpstream() as upstream, ThreadPoolExecutor(2) as pool:
        server = _serve(upstream, "60").start()
        try:
            ready = httpx.get(server.url + "/ready")
            assert ready.status_code == 200 and ready.json()["draining"] is False
            admitted = pool.submit(_post, server.url, ["a1"])
            queued = pool.submit(_post, server.url, ["b1"])
            wait_until(lambda: metric_value(server.metrics(), "densewire_admission_active") == 2, "two admitted")
            assert server.proc is not None
            server.proc.send_signal(signal.SIGTERM)
            wait_until(lambda: "draining (SIGTERM)" in server.log_text(), "the drain to begin")

            ready = httpx.get(server.url + "/ready")
            assert ready.status_code == 503 and ready.json()["draining"] is True
            assert httpx.get(server.url + "/health").status_code == 200  # alive: no restart wanted
            assert httpx.get(server.url + "/v1/tables/t", headers={"Accept": "application/json"}).status_code == 200
            new = _post(server.url, ["c1"])
            assert new.status_code == 503 and new.headers["connection"] == "close"
            assert new.json()["error"]["code"] == "unavailable"
            assert metric_value(server.metrics(), "densewire_admission_rejections_total", reason="draining") == 1

            upstream.gate.set()
            assert admitted.result().status_code == 200
            assert queued.result().status_code == 200
            server.proc.wait(60)  # a hang guard; the drain ends when the admitted requests are answered
            assert "c1" not in upstream.received
            assert "Application shutdown complete" in server.log_text()
        finally:
            server.stop()


def test_requests_still_waiting_when_the_grace_period_ends_are_answered_503() -> None:
    with GatedUpstream() as upstream, ThreadPoolExecutor(2) as pool:
        server = _serve(upstream, "1").start()
        try:
            stuck = pool.submit(_post, server.url, ["a1"])
            wait_until(lambda: "a1" in upstream.received, "the request at the model")
            assert server.proc is not None
            server.proc.send_signal(signal.SIGTERM)
            r = stuck.result()  # the model never answers: the drain's end does
            assert r.status_code == 503 and r.headers["connection"] == "close"
            assert "shutting down" in r.json()["error"]["message"]
            server.proc.wait(60)
            assert "still waiting after 1 s" in server.log_text()
        finally:
            upstream.gate.set()
            server.stop()
