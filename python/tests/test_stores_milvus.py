"""MilvusSink and ``densewire ingest --to milvus+http://`` against a real Milvus Lite 2.5.1 standalone on
TCP (the session's ``milvus_server``): requests whose vector column is filled from the buffer and equal
to the ones pymilvus builds from lists, float32 and float16 vectors read back bit for bit, each id once
after a retried block, a server SIGKILLed mid-load and restarted leaving every row once after the job's
retries, clear errors for a wrong dimension or a missing collection."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from pymilvus import DataType, MilvusClient
from pymilvus.client import entity_helper
from pymilvus.grpc_gen import schema_pb2

import densewire
from densewire._cli import main
from densewire._stores.milvus import upsert_request
from densewire.batch import BatchError, MilvusSink
from store_support import load_through_a_kill

D = 16


def _vectors(n: int, seed: int, d: int = D, dtype=np.float32) -> np.ndarray:
    a = np.random.default_rng(seed).standard_normal((n, d)).astype(dtype)
    a[0, :2] = [-0.0, 0.1]
    return a


def _table(ids, a: np.ndarray) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()),
                     "emb": pa.FixedSizeListArray.from_arrays(pa.array(a.reshape(-1)), a.shape[1])})


def _read(uri: str, name: str, dtype=np.float32) -> tuple[list[int], np.ndarray]:
    client = MilvusClient(uri)
    try:
        rows = client.query(name, filter="id >= 0", output_fields=["id", "emb"], limit=16_384)
    finally:
        client.close()
    rows.sort(key=lambda r: r["id"])
    if dtype == np.float16:
        vectors = np.stack([np.frombuffer(r["emb"][0] if isinstance(r["emb"], list) else r["emb"], np.float16)
                            for r in rows])
    else:
        vectors = np.array([r["emb"] for r in rows], np.float32)
    return [r["id"] for r in rows], vectors


def test_the_request_is_the_one_pymilvus_builds_from_lists() -> None:
    a = _vectors(5, 0)
    ours = upsert_request("c", "id", np.arange(5), "emb", a, "FLOAT_VECTOR")
    theirs = schema_pb2.FieldData()
    for row in a:  # what pymilvus does with each row of a float vector column
        entity_helper._pack_fp32_vector_value(row, theirs)
    assert ours.fields_data[1].vectors.SerializeToString() == theirs.vectors.SerializeToString()
    assert ours.fields_data[1].type == DataType.FLOAT_VECTOR and ours.num_rows == 5
    assert list(ours.fields_data[0].scalars.long_data.data) == list(range(5))
    half = upsert_request("c", "id", [1], "emb", a[:1].astype(np.float16), "FLOAT16_VECTOR")
    assert half.fields_data[1].vectors.float16_vector == entity_helper._convert_to_vector_bytes(
        a[0].astype(np.float16), DataType.FLOAT16_VECTOR)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_blocks_read_back_bit_for_bit_and_a_retried_block_replaces(milvus_server, dtype) -> None:
    name = f"mv_sink_{np.dtype(dtype).name}"
    a = _vectors(600, 1, dtype=dtype)
    sink = MilvusSink(milvus_server.url, collection=name, column="emb", id_column="id", create_collection=True,
                      max_rows=128)  # several requests a block
    assert sink.write(_table(range(300), a[:300]), block="b0") == 300
    two_chunks = pa.concat_tables([_table(range(300, 501), a[300:501]), _table(range(501, 600), a[501:])])
    assert sink.write(two_chunks, block="b1") == 300  # a piece of 201 rows cut at 128: ids and rows stay together
    assert sink.write(_table(range(300), a[:300]), block="b0") == 300  # again: upserted over itself
    sink.close()
    ids, got = _read(milvus_server.url, name, dtype)
    assert ids == list(range(600))
    assert got.dtype == dtype and np.array_equal(got.view(np.uint8), a.view(np.uint8))


def test_wrong_dimension_and_missing_collection_are_clear_errors(milvus_server) -> None:
    MilvusSink(milvus_server.url, collection="mv_dims", column="emb", id_column="id", create_collection=True).write(
        _table([1], _vectors(1, 2)), block="b0")
    with pytest.raises(BatchError) as info:
        MilvusSink(milvus_server.url, collection="mv_dims", column="emb", id_column="id").write(
            _table([2], _vectors(1, 3, d=8)), block="b1")
    assert info.value.category == "shape_mismatch" and info.value.block == "b1"
    assert "vectors of 8 dimensions for mv_dims.emb, a FLOAT_VECTOR of 16" in str(info.value)
    with pytest.raises(BatchError, match=r"no collection 'mv_missing' .*create_collection=True / --create-index"):
        MilvusSink(milvus_server.url, collection="mv_missing", column="emb", id_column="id").write(
            _table([1], _vectors(1, 4)), block="b0")
    assert _read(milvus_server.url, "mv_dims")[0] == [1]


def test_cli_ingest_to_milvus(milvus_server, tmp_path) -> None:
    a = _vectors(300, 6)
    body, _ = densewire.encode(densewire.Embeddings(densewire.Tensor.from_array(a), "m"), "msgpack")
    (tmp_path / "v.msgpack").write_bytes(bytes(body))
    args = ["ingest", str(tmp_path / "v.msgpack"), "--to", "milvus+" + milvus_server.url, "--collection", "mv_cli",
            "--field", "emb", "--first-id", "10", "--block-rows", "128", "--quiet"]
    with pytest.raises(SystemExit, match="no collection 'mv_cli'"):
        main(args)
    assert main(args + ["--create-index"]) == 0
    assert main(args) == 0
    ids, got = _read(milvus_server.url, "mv_cli")
    assert ids == list(range(10, 310)) and np.array_equal(got.view(np.uint32), a.view(np.uint32))


def test_a_server_killed_mid_load_and_restarted_leaves_every_row_once(milvus_server) -> None:
    """Milvus Lite SIGKILLed while blocks are being upserted, restarted on its database and port: the job
    retries each failed block and in the end every row is there once, bit for bit."""
    blocks, rows = 24, 200
    a = _vectors(blocks * rows, 7, d=32)
    sink = MilvusSink(milvus_server.url, collection="mv_killed", column="emb", id_column="id",
                      create_collection=True, max_rows=50, retries=1)  # several requests a block

    def write(b: int) -> None:
        sink.write(_table(range(b * rows, (b + 1) * rows), a[b * rows:(b + 1) * rows]), block=f"b{b}")

    def kill() -> None:
        milvus_server.kill()
        milvus_server.start()

    failures = load_through_a_kill(write, blocks, kill, retry_on=BatchError)
    sink.close()
    assert failures and all(": unavailable:" in f for f in failures), failures
    ids, got = _read(milvus_server.url, "mv_killed")
    assert ids == list(range(blocks * rows))
    assert np.array_equal(got.view(np.uint32), a.view(np.uint32))
