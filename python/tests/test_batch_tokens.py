"""BatchEmbedder(output="tokens"): the per-token states of each row as a ``List<FixedSizeList<float32>[d]>``
column (SPEC.md 20.7), from a real ``densewire serve`` (TEI's ``/embed_all``, densewire's ragged raw body)
and from the engine in this process, equal bit for bit to the client's ``embed_tokens`` and to the
engine's own token states; read back as RaggedTensor views by the sinks' reader; clear errors for a model
without per-token output and for outputs or dtypes that do not exist."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

import densewire
from densewire._backends import BUILTIN_MODEL_NAME, BertBackend, default_model_path
from densewire._batch._columns import token_chunks
from densewire._batch._engine import engine
from densewire.batch import BatchEmbedder, BatchError

TEXTS = ["a cat sat on the mat", "dogs", "the quick brown fox jumps over the lazy dog, twice over", "x",
         "late interaction keeps a vector per token"]
HIDDEN = 384
TOKENS_TYPE = pa.list_(pa.field("item", pa.list_(pa.field("item", pa.float32(), nullable=False), HIDDEN),
                                nullable=False))


def _table(texts=TEXTS) -> pa.Table:
    return pa.table({"id": pa.array(np.arange(len(texts), dtype=np.int64)), "text": pa.array(texts, pa.string())})


@pytest.fixture(scope="module")
def server(minilm_server):
    return minilm_server  # conftest: one MiniLM server for the session


@pytest.fixture(scope="module")
def reference() -> densewire.RaggedTensor:
    rows, lengths = BertBackend(default_model_path(), name=BUILTIN_MODEL_NAME).embed_token_states(TEXTS)
    return densewire.RaggedTensor.from_lengths(rows, lengths)


def test_url_mode_is_the_clients_embed_tokens_bit_for_bit(server) -> None:
    with BatchEmbedder(url=server.url, output="tokens", batch_size=2, id_column="id") as embed:
        out = embed(_table(), block="b0")
        assert embed.dimensions == HIDDEN
    field = out.schema.field("embedding")
    assert field.type == TOKENS_TYPE and not field.nullable and field.metadata[b"densewire.dtype"] == b"float32"
    col = out.column("embedding")
    assert col.num_chunks == 3  # one chunk an answer (2 + 2 + 1 texts)
    with densewire.Client(server.url) as client:
        want = client.embed_tokens(TEXTS)
    pieces = token_chunks(out, "embedding")
    got = densewire.RaggedTensor.from_arrays([m for _r, r in pieces for m in r])
    assert got.offsets.tolist() == want.offsets.tolist()
    assert np.array_equal(got.values.view(np.uint32), want.values.view(np.uint32))
    assert [r0 for r0, _r in pieces] == [0, 2, 4]


def test_model_mode_is_the_engines_token_states_over_its_buffer(reference) -> None:
    with BatchEmbedder(model="minilm", output="tokens", batch_size=8, threads=1) as embed:
        out = embed(_table())
    (row0, got), = token_chunks(out, "embedding")
    assert row0 == 0 and got.offsets.tolist() == reference.offsets.tolist()
    rows, lengths = engine("minilm", 1).embed_token_states(TEXTS)  # the process's engine, loaded once
    assert np.array_equal(got.values, rows) and got.lengths.tolist() == lengths.tolist()
    assert np.abs(got.values - reference.values).max() <= 3e-2  # bf16 on a CPU with bf16 units (test_server_tokens)
    inner = out.column("embedding").chunk(0).values.values  # the column's float values...
    assert np.shares_memory(inner.to_numpy(), got.values)  # ...are what the reader hands the sinks: a view


def test_a_record_batch_and_an_empty_table_keep_the_type(server) -> None:
    with BatchEmbedder(url=server.url, output="tokens", batch_size=2) as embed:
        batch = embed(_table().to_batches()[0])
        empty = embed(_table([]))
    assert isinstance(batch, pa.RecordBatch) and batch.schema.field("embedding").type == TOKENS_TYPE
    assert len(batch.column("embedding")) == len(TEXTS)
    assert empty.schema.field("embedding").type == TOKENS_TYPE and empty.num_rows == 0


def test_bad_outputs_models_and_dtypes_are_refused() -> None:
    with pytest.raises(BatchError, match="output must be one of dense, tokens, sparse, not 'colbert'"):
        BatchEmbedder(model="hash:8", output="colbert")
    with pytest.raises(BatchError, match="tokens output is float32 .* not float16"):
        BatchEmbedder(model="minilm", output="tokens", dtype="float16")
    with pytest.raises(BatchError, match=r"the model hash:8 \(HashBackend\) gives no per-token output"):
        BatchEmbedder(model="hash:8", output="tokens")
    with pytest.raises(BatchError, match=r"the model minilm \(\w+\) has no sparse head; use a SPLADE model"):
        BatchEmbedder(model="minilm", output="sparse")


def test_the_reader_names_the_row_of_a_bad_token_column() -> None:
    ok = pa.array([[[1.0, 2.0], [3.0, 4.0]], [[5.0, 6.0]]], pa.list_(pa.list_(pa.float32())))
    (row0, r), = token_chunks(pa.table({"id": [7, 8], "t": ok}), "t", id_column="id")
    assert r.offsets.tolist() == [0, 2, 3] and r.values.tolist() == [[1, 2], [3, 4], [5, 6]]
    ragged = pa.array([[[1.0, 2.0]], [[3.0, 4.0], [5.0]]], pa.list_(pa.list_(pa.float32())))
    with pytest.raises(BatchError) as info:
        token_chunks(pa.table({"id": [7, 8], "t": ragged}), "t", id_column="id", block="b1")
    assert info.value.category == "shape_mismatch" and info.value.row == 1 and info.value.row_id == 8
    nulls = pa.array([[[1.0, 2.0]], None], pa.list_(pa.list_(pa.float32())))
    with pytest.raises(BatchError, match="a null row of token vectors") as info:
        token_chunks(pa.table({"id": [7, 8], "t": nulls}), "t", id_column="id")
    assert info.value.row == 1
    with pytest.raises(BatchError, match="not a list of vectors"):
        token_chunks(pa.table({"t": pa.array([[1.0]])}), "t")
