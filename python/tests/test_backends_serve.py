"""The engine behind `densewire serve`: --engine, --quantize, and what /v1/models and /health report."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import httpx
import numpy as np
import pytest
from server_support import ServerProcess
from tiny_bert import write_tiny_model

import densewire
from densewire._backends import choose


def _provider_matches(engine: str, provider: str | None) -> bool:
    if engine == "openvino":
        return provider is not None and re.fullmatch(r"CPU \(.+\)", provider) is not None  # OpenVINO's device name
    return provider == {"onnx": "CPUExecutionProvider", "numpy": None}[engine]


@pytest.mark.parametrize("flags", [(), ("--engine", "onnx"), ("--engine", "numpy")])
def test_models_and_health_name_the_engine(flags: tuple[str, ...], tmp_path: Path) -> None:
    engine = flags[1] if flags else choose().engine  # no flag: what auto picks on this CPU
    folder = write_tiny_model(tmp_path / "tiny", "roberta-mean")
    with ServerProcess("--model", str(folder), "--blas-threads", "1", *flags,
                       env={"DENSEWIRE_CACHE_DIR": str(tmp_path / "cache")}) as s:
        card = httpx.get(s.url + "/v1/models").json()["data"][0]
        assert card["engine"] == engine and _provider_matches(engine, card["execution_provider"]), card
        health = httpx.get(s.url + "/health").json()
        assert health["engine"] == engine and health["execution_provider"] == card["execution_provider"], health
        r = httpx.post(s.url + "/v1/embeddings", json={"input": ["the cat", "a dog"], "model": "tiny"},
                       headers={"Accept": "application/octet-stream"})
        assert r.status_code == 200, r.text
        assert densewire.decode(r.content, "raw", r.headers).tensor.array.shape == (2, 32)
    if engine != "numpy":  # the graph (ONNX) or the IR (OpenVINO) went to DENSEWIRE_CACHE_DIR
        assert list((tmp_path / "cache" / engine).iterdir())


def test_int8_server(tmp_path: Path) -> None:
    folder = write_tiny_model(tmp_path / "tiny", "bert-mean-normalize")
    with ServerProcess("--model", str(folder), "--quantize", "int8", "--blas-threads", "1",
                       env={"DENSEWIRE_CACHE_DIR": str(tmp_path / "cache")}) as s:
        r = httpx.post(s.url + "/v1/embeddings", json={"input": ["the cat"], "model": "tiny"},
                       headers={"Accept": "application/octet-stream"})
        got = densewire.decode(r.content, "raw", r.headers).tensor.array
    assert list((tmp_path / "cache" / "onnx").glob("*-int8-*.onnx"))
    assert abs(float(np.linalg.norm(got)) - 1.0) < 1e-5


def test_bad_engine_and_quantize_values_are_refused() -> None:
    for flags in (("--engine", "torch"), ("--quantize", "int4")):
        r = subprocess.run([sys.executable, "-m", "densewire", "serve", *flags], capture_output=True, text=True,
                           timeout=120)
        assert r.returncode == 2 and "invalid choice" in r.stderr and flags[1] in r.stderr


def test_help_documents_engine_quantize_and_threads() -> None:
    out = subprocess.run([sys.executable, "-m", "densewire", "serve", "--help"], capture_output=True, text=True,
                         timeout=120).stdout
    flat = " ".join(out.split())
    assert "--engine ENGINE" in out and "--quantize MODE" in out
    assert "ONNX Runtime's intra_op_num_threads" in flat and "where onnxruntime has no wheel" in flat
    assert "BAAI/bge-small-en-v1.5" in flat
