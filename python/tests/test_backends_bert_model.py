"""Every BERT-family variant on both engines: tiny random models written by the test.

The numpy engine is checked against a plain float64 implementation written from
the Hugging Face modelling code (tiny_bert.naive_forward), and the ONNX engine
against the numpy engine, to 1e-5.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from tiny_bert import VARIANTS, naive_forward, write_tiny_model

from densewire._backends import BertBackend, BertModel, OnnxBertBackend, choose, load_backend
from densewire._backends.bert_model import ModelNotFoundError, pool

TEXTS = ["the quick brown fox jumps over the lazy dog", "a cat", "sea", "",
         "the sun and the moon and the star over the blue sea at night",
         "walking talks sings played reading writes", "it is what it is"] + [
    " ".join(["river"] * 60)]  # longer than the model: truncated


@pytest.fixture(scope="module", params=sorted(VARIANTS))
def variant(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    return request.param, write_tiny_model(tmp_path_factory.mktemp(request.param) / "model", request.param)


@pytest.fixture(scope="module")
def engines(variant: tuple[str, Path], tmp_path_factory: pytest.TempPathFactory
            ) -> tuple[BertBackend, OnnxBertBackend]:
    _, folder = variant
    cache = tmp_path_factory.mktemp("onnx-cache")
    return BertBackend(folder), OnnxBertBackend(folder, cache=cache, threads=1)


def test_numpy_engine_matches_the_plain_implementation(variant: tuple[str, Path],
                                                      engines: tuple[BertBackend, OnnxBertBackend]) -> None:
    name, folder = variant
    numpy_engine, _ = engines
    m = numpy_engine.model
    seqs = numpy_engine.tokenize(TEXTS)
    assert max(map(len, seqs)) == m.max_tokens == 40  # the long text is cut at the model's length
    want = np.concatenate([
        pool(naive_forward(folder, s).astype(np.float32), np.array([len(s)]), m.pooling, m.normalize)
        for s in seqs])
    np.testing.assert_allclose(numpy_engine.embed(TEXTS), want, atol=1e-5, rtol=0)
    if VARIANTS[name][0] != "bert":  # RoBERTa: positions start at padding_idx + 1
        assert m.position_offset == 2


def test_onnx_engine_matches_numpy_engine(engines: tuple[BertBackend, OnnxBertBackend]) -> None:
    numpy_engine, onnx_engine = engines
    want = numpy_engine.embed(TEXTS)
    np.testing.assert_allclose(onnx_engine.embed(TEXTS), want, atol=1e-5, rtol=0)
    singles = np.concatenate([onnx_engine.embed([t]) for t in TEXTS])
    np.testing.assert_allclose(singles, want, atol=1e-5, rtol=0)
    ids = numpy_engine.tokenize(TEXTS, add_special_tokens=False)
    np.testing.assert_allclose(onnx_engine.embed_tokens(ids), want, atol=1e-5, rtol=0)
    assert onnx_engine.count_tokens(TEXTS) == numpy_engine.count_tokens(TEXTS)


def test_encoded_texts_embed_as_the_texts(engines: tuple[BertBackend, OnnxBertBackend]) -> None:
    """The server tokenizes a text once (SentenceEncoder.encode, untruncated, to count it) and hands those
    ids to the model call (embed_encoded): the ids the call embeds are the truncating tokenizer's, cut
    inside the special tokens, and the vectors embed()'s, bit for bit."""
    for engine in engines:
        full = engine.encode(TEXTS)
        assert [len(s) for s in full] == engine.count_tokens(TEXTS)
        assert max(map(len, full)) > engine.max_tokens  # the long text: cut by embed_encoded
        seen: list[list[int]] = []
        original = engine._embed_sequences
        engine._embed_sequences = lambda seqs: seen.extend(seqs) or original(seqs)  # type: ignore[method-assign]
        try:
            got = engine.embed_encoded(full)
        finally:
            del engine._embed_sequences
        assert seen == engine.tokenize(TEXTS)
        np.testing.assert_array_equal(got, engine.embed(TEXTS))
        assert engine.encode([]) == [] and engine.embed_encoded([]).shape == (0, engine.dimensions)


def test_pipeline_settings_are_read(variant: tuple[str, Path], engines: tuple[BertBackend, OnnxBertBackend]) -> None:
    name, _ = variant
    model_type, _, _, pooling, normalize = VARIANTS[name]
    onnx_engine = engines[1]
    m = onnx_engine.model
    assert m.model_type == model_type
    assert m.pooling == (["cls"] if pooling and "pooling_mode_cls_token" in pooling else ["mean"])
    assert m.normalize == normalize
    norms = np.linalg.norm(onnx_engine.embed(TEXTS[:3]), axis=1)
    if normalize:
        np.testing.assert_allclose(norms, 1.0, atol=1e-6)
    else:
        assert np.all(np.abs(norms - 1.0) > 1e-3)
    assert onnx_engine.dimensions == 32 and onnx_engine.max_tokens == 40


def test_load_backend_picks_the_engine(variant: tuple[str, Path], tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    _, folder = variant
    monkeypatch.setenv("DENSEWIRE_CACHE_DIR", str(tmp_path))
    assert load_backend(str(folder)).engine == choose().engine  # what auto picks on this CPU
    onnx_engine = load_backend(str(folder), engine="onnx")
    assert isinstance(onnx_engine, OnnxBertBackend) and onnx_engine.execution_provider == "CPUExecutionProvider"
    assert isinstance(load_backend(str(folder), engine="numpy"), BertBackend)
    with pytest.raises(ValueError, match="engine must be one of auto, onnx, openvino, numpy"):
        load_backend(str(folder), engine="torch")
    with pytest.raises(ValueError, match="needs the onnx engine"):
        load_backend(str(folder), engine="numpy", quantize="int8")


def test_unsupported_models_are_refused_by_name(tmp_path: Path) -> None:
    folder = write_tiny_model(tmp_path / "m", "bert-mean-normalize")
    cfg = (folder / "config.json").read_text()
    (folder / "config.json").write_text(cfg.replace('"model_type": "bert"', '"model_type": "gpt2"'))
    with pytest.raises(ValueError, match="model_type 'gpt2' is not supported"):
        BertModel(folder)
    (folder / "config.json").write_text(cfg.replace('"hidden_act": "gelu"', '"hidden_act": "relu"'))
    with pytest.raises(ValueError, match="hidden_act 'relu'"):
        BertModel(folder)
    (folder / "config.json").write_text(cfg)
    (folder / "model.safetensors").rename(folder / "pytorch_model.bin")
    with pytest.raises(ModelNotFoundError, match="only pytorch_model.bin"):
        BertModel(folder)


def test_max_tokens_from_sentence_bert_config(tmp_path: Path) -> None:
    folder = write_tiny_model(tmp_path / "m", "roberta-mean", max_seq_length=12)
    b = OnnxBertBackend(folder, cache=tmp_path / "cache")
    assert b.max_tokens == 12
    assert len(b.tokenize([TEXTS[-1]])[0]) == 12
    with pytest.raises(ValueError, match=r"max_tokens must be in \(2, 40\]"):
        BertModel(folder, max_tokens=41)  # RoBERTa: 42 positions, 2 taken by the offset
