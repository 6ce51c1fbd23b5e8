"""Elasticsearch as a destination, against a real 9.5.3 node (the session's ``es_node``): EsBulkSink and
``densewire ingest --to http://...`` create or check the index, every id lands once with its vector bit
for bit, kNN with a Base64 query vector equals brute force on a ``flat`` index, the element types ES has
(float, bfloat16, byte, bit), a block written again replaces its documents, and the unhappy paths (wrong
dims, a missing index without --create-index, a node killed mid-load and restarted on its data) end in
clear errors and nothing a rerun cannot mend. The secured node (API key, basic auth, TLS with a CA file)
is test_es_security.py."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import httpx
import numpy as np
import pyarrow as pa
import pybase64
import pytest

import densewire
from densewire import _convert
from densewire._stores._es import EsIndex
from densewire.batch import BatchError, EsBulkSink
from es_support import EsNode, es_docs
from store_support import load_through_a_kill

rng = np.random.default_rng(31)


def _table(ids, vectors: np.ndarray) -> pa.Table:
    flat = pa.array(vectors.reshape(-1))
    return pa.table({"id": pa.array(list(ids), pa.int64()),
                     "embedding": pa.FixedSizeListArray.from_arrays(flat, vectors.shape[1])})


def _bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, np.float32).view(np.uint32)


def _drop(url: str, index: str) -> None:
    httpx.delete(f"{url}/{index}?ignore_unavailable=true", timeout=60)


def test_sink_creates_a_flat_index_every_id_once_bit_for_bit_and_knn_equals_brute_force(es_node) -> None:
    url, index, d = es_node.url, "dw_flat", 48
    _drop(url, index)
    vectors = rng.standard_normal((1500, d)).astype(np.float32)
    sink = EsBulkSink(url, index=index, field="embedding", id_column="id", create_index=True, index_type="flat",
                      similarity="l2_norm", max_bytes=200_000)
    assert sink.write(_table(range(0, 1000), vectors[:1000]), block="b0") == 1000
    assert sink.write(_table(range(1000, 1500), vectors[1000:]), block="b1") == 500
    field = httpx.get(f"{url}/{index}/_mapping").json()[index]["mappings"]["properties"]["embedding"]
    assert field == {"type": "dense_vector", "dims": d, "index": True, "similarity": "l2_norm",
                     "index_options": {"type": "flat"}}
    docs = es_docs(url, index, "embedding")
    assert sorted(map(int, docs)) == list(range(1500))
    assert np.array_equal(_bits(np.stack([docs[str(i)] for i in range(1500)])), _bits(vectors))

    # kNN top-10 with a packed (big-endian Base64) query vector: a flat index is exact, so it is brute force
    for q in rng.standard_normal((5, d)).astype(np.float32):
        query = pybase64.b64encode(q.astype(">f4").tobytes()).decode()
        hits = httpx.post(f"{url}/{index}/_search", json={
            "knn": {"field": "embedding", "query_vector": query, "k": 10, "num_candidates": 50},
            "_source": False, "size": 10}, timeout=60).json()["hits"]["hits"]
        brute = np.argsort(((vectors - q) ** 2).sum(axis=1), kind="stable")[:10]
        assert [int(h["_id"]) for h in hits] == brute.tolist()

    # the block retried (a task run again): its documents replaced, none added; the new values are there
    again = vectors[1000:] * 2
    assert sink.write(_table(range(1000, 1500), again), block="b1") == 0
    docs = es_docs(url, index, "embedding")
    assert len(docs) == 1500 and np.array_equal(_bits(np.stack([docs[str(i)] for i in range(1000, 1500)])), _bits(again))


def test_bulk_requests_in_flight_write_every_id_once_bit_for_bit(es_node, monkeypatch) -> None:
    """concurrency=3: a block's bulk requests overlap (counted around the real requests), every id is
    written once with its vector, a rewritten block replaces, and a bad concurrency is refused."""
    url, index, d = es_node.url, "dw_parallel", 32
    _drop(url, index)
    vectors = rng.standard_normal((1200, d)).astype(np.float32)
    active, peak, lock, real_bulk = [0], [0], threading.Lock(), EsIndex.bulk

    def counted(self, body: bytes) -> int:
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        try:
            time.sleep(0.05)  # long enough for the pool's other threads to start theirs
            return real_bulk(self, body)
        finally:
            with lock:
                active[0] -= 1

    monkeypatch.setattr(EsIndex, "bulk", counted)
    sink = EsBulkSink(url, index=index, field="embedding", id_column="id", create_index=True, index_type="flat",
                      similarity="l2_norm", max_bytes=30_000, concurrency=3)
    assert len(sink.bodies(_table(range(1200), vectors), block="b0")) >= 6
    assert sink.write(_table(range(1200), vectors), block="b0") == 1200
    assert peak[0] == 3
    assert sink.write(_table(range(600), vectors[:600]), block="b0") == 0  # the block again: replaced
    docs = es_docs(url, index, "embedding")
    assert sorted(map(int, docs)) == list(range(1200))
    assert np.array_equal(_bits(np.stack([docs[str(i)] for i in range(1200)])), _bits(vectors))
    for bad in (0, -1, 1.5, True):
        with pytest.raises(BatchError, match="concurrency"):
            EsBulkSink(url, index=index, field="embedding", id_column="id", concurrency=bad)


@pytest.mark.parametrize("element_type", ["float", "bfloat16", "byte", "bit"])
def test_element_types_read_back_as_the_node_stores_them(es_node, element_type) -> None:
    url, index, d = es_node.url, f"dw_{element_type}", 32
    _drop(url, index)
    n = 300
    if element_type == "byte":
        values = rng.integers(-128, 128, (n, d), dtype=np.int8)
        flat = pa.array(values.reshape(-1), pa.int8())
        width, expected = d, values.astype(np.float32)
    elif element_type == "bit":
        values = rng.integers(0, 256, (n, d // 8), dtype=np.uint8)
        flat = pa.array(values.reshape(-1), pa.uint8())
        width = d
        expected = values.view(np.int8).astype(np.float32)  # _source gives a bit vector's bytes as signed ints
    else:
        values = rng.standard_normal((n, d)).astype(np.float32)
        flat = pa.array(values.reshape(-1))
        width = d
        # bfloat16: float32 rounded to nearest even (SPEC.md 3.2), sent as packed big-endian bfloat16
        expected = values if element_type == "float" else _convert.widen(_convert.convert(values, "bfloat16"))
    table = pa.table({"id": pa.array(range(n), pa.int64()),
                      "embedding": pa.FixedSizeListArray.from_arrays(flat, len(flat) // n)})
    sink = EsBulkSink(url, index=index, field="embedding", id_column="id", create_index=True,
                      element_type=element_type, index_type=None if element_type == "bit" else "flat",
                      similarity="l2_norm")
    assert sink.write(table, block="b0") == n
    mapping = httpx.get(f"{url}/{index}/_mapping").json()[index]["mappings"]["properties"]["embedding"]
    assert mapping.get("element_type", "float") == element_type and mapping["dims"] == width
    docs = es_docs(url, index, "embedding")
    got = np.stack([docs[str(i)] for i in range(n)])
    assert np.array_equal(_bits(got), _bits(expected))


def test_a_field_of_other_dims_or_element_type_is_refused_before_anything_is_sent(es_node) -> None:
    url, index = es_node.url, "dw_checked"
    _drop(url, index)
    httpx.put(f"{url}/{index}", json={"mappings": {"properties": {
        "embedding": {"type": "dense_vector", "dims": 16, "similarity": "cosine"},
        "codes": {"type": "dense_vector", "dims": 16, "element_type": "byte"},
        "title": {"type": "text"}}}}).raise_for_status()
    vectors = rng.standard_normal((10, 24)).astype(np.float32)
    with pytest.raises(BatchError) as info:
        EsBulkSink(url, index=index, field="embedding", id_column="id").write(_table(range(10), vectors), block="b0")
    assert info.value.category == "shape_mismatch" and "has 16 dims; the vectors have 24" in str(info.value)
    with pytest.raises(BatchError, match="is a text, not a dense_vector"):
        EsBulkSink(url, index=index, field="title", id_column="id").write(
            _table(range(10), vectors).rename_columns(["id", "title"]), block="b0")
    with pytest.raises(BatchError, match="element_type byte takes int8 vectors, not float32"):
        EsBulkSink(url, index=index, field="codes", id_column="id").write(
            _table(range(10), vectors[:, :16]).rename_columns(["id", "codes"]), block="b0")
    with pytest.raises(BatchError) as info:
        EsBulkSink(url, index="dw_nowhere", field="embedding", id_column="id").write(
            _table(range(10), vectors), block="b0")
    assert info.value.category == "not_found" and "does not exist: pass --create-index" in str(info.value)
    assert httpx.get(f"{url}/{index}/_count").json()["count"] == 0
    assert httpx.head(f"{url}/dw_nowhere").status_code == 404


def test_a_refused_document_names_id_block_and_the_nodes_reason(es_node) -> None:
    """A document the node refuses (a 400 item inside the 200 answer): the block fails naming its id."""
    url, index = es_node.url, "dw_refused"
    _drop(url, index)
    # a cosine field refuses a zero vector (its magnitude is 0): the node's own per-document error
    sink = EsBulkSink(url, index=index, field="embedding", id_column="id", create_index=True, similarity="cosine",
                      index_type="flat")
    vectors = rng.standard_normal((20, 8)).astype(np.float32)
    vectors[13] = 0
    with pytest.raises(BatchError) as info:
        sink.write(_table(range(100, 120), vectors), block="b9")
    err = info.value
    assert err.row_id == "113" and err.block == "b9" and err.category == "invalid_field"
    assert "document_parsing_exception" in str(err) and "zero magnitude" in str(err)
    vectors[13] = 1  # mended: the rerun replaces what the first attempt wrote, and adds the missing one
    assert sink.write(_table(range(100, 120), vectors), block="b9") == 1
    assert sorted(map(int, es_docs(url, index, "embedding"))) == list(range(100, 120))


def _msgpack(vectors: np.ndarray) -> bytes:
    body, _ = densewire.encode(densewire.Embeddings(densewire.Tensor.from_array(vectors)), "msgpack")
    return bytes(body)


def _ingest(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "densewire", "ingest", *args], capture_output=True, text=True,
                          timeout=300)


def test_cli_ingest_creates_checks_resumes_and_refuses(es_node, tmp_path) -> None:
    url, index, d = es_node.url, "dw_cli", 24
    _drop(url, index)
    vectors = rng.standard_normal((2000, d)).astype(np.float32)
    body = tmp_path / "v.msgpack"
    body.write_bytes(_msgpack(vectors))
    missing = _ingest(str(body), "--to", url, "--index", index, "--field", "v")
    assert missing.returncode != 0 and f"index '{index}' does not exist: pass --create-index" in missing.stderr
    assert httpx.head(f"{url}/{index}").status_code == 404  # nothing created
    first = _ingest(str(body), "--to", url, "--index", index, "--field", "v", "--create-index", "--index-type", "flat",
                    "--similarity", "max_inner_product", "--end-id", "700", "--block-rows", "300")
    assert first.returncode == 0, first.stderr
    assert "700 rows, 1,300 skipped" in first.stderr and "dense_vector 24 dims, float, max_inner_product, flat" in first.stderr
    rest = _ingest(str(body), "--to", url, "--index", index, "--field", "v", "--resume", "--block-rows", "300")
    assert rest.returncode == 0, rest.stderr
    assert "1,300 rows, 700 skipped" in rest.stderr
    docs = es_docs(url, index, "v")
    assert sorted(map(int, docs)) == list(range(2000))
    assert np.array_equal(_bits(np.stack([docs[str(i)] for i in range(2000)])), _bits(vectors))

    wrong = tmp_path / "w.msgpack"
    wrong.write_bytes(_msgpack(vectors[:, :16]))
    refused = _ingest(str(wrong), "--to", url, "--index", index, "--field", "v", "--first-id", "5000")
    assert refused.returncode != 0 and "has 24 dims; the vectors have 16" in refused.stderr
    assert httpx.get(f"{url}/{index}/_count").json()["count"] == 2000  # nothing of it sent


def test_a_node_killed_mid_load_and_restarted_leaves_every_row_once(es_node) -> None:
    """The node SIGKILLed while blocks are being written, restarted on its data directory: the job retries
    each failed block (as Ray or Spark retry a task) and in the end every row is there once, bit for bit."""
    node = es_node if es_node.dir is not None else EsNode().start()  # DENSEWIRE_ES_URL's node is not ours to kill
    url, index, d, blocks, rows = node.url, "dw_killed", 32, 24, 200
    _drop(url, index)
    vectors = rng.standard_normal((blocks * rows, d)).astype(np.float32)
    # l2_norm: a cosine field keeps vectors normalized, with their magnitude apart, and gives them back
    # within an ulp, not bit for bit
    sink = EsBulkSink(url, index=index, field="embedding", id_column="id", create_index=True, index_type="flat",
                      similarity="l2_norm", max_bytes=20_000, retries=1)

    def write(b: int) -> None:
        block = slice(b * rows, (b + 1) * rows)
        sink.write(_table(range(block.start, block.stop), vectors[block]), block=f"b{b}")

    def kill() -> None:
        node.kill()  # mid-load: blocks are being posted
        node.start()

    failures = load_through_a_kill(write, blocks, kill, retry_on=BatchError)
    assert failures and all(": unavailable:" in f for f in failures), failures
    docs = es_docs(url, index, "embedding")
    assert sorted(map(int, docs)) == list(range(blocks * rows))
    assert np.array_equal(_bits(np.stack([docs[str(i)] for i in range(blocks * rows)])), _bits(vectors))
    if node is not es_node:
        node.stop()
