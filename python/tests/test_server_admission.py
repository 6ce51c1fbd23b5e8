"""admission.py with a real server process whose model (a gated upstream) is busy for as long as the
test wants: 429 with Retry-After beyond --max-concurrent-requests, the other routes still served,
and a request whose client left or whose deadline passed leaves the queue without reaching the model."""

from __future__ import annotations

import socket
from concurrent.futures import ThreadPoolExecutor

import httpx
import orjson
import pytest

from server_support import GatedUpstream, ServerProcess, metric_value, wait_until


def _post(url: str, texts: list[str]) -> httpx.Response:
    return httpx.post(url + "/v1/embeddings", json={"input": texts}, timeout=120)


def _metric(server: ServerProcess, name: str, **labels: str) -> float:
    return metric_value(server.metrics(), name, **labels)


@pytest.fixture()
def upstream():
    with GatedUpstream() as u:
        yield u


def _serve(upstream: GatedUpstream, *flags: str) -> ServerProcess:
    return ServerProcess(*upstream.server_args(), "--max-batch-wait-ms", "0", "--cache-bytes", "0",
                         "--table", "t=demo:rows=10", "--table-compression", "off", *flags)


def test_full_admission_is_429_with_retry_after_and_the_other_routes_still_answer(upstream) -> None:
    with _serve(upstream, "--max-concurrent-requests", "2") as server, ThreadPoolExecutor(4) as pool:
        assert httpx.get(server.url + "/ready").status_code == 200
        first = pool.submit(_post, server.url, ["a1", "a2"])
        wait_until(lambda: "a1" in upstream.received, "the first request at the model")
        second = pool.submit(_post, server.url, ["b1"])
        wait_until(lambda: _metric(server, "densewire_queue_inputs") == 1, "the second request queued")
        assert _metric(server, "densewire_admission_active") == 2

        r = _post(server.url, ["c1"])
        assert r.status_code == 429
        assert int(r.headers["retry-after"]) >= 1
        # the header says the seconds the message says (the unit test below checks how they are spread)
        again = _post(server.url, ["e"])
        assert f"retry after {again.headers['retry-after']} s" in again.json()["error"]["message"]
        err = r.json()["error"]
        assert err["code"] == "rate_limited" and err["type"] == "invalid_request_error"
        assert "--max-concurrent-requests" in err["message"]

        # what does not go through admission is served while the model is busy and admission full
        assert httpx.get(server.url + "/health").status_code == 200
        assert httpx.get(server.url + "/metrics").status_code == 200
        assert httpx.get(server.url + "/v1/tables/t", headers={"Accept": "application/json"}).status_code == 200
        ready = httpx.get(server.url + "/ready")
        assert ready.status_code == 503 and "admission is full" in ready.json()["reason"]

        upstream.gate.set()
        assert first.result().status_code == 200 and second.result().status_code == 200
        assert httpx.get(server.url + "/ready").status_code == 200
        assert _metric(server, "densewire_admission_rejections_total", reason="full") == 2
        assert _metric(server, "densewire_admission_active") == 0
        assert _metric(server, "densewire_queue_wait_seconds_count") >= 2
        assert "c1" not in upstream.received


def test_a_disconnected_clients_texts_never_reach_the_model(upstream) -> None:
    with _serve(upstream, "--max-concurrent-requests", "4") as server, ThreadPoolExecutor(2) as pool:
        first = pool.submit(_post, server.url, ["a1"])
        wait_until(lambda: "a1" in upstream.received, "the first request at the model")
        body = orjson.dumps({"input": ["gone-1", "gone-2"]})
        sock = socket.create_connection(("127.0.0.1", server.port))
        sock.sendall(b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        wait_until(lambda: _metric(server, "densewire_queue_inputs") == 2, "the texts queued")
        sock.close()
        wait_until(lambda: _metric(server, "densewire_admission_rejections_total", reason="disconnected") == 1,
                   "the server to see the client leave")
        assert _metric(server, "densewire_queue_dropped_inputs_total") == 2
        assert _metric(server, "densewire_queue_inputs") == 0
        assert _metric(server, "densewire_admission_active") == 1
        upstream.gate.set()
        assert first.result().status_code == 200
        assert _post(server.url, ["after"]).status_code == 200  # the next model call comes and goes
        assert upstream.received == ["a1", "after"]


def test_a_request_past_its_deadline_leaves_the_queue_with_503(upstream) -> None:
    with _serve(upstream, "--request-timeout", "0.5") as server, ThreadPoolExecutor(2) as pool:
        first = pool.submit(_post, server.url, ["a1"])
        wait_until(lambda: "a1" in upstream.received, "the first request at the model")
        late = _post(server.url, ["late-1", "late-2"])  # queued behind a1 until its deadline
        assert late.status_code == 503
        assert late.json()["error"]["code"] == "unavailable"
        assert "--request-timeout" in late.json()["error"]["message"]
        assert int(late.headers["retry-after"]) >= 1
        assert _metric(server, "densewire_queue_dropped_inputs_total") == 2
        upstream.gate.set()
        assert first.result().status_code == 503  # it too waited past its deadline, at the model
        assert _post(server.url, ["after"]).status_code == 200
        assert upstream.received == ["a1", "after"]
        assert _metric(server, "densewire_admission_rejections_total", reason="timeout") == 2


def test_retry_after_spreads_the_clients_turned_away_over_the_drain_time() -> None:
    """SPEC.md 18.3 with one slot and requests of 0.3 s: the clients turned away at one instant are
    told 1, 3, 5, ... seconds (each may come back up to 1 s late and then takes 0.3 s); past 60 s a
    client gives up, so no place is kept for it and the next is told the same."""
    from densewire._server.admission import Admission
    from densewire._server.metrics import Metrics

    admission = Admission(1, 0, Metrics())
    assert [admission.retry_after(now=50.0) for _ in range(3)] == [1, 2, 3]  # nothing measured yet: e = 0
    admission = Admission(1, 0, Metrics())
    ticket = admission.admit()
    ticket.admitted_at -= 0.3
    ticket.release(completed=True)
    assert admission.estimate() == pytest.approx(0.3, abs=0.05)
    admission._mean = 0.3  # exactly, for the arithmetic below
    told = [admission.retry_after(now=100.0) for _ in range(32)]
    assert told[:11] == [1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21]
    assert told[29:] == [59, 61, 61]  # 61 > 60: that client gives up; no place kept, the next is told 61 too
    assert admission.retry_after(now=200.0) == 1  # the promises are past: one request's time, at least 1
    two = Admission(2, 0, Metrics())
    two._mean = 1.0
    assert [two.retry_after(now=0.0) for _ in range(4)] == [1, 2, 3, 4]  # two slots: places 1 s apart
