"""OpenSearchSink and ``densewire ingest --to opensearch+https://`` through TLS and basic auth: the index
check and the ``_bulk`` requests take the same credentials and CA file (one EsConnection), a wrong
password or a missing CA file is a clear error before anything is written.

Why not the security plugin on the node: the session's node is OpenSearch 3.5.0 (Maven Central's
integ-test zip), and Maven Central's ``org.opensearch.plugin:opensearch-security`` stops at 3.4.0.0; a
plugin installs only into the OpenSearch version it was built for. OpenSearch 3.4.0's integ-test zip
would take it, but that zip carries only the transport modules, and k-NN 3.4.0.0 extends
``lang-painless``, which Maven Central ships as a bare jar, not an installable module. So security here
is what a cluster without the plugin is given in production: a real nginx in front of the real node,
terminating HTTPS with a certificate of a CA made for the test and asking for basic auth (``auth_basic``,
a 401 with ``WWW-Authenticate`` otherwise), the node behind it on loopback."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import numpy as np
import orjson
import pyarrow as pa
import pytest

import densewire
from densewire.batch import BatchError, OpenSearchSink
from server_support import ensure_services, free_port

USER, PASSWORD = "dw-writer", "s3cret:with@signs"


def _run(*args: str) -> None:
    subprocess.run(args, check=True, capture_output=True, timeout=60)


@pytest.fixture(scope="module")
def tls_front(opensearch_node):
    """nginx on https://127.0.0.1:PORT (basic auth) in front of the session's node; (url, ca file)."""
    _redis, nginx = ensure_services()  # scripts/services.sh installs nginx when missing
    tmp = Path(tempfile.mkdtemp(prefix="dw-os-tls-"))
    tmp.chmod(0o755)  # as root, nginx's workers run as nobody
    _run("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=densewire test CA",
         "-keyout", str(tmp / "ca.key"), "-out", str(tmp / "ca.crt"))
    _run("openssl", "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost", "-keyout", str(tmp / "node.key"),
         "-out", str(tmp / "node.csr"))
    (tmp / "node.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    _run("openssl", "x509", "-req", "-in", str(tmp / "node.csr"), "-CA", str(tmp / "ca.crt"), "-CAkey",
         str(tmp / "ca.key"), "-CAcreateserial", "-days", "2", "-extfile", str(tmp / "node.ext"),
         "-out", str(tmp / "node.crt"))
    hashed = subprocess.run(["openssl", "passwd", "-apr1", PASSWORD], capture_output=True, text=True,
                            check=True).stdout.strip()
    (tmp / "htpasswd").write_text(f"{USER}:{hashed}\n")
    for f in tmp.iterdir():
        f.chmod(0o644)
    port, upstream = free_port(), opensearch_node.url.split("//")[1]
    temp = "".join(f"{k}_temp_path {tmp}/{k};\n" for k in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    (tmp / "nginx.conf").write_text(f"""daemon off;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log;
events {{ worker_connections 64; }}
http {{
  access_log off;
  client_max_body_size 64m;
  {temp}
  server {{
    listen 127.0.0.1:{port} ssl;
    ssl_certificate {tmp}/node.crt;
    ssl_certificate_key {tmp}/node.key;
    auth_basic "OpenSearch";
    auth_basic_user_file {tmp}/htpasswd;
    location / {{
      proxy_pass http://{upstream};
      proxy_set_header Authorization "";
    }}
  }}
}}
""")
    proc = subprocess.Popen([nginx, "-p", str(tmp), "-c", str(tmp / "nginx.conf")], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    try:
        for _ in range(200):
            if proc.poll() is not None:
                raise RuntimeError(f"nginx did not start: {proc.stderr.read().decode()}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        yield f"https://127.0.0.1:{port}", str(tmp / "ca.crt"), opensearch_node.url
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        shutil.rmtree(tmp, ignore_errors=True)


def _with(url: str, password: str) -> str:
    quoted = urllib.request.quote(password, safe="")
    return url.replace("https://", f"https://{USER}:{quoted}@")


def _table(ids, a: np.ndarray) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()),
                     "emb": pa.FixedSizeListArray.from_arrays(pa.array(a.reshape(-1)), a.shape[1])})


def _exists(node_url: str, index: str) -> bool:
    try:
        urllib.request.urlopen(urllib.request.Request(f"{node_url}/{index}", method="HEAD"), timeout=30)
        return True
    except urllib.error.HTTPError as exc:
        assert exc.code == 404
        return False


def _documents(node_url: str, index: str) -> dict[str, np.ndarray]:
    urllib.request.urlopen(urllib.request.Request(f"{node_url}/{index}/_refresh", method="POST"), timeout=60).read()
    hits = orjson.loads(urllib.request.urlopen(f"{node_url}/{index}/_search?size=10000", timeout=60).read())
    return {h["_id"]: np.array(h["_source"]["emb"], np.float32) for h in hits["hits"]["hits"]}


def test_basic_auth_and_the_ca_file_check_create_and_write(tls_front) -> None:
    url, ca, node = tls_front
    a = np.random.default_rng(8).standard_normal((300, 12)).astype(np.float32)
    sink = OpenSearchSink(_with(url, PASSWORD), index="os_tls", field="emb", id_column="id", create_index=True,
                          ca_file=ca, max_bytes=10_000)
    assert sink.write(_table(range(300), a), block="b0") == 300
    docs = _documents(node, "os_tls")
    assert sorted(map(int, docs)) == list(range(300))
    assert np.array_equal(np.stack([docs[str(i)] for i in range(300)]).view(np.uint32), a.view(np.uint32))
    # a second sink finds the index through the front and checks it
    again = OpenSearchSink(_with(url, PASSWORD), index="os_tls", field="emb", id_column="id", ca_file=ca)
    assert again.write(_table(range(300), a), block="b0") == 0  # replaced, none created


def test_a_wrong_password_is_unauthorized_before_anything_is_written(tls_front) -> None:
    url, ca, node = tls_front
    with pytest.raises(BatchError) as info:
        OpenSearchSink(_with(url, "wrong"), index="os_denied", field="emb", id_column="id", create_index=True,
                       ca_file=ca).write(_table([1], np.ones((1, 4), np.float32)), block="b0")
    assert info.value.category == "unauthorized" and "HTTP 401" in str(info.value)
    assert "check the API key or user and password" in str(info.value)
    assert not _exists(node, "os_denied")


def test_tls_without_the_ca_file_is_a_clear_error(tls_front) -> None:
    url, _ca, node = tls_front
    with pytest.raises(BatchError) as info:
        OpenSearchSink(_with(url, PASSWORD), index="os_noca", field="emb", id_column="id", create_index=True).write(
            _table([1], np.ones((1, 4), np.float32)), block="b0")
    assert info.value.category == "unavailable" and "CERTIFICATE_VERIFY_FAILED" in str(info.value)
    assert "--ca-file" in str(info.value)
    assert not _exists(node, "os_noca")


def test_cli_ingest_takes_the_ca_file_and_url_credentials(tls_front, tmp_path) -> None:
    url, ca, node = tls_front
    a = np.random.default_rng(9).standard_normal((120, 6)).astype(np.float32)
    body, _ = densewire.encode(densewire.Embeddings(densewire.Tensor.from_array(a), "m"), "msgpack")
    (tmp_path / "v.msgpack").write_bytes(bytes(body))
    args = [sys.executable, "-m", "densewire", "ingest", str(tmp_path / "v.msgpack"), "--to",
            "opensearch+" + _with(url, PASSWORD), "--index", "os_tls_cli", "--field", "emb", "--create-index",
            "--block-rows", "50", "--quiet"]
    refused = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert refused.returncode != 0 and "CERTIFICATE_VERIFY_FAILED" in refused.stderr
    done = subprocess.run(args + ["--ca-file", ca], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    docs = _documents(node, "os_tls_cli")
    assert np.array_equal(np.stack([docs[str(i)] for i in range(120)]).view(np.uint32), a.view(np.uint32))
