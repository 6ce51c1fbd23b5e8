"""Per-token output of the default model (all-MiniLM-L6-v2) through ``densewire serve``: TEI's
``POST /embed_all`` and vLLM's ``POST /pooling`` (``task: token_embed``) in their own JSON shapes and
densewire's ragged formats by ``Accept`` (SPEC.md 19), checked against the numpy reference engine's
token states and, mean-pooled, against sentence-transformers' recorded vectors; the limit on per-token
output, truncation, the cache and the errors of each route."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import httpx
import numpy as np
import pytest

import densewire
from densewire._backends import BUILTIN_MODEL_NAME, BertBackend, default_model_path
from server_support import ServerProcess, metric_value

REFERENCE = json.loads((Path(__file__).parent / "data" / "minilm-reference.json").read_text(encoding="utf-8"))
TEXTS = [item["text"] for item in REFERENCE["items"]][:5]
EXPECTED = np.stack([np.frombuffer(bytes.fromhex(item["embedding_f32le_hex"]), dtype="<f4")
                     for item in REFERENCE["items"]])[:5]
#: largest difference to the fp32 numpy engine's token states the server's precision allows (bf16 on a CPU
#: with bf16 units, fp32 elsewhere: test_server_minilm's bars, per token)
MAX_DIFFERENCE = {"fp32": 1e-4, "bf16": 3e-2}
LIMIT = 1 << 20  # --max-token-output-bytes: 682 tokens of 384 floats


@pytest.fixture(scope="module")
def server():
    with ServerProcess("--blas-threads", "1", "--max-token-output-bytes", str(LIMIT)) as s:
        yield s


@pytest.fixture(scope="module")
def precision(server) -> str:
    return httpx.get(server.url + "/v1/models").json()["data"][0]["precision"]


@pytest.fixture(scope="module")
def reference() -> densewire.RaggedTensor:
    """The numpy engine's token states of TEXTS, in fp32."""
    rows, lengths = BertBackend(default_model_path(), name=BUILTIN_MODEL_NAME).embed_token_states(TEXTS)
    return densewire.RaggedTensor.from_lengths(rows, lengths)


def _pooled(r: densewire.RaggedTensor) -> np.ndarray:
    means = np.stack([m.astype(np.float64).mean(axis=0) for m in r])
    return means / np.linalg.norm(means, axis=1, keepdims=True)


def _close(got: densewire.RaggedTensor, reference: densewire.RaggedTensor, precision: str) -> None:
    assert got.offsets.tolist() == reference.offsets.tolist()
    assert got.d == 384 and got.dtype == "float32"
    assert np.abs(got.values - reference.values).max() <= MAX_DIFFERENCE[precision]


def test_reference_engine_pools_to_sentence_transformers(reference) -> None:
    """The reference itself: its token states, mean-pooled and normalised as the model's config says, are
    sentence-transformers' sentence vectors (an independent computation, recorded)."""
    assert np.abs(_pooled(reference) - EXPECTED).max() < 1e-5


def test_embed_all_json_is_tei_shape(server, reference, precision) -> None:
    r = httpx.post(server.url + "/embed_all", json={"inputs": TEXTS}, timeout=120)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("application/json")
    doc = r.json()
    assert [len(m) for m in doc] == reference.lengths.tolist()  # one row per token, [CLS] and [SEP] included
    assert all(len(row) == 384 for m in doc for row in m)
    got = densewire.RaggedTensor.from_arrays([np.array(m, np.float32) for m in doc])
    _close(got, reference, precision)
    tokens = httpx.post(server.url + "/tokenize", json={"inputs": TEXTS}, timeout=60).json()
    assert [len(t) for t in tokens] == reference.lengths.tolist()


@pytest.mark.parametrize("fmt", ["raw", "msgpack", "protobuf", "arrow"])
def test_embed_all_binary_formats_are_ragged(server, reference, precision, fmt) -> None:
    accept = densewire.MEDIA_TYPES[fmt]
    r = httpx.post(server.url + "/embed_all", json={"inputs": TEXTS}, headers={"Accept": accept}, timeout=120)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == accept
    emb = densewire.decode(r.content, fmt, r.headers, kind="ragged")
    _close(emb.tensor, reference, precision)
    assert emb.model == REFERENCE["model"]
    assert emb.usage.prompt_tokens == int(reference.lengths.sum())
    assert np.abs(_pooled(emb.tensor) - EXPECTED).max() <= MAX_DIFFERENCE[precision]
    if fmt == "raw":  # the bytes beat the JSON of the same numbers
        json_size = len(httpx.post(server.url + "/embed_all", json={"inputs": TEXTS}, timeout=120).content)
        assert len(r.content) < json_size * 0.5


def test_pooling_token_embed_in_vllm_shapes(server, reference, precision) -> None:
    body = {"model": REFERENCE["model"], "input": TEXTS, "task": "token_embed"}
    doc = httpx.post(server.url + "/pooling", json=body, timeout=120).json()
    assert doc["id"].startswith("pool-") and doc["object"] == "list" and doc["model"] == REFERENCE["model"]
    assert [d["index"] for d in doc["data"]] == list(range(len(TEXTS)))
    assert {d["object"] for d in doc["data"]} == {"pooling"}
    assert doc["usage"]["prompt_tokens"] == int(reference.lengths.sum()) and doc["usage"]["completion_tokens"] == 0
    floats = densewire.RaggedTensor.from_arrays([np.array(d["data"], np.float32) for d in doc["data"]])
    _close(floats, reference, precision)
    b64 = httpx.post(server.url + "/pooling", json={**body, "encoding_format": "base64"}, timeout=120).json()
    mats = [np.frombuffer(base64.b64decode(d["data"]), "<f4").reshape(-1, 384) for d in b64["data"]]
    assert np.array_equal(densewire.RaggedTensor.from_arrays(mats).values, floats.values)
    raw = httpx.post(server.url + "/pooling", json={**body, "encoding_format": "bytes", "embed_dtype": "float16"},
                     timeout=120)
    assert raw.headers["content-type"] == "application/octet-stream"
    meta = json.loads(raw.headers["metadata"])
    assert [m["shape"] for m in meta["data"]] == [[int(n), 384] for n in reference.lengths]
    last = meta["data"][-1]
    assert last["end"] == len(raw.content) and last["embed_dtype"] == "float16"
    first = meta["data"][0]
    half = np.frombuffer(raw.content[first["start"]:first["end"]], "<f2").reshape(first["shape"])
    assert np.array_equal(half, floats[0].astype(np.float16))
    only = httpx.post(server.url + "/pooling", json={**body, "encoding_format": "bytes_only", "embed_dtype": "float16"},
                      timeout=120)
    assert only.content == raw.content and "metadata" not in only.headers
    ragged = httpx.post(server.url + "/pooling", json=body, headers={"Accept": "application/msgpack"}, timeout=120)
    assert np.array_equal(densewire.decode(ragged.content, "msgpack", kind="ragged").tensor.values, floats.values)


def test_per_token_output_is_bounded(server) -> None:
    """Past --max-token-output-bytes the answer is a 413 naming the limit, before the model runs."""
    texts = ["word " * 300] * 10  # 10 x 256 tokens x 384 floats x 4 bytes: about 3.9 MB
    r = httpx.post(server.url + "/embed_all", json={"inputs": texts, "truncate": True}, timeout=60)
    assert r.status_code == 413, r.text
    assert "--max-token-output-bytes" in r.json()["error"] and str(LIMIT) in r.json()["error"]
    r = httpx.post(server.url + "/pooling", json={"input": texts, "task": "token_embed", "truncate_prompt_tokens": -1},
                   timeout=60)
    assert r.status_code == 413 and r.json()["error"]["code"] == "payload_too_large"
    assert "--max-token-output-bytes" in r.json()["error"]["message"]


def test_truncation_rules(server) -> None:
    long = "word " * 300
    r = httpx.post(server.url + "/embed_all", json={"inputs": [long]}, timeout=60)
    assert r.status_code == 413 and r.json()["error_type"] == "Validation"
    assert "must have less than 256 tokens" in r.json()["error"]
    r = httpx.post(server.url + "/embed_all", json={"inputs": [long, "short"], "truncate": True}, timeout=60)
    assert r.status_code == 200 and r.headers["densewire-truncated"] == "1"
    assert [len(m) for m in r.json()] == [256, 3]
    r = httpx.post(server.url + "/pooling", json={"input": long, "task": "token_embed"}, timeout=60)
    assert r.status_code == 400 and r.json()["error"]["param"] == "input[0]"


def test_cached_by_output_kind(server) -> None:
    text = "a sentence cached as token states"
    before = metric_value(server.metrics(), "densewire_cache_hits_total", layer="memory")
    first = httpx.post(server.url + "/embed_all", json={"inputs": [text]}, timeout=60).json()
    vector = httpx.post(server.url + "/embed", json={"inputs": [text]}, timeout=60).json()  # another kind: no hit
    assert metric_value(server.metrics(), "densewire_cache_hits_total", layer="memory") == before
    again = httpx.post(server.url + "/embed_all", json={"inputs": [text]}, timeout=60).json()
    assert again == first and len(vector[0]) == 384 and len(first[0]) == 9
    assert metric_value(server.metrics(), "densewire_cache_hits_total", layer="memory") == before + 1


@pytest.mark.parametrize("body, param", [
    ({"input": "x", "task": "embed"}, "task"),
    ({"input": "x"}, "task"),
    ({"input": "x", "task": "token_embed", "encoding_format": "npy"}, "encoding_format"),
    ({"input": "x", "task": "token_embed", "normalize": False}, "normalize"),
    ({"input": [], "task": "token_embed"}, "input"),
    ({"input": "x", "task": "token_embed", "model": "text-embedding-3-small"}, "model"),
    ({"input": "x", "task": "token_embed", "colour": 1}, "colour"),
])
def test_pooling_errors(server, body, param) -> None:
    r = httpx.post(server.url + "/pooling", json=body, timeout=60)
    assert r.status_code in (400, 404), r.text
    assert r.json()["error"]["param"] == param


def test_embed_all_errors(server) -> None:
    r = httpx.post(server.url + "/embed_all", json={"inputs": []}, timeout=60)
    assert r.status_code == 400 and r.json()["error_type"] == "Empty"
    r = httpx.post(server.url + "/embed_all", json={"inputs": [[101, 102]]}, timeout=60)
    assert r.status_code == 422 and "token-id" in r.json()["error"]
    r = httpx.post(server.url + "/embed_all", content=b"{", headers={"Content-Type": "application/json"}, timeout=60)
    assert r.status_code == 400


@pytest.mark.parametrize("accept", [densewire.DEFAULT_ACCEPT, "application/vnd.apache.arrow.stream",
                                    "application/json"])
def test_client_embed_tokens(server, reference, precision, accept) -> None:
    """The Python client asks /embed_all for the ragged binary form (or reads TEI's JSON) and returns a
    RaggedTensor whose matrices are views of one buffer; MaxSim scores with it as ColBERT does."""
    with densewire.Client(server.url, accept=accept) as client:
        got = client.embed_tokens(TEXTS)
    assert isinstance(got, densewire.RaggedTensor)
    _close(got, reference, precision)
    assert np.shares_memory(got[1], got.values)
    query = got[0] / np.linalg.norm(got[0], axis=1, keepdims=True)
    docs = densewire.RaggedTensor.from_arrays([m / np.linalg.norm(m, axis=1, keepdims=True) for m in got])
    scores = densewire.maxsim(query, docs)
    assert int(np.argmax(scores)) == 0 and abs(scores[0] - len(query)) < 1e-3  # each token finds itself
