"""LanceDBSink and ``densewire ingest --to lancedb:PATH`` into a real (embedded) LanceDB 0.40: the Arrow
vectors go in without a copy, read back bit for bit, each id once after a retried block, the writing
process SIGKILLed mid-load and its job rerun leaving every row once, and clear errors for a wrong
dimension or a missing table."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import lancedb
import numpy as np
import pyarrow as pa
import pytest

import densewire
from densewire._batch._columns import vectors_of
from densewire._cli import main
from densewire._stores.lance import fixed_size_block
from densewire.batch import BatchError, LanceDBSink

D = 16


def _vectors(n: int, seed: int, d: int = D, dtype=np.float32) -> np.ndarray:
    a = np.random.default_rng(seed).standard_normal((n, d)).astype(dtype)
    a[0, :2] = [-0.0, 0.1]
    return a


def _table(ids, a: np.ndarray, column: str = "vec") -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()),
                     column: pa.FixedSizeListArray.from_arrays(pa.array(a.reshape(-1)), a.shape[1])})


def _read(uri, name: str, column: str = "vec") -> tuple[list[int], np.ndarray]:
    t = lancedb.connect(uri).open_table(name).to_arrow().sort_by("id")
    values = t.column(column).combine_chunks().flatten().to_numpy()
    return t.column("id").to_pylist(), values.reshape(t.num_rows, -1)


def test_the_block_goes_in_as_it_is() -> None:
    a = _vectors(10, 0)
    t = _table(range(10), a)
    out = fixed_size_block(t.column("id"), a, "id", "vec", t.column("vec"))
    vec, src = out.column("vec").chunks[0], t.column("vec").chunks[0]
    assert vec.values.buffers()[1].address == src.values.buffers()[1].address  # the table's own values buffer
    spark_like = pa.table({"id": pa.array(range(10), pa.int64()),
                           "vec": pa.ListArray.from_arrays(pa.array(np.arange(0, 10 * D + 1, D, dtype=np.int32)),
                                                           pa.array(a.reshape(-1)))})
    view = vectors_of(spark_like, "vec")
    out = fixed_size_block(spark_like.column("id"), view, "id", "vec", spark_like.column("vec"))
    assert pa.types.is_fixed_size_list(out.column("vec").type)
    assert out.column("vec").chunks[0].values.buffers()[1].address == view.ctypes.data  # the list's own values


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_blocks_read_back_bit_for_bit_and_a_retried_block_updates(tmp_path, dtype) -> None:
    a = _vectors(500, 1, dtype=dtype)
    sink = LanceDBSink(str(tmp_path / "db"), table="docs", column="vec", id_column="id", create_table=True)
    assert sink.write(_table(range(250), a[:250]), block="b0") == 250
    assert sink.write(_table(range(250, 500), a[250:]), block="b1") == 250
    assert sink.write(_table(range(250), a[:250]), block="b0") == 0  # again: updated, none inserted
    ids, got = _read(tmp_path / "db", "docs")
    assert ids == list(range(500))
    assert got.dtype == dtype and np.array_equal(got.view(np.uint8), a.view(np.uint8))


def test_wrong_dimension_and_missing_table_are_clear_errors(tmp_path) -> None:
    uri = str(tmp_path / "db")
    LanceDBSink(uri, table="docs", column="vec", id_column="id", create_table=True).write(
        _table([1], _vectors(1, 2)), block="b0")
    with pytest.raises(BatchError) as info:
        LanceDBSink(uri, table="docs", column="vec", id_column="id").write(_table([2], _vectors(1, 3, d=8)), block="b1")
    assert info.value.category == "shape_mismatch" and info.value.block == "b1"
    assert "vectors of 8 dimensions for docs.vec, a column of 16" in str(info.value)
    with pytest.raises(BatchError, match=r"no table 'nope' in .*create_table=True / --create-index"):
        LanceDBSink(uri, table="nope", column="vec", id_column="id").write(_table([1], _vectors(1, 4)), block="b0")
    with pytest.raises(BatchError, match="has no column 'emb'"):
        LanceDBSink(uri, table="docs", column="emb", id_column="id").write(_table([1], _vectors(1, 5), "emb"),
                                                                           block="b0")
    assert _read(uri, "docs")[0] == [1]


def test_cli_ingest_to_lancedb(tmp_path) -> None:
    a = _vectors(300, 6)
    body, _ = densewire.encode(densewire.Embeddings(densewire.Tensor.from_array(a), "m"), "arrow")
    (tmp_path / "v.arrow").write_bytes(bytes(body))
    args = ["ingest", str(tmp_path / "v.arrow"), "--to", f"lancedb:{tmp_path / 'db'}", "--table", "docs",
            "--column", "vec", "--block-rows", "128", "--quiet"]
    with pytest.raises(SystemExit, match="no table 'docs'"):
        main(args)
    assert main(args + ["--create-index"]) == 0
    assert main(args) == 0  # again: merged by id
    ids, got = _read(tmp_path / "db", "docs")
    assert ids == list(range(300)) and np.array_equal(got.view(np.uint32), a.view(np.uint32))


def test_a_writer_killed_mid_load_and_rerun_leaves_every_row_once(tmp_path) -> None:
    """LanceDB is embedded: what can die mid-load is the writing process. ``densewire ingest --to lancedb:``
    SIGKILLed once some blocks are committed and others are being merged, then the same job run again:
    the table opens (a merge is one commit: none half-applied) and every row is there once, bit for bit."""
    blocks, rows = 40, 200
    a = _vectors(blocks * rows, 7, d=32)
    body, _ = densewire.encode(densewire.Embeddings(densewire.Tensor.from_array(a), "m"), "arrow")
    (tmp_path / "v.arrow").write_bytes(bytes(body))
    uri = tmp_path / "db"
    job = [sys.executable, "-m", "densewire", "ingest", str(tmp_path / "v.arrow"), "--to", f"lancedb:{uri}",
           "--table", "docs", "--column", "vec", "--block-rows", str(rows), "--create-index", "--quiet"]
    writer = subprocess.Popen(job, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        seen = 0
        deadline = time.monotonic() + 300
        while seen < 3 * rows and writer.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
            try:
                seen = lancedb.connect(uri).open_table("docs").count_rows()
            except (ValueError, FileNotFoundError, OSError):  # not made yet
                pass
        os.kill(writer.pid, signal.SIGKILL)
    finally:
        writer.communicate(timeout=60)
    assert writer.returncode == -signal.SIGKILL, "the job ended before it could be killed mid-load"
    ids, _ = _read(uri, "docs")
    assert 3 * rows <= len(ids) < blocks * rows and len(set(ids)) == len(ids)  # killed mid-load, nothing twice
    rerun = subprocess.run(job, capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stderr
    ids, got = _read(uri, "docs")
    assert ids == list(range(blocks * rows)) and np.array_equal(got.view(np.uint32), a.view(np.uint32))
