"""schemathesis against /openapi.json: no 5xx, and responses that match the document."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from server_support import ServerProcess

KEY = "schemathesis-key"


@pytest.fixture(scope="module")
def server():
    with ServerProcess("--model", "hash:24", "--api-key", KEY, "--max-client-batch-size", "64",
                       "--max-body-bytes", "256K") as s:
        yield s


def test_document_shape(server) -> None:
    doc = httpx.get(server.url + "/openapi.json").json()
    assert doc["openapi"] == "3.0.3"
    assert doc["components"]["schemas"]["EmbeddingsRequest"]["additionalProperties"] is False
    assert set(doc["paths"]) == {"/v1/embeddings", "/v1/models", "/v1/models/{model_id}", "/v1/quantization/{id}",
                                 "/health", "/ready", "/metrics", "/openapi.json", "/v1/tables", "/v1/tables/{name}",
                                 "/demo/", "/", "/embed", "/embed_sparse", "/info", "/v2/embed", "/api/embed",
                                 "/api/embeddings", "/v2", "/v2/health/live", "/v2/health/ready",
                                 *(f"/v2/models/{{model_name}}{v}{r}" for v in ("", "/versions/{version}")
                                   for r in ("", "/ready", "/infer"))}  # no /tokenize: hash; /embed_sparse: hash answers sparse vectors


def test_document_lists_overload_and_readiness(server) -> None:
    """Issue 14: the 429 of bounded admission (with Retry-After) and the readiness route are documented,
    and /ready's answer has the documented fields."""
    doc = httpx.get(server.url + "/openapi.json").json()
    answers = doc["paths"]["/v1/embeddings"]["post"]["responses"]
    for status in ("429", "503"):
        assert answers[status]["headers"]["Retry-After"]["schema"]["type"] == "integer"
        assert answers[status]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/ErrorEnvelope"}
    assert "--max-concurrent-requests" in answers["429"]["description"]
    assert "draining" in answers["503"]["description"]
    ready = doc["paths"]["/ready"]["get"]
    assert ready["description"] and ready["security"] == []
    assert set(ready["responses"]) == {"200", "503"}
    for answer in ready["responses"].values():
        assert answer["description"]
    schema = ready["responses"]["200"]["content"]["application/json"]["schema"]
    got = httpx.get(server.url + "/ready")
    assert got.status_code == 200
    body = got.json()
    assert set(schema["required"]) <= set(body) <= set(schema["properties"])
    assert body["status"] in schema["properties"]["status"]["enum"]
    health = doc["paths"]["/health"]["get"]
    assert "liveness" in health["description"].lower() and "/ready" in health["description"]


def _schemathesis() -> list[str]:
    exe = Path(sys.executable).with_name("schemathesis")
    if exe.exists():
        return [str(exe)]
    found = shutil.which("schemathesis")
    assert found, "schemathesis is not installed (pip install schemathesis)"
    return [found]


def test_schemathesis_finds_nothing(server, tmp_path) -> None:
    config = Path(__file__).resolve().parent / "data" / "schemathesis.toml"
    cmd = [*_schemathesis(), "--config-file", str(config), "run", server.url + "/openapi.json",
           "--checks", "all", "--max-examples", "40", "--seed", "20261121", "--workers", "1",
           "--header", f"Authorization: Bearer {KEY}", "--request-timeout", "20",
           "--suppress-health-check", "filter_too_much"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp_path,
                          env={**os.environ, "NO_COLOR": "1", "SCHEMATHESIS_TELEMETRY": "false"})
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-8000:]
    assert "passed" in out
    assert "Traceback" not in server.log_text()
