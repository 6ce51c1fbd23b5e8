"""Hugging Face Hub ids: resolved from the local cache, or a clear error naming it."""

from __future__ import annotations

from pathlib import Path

# huggingface_hub reads HF_HUB_OFFLINE once, when it is first imported, and keeps it for the whole
# process. Imported here, at collection, it reads the real environment; imported first inside the
# `offline` fixture below it would stay offline for every later test of the run (the TEI client tests
# of test_server_dialects.py and test_readme.py then fail with OfflineModeIsEnabled).
import huggingface_hub.constants  # noqa: F401 (the package itself loads its modules lazily)
import numpy as np
import pytest
from tiny_bert import write_tiny_model

from densewire._backends import choose, load_backend, resolve_hub_model
from densewire._backends.bert_model import ModelNotFoundError
from densewire._backends.hub import hub_cache_dir, is_hub_id

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def fill_cache(cache: Path, repo_id: str, variant: str = "bert-mean-normalize") -> Path:
    """Lay a model out the way huggingface_hub's cache does: snapshots/<commit>/ and refs/main."""
    repo = cache / ("models--" + repo_id.replace("/", "--"))
    snapshot = write_tiny_model(repo / "snapshots" / COMMIT, variant)
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(COMMIT)
    return snapshot


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    cache = tmp_path / "hf" / "hub"
    cache.mkdir(parents=True)
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("DENSEWIRE_CACHE_DIR", str(tmp_path / "densewire"))
    return cache


def test_cached_model_is_served(offline: Path) -> None:
    snapshot = fill_cache(offline, "tiny-org/tiny-bert")
    assert resolve_hub_model("tiny-org/tiny-bert") == snapshot
    b = load_backend("tiny-org/tiny-bert")
    assert b.engine == choose().engine and b.name == "tiny-org/tiny-bert" and b.dimensions == 32
    ref = load_backend(str(snapshot), engine="numpy")
    atol = 1e-5 if b.precision == "fp32" else 2e-2  # bf16: 8 bits of mantissa in the products
    np.testing.assert_allclose(b.embed(["the cat", "a dog"]), ref.embed(["the cat", "a dog"]), atol=atol)


def test_revision_suffix(offline: Path) -> None:
    snapshot = fill_cache(offline, "tiny-org/tiny-bert")
    assert resolve_hub_model(f"tiny-org/tiny-bert@{COMMIT}") == snapshot


def test_offline_and_not_cached_names_the_cache_and_the_fix(offline: Path) -> None:
    with pytest.raises(ModelNotFoundError) as err:
        load_backend("BAAI/bge-small-en-v1.5")
    msg = str(err.value)
    assert str(offline) in msg and "offline" in msg
    assert "hf download BAAI/bge-small-en-v1.5" in msg and "HF_HUB_CACHE" in msg


def test_cached_repo_without_safetensors(offline: Path) -> None:
    snapshot = fill_cache(offline, "tiny-org/old-format")
    (snapshot / "model.safetensors").unlink()
    with pytest.raises(ModelNotFoundError, match="st:tiny-org/old-format"):
        resolve_hub_model("tiny-org/old-format")


def test_cache_dir_resolution(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert hub_cache_dir() == tmp_path / "huggingface" / "hub"
    monkeypatch.setenv("HF_HOME", str(tmp_path / "home"))
    assert hub_cache_dir() == tmp_path / "home" / "hub"


@pytest.mark.parametrize(("spec", "hub"), [
    ("BAAI/bge-small-en-v1.5", True), ("intfloat/e5-small-v2@main", True), ("org/name", True),
    ("./org/name", False), ("/abs/path", False), ("a/b/c", False), ("../x", False), ("minilm", False),
])
def test_hub_id_form(spec: str, hub: bool) -> None:
    assert is_hub_id(spec) is hub


def test_an_existing_folder_wins_over_a_hub_id(offline: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_tiny_model(tmp_path / "local" / "tiny", "bert-cls-raw")
    monkeypatch.chdir(tmp_path)
    b = load_backend("local/tiny")  # not in the Hub cache: the folder is served
    assert b.path == Path("local/tiny")
