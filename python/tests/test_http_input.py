"""``densewire inspect`` shows a server's error (_http_input.py): an error envelope, or an HTTP answer
with headers (``curl -i``), prints the status, the code and the message and exits non-zero; a
successful answer with headers is read past them (raw bodies by their Densewire-* headers)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import orjson
import pytest

from densewire import InvalidFieldError, UnsupportedMediaTypeError
from densewire._http_input import HttpErrorAnswer, answer_body, error_envelope, http_error, parse_http_answer
from server_support import ServerProcess


def inspect(stdin: bytes, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "densewire", "inspect", *args], input=stdin, capture_output=True)


def test_an_error_envelope_names_its_status_code_and_message() -> None:
    body = UnsupportedMediaTypeError("'text/plain' is not supported", field="Content-Type").to_envelope()
    out = inspect(orjson.dumps(body))
    assert out.returncode == 1
    err = out.stderr.decode()
    assert "HTTP 415 unsupported_media_type" in err and "'text/plain' is not supported" in err
    assert "param Content-Type" in err
    assert out.stdout == b""


def test_the_status_line_of_curl_i_wins_over_the_category() -> None:
    env = InvalidFieldError("missing", field="input").to_envelope()
    data = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\n\r\n" + orjson.dumps(env)
    answer = parse_http_answer(data)
    assert answer.status == 400 and answer.headers["content-type"] == "application/json"
    assert http_error(answer.status, answer.body).startswith("HTTP 400 invalid_field: input: missing")


def test_an_http_error_without_an_envelope_shows_its_body() -> None:
    line = http_error(502, b"<html>Bad gateway</html>")
    assert line == "HTTP 502: <html>Bad gateway</html>"
    with pytest.raises(HttpErrorAnswer, match="HTTP 404: "):
        answer_body(b"HTTP/1.1 404 Not Found\r\n\r\n")


def test_an_unknown_code_without_a_status_line_is_still_an_error() -> None:
    assert http_error(None, b'{"error": {"message": "slow down", "code": "rate_limit_exceeded"}}') == \
        "error rate_limit_exceeded: slow down"
    assert http_error(None, b'{"error": "quota"}') == "error error: quota"


def test_data_is_not_mistaken_for_an_error() -> None:
    assert error_envelope(b'{"object": "list", "data": [{"embedding": [1.0], "index": 0}]}') is None
    assert error_envelope(b'{"error": null, "data": []}') is None
    assert http_error(200, b'{"object": "list"}') is None
    assert answer_body(b"P4AAAMAgAAA9zMzN") == (b"P4AAAMAgAAA9zMzN", {})


@pytest.fixture(scope="module")
def server():
    with ServerProcess("--model", "hash:16", "--no-demo-tables") as s:
        yield s


def test_curl_piped_into_inspect_shows_the_servers_415(server) -> None:
    """The issue's case: a request the server refuses, piped as `curl -s ... | densewire inspect`."""
    script = (f"curl -s {server.url}/v1/embeddings -H 'Content-Type: text/plain' -d hello "
              f"| {sys.executable} -m densewire inspect")
    out = subprocess.run(["bash", "-o", "pipefail", "-c", script], capture_output=True, text=True, timeout=60)
    assert out.returncode == 1
    assert "HTTP 415 unsupported_media_type" in out.stderr and "send application/json" in out.stderr
    assert "invalid_field" not in out.stderr


def test_curl_i_of_an_error_and_of_a_raw_answer(server) -> None:
    bad = subprocess.run(["curl", "-si", f"{server.url}/v1/embeddings", "-H", "Content-Type: application/json",
                          "-d", '{"input": []}'], capture_output=True, timeout=60).stdout
    out = inspect(bad)
    assert out.returncode == 1 and out.stderr.decode().startswith("densewire: HTTP 4")
    raw = subprocess.run(["curl", "-si", f"{server.url}/v1/embeddings", "-H", "Content-Type: application/json",
                          "-H", "Accept: application/octet-stream", "-d", '{"input": ["a", "b"], "dtype": "float16"}'],
                         capture_output=True, timeout=60).stdout
    out = inspect(raw)
    assert out.returncode == 0, out.stderr
    text = out.stdout.decode()
    assert "format     raw" in text and "dtype      float16" in text and "shape      2 x 16" in text
    body = raw.split(b"\r\n\r\n", 1)[1]
    first = np.frombuffer(body, "<f2")[:1].astype(np.float32)[0]
    assert f"row 0      [{first:.6g}," in text


def test_module_doctests() -> None:
    import doctest

    import densewire._http_input as module

    result = doctest.testmod(module)
    assert result.attempted >= 3 and result.failed == 0
