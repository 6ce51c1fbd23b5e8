"""densewire.Client and AsyncClient against the real server (a process), and against a plain
OpenAI-compatible server that only speaks JSON (the fallback)."""

from __future__ import annotations

import asyncio
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

import densewire
from server_support import ServerProcess

TEXTS = [f"text number {i}" for i in range(37)]


@pytest.fixture(scope="module")
def server():
    with ServerProcess("--model", "hash:48", "--api-key", "sekret") as s:
        yield s


def reference(server, texts, **kw) -> np.ndarray:
    """The same vectors asked for as plain JSON floats: what every format must reproduce."""
    with densewire.Client(server.url, api_key="sekret", accept="application/json") as c:
        return c.embed(texts, **kw)


def test_negotiates_raw_and_decodes_without_copy(server) -> None:
    with densewire.Client(server.url, api_key="sekret") as client:
        emb = client.create(TEXTS[:3])
        vectors = client.embed(TEXTS[:3])
    assert emb.model == "hash-48" and emb.usage is not None and emb.usage.total_tokens > 0
    assert vectors.shape == (3, 48) and vectors.dtype == np.float32
    owner = vectors
    while owner.base is not None:  # through views and memoryviews down to the buffer the body was read into
        owner = owner.base if isinstance(owner.base, np.ndarray) else owner.base.obj
    assert owner.dtype == np.uint8 and owner.shape == (3 * 48 * 4,)  # raw: the body is the tensor
    assert vectors.flags.writeable
    assert np.array_equal(vectors, reference(server, TEXTS[:3]))


@pytest.mark.parametrize("accept", ["application/vnd.msgpack", "application/x-protobuf",
                                    "application/vnd.apache.arrow.stream", "application/json"])
@pytest.mark.parametrize("dtype", ["float32", "float16", "binary"])
def test_every_format_and_dtype_gives_the_same_vectors(server, accept: str, dtype: str) -> None:
    with densewire.Client(server.url, api_key="sekret", accept=accept) as client:
        got = client.create(TEXTS[:5], dtype=dtype)
    assert got.tensor.dtype == dtype and got.tensor.shape == (5, 48)
    expected = densewire.convert(reference(server, TEXTS[:5]), dtype)
    assert got.tensor.array.tobytes() == expected.array.tobytes()
    assert got.usage is not None and got.usage.total_tokens > 0


class Recorder(BaseHTTPRequestHandler):
    """Proxies to the real server and records what the client asked for and what came back."""

    upstream = ""
    seen: list[tuple[str | None, str | None]] = []

    def do_POST(self) -> None:  # noqa: N802
        import http.client
        from urllib.parse import urlsplit

        body = self.rfile.read(int(self.headers["Content-Length"]))
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
        conn = http.client.HTTPConnection(urlsplit(self.upstream).netloc, timeout=30)
        conn.request("POST", self.path, body, headers)  # http.client passes the body through, compressed or not
        r = conn.getresponse()
        content = r.read()
        conn.close()
        type(self).seen.append((self.headers.get("Accept-Encoding"), r.getheader("Content-Encoding")))
        self.send_response(r.status)
        for k, v in r.getheaders():
            if k.lower() not in ("content-length", "transfer-encoding", "connection", "date", "server"):
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(content)))
        self.end_headers()
        self.wfile.write(content)

    def log_message(self, *args) -> None:
        pass


@pytest.mark.parametrize("accept_encoding, coding", [(None, None), ("gzip", "gzip"), ("zstd, gzip", "zstd"),
                                                     ("br", "br")])
def test_asks_for_uncompressed_vectors_unless_told(server, accept_encoding, coding) -> None:
    Recorder.upstream, Recorder.seen = server.url, []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    kw = {} if accept_encoding is None else {"accept_encoding": accept_encoding}
    try:
        with densewire.Client(f"http://127.0.0.1:{httpd.server_address[1]}", api_key="sekret", **kw) as client:
            vectors = client.embed(TEXTS)  # 37 x 48 float32: above the server's 1 KiB compression threshold
    finally:
        httpd.shutdown()
    assert Recorder.seen == [(accept_encoding or "identity", coding)]
    assert np.array_equal(vectors, reference(server, TEXTS))


def test_embed_many_keeps_input_order(server) -> None:
    with densewire.Client(server.url, api_key="sekret") as client:
        many = client.embed_many(TEXTS, batch_size=4, concurrency=3)
    assert np.array_equal(many, reference(server, TEXTS))


def test_async_client(server) -> None:
    async def go():
        async with densewire.AsyncClient(server.url, api_key="sekret") as client:
            one = await client.embed(TEXTS[:2], dimensions=16)
            many = await client.embed_many(TEXTS, batch_size=5, concurrency=4)
            return one, many, await client.models()

    one, many, models = asyncio.run(go())
    assert one.shape == (2, 16)
    assert np.allclose(np.linalg.norm(one, axis=1), 1.0, atol=1e-5)
    assert np.array_equal(many, reference(server, TEXTS))
    assert models == ["hash-48"]


def test_server_errors_carry_the_servers_message(server) -> None:
    with densewire.Client(server.url, api_key="wrong") as client:
        with pytest.raises(densewire.BadRequestError) as info:
            client.embed(["x"])
    assert info.value.status_code == 401 and info.value.code == "unauthorized" and info.value.attempts == 1
    with densewire.Client(server.url, api_key="sekret") as client:
        with pytest.raises(densewire.APIError) as info:
            client.embed(["x"], dtype="float8")
    assert info.value.status_code in (400, 422) and info.value.param == "dtype"
    assert "float8" in info.value.message


def test_one_sync_client_serves_many_threads(server) -> None:
    from concurrent.futures import ThreadPoolExecutor

    with densewire.Client(server.url, api_key="sekret") as client, ThreadPoolExecutor(6) as pool:
        got = list(pool.map(lambda k: client.embed(TEXTS[k:k + 3]), range(12)))
    for k, vectors in enumerate(got):
        assert np.array_equal(vectors, reference(server, TEXTS[k:k + 3]))


def test_a_session_of_ones_own(server) -> None:
    import aiohttp

    async def go():
        async with aiohttp.ClientSession(auto_decompress=False) as session:
            async with densewire.AsyncClient(server.url, api_key="sekret", http_client=session) as client:
                got = await client.embed(TEXTS[:2])
            assert not session.closed  # the caller's session stays the caller's
            async with aiohttp.ClientSession() as decompressing:
                with pytest.raises(ValueError, match="auto_decompress=False"):
                    densewire.AsyncClient(server.url, http_client=decompressing)
            return got

    assert np.array_equal(asyncio.run(go()), reference(server, TEXTS[:2]))


def test_nothing_listening_is_a_connection_error_after_its_retries() -> None:
    from server_support import free_port

    with densewire.Client(f"http://127.0.0.1:{free_port()}", max_retries=1, backoff_base=0.01) as client:
        with pytest.raises(densewire.APIConnectionError) as info:
            client.embed(["x"])
    assert info.value.attempts == 2 and "after 2 attempts" in str(info.value)


class OpenAIOnly(BaseHTTPRequestHandler):
    """An OpenAI-compatible server that knows nothing of densewire: JSON only, rejects unknown fields."""

    def do_POST(self) -> None:  # noqa: N802
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        unknown = set(request) - {"input", "model", "encoding_format", "dimensions", "user"}
        if unknown:
            body, status = json.dumps({"error": {"message": f"Unrecognized request argument supplied: {sorted(unknown)[0]}",
                                                 "type": "invalid_request_error", "param": None, "code": None}}), 400
        else:
            rows = np.arange(len(request["input"]) * 4, dtype=np.float32).reshape(-1, 4)
            emb = densewire.Embeddings(densewire.Tensor.from_array(rows), "text-embedding-3-small", densewire.Usage(2, 2))
            body, status = densewire.encode_json(emb, request.get("encoding_format", "float")).decode(), 200
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args) -> None:
        pass


def test_falls_back_to_json_base64_with_any_openai_server() -> None:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), OpenAIOnly)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        with densewire.Client(f"http://127.0.0.1:{httpd.server_address[1]}/v1") as client:
            vectors = client.embed(["a", "b", "c"])
            assert np.array_equal(vectors, np.arange(12, dtype=np.float32).reshape(3, 4))
            with pytest.raises(densewire.APIError, match="Unrecognized request argument supplied: dtype"):
                client.embed(["a"], dtype="float16")
    finally:
        httpd.shutdown()
