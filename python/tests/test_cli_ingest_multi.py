"""``densewire ingest --embed URL --output tokens|sparse``: texts embedded by real ``densewire serve``
servers (hash:16's sparse output, MiniLM's per-token states) into the real PostgreSQL (a sparsevec column,
a per-token table) and the real Elasticsearch (a sparse_vector field keyed by MiniLM's vocabulary): rows
equal to the client's answers, each id once when the command runs twice, clear errors for what is
missing."""

from __future__ import annotations

import httpx
import numpy as np
import pytest

import densewire
from densewire import pgvector
from densewire._backends import default_model_path
from densewire._cli import main

TEXTS = [f"text {i} on {'late interaction' if i % 2 else 'learned sparse retrieval'} number {i * 31 % 17}"
         for i in range(45)]


@pytest.fixture(scope="module")
def minilm(minilm_server):
    return minilm_server  # conftest: one MiniLM server for the session


@pytest.fixture
def texts(tmp_path):
    path = tmp_path / "texts.txt"
    path.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    return str(path)


def test_sparse_into_sparsevec_twice(hash_fleet, pgvector_db, conn, texts) -> None:
    conn.execute("DROP TABLE IF EXISTS cli_sparse")
    conn.execute("CREATE TABLE cli_sparse (id bigint PRIMARY KEY, embedding sparsevec(30522))")
    args = ["ingest", texts, "--embed", hash_fleet[0].url, "--output", "sparse", "--to", pgvector_db.url,
            "--table", "cli_sparse", "--column", "embedding", "--id-column", "id", "--block-rows", "20",
            "--batch-size", "8", "--first-id", "100", "--quiet"]
    assert main(args) == 0 and main(args) == 0
    with densewire.Client(hash_fleet[0].url) as client:
        want = client.embed_sparse(TEXTS)
    back = pgvector.read_vectors(conn, "cli_sparse", ("id", "embedding"), order_by="id")
    assert back.ids.tolist() == list(range(100, 145))
    assert np.array_equal(back.tensor.array.view(np.uint32), want.to_dense().view(np.uint32))


def test_tokens_into_a_per_token_table(minilm, pgvector_db, conn, texts, capsys) -> None:
    conn.execute("DROP TABLE IF EXISTS cli_tokens")
    conn.execute("CREATE TABLE cli_tokens (doc text, pos int, tok halfvec(384), PRIMARY KEY (doc, pos))")
    ids = texts + ".ids"
    with open(ids, "w", encoding="utf-8") as f:
        f.write("\n".join(f"doc-{i:02d}" for i in range(len(TEXTS))) + "\n")
    args = ["ingest", texts, "--embed", minilm.url, "--output", "tokens", "--to", pgvector_db.url, "--table",
            "cli_tokens", "--column", "tok", "--id-column", "doc", "--position-column", "pos", "--ids", ids,
            "--block-rows", "16"]
    assert main(args) == 0
    assert "45 rows" in capsys.readouterr().err and main(args + ["--quiet"]) == 0
    with densewire.Client(minilm.url) as client:
        want = client.embed_tokens(TEXTS)
    back = pgvector.read_vectors(conn, query="SELECT doc, tok FROM cli_tokens ORDER BY doc, pos")
    assert back.ids == [f"doc-{i:02d}" for i, k in enumerate(want.lengths.tolist()) for _ in range(k)]
    assert np.array_equal(back.tensor.array, want.values.astype(np.float16))


def test_sparse_into_elasticsearch(hash_fleet, es_node, texts) -> None:
    httpx.delete(f"{es_node.url}/cli_splade", timeout=60)
    args = ["ingest", texts, "--embed", hash_fleet[0].url, "--output", "sparse", "--to", es_node.url, "--index",
            "cli_splade", "--field", "splade", "--vocab", str(default_model_path()), "--create-index", "--quiet"]
    assert main(args) == 0 and main(args) == 0
    httpx.post(f"{es_node.url}/cli_splade/_refresh").raise_for_status()
    assert httpx.get(f"{es_node.url}/cli_splade/_count").json()["count"] == len(TEXTS)


@pytest.mark.parametrize(("extra", "message"), [
    (["--output", "tokens"], "--output tokens embeds texts on the way: pass --embed URL"),
    (["--output", "sparse", "--embed", "http://127.0.0.1:9", "--to", "http://127.0.0.1:9", "--index", "x"],
     "needs --vocab"),
    (["--output", "sparse", "--embed", "http://127.0.0.1:9", "--to", "lancedb:/tmp/x"],
     "goes to postgresql://... or http(s)://HOST:9200"),
    (["--output", "tokens", "--embed", "http://127.0.0.1:9", "--to", "postgresql://h/db", "--table", "t"],
     "needs --table, --column and --id-column"),
])
def test_what_is_missing_is_named(texts, extra, message) -> None:
    args = ["ingest", texts, *extra]
    if "--to" not in extra:
        args += ["--to", "postgresql://127.0.0.1:9/db"]
    with pytest.raises(SystemExit) as info:
        main(args)
    assert message in str(info.value)
