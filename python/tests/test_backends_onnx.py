"""The ONNX engine on the default model: sentence-transformers' vectors, the graph cache, int8, buckets."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import numpy as np
import onnx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from densewire._backends import BUILTIN_MODEL_NAME, BertBackend, OnnxBertBackend, default_model_path, load_backend
from densewire._backends import onnx_bert, onnx_graph

REFERENCE = json.loads((Path(__file__).parent / "data" / "minilm-reference.json").read_text("utf-8"))
TEXTS = [item["text"] for item in REFERENCE["items"]]
EXPECTED = np.stack([np.frombuffer(bytes.fromhex(i["embedding_f32le_hex"]), dtype="<f4")
                     for i in REFERENCE["items"]])


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a, b = a.astype(np.float64), b.astype(np.float64)
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("onnx-cache")


@pytest.fixture(scope="module")
def model(cache: Path) -> OnnxBertBackend:
    return OnnxBertBackend(default_model_path(), name=BUILTIN_MODEL_NAME, cache=cache, threads=1)


@pytest.fixture(scope="module")
def vectors(model: OnnxBertBackend) -> np.ndarray:
    return model.embed(TEXTS)


def test_matches_sentence_transformers(vectors: np.ndarray) -> None:
    assert cosines(vectors, EXPECTED).min() >= 0.99999
    assert np.abs(vectors - EXPECTED).max() <= 1e-5
    assert vectors.dtype == np.float32 and vectors.flags.c_contiguous and vectors.shape == (len(TEXTS), 384)


def test_matches_the_numpy_engine(vectors: np.ndarray) -> None:
    np.testing.assert_allclose(vectors, BertBackend(default_model_path()).embed(TEXTS), atol=1e-5, rtol=0)


def test_batch_equals_single_and_order_is_kept(model: OnnxBertBackend, vectors: np.ndarray) -> None:
    singles = np.concatenate([model.embed([t]) for t in TEXTS])
    np.testing.assert_allclose(singles, vectors, atol=1e-5, rtol=0)
    picks = [3, 0, 3, 7, 1]
    np.testing.assert_allclose(model.embed([TEXTS[i] for i in picks]), vectors[picks], atol=1e-5, rtol=0)
    assert model.embed([]).shape == (0, 384)


def test_identity(model: OnnxBertBackend) -> None:
    assert (model.engine, model.execution_provider) == ("onnx", "CPUExecutionProvider")
    assert (model.name, model.dimensions, model.max_tokens) == (BUILTIN_MODEL_NAME, 384, 256)
    assert model.count_tokens(["Hello, world!", "", "a"]) == [6, 2, 3]


def test_threads_share_one_session(model: OnnxBertBackend, vectors: np.ndarray) -> None:
    results: dict[int, np.ndarray] = {}
    threads = [threading.Thread(target=lambda k=k: results.__setitem__(k, model.embed(TEXTS))) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for out in results.values():
        np.testing.assert_allclose(out, vectors, atol=1e-5, rtol=0)


# -- the graph and its cache ------------------------------------------------

def test_graph_runs_the_linear_layers_on_packed_tokens(model: OnnxBertBackend) -> None:
    graph = onnx.load(str(model.graph_path), load_external_data=False).graph
    ops = [(n.domain, n.op_type) for n in graph.node]
    assert ops.count(("com.microsoft", "MultiHeadAttention")) == 6
    assert ops.count(("", "LayerNormalization")) == 13  # the embeddings' and two a layer
    assert ops.count(("com.microsoft", "Gelu")) == 6
    assert ops.count(("", "MatMul")) == 24  # Q/K/V, attention output, feed-forward in and out
    # every MatMul reads packed tokens: a LayerNormalization's output (the first layer's input
    # included), the attention context gathered back by unpad_index, or the GELU of packed tokens
    packed = {o for n in graph.node for o in n.output
              if n.op_type in ("LayerNormalization", "Gelu")
              or (n.op_type == "Gather" and n.input[1] == "unpad_index")}
    assert all(n.input[0] in packed for n in graph.node if n.op_type == "MatMul")
    # and only attention reads the padded view
    padded = {o for n in graph.node if n.op_type == "Gather" and n.input[1] == "pad_index" for o in n.output}
    readers = {n.op_type for n in graph.node if set(n.input) & padded}
    assert readers == {"Split"}
    assert [i.name for i in graph.input] == ["input_ids", "position_ids", "pad_index", "unpad_index",
                                             "key_padding_mask"]


def test_the_slow_fusions_stay_off(model: OnnxBertBackend, tmp_path: Path,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    import onnxruntime as ort

    def optimized(disabled: list[str]) -> set[str]:
        opts = ort.SessionOptions()
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        opts.optimized_model_filepath = str(tmp_path / "optimized.onnx")
        ort.InferenceSession(str(model.graph_path), opts, providers=["CPUExecutionProvider"],
                             disabled_optimizers=disabled)
        return {n.op_type for n in onnx.load(opts.optimized_model_filepath).graph.node}

    # what the session runs: each product and its bias one Gemm, no SkipLayerNormalization or BiasGelu
    ops = optimized(list(onnx_graph.DISABLED_FUSIONS))
    assert not ops & {"SkipLayerNormalization", "BiasGelu"} and {"Gemm", "LayerNormalization", "Gelu"} <= ops
    # and the backend passes them to its session
    seen: dict[str, object] = {}
    real = ort.InferenceSession
    monkeypatch.setattr(ort, "InferenceSession", lambda *a, **kw: seen.update(kw) or real(*a, **kw))
    OnnxBertBackend(default_model_path(), cache=model.graph_path.parent, threads=1)
    assert list(seen["disabled_optimizers"]) == list(onnx_graph.DISABLED_FUSIONS)


def test_packed_feeds() -> None:
    feeds = onnx_graph.packed_feeds([[5, 6, 7], [8, 9], [4]], np.array([3, 2, 1]))
    assert feeds["input_ids"].tolist() == [5, 6, 7, 8, 9, 4]
    assert feeds["position_ids"].tolist() == [0, 1, 2, 0, 1, 0]
    assert feeds["pad_index"].tolist() == [[0, 1, 2], [3, 4, 0], [5, 0, 0]]
    assert feeds["unpad_index"].tolist() == [0, 1, 2, 3, 4, 6]
    assert feeds["key_padding_mask"].tolist() == [[1, 1, 1], [1, 1, 0], [1, 0, 0]]
    assert {a.dtype for a in feeds.values()} == {np.dtype(np.int32)}


def test_a_long_sequence_among_short_ones(model: OnnxBertBackend) -> None:
    long = " ".join(["word"] * 400)  # truncated to max_tokens: its own call, the short ones in another
    texts = ["a", long, "two words", "three short words"]
    together = model.embed(texts)
    alone = np.concatenate([model.embed([t]) for t in texts])
    np.testing.assert_allclose(together, alone, atol=1e-5, rtol=0)


def test_second_start_loads_the_cached_graph(cache: Path, model: OnnxBertBackend,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    assert model.graph_path.parent == cache and model.graph_path.is_file()
    mtime = model.graph_path.stat().st_mtime_ns

    def no_build(*args: object) -> None:
        raise AssertionError("the graph was built again instead of loaded from the cache")

    monkeypatch.setattr(onnx_bert, "build_graph", no_build)
    again = OnnxBertBackend(default_model_path(), cache=cache, threads=1)
    assert again.graph_path == model.graph_path and model.graph_path.stat().st_mtime_ns == mtime
    np.testing.assert_array_equal(again.embed(TEXTS[:3]), model.embed(TEXTS[:3]))


def test_cache_key_has_the_weights_hash_and_the_builder_version(tmp_path: Path, cache: Path,
                                                                model: OnnxBertBackend,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(onnx_bert, "BUILDER_VERSION", onnx_graph.BUILDER_VERSION + "-next")
    newer = OnnxBertBackend(default_model_path(), cache=cache, threads=1)
    assert newer.graph_path != model.graph_path  # a new builder never reuses an old graph
    monkeypatch.undo()
    # other weights (the same bytes but one) get another key
    folder = tmp_path / "model"
    folder.mkdir()
    src = default_model_path()
    for name in ("config.json", "tokenizer.json", "sentence_bert_config.json", "modules.json"):
        (folder / name).symlink_to(src / name)
    (folder / "1_Pooling").symlink_to(src / "1_Pooling")
    data = bytearray((src / "model.safetensors").read_bytes())
    data[-1] ^= 1
    (folder / "model.safetensors").write_bytes(bytes(data))
    other = OnnxBertBackend(folder, cache=cache, threads=1)
    assert other.graph_path != model.graph_path


def test_graphs_past_the_protobuf_limit_keep_their_weights_apart(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    from tiny_bert import write_tiny_model

    folder = write_tiny_model(tmp_path / "m", "bert-cls-raw")
    small = OnnxBertBackend(folder, cache=tmp_path / "a")
    monkeypatch.setattr(onnx_bert, "_PROTOBUF_LIMIT", 1 << 20)  # the tiny model counts as huge
    big = OnnxBertBackend(folder, cache=tmp_path / "b")
    data = big.graph_path.with_name(big.graph_path.name + ".data")
    assert data.is_file() and data.stat().st_size > big.graph_path.stat().st_size
    np.testing.assert_array_equal(big.embed(["the cat", "a dog"]), small.embed(["the cat", "a dog"]))


def test_cache_dir_follows_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DENSEWIRE_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert onnx_bert.cache_dir() == tmp_path / "xdg" / "densewire"
    monkeypatch.setenv("DENSEWIRE_CACHE_DIR", str(tmp_path / "dw"))
    assert onnx_bert.cache_dir() == tmp_path / "dw"
    b = load_backend("minilm", engine="onnx")
    assert b.graph_path.parent == tmp_path / "dw" / "onnx"


# -- int8 -------------------------------------------------------------------

def test_int8_is_close_and_cached_apart(cache: Path, model: OnnxBertBackend, vectors: np.ndarray) -> None:
    q = OnnxBertBackend(default_model_path(), cache=cache, threads=1, quantize="int8")
    assert q.quantize == "int8" and q.graph_path != model.graph_path
    ops = {n.op_type for n in onnx.load(str(q.graph_path)).graph.node}
    assert "MultiHeadAttention" in ops and ("MatMulInteger" in ops or "DynamicQuantizeMatMul" in ops)
    assert "MatMul" not in ops  # every linear layer quantized
    out = q.embed(TEXTS)
    cos = cosines(out, vectors)
    assert cos.min() >= 0.97 and cos.mean() >= 0.985  # bench/model/RESULTS.md has the measured figures
    assert cos.max() < 0.999999  # really quantized
    with pytest.raises(ValueError, match="quantize must be one of none, int8"):
        OnnxBertBackend(default_model_path(), cache=cache, quantize="int4")


# -- length buckets ---------------------------------------------------------

def test_chunks_are_cut_only_where_padded_attention_costs_more_than_a_call() -> None:
    lengths = np.array([60, 58, 57, 20, 19, 18, 18, 17, 9, 9, 9, 8])
    # the linear layers see real tokens only: without attention's cost, cutting only adds calls
    assert onnx_bert.plan_chunks(lengths, 32, 8192, overhead=24) == [12]
    # MiniLM's weight (about 2e-3 token-equivalents a pair): the three long ones apart
    assert onnx_bert.plan_chunks(lengths, 32, 8192, overhead=24, attention_weight=2e-3) == [3, 12]
    # one sequence at the model's limit among 31 short ones is a call of its own
    assert onnx_bert.plan_chunks(np.array([512] + [20] * 31), 32, 16384, 24, 2e-3) == [1, 32]
    even = onnx_bert.plan_chunks(np.array([12] * 40), 32, 8192, overhead=24)
    assert len(even) == 2 and max(np.diff([0, *even])) <= 32  # batch_size
    capped = onnx_bert.plan_chunks(np.array([200] * 5), 32, 400, overhead=24)  # token cap: 2 rows a call
    assert len(capped) == 3 and max(np.diff([0, *capped])) == 2


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(1, 300), min_size=1, max_size=80), st.integers(1, 40), st.integers(0, 100),
       st.sampled_from([0.0, 2e-3, 0.1]))
def test_chunk_plan_is_a_partition_within_limits(lengths: list[int], batch: int, overhead: int,
                                                 weight: float) -> None:
    arr = np.array(sorted(lengths, reverse=True))
    ends = onnx_bert.plan_chunks(arr, batch, 2048, overhead, weight)
    starts = [0] + ends[:-1]
    assert ends[-1] == len(arr)
    for s, e in zip(starts, ends):
        assert 0 < e - s <= batch
        assert e - s == 1 or (e - s) * arr[s] <= 2048
