"""densewire.spark's sparse and per-token output on the session's real Spark standalone cluster:
``embed(output="sparse")`` from ``densewire serve --model hash:16`` replicas and ``embed(output="tokens")``
from a MiniLM server give Spark columns (``struct<indices: array<int>, values: array<float>>``,
``array<array<float>>``) equal to the client's answers bit for bit; ``write_pgvector`` fills a real
``sparsevec(30522)``, ``write_pgvector_tokens`` a real per-token table and ``write_es_sparse_vector`` the
real Elasticsearch, each id (each (id, position)) once when the job runs twice; what the schema tells is
checked on the driver before any task runs."""

from __future__ import annotations

import httpx
import numpy as np
import pytest
from pyspark.sql import types as T

import densewire
from densewire import pgvector
from densewire._backends import default_model_path
from densewire._backends.hash import SPARSE_VOCAB_SIZE
from densewire.batch import BatchError
from densewire.spark import embed, write_es_sparse_vector, write_pgvector, write_pgvector_tokens

N = 60
TEXTS = [f"document {i} about {'cats' if i % 3 else 'dogs'} and {i % 7} more" for i in range(N)]


def _corpus(spark, n: int = N, partitions: int = 3):
    return spark.range(0, n, numPartitions=partitions).selectExpr(
        "id", "concat('document ', id, ' about ', if(id % 3 = 0, 'dogs', 'cats'), ' and ', id % 7, ' more') AS text")


@pytest.fixture(scope="module")
def minilm(minilm_server):
    return minilm_server  # conftest: one MiniLM server for the session


def test_sparse_embed_and_sparsevec_rows_once(spark, hash_fleet, pgvector_db, conn) -> None:
    url = hash_fleet[0].url
    df = embed(_corpus(spark), url=url, output="sparse", batch_size=16, id_column="id")
    field = df.schema["embedding"]
    assert field.dataType == T.StructType([
        T.StructField("indices", T.ArrayType(T.IntegerType(), False), False),
        T.StructField("values", T.ArrayType(T.FloatType(), False), False)])
    assert field.metadata["densewire.vocabulary_size"] == SPARSE_VOCAB_SIZE
    rows = {r["id"]: r["embedding"] for r in df.collect()}
    with densewire.Client(url) as client:
        want = client.embed_sparse(TEXTS)
    for i in range(N):
        idx, val = want[i]
        assert rows[i]["indices"] == idx.tolist()
        assert np.array_equal(np.asarray(rows[i]["values"], np.float32), val)
    conn.execute("DROP TABLE IF EXISTS spark_sparse")
    conn.execute(f"CREATE TABLE spark_sparse (id bigint PRIMARY KEY, embedding sparsevec({SPARSE_VOCAB_SIZE}))")
    df.cache()
    assert write_pgvector(df, pgvector_db.url, table="spark_sparse", column="embedding", id_column="id") == N
    assert write_pgvector(df, pgvector_db.url, table="spark_sparse", column="embedding", id_column="id") == N
    back = pgvector.read_vectors(conn, "spark_sparse", ("id", "embedding"), order_by="id")
    assert back.ids.tolist() == list(range(N))
    assert np.array_equal(back.tensor.array.view(np.uint32), want.to_dense().view(np.uint32))
    df.unpersist()


def test_sparse_rows_into_the_real_elasticsearch(spark, hash_fleet, es_node) -> None:
    httpx.delete(f"{es_node.url}/spark_splade", timeout=60)
    df = embed(_corpus(spark), url=hash_fleet[0].url, output="sparse", batch_size=16)
    vocab = default_model_path()  # a 30522-token WordPiece vocabulary, the hash model's sparse size
    assert write_es_sparse_vector(df, es_node.url, index="spark_splade", field="embedding", id_column="id",
                                  vocab=vocab, create_index=True) == N
    write_es_sparse_vector(df, es_node.url, index="spark_splade", field="embedding", id_column="id", vocab=vocab)
    httpx.post(f"{es_node.url}/spark_splade/_refresh").raise_for_status()
    assert httpx.get(f"{es_node.url}/spark_splade/_count").json()["count"] == N


def test_tokens_embed_and_per_token_rows_once(spark, minilm, pgvector_db, conn) -> None:
    df = embed(_corpus(spark, 24, 2), url=minilm.url, output="tokens", batch_size=8)
    field = df.schema["embedding"]
    assert field.dataType == T.ArrayType(T.ArrayType(T.FloatType(), False), False)
    assert field.metadata["densewire.dimensions"] == 384
    conn.execute("DROP TABLE IF EXISTS spark_tokens")
    conn.execute("CREATE TABLE spark_tokens (id bigint, position int, embedding vector(384), PRIMARY KEY (id, position))")
    assert write_pgvector_tokens(df, pgvector_db.url, table="spark_tokens", column="embedding", id_column="id") == 24
    write_pgvector_tokens(df, pgvector_db.url, table="spark_tokens", column="embedding", id_column="id")  # again
    with densewire.Client(minilm.url) as client:
        want = client.embed_tokens(TEXTS[:24])
    back = pgvector.read_vectors(conn, query="SELECT id, embedding FROM spark_tokens ORDER BY id, position")
    assert back.ids.tolist() == np.repeat(np.arange(24), want.lengths).tolist()
    assert np.array_equal(back.tensor.array.view(np.uint32), want.values.view(np.uint32))


def test_the_driver_checks_kinds_and_targets(spark, hash_fleet, pgvector_db, conn) -> None:
    df = embed(_corpus(spark), url=hash_fleet[0].url, output="sparse")
    conn.execute("DROP TABLE IF EXISTS spark_dense")
    conn.execute("CREATE TABLE spark_dense (id bigint PRIMARY KEY, embedding vector(16))")
    with pytest.raises(BatchError, match="a sparse column cannot fill spark_dense.embedding, a vector"):
        write_pgvector(df, pgvector_db.url, table="spark_dense", column="embedding", id_column="id")
    conn.execute("DROP TABLE IF EXISTS spark_small")
    conn.execute("CREATE TABLE spark_small (id bigint PRIMARY KEY, embedding sparsevec(1000))")
    with pytest.raises(BatchError, match="vectors of 30522 dimensions for spark_small.embedding, a sparsevec"):
        write_pgvector(df, pgvector_db.url, table="spark_small", column="embedding", id_column="id")
    with pytest.raises(BatchError, match="not array<array<float>>"):
        write_pgvector_tokens(df, pgvector_db.url, table="spark_small", column="embedding", id_column="id")
    with pytest.raises(BatchError, match="output must be one of dense, tokens, sparse"):
        embed(_corpus(spark), url=hash_fleet[0].url, output="multi")
    assert conn.execute("SELECT count(*) FROM spark_small").fetchone()[0] == 0
