"""load_backend: spec strings, options, and clear errors for bad ones."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Iterator

import numpy as np
import pytest

from densewire._backends import (
    BUILTIN_MODEL_NAME,
    Backend,
    BertBackend,
    HashBackend,
    SentenceTransformerBackend,
    UpstreamBackend,
    choose,
    default_model_path,
    load_backend,
)


@pytest.fixture(scope="module", autouse=True)
def one_blas_thread() -> Iterator[None]:
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # without it the tests still run, only slower on a busy machine
        yield
        return
    with threadpool_limits(limits=1, user_api="blas"):
        yield


@pytest.mark.parametrize("spec", ["minilm", "MiniLM", "default", "", " minilm ", BUILTIN_MODEL_NAME])
def test_builtin_model_specs(spec: str) -> None:
    b = load_backend(spec)
    assert b.engine == choose().engine and isinstance(b, Backend)  # the engine auto picks on this CPU
    assert b.name == BUILTIN_MODEL_NAME and b.dimensions == 384 and b.max_tokens == 256


def test_default_spec_and_options() -> None:
    b = load_backend(max_tokens=128, name="mini", batch_size=8)
    assert b.engine == choose().engine
    assert (b.name, b.max_tokens) == ("mini", 128)
    b = load_backend(max_tokens=128, name="mini", batch_size=8, engine="numpy")
    assert isinstance(b, BertBackend)
    assert (b.name, b.max_tokens) == ("mini", 128)


@pytest.mark.parametrize("engine", ["onnx", "numpy"])
def test_blas_threads_option(engine: str) -> None:
    b = load_backend("minilm", blas_threads=1, engine=engine)
    assert b.embed(["x"]).shape == (1, 384)
    with pytest.raises(ValueError, match="blas_threads"):
        load_backend("minilm", blas_threads=0, engine=engine)


def test_path_spec_loads_the_folder() -> None:
    path = default_model_path()
    b = load_backend(str(path))
    assert b.engine == choose().engine and b.dimensions == 384
    ref = load_backend("minilm").embed(["same model"])
    np.testing.assert_allclose(b.embed(["same model"]), ref, atol=1e-6)


@pytest.mark.parametrize(("spec", "dim"), [("hash:1024", 1024), ("HASH:7", 7), ("hash: 16", 16)])
def test_hash_specs(spec: str, dim: int) -> None:
    b = load_backend(spec)
    assert isinstance(b, HashBackend)
    assert b.dimensions == dim and b.name == f"hash-{dim}"
    assert b.embed(["x"]).shape == (1, dim)


def test_hash_options() -> None:
    b = load_backend("hash:8", name="fake-model", max_tokens=10)
    assert (b.name, b.max_tokens) == ("fake-model", 10)


def test_upstream_spec() -> None:
    b = load_backend("upstream:http://127.0.0.1:9/v1", model="text-embedding-3-small", api_key="k", timeout=3)
    try:
        assert isinstance(b, UpstreamBackend)
        assert b.url == "http://127.0.0.1:9/v1/embeddings"
        assert b.name == "text-embedding-3-small"
    finally:
        b.close()


def test_sentence_transformers_spec_names_the_pip_command() -> None:
    # sentence-transformers (and torch) are not installed here; the backend must say how to get them
    assert importlib.util.find_spec("sentence_transformers") is None
    with pytest.raises(ImportError, match=r"pip install sentence-transformers"):
        load_backend("st:sentence-transformers/all-MiniLM-L6-v2")
    with pytest.raises(ImportError, match=r"pip install sentence-transformers"):
        SentenceTransformerBackend("all-MiniLM-L6-v2")


@pytest.mark.parametrize(
    ("spec", "options", "fragment"),
    [
        ("hash:", {}, "positive integer dimension"),
        ("hash:abc", {}, "positive integer dimension"),
        ("hash:0", {}, "dimensions must be in"),
        ("hash:-3", {}, "dimensions must be in"),
        ("hash:99999999", {}, "dimensions must be in"),
        ("st:", {}, "needs a model name"),
        ("upstream:", {"model": "m"}, "http"),
        ("upstream:ftp://host", {"model": "m"}, "http"),
        ("upstream:http://127.0.0.1:9", {}, "model option"),
        ("nonsense", {}, "neither a known name nor an existing folder"),
        ("onnx:model.onnx", {}, "unknown prefix 'onnx'"),
        ("./no/such/folder", {}, "no such model folder"),
        ("hash:8", {"colour": "blue"}, "unknown option"),
        ("minilm", {"dimensions": 3}, "unknown option"),
    ],
)
def test_bad_specs_explain_themselves(spec: str, options: dict, fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment) as info:
        load_backend(spec, **options)
    if "unknown option" in fragment:
        assert next(iter(options)) in str(info.value) and "accepted" in str(info.value)


def test_non_string_spec() -> None:
    with pytest.raises(ValueError, match="must be a string"):
        load_backend(1024)  # type: ignore[arg-type]


def test_file_instead_of_folder(tmp_path: Path) -> None:
    f = tmp_path / "model.bin"
    f.write_bytes(b"")
    with pytest.raises(ValueError, match="not a folder"):
        load_backend(str(f))


def test_folder_without_model_files(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="missing config.json, model.safetensors, tokenizer.json"):
        load_backend(str(tmp_path))
