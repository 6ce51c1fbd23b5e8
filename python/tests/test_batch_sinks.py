"""densewire.batch's sinks: PgvectorSink against a real PostgreSQL with pgvector (one transaction a block,
each row exactly once by id, checks before anything is written), EsBulkSink to files (real) and to a
``_bulk`` URL: a loopback HTTP server that records the bodies and answers as Elasticsearch does, for
the faults a real node does not make on demand (whole requests answered 429, items rejected with 429
inside a 200 answer); the real node's tests are test_es_destination.py."""

from __future__ import annotations

import http.server
import json
import threading
from pathlib import Path

import numpy as np
import orjson
import pyarrow as pa
import pybase64
import pytest

from densewire import pgvector
from densewire._stores._esbulk import bulk_lines
from densewire.batch import BatchError, EsBulkSink, PgvectorSink
from pgvector_support import recreate_table

RNG = np.random.default_rng(25)
D = 8


def _block(ids, d: int = D, dtype=np.float32) -> pa.Table:
    ids = np.asarray(ids, np.int64)
    vectors = RNG.standard_normal((len(ids), d)).astype(dtype)
    values = pa.array(vectors.ravel())
    return pa.table({"id": ids, "embedding": pa.FixedSizeListArray.from_arrays(values, d)})


def _vectors(table: pa.Table) -> np.ndarray:
    return table.column("embedding").combine_chunks().flatten().to_numpy().reshape(table.num_rows, -1)


def test_a_block_is_inserted_once_however_often_it_is_written(pgvector_db, conn) -> None:
    table = recreate_table(conn, "docs", f"id bigint PRIMARY KEY, title text DEFAULT 'x', embedding vector({D})")
    first, second = _block(range(0, 600)), _block(range(600, 1000))
    with PgvectorSink(pgvector_db.url, table=table, column="embedding", id_column="id") as sink:
        assert sink.write(first, block="t0-0") == 600
        assert sink.write(first, block="t0-0") == 0  # a retried block: nothing twice
        overlap = pa.concat_tables([first.slice(500), second])  # a block re-cut around committed rows
        assert sink.write(overlap, block="t1-0") == 400
    back = pgvector.read_vectors(conn, table, ("id", "embedding"), order_by="id")
    assert back.ids.tolist() == list(range(1000))
    assert np.array_equal(back.tensor.array, np.concatenate([_vectors(first), _vectors(second)]))
    assert conn.execute("SELECT count(*) FROM pg_class WHERE relname LIKE 'densewire_stage%'").fetchone()[0] == 0


def test_a_block_commits_whole_or_not_at_all(pgvector_db, conn) -> None:
    table = recreate_table(conn, "atomic", f"id bigint PRIMARY KEY, embedding vector({D})")
    block = _block(range(1200))
    values = _vectors(block).copy()
    values[900, 3] = np.nan  # after the first COPY chunks were sent
    bad = pa.table({"id": block.column("id"),
                    "embedding": pa.FixedSizeListArray.from_arrays(pa.array(values.ravel()), D)})
    with PgvectorSink(pgvector_db.url, table=table, column="embedding", id_column="id") as sink:
        with pytest.raises(BatchError) as info:
            sink.write(bad, block="b9")
        assert info.value.block == "b9" and info.value.category == "non_finite" and "[900]" in str(info.value)
        assert conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0] == 0
        assert sink.write(block, block="b9") == 1200  # the same sink, its connection still usable


@pytest.mark.parametrize(("ddl", "data", "message", "column"), [
    (f"id bigint, embedding vector({D})", None, "has no unique constraint or primary key", "id"),
    (f"id bigint PRIMARY KEY, embedding vector({D + 1})", None, f"vectors of {D} dimensions", "embedding"),
    (f"id bigint PRIMARY KEY, e vector({D})", None, "has no column 'embedding'", "embedding"),
    (f"id bigint PRIMARY KEY, embedding real[]", None, "is of type _float4, not vector", "embedding"),
    (f"id bigint PRIMARY KEY, embedding vector({D})", pa.table({"id": [1, None], "embedding": [[0.0] * D] * 2}),
     "a null id", "id"),
    (f"id bigint PRIMARY KEY, embedding vector({D})", pa.table({"id": [1, 2], "embedding": [[0.0] * D, None]}),
     "a null vector", "embedding"),
    (f"id bigint PRIMARY KEY, embedding vector({D})", pa.table({"id": [1, 2], "embedding": [[0.0] * D, [1.0]]}),
     f"a vector of 1 values in a column of {D}-value vectors", "embedding"),
])
def test_bad_targets_and_blocks_fail_before_anything_is_written(pgvector_db, conn, ddl, data, message,
                                                                column) -> None:
    table = recreate_table(conn, "bad", ddl)
    with PgvectorSink(pgvector_db.url, table=table, column="embedding", id_column="id") as sink:
        with pytest.raises(BatchError) as info:
            sink.write(_block(range(5)) if data is None else data, block="b3")
    err = info.value
    assert message in str(err) and err.column == column and err.block == "b3"
    assert conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0] == 0


def test_other_column_types(pgvector_db, conn) -> None:
    """halfvec and text ids; float16 vectors (Arrow halffloat) into vector; a list<float> column (Spark's
    array<float>) as well as a fixed-size list."""
    half = recreate_table(conn, "half", f"id text PRIMARY KEY, embedding halfvec({D})")
    block = _block(range(10))
    text_ids = block.set_column(0, "id", pa.array([f"doc-{i}" for i in range(10)]))
    listed = text_ids.set_column(1, "embedding", block.column("embedding").cast(pa.list_(pa.float32())))
    with PgvectorSink(pgvector_db.url, table=half, column="embedding", id_column="id") as sink:
        assert sink.write(listed, block="l") == 10
    back = pgvector.read_vectors(conn, half, ("id", "embedding"), order_by="id")
    assert sorted(back.ids) == sorted(f"doc-{i}" for i in range(10))
    plain = recreate_table(conn, "plain", f"id int PRIMARY KEY, embedding vector({D})")
    f16 = _block(range(7), dtype=np.float16)
    with PgvectorSink(pgvector_db.url, table=plain, column="embedding", id_column="id") as sink:
        assert sink.write(f16, block="h") == 7
    got = pgvector.read_vectors(conn, plain, "embedding", order_by="id").tensor.array
    assert np.array_equal(got, _vectors(f16).astype(np.float32))


# -- Elasticsearch bulk -----------------------------------------------------------------------------------
def _decode_bulk(body: bytes) -> dict[str, np.ndarray]:
    lines = body.splitlines()
    out = {}
    for action, source in zip(lines[::2], lines[1::2]):
        meta = orjson.loads(action)["index"]
        assert meta["_index"] == "docs"
        out[meta["_id"]] = np.frombuffer(pybase64.b64decode(orjson.loads(source)["embedding"]), ">f4")
    return out


def test_es_files_one_per_block_written_atomically(tmp_path: Path) -> None:
    sink = EsBulkSink(tmp_path / "out", index="docs", field="embedding", id_column="id")
    a, b = _block(range(100)), _block(range(100, 150))
    assert sink.write(a, block="job-000001-0000") == 100
    assert sink.write(b, block="job-000002-0000") == 50
    assert sink.write(b, block="job-000002-0000") == 50  # written again: the file is replaced
    files = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert files == ["job-000001-0000.ndjson", "job-000002-0000.ndjson"]  # no temporary file left
    body = (tmp_path / "out" / files[1]).read_bytes()
    assert body == b"".join(bulk_lines(_vectors(b), index="docs", field="embedding", ids=list(range(100, 150))))
    docs = _decode_bulk(body)
    assert list(docs) == [str(i) for i in range(100, 150)]
    assert np.array_equal(np.stack(list(docs.values())), _vectors(b))


class _Bulk(http.server.BaseHTTPRequestHandler):
    """GET /docs/_mapping (a dense_vector of D dims); POST /_bulk, recorded; the first ``busy`` requests
    answer 429; ids in ``refuse`` come back as item errors, as Elasticsearch reports a document it
    refused (HTTP 200, "errors": true); ids in ``reject`` are rejected once with 429 inside the answer,
    as a node with a full write queue does."""

    bodies: list[bytes] = []
    busy = 0
    refuse: set[str] = set()
    reject: set[str] = set()
    seen: set[str] = set()

    def do_GET(self) -> None:  # noqa: N802
        assert self.path == "/docs/_mapping"
        field = {"type": "dense_vector", "dims": D, "index": True, "similarity": "cosine"}
        self._answer({"docs": {"mappings": {"properties": {"embedding": field}}}})

    def _answer(self, doc: dict) -> None:
        answer = json.dumps(doc).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def do_POST(self) -> None:  # noqa: N802
        body = self.rfile.read(int(self.headers["Content-Length"]))
        assert self.path == "/_bulk" and self.headers["Content-Type"] == "application/x-ndjson"
        cls = type(self)
        if cls.busy:
            cls.busy -= 1
            self.send_response(429)
            self.send_header("Retry-After", "0")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        cls.bodies.append(body)
        items = []
        for action in body.splitlines()[::2]:
            _id = orjson.loads(action)["index"]["_id"]
            if _id in cls.refuse:
                items.append({"index": {"_id": _id, "status": 400, "error": {"type": "document_parsing_exception",
                                                                            "reason": "bad vector"}}})
            elif _id in cls.reject:
                cls.reject.discard(_id)
                items.append({"index": {"_id": _id, "status": 429, "error": {
                    "type": "es_rejected_execution_exception", "reason": "rejected execution of coordinating operation"}}})
            else:
                items.append({"index": {"_id": _id, "status": 200 if _id in cls.seen else 201,
                                        "result": "updated" if _id in cls.seen else "created"}})
                cls.seen.add(_id)
        self._answer({"took": 1, "errors": any("error" in i["index"] for i in items), "items": items})

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def bulk_server():
    _Bulk.bodies, _Bulk.busy, _Bulk.refuse, _Bulk.reject, _Bulk.seen = [], 0, set(), set(), set()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Bulk)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_es_url_posts_bulk_with_ids_and_counts_created(bulk_server) -> None:
    sink = EsBulkSink(bulk_server, index="docs", field="embedding", id_column="id", max_bytes=2000)
    block = _block(range(40))
    assert sink.write(block, block="b0") == 40
    assert len(_Bulk.bodies) > 1 and all(len(b) <= 2000 for b in _Bulk.bodies)  # split at max_bytes
    docs = {k: v for body in _Bulk.bodies for k, v in _decode_bulk(body).items()}
    assert list(docs) == [str(i) for i in range(40)] and np.array_equal(np.stack(list(docs.values())), _vectors(block))
    _Bulk.busy = 2  # 429 twice, then taken: retried as the client retries
    assert sink.write(block, block="b0") == 0  # replaced, not created again


def test_es_url_items_rejected_with_429_are_sent_again_alone(bulk_server) -> None:
    """A 200 bulk answer whose items 3 and 8 are es_rejected_execution_exception (429): those two, and only
    they, are sent again (SPEC.md 18's schedule); the accepted ones are not re-sent."""
    _Bulk.reject = {"3", "8"}
    sink = EsBulkSink(bulk_server, index="docs", field="embedding", id_column="id")
    block = _block(range(10))
    assert sink.write(block, block="b0") == 10
    first, again = _Bulk.bodies
    assert list(_decode_bulk(first)) == [str(i) for i in range(10)]
    assert list(_decode_bulk(again)) == ["3", "8"]
    assert np.array_equal(np.stack(list(_decode_bulk(again).values())), _vectors(block)[[3, 8]])


def test_es_url_items_still_rejected_after_the_retries_are_rate_limited(bulk_server) -> None:
    _Bulk.reject = {"4"}
    with pytest.raises(BatchError) as info:
        EsBulkSink(bulk_server, index="docs", field="embedding", id_column="id", retries=0).write(
            _block(range(6)), block="b2")
    assert info.value.category == "rate_limited" and info.value.row_id == "4" and info.value.block == "b2"
    assert "es_rejected_execution_exception" in str(info.value)


def test_es_url_refused_document_names_its_id_and_block(bulk_server) -> None:
    _Bulk.refuse = {"7"}
    with pytest.raises(BatchError) as info:
        EsBulkSink(bulk_server, index="docs", field="embedding", id_column="id").write(_block(range(10)), block="b5")
    assert info.value.row_id == "7" and info.value.block == "b5" and "document_parsing_exception" in str(info.value)


def test_es_non_finite_vector_names_the_row(tmp_path: Path) -> None:
    values = np.zeros((3, D), np.float32)
    values[2, 1] = np.inf
    block = pa.table({"id": [1, 2, 3], "embedding": pa.FixedSizeListArray.from_arrays(pa.array(values.ravel()), D)})
    with pytest.raises(BatchError) as info:
        EsBulkSink(tmp_path, index="docs", field="embedding", id_column="id").write(block, block="b1")
    assert info.value.category == "non_finite" and "embedding[2][1]" in str(info.value) and info.value.block == "b1"
    assert list(tmp_path.iterdir()) == []
