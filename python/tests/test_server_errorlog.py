"""errorlog.py: every response has an X-Request-Id, and every 4xx and 5xx is one log line with that id,
the status, the code, the field and the same message as the client's envelope."""

from __future__ import annotations

import re

import httpx
import pytest

from server_support import ServerProcess


@pytest.fixture(scope="module")
def server():
    with ServerProcess("--model", "hash:16", "--max-client-batch-size", "4") as s:
        yield s


def _log_line(server: ServerProcess, rid: str) -> str:
    lines = [line for line in server.log_text().splitlines() if f"request_id={rid} " in line]
    assert len(lines) == 1, lines
    return lines[0]


@pytest.mark.parametrize("path, body, status, code, param", [
    ("/v1/embeddings", {"input": "a", "dimensions": 1e30}, 400, "invalid_field", "dimensions"),
    ("/v1/embeddings", {"input": ["a"] * 5}, 400, "invalid_field", "input"),
    ("/v1/embeddings", {"input": "a", "model": "other"}, 404, "not_found", "model"),
    ("/v1/nothing", {"input": "a"}, 404, "not_found", None),
])
def test_each_error_is_one_line_with_id_code_field_and_the_clients_message(server, path, body, status, code,
                                                                           param) -> None:
    r = httpx.post(server.url + path, json=body, timeout=10)
    assert r.status_code == status
    rid = r.headers["x-request-id"]
    err = r.json()["error"]
    line = _log_line(server, rid)
    assert f" {status} {code} param={param or '-'}: " in line
    assert line.endswith(": " + err["message"])


def test_a_sane_client_request_id_is_kept_and_a_bad_one_replaced(server) -> None:
    r = httpx.post(server.url + "/v1/embeddings", json={"input": ""}, headers={"X-Request-Id": "abc-123"})
    assert r.headers["x-request-id"] == "abc-123"
    assert "400 invalid_field param=input" in _log_line(server, "abc-123")
    r = httpx.post(server.url + "/v1/embeddings", json={"input": "a"}, headers={"X-Request-Id": "a b/" * 30})
    assert r.status_code == 200 and re.fullmatch(r"[0-9a-f]{16}", r.headers["x-request-id"])


def test_successes_are_not_logged(server) -> None:
    r = httpx.post(server.url + "/v1/embeddings", json={"input": "fine"})
    assert r.status_code == 200
    assert f"request_id={r.headers['x-request-id']}" not in server.log_text()
