"""densewire ingest: densewire bodies (or texts embedded by a real densewire server) into a real PostgreSQL
with pgvector 0.8.6 and into Elasticsearch/OpenSearch bulk bodies, which are checked against the
elasticsearch client's own packing (pack_dense_vector) and bulk serialization (NdjsonSerializer)."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import struct
import subprocess
import sys
import termios

import numpy as np
import psycopg
import pytest
from elasticsearch.helpers import expand_action, pack_dense_vector
from elasticsearch.serializer import NdjsonSerializer

import densewire
from densewire._cli import main
from server_support import SRC, ServerProcess

RNG = np.random.default_rng(1803)
V = RNG.standard_normal((120, 12)).astype(np.float32)


@pytest.fixture
def pg(pgvector_db):
    """The session's PostgreSQL with pgvector (conftest): every test here makes its own tables first."""
    return pgvector_db


@pytest.fixture(scope="module")
def bodies(tmp_path_factory):
    d = tmp_path_factory.mktemp("bodies")
    emb = densewire.Embeddings(densewire.Tensor.from_array(V), "m")
    out = {}
    for fmt in ("msgpack", "arrow", "json"):
        body, _ = densewire.encode(emb, fmt)
        (d / f"v.{fmt}").write_bytes(bytes(body))
        out[fmt] = d / f"v.{fmt}"
    return out


def _table(pg, ddl: str) -> psycopg.Connection:
    conn = psycopg.connect(pg.url, autocommit=True)
    conn.execute("DROP TABLE IF EXISTS items")
    conn.execute(f"CREATE TABLE items ({ddl})")
    return conn


@pytest.mark.parametrize("fmt", ["msgpack", "arrow", "json"])
def test_body_into_a_vector_column(pg, bodies, fmt, capsys) -> None:
    with _table(pg, "id int8 PRIMARY KEY, embedding vector(12)") as conn:
        rc = main(["ingest", str(bodies[fmt]), "--to", pg.url, "--table", "items", "--column", "embedding",
                   "--id-column", "id", "--first-id", "1000", "--block-rows", "50"])
        assert rc == 0
        err = capsys.readouterr().err
        assert err.startswith("densewire ingest: 120 rows, ") and "postgresql table items (id int8, embedding vector)" in err
        got = densewire.pgvector.read_vectors(conn, "items", ("id", "embedding"), order_by="id")
        assert got.ids.tolist() == list(range(1000, 1120))
        assert np.array_equal(got.tensor.array, V)


@pytest.mark.parametrize("pg_type", ["halfvec", "bit"])
def test_converted_to_the_columns_type(pg, bodies, pg_type) -> None:
    with _table(pg, f"embedding {pg_type}(12)") as conn:
        assert main(["ingest", str(bodies["msgpack"]), "--to", pg.url, "--table", "items", "--column", "embedding",
                     "--quiet"]) == 0
        got = densewire.pgvector.read_vectors(conn, query="SELECT embedding FROM items").tensor.array
        expected = V.astype(np.float16) if pg_type == "halfvec" else np.packbits(V > 0, axis=1)
        assert np.array_equal(np.sort(got.view(np.uint8), axis=0), np.sort(expected.view(np.uint8), axis=0))


def test_ranges_and_resume(pg, bodies, capsys) -> None:
    with _table(pg, "id int8, embedding vector(12)") as conn:
        common = [str(bodies["msgpack"]), "--to", pg.url, "--table", "items", "--column", "embedding",
                  "--id-column", "id", "--block-rows", "16"]
        assert main(["ingest", *common, "--start-id", "10", "--end-id", "40"]) == 0
        assert "30 rows, 90 skipped" in capsys.readouterr().err
        assert main(["ingest", *common, "--resume"]) == 0  # a second run completes the table, nothing twice
        assert "90 rows, 30 skipped" in capsys.readouterr().err
        assert conn.execute("SELECT count(*), count(DISTINCT id), min(id), max(id) FROM items").fetchone() == (120, 120, 0, 119)
        got = densewire.pgvector.read_vectors(conn, "items", ("id", "embedding"), order_by="id")
        assert np.array_equal(got.tensor.array, V)
        assert main(["ingest", *common, "--resume"]) == 0
        assert "0 rows, 120 skipped" in capsys.readouterr().err


def test_bad_values_and_destinations(pg, bodies, tmp_path, capsys) -> None:
    bad = V.copy()
    bad[77, 5] = np.nan
    path = tmp_path / "bad.msgpack"
    body, _ = densewire.encode(densewire.Embeddings(densewire.Tensor.from_array(bad)), "msgpack")
    path.write_bytes(bytes(body))
    with _table(pg, "embedding vector(12)") as conn:
        assert main(["ingest", str(path), "--to", pg.url, "--table", "items", "--column", "embedding"]) == 2
        assert "non_finite" in capsys.readouterr().err and conn.execute("SELECT count(*) FROM items").fetchone()[0] == 0
    with pytest.raises(SystemExit, match="--to must be"):
        main(["ingest", str(path), "--to", "mysql://x"])
    with pytest.raises(SystemExit, match="needs --table and --column"):
        main(["ingest", str(path), "--to", pg.url])
    with pytest.raises(SystemExit, match='relation "nowhere" does not exist'):
        main(["ingest", str(bodies["msgpack"]), "--to", pg.url, "--table", "nowhere", "--column", "e"])


def _es_body(index: str, field: str, rows: np.ndarray, ids: list[str], packed: bool) -> bytes:
    """The bulk body the elasticsearch client itself builds (expand_action + its NDJSON serializer)."""
    lines = []
    for i, row in zip(ids, rows):
        doc = {"_index": index, "_id": i, field: pack_dense_vector(row) if packed else row.tolist()}
        action, source = expand_action(doc)
        lines += [action, source]
    return NdjsonSerializer().dumps(lines)


def test_es_bulk_is_what_the_elasticsearch_client_sends(bodies, tmp_path) -> None:
    out = tmp_path / "bulk.ndjson"
    assert main(["ingest", str(bodies["arrow"]), "--to", f"es-bulk:{out}", "--index", "docs", "--field", "vec",
                 "--first-id", "5", "--quiet"]) == 0
    ours = out.read_bytes()
    theirs = _es_body("docs", "vec", V, [str(i) for i in range(5, 125)], packed=True)
    assert ours.rstrip(b"\n") == theirs.rstrip(b"\n")  # byte for byte
    assert main(["ingest", str(bodies["arrow"]), "--to", f"es-bulk:{out}", "--index", "docs", "--field", "vec",
                 "--vector-format", "floats", "--no-ids", "--quiet"]) == 0
    lines = out.read_bytes().splitlines()
    theirs = _es_body("docs", "vec", V, [str(i) for i in range(120)], packed=False).splitlines()
    assert len(lines) == len(theirs) == 240
    for k in range(0, 240, 2):
        assert json.loads(lines[k]) == {"index": {"_index": "docs"}}
        ours_v = np.array(json.loads(lines[k + 1])["vec"], np.float32)
        theirs_v = np.array(json.loads(theirs[k + 1])["vec"], np.float32)
        assert np.array_equal(ours_v, theirs_v)  # value by value, as float32
        assert len(lines[k + 1]) < len(theirs[k + 1])  # shortest float32 decimals, not float64 ones


def test_es_bulk_resume_appends_the_missing_ids(bodies, tmp_path) -> None:
    out = tmp_path / "bulk.ndjson"
    common = [str(bodies["msgpack"]), "--to", f"es-bulk:{out}", "--index", "docs", "--quiet"]
    assert main(["ingest", *common, "--end-id", "50"]) == 0
    assert main(["ingest", *common, "--resume"]) == 0
    assert out.read_bytes().rstrip(b"\n") == _es_body("docs", "embedding", V, [str(i) for i in range(120)], True).rstrip(b"\n")


def test_stdin_to_stdout() -> None:
    body, _ = densewire.encode(densewire.Embeddings(densewire.Tensor.from_array(V[:3])), "protobuf")
    proc = subprocess.run([sys.executable, "-m", "densewire", "ingest", "-", "--to", "es-bulk:-", "--index", "i"],
                          input=bytes(body), capture_output=True, env={"PYTHONPATH": str(SRC)}, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.rstrip(b"\n") == _es_body("i", "embedding", V[:3], ["0", "1", "2"], True).rstrip(b"\n")
    assert proc.stderr.decode().startswith("densewire ingest: 3 rows, ")


def test_texts_embedded_on_the_way(pg, tmp_path) -> None:
    texts = [f"text number {i}" for i in range(70)]
    src = tmp_path / "texts.txt"
    src.write_text("\n".join(texts) + "\n")
    with ServerProcess("--model", "hash:16", "--no-demo-tables") as server, _table(pg, "id int4, embedding vector(16)") as conn:
        expected = densewire.Client(server.url).embed(texts)
        assert main(["ingest", str(src), "--embed", server.url, "--to", pg.url, "--table", "items",
                     "--column", "embedding", "--id-column", "id", "--batch-size", "16", "--block-rows", "32",
                     "--end-id", "40", "--quiet"]) == 0
        assert main(["ingest", str(src), "--embed", server.url, "--to", pg.url, "--table", "items",
                     "--column", "embedding", "--id-column", "id", "--resume", "--quiet"]) == 0
        got = densewire.pgvector.read_vectors(conn, "items", ("id", "embedding"), order_by="id")
        assert got.ids.tolist() == list(range(70))
        assert np.array_equal(got.tensor.array, expected)
        out = tmp_path / "bulk.ndjson"
        assert main(["ingest", str(src), "--embed", server.url, "--to", f"es-bulk:{out}", "--index", "t",
                     "--quiet"]) == 0
        assert out.read_bytes().rstrip(b"\n") == _es_body("t", "embedding", expected, [str(i) for i in range(70)],
                                                           True).rstrip(b"\n")


def test_progress_bar_on_a_terminal_only(bodies, tmp_path) -> None:
    """On a terminal (a pty of 100 columns) standard error shows a tqdm bar; into a pipe only the summary."""
    args = [sys.executable, "-m", "densewire", "ingest", str(bodies["msgpack"]), "--to", f"es-bulk:{tmp_path / 'b'}",
            "--index", "i", "--block-rows", "10"]
    env = {"PYTHONPATH": str(SRC)}
    parent, child = pty.openpty()
    fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 20, 100, 0, 0))
    proc = subprocess.run(args, stderr=child, stdout=subprocess.DEVNULL, env=env, timeout=60)
    os.close(child)
    seen = b""
    while True:
        try:
            chunk = os.read(parent, 65536)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
    os.close(parent)
    assert proc.returncode == 0
    assert b"120 rows [" in seen and b"densewire ingest: 120 rows" in seen
    piped = subprocess.run(args, capture_output=True, env=env, timeout=60)
    assert piped.stderr.decode().startswith("densewire ingest: 120 rows") and b"rows [" not in piped.stderr
    assert len(piped.stderr.decode().splitlines()) == 1
