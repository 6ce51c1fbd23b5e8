"""The upstream backend against a real tiny OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import base64
import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterator

import numpy as np
import pytest

from densewire._backends import Backend, UpstreamBackend, UpstreamError, embeddings_url

DIM = 6


def vector_for(item: Any) -> np.ndarray:
    """What the fake server embeds an input as: a pure function of the input."""
    key = item if isinstance(item, str) else " ".join(map(str, item))
    base = float(len(key)) + sum(key.encode()) % 97 / 10.0
    return (np.arange(DIM, dtype=np.float32) + np.float32(base)) * np.float32(-0.5) ** np.arange(DIM)


class FakeUpstream(BaseHTTPRequestHandler):
    """Behaviour chosen by the requested model id:
    ``b64`` base64 float32 in order; ``floats`` float lists in reverse order;
    ``shuffled-b64`` base64 in a scrambled order without "object" fields;
    ``openai-error``/``tei-error``/``fastapi-error``/``text-error`` fail;
    ``short`` drops one embedding; ``wrong-dim`` returns a different dimension."""

    requests: list[dict[str, Any]] = []
    headers_seen: list[dict[str, str]] = []

    def log_message(self, *args: Any) -> None:  # keep test output quiet
        pass

    def _send(self, status: int, body: bytes, ctype: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:  # noqa: N802
        if self.path != "/v1/embeddings":
            self._send(404, json.dumps({"error": {"message": f"no route {self.path}"}}).encode())
            return
        req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append(req)
        type(self).headers_seen.append(dict(self.headers))
        model, inputs = req["model"], req["input"]
        if model == "openai-error":
            error: dict[str, Any] = {"error": {
                "message": "This model's maximum context length is 8192 tokens",
                "type": "invalid_request_error", "param": None, "code": None,
            }}
            self._send(400, json.dumps(error).encode())
            return
        if model == "tei-error":
            self._send(413, json.dumps({"error": "batch size 40 > maximum allowed batch size 32",
                                        "error_type": "Validation"}).encode())
            return
        if model == "fastapi-error":
            self._send(422, json.dumps({"detail": "input must not be empty"}).encode())
            return
        if model == "text-error":
            self._send(503, b"service overloaded, retry later", "text/plain")
            return
        items = []
        for i, inp in enumerate(inputs):
            vec = vector_for(inp)
            if model == "wrong-dim" and i == 1:
                vec = np.concatenate([vec, vec])
            if model == "floats":
                emb: Any = [float(x) for x in vec]
            else:
                assert req.get("encoding_format") == "base64"
                emb = base64.b64encode(vec.astype("<f4").tobytes()).decode()
            items.append({"object": "embedding", "index": i, "embedding": emb})
        if model == "floats":
            items.reverse()
        elif model == "shuffled-b64":
            items = items[1::2] + items[0::2]
            for it in items:
                del it["object"]
        elif model == "short":
            items = items[:-1]
        body: dict[str, Any] = {"object": "list", "data": items, "model": model,
                "usage": {"prompt_tokens": 1, "total_tokens": 1}}
        self._send(200, json.dumps(body).encode())


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), FakeUpstream)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture(autouse=True)
def clear_log() -> None:
    FakeUpstream.requests.clear()
    FakeUpstream.headers_seen.clear()


TEXTS = ["hello", "embeddings over http", "", "ünïcödé", "x" * 300]
EXPECTED = np.stack([vector_for(t) for t in TEXTS])


@pytest.mark.parametrize("model", ["b64", "floats", "shuffled-b64"])
def test_decodes_every_response_shape(server: str, model: str) -> None:
    with UpstreamBackend(server, model=model) as up:
        assert isinstance(up, Backend)
        out = up.embed(TEXTS)
        assert out.dtype == np.float32 and out.flags.c_contiguous and out.shape == (len(TEXTS), DIM)
        np.testing.assert_array_equal(out, EXPECTED)
        assert up.dimensions == DIM
    req = FakeUpstream.requests[0]
    assert req == {"model": model, "input": TEXTS, "encoding_format": "base64"}


@pytest.mark.parametrize("suffix", ["", "/", "/v1", "/v1/", "/v1/embeddings"])
def test_base_url_with_or_without_v1(server: str, suffix: str) -> None:
    assert embeddings_url(server + suffix) == server + "/v1/embeddings"
    with UpstreamBackend(server + suffix, model="b64") as up:
        np.testing.assert_array_equal(up.embed(TEXTS[:1]), EXPECTED[:1])


def test_batches_split_and_reassembled(server: str) -> None:
    with UpstreamBackend(server, model="shuffled-b64", batch_size=2) as up:
        np.testing.assert_array_equal(up.embed(TEXTS), EXPECTED)
    assert [len(r["input"]) for r in FakeUpstream.requests] == [2, 2, 1]


def test_dimensions_probe_and_given(server: str) -> None:
    with UpstreamBackend(server, model="b64") as up:
        assert up.dimensions == DIM  # learnt by one probe request
        assert len(FakeUpstream.requests) == 1
        assert up.embed([]).shape == (0, DIM)
    with UpstreamBackend(server, model="b64", dimensions=DIM) as up:
        assert up.dimensions == DIM
        assert up.embed(["a"]).shape == (1, DIM)
    with UpstreamBackend(server, model="b64", dimensions=DIM + 1) as up:
        with pytest.raises(UpstreamError, match="expected 7"):
            up.embed(["a"])


def test_token_id_inputs_are_forwarded(server: str) -> None:
    ids = [[101, 2023, 102], [7], []]
    with UpstreamBackend(server, model="b64") as up:
        out = up.embed_tokens(ids)
    assert FakeUpstream.requests[0]["input"] == ids
    np.testing.assert_array_equal(out, np.stack([vector_for(s) for s in ids]))


def test_api_key_and_names(server: str) -> None:
    with UpstreamBackend(server, model="b64", api_key="sk-test", name="served-as") as up:
        up.embed(["a"])
        assert up.name == "served-as" and up.model == "b64"
    assert FakeUpstream.headers_seen[0]["Authorization"] == "Bearer sk-test"
    with UpstreamBackend(server, model="b64") as up:
        up.embed(["a"])
        assert up.name == "b64"
    assert "Authorization" not in FakeUpstream.headers_seen[1]


def test_extra_body_fields(server: str) -> None:
    with UpstreamBackend(server, model="b64", extra_body={"truncate": True}) as up:
        up.embed(["a"])
    assert FakeUpstream.requests[0]["truncate"] is True


@pytest.mark.parametrize(
    ("model", "status", "message"),
    [
        ("openai-error", 400, "This model's maximum context length is 8192 tokens"),
        ("tei-error", 413, "batch size 40 > maximum allowed batch size 32"),
        ("fastapi-error", 422, "input must not be empty"),
        ("text-error", 503, "service overloaded, retry later"),
    ],
)
def test_error_status_becomes_upstream_error(server: str, model: str, status: int, message: str) -> None:
    with UpstreamBackend(server, model=model) as up:
        with pytest.raises(UpstreamError) as info:
            up.embed(["a"])
    err = info.value
    assert err.status == status
    assert err.message == message
    assert str(status) in str(err) and message in str(err)


def test_wrong_route_is_404(server: str) -> None:
    with UpstreamBackend(server + "/elsewhere", model="b64") as up:
        with pytest.raises(UpstreamError) as info:
            up.embed(["a"])
    assert info.value.status == 404 and "no route" in info.value.message


@pytest.mark.parametrize(("model", "fragment"), [("short", "got 1 embeddings"), ("wrong-dim", "expected 6")])
def test_malformed_answers(server: str, model: str, fragment: str) -> None:
    with UpstreamBackend(server, model=model) as up:
        with pytest.raises(UpstreamError, match=fragment):
            up.embed(["a", "b"])


def test_unreachable_upstream() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    with UpstreamBackend(f"http://127.0.0.1:{port}", model="b64", timeout=5) as up:
        with pytest.raises(UpstreamError) as info:
            up.embed(["a"])
    assert info.value.status is None


def test_count_tokens_is_whitespace_words(server: str) -> None:
    with UpstreamBackend(server, model="b64", max_tokens=512) as up:
        assert up.count_tokens(["a b  c", "", "one"]) == [3, 0, 1]
        assert up.max_tokens == 512
    assert FakeUpstream.requests == []


def test_threads_share_one_client(server: str) -> None:
    results: list[np.ndarray] = []
    with UpstreamBackend(server, model="b64") as up:
        threads = [threading.Thread(target=lambda: results.append(up.embed(TEXTS))) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert len(results) == 4
    for out in results:
        np.testing.assert_array_equal(out, EXPECTED)


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"base_url": "127.0.0.1:8080", "model": "m"}, "http"),
        ({"base_url": "http://x", "model": ""}, "model"),
        ({"base_url": "http://x", "model": "m", "dimensions": 0}, "dimensions"),
        ({"base_url": "http://x", "model": "m", "batch_size": 0}, "batch_size"),
    ],
)
def test_bad_arguments(kwargs: dict[str, Any], fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        UpstreamBackend(**kwargs)


@pytest.mark.parametrize(("body", "message"), [
    (b'{"detail": [{"loc": ["body", "input"], "msg": "field required"}]}', '[{"loc":["body","input"],"msg":"field required"}]'),
    (b'[1, 2]', "[1,2]"),
    (b"not json", "not json"),
    (b"", "Bad Gateway"),
])
def test_error_messages_of_every_shape(body: bytes, message: str) -> None:
    from densewire._backends.upstream import _error_message

    assert _error_message(body, "Bad Gateway") == message
