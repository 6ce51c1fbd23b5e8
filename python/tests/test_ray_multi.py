"""densewire.ray's sparse and per-token output on a real local Ray cluster: ``embed(output="sparse")``
from ``densewire serve --model hash:16`` replicas and ``embed(output="tokens")`` from a MiniLM server
travel Ray's Arrow blocks as the SPEC.md 20.7 columns, then ``write_pgvector`` fills a real
``sparsevec(30522)``, ``write_pgvector_tokens`` a real per-token table and ``write_es_sparse_vector`` the
real Elasticsearch: rows equal to the client's answers bit for bit, each id (each (id, position)) once when
the job runs twice."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import httpx
import numpy as np
import pyarrow as pa
import pytest

import densewire
from densewire import pgvector
from densewire._backends import default_model_path
from densewire._backends.hash import SPARSE_VOCAB_SIZE
from server_support import REPO

TESTS = Path(__file__).resolve().parent
RAY_ENV = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_memory_monitor_refresh_ms": "0",
           "PYTHONPATH": os.pathsep.join([str(TESTS), str(REPO / "python" / "src"), os.environ.get("PYTHONPATH", "")])}

import ray  # noqa: E402

import densewire.ray as dwray  # noqa: E402

N = 80
TEXTS = [f"passage {i}: {'the quick brown fox' if i % 2 else 'jumps over the lazy dog'} #{i * 7919 % 1000}"
         for i in range(N)]


@pytest.fixture(scope="module")
def local_ray():
    with pytest.MonkeyPatch.context() as env:
        for name, value in RAY_ENV.items():
            env.setenv(name, value)
        ray.init(num_cpus=2, object_store_memory=150 << 20, include_dashboard=False, logging_level="WARNING",
                 log_to_driver=False)
        context = ray.data.DataContext.get_current()
        context.enable_progress_bars = False
        context.print_on_execution_start = False
        try:
            yield
        finally:
            ray.shutdown()


@pytest.fixture(scope="module")
def minilm(minilm_server):
    return minilm_server  # conftest: one MiniLM server for the session


def _dataset(n: int = N, rows_per_block: int = 20) -> "ray.data.Dataset":
    table = pa.table({"id": pa.array(np.arange(n)), "text": TEXTS[:n]})
    return ray.data.from_arrow([table.slice(i, rows_per_block) for i in range(0, n, rows_per_block)])


def test_sparse_into_sparsevec_and_elasticsearch(local_ray, hash_fleet, pgvector_db, conn, es_node) -> None:
    url = hash_fleet[0].url
    ds = dwray.embed(_dataset(), url=url, output="sparse", batch_size=16, concurrency=1).materialize()
    conn.execute("DROP TABLE IF EXISTS ray_sparse")
    conn.execute(f"CREATE TABLE ray_sparse (id bigint PRIMARY KEY, embedding sparsevec({SPARSE_VOCAB_SIZE}))")
    for _ in range(2):  # the job run twice: every id once
        assert dwray.write_pgvector(ds, pgvector_db.url, table="ray_sparse", column="embedding", id_column="id") == N
    with densewire.Client(url) as client:
        want = client.embed_sparse(TEXTS)
    back = pgvector.read_vectors(conn, "ray_sparse", ("id", "embedding"), order_by="id")
    assert back.ids.tolist() == list(range(N))
    assert np.array_equal(back.tensor.array.view(np.uint32), want.to_dense().view(np.uint32))
    httpx.delete(f"{es_node.url}/ray_splade", timeout=60)
    for create in (True, False):
        assert dwray.write_es_sparse_vector(ds, es_node.url, index="ray_splade", field="embedding", id_column="id",
                                            vocab=default_model_path(), create_index=create) == N
    httpx.post(f"{es_node.url}/ray_splade/_refresh").raise_for_status()
    assert httpx.get(f"{es_node.url}/ray_splade/_count").json()["count"] == N


def test_tokens_into_a_per_token_table(local_ray, minilm, pgvector_db, conn) -> None:
    ds = dwray.embed(_dataset(24, 8), url=minilm.url, output="tokens", batch_size=8, concurrency=1).materialize()
    assert ds.schema().base_schema.field("embedding").type.value_type.list_size == 384
    conn.execute("DROP TABLE IF EXISTS ray_tokens")
    conn.execute("CREATE TABLE ray_tokens (id bigint, position int, embedding vector(384), PRIMARY KEY (id, position))")
    for _ in range(2):
        assert dwray.write_pgvector_tokens(ds, pgvector_db.url, table="ray_tokens", column="embedding",
                                           id_column="id") == 24
    with densewire.Client(minilm.url) as client:
        want = client.embed_tokens(TEXTS[:24])
    back = pgvector.read_vectors(conn, query="SELECT id, embedding FROM ray_tokens ORDER BY id, position")
    assert back.ids.tolist() == np.repeat(np.arange(24), want.lengths).tolist()
    assert np.array_equal(back.tensor.array.view(np.uint32), want.values.view(np.uint32))


def test_readme_ray_multi_block(local_ray, hash_fleet, minilm, pgvector_db, es_node, conn, tmp_path) -> None:
    """README.md's ```python ray-multi block, in a new Python process joining this cluster, against the
    session's hash:16 replicas (sparse), a MiniLM server (tokens), PostgreSQL and Elasticsearch."""
    (block,) = re.findall(r"```python ray-multi\n(.*?)```", (REPO / "README.md").read_text(), re.S)
    for table in ("docs_sparse", "doc_tokens"):
        conn.execute(f"DROP TABLE IF EXISTS {table}")
    httpx.delete(f"{es_node.url}/docs_sparse", timeout=60)
    services = {"http://10.0.0.11:8000": hash_fleet[0].url, "http://10.0.0.12:8000": minilm.url,
                "postgresql://localhost/app": pgvector_db.url, "http://localhost:9200": es_node.url,
                '"all-MiniLM-L6-v2/"': repr(str(default_model_path()))}
    for old, new in services.items():
        assert old in block
        block = block.replace(old, new)
    address = ray.get_runtime_context().gcs_address
    proc = subprocess.run([sys.executable, "-c", block], cwd=tmp_path, capture_output=True, text=True, timeout=600,
                          env={**os.environ, **RAY_ENV, "RAY_ADDRESS": address})
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert conn.execute("SELECT count(DISTINCT id) FROM doc_tokens").fetchone()[0] == 500
    assert conn.execute("SELECT count(*) FROM docs_sparse").fetchone()[0] == 500
