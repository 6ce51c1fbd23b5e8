from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def tensor_pb2(tmp_path_factory):
    """Message classes compiled from the shipped proto/densewire/v1/tensor.proto by protoc (grpcio-tools)."""
    from grpc_tools import protoc

    out = tmp_path_factory.mktemp("pb")
    status = protoc.main(["protoc", f"-I{REPO / 'proto'}", f"--python_out={out}", str(REPO / "proto/densewire/v1/tensor.proto")])
    assert status == 0, "protoc failed on proto/densewire/v1/tensor.proto"
    return _load(out)


@pytest.fixture(scope="session")
def tei(tmp_path_factory):
    """TEI's client: tei_pb2 and tei_pb2_grpc generated now by grpcio-tools from proto/tei/v1/tei.proto, as a
    TEI user builds one (test_grpc_tei*.py)."""
    import sys

    from grpc_tools import protoc

    out = tmp_path_factory.mktemp("tei_client")
    assert protoc.main(["protoc", f"-I{REPO / 'proto'}", f"--python_out={out}", f"--grpc_python_out={out}",
                        str(REPO / "proto/tei/v1/tei.proto")]) == 0, "protoc failed on proto/tei/v1/tei.proto"
    sys.path.insert(0, str(out))
    try:
        yield importlib.import_module("tei.v1.tei_pb2"), importlib.import_module("tei.v1.tei_pb2_grpc")
    finally:
        sys.path.remove(str(out))


def _load(out: Path):
    spec = importlib.util.spec_from_file_location("densewire_v1_tensor_pb2", out / "densewire/v1/tensor_pb2.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def pytest_terminal_summary(terminalreporter) -> None:
    """List the golden cases not run because Python does not claim a feature they need (never a silent skip)."""
    from golden_capabilities import PLANS

    if PLANS:
        terminalreporter.section("golden capabilities")
        for line in dict.fromkeys(line for p in PLANS for line in p.lines()):  # each line once, in order
            terminalreporter.write_line(line)


# -- issue 25: the batch, Ray and Spark tests share one fleet of replicas and one PostgreSQL ----------------
#: the dimension of the hash vectors the batch tests embed (small: the tests check values, not speed)
FLEET_DIMENSIONS = 16


@pytest.fixture(scope="session")
def hash_fleet():
    """Two ``densewire serve --model hash:16`` replicas (their ``.url``), for the whole session."""
    from server_support import ServerProcess

    servers = [ServerProcess("--model", f"hash:{FLEET_DIMENSIONS}") for _ in range(2)]
    try:
        for s in servers:
            s.start(wait=False)
        for s in servers:
            s.wait_ready()
        yield servers
    finally:
        for s in servers:
            s.stop()


@pytest.fixture(scope="session")
def pgvector_db():
    """A throw-away PostgreSQL with pgvector (``.url``, ``.execute``), for the whole session."""
    from pgvector_support import start_pgvector

    pg = start_pgvector()
    try:
        yield pg
    finally:
        pg.stop()


@pytest.fixture
def conn(pgvector_db):
    """An autocommit psycopg connection to the session's pgvector database."""
    import psycopg

    with psycopg.connect(pgvector_db.url, autocommit=True) as c:
        yield c


@pytest.fixture(scope="session")
def spark_cluster():
    """A Spark standalone master and two 1-core workers (spark_support.SparkCluster), for the whole session."""
    from spark_support import SparkCluster

    cluster = SparkCluster().start()
    try:
        yield cluster.wait_ready()
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def spark(spark_cluster):
    """The session's one SparkSession on ``spark_cluster`` (an executor on each worker)."""
    from spark_support import spark_session, wait_for_executors

    session = spark_session(spark_cluster)
    try:
        wait_for_executors(session, spark_cluster.n_workers)
        yield session
    finally:
        session.stop()


# -- issue 31: one real Elasticsearch node for the whole session -----------------------------------------------
@pytest.fixture(scope="session")
def es_node():
    """A single-node Elasticsearch 9.5.3 (es_support.EsNode: ``.url``, security off), for the whole session.

    Started by scripts/elasticsearch.sh, or the running node ``DENSEWIRE_ES_URL`` names (then not stopped).
    """
    from es_support import EsNode

    node = EsNode.session()
    try:
        yield node
    finally:
        node.stop()


# -- issue 31: the vector stores users load from Ray and Spark, each started for real ----------------------
@pytest.fixture(scope="session")
def opensearch_node():
    """A single-node OpenSearch 3.5 with the k-NN plugin (``.url``), started by scripts/opensearch.sh."""
    from store_support import ScriptService

    node = ScriptService("opensearch.sh").start()
    try:
        yield node
    finally:
        node.stop()


@pytest.fixture(scope="session")
def chroma_server():
    """A Chroma 1.5 server (``.url``), ``chroma run`` started by scripts/chroma.sh."""
    from store_support import ScriptService

    server = ScriptService("chroma.sh").start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def milvus_server():
    """A Milvus Lite 2.5.1 server standalone on TCP (``.url``, pymilvus' uri), started by scripts/milvus.sh."""
    from store_support import ScriptService

    server = ScriptService("milvus.sh").start()
    try:
        yield server
    finally:
        server.stop()


# -- issue 32: one MiniLM server for the per-token batch, Ray, Spark and ingest tests ------------------------
@pytest.fixture(scope="session")
def minilm_server():
    """``densewire serve`` with the default model (MiniLM: per-token states on /embed_all), for the session."""
    from server_support import ServerProcess

    with ServerProcess("--blas-threads", "1") as server:
        yield server
