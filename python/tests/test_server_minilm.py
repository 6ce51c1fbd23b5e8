"""The default model (all-MiniLM-L6-v2, numpy runtime) end to end through the server, compared with
the vectors sentence-transformers computed (tests/data/minilm-reference.json)."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import numpy as np
import openai
import pytest

import densewire
from densewire._backends import choose
from server_support import ServerProcess

REFERENCE = json.loads((Path(__file__).parent / "data" / "minilm-reference.json").read_text(encoding="utf-8"))
TEXTS = [item["text"] for item in REFERENCE["items"]]
EXPECTED = np.stack([np.frombuffer(bytes.fromhex(item["embedding_f32le_hex"]), dtype="<f4")
                     for item in REFERENCE["items"]])


@pytest.fixture(scope="module")
def server():
    with ServerProcess("--blas-threads", "1") as s:  # no --model: the default; 1 BLAS thread on a shared CI machine
        yield s


# the largest difference to sentence-transformers' float32 vectors each precision the default server may run
# allows (auto: bf16 on a CPU with bf16 units, measured 1.3e-3 there; fp32 elsewhere); the cosine bar is one
MAX_DIFFERENCE = {"fp32": 1e-4, "bf16": 4e-3}


@pytest.fixture(scope="module")
def precision(server) -> str:
    """The precision the default server reports: what auto decides on this CPU."""
    card = httpx.get(server.url + "/v1/models").json()["data"][0]
    assert card["precision"] == choose().precision
    return card["precision"]


def _check(got: np.ndarray, precision: str, expected: np.ndarray = EXPECTED) -> None:
    assert got.shape == expected.shape
    cos = np.einsum("ij,ij->i", got.astype(np.float64), expected) / (
        np.linalg.norm(got, axis=1) * np.linalg.norm(expected, axis=1))
    assert cos.min() >= 0.9999, cos
    assert np.abs(got - expected).max() <= MAX_DIFFERENCE[precision]


def test_models_endpoint(server) -> None:
    card = httpx.get(server.url + "/v1/models").json()["data"][0]
    assert card["id"] == REFERENCE["model"]
    assert card["dimensions"] == REFERENCE["dims"] == 384


def test_raw_matches_reference(server, precision) -> None:
    r = httpx.post(server.url + "/v1/embeddings", json={"input": TEXTS, "model": REFERENCE["model"], "truncate": True},
                   headers={"Accept": "application/octet-stream"}, timeout=120)
    assert r.status_code == 200, r.text
    emb = densewire.decode(r.content, "raw", r.headers)
    assert emb.model == REFERENCE["model"]
    assert emb.usage.prompt_tokens > len(TEXTS)
    _check(emb.tensor.array, precision)


def test_openai_sdk_matches_reference(server, precision) -> None:
    with openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0, timeout=120) as c:
        # the spec alias is accepted too; the reference's long text is cut at 256 tokens as sentence-transformers does
        resp = c.embeddings.create(model="minilm", input=TEXTS, extra_body={"truncate_prompt_tokens": -1})
        _check(np.array([d.embedding for d in resp.data], dtype=np.float32), precision)
        one = c.embeddings.create(model=REFERENCE["model"], input=TEXTS[0], encoding_format="float")
        _check(np.array([one.data[0].embedding], dtype=np.float32), precision, EXPECTED[:1])


def test_truncate_false_counts_real_tokens(server) -> None:
    long = "embeddings " * 400
    r = httpx.post(server.url + "/v1/embeddings", json={"input": ["ok", long], "truncate": False}, timeout=60)
    assert r.status_code == 400
    assert r.json()["error"]["param"] == "input[1]"
    assert "maximum context length is 256 tokens, however you requested 1602 tokens" in r.json()["error"]["message"]
    r = httpx.post(server.url + "/v1/embeddings", json={"input": ["ok", long]}, timeout=60)
    assert r.status_code == 400 and r.json()["error"]["param"] == "input[1]"  # no silent truncation
    r = httpx.post(server.url + "/v1/embeddings", json={"input": ["ok", long], "truncate_prompt_tokens": -1},
                   timeout=60)
    assert r.status_code == 200
    assert r.json()["usage"]["prompt_tokens"] == 3 + 256 and r.json()["truncated"] == [1]
    assert r.headers["Densewire-Truncated"] == "1"
