"""ChromaSink and ``densewire ingest --to chroma+http://`` against a real Chroma 1.5 server (the session's
``chroma_server``): Base64 little-endian float32 bodies that match Chroma's own client, every id once
after a retried block, each vector read back bit for bit, a server SIGKILLed mid-load and restarted
leaving every row once after the job's retries, clear errors for a wrong dimension or a missing
collection."""

from __future__ import annotations

import numpy as np
import orjson
import pyarrow as pa
import pytest
from chromadb.api.types import optional_embeddings_to_base64_strings

import densewire
from densewire._cli import main
from densewire._stores._http import request_json
from densewire._stores.chroma import ChromaServer, embeddings_json, upsert_body
from densewire.batch import BatchError, ChromaSink
from store_support import load_through_a_kill

D = 16


def _vectors(n: int, seed: int, d: int = D) -> np.ndarray:
    a = np.random.default_rng(seed).standard_normal((n, d)).astype(np.float32)
    a[0, :3] = [0.1, -0.0, np.finfo(np.float32).max]
    return a


def _table(ids, a: np.ndarray) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()),
                     "emb": pa.FixedSizeListArray.from_arrays(pa.array(a.reshape(-1)), a.shape[1])})


def _read(url: str, name: str) -> dict[str, np.ndarray]:
    base = f"{url}/api/v2/tenants/default_tenant/databases/default_database/collections"
    cid = request_json("GET", f"{base}/{name}")["id"]
    got = request_json("POST", f"{base}/{cid}/get", {"include": ["embeddings"], "limit": 100_000})
    assert len(got["ids"]) == len(set(got["ids"]))
    return {i: np.array(e, np.float64).astype(np.float32) for i, e in zip(got["ids"], got["embeddings"])}


@pytest.mark.parametrize("d", [16, 5])  # a row of 64 bytes (cut from one encode) and of 20 (one encode a row)
def test_bodies_are_the_bytes_chromas_client_sends(d) -> None:
    a = _vectors(7, 0, d)
    assert orjson.loads(embeddings_json(a)) == optional_embeddings_to_base64_strings([list(map(float, r)) for r in a])
    assert orjson.loads(upsert_body([1, "x"], a[:2]))["ids"] == ["1", "x"]


def test_blocks_read_back_bit_for_bit_and_a_retried_block_replaces(chroma_server) -> None:
    a = _vectors(900, 1)
    sink = ChromaSink(chroma_server.url, collection="chroma_sink", column="emb", id_column="id",
                      create_collection=True)
    sink.check(D)
    sink._batch = 200  # several requests a block (the server's own limit is thousands)
    assert sink.write(_table(range(450), a[:450]), block="b0") == 450
    two_chunks = pa.concat_tables([_table(range(450, 851), a[450:851]), _table(range(851, 900), a[851:])])
    assert sink.write(two_chunks, block="b1") == 450  # a piece of 401 rows cut at 200: ids and rows stay together
    assert sink.write(_table(range(450), a[:450]), block="b0") == 450  # again: upserted over itself
    docs = _read(chroma_server.url, "chroma_sink")
    assert sorted(map(int, docs)) == list(range(900))
    got = np.stack([docs[str(i)] for i in range(900)])
    assert np.array_equal(got.view(np.uint32), a.view(np.uint32))


def test_requests_in_flight_side_by_side_each_row_once(chroma_server, monkeypatch) -> None:
    """``concurrency=3``: a block of 3,000 rows is cut into 3 upserts (not one of Chroma's max_batch_size)
    that are in flight at once; every row lands once, bit for bit."""
    import threading
    import time

    real, lock, state = ChromaServer.upsert, threading.Lock(), {"now": 0, "most": 0, "requests": 0}

    def upsert(self, collection_id, body):  # the real request, with how many are in flight counted
        with lock:
            state["now"] += 1
            state["requests"] += 1
            state["most"] = max(state["most"], state["now"])
        try:
            time.sleep(0.2)  # long enough for the others to start
            return real(self, collection_id, body)
        finally:
            with lock:
                state["now"] -= 1

    monkeypatch.setattr(ChromaServer, "upsert", upsert)
    a = _vectors(3000, 9)
    sink = ChromaSink(chroma_server.url, collection="chroma_concurrent", column="emb", id_column="id",
                      create_collection=True, concurrency=3)
    assert sink.write(_table(range(3000), a), block="b0") == 3000
    assert state["requests"] == 3 and state["most"] == 3, state
    docs = _read(chroma_server.url, "chroma_concurrent")
    assert np.array_equal(np.stack([docs[str(i)] for i in range(3000)]).view(np.uint32), a.view(np.uint32))
    with pytest.raises(BatchError, match="concurrency is the upsert requests in flight, at least 1, not 0"):
        ChromaSink(chroma_server.url, collection="chroma_concurrent", column="emb", id_column="id", concurrency=0)


def test_wrong_dimension_and_missing_collection_are_clear_errors(chroma_server) -> None:
    ChromaSink(chroma_server.url, collection="chroma_dims", column="emb", id_column="id",
               create_collection=True).write(_table([1], _vectors(1, 2)), block="b0")
    with pytest.raises(BatchError) as info:
        ChromaSink(chroma_server.url, collection="chroma_dims", column="emb", id_column="id").write(
            _table([2], _vectors(1, 3, d=8)), block="b1")
    assert info.value.category == "shape_mismatch" and info.value.block == "b1"
    assert "vectors of 8 dimensions for collection 'chroma_dims', which holds vectors of 16" in str(info.value)
    with pytest.raises(BatchError, match=r"no collection 'chroma_missing' .*create_collection=True / --create-index"):
        ChromaSink(chroma_server.url, collection="chroma_missing", column="emb", id_column="id").write(
            _table([1], _vectors(1, 4)), block="b0")
    bad = _vectors(2, 5)
    bad[1, 3] = np.nan
    with pytest.raises(BatchError, match=r"nan .*emb\[1\]\[3\]"):
        ChromaSink(chroma_server.url, collection="chroma_dims", column="emb", id_column="id").write(
            _table([5, 6], bad), block="b2")
    with pytest.raises(BatchError, match="Expected a name containing 3-512 characters") as info:
        ChromaSink(chroma_server.url, collection="c", column="emb", id_column="id", create_collection=True).write(
            _table([1], _vectors(1, 6)), block="b3")
    assert info.value.category == "invalid_field"
    assert sorted(_read(chroma_server.url, "chroma_dims")) == ["1"]


def test_cli_ingest_to_chroma(chroma_server, tmp_path) -> None:
    a = _vectors(300, 6)
    body, _ = densewire.encode(densewire.Embeddings(densewire.Tensor.from_array(a), "m"), "msgpack")
    (tmp_path / "v.msgpack").write_bytes(bytes(body))
    args = ["ingest", str(tmp_path / "v.msgpack"), "--to", "chroma+" + chroma_server.url, "--collection",
            "chroma_cli", "--block-rows", "128", "--quiet"]
    with pytest.raises(SystemExit, match="no collection 'chroma_cli'"):
        main(args)
    assert main(args + ["--create-index"]) == 0
    assert main(args) == 0
    docs = _read(chroma_server.url, "chroma_cli")
    assert sorted(map(int, docs)) == list(range(300))
    assert np.array_equal(np.stack([docs[str(i)] for i in range(300)]).view(np.uint32), a.view(np.uint32))


def test_a_server_killed_mid_load_and_restarted_leaves_every_row_once(chroma_server) -> None:
    """``chroma run`` SIGKILLed while blocks are being upserted, restarted on its data and port: the job
    retries each failed block and in the end every row is there once, bit for bit (what Chroma answered
    for was in its write-ahead log)."""
    blocks, rows = 24, 200
    a = _vectors(blocks * rows, 7, d=32)
    sink = ChromaSink(chroma_server.url, collection="chroma_killed", column="emb", id_column="id",
                      create_collection=True, retries=1)
    sink.check(32)
    sink._batch = 50  # several requests a block

    def write(b: int) -> None:
        sink.write(_table(range(b * rows, (b + 1) * rows), a[b * rows:(b + 1) * rows]), block=f"b{b}")

    def kill() -> None:
        chroma_server.kill()
        chroma_server.start()

    failures = load_through_a_kill(write, blocks, kill, retry_on=BatchError)
    assert failures and all(": unavailable:" in f for f in failures), failures
    docs = _read(chroma_server.url, "chroma_killed")
    assert sorted(map(int, docs)) == list(range(blocks * rows))
    assert np.array_equal(np.stack([docs[str(i)] for i in range(blocks * rows)]).view(np.uint32), a.view(np.uint32))
