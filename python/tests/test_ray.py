"""densewire.ray on a real two-node Ray cluster (``ray.cluster_utils.Cluster``: two raylets with their own
object stores on this machine), two ``densewire serve`` replicas and a real PostgreSQL with pgvector:
the vectors equal ``Client.embed_many``'s bit for bit, both nodes embed, every id lands once, and an actor,
a write task or a replica killed mid-job leaves every row in the table exactly once."""

from __future__ import annotations

import collections
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import numpy as np
import psycopg
import pyarrow as pa
import pytest

import densewire
from conftest import FLEET_DIMENSIONS as D
from densewire import pgvector
from densewire.batch import BatchError
from server_support import REPO, ServerProcess

TESTS = Path(__file__).resolve().parent
# the cluster's processes: no usage reporting, no dashboard; the tests' own functions importable in workers;
# the memory monitor off (six jobs share this machine: its pressure is not this cluster's)
RAY_ENV = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_memory_monitor_refresh_ms": "0",
           "PYTHONPATH": os.pathsep.join([str(TESTS), str(REPO / "python" / "src"), os.environ.get("PYTHONPATH", "")])}

import ray  # noqa: E402
from ray.cluster_utils import Cluster  # noqa: E402

import densewire.ray as dwray  # noqa: E402

N = 2000
TEXTS = [f"passage {i}: {'the quick brown fox' if i % 2 else 'jumps over the lazy dog'} #{i * 7919 % 1000}"
         for i in range(N)]


@pytest.fixture(scope="module")
def cluster():
    """Two nodes of 3 logical CPUs each and 150 MB object stores: an actor of 2 CPUs fits on a node once
    (a pool of two is on both nodes), with a CPU beside it for the tasks that feed it and write its output.
    RAY_ENV is set for the module's tests only (the cluster's processes inherit it), not for the whole session."""
    with pytest.MonkeyPatch.context() as env:
        for name, value in RAY_ENV.items():
            env.setenv(name, value)
        yield from _cluster()


def _cluster():
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 3, "object_store_memory": 150 << 20,
                                                      "include_dashboard": False})
    try:
        c.add_node(num_cpus=3, object_store_memory=150 << 20)
        ray.init(address=c.address, logging_level="WARNING", log_to_driver=False)
        context = ray.data.DataContext.get_current()
        context.enable_progress_bars = False
        context.print_on_execution_start = False
        context.wait_for_min_actors_s = 300  # a pool starts work once all its actors are up: on a busy machine
        # the first actor could otherwise take every block before the second one (on the other node) started
        assert len([n for n in ray.nodes() if n["Alive"]]) == 2
        yield c
    finally:
        ray.shutdown()
        c.shutdown()


def _dataset(n: int = N, rows_per_block: int = 250) -> "ray.data.Dataset":
    table = pa.table({"id": pa.array(np.arange(n)), "text": TEXTS[:n]})
    return ray.data.from_arrow([table.slice(i, rows_per_block) for i in range(0, n, rows_per_block)])


def _where(batch: pa.Table) -> pa.Table:
    """Fused into the embedding actors (a task before an actor stage runs in the actor): who embedded."""
    context = ray.get_runtime_context()
    n = batch.num_rows
    return batch.append_column("node", pa.array([context.get_node_id()] * n)).append_column(
        "actor", pa.array([context.get_actor_id()] * n))


def _vectors(table: pa.Table, column: str = "embedding") -> np.ndarray:
    return table.column(column).combine_chunks().flatten().to_numpy().reshape(table.num_rows, -1)


def _client(url: str, texts: list[str]) -> np.ndarray:
    with densewire.Client(url) as client:
        return client.embed_many(texts)


def _fresh_table(url: str, name: str, d: int = D) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"DROP TABLE IF EXISTS {name}")
        conn.execute(f"CREATE TABLE {name} (id bigint PRIMARY KEY, embedding vector({d}))")


def _table_ids(url: str, name: str) -> list[int]:
    with psycopg.connect(url) as conn:
        return [r[0] for r in conn.execute(f"SELECT id FROM {name} ORDER BY id").fetchall()]


def test_embed_on_both_nodes_then_write_pgvector_and_es(cluster, hash_fleet, pgvector_db, tmp_path) -> None:
    urls = [s.url for s in hash_fleet]
    tagged = _dataset().map_batches(_where, batch_format="pyarrow", num_cpus=2)  # fuses with a pool of 2-CPU actors
    ds = dwray.embed(tagged, url=urls, batch_size=100,
                     concurrency=2, num_cpus=2, id_column="id").materialize()
    out = pa.concat_tables(ray.get(ds.to_arrow_refs())).sort_by("id")
    assert out.column("id").to_pylist() == list(range(N))
    assert out.schema.field("embedding").type == pa.list_(pa.field("item", pa.float32(), nullable=False), D)
    assert np.array_equal(_vectors(out), _client(urls[0], TEXTS))  # bit for bit
    assert None not in out.column("actor").to_pylist()  # embedded in the pool's actors ...
    nodes = collections.Counter(out.column("node").to_pylist())
    assert len(nodes) == 2 and min(nodes.values()) >= 250, nodes  # ... on both nodes

    _fresh_table(pgvector_db.url, "ray_docs")
    assert dwray.write_pgvector(ds, pgvector_db.url, table="ray_docs", column="embedding", id_column="id") == N
    with psycopg.connect(pgvector_db.url) as conn:
        back = pgvector.read_vectors(conn, "ray_docs", ("id", "embedding"), order_by="id")
    assert back.ids.tolist() == list(range(N)) and np.array_equal(back.tensor.array, _vectors(out))
    assert dwray.write_pgvector(ds, pgvector_db.url, table="ray_docs", column="embedding", id_column="id") == N
    assert _table_ids(pgvector_db.url, "ray_docs") == list(range(N))  # the job run again: still once each

    folder = tmp_path / "bulk"
    assert dwray.write_es_bulk(ds, str(folder), index="docs", field="embedding", id_column="id") == N
    files = sorted(folder.iterdir())
    assert files and all(re.fullmatch(r"[0-9a-f]{12}-\d{6}-\d{4}\.ndjson", f.name) for f in files)
    ids = [int(m) for f in files for m in re.findall(rb'"_id":"(\d+)"', f.read_bytes())]
    assert sorted(ids) == list(range(N))


def test_write_es_bulk_into_the_real_node(cluster, hash_fleet, es_node) -> None:
    """write_es_bulk to the session's Elasticsearch: the index created on the driver, every id once, the
    vectors bit for bit; the job run again replaces the documents (none added)."""
    from es_support import es_docs

    n, index = 400, "dw_ray"
    httpx.delete(f"{es_node.url}/{index}?ignore_unavailable=true", timeout=60)
    ds = dwray.embed(_dataset(n, 100), url=[s.url for s in hash_fleet], batch_size=100, id_column="id").materialize()
    options = {"create_index": True, "index_type": "flat", "similarity": "l2_norm"}
    assert dwray.write_es_bulk(ds, es_node.url, index=index, field="embedding", id_column="id", **options) == n
    docs = es_docs(es_node.url, index, "embedding")
    assert sorted(map(int, docs)) == list(range(n))
    assert np.array_equal(np.stack([docs[str(i)] for i in range(n)]), _client(hash_fleet[0].url, TEXTS[:n]))
    assert dwray.write_es_bulk(ds, es_node.url, index=index, field="embedding", id_column="id") == n
    assert len(es_docs(es_node.url, index, "embedding")) == n


def _die_once(batch: pa.Table, marker: str, at_id: int) -> pa.Table:
    """SIGKILL this process the first time it sees ``at_id`` (the marker file says it happened)."""
    if at_id in batch.column("id").to_pylist() and not os.path.exists(marker):
        Path(marker).write_text(str(os.getpid()))
        os.kill(os.getpid(), signal.SIGKILL)
    return batch


def test_an_actor_killed_mid_embed_leaves_every_row_once(cluster, hash_fleet, pgvector_db, tmp_path) -> None:
    marker = str(tmp_path / "killed")
    ds = _dataset().map_batches(_die_once, fn_kwargs={"marker": marker, "at_id": 1100}, batch_format="pyarrow")
    ds = dwray.embed(ds, url=[s.url for s in hash_fleet], concurrency=2, batch_size=100)
    _fresh_table(pgvector_db.url, "ray_actor_kill")
    assert dwray.write_pgvector(ds, pgvector_db.url, table="ray_actor_kill", column="embedding", id_column="id") == N
    assert Path(marker).exists()  # an embedding actor did die mid-job; Ray restarted it and ran its task again
    assert _table_ids(pgvector_db.url, "ray_actor_kill") == list(range(N))
    with psycopg.connect(pgvector_db.url) as conn:
        got = pgvector.read_vectors(conn, "ray_actor_kill", "embedding", order_by="id").tensor.array
    assert np.array_equal(got, _client(hash_fleet[0].url, TEXTS))


class _DyingAfterCommit(dwray.PgvectorDatasink):
    """Kills its write task once, after its block's transaction committed and before Ray hears of it:
    the worst moment, when Ray runs the task again on rows already in the table."""

    def __init__(self, *args, marker: str, **kw) -> None:
        super().__init__(*args, **kw)
        self.marker = marker

    def write(self, blocks, ctx):
        done = super().write(blocks, ctx)
        if not os.path.exists(self.marker):
            Path(self.marker).write_text(str(done))
            os.kill(os.getpid(), signal.SIGKILL)
        return done


def test_a_write_task_killed_after_its_commit_leaves_every_row_once(cluster, hash_fleet, pgvector_db,
                                                                     tmp_path) -> None:
    ds = dwray.embed(_dataset(), url=[s.url for s in hash_fleet], concurrency=2, batch_size=100).materialize()
    _fresh_table(pgvector_db.url, "ray_write_kill")
    marker = tmp_path / "killed"
    sink = _DyingAfterCommit(pgvector_db.url, table="ray_write_kill", column="embedding", id_column="id",
                             marker=str(marker))
    ds.write_datasink(sink)
    rows, new = map(int, marker.read_text().strip("()").split(","))
    assert rows > 0 and new == rows  # the killed attempt committed its block ...
    assert sink.result == N and sink.new == N - rows  # ... so the attempt Ray ran again inserted none of it
    assert _table_ids(pgvector_db.url, "ray_write_kill") == list(range(N))


def _kill_replica_once(batch: pa.Table, marker: str, at_id: int, pid: int) -> pa.Table:
    if at_id in batch.column("id").to_pylist() and not os.path.exists(marker):
        Path(marker).write_text("killed")
        os.kill(pid, signal.SIGKILL)
    return batch


def test_a_replica_killed_mid_job_is_skipped(cluster, hash_fleet, tmp_path) -> None:
    spare = ServerProcess("--model", f"hash:{D}", tmp=tmp_path).start()
    marker = str(tmp_path / "killed")
    try:
        ds = _dataset().map_batches(_kill_replica_once, batch_format="pyarrow",
                                    fn_kwargs={"marker": marker, "at_id": 800, "pid": spare.proc.pid})
        ds = dwray.embed(ds, url=[spare.url, hash_fleet[0].url], concurrency=2, batch_size=50)
        out = pa.concat_tables(ray.get(ds.to_arrow_refs())).sort_by("id")
        assert spare.proc.poll() == -signal.SIGKILL  # it died mid-job ...
    finally:
        spare.stop()
    assert out.column("id").to_pylist() == list(range(N))  # ... and the job went on without it
    assert np.array_equal(_vectors(out), _client(hash_fleet[0].url, TEXTS))


def test_model_mode_minilm_in_the_actors_matches_the_server(cluster, tmp_path) -> None:
    n = 300
    with ServerProcess("--model", "minilm", tmp=tmp_path) as server:
        want = _client(server.url, TEXTS[:n])
    ds = dwray.embed(_dataset(n, 75).map_batches(_where, batch_format="pyarrow", num_cpus=2), model="minilm", concurrency=2,
                     num_cpus=2, batch_size=32)
    out = pa.concat_tables(ray.get(ds.to_arrow_refs())).sort_by("id")
    got = _vectors(out)
    assert got.shape == (n, 384) and len(set(out.column("node").to_pylist())) == 2
    assert np.abs(got - want).max() < 1e-5  # the same ONNX engine; thread counts may reorder float sums
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)


def test_a_bad_block_fails_the_job_naming_the_block(cluster, hash_fleet, pgvector_db) -> None:
    _fresh_table(pgvector_db.url, "ray_bad")
    table = pa.table({"id": pa.array(np.arange(20)), "text": TEXTS[:19] + [""]})
    ds = dwray.embed(ray.data.from_arrow(table), url=hash_fleet[0].url, concurrency=1, id_column="id")
    with pytest.raises(Exception) as info:
        dwray.write_pgvector(ds, pgvector_db.url, table="ray_bad", column="embedding", id_column="id")
    assert "an empty text (column 'text', row 19, id 19" in str(info.value)
    assert _table_ids(pgvector_db.url, "ray_bad") == []

    wrong = ray.data.from_arrow(pa.table({"id": [1, 2], "embedding": pa.FixedSizeListArray.from_arrays(
        pa.array(np.zeros(2 * (D + 1), np.float32)), D + 1)}))
    with pytest.raises(BatchError, match=rf"vectors of {D + 1} dimensions for ray_bad.embedding, a vector\({D}\)"):
        dwray.write_pgvector(wrong, pgvector_db.url, table="ray_bad", column="embedding", id_column="id")

    closed = "postgresql://dw@127.0.0.1:9/postgres?connect_timeout=2"
    with pytest.raises(Exception) as info:
        dwray.write_pgvector(wrong, closed, table="ray_bad", column="embedding", id_column="id")
    assert "no connection to the database after 3 attempts" in str(info.value)


def test_the_readme_ray_example_runs_as_written(cluster, pgvector_db, es_node, tmp_path) -> None:
    """README.md's ```python ray block, in a new Python process joining the cluster by RAY_ADDRESS, with
    two hash:384 replicas for its two URLs, the test database for its conninfo and the session's
    Elasticsearch for its node."""
    readme = (REPO / "README.md").read_text()
    blocks = re.findall(r"```python ray\n(.*?)```", readme, re.S)
    assert len(blocks) == 1
    servers = [ServerProcess("--model", "hash:384", tmp=tmp_path) for _ in range(2)]
    try:
        for s in servers:
            s.start()
        code = (blocks[0].replace("http://10.0.0.11:8000", servers[0].url).replace("http://10.0.0.12:8000", servers[1].url)
                .replace("postgresql://localhost/app", pgvector_db.url).replace("http://localhost:9200", es_node.url))
        httpx.delete(f"{es_node.url}/docs?ignore_unavailable=true", timeout=60)
        with psycopg.connect(pgvector_db.url, autocommit=True) as conn:  # rows of an earlier run stay as they are
            conn.execute("DROP TABLE IF EXISTS docs")
            conn.execute("CREATE TABLE docs (id bigint PRIMARY KEY, embedding vector(384))")
            conn.execute("INSERT INTO docs SELECT i, array_fill(0, ARRAY[384])::vector FROM generate_series(0, 99) i")
        proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                              timeout=600, env={**os.environ, "RAY_ADDRESS": cluster.address})
        assert proc.returncode == 0, proc.stderr[-4000:]
    finally:
        for s in servers:
            s.stop()
    assert _table_ids(pgvector_db.url, "docs") == list(range(2_000))
    with psycopg.connect(pgvector_db.url) as conn:
        zero = conn.execute("SELECT count(*) FROM docs WHERE embedding = array_fill(0, ARRAY[384])::vector").fetchone()
    assert zero[0] == 100  # the rows already there were kept, not inserted again
    files = list((tmp_path / "bulk").iterdir())  # the relative folder, resolved on the driver
    assert sum(f.read_bytes().count(b'"_index":"docs"') for f in files) == 2_000
    from es_support import es_docs

    assert sorted(map(int, es_docs(es_node.url, "docs", "embedding"))) == list(range(2_000))


def _store_count(block: str, services: dict[str, str], tmp_path: Path) -> int:
    """The documents the README job of ``block`` left in its store."""
    from densewire._stores._http import request_json

    if "write_opensearch" in block:
        url = services["http://localhost:9200"]
        request_json("POST", f"{url}/docs/_refresh")
        return request_json("GET", f"{url}/docs/_count")["count"]
    if "write_lancedb" in block:
        import lancedb
        return lancedb.connect(str(tmp_path / "lance")).open_table("docs").count_rows()
    if "write_chroma" in block:
        base = f"{services['http://localhost:8000']}/api/v2/tenants/default_tenant/databases/default_database/collections"
        return request_json("GET", f"{base}/{request_json('GET', f'{base}/docs')['id']}/count")
    from pymilvus import MilvusClient
    client = MilvusClient(services["http://localhost:19530"])
    try:
        return client.query("docs", filter="id >= 0", output_fields=["count(*)"])[0]["count(*)"]
    finally:
        client.close()


def test_the_readme_store_jobs_run_as_written(cluster, hash_fleet, opensearch_node, chroma_server, milvus_server,
                                              tmp_path) -> None:
    """README.md's ```python ray-store blocks (one job per store family), each in a new Python process
    joining the cluster, against the session's OpenSearch, Chroma and Milvus (LanceDB in a folder): each
    store then holds the 2,000 ids (a rerun's ids once: test_spark's store test and the sinks' own tests)."""
    readme = (REPO / "README.md").read_text()
    blocks = re.findall(r"```python ray-store\n(.*?)```", readme, re.S)
    assert [b for b in blocks if "write_opensearch" in b] and [b for b in blocks if "write_lancedb" in b]
    assert [b for b in blocks if "write_chroma" in b] and [b for b in blocks if "write_milvus" in b]
    services = {"http://10.0.0.11:8000": hash_fleet[0].url, "http://localhost:9200": opensearch_node.url,
                "http://localhost:8000": chroma_server.url, "http://localhost:19530": milvus_server.url}
    for block in blocks:
        code = block
        for old, new in services.items():
            code = code.replace(old, new)
        proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                              timeout=600, env={**os.environ, "RAY_ADDRESS": cluster.address})
        assert proc.returncode == 0, proc.stderr[-4000:]
        assert _store_count(block, services, tmp_path) == 2_000
