"""The transports of ``densewire serve`` with real clients (issue 27): HTTP/1.1 requests that offer an
HTTP/2 upgrade (``Upgrade: h2c``: the JDK ``HttpClient``'s defaults, ``curl --http2``) keep their body,
Content-Length or chunked, on reused connections; HTTP/2 with prior knowledge (h2c: ``curl
--http2-prior-knowledge``, httpx ``http2=True`` without HTTP/1.1); h2 over TLS negotiated by ALPN with
``--ssl-keyfile``/``--ssl-certfile`` (curl, httpx, the JDK); and clear start-up errors for bad TLS files.

Every answer is compared, byte for byte, with the same request answered over plain HTTP/1.1 by the
same server: the raw float32 vectors (``application/octet-stream``) must be identical."""

from __future__ import annotations

import base64
import json
import shutil
import ssl
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import httpx
import numpy as np
import pytest

from server_support import REPO, ServerProcess

DIMS = 16
TEXTS = [f"transport check {i}: {'word ' * (i % 7)}end" for i in range(24)]
BODY = json.dumps({"input": TEXTS, "model": f"hash-{DIMS}"})
RAW = {"Content-Type": "application/json", "Accept": "application/octet-stream"}
PROBE = REPO / "python" / "tests" / "data" / "JdkHttpClientProbe.java"


def _trust(cert: Path) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(cert))


def _tool(name: str) -> str:
    found = shutil.which(name)
    assert found, f"{name} is needed by this test (Debian: apt-get install {name})"
    return found


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and its key, made by Debian's openssl."""
    d = tmp_path_factory.mktemp("tls")
    key, cert = d / "key.pem", d / "cert.pem"
    subprocess.run([_tool("openssl"), "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                    "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "2", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True)
    return key, cert


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    with ServerProcess("--model", f"hash:{DIMS}", "--timeout-keep-alive", "30") as s:
        yield s


@pytest.fixture(scope="module")
def tls_server(tls_files: tuple[Path, Path]) -> Iterator[tuple[ServerProcess, str]]:
    key, cert = tls_files
    s = ServerProcess("--model", f"hash:{DIMS}", "--ssl-keyfile", str(key), "--ssl-certfile", str(cert))
    s.start(wait=False)
    url = f"https://127.0.0.1:{s.port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            assert s.proc is not None and s.proc.poll() is None, s.log_text()
            try:
                if httpx.get(url + "/health", verify=_trust(cert), timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                assert time.monotonic() < deadline, s.log_text()
                time.sleep(0.05)
        yield s, url
    finally:
        s.stop()


@pytest.fixture(scope="module")
def expected(server: ServerProcess) -> bytes:
    """The raw vectors of TEXTS as plain HTTP/1.1 (httpx, no upgrade offer) gets them."""
    r = httpx.post(server.url + "/v1/embeddings", content=BODY, headers=RAW, timeout=30)
    assert r.status_code == 200 and r.http_version == "HTTP/1.1", r.text
    vectors = np.frombuffer(r.content, "<f4").reshape(len(TEXTS), DIMS)
    assert np.all(np.isfinite(vectors)) and len({v.tobytes() for v in vectors}) == len(TEXTS)
    return r.content


def _curl(*args: str, n: int, tmp: Path) -> list[tuple[str, str, int, bytes]]:
    """``curl ARGS URL`` with n output files: per request (HTTP code, HTTP version, new connections, body)."""
    outs = [tmp / f"out{i}" for i in range(n)]
    cmd = [_tool("curl"), "-sS", "--max-time", "60", "-w", "%{http_code} %{http_version} %{num_connects}\\n", *args]
    for o in outs:
        cmd += ["-o", str(o)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=90)
    assert done.returncode == 0, f"curl failed ({done.returncode}): {done.stderr}"
    lines = done.stdout.split()
    rows = [(lines[3 * i], lines[3 * i + 1], int(lines[3 * i + 2])) for i in range(n)]
    return [(code, version, connects, o.read_bytes()) for (code, version, connects), o in zip(rows, outs)]


def _curl_posts(url: str, flag: str, n: int, tmp: Path, *extra: str) -> list[tuple[str, str, int, bytes]]:
    body = tmp / "body.json"
    body.write_text(BODY)
    args = [flag, *extra, "-H", "Content-Type: application/json", "-H", "Accept: application/octet-stream",
            "--data-binary", f"@{body}"]
    return _curl(*args, *([url + "/v1/embeddings"] * n), n=n, tmp=tmp)


# -- HTTP/1.1 with an upgrade offer ----------------------------------------------------------------


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_curl_http2_upgrade_offer_keeps_the_body_on_one_connection(server: ServerProcess, expected: bytes,
                                                                   tmp_path: Path, chunked: bool) -> None:
    extra = ("-H", "Transfer-Encoding: chunked") if chunked else ()
    rows = _curl_posts(server.url, "--http2", 3, tmp_path, *extra)
    for i, (code, version, connects, body) in enumerate(rows):
        assert code == "200", (i, body[:300])
        assert version in ("1.1", "2"), version  # answered as HTTP/1.1 (RFC 9110 7.8) or upgraded
        assert body == expected, i
    assert [c for _, _, c, _ in rows] == [1, 0, 0]  # one connection for the three requests


def test_upgrade_offer_by_hand_pipelined_with_chunked_and_length_bodies(server: ServerProcess, expected: bytes) -> None:
    """The bytes the JDK sends, on one socket: two requests offering h2c (a chunked body, then a
    Content-Length one) written back to back, then a plain one; three answers, in order, intact."""
    import socket

    payload = BODY.encode()
    half = len(payload) // 2
    chunked = b"".join(b"%x\r\n%s\r\n" % (len(part), part) for part in (payload[:half], payload[half:])) + b"0\r\n\r\n"
    offer = (b"Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\n"
             b"HTTP2-Settings: AAEAAEAAAAIAAAABAAMAAABkAAQBAAAAAAUAAEAA\r\n")
    common = b"Host: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: application/octet-stream\r\n"
    wire = (b"POST /v1/embeddings HTTP/1.1\r\n" + common + offer + b"Transfer-Encoding: chunked\r\n\r\n" + chunked
            + b"POST /v1/embeddings HTTP/1.1\r\n" + common + offer + b"Content-Length: %d\r\n\r\n" % len(payload)
            + payload
            + b"POST /v1/embeddings HTTP/1.1\r\n" + common + b"Content-Length: %d\r\n\r\n" % len(payload) + payload)
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        sock.sendall(wire)
        reader = sock.makefile("rb")
        for i in range(3):
            status = reader.readline()
            assert status.startswith(b"HTTP/1.1 200"), (i, status)  # not 101: answered as HTTP/1.1
            length = None
            while (line := reader.readline()) not in (b"\r\n", b""):
                name, _, value = line.decode("latin-1").partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value)
            assert length == len(expected), (i, length)
            assert reader.read(length) == expected, i


def test_jdk_http_client_defaults_over_http(server: ServerProcess, expected: bytes) -> None:
    lines = _jdk(server.url, 4)
    assert [(kind, status) for kind, status, _, _ in lines] == [("length", 200), ("stream", 200)] * 2
    for _, _, version, body in lines:
        assert version in ("HTTP_1_1", "HTTP_2")
        assert body == expected


# -- HTTP/2 with prior knowledge (h2c) -----------------------------------------------------------------


def test_curl_http2_prior_knowledge(server: ServerProcess, expected: bytes, tmp_path: Path) -> None:
    # One request a curl: Debian's curl 7.88 sends nothing for a second URL on a reused h2c connection
    # (with any server); several streams on one connection are the httpx test's.
    for i in range(2):
        (tmp_path / str(i)).mkdir()
        rows = _curl_posts(server.url, "--http2-prior-knowledge", 1, tmp_path / str(i))
        assert [(code, version, connects) for code, version, connects, _ in rows] == [("200", "2", 1)]
        assert rows[0][3] == expected


def test_httpx_http2_prior_knowledge_concurrent_streams_and_a_streamed_body(server: ServerProcess,
                                                                            expected: bytes) -> None:
    import asyncio

    async def run() -> list[httpx.Response]:
        async with httpx.AsyncClient(http1=False, http2=True, timeout=60) as client:
            url = server.url + "/v1/embeddings"

            async def streamed() -> Iterator[bytes]:  # no Content-Length: DATA frames of unknown total
                for i in range(0, len(BODY), 100):
                    yield BODY[i:i + 100].encode()

            posts = [client.post(url, content=BODY, headers=RAW) for _ in range(6)]
            posts.append(client.post(url, content=streamed(), headers=RAW))  # type: ignore[arg-type]
            answers = await asyncio.gather(*posts)
            big = await client.post(url, headers=RAW, json={"input": [f"big {i}" for i in range(2048)],
                                                            "model": f"hash-{DIMS}"})
            return [*answers, big]

    answers = asyncio.run(run())
    for r in answers:
        assert r.status_code == 200 and r.http_version == "HTTP/2", r.text
    assert all(r.content == expected for r in answers[:-1])
    assert len(answers[-1].content) == 2048 * DIMS * 4  # beyond the 64 KiB initial flow-control window
    one = httpx.post(server.url + "/v1/embeddings", json={"input": ["big 2047"], "model": f"hash-{DIMS}"},
                     headers={"Accept": "application/octet-stream"})
    assert answers[-1].content[-DIMS * 4:] == one.content


def test_http2_json_error_answers_keep_their_status(server: ServerProcess) -> None:
    with httpx.Client(http1=False, http2=True) as client:
        r = client.post(server.url + "/v1/embeddings", content=b"{not json", headers={"Content-Type": "application/json"})
    assert r.http_version == "HTTP/2" and r.status_code == 400
    assert "json" in r.json()["error"]["message"].lower()


# -- TLS: h2 by ALPN ---------------------------------------------------------------------------------------


def test_tls_curl_negotiates_h2_and_http1_still_works(tls_server: tuple[ServerProcess, str], expected: bytes,
                                                      tls_files: tuple[Path, Path], tmp_path: Path) -> None:
    _, url = tls_server
    cert = str(tls_files[1])
    rows = _curl_posts(url, "--http2", 3, tmp_path, "--cacert", cert)
    assert [(code, version) for code, version, _, _ in rows] == [("200", "2")] * 3
    assert [c for _, _, c, _ in rows] == [1, 0, 0] and all(body == expected for *_, body in rows)
    (tmp_path / "h1").mkdir()
    rows = _curl_posts(url, "--http1.1", 2, tmp_path / "h1", "--cacert", cert)
    assert [(code, version) for code, version, _, _ in rows] == [("200", "1.1")] * 2
    assert all(body == expected for *_, body in rows)


def test_tls_httpx_http2(tls_server: tuple[ServerProcess, str], expected: bytes, tls_files: tuple[Path, Path]) -> None:
    _, url = tls_server
    with httpx.Client(http2=True, verify=_trust(tls_files[1]), timeout=60) as client:
        answers = [client.post(url + "/v1/embeddings", content=BODY, headers=RAW) for _ in range(3)]
        home = client.get(url + "/")
    assert all(r.status_code == 200 and r.http_version == "HTTP/2" and r.content == expected for r in answers)
    assert home.status_code == 200 and url in home.text  # the server names itself with https://


def test_tls_jdk_http_client_negotiates_h2(tls_server: tuple[ServerProcess, str], expected: bytes,
                                           tls_files: tuple[Path, Path]) -> None:
    _, url = tls_server
    lines = _jdk(url, 4, tls_files[1])
    assert [(kind, status, version) for kind, status, version, _ in lines] == \
        [("length", 200, "HTTP_2"), ("stream", 200, "HTTP_2")] * 2
    assert all(body == expected for *_, body in lines)


def test_tls_startup_block_names_https(tls_server: tuple[ServerProcess, str]) -> None:
    s, url = tls_server
    assert f"densewire serve is ready at {url}/" in s.log_text()


def _jdk(url: str, n: int, cert: Path | None = None) -> list[tuple[str, int, str, bytes]]:
    cmd = [_tool("java"), str(PROBE), url, BODY, str(n), *([str(cert)] if cert else [])]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    out = []
    for line in done.stdout.splitlines():
        kind, status, version, body = (line.split(" ") + [""])[:4]
        out.append((kind, int(status), version, base64.b64decode(body)))
    assert len(out) == n, done.stdout
    return out


# -- start-up errors ---------------------------------------------------------------------------------------


def _serve_fails(*args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "densewire.server", "--model", "hash:8", "--no-demo-tables", *args],
                          capture_output=True, text=True, timeout=60,
                          env={"PYTHONPATH": str(REPO / "python" / "src"), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 2, (done.returncode, done.stderr)
    return done.stderr


def test_tls_flags_are_checked_before_start(tls_files: tuple[Path, Path], tmp_path: Path) -> None:
    key, cert = tls_files
    err = _serve_fails("--ssl-keyfile", str(key))
    assert "--ssl-keyfile" in err and "needs --ssl-certfile" in err
    err = _serve_fails("--ssl-certfile", str(tmp_path / "missing.pem"), "--ssl-keyfile", str(key))
    assert "--ssl-certfile" in err and "missing.pem" in err and "cannot read" in err
    err = _serve_fails("--ssl-certfile", str(cert), "--ssl-keyfile", str(tmp_path / "nokey.pem"))
    assert "--ssl-keyfile" in err and "nokey.pem" in err and "cannot read" in err
    other = tmp_path / "other-key.pem"
    subprocess.run([_tool("openssl"), "genpkey", "-algorithm", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                    "-out", str(other)], check=True, capture_output=True)
    err = _serve_fails("--ssl-certfile", str(cert), "--ssl-keyfile", str(other))
    assert "--ssl-certfile" in err and "matching private key" in err
    err = _serve_fails("--ssl-certfile", str(cert))  # the key is not in the certificate file
    assert "no --ssl-keyfile" in err
