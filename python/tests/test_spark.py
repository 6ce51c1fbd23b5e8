"""densewire.spark on a real Spark standalone cluster (a master and two 1-core workers started from the pyspark
package's jars), two ``densewire serve --model hash:16`` replicas and a real PostgreSQL with pgvector: vectors
equal the client's bit for bit, both workers ran tasks, every id lands once, a Python worker or a whole
executor killed in the middle of a block's transaction leaves every row exactly once, and bad input is named
by column, row, id and block (on the driver, before any job, where the schema tells)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
from pathlib import Path

import httpx
import numpy as np
import psycopg
import pyarrow as pa
import pybase64
import orjson
import pytest
from pyspark.errors import PythonException
from pyspark.sql.types import LongType, StructField, StructType

import densewire
from conftest import FLEET_DIMENSIONS as D
from densewire import pgvector
from densewire.batch import BatchError
from densewire.spark import embed, spark_vectors, write_es_bulk, write_pgvector
from server_support import SRC, ServerProcess, wait_until
from spark_support import SparkCluster, ancestors, executor_jvm_of, executors, process_of_local_port, spark_conf

REPO = Path(__file__).resolve().parents[2]

N = 240


def _texts(n: int = N) -> list[str]:
    return [f"document {i} about {'cats' if i % 3 else 'dogs'} and {i % 7} more" for i in range(n)]


def _corpus(spark, n: int = N, partitions: int = 6):
    return spark.range(0, n, numPartitions=partitions).selectExpr(
        "id", "concat('document ', id, ' about ', if(id % 3 = 0, 'dogs', 'cats'), ' and ', id % 7, ' more') AS text")


def _client_vectors(url: str, texts: list[str]) -> np.ndarray:
    with densewire.Client(url) as client:
        return client.embed_many(texts)


def _vectors(table: pa.Table, column: str = "embedding") -> np.ndarray:
    col = table.column(column).combine_chunks()
    return col.flatten().to_numpy().reshape(len(col), -1)


def _placed(batches):
    """Runs in the tasks (this module is on the executors' path): each row with the Python worker's pid, its
    executor JVM's and the Worker JVM's that launched that executor."""
    me = os.getpid()
    jvm = executor_jvm_of(me)
    worker = ancestors(jvm)[0]
    for batch in batches:
        n = batch.num_rows
        yield batch.append_column("python_pid", pa.array([me] * n, pa.int64())).append_column(
            "executor_pid", pa.array([jvm] * n, pa.int64())).append_column("worker_pid", pa.array([worker] * n, pa.int64()))


def test_spark_vectors_reuse_the_values_buffer() -> None:
    values = pa.array(np.arange(12, dtype=np.float32))
    fixed = pa.FixedSizeListArray.from_arrays(values, 3)
    (lists,) = spark_vectors(fixed)
    assert lists.type == pa.list_(pa.field("element", pa.float32(), nullable=False))
    assert lists.values.buffers()[1].address == values.buffers()[1].address  # the same buffer, no copy
    assert lists.offsets.to_pylist() == [0, 3, 6, 9, 12] and lists.to_pylist()[1] == [3, 4, 5]
    cut = spark_vectors(fixed.slice(1), max_values=6)  # int32 offsets: pieces of at most max_values values
    assert [len(p) for p in cut] == [2, 1] and cut[1].to_pylist() == [[9, 10, 11]]


def test_embed_equals_the_client_bit_for_bit_and_both_workers_ran_tasks(spark, spark_cluster, hash_fleet) -> None:
    urls = [s.url for s in hash_fleet]
    df = embed(_corpus(spark), url=urls, id_column="id", batch_size=16)
    field = df.schema["embedding"]
    assert field.dataType.simpleString() == "array<float>" and not field.dataType.containsNull and not field.nullable
    assert field.metadata == {"densewire.dimensions": D, "densewire.dtype": "float32"}
    extra = [StructField(name, LongType(), False) for name in ("python_pid", "executor_pid", "worker_pid")]
    placed = df.mapInArrow(_placed, StructType([*df.schema.fields, *extra]))
    got = placed.toArrow().sort_by("id")
    assert got.column("id").to_pylist() == list(range(N))  # every id once
    assert np.array_equal(_vectors(got), _client_vectors(urls[0], _texts()))  # bit for bit
    workers = {p.pid for p in spark_cluster.workers}
    ran = set(got.column("worker_pid").to_pylist())
    print(f"\nworkers (pid): {sorted(workers)}; executor JVMs: {sorted(set(got.column('executor_pid').to_pylist()))}; "
          f"Python workers: {sorted(set(got.column('python_pid').to_pylist()))}")
    assert ran == workers  # both workers' executors ran tasks
    done = {e["id"]: (e["hostPort"], e["completedTasks"]) for e in executors(spark) if e["id"] != "driver"}
    print(f"executors (id: host:port, tasks done): {done}")
    assert sum(1 for _h, tasks in done.values() if tasks > 0) >= 2


def test_model_mode_and_float64_run_in_the_executors(spark, hash_fleet) -> None:
    df = embed(_corpus(spark, 60, 2), model=f"hash:{D}", dtype="float64", output_column="v")
    assert df.schema["v"].dataType.simpleString() == "array<double>"
    got = df.toArrow().sort_by("id")
    want = _client_vectors(hash_fleet[0].url, _texts(60)).astype(np.float64)
    assert np.array_equal(_vectors(got, "v"), want)


def _make(conn, name: str, d: int = D) -> str:
    conn.execute(f"DROP TABLE IF EXISTS {name}")
    conn.execute(f"CREATE TABLE {name} (id bigint PRIMARY KEY, embedding vector({d}))")
    return name


def _rows_once(conn, table: str, n: int) -> np.ndarray:
    ids = [r[0] for r in conn.execute(f"SELECT id FROM {table} ORDER BY id")]
    assert ids == list(range(n))  # every id, each once (the primary key would refuse twice, so count too)
    return pgvector.read_vectors(conn, table, ("id", "embedding"), order_by="id").tensor.array


def test_write_pgvector_writes_every_row_once_and_a_rerun_inserts_nothing(spark, hash_fleet, pgvector_db, conn) -> None:
    table = _make(conn, "spark_docs")
    df = embed(_corpus(spark), url=[s.url for s in hash_fleet], id_column="id", batch_size=32)
    assert write_pgvector(df, pgvector_db.url, table=table, column="embedding", id_column="id") == N
    want = _client_vectors(hash_fleet[0].url, _texts())
    assert np.array_equal(_rows_once(conn, table, N), want)
    conn.execute(f"UPDATE {table} SET embedding = %s::vector WHERE id = 7", (str([0.5] * D),))
    # the rerun writes every row again (the same count as Ray's write_pgvector), inserting none twice and
    # keeping the rows that were there as they were
    assert write_pgvector(df, pgvector_db.url, table=table, column="embedding", id_column="id") == N
    again = _rows_once(conn, table, N)
    assert np.all(again[7] == 0.5) and np.array_equal(np.delete(again, 7, 0), np.delete(want, 7, 0))


def _job_with_a_block_held(spark, pgvector_db, conn, table: str, hash_fleet, kill) -> int:
    """Write while the test holds an uncommitted row of id 5 (partition 0): that block's INSERT ... ON CONFLICT
    waits on it, inside its transaction, its rows already COPYed. ``kill`` gets the pid of the Python worker
    whose connection waits; then the test's row is rolled back and Spark runs the task again. Returns what
    write_pgvector returned."""
    df = embed(_corpus(spark, N, 4), url=[s.url for s in hash_fleet], id_column="id")
    holder = psycopg.connect(pgvector_db.url)
    holder.execute(f"INSERT INTO {table} (id, embedding) VALUES (5, %s::vector)", (str([0.0] * D),))
    result: dict = {}
    job = threading.Thread(target=lambda: result.update(
        n=write_pgvector(df, pgvector_db.url, table=table, column="embedding", id_column="id")), daemon=True)
    job.start()
    waiting: list = []

    def blocked() -> bool:
        waiting[:] = conn.execute("SELECT client_port FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND "
                                  "query LIKE 'INSERT INTO%%ON CONFLICT%%'").fetchall()
        return bool(waiting)

    try:
        wait_until(blocked, "a block's INSERT waiting on the held row", timeout=180)
        committed_before = conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
        assert committed_before < N  # the held block is not in
        kill(process_of_local_port(waiting[0][0]))
    finally:
        holder.rollback()
        holder.close()
    job.join(240)
    assert not job.is_alive() and "n" in result
    return result["n"]


def _failed_tasks(spark) -> int:
    tracker = spark.sparkContext.statusTracker()
    return sum(tracker.getStageInfo(s).numFailedTasks for s in tracker.getActiveStageIds()) if False else sum(
        s["numFailedTasks"] for s in _stages(spark))


def _stages(spark) -> list:
    import json
    import urllib.request

    sc = spark.sparkContext
    with urllib.request.urlopen(f"{sc.uiWebUrl}/api/v1/applications/{sc.applicationId}/stages") as r:
        return json.loads(r.read())


def test_a_python_worker_killed_inside_a_block_leaves_every_row_once(spark, hash_fleet, pgvector_db, conn) -> None:
    table = _make(conn, "spark_kill_python")
    failed = _failed_tasks(spark)
    killed = []
    n = _job_with_a_block_held(spark, pgvector_db, conn, table, hash_fleet,
                               lambda pid: (killed.append(pid), os.kill(pid, signal.SIGKILL)))
    assert killed and n == N  # the killed attempt committed nothing: the retry inserted its block whole
    assert _failed_tasks(spark) > failed  # Spark saw the task fail and ran it again
    assert np.array_equal(_rows_once(conn, table, N), _client_vectors(hash_fleet[0].url, _texts()))


def test_an_executor_killed_inside_a_block_leaves_every_row_once(spark, spark_cluster, hash_fleet, pgvector_db,
                                                                 conn) -> None:
    table = _make(conn, "spark_kill_executor")
    killed = []
    n = _job_with_a_block_held(spark, pgvector_db, conn, table, hash_fleet,
                               lambda pid: (killed.append(executor_jvm_of(pid)), os.kill(killed[-1], signal.SIGKILL)))
    assert killed
    assert n == N  # every row written once, whichever attempt committed the held block
    assert np.array_equal(_rows_once(conn, table, N), _client_vectors(hash_fleet[0].url, _texts()))
    lost = [e for e in executors(spark) if e["id"] != "driver" and not e["isActive"]]
    assert lost  # the killed executor is gone; the workers started another
    wait_until(lambda: sum(1 for e in executors(spark) if e["id"] != "driver" and e["isActive"]) >= 2,
               "two live executors again", timeout=180)


# -- bad input ---------------------------------------------------------------------------------------------------
def test_what_the_schema_tells_is_refused_on_the_driver_before_any_job(spark, hash_fleet, pgvector_db, conn) -> None:
    url = hash_fleet[0].url
    sc = spark.sparkContext
    sc.setJobGroup("schema-checks", "no job may run")
    try:
        corpus = _corpus(spark, 10, 1)
        with pytest.raises(BatchError, match="no text column 'body'") as e:
            embed(corpus, url=url, text_column="body")
        assert e.value.column == "body"
        with pytest.raises(BatchError, match="not a string") as e:
            embed(corpus, url=url, text_column="id")
        assert e.value.column == "id"
        with pytest.raises(BatchError, match="already in the DataFrame"):
            embed(corpus, url=url, output_column="text")
        with pytest.raises(BatchError, match="Spark has no type for it"):
            embed(corpus, url=url, dtype="float16")
        df = embed(corpus, url=url)
        short = _make(conn, "spark_short", d=8)
        with pytest.raises(BatchError, match=r"vectors of 16 dimensions for spark_short.embedding, a vector\(8\)") as e:
            write_pgvector(df, pgvector_db.url, table=short, column="embedding", id_column="id")
        assert e.value.category == "shape_mismatch" and e.value.column == "embedding"
        with pytest.raises(BatchError, match="no id column 'doc_id'"):
            write_pgvector(df, pgvector_db.url, table=short, column="embedding", id_column="doc_id")
        with pytest.raises(BatchError, match="not an array of numbers"):
            write_pgvector(df, pgvector_db.url, table=short, column="text", id_column="id")
        with pytest.raises(BatchError, match="no table nowhere"):
            write_pgvector(df, pgvector_db.url, table="nowhere", column="embedding", id_column="id")
        assert sc.statusTracker().getJobIdsForGroup("schema-checks") == []  # nothing ran
        assert conn.execute("SELECT count(*) FROM spark_short").fetchone()[0] == 0
    finally:
        sc.setJobGroup("", "")


def test_a_null_or_empty_text_fails_the_job_naming_column_row_id_and_partition(spark, hash_fleet, pgvector_db,
                                                                               conn) -> None:
    table = _make(conn, "spark_bad_text")
    rows = spark.range(0, 40, numPartitions=2).selectExpr("id", "if(id = 27, NULL, concat('text ', id)) AS text")
    df = embed(rows, url=hash_fleet[0].url, id_column="id")
    with pytest.raises(BatchError) as e:
        write_pgvector(df, pgvector_db.url, table=table, column="embedding", id_column="id")
    err = e.value
    assert (err.category, err.column, err.row, err.row_id) == ("invalid_field", "text", 7, 27)
    assert err.block.startswith("partition 1 (stage ") and "a null text" in str(err)
    assert "attempt 3)" in err.block  # the 4th attempt's error: every attempt failed, each the same way
    assert "a null text; Spark ran the task 4 times (column 'text'" in str(err)
    rows = spark.range(0, 10, numPartitions=1).selectExpr("id", "if(id = 3, '', 'text') AS text")
    with pytest.raises(PythonException) as e:  # a user's own action: Spark's error, whose text names it
        embed(rows, url=hash_fleet[0].url, id_column="id").toArrow()
    assert "BatchError: invalid_field: an empty text (column 'text', row 3, id 3, block 'partition 0" in str(e.value)


def test_a_replica_of_another_dimension_mid_job_fails_it_naming_the_block(spark, hash_fleet, pgvector_db, conn) -> None:
    table = _make(conn, "spark_mixed")
    with ServerProcess("--model", f"hash:{D // 2}") as other:
        df = embed(_corpus(spark, 64, 2), url=[hash_fleet[0].url, other.url], dimensions=D, batch_size=8)
        with pytest.raises(BatchError, match=f"answered {D // 2}-dimensional vectors in a job of {D}-dimensional") as e:
            write_pgvector(df, pgvector_db.url, table=table, column="embedding", id_column="id")
    assert e.value.category == "shape_mismatch" and e.value.column == "embedding" and "partition" in e.value.block


def test_write_es_bulk_writes_one_file_a_block_with_packed_vectors(spark, hash_fleet, tmp_path) -> None:
    df = embed(_corpus(spark), url=[s.url for s in hash_fleet], id_column="id")
    assert write_es_bulk(df, str(tmp_path), index="docs", field="embedding", id_column="id") == N
    files = sorted(tmp_path.glob("*.ndjson"))
    assert len(files) == 6  # one a partition
    seen = {}
    for f in files:
        lines = f.read_bytes().splitlines()
        for action, doc in zip(lines[::2], lines[1::2]):
            meta = orjson.loads(action)["index"]
            assert meta["_index"] == "docs"
            packed = pybase64.b64decode(orjson.loads(doc)["embedding"])
            seen[int(meta["_id"])] = np.frombuffer(packed, ">f4").astype(np.float32)
    assert sorted(seen) == list(range(N))
    assert np.array_equal(np.stack([seen[i] for i in range(N)]), _client_vectors(hash_fleet[0].url, _texts()))


def test_write_es_bulk_into_the_real_node(spark, hash_fleet, es_node) -> None:
    """write_es_bulk to the session's Elasticsearch: the index created on the driver (embed's column states
    its dimension), every id once and the vectors bit for bit."""
    from es_support import es_docs

    index = "dw_spark"
    httpx.delete(f"{es_node.url}/{index}?ignore_unavailable=true", timeout=60)
    df = embed(_corpus(spark), url=[s.url for s in hash_fleet], id_column="id")
    assert write_es_bulk(df, es_node.url, index=index, field="embedding", id_column="id", create_index=True,
                         index_type="flat", similarity="l2_norm") == N
    docs = es_docs(es_node.url, index, "embedding")
    assert sorted(map(int, docs)) == list(range(N))
    assert np.array_equal(np.stack([docs[str(i)] for i in range(N)]), _client_vectors(hash_fleet[0].url, _texts()))


def test_the_readme_spark_example_runs_with_spark_submit(conn, pgvector_db, tmp_path) -> None:
    """README.md's ```python spark block, saved as embed_docs.py and run as the README says, by spark-submit
    (pyspark's own) on a standalone cluster: a cluster of its own, two 1-core workers (the session's cluster
    has its cores taken by the tests' application), two hash:384 replicas for its two URLs and the test
    database for its conninfo."""
    readme = (REPO / "README.md").read_text()
    (block,) = re.findall(r"```python spark\n(.*?)```", readme, re.S)
    assert "spark-submit --master spark://spark-master:7077 embed_docs.py" in readme
    conn.execute("DROP TABLE IF EXISTS docs")  # rows of an earlier run stay as they are
    conn.execute("CREATE TABLE docs (id bigint PRIMARY KEY, embedding vector(384))")
    conn.execute("INSERT INTO docs SELECT i, array_fill(0, ARRAY[384])::vector FROM generate_series(0, 99) i")
    cluster = SparkCluster().start()
    servers = [ServerProcess("--model", "hash:384", tmp=tmp_path) for _ in range(2)]
    try:
        for s in servers:
            s.start()
        cluster.wait_ready()
        job = tmp_path / "embed_docs.py"
        job.write_text(block.replace("http://10.0.0.11:8000", servers[0].url).replace("http://10.0.0.12:8000", servers[1].url)
                       .replace("postgresql://localhost/app", pgvector_db.url))
        settings = spark_conf(cluster)  # what the README's --master gives, and loopback, memory, this Python
        command = [str(cluster.home / "bin" / "spark-submit"), "--master", settings.pop("spark.master")]
        for key, value in settings.items():
            command += ["--conf", f"{key}={value}"]
        proc = subprocess.run([*command, job.name], cwd=tmp_path, capture_output=True, text=True, timeout=600,
                              env={**cluster.env(), "PYTHONPATH": str(SRC)})
        assert proc.returncode == 0, proc.stderr[-4000:]
        wait_until(lambda: [a["name"] for a in cluster.state()["completedapps"]] == ["embed-docs"],
                   "the job among the standalone master's completed applications", timeout=60)
    finally:
        for s in servers:
            s.stop()
        cluster.stop()
    vectors = _rows_once(conn, "docs", 2_000)
    assert not vectors[:100].any()  # the rows already there were kept, not inserted again
    with ServerProcess("--model", "hash:384") as server:
        want = _client_vectors(server.url, [f"document {i} of the corpus" for i in range(100, 2_000)])
    assert np.array_equal(vectors[100:], want)
    files = list((tmp_path / "bulk").iterdir())  # the relative folder, resolved on the driver
    assert len(files) == 4 and sum(f.read_bytes().count(b'"_index":"docs"') for f in files) == 2_000


def test_the_store_writers_put_every_row_once_bit_for_bit_from_the_executors(spark, hash_fleet, opensearch_node,
                                                                             chroma_server, milvus_server,
                                                                             tmp_path) -> None:
    """write_opensearch, write_lancedb, write_chroma and write_milvus from the cluster's executors into the
    real stores, each twice (a rerun replaces by id): every id once, each vector the client's bit for bit."""
    import lancedb
    from pymilvus import MilvusClient

    import densewire.spark as dwspark
    from densewire._stores._http import request_json

    df = embed(_corpus(spark), url=[s.url for s in hash_fleet], id_column="id").cache()
    expected = _client_vectors(hash_fleet[0].url, _texts())
    for _run in range(2):
        assert dwspark.write_opensearch(df, opensearch_node.url, index="spark_docs", field="embedding", id_column="id",
                                        create_index=True, refresh=True) == N
        assert dwspark.write_lancedb(df, str(tmp_path / "lance"), table="docs", column="embedding", id_column="id",
                                     create_table=True) == N
        assert dwspark.write_chroma(df, chroma_server.url, collection="spark-docs", column="embedding",
                                    id_column="id", create_collection=True) == N
        assert dwspark.write_milvus(df, milvus_server.url, collection="spark_docs", column="embedding",
                                    id_column="id", create_collection=True) == N

    hits = request_json("GET", f"{opensearch_node.url}/spark_docs/_search?size=1000")["hits"]["hits"]
    got = {int(h["_id"]): h["_source"]["embedding"] for h in hits}
    assert sorted(got) == list(range(N)) and len(hits) == N
    assert np.array_equal(np.array([got[i] for i in range(N)], np.float32), expected)

    t = lancedb.connect(str(tmp_path / "lance")).open_table("docs").to_arrow().sort_by("id")
    assert t.column("id").to_pylist() == list(range(N)) and np.array_equal(_vectors(t), expected)

    base = f"{chroma_server.url}/api/v2/tenants/default_tenant/databases/default_database/collections"
    cid = request_json("GET", f"{base}/spark-docs")["id"]
    rows = request_json("POST", f"{base}/{cid}/get", {"include": ["embeddings"]})
    got = dict(zip(map(int, rows["ids"]), rows["embeddings"]))
    assert sorted(got) == list(range(N)) and len(rows["ids"]) == N
    assert np.array_equal(np.array([got[i] for i in range(N)], np.float64).astype(np.float32), expected)

    client = MilvusClient(milvus_server.url)
    try:
        rows = client.query("spark_docs", filter="id >= 0", output_fields=["id", "embedding"], limit=1000)
    finally:
        client.close()
    got = {r["id"]: r["embedding"] for r in rows}
    assert sorted(got) == list(range(N)) and len(rows) == N
    assert np.array_equal(np.array([got[i] for i in range(N)], np.float32), expected)
