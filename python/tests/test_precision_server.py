"""`densewire serve` with no flags states its engine, precision and the CPU features that decided them, in
/v1/models, /health, GET / and the start-up log; a precision the CPU cannot run is a start-up error
(issue 26). Runs the real server process."""

from __future__ import annotations

import subprocess
import sys

import httpx
import numpy as np
import pytest

from densewire._backends import cpu_features, cpu_flags, native_precision
from densewire._server.config import ServerConfig, config_from_env, validate
from server_support import SRC, ServerProcess

FEATURES = list(cpu_features(cpu_flags()))
BF16_CPU = native_precision(cpu_flags()) == "bf16"
ENGINE, PRECISION = ("openvino", "bf16") if BF16_CPU else ("onnx", "fp32")


@pytest.fixture(scope="module")
def server():
    with ServerProcess() as s:  # no flags: --engine auto --precision auto
        yield s


def test_models_and_health_state_engine_precision_and_features(server) -> None:
    card = httpx.get(server.url + "/v1/models").json()["data"][0]
    assert (card["engine"], card["precision"], card["cpu_features"]) == (ENGINE, PRECISION, FEATURES)
    health = httpx.get(server.url + "/health").json()
    assert (health["engine"], health["precision"], health["cpu_features"]) == (ENGINE, PRECISION, FEATURES)
    vectors = httpx.post(server.url + "/v1/embeddings", json={"input": ["hello", "world"]}).json()["data"]
    assert len(vectors) == 2 and abs(np.linalg.norm(vectors[0]["embedding"]) - 1) < 1e-3


def test_home_page_and_log_state_them(server) -> None:
    page = httpx.get(server.url + "/").text
    assert f"run by {ENGINE} in precision {PRECISION} (CPU features: {', '.join(FEATURES)})" in page
    log = server.log_text()
    assert f"  engine   {ENGINE}\n" in log
    assert f"precision {PRECISION} (CPU features: {', '.join(FEATURES)}): " in log
    assert f"engine {ENGINE}, precision {PRECISION}: " in log  # the line logged when the model loads


def test_explicit_engine_and_precision_are_reported() -> None:
    s = ServerProcess("--engine", "openvino", "--precision", "fp32", "--blas-threads", "1")
    try:  # a first start embeds the 1,000 calibration texts on this engine (quantization.py): slow on a busy host
        s.start(timeout=600)
        card = httpx.get(s.url + "/v1/models").json()["data"][0]
        assert (card["engine"], card["precision"], card["cpu_features"]) == ("openvino", "fp32", FEATURES)
        assert card["execution_provider"].startswith("CPU (")
    finally:
        s.stop()
    with ServerProcess("--model", "hash:8") as s:  # no model run here: no precision, the CPU's features still
        card = httpx.get(s.url + "/v1/models").json()["data"][0]
        assert (card["precision"], card["cpu_features"]) == (None, FEATURES)


def _serve(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "densewire.server", "--port", "0", *args], capture_output=True,
                          text=True, timeout=120, env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"})


def test_a_precision_the_cpu_cannot_run_is_a_start_up_error() -> None:
    if BF16_CPU:  # bf16 runs here: ask an engine without it
        done = _serve("--precision", "bf16", "--engine", "onnx")
        assert done.returncode == 2 and "--precision bf16 needs --engine openvino" in done.stderr
    else:
        done = _serve("--precision", "bf16")
        assert done.returncode == 2
        assert "--precision bf16: this CPU has neither amx_bf16 nor avx512_bf16" in done.stderr
    done = _serve("--precision", "fp32", "--quantize", "int8")
    assert done.returncode == 2 and "--quantize int8 is the older name of --precision int8" in done.stderr
    done = _serve("--precision", "fp16")
    assert done.returncode == 2 and "invalid choice: 'fp16'" in done.stderr


def test_precision_setting_and_variable() -> None:
    assert ServerConfig().precision == "auto" and ServerConfig().engine is None
    assert config_from_env({"DENSEWIRE_PRECISION": "int8"}).precision == "int8"
    validate(config_from_env({"DENSEWIRE_PRECISION": "int8", "DENSEWIRE_QUANTIZE": "int8"}))  # the same
    with pytest.raises(ValueError, match="apply only to BERT-family models"):
        validate(ServerConfig(model="hash:8", precision="fp32"))
    with pytest.raises(ValueError, match="--precision must be auto, fp32, bf16 or int8"):
        validate(ServerConfig(precision="half"))
