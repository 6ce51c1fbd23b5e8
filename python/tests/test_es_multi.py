"""Elasticsearch sinks of sparse and per-token output against the real 9.5.3 node (the session's
``es_node``): EsSparseVectorSink writes SPLADE-style rows as ``sparse_vector`` ``{token: weight}``
objects named by the model's own vocabulary (MiniLM's tokenizer.json), every weight back from the
node as the float32 sent with its low 15 bits dropped (what Lucene's FeatureField keeps), every id once after a block is written again, ``sparse_vector``
query scores equal to numpy's dot products (within the node's 9-bit weight precision); the unhappy
paths (a field of another type, a missing index, a vocabulary of another size, negative weights) are
errors before a document is sent. EsRankVectorsSink against the same node: 9.5.3's test distribution
has no ``rank_vectors`` type, and the sink says so, naming the field, before anything is written; its
bulk bodies (float arrays, Base64 inner vectors) are checked against the column bit for bit."""

from __future__ import annotations

import json

import httpx
import numpy as np
import orjson
import pyarrow as pa
import pybase64
import pytest
import tokenizers

from densewire import RaggedTensor, SparseVectors
from densewire._backends import default_model_path
from densewire._batch._esmulti import load_vocabulary
from densewire._ragged_arrow import ragged_array, sparse_array
from densewire.batch import BatchError, EsRankVectorsSink, EsSparseVectorSink

VOCAB = load_vocabulary(default_model_path())  # MiniLM's tokenizer.json: 30,522 WordPiece tokens


def _sparse(n: int, seed: int = 0) -> SparseVectors:
    rng = np.random.default_rng(seed)
    nnz = rng.integers(1, 60, n)
    nnz[1] = 0  # a text with no weight: an empty object
    indices = np.concatenate([np.sort(rng.choice(len(VOCAB), k, replace=False)) for k in nnz]).astype(np.uint32)
    values = rng.uniform(0.05, 4.0, int(nnz.sum())).astype(np.float32)
    return SparseVectors(indices, values, np.concatenate([[0], np.cumsum(nnz)]), len(VOCAB))


def _block(ids, sv: SparseVectors) -> pa.Table:
    col = sparse_array(sv)
    meta = {"densewire.dtype": "float32", "densewire.vocabulary_size": str(sv.vocab_size)}
    return pa.Table.from_arrays([pa.array(list(ids), pa.int64()), col], schema=pa.schema([
        pa.field("id", pa.int64()), pa.field("splade", col.type, False, metadata=meta)]))


def _drop(url: str, index: str) -> None:
    httpx.delete(f"{url}/{index}", timeout=60)


def _sources(url: str, index: str, field: str) -> dict[str, dict]:
    with httpx.Client(base_url=url, timeout=60) as c:
        c.post(f"/{index}/_refresh").raise_for_status()
        hits = c.post(f"/{index}/_search", json={"size": 1000, "_source": {"includes": [field],
                                                                             "exclude_vectors": False}}).json()
        assert c.get(f"/{index}/_count").json()["count"] == len(hits["hits"]["hits"])
        return {h["_id"]: h["_source"].get(field, {}) for h in hits["hits"]["hits"]}


def test_sparse_rows_land_as_token_weights_once_each(es_node) -> None:
    _drop(es_node.url, "splade")
    sv = _sparse(200)
    block = _block(range(200), sv)
    sink = EsSparseVectorSink(es_node.url, index="splade", field="splade", id_column="id",
                              vocab=default_model_path() / "tokenizer.json", create_index=True, max_bytes=20_000)
    assert sink.write(block, block="s0") == 200
    assert sink.write(block.slice(150), block="s0") == 0  # a retried (re-cut) block replaces its documents
    docs = _sources(es_node.url, "splade", "splade")
    assert sorted(docs, key=int) == [str(i) for i in range(200)]
    for i in range(200):
        idx, val = sv[i]
        got = docs[str(i)]
        want = dict(zip([VOCAB[j] for j in idx.tolist()], val.tolist()))  # the vocabulary's tokens of the ids
        assert sorted(got) == sorted(want)  # (the node answers them in its own order)
        keys = sorted(want)
        sent = np.asarray([want[k] for k in keys], np.float32).view(np.uint32)
        # the node keeps a weight as Lucene's FeatureField does: the float32's top 17 bits (8 of the mantissa)
        held = np.asarray([got[k] for k in keys], np.float32).view(np.uint32)
        assert np.array_equal(held, sent & np.uint32(0xFFFF8000))
    mapping = httpx.get(f"{es_node.url}/splade/_mapping").json()["splade"]["mappings"]["properties"]["splade"]
    assert mapping["type"] == "sparse_vector"


def test_sparse_vector_query_scores_are_numpys_dot_products(es_node) -> None:
    _drop(es_node.url, "splade_q")
    sv = _sparse(120, seed=3)
    sink = EsSparseVectorSink(es_node.url, index="splade_q", field="splade", id_column="id", vocab=VOCAB,
                              create_index=True)
    sink.write(_block(range(120), sv), block="q")
    httpx.post(f"{es_node.url}/splade_q/_refresh").raise_for_status()
    dense = sv.to_dense()
    query = dense[7] + dense[42]  # shares tokens with documents 7 and 42 (and, by chance, others)
    nz = np.flatnonzero(query)
    answer = httpx.post(f"{es_node.url}/splade_q/_search", json={"size": 120, "_source": False, "query": {
        "sparse_vector": {"field": "splade", "query_vector": {VOCAB[j]: float(query[j]) for j in nz}}}}).json()
    scores = {int(h["_id"]): h["_score"] for h in answer["hits"]["hits"]}
    want = dense.astype(np.float64) @ query.astype(np.float64)
    assert set(scores) == set(np.flatnonzero(want > 0).tolist())
    got = np.array([scores[i] for i in sorted(scores)])
    assert np.allclose(got, want[sorted(scores)], rtol=8e-3)  # ES keeps 9 bits of each weight's mantissa
    assert next(iter(scores)) in (7, 42)


def test_zero_weights_are_left_out_and_negative_ones_name_their_row(es_node) -> None:
    _drop(es_node.url, "splade_z")
    sink = EsSparseVectorSink(es_node.url, index="splade_z", field="splade", id_column="id", vocab=VOCAB,
                              create_index=True)
    zero = SparseVectors([100, 2000, 2001], np.array([0.5, 0.0, 1.5], np.float32), [0, 2, 3], len(VOCAB))
    assert sink.write(_block([1, 2], zero), block="z") == 2
    assert _sources(es_node.url, "splade_z", "splade")["1"] == {VOCAB[100]: 0.5}
    negative = SparseVectors([100, 2000, 2001], np.array([0.5, 1.0, -1.5], np.float32), [0, 2, 3], len(VOCAB))
    with pytest.raises(BatchError) as info:
        sink.write(_block([3, 4], negative), block="n")
    assert "a sparse_vector weight is a positive normal float" in str(info.value)
    assert info.value.row == 1 and info.value.row_id == 4 and info.value.block == "n"
    assert len(_sources(es_node.url, "splade_z", "splade")) == 2


def test_sparse_targets_and_vocabularies_are_checked_before_anything_is_sent(es_node, tmp_path) -> None:
    _drop(es_node.url, "splade_bad")
    block = _block(range(3), _sparse(3))
    with pytest.raises(BatchError, match="index 'splade_bad' does not exist: pass create_index=True") as info:
        EsSparseVectorSink(es_node.url, index="splade_bad", field="splade", id_column="id", vocab=VOCAB).write(
            block, block="b")
    assert info.value.category == "not_found"
    httpx.put(f"{es_node.url}/splade_bad", json={"mappings": {"properties": {"splade": {"type": "keyword"}}}})
    with pytest.raises(BatchError, match="field 'splade' of index 'splade_bad' is a keyword, not a sparse_vector"):
        EsSparseVectorSink(es_node.url, index="splade_bad", field="splade", id_column="id", vocab=VOCAB).write(
            block, block="b")
    (tmp_path / "vocab.txt").write_text("\n".join(VOCAB[:1000]) + "\n", encoding="utf-8")
    short = EsSparseVectorSink(es_node.url, index="splade_bad", field="splade", id_column="id", vocab=tmp_path)
    assert short.vocab == VOCAB[:1000]  # a folder's vocab.txt, one token a line
    with pytest.raises(BatchError, match="a 30522-token vocabulary, and the vocabulary given has 1000 tokens"):
        short.write(block, block="b")
    assert httpx.get(f"{es_node.url}/splade_bad/_count").json()["count"] == 0
    with pytest.raises(BatchError, match="holds no tokenizer.json or vocab.txt"):
        EsSparseVectorSink(es_node.url, index="x", field="s", id_column="id", vocab=tmp_path / "..")


# -- rank_vectors ----------------------------------------------------------------------------------------
def _tokens(n: int, d: int = 16, seed: int = 5) -> RaggedTensor:
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 12, n)
    return RaggedTensor.from_lengths(rng.standard_normal((int(lengths.sum()), d)).astype(np.float32), lengths)


def test_rank_vectors_on_9_5_3s_test_distribution_is_a_clear_error(es_node) -> None:
    _drop(es_node.url, "colbert")
    r = _tokens(4)
    block = pa.table({"id": pa.array([1, 2, 3, 4], pa.int64()), "tokens": ragged_array(r)})
    sink = EsRankVectorsSink(es_node.url, index="colbert", field="tokens", id_column="id", create_index=True)
    with pytest.raises(BatchError) as info:
        sink.write(block, block="r")
    assert "this Elasticsearch has no rank_vectors field type" in str(info.value)
    assert "The mapper type [rank_vectors] declared on field [tokens] does not exist" in str(info.value)
    assert info.value.column == "tokens"
    assert httpx.get(f"{es_node.url}/colbert/_count").status_code == 404  # nothing was made


@pytest.mark.parametrize("vector_format", ["floats", "base64"])
def test_rank_vectors_bodies_carry_each_token_vector_bit_for_bit(vector_format) -> None:
    r = _tokens(30)
    block = pa.table({"id": pa.array(range(30), pa.int64()), "tokens": ragged_array(r)})
    sink = EsRankVectorsSink("http://127.0.0.1:9", index="colbert", field="tokens", id_column="id",
                             vector_format=vector_format, max_bytes=4000)
    bodies, dims = sink.bodies(block, block="b")
    assert dims == 16 and len(bodies) > 1 and all(len(b) <= 4000 for b in bodies)
    lines = b"".join(bodies).splitlines()
    assert [orjson.loads(a)["index"]["_id"] for a in lines[::2]] == [str(i) for i in range(30)]
    for i, source in enumerate(lines[1::2]):
        inner = orjson.loads(source)["tokens"]
        if vector_format == "base64":
            got = np.stack([np.frombuffer(pybase64.b64decode(v), ">f4") for v in inner]).astype(np.float32)
        else:
            got = np.asarray(inner, np.float32)
        assert np.array_equal(got.view(np.uint32), r[i].view(np.uint32))


def test_rank_vectors_bad_blocks_name_the_row() -> None:
    r = _tokens(3)
    values = r.values.copy()
    values[int(r.offsets[2])] = np.inf
    bad = pa.table({"id": pa.array([7, 8, 9], pa.int64()), "tokens": ragged_array(RaggedTensor.from_lengths(
        values, r.lengths))})
    sink = EsRankVectorsSink("http://127.0.0.1:9", index="colbert", field="tokens", id_column="id")
    with pytest.raises(BatchError) as info:
        sink.write(bad, block="b")
    assert info.value.category == "non_finite" and info.value.row == 2 and info.value.row_id == 9
    with pytest.raises(BatchError, match="vector_format must be floats or base64"):
        EsRankVectorsSink("http://127.0.0.1:9", index="c", field="t", id_column="id", vector_format="hex")


def test_vocabularies_are_read_as_the_tokenizers_library_reads_them(tmp_path) -> None:
    ids = tokenizers.Tokenizer.from_file(str(default_model_path() / "tokenizer.json")).get_vocab(with_added_tokens=True)
    assert VOCAB == sorted(ids, key=ids.get)  # read as JSON, no tokenizers library needed in the workers
    assert load_vocabulary(default_model_path() / "vocab.txt") == VOCAB
    unigram = {"model": {"type": "Unigram", "vocab": [["<pad>", 0.0], ["▁the", -2.1], ["s", -3.0]]},
               "added_tokens": [{"id": 3, "content": "<mask>"}]}
    (tmp_path / "tokenizer.json").write_text(json.dumps(unigram), encoding="utf-8")
    assert load_vocabulary(tmp_path) == ["<pad>", "▁the", "s", "<mask>"]
    (tmp_path / "tokenizer.json").write_text(json.dumps({"model": {"vocab": {"a": 0, "c": 2}}}), encoding="utf-8")
    with pytest.raises(BatchError, match="names no token for id 1"):
        load_vocabulary(tmp_path / "tokenizer.json")
    with pytest.raises(BatchError, match="a sequence of strings"):
        load_vocabulary([1, 2])
