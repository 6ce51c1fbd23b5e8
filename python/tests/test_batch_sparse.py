"""BatchEmbedder(output="sparse"): a learned sparse vector a row as ``Struct<indices: List<UInt32>, values:
List<float32>>`` with the vocabulary size in the field metadata (SPEC.md 20.7), from real ``densewire serve``
replicas (TEI's ``/embed_sparse``, densewire's sparse raw body) and from the engine in this process (the
hash model's documented sparse rule), equal bit for bit to the client's ``embed_sparse``; then through
PgvectorSink into a real ``sparsevec(30522)`` column, rows equal to what the client got."""

from __future__ import annotations

import numpy as np
import psycopg
import pyarrow as pa
import pytest

import densewire
from densewire import pgvector
from densewire._backends.hash import SPARSE_VOCAB_SIZE
from densewire._batch._columns import sparse_chunks
from densewire._batch._engine import engine
from densewire.batch import BatchEmbedder, BatchError, PgvectorSink

TEXTS = [f"document {i} about {'cats and dogs' if i % 3 else 'sparse retrieval with learned weights'}"
         for i in range(300)]
SPARSE_TYPE = pa.struct([pa.field("indices", pa.list_(pa.field("item", pa.uint32(), nullable=False)), nullable=False),
                         pa.field("values", pa.list_(pa.field("item", pa.float32(), nullable=False)), nullable=False)])


def _table(texts=TEXTS) -> pa.Table:
    return pa.table({"id": pa.array(np.arange(len(texts), dtype=np.int64)), "text": pa.array(texts, pa.string())})


def _joined(out: pa.Table) -> densewire.SparseVectors:
    pieces = [sv for _r, sv in sparse_chunks(out, "embedding")]
    indices = np.concatenate([p.indices for p in pieces])
    values = np.concatenate([p.values for p in pieces])
    nnz = np.concatenate([p.nnz for p in pieces])
    return densewire.SparseVectors(indices, values, np.concatenate([[0], np.cumsum(nnz)]), pieces[0].vocab_size)


def _same(a: densewire.SparseVectors, b: densewire.SparseVectors) -> None:
    assert a.vocab_size == b.vocab_size and a.offsets.tolist() == b.offsets.tolist()
    assert np.array_equal(a.indices, b.indices) and np.array_equal(a.values.view(np.uint32), b.values.view(np.uint32))


def test_url_mode_is_the_clients_embed_sparse_bit_for_bit(hash_fleet) -> None:
    urls = [s.url for s in hash_fleet]
    with BatchEmbedder(url=urls, output="sparse", batch_size=64) as embed:
        out = embed(_table(), block="s")
        assert embed.dimensions == SPARSE_VOCAB_SIZE
    field = out.schema.field("embedding")
    assert field.type == SPARSE_TYPE and not field.nullable
    assert field.metadata[b"densewire.vocabulary_size"] == str(SPARSE_VOCAB_SIZE).encode()
    assert out.column("embedding").num_chunks == 5  # one chunk an answer, over its buffers
    with densewire.Client(urls[0]) as client:
        want = client.embed_sparse(TEXTS)
    _same(_joined(out), want)


def test_model_mode_is_the_engines_sparse_output() -> None:
    with BatchEmbedder(model="hash:16", output="sparse", batch_size=100) as embed:
        out = embed(_table())
    indices, values, nnz = engine("hash:16").embed_sparse(TEXTS)
    _same(_joined(out), densewire.SparseVectors(indices, values, np.concatenate([[0], np.cumsum(nnz)]),
                                                SPARSE_VOCAB_SIZE))
    empty = BatchEmbedder(model="hash:16", output="sparse")(_table([]))
    assert empty.schema.field("embedding").type == SPARSE_TYPE and empty.num_rows == 0


def test_sparse_output_into_a_real_sparsevec_column(hash_fleet, pgvector_db) -> None:
    with psycopg.connect(pgvector_db.url, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS hash_sparse")
        conn.execute(f"CREATE TABLE hash_sparse (id bigint PRIMARY KEY, embedding sparsevec({SPARSE_VOCAB_SIZE}))")
        with BatchEmbedder(url=hash_fleet[0].url, output="sparse", batch_size=50) as embed:
            out = embed(_table(TEXTS[:120]))
        with PgvectorSink(pgvector_db.url, table="hash_sparse", column="embedding", id_column="id") as sink:
            assert sink.write(out, block="e2e") == 120
            assert sink.write(out, block="e2e") == 0
        with densewire.Client(hash_fleet[0].url) as client:
            want = client.embed_sparse(TEXTS[:120])
        for i in (0, 1, 57, 119):
            text = conn.execute("SELECT embedding::text FROM hash_sparse WHERE id = %s", (i,)).fetchone()[0]
            idx, val = want[i]
            pairs = dict(p.split(":") for p in text[1:text.index("}")].split(","))
            assert [int(k) - 1 for k in pairs] == idx.tolist()  # pgvector's text form is 1-based
            assert np.array_equal(np.asarray([float(v) for v in pairs.values()], np.float32), val)
        back = pgvector.read_vectors(conn, query="SELECT id, embedding FROM hash_sparse WHERE id < 5 ORDER BY id")
        assert np.array_equal(back.tensor.array.view(np.uint32), want.to_dense()[:5].view(np.uint32))


def test_sparse_output_errors() -> None:
    with pytest.raises(BatchError, match="sparse output is float32 .* not int8"):
        BatchEmbedder(model="hash:16", output="sparse", dtype="int8")


def test_teis_json_answers_need_the_vocabulary_size(hash_fleet) -> None:
    """A server answering TEI's own JSON (``[[{"index", "value"}]]``, as TEI does): the real server asked
    for JSON only. With ``vocab_size`` the column is the client's; without it the answers' vocabulary
    is a guess that differs from request to request, and the error says what to pass."""
    url = hash_fleet[0].url
    with densewire.Client(url) as client:
        want = client.embed_sparse(TEXTS[:100])
    with BatchEmbedder(url=url, output="sparse", batch_size=25, vocab_size=SPARSE_VOCAB_SIZE) as embed:
        embed(_table(TEXTS[:1]))  # the fleet made; from now on it asks for JSON only
        embed._fleet._headers["Accept"] = "application/json"
        out = embed(_table(TEXTS[:100]))
    _same(_joined(out), want)
    with BatchEmbedder(url=url, output="sparse", batch_size=25) as embed:
        embed(_table(TEXTS[:1]))
        embed._fleet._headers["Accept"] = "application/json"
        with pytest.raises(BatchError, match="TEI's JSON states no vocabulary size .* pass vocab_size=") as info:
            embed(_table(TEXTS[:100]))
    assert info.value.category == "shape_mismatch"
    with pytest.raises(BatchError, match="vocab_size=1000, but the model's vocabulary has 30522 tokens"):
        BatchEmbedder(model="hash:16", output="sparse", vocab_size=1000)
    with pytest.raises(BatchError, match="vocab_size .* is for output='sparse'"):
        BatchEmbedder(model="hash:16", vocab_size=1000)
