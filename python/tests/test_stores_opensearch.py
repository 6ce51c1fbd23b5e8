"""OpenSearchSink and ``densewire ingest --to opensearch+http://`` against a real OpenSearch 3.5 + k-NN
(the session's ``opensearch_node``): every id once, each vector read back bit for bit, a retried block
replacing its documents, a node SIGKILLed mid-load and restarted leaving every row once after the job's
retries, and clear errors for a wrong dimension or a missing index."""

from __future__ import annotations

import urllib.request

import numpy as np
import orjson
import pyarrow as pa
import pytest

import densewire
from densewire._cli import main
from densewire.batch import BatchError, OpenSearchSink
from store_support import load_through_a_kill

D = 16


def _table(ids, a: np.ndarray) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()),
                     "emb": pa.FixedSizeListArray.from_arrays(pa.array(a.reshape(-1)), a.shape[1])})


def _get(url: str) -> dict:
    return orjson.loads(urllib.request.urlopen(url, timeout=60).read())


def _documents(url: str, index: str) -> dict[str, np.ndarray]:
    urllib.request.urlopen(urllib.request.Request(f"{url}/{index}/_refresh", method="POST"), timeout=60).read()
    hits = _get(f"{url}/{index}/_search?size=10000")["hits"]["hits"]
    ids = [h["_id"] for h in hits]
    assert len(ids) == len(set(ids))
    return {h["_id"]: np.array(h["_source"]["emb"], np.float32) for h in hits}


def _vectors(n: int, seed: int, d: int = D) -> np.ndarray:
    a = np.random.default_rng(seed).standard_normal((n, d)).astype(np.float32)
    a[0, :3] = [np.float32(0.1), np.float32(-0.0), np.finfo(np.float32).tiny]  # shortest decimals, -0, the smallest normal
    return a


def test_blocks_read_back_bit_for_bit_and_a_retried_block_replaces(opensearch_node) -> None:
    a = _vectors(600, 1)
    sink = OpenSearchSink(opensearch_node.url, index="os_sink", field="emb", id_column="id", create_index=True,
                          max_bytes=20_000)  # several requests a block
    assert sink.write(_table(range(300), a[:300]), block="b0") == 300
    assert sink.write(_table(range(300, 600), a[300:]), block="b1") == 300
    assert sink.write(_table(range(300), a[:300]), block="b0") == 0  # the block again: replaced, none created
    docs = _documents(opensearch_node.url, "os_sink")
    assert sorted(map(int, docs)) == list(range(600))
    got = np.stack([docs[str(i)] for i in range(600)])
    assert np.array_equal(got.view(np.uint32), a.view(np.uint32))
    mapping = _get(f"{opensearch_node.url}/os_sink/_mapping")["os_sink"]["mappings"]["properties"]["emb"]
    assert mapping["type"] == "knn_vector" and mapping["dimension"] == D and mapping["method"]["engine"] == "lucene"
    # the nearest neighbour of a stored vector is itself (lucene HNSW answers on the real node)
    q = {"size": 1, "query": {"knn": {"emb": {"vector": a[123].tolist(), "k": 1}}}}
    req = urllib.request.Request(f"{opensearch_node.url}/os_sink/_search", data=orjson.dumps(q),
                                 headers={"Content-Type": "application/json"})
    assert orjson.loads(urllib.request.urlopen(req, timeout=60).read())["hits"]["hits"][0]["_id"] == "123"


def test_wrong_dimension_and_missing_index_are_clear_errors_before_writing(opensearch_node) -> None:
    OpenSearchSink(opensearch_node.url, index="os_dims", field="emb", id_column="id",
                   create_index=True).write(_table([1], _vectors(1, 2)), block="b0")
    with pytest.raises(BatchError) as info:
        OpenSearchSink(opensearch_node.url, index="os_dims", field="emb", id_column="id").write(
            _table([2, 3], _vectors(2, 3, d=8)), block="b1")
    assert info.value.category == "shape_mismatch" and info.value.block == "b1"
    assert "vectors of 8 dimensions for os_dims.emb, a knn_vector of 16 dimensions" in str(info.value)
    with pytest.raises(BatchError, match=r"no index 'os_missing' at .*create_index=True / --create-index"):
        OpenSearchSink(opensearch_node.url, index="os_missing", field="emb", id_column="id").write(
            _table([1], _vectors(1, 4)), block="b0")
    with pytest.raises(BatchError, match="has no field 'vec'"):
        OpenSearchSink(opensearch_node.url, index="os_dims", field="vec", id_column="id").write(
            pa.table({"id": [1], "vec": _table([1], _vectors(1, 5))["emb"]}), block="b0")
    assert sorted(_documents(opensearch_node.url, "os_dims")) == ["1"]  # nothing of the refused blocks


def test_cli_ingest_to_opensearch(opensearch_node, tmp_path) -> None:
    a = _vectors(250, 6).astype(np.float16)
    body, _ = densewire.encode(densewire.Embeddings(densewire.Tensor.from_array(a), "m"), "msgpack")
    (tmp_path / "v.msgpack").write_bytes(bytes(body))
    to = "opensearch+" + opensearch_node.url
    args = ["ingest", str(tmp_path / "v.msgpack"), "--to", to, "--index", "os_cli", "--field", "emb",
            "--first-id", "1000", "--block-rows", "100", "--quiet"]
    with pytest.raises(SystemExit, match="no index 'os_cli'"):
        main(args)
    assert main(args + ["--create-index"]) == 0
    assert main(args) == 0  # again: replaced by id
    docs = _documents(opensearch_node.url, "os_cli")
    assert sorted(map(int, docs)) == list(range(1000, 1250))
    got = np.stack([docs[str(1000 + i)] for i in range(250)])
    assert np.array_equal(got, a.astype(np.float32))  # float16 widened exactly


def test_a_node_killed_mid_load_and_restarted_leaves_every_row_once(opensearch_node) -> None:
    """The node SIGKILLed while blocks are being posted, restarted on its data directory and port: the
    job retries each failed block and in the end every row is there once, bit for bit."""
    blocks, rows = 24, 200
    a = _vectors(blocks * rows, 7, d=32)
    sink = OpenSearchSink(opensearch_node.url, index="os_killed", field="emb", id_column="id", create_index=True,
                          max_bytes=20_000, retries=1)  # several requests a block

    def write(b: int) -> None:
        sink.write(_table(range(b * rows, (b + 1) * rows), a[b * rows:(b + 1) * rows]), block=f"b{b}")

    def kill() -> None:
        opensearch_node.kill()
        opensearch_node.start()

    failures = load_through_a_kill(write, blocks, kill, retry_on=BatchError)
    assert failures and all(": unavailable:" in f for f in failures), failures
    docs = _documents(opensearch_node.url, "os_killed")
    assert sorted(map(int, docs)) == list(range(blocks * rows))
    got = np.stack([docs[str(i)] for i in range(blocks * rows)])
    assert np.array_equal(got.view(np.uint32), a.view(np.uint32))
