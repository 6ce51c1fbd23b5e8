"""The pgvector sinks of per-token and sparse output, on the session's real PostgreSQL with pgvector:
PgvectorSink fills a ``sparsevec(V)`` column from a sparse column (binary COPY from its indices and
values) and PgvectorTokensSink a table of one row per (id, token position); rows land bit for bit,
every id (every (id, position)) once after a block is written again, and wrong dimensions, kinds or
targets are errors naming the column before anything is written."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from densewire import RaggedTensor, SparseVectors, maxsim, pgvector
from densewire._ragged_arrow import ragged_array, sparse_array
from densewire.batch import BatchError, PgvectorSink, PgvectorTokensSink
from pgvector_support import recreate_table

RNG = np.random.default_rng(32)
VOCAB, D = 1000, 8


def _sparse(n: int, seed: int = 0) -> SparseVectors:
    rng = np.random.default_rng(seed)
    nnz = rng.integers(0, 40, n)
    nnz[0] = 0  # a text with no non-zero weight: an empty sparsevec
    indices = np.concatenate([np.sort(rng.choice(VOCAB, k, replace=False)) for k in nnz]).astype(np.uint32)
    indices[-1:] = VOCAB - 1 if nnz[-1] else indices[-1:]  # the largest index
    values = rng.uniform(0.01, 3.0, int(nnz.sum())).astype(np.float32)
    return SparseVectors(indices, values, np.concatenate([[0], np.cumsum(nnz)]), VOCAB)


def _sparse_block(ids, sv: SparseVectors, vocab: int | None = VOCAB) -> pa.Table:
    meta = {"densewire.dtype": "float32"} | ({} if vocab is None else {"densewire.vocabulary_size": str(vocab)})
    col = sparse_array(sv)
    return pa.Table.from_arrays([pa.array(np.asarray(ids, np.int64)), col],
                                schema=pa.schema([pa.field("id", pa.int64()),
                                                  pa.field("embedding", col.type, False, metadata=meta)]))


def _ragged(n: int, d: int = D, seed: int = 1) -> RaggedTensor:
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 30, n)
    lengths[min(2, n - 1)] = 0 if n > 3 else lengths[min(2, n - 1)]  # a document with no tokens
    return RaggedTensor.from_lengths(rng.standard_normal((int(lengths.sum()), d)).astype(np.float32), lengths)


def _token_block(ids, r: RaggedTensor) -> pa.Table:
    return pa.table({"id": pa.array(np.asarray(ids, np.int64)), "tokens": ragged_array(r)})


# -- sparsevec -------------------------------------------------------------------------------------------
def test_sparse_rows_land_bit_for_bit_once_each(pgvector_db, conn) -> None:
    table = recreate_table(conn, "splade_docs", f"id bigint PRIMARY KEY, embedding sparsevec({VOCAB})")
    sv = _sparse(300)
    block = _sparse_block(range(300), sv)
    with PgvectorSink(pgvector_db.url, table=table, column="embedding", id_column="id") as sink:
        assert sink.write(block, block="s0") == 300
        assert sink.write(block, block="s0") == 0  # a retried block
        assert sink.write(block.slice(250), block="s1") == 0
    back = pgvector.read_vectors(conn, table, ("id", "embedding"), order_by="id")
    assert back.ids.tolist() == list(range(300))
    assert np.array_equal(back.tensor.array.view(np.uint32), sv.to_dense().view(np.uint32))
    # pgvector's own text form of one row: 1-based indices, the values as stored
    i = int(np.argmax(sv.nnz))
    idx, val = sv[i]
    text = conn.execute(f"SELECT embedding::text FROM {table} WHERE id = %s", (i,)).fetchone()[0]
    assert text.startswith("{" + f"{int(idx[0]) + 1}:") and text.endswith(f"}}/{VOCAB}")
    assert conn.execute(f"SELECT embedding::text FROM {table} WHERE id = 0").fetchone()[0] == f"{{}}/{VOCAB}"


def test_zero_weights_are_left_out_and_a_nan_names_its_row(pgvector_db, conn) -> None:
    table = recreate_table(conn, "splade_zero", f"id bigint PRIMARY KEY, embedding sparsevec({VOCAB})")
    sv = SparseVectors([3, 7, 9], np.array([0.5, 0.0, 2.0], np.float32), [0, 2, 3], VOCAB)
    with PgvectorSink(pgvector_db.url, table=table, column="embedding", id_column="id") as sink:
        assert sink.write(_sparse_block([1, 2], sv), block="z") == 2
        assert conn.execute(f"SELECT embedding::text FROM {table} WHERE id = 1").fetchone()[0] == f"{{4:0.5}}/{VOCAB}"
        bad = SparseVectors([3, 7, 9], np.array([0.5, np.nan, 2.0], np.float32), [0, 1, 3], VOCAB)
        with pytest.raises(BatchError) as info:
            sink.write(_sparse_block([5, 6], bad), block="n")
    assert info.value.category == "non_finite" and "[1][7]" in str(info.value) and info.value.block == "n"
    assert conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0] == 2


@pytest.mark.parametrize(("ddl", "block", "message", "category"), [
    (f"id bigint PRIMARY KEY, embedding sparsevec({VOCAB + 1})", None, f"vectors of {VOCAB} dimensions",
     "shape_mismatch"),
    (f"id bigint PRIMARY KEY, embedding vector({D})", None, "a sparse column cannot fill", "invalid_field"),
    (f"id bigint PRIMARY KEY, embedding sparsevec({VOCAB})",
     pa.table({"id": [1], "embedding": pa.array([{"indices": [5, 2], "values": [1.0, 1.0]}])}),
     "not above the index before it", "invalid_field"),
    (f"id bigint PRIMARY KEY, embedding sparsevec({VOCAB})",
     pa.table({"id": [1, 2], "embedding": pa.array([{"indices": [5], "values": [1.0]},
                                                    {"indices": [5, 9], "values": [1.0]}])}),
     "2 indices and 1 values", "shape_mismatch"),
])
def test_bad_sparse_blocks_fail_before_anything_is_written(pgvector_db, conn, ddl, block, message, category) -> None:
    table = recreate_table(conn, "splade_bad", ddl)
    with PgvectorSink(pgvector_db.url, table=table, column="embedding", id_column="id") as sink:
        with pytest.raises(BatchError) as info:
            sink.write(_sparse_block(range(5), _sparse(5)) if block is None else block, block="b")
    assert message in str(info.value) and info.value.category == category and info.value.column == "embedding"
    assert conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0] == 0


def test_a_column_without_vocabulary_metadata_takes_the_targets(pgvector_db, conn) -> None:
    table = recreate_table(conn, "splade_meta", f"id text PRIMARY KEY, embedding sparsevec({VOCAB})")
    sv = _sparse(20, seed=4)
    block = _sparse_block(range(20), sv, vocab=None).set_column(0, "id", pa.array([f"d{i}" for i in range(20)]))
    with PgvectorSink(pgvector_db.url, table=table, column="embedding", id_column="id") as sink:
        assert sink.write(block, block="m") == 20
    back = pgvector.read_vectors(conn, table, ("id", "embedding"), order_by="id")
    order = sorted(range(20), key=lambda i: f"d{i}")
    assert np.array_equal(back.tensor.array, sv.to_dense()[order])


def test_no_vocabulary_anywhere_is_named(pgvector_db, conn) -> None:
    table = recreate_table(conn, "splade_nodims", "id bigint PRIMARY KEY, embedding sparsevec")
    with PgvectorSink(pgvector_db.url, table=table, column="embedding", id_column="id") as sink:
        with pytest.raises(BatchError, match="states no vocabulary size and splade_nodims.embedding is a sparsevec "
                                             "without one: declare it sparsevec"):
            sink.write(_sparse_block(range(5), _sparse(5), vocab=None), block="v")
        assert sink.write(_sparse_block(range(5), _sparse(5)), block="v") == 5  # the column's metadata says it


# -- per-token tables ------------------------------------------------------------------------------------
def _tokens_back(conn, table: str):
    back = pgvector.read_vectors(conn, query=f"SELECT id, tokens FROM {table} ORDER BY id, position")
    positions = [p for (p,) in conn.execute(f"SELECT position FROM {table} ORDER BY id, position").fetchall()]
    return back, positions


def test_token_rows_land_bit_for_bit_once_each(pgvector_db, conn) -> None:
    table = recreate_table(conn, "doc_tokens", f"id bigint, position int, tokens vector({D}), PRIMARY KEY (id, position)")
    r = _ragged(120)
    block = _token_block(range(120), r)
    with PgvectorTokensSink(pgvector_db.url, table=table, column="tokens", id_column="id") as sink:
        assert sink.write(block.slice(0, 80), block="t0") == int(r.lengths[:80].sum())
        assert sink.write(block.slice(0, 80), block="t0") == 0  # the retried block: no token twice
        assert sink.write(block.slice(60), block="t1") == int(r.lengths[80:].sum())  # re-cut around committed rows
    back, positions = _tokens_back(conn, table)
    assert back.ids.tolist() == np.repeat(np.arange(120), r.lengths).tolist()
    assert positions == [p for k in r.lengths.tolist() for p in range(k)]
    assert np.array_equal(back.tensor.array.view(np.uint32), r.values.view(np.uint32))


def test_text_ids_halfvec_and_a_multi_chunk_column(pgvector_db, conn) -> None:
    table = recreate_table(conn, "doc_tokens_h", f"id text, position smallint, tokens halfvec({D}), UNIQUE (position, id)")
    r1, r2 = _ragged(5, seed=2), _ragged(4, seed=3)
    col = pa.chunked_array([ragged_array(r1), ragged_array(r2)])
    block = pa.table({"id": [f"doc-{i}" for i in range(9)], "tokens": col})
    with PgvectorTokensSink(pgvector_db.url, table=table, column="tokens", id_column="id") as sink:
        assert sink.write(block, block="h") == int(r1.lengths.sum() + r2.lengths.sum())
    back, _ = _tokens_back(conn, table)
    want = np.concatenate([r1.values, r2.values]).astype(np.float16)
    assert np.array_equal(back.tensor.array, want)


@pytest.mark.parametrize(("ddl", "block", "message", "column"), [
    (f"id bigint, position int, tokens vector({D})", None, "no unique constraint or primary key on (id, position)",
     "position"),
    (f"id bigint PRIMARY KEY, position int, tokens vector({D})", None, "on (id, position)", "position"),
    (f"id bigint, position int, tokens vector({D + 1}), PRIMARY KEY (id, position)", None,
     f"token vectors of {D} dimensions", "tokens"),
    (f"id bigint, position real, tokens vector({D}), PRIMARY KEY (id, position)", None, "not an integer",
     "position"),
    (f"id bigint, position int, tokens sparsevec({D}), PRIMARY KEY (id, position)", None,
     "go in a vector or halfvec column", "tokens"),
    (f"id bigint, pos int, tokens vector({D}), PRIMARY KEY (id, pos)", None, "has no column 'position'", "position"),
    (f"id bigint, position int, tokens vector({D}), PRIMARY KEY (id, position)",
     pa.table({"id": [4, 5, 4], "tokens": ragged_array(_ragged(3))}), "id 4 is in rows 0 and 2", "id"),
    (f"id bigint, position int, tokens vector({D}), PRIMARY KEY (id, position)",
     pa.table({"id": [4, 5], "tokens": pa.array([[[0.0] * D], [[0.0] * (D - 1)]], pa.list_(pa.list_(pa.float32())))}),
     f"a token vector of {D - 1} values", "tokens"),
    (f"id bigint, position int, tokens vector({D}), PRIMARY KEY (id, position)",
     pa.table({"id": [4], "tokens": pa.array([[0.0] * D], pa.list_(pa.float32(), D))}), "not a list of vectors",
     "tokens"),
])
def test_bad_token_targets_and_blocks_fail_before_anything_is_written(pgvector_db, conn, ddl, block, message,
                                                                      column) -> None:
    table = recreate_table(conn, "tokens_bad", ddl)
    with PgvectorTokensSink(pgvector_db.url, table=table, column="tokens", id_column="id") as sink:
        with pytest.raises(BatchError) as info:
            sink.write(_token_block(range(6), _ragged(6)) if block is None else block, block="b")
    assert message in str(info.value) and info.value.column == column and info.value.block == "b"
    assert conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0] == 0


def test_maxsim_over_the_per_token_table_is_densewire_maxsim(pgvector_db, conn) -> None:
    """Late interaction read from the table the sink wrote: each document's sum over query tokens of the
    best inner product (pgvector's ``<#>``, negated) equals :func:`densewire.maxsim` on the same tokens,
    and the ranking of the candidates is the same."""
    table = recreate_table(conn, "colbert_tokens", f"id bigint, position int, tokens vector({D}), PRIMARY KEY (id, position)")
    r = _ragged(40, seed=9)
    with PgvectorTokensSink(pgvector_db.url, table=table, column="tokens", id_column="id") as sink:
        sink.write(_token_block(range(40), r), block="c")
    query = np.random.default_rng(10).standard_normal((5, D)).astype(np.float32)
    values = ", ".join(f"({j}, '[{','.join(repr(float(x)) for x in row)}]'::vector)" for j, row in enumerate(query))
    rows = conn.execute(
        f"SELECT id, sum(best) FROM (SELECT t.id, q.j, max(-(t.tokens <#> q.v)) AS best FROM {table} t "
        f"CROSS JOIN (VALUES {values}) AS q(j, v) GROUP BY t.id, q.j) s GROUP BY id ORDER BY sum(best) DESC").fetchall()
    want = maxsim(query, r)
    present = np.flatnonzero(r.lengths > 0)  # a document without tokens has no rows to score
    assert sorted(i for i, _s in rows) == present.tolist()
    got = np.array([s for _i, s in sorted(rows)])
    assert np.allclose(got, want[present], rtol=1e-5, atol=1e-5)
    assert [i for i, _s in rows[:5]] == present[np.argsort(-want[present], kind="stable")][:5].tolist()


def test_a_token_block_commits_whole_or_not_at_all(pgvector_db, conn) -> None:
    table = recreate_table(conn, "tokens_atomic", f"id bigint, position int, tokens vector({D}), PRIMARY KEY (id, position)")
    r = _ragged(120, seed=6)
    values = r.values.copy()
    last = int(r.offsets[-2])  # the last document's first token: past the first COPY chunk of 512 rows
    assert last > 512
    values[last, 2] = np.nan
    bad = _token_block(range(120), RaggedTensor.from_lengths(values, r.lengths))
    with PgvectorTokensSink(pgvector_db.url, table=table, column="tokens", id_column="id") as sink:
        with pytest.raises(BatchError) as info:
            sink.write(bad, block="t9")
        assert info.value.category == "non_finite" and info.value.block == "t9"
        assert conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0] == 0
        assert sink.write(_token_block(range(120), r), block="t9") == r.rows.n  # the same sink, usable again
