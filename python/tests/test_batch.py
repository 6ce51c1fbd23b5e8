"""densewire.batch's BatchEmbedder against real ``densewire serve`` replicas and the in-process engine:
vectors equal the client's bit for bit, the column is FixedSizeList over the answers' buffers, a replica
that dies is skipped and comes back once ``/ready`` answers, bad input names column, row, id and block."""

from __future__ import annotations

import pickle

import numpy as np
import pyarrow as pa
import pytest

import densewire
from conftest import FLEET_DIMENSIONS as D
from densewire.batch import BatchEmbedder, BatchError
from densewire._batch._columns import vectors_of
from server_support import ServerProcess, wait_until

TEXTS = [f"document number {i} about {'cats' if i % 3 else 'dogs'}" for i in range(1000)]


def _table(n: int = len(TEXTS), start: int = 0) -> pa.Table:
    return pa.table({"id": pa.array(np.arange(start, start + n)), "text": TEXTS[start:start + n]})


def _client_vectors(url: str, texts: list[str], **kw) -> np.ndarray:
    with densewire.Client(url) as client:
        return client.embed_many(texts, **kw)


def test_url_mode_equals_the_client_bit_for_bit_and_uses_every_replica(hash_fleet) -> None:
    urls = [s.url for s in hash_fleet]
    with BatchEmbedder(url=urls, batch_size=64, id_column="id") as embed:
        out = embed(_table(), block="b0")
        sent = [r.sent for r in embed.replicas]
    col = out.column("embedding")
    field = out.schema.field("embedding")
    assert field.type == pa.list_(pa.field("item", pa.float32(), nullable=False), D) and not field.nullable
    assert out.column_names == ["id", "text", "embedding"] and col.null_count == 0
    assert col.num_chunks == -(-len(TEXTS) // 64)  # one chunk an answer: the answers' buffers, not a copy
    assert np.array_equal(vectors_of(out, "embedding"), _client_vectors(urls[0], TEXTS))
    assert all(k >= 4 for k in sent) and sum(sent) == col.num_chunks  # spread over both replicas
    assert embed.dimensions == D


def test_a_record_batch_comes_back_as_a_record_batch_with_one_array(hash_fleet) -> None:
    batch = _table(300).to_batches()[0]
    with BatchEmbedder(url=hash_fleet[0].url, batch_size=100) as embed:
        out = embed(batch)
    assert isinstance(out, pa.RecordBatch) and out.num_rows == 300
    assert np.array_equal(vectors_of(out, "embedding"), _client_vectors(hash_fleet[0].url, TEXTS[:300]))


def test_dtypes_are_the_wire_dtypes(hash_fleet) -> None:
    url = hash_fleet[1].url
    with BatchEmbedder(url=url, dtype="float16", output_column="v", batch_size=50) as embed:
        out = embed(_table(120))
    assert out.schema.field("v").type.value_type == pa.float16()
    assert np.array_equal(vectors_of(out, "v"), _client_vectors(url, TEXTS[:120], dtype="float16"))
    with BatchEmbedder(url=url, dtype="binary", batch_size=50) as embed:
        packed = vectors_of(embed(_table(120)), "embedding")
    assert packed.shape == (120, D // 8) and np.array_equal(packed, _client_vectors(url, TEXTS[:120], dtype="binary"))


def test_model_mode_runs_the_engine_here_once_per_process(hash_fleet) -> None:
    with BatchEmbedder(model=f"hash:{D}", batch_size=100) as a, BatchEmbedder(model=f"hash:{D}", dtype="float16") as b:
        assert a._engine is b._engine and a.dimensions == D  # one engine for the process
        out = a(_table(250))
        half = b(_table(250))
    assert np.array_equal(vectors_of(out, "embedding"), _client_vectors(hash_fleet[0].url, TEXTS[:250]))
    assert vectors_of(half, "embedding").dtype == np.float16


def test_an_embedder_pickles_as_its_settings(hash_fleet) -> None:
    embed = BatchEmbedder(url=[s.url for s in hash_fleet], batch_size=32, id_column="id")
    embed(_table(40))
    again = pickle.loads(pickle.dumps(embed))
    embed.close()
    assert again.urls == embed.urls and again.batch_size == 32 and again._fleet is None
    with again:
        assert again(_table(40)).num_rows == 40


def test_a_replica_that_dies_is_skipped_and_comes_back_when_ready(hash_fleet, tmp_path) -> None:
    spare = ServerProcess("--model", f"hash:{D}", tmp=tmp_path).start()
    urls = [hash_fleet[0].url, spare.url]
    try:
        with BatchEmbedder(url=urls, batch_size=50, id_column="id", timeout=30) as embed:
            embed(_table(500), block="before")
            assert embed.replicas[1].sent > 0
            spare.stop()  # dies between two blocks: the next block's requests to it fail and go elsewhere
            out = embed(_table(500, 500), block="during")
            assert np.array_equal(vectors_of(out, "embedding"), _client_vectors(urls[0], TEXTS[500:]))
            assert embed.replicas[1].down is not None and "Cannot connect" in embed.replicas[1].down
            sent = embed.replicas[1].sent
            embed(_table(500), block="still down")
            assert embed.replicas[1].sent == sent  # skipped while down: no request waits on it
            spare.start()  # the same port: the probe's GET /ready brings it back
            wait_until(lambda: embed.replicas[1].down is None, "the probe to find the replica ready", timeout=30)
            embed(_table(500), block="after")
            assert embed.replicas[1].sent > sent
    finally:
        spare.stop()


def test_no_replica_answering_names_the_block(tmp_path) -> None:
    dead = ServerProcess("--model", f"hash:{D}", tmp=tmp_path)  # a port nobody listens on
    with BatchEmbedder(url=dead.url, retries=1, timeout=1.0) as embed:
        with pytest.raises(BatchError) as info:
            embed(_table(10), block="job-7")
    err = info.value
    assert err.category == "unavailable" and err.block == "job-7" and "job-7" in str(err)
    assert dead.url.split("//")[1] in str(err)


def test_another_dimension_mid_job_is_an_error(hash_fleet, tmp_path) -> None:
    """A fleet in which one replica was redeployed with another model: the job stops at the first
    answer that disagrees with the dimension the job has, naming the block."""
    other = ServerProcess("--model", f"hash:{2 * D}", tmp=tmp_path).start()
    try:
        with BatchEmbedder(url=[hash_fleet[0].url, other.url], batch_size=10, id_column="id") as embed:
            with pytest.raises(BatchError) as info:
                embed(_table(40), block="b2")
    finally:
        other.stop()
    err = info.value
    assert (err.category, err.column, err.block) == ("shape_mismatch", "embedding", "b2")
    assert f"-dimensional vectors in a job of" in str(err) and str(D) in str(err) and str(2 * D) in str(err)


@pytest.mark.parametrize(("table", "message", "where"), [
    (pa.table({"id": [4, 5, 6], "text": ["a", None, "c"]}), "a null text", ("text", 1, 5)),
    (pa.table({"id": [4, 5, 6], "text": ["a", "b", ""]}), "an empty text", ("text", 2, 6)),
    (pa.table({"id": [4], "body": ["a"]}), "no text column 'text'", ("text", None, None)),
    (pa.table({"id": [4], "text": [3]}), "the text column is of type int64, not a string", ("text", None, None)),
    (pa.table({"id": [4], "text": ["a"], "embedding": [1]}), "the output column is already in the data",
     ("embedding", None, None)),
])
def test_bad_input_names_column_row_id_and_block(hash_fleet, table, message, where) -> None:
    with BatchEmbedder(url=hash_fleet[0].url, id_column="id") as embed:
        with pytest.raises(BatchError) as info:
            embed(table, block="part-3")
        assert embed.replicas == []  # found before any request was sent
    err = info.value
    assert message in str(err) and (err.column, err.row, err.row_id, err.block) == (*where, "part-3")
    assert err.category == "invalid_field" and err.http_status == 422
    again = pickle.loads(pickle.dumps(err))  # crosses to the driver whole
    assert str(again) == str(err) and again.block == "part-3"


def test_arguments_are_checked() -> None:
    with pytest.raises(BatchError, match="give url="):
        BatchEmbedder()
    with pytest.raises(BatchError, match="dtype must be one of"):
        BatchEmbedder(model="hash:4", dtype="float8")
    with pytest.raises(BatchError, match="batch_size"):
        BatchEmbedder(model="hash:4", batch_size=0)
    with BatchEmbedder(model="hash:4") as embed, pytest.raises(BatchError, match="not list"):
        embed(["a", "b"])  # type: ignore[arg-type]
