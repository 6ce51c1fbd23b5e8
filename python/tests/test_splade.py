"""SPLADE checkpoints on the built-in engines (``_backends/splade.py``): tiny ``BertForMaskedLM`` folders the
tests write in Hugging Face's layout and in sentence-transformers' SparseEncoder layout (``tiny_splade``),
loaded by ``load_backend`` and run on numpy, ONNX Runtime and OpenVINO, checked against a plain float64
forward pass written from the Hugging Face modelling code (``tiny_bert.naive_forward`` and the MLM head
below) and against the outputs transformers and sentence-transformers recorded on the same files
(``data/splade-reference.json``, ``data/make_splade_reference.py``)."""

from __future__ import annotations

import hashlib
import json
import math
import shutil
from pathlib import Path

import huggingface_hub.constants  # noqa: F401 (read the real environment at collection: test_backends_hub says why)
import numpy as np
import pytest

from densewire import InvalidFieldError
from densewire._backends.registry import load_backend
from densewire._backends.splade import SpladeBackend
from densewire._server.config import ServerConfig, validate
from tiny_bert import naive_forward, write_tiny_model
from tiny_splade import TEXTS, write_splade

ENGINES = ("numpy", "onnx", "openvino")
#: float32 engines against the float64 reference: the weights reach about 3, float32 keeps 7 digits
TOLERANCE = 2e-5


def naive_splade(folder: Path, ids: list[list[int]], strategy: str = "max") -> np.ndarray:
    """SPLADE weights of token-id sequences the plain way: per sequence, the encoder in float64, the MLM
    head (dense, erf GELU, LayerNorm, decoder tied to the word embeddings unless the file has its own),
    ``log(1 + relu(.))`` of every token's logits, then max (or sum) over the tokens."""
    from safetensors.numpy import load_file

    w = {k: v.astype(np.float64) for k, v in load_file(str(folder / "model.safetensors")).items()}
    decoder = w.get("cls.predictions.decoder.weight", w["bert.embeddings.word_embeddings.weight"])
    out = []
    for seq in ids:
        x = naive_forward(folder, seq) @ w["cls.predictions.transform.dense.weight"].T
        x = x + w["cls.predictions.transform.dense.bias"]
        x = x * 0.5 * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))
        mu, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
        x = (x - mu) / np.sqrt(var + 1e-12) * w["cls.predictions.transform.LayerNorm.weight"]
        x = x + w["cls.predictions.transform.LayerNorm.bias"]
        act = np.log1p(np.maximum(x @ decoder.T + w["cls.predictions.bias"], 0))
        out.append(act.max(0) if strategy == "max" else act.sum(0))
    return np.array(out)


def _ids(backend: SpladeBackend, texts: list[str]) -> list[list[int]]:
    return [e.ids for e in backend.encoder._tok.encode_batch(texts)]


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("splade")
    return {"hf": write_splade(root / "hf", "hf"), "sparse-encoder": write_splade(root / "st", "sparse-encoder"),
            "untied": write_splade(root / "untied", "hf", untied=True),
            "sum": write_splade(root / "sum", "sparse-encoder", pooling_strategy="sum")}


def _load(folder: Path, engine: str, **kw) -> SpladeBackend:
    return load_backend(str(folder), engine=engine, precision="fp32", **kw)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("layout", ["hf", "sparse-encoder"])
def test_engines_match_the_plain_forward(folders, layout, engine) -> None:
    """A Hugging Face folder with --pooling splade, a SparseEncoder folder by itself: the same weights."""
    backend = _load(folders[layout], engine, pooling="splade" if layout == "hf" else None)
    assert isinstance(backend, SpladeBackend) and backend.engine == engine
    assert backend.sparse_vocab_size == backend.dimensions == 60 and not backend.pooled
    got = backend.sparse_weights(TEXTS)
    want = naive_splade(folders[layout], _ids(backend, TEXTS))
    assert np.abs(got - want).max() < TOLERANCE
    assert ((got > 0) == (want > 1e-6)).mean() > 0.99  # the same entries are non-zero
    assert 0 < (got > 0).sum() < got.size / 2  # sparse: most of the vocabulary is zero


def test_embed_sparse_is_the_weights_sparsified(folders) -> None:
    backend = _load(folders["hf"], "onnx", pooling="splade")
    dense = backend.sparse_weights(TEXTS)
    indices, values, nnz = backend.embed_sparse(TEXTS)
    assert indices.dtype == np.uint32 and values.dtype == np.float32 and nnz.tolist() == (dense > 0).sum(1).tolist()
    at = 0
    for row, k in zip(dense, nnz):
        assert indices[at:at + k].tolist() == np.flatnonzero(row).tolist()  # strictly ascending
        assert np.array_equal(values[at:at + k], row[row > 0])
        at += k


@pytest.mark.parametrize("block_rows", [1, 3, 7])
def test_head_blocks_give_the_same_weights(folders, block_rows) -> None:
    """Logits computed a few token rows at a time (sequences split across blocks) pool to the same weights."""
    whole = _load(folders["hf"], "numpy", pooling="splade").sparse_weights(TEXTS)
    backend = SpladeBackend(load_backend(str(folders["hf"]), engine="numpy", precision="fp32"), block_rows=block_rows)
    got = backend.sparse_weights(TEXTS)  # the same up to the rounding of other product shapes
    assert np.array_equal(got > 0, whole > 0) and np.abs(got - whole).max() < 1e-5


def test_untied_decoder_and_sum_pooling(folders) -> None:
    untied = _load(folders["untied"], "onnx", pooling="splade")
    assert np.abs(untied.sparse_weights(TEXTS) - naive_splade(folders["untied"], _ids(untied, TEXTS))).max() < TOLERANCE
    summed = _load(folders["sum"], "onnx")
    assert summed.pooling_strategy == "sum"
    want = naive_splade(folders["sum"], _ids(summed, TEXTS), "sum")
    assert np.abs(summed.sparse_weights(TEXTS) - want).max() < TOLERANCE * 10


def test_a_model_without_the_head_is_refused(tmp_path) -> None:
    folder = write_tiny_model(tmp_path / "dense", "bert-bare-hf")
    with pytest.raises(ValueError, match="no masked-language-model head"):
        load_backend(str(folder), engine="numpy", pooling="splade")


def test_pooled_vectors_are_refused(folders) -> None:
    backend = _load(folders["hf"], "numpy", pooling="splade")
    with pytest.raises(InvalidFieldError, match="SPLADE") as err:
        backend.embed(["a cat"])
    assert err.value.field == "model"


def test_pooling_flag_overrides_a_dense_model(tmp_path) -> None:
    folder = write_tiny_model(tmp_path / "dense", "bert-mean-normalize")
    mean = load_backend(str(folder), engine="numpy").embed(["a cat"])
    cls = load_backend(str(folder), engine="numpy", pooling="cls")
    assert cls.model.pooling == ["cls"] and not np.allclose(cls.embed(["a cat"]), mean)
    with pytest.raises(ValueError, match="pooling"):
        load_backend("hash:8", pooling="splade")


REFERENCE = json.loads((Path(__file__).parent / "data" / "splade-reference.json").read_text("utf-8"))


def _recorded(items: list[dict], vocab: int) -> np.ndarray:
    out = np.zeros((len(items), vocab), np.float32)
    for row, item in zip(out, items):
        row[item["indices"]] = np.frombuffer(bytes.fromhex(item["values_f32le_hex"]), "<f4")
    return out


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("layout", ["hf", "sparse-encoder"])
def test_matches_transformers_and_sentence_transformers(folders, layout, engine) -> None:
    """The recorded outputs of BertForMaskedLM (and SparseEncoder.encode) on the same files: the files are
    byte for byte those the reference ran on, the token ids AutoTokenizer's, the weights within float32 noise
    and non-zero at the same entries."""
    ref = REFERENCE["layouts"][layout]
    folder = folders[layout]
    assert hashlib.sha256((folder / "model.safetensors").read_bytes()).hexdigest() == ref["weights_sha256"]
    backend = _load(folder, engine, pooling="splade" if layout == "hf" else None)
    assert _ids(backend, TEXTS) == ref["ids"]
    got = backend.sparse_weights(TEXTS)
    for source in ("transformers", "sentence_transformers"):
        if source not in ref:
            continue
        want = _recorded(ref[source], backend.sparse_vocab_size)
        assert np.abs(got - want).max() < TOLERANCE, source
        assert np.array_equal(got > 1e-5, want > 1e-5), source
        indices, _, nnz = backend.embed_sparse(TEXTS)
        assert nnz.sum() == sum(len(item["indices"]) for item in ref[source])


def test_sparse_encoder_layout_is_what_sentence_transformers_saves(folders) -> None:
    saved = REFERENCE["sparse_encoder_saved_layout"]
    ours = json.loads((folders["sparse-encoder"] / "modules.json").read_text())
    assert [{k: m[k] for k in ("path", "type")} for m in ours] == saved["modules"]
    pooling = json.loads((folders["sparse-encoder"] / "1_SpladePooling" / "config.json").read_text())
    assert set(pooling) == set(saved["pooling_config"])
    assert {k: pooling[k] for k in ("pooling_strategy", "activation_function")} == \
        {k: saved["pooling_config"][k] for k in ("pooling_strategy", "activation_function")}
    for name in saved["files"]:
        if name != "README.md":
            assert (folders["sparse-encoder"] / name).is_file(), name


def test_a_folder_with_vocab_txt_only(folders, tmp_path) -> None:
    """Older BERT repositories (naver/splade-*) ship vocab.txt and tokenizer_config.json, no tokenizer.json:
    the WordPiece tokenizer built from them gives AutoTokenizer's ids, so the same weights."""
    folder = tmp_path / "vocab-only"
    shutil.copytree(folders["hf"], folder)
    (folder / "tokenizer.json").unlink()
    backend = _load(folder, "numpy", pooling="splade")
    assert _ids(backend, TEXTS) == REFERENCE["layouts"]["hf"]["ids"]
    assert _ids(backend, ["The [MASK] is BLUE"]) == [[2, 5, 4, 11, 34, 3]]  # special tokens whole, lower-cased
    want = _recorded(REFERENCE["layouts"]["hf"]["transformers"], backend.sparse_vocab_size)
    assert np.abs(backend.sparse_weights(TEXTS) - want).max() < TOLERANCE


@pytest.mark.parametrize("changes, word", [
    ({"pooling": "weighted"}, "--pooling must be splade"),
    ({"pooling": "splade", "model": "hash:8"}, "--pooling applies only to BERT-family models"),
])
def test_server_refuses_a_pooling_flag_that_cannot_apply(changes, word) -> None:
    with pytest.raises(ValueError, match=word):
        validate(ServerConfig(**changes))


@pytest.mark.parametrize("engine", ["numpy", "onnx"])
def test_left_truncation_keeps_the_last_tokens(folders, engine) -> None:
    """TEI's truncation_direction Left: a text over the model's 40 tokens keeps its last 38 inside [CLS] and [SEP]."""
    backend = _load(folders["hf"], engine, pooling="splade")
    long = " ".join(["the cat", "a dog", "blue river"] * 12)  # 72 tokens
    ids = backend.encoder.split_tokens([long])[0]
    cls, sep = _ids(backend, ["x"])[0][0], _ids(backend, ["x"])[0][-1]
    want_left = naive_splade(folders["hf"], [[cls, *ids[-38:], sep]])
    want_right = naive_splade(folders["hf"], [[cls, *ids[:38], sep]])
    assert np.abs(backend.sparse_weights([long], side="left") - want_left).max() < TOLERANCE
    assert np.abs(backend.sparse_weights([long]) - want_right).max() < TOLERANCE
    assert not np.allclose(want_left, want_right)


def test_a_hub_id_with_pooling_splade(folders, tmp_path, monkeypatch) -> None:
    """A Hub id in the local Hugging Face cache, laid out as naver/splade-* are (vocab.txt, no tokenizer.json):
    ``--model ID --pooling splade`` loads it unchanged."""
    cache = tmp_path / "hf" / "hub"
    repo = cache / "models--naver--splade-tiny"
    snapshot = repo / "snapshots" / ("ab" * 20)
    shutil.copytree(folders["hf"], snapshot)
    (snapshot / "tokenizer.json").unlink()
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text("ab" * 20)
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("DENSEWIRE_CACHE_DIR", str(tmp_path / "densewire"))
    backend = load_backend("naver/splade-tiny", engine="onnx", precision="fp32", pooling="splade")
    assert isinstance(backend, SpladeBackend) and backend.name == "naver/splade-tiny"
    want = _recorded(REFERENCE["layouts"]["hf"]["transformers"], backend.sparse_vocab_size)
    assert np.abs(backend.sparse_weights(TEXTS) - want).max() < TOLERANCE
