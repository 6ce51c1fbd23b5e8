"""A SPLADE checkpoint served: ``densewire serve --model FOLDER --pooling splade`` on the tiny
``BertForMaskedLM`` of ``tiny_splade`` (and a SparseEncoder folder without the flag). TEI's
``POST /embed_sparse`` and vLLM's ``POST /pooling`` (``task: embed``, as vLLM's SPLADE model answers it)
in their own shapes and densewire's sparse tensor by ``Accept``, compared with transformers' recorded
weights; the pooled routes refuse the model with a 400 naming it; a model without the head asked for
sparse output is a 400 naming it; the output limit is a 413 naming it."""

from __future__ import annotations

import base64
import json

import httpx
import numpy as np
import pytest

import densewire
from server_support import ServerProcess, metric_value
from test_splade import REFERENCE, TOLERANCE, _recorded
from tiny_bert import write_tiny_model
from tiny_splade import TEXTS, write_splade

VOCAB = 60
LIMIT = 2048  # --max-token-output-bytes: about 250 non-zeros


@pytest.fixture(scope="module")
def expected() -> np.ndarray:
    return _recorded(REFERENCE["layouts"]["hf"]["transformers"], VOCAB)


@pytest.fixture(scope="module", params=["hf", "sparse-encoder"])
def server(request, tmp_path_factory):
    folder = write_splade(tmp_path_factory.mktemp("splade") / request.param, request.param)
    flags = ["--pooling", "splade"] if request.param == "hf" else []
    with ServerProcess("--model", str(folder), *flags, "--engine", "onnx", "--precision", "fp32",
                       "--max-token-output-bytes", str(LIMIT)) as s:
        yield s


@pytest.fixture(scope="module")
def dense_server(tmp_path_factory):
    folder = write_tiny_model(tmp_path_factory.mktemp("dense") / "m", "bert-mean-normalize")
    with ServerProcess("--model", str(folder), "--engine", "onnx", "--precision", "fp32") as s:
        yield s


def _dense(doc: list[list[dict]]) -> np.ndarray:
    out = np.zeros((len(doc), VOCAB), np.float32)
    for row, items in zip(out, doc):
        for item in items:
            row[item["index"]] = item["value"]
    return out


def test_embed_sparse_matches_transformers(server, expected) -> None:
    r = httpx.post(server.url + "/embed_sparse", json={"inputs": TEXTS}, timeout=60)
    assert r.status_code == 200, r.text
    doc = r.json()
    for items, want in zip(doc, expected):
        assert [i["index"] for i in items] == np.flatnonzero(want > 0).tolist()  # ascending, the same entries
    assert np.abs(_dense(doc) - expected).max() < TOLERANCE


@pytest.mark.parametrize("fmt", ["raw", "msgpack", "protobuf", "arrow"])
def test_binary_formats(server, fmt) -> None:
    body = {"inputs": TEXTS}
    json_doc = httpx.post(server.url + "/embed_sparse", json=body, timeout=60).json()
    r = httpx.post(server.url + "/embed_sparse", json=body, headers={"Accept": densewire.MEDIA_TYPES[fmt]}, timeout=60)
    assert r.status_code == 200 and r.headers["content-type"] == densewire.MEDIA_TYPES[fmt]
    emb = densewire.decode(r.content, fmt, r.headers, kind="sparse")
    s = emb.tensor
    assert s.shape == (len(TEXTS), VOCAB) and emb.usage.prompt_tokens == sum(map(len, REFERENCE["layouts"]["hf"]["ids"]))
    assert np.array_equal(s.to_dense(), _dense(json_doc))  # JSON's shortest float32 text reads back bit for bit


def test_client(server, expected) -> None:
    with densewire.Client(server.url) as client:
        got = client.embed_sparse(TEXTS)
        top = client.embed_sparse(TEXTS, max_active_dims=2)
    assert got.vocab_size == VOCAB and np.abs(got.to_dense() - expected).max() < TOLERANCE
    assert top.nnz.tolist() == [min(2, k) for k in got.nnz.tolist()]


def test_pooled_routes_refuse_a_splade_model(server) -> None:
    r = httpx.post(server.url + "/v1/embeddings", json={"input": ["a cat"]}, timeout=60)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["param"] == "model" and "SPLADE" in err["message"] and "/embed_sparse" in err["message"]
    r = httpx.post(server.url + "/embed", json={"inputs": ["a cat"]}, timeout=60)
    assert r.status_code == 422 and "SPLADE" in r.json()["error"] and r.json()["error_type"] == "Validation"  # TEI's status
    health = httpx.get(server.url + "/health", timeout=10)
    assert health.status_code == 200
    info = httpx.get(server.url + "/info", timeout=10).json()
    assert info["model_type"] == {"embedding": {"pooling": "splade"}}  # TEI's Info of a SPLADE model


def test_vllm_pooling_embed(server, expected) -> None:
    """vLLM's SPLADE model answers task embed with the vocabulary-sized weights."""
    body = {"input": TEXTS, "task": "embed"}
    doc = httpx.post(server.url + "/pooling", json=body, timeout=60).json()
    assert doc["object"] == "list" and doc["id"].startswith("pool-")
    assert [d["index"] for d in doc["data"]] == list(range(len(TEXTS))) and {d["object"] for d in doc["data"]} == {"pooling"}
    got = np.array([d["data"] for d in doc["data"]], np.float32)
    assert got.shape == (len(TEXTS), VOCAB) and np.abs(got - expected).max() < TOLERANCE
    b64 = httpx.post(server.url + "/pooling", json={**body, "encoding_format": "base64", "embed_dtype": "float16"},
                     timeout=60).json()
    half = np.stack([np.frombuffer(base64.b64decode(d["data"]), "<f2") for d in b64["data"]])
    assert np.array_equal(half, got.astype(np.float16))
    raw = httpx.post(server.url + "/pooling", json={**body, "encoding_format": "bytes"}, timeout=60)
    meta = json.loads(raw.headers["metadata"])
    assert [m["shape"] for m in meta["data"]] == [[VOCAB]] * len(TEXTS) and len(raw.content) == 4 * VOCAB * len(TEXTS)
    assert np.array_equal(np.frombuffer(raw.content, "<f4").reshape(-1, VOCAB), got)
    packed = httpx.post(server.url + "/pooling", json=body, headers={"Accept": "application/vnd.msgpack"}, timeout=60)
    assert np.array_equal(densewire.decode(packed.content, "msgpack", kind="sparse").tensor.to_dense(), got)
    for bad, param in (({"normalize": True}, "normalize"), ({"dimensions": 8}, "dimensions"),
                       ({"max_active_dims": 0}, "max_active_dims")):
        r = httpx.post(server.url + "/pooling", json={**body, **bad}, timeout=60)
        assert r.status_code == 400 and r.json()["error"]["param"] == param, r.text
    tokens = httpx.post(server.url + "/pooling", json={"input": TEXTS[:1], "task": "token_embed"}, timeout=60)
    assert tokens.status_code == 200  # vLLM's SPLADE model serves token_embed too


def test_token_id_inputs(server, expected) -> None:
    """TEI's token-id inputs: AutoTokenizer's ids (special tokens included, taken as complete) give transformers'
    weights; without [CLS] and [SEP] they are added; an id outside the vocabulary is a 422 naming it."""
    ids = REFERENCE["layouts"]["hf"]["ids"]
    r = httpx.post(server.url + "/embed_sparse", json={"inputs": ids}, timeout=60)
    assert r.status_code == 200, r.text
    assert np.abs(_dense(r.json()) - expected).max() < TOLERANCE
    bare = httpx.post(server.url + "/embed_sparse", json={"inputs": [ids[0][1:-1]]}, timeout=60).json()
    assert [e["index"] for e in bare[0]] == [e["index"] for e in r.json()[0]]  # alone, not in a batch of 6:
    assert np.abs(_dense(bare) - _dense(r.json()[:1])).max() < TOLERANCE  # the same up to product rounding
    bad = httpx.post(server.url + "/embed_sparse", json={"inputs": [[2, 999, 3]]}, timeout=60)
    assert bad.status_code == 422 and "999" in bad.json()["error"] and "inputs[0]" in bad.json()["error"]


def test_output_limit(server) -> None:
    texts = [f"{t} {i}" for i in range(8) for t in TEXTS]  # about 48 x 8 non-zeros: over LIMIT
    r = httpx.post(server.url + "/embed_sparse", json={"inputs": texts}, timeout=60)
    assert r.status_code == 413 and "--max-token-output-bytes" in r.json()["error"] and str(LIMIT) in r.json()["error"]
    r = httpx.post(server.url + "/pooling", json={"input": texts, "task": "embed"}, timeout=60)
    assert r.status_code == 413 and r.json()["error"]["code"] == "payload_too_large"
    r = httpx.post(server.url + "/embed_sparse", json={"inputs": texts, "max_active_dims": 1}, timeout=60)
    assert r.status_code == 200 and all(len(v) == 1 for v in r.json())
    assert metric_value(server.metrics(), "densewire_requests_total", route="/embed_sparse", status="413",
                        format="json") >= 1


def test_truncation(server) -> None:
    long = " ".join(["cat"] * 60)  # 62 tokens, the model reads 40
    r = httpx.post(server.url + "/embed_sparse", json={"inputs": [long]}, timeout=60)
    assert r.status_code == 413 and "must have less than 40 tokens" in r.json()["error"]
    r = httpx.post(server.url + "/embed_sparse", json={"inputs": [long], "truncate": True}, timeout=60)
    assert r.status_code == 200 and r.headers["densewire-truncated"] == "1"
    left = httpx.post(server.url + "/embed_sparse", json={"inputs": [long], "truncate": True,
                                                          "truncation_direction": "Left"}, timeout=60)
    assert left.status_code == 200 and left.json() == r.json()  # the same word throughout: both ends alike


def test_a_model_without_the_head(dense_server) -> None:
    r = httpx.post(dense_server.url + "/embed_sparse", json={"inputs": ["a cat"]}, timeout=60)
    assert r.status_code == 400, r.text
    assert "no sparse head" in r.json()["error"] and "--pooling splade" in r.json()["error"]
    r = httpx.post(dense_server.url + "/pooling", json={"input": ["a cat"], "task": "embed"}, timeout=60)
    assert r.status_code == 400 and r.json()["error"]["param"] == "task"
    with densewire.Client(dense_server.url) as client, pytest.raises(densewire.APIError) as err:
        client.embed_sparse(["a cat"])
    assert err.value.status_code == 400 and "no sparse head" in err.value.message


def test_prewarm_fills_the_sparse_cache(tmp_path) -> None:
    folder = write_splade(tmp_path / "m", "hf")
    (tmp_path / "warm.txt").write_text("\n".join(TEXTS) + "\n")
    with ServerProcess("--model", str(folder), "--pooling", "splade", "--engine", "numpy",
                       "--prewarm", str(tmp_path / "warm.txt")) as s:
        before = metric_value(s.metrics(), "densewire_cache_hits_total", layer="memory")
        r = httpx.post(s.url + "/embed_sparse", json={"inputs": TEXTS}, timeout=60)
        assert r.status_code == 200
        assert metric_value(s.metrics(), "densewire_cache_hits_total", layer="memory") == before + len(TEXTS)
