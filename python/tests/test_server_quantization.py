"""The server's int8/uint8 answers (SPEC.md section 17) against the real app: calibration when the model
loads (and its cache), the published ranges at /v1/models and /v1/quantization/{id}, the id in every
format, ``dimensions: k``, the client's dequantize, and ``densewire inspect``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from starlette.testclient import TestClient

import densewire
from densewire import Quantization
from densewire._backends.bert import BertBackend
from densewire._backends.hash import HashBackend
from densewire._server.embedder import reduce_dimensions
from densewire._server.quantization import (CALIBRATION_FILE, CALIBRATION_SHA256, calibration_texts,
                                            calibration_vectors, encode_dtype, load_quantizer)
from densewire.server import ServerConfig, create_app
from server_support import ServerProcess
from tiny_bert import write_tiny_model

DIMS = 40
TEXTS = ["the cat sat on the mat", "quantized vectors travel light", "a third text", "and a fourth one"]
MEDIA = densewire.MEDIA_TYPES


@pytest.fixture(scope="module")
def client():
    with TestClient(create_app(ServerConfig(demo_tables=False), backend=HashBackend(DIMS))) as c:
        yield c


def _published(client) -> Quantization:
    card = client.get("/v1/models").json()["data"][0]
    return Quantization.from_json(card["quantization"])


def test_the_calibration_set_is_the_documented_one() -> None:
    texts = calibration_texts()
    assert len(texts) == 1000 and len(set(texts)) == 1000 and all(t.strip() == t and t for t in texts)
    assert CALIBRATION_FILE.stat().st_size == 76424
    spec = (Path(__file__).resolve().parents[2] / "SPEC.md").read_text()
    assert CALIBRATION_SHA256 in spec and "76,424 bytes" in spec


def _assert_close(q: Quantization, floats: np.ndarray, values: np.ndarray) -> None:
    """Dequantized values are within half a step of values inside the ranges; values outside them
    (the calibration set did not reach them) come back as the outermost codes (u + 0.5 steps above lower)."""
    step = (q.upper - q.lower) / 255
    inside = (floats >= q.lower) & (floats <= q.upper)
    assert inside.mean() > 0.9
    assert (np.abs(values - floats) <= step / 2 * 1.001 + 1e-7)[inside].all()
    assert np.allclose(values[floats < q.lower], np.broadcast_to(q.lower + step / 2, floats.shape)[floats < q.lower])
    assert np.allclose(values[floats > q.upper], np.broadcast_to(q.upper + step / 2, floats.shape)[floats > q.upper])


def test_models_publish_the_ranges_of_the_calibration_set(client) -> None:
    q = _published(client)
    vectors = HashBackend(DIMS).embed(calibration_texts())
    assert np.array_equal(q.lower, vectors.min(axis=0)) and np.array_equal(q.upper, vectors.max(axis=0))
    assert q.model == "hash-40" and q.calibration == {"name": "python-docs-v1", "texts": 1000, "sha256": CALIBRATION_SHA256}
    assert client.get("/v1/models/hash-40").json()["quantization"]["id"] == q.id


@pytest.mark.parametrize("fmt", ["json", "raw", "msgpack", "protobuf", "arrow"])
@pytest.mark.parametrize("dtype", ["int8", "uint8"])
def test_int8_and_uint8_answers_are_the_float32_answers_quantized(client, fmt: str, dtype: str) -> None:
    q = _published(client)
    floats = np.array([d["embedding"] for d in client.post("/v1/embeddings", json={"input": TEXTS}).json()["data"]],
                      np.float32)
    for encoding_format in (["float", "base64"] if fmt == "json" else ["base64"]):
        r = client.post("/v1/embeddings", headers={"Accept": MEDIA[fmt]},
                        json={"input": TEXTS, "dtype": dtype, "encoding_format": encoding_format})
        assert r.status_code == 200, r.text
        emb = densewire.decode(r.content, fmt, r.headers)
        assert emb.tensor.dtype == dtype and emb.tensor.shape == (4, DIMS)
        assert emb.quantization == q.id
        assert np.array_equal(emb.tensor.array, q.quantize(floats, dtype).array)
        if fmt == "raw":
            assert r.headers["Densewire-Quantization"] == q.id
        _assert_close(q, floats, q.dequantize(emb))


def test_other_dtypes_carry_no_id_and_float64_is_still_refused(client) -> None:
    for dtype in ("float32", "float16", "bfloat16", "binary"):
        r = client.post("/v1/embeddings", json={"input": TEXTS, "dtype": dtype, "encoding_format": "base64"})
        assert r.status_code == 200 and "quantization" not in r.json()
    r = client.post("/v1/embeddings", json={"input": TEXTS, "dtype": "float64"})
    assert r.status_code == 400 and r.json()["error"]["param"] == "dtype"


def test_dimensions_k_has_its_own_ranges_found_by_id_on_every_replica(client) -> None:
    r = client.post("/v1/embeddings", json={"input": TEXTS, "dtype": "int8", "dimensions": 16})
    qid = r.json()["quantization"]
    assert qid != _published(client).id
    cut = reduce_dimensions(HashBackend(DIMS).embed(calibration_texts()), 16)
    assert qid == densewire.quantization_id(cut.min(axis=0), cut.max(axis=0))
    got = client.get(f"/v1/quantization/{qid}")
    assert got.status_code == 200 and Quantization.from_json(got.content).dimensions == 16
    # another replica, which never answered dimensions 16, finds the id too
    with TestClient(create_app(ServerConfig(demo_tables=False), backend=HashBackend(DIMS))) as other:
        again = other.get(f"/v1/quantization/{qid}")
        assert again.status_code == 200 and again.content == got.content


def test_the_quantization_route_is_immutable_and_cacheable(client) -> None:
    qid = _published(client).id
    r = client.get(f"/v1/quantization/{qid}")
    assert r.headers["Cache-Control"] == "public, max-age=31536000, immutable"
    assert r.headers["ETag"] == f'"{qid}"' and r.headers["Content-Type"] == "application/json"
    assert r.json() == client.get("/v1/models").json()["data"][0]["quantization"]
    not_modified = client.get(f"/v1/quantization/{qid}", headers={"If-None-Match": f'"{qid}"'})
    assert not_modified.status_code == 304 and not_modified.content == b""
    missing = client.get("/v1/quantization/0000000000000000")
    assert missing.status_code == 404
    assert (missing.json()["error"]["code"], missing.json()["error"]["param"]) == ("not_found", "id")


def test_the_route_needs_the_api_key_like_models() -> None:
    cfg = ServerConfig(demo_tables=False, api_key="k")
    with TestClient(create_app(cfg, backend=HashBackend(8))) as c:
        qid = c.get("/v1/models", headers={"Authorization": "Bearer k"}).json()["data"][0]["quantization"]["id"]
        assert c.get(f"/v1/quantization/{qid}").status_code == 401
        assert c.get(f"/v1/quantization/{qid}", headers={"Authorization": "Bearer k"}).status_code == 200


def test_openapi_documents_the_route_and_the_dtypes(client) -> None:
    doc = client.get("/openapi.json").json()
    assert "/v1/quantization/{id}" in doc["paths"]
    assert {"int8", "uint8"} <= set(doc["components"]["schemas"]["EmbeddingsRequest"]["properties"]["dtype"]["enum"])
    card = doc["components"]["schemas"]["Model"]["properties"]["quantization"]
    assert card == {"$ref": "#/components/schemas/Quantization"}


def test_a_bert_model_calibrates_once_then_reads_its_cache(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("DENSEWIRE_CACHE_DIR", str(tmp_path / "cache"))
    folder = tmp_path / "tiny"
    write_tiny_model(folder)
    backend = BertBackend(folder)
    first, source = calibration_vectors(backend)
    assert source == "computed" and first.shape == (1000, backend.dimensions)
    cached = list((tmp_path / "cache" / "quantization").glob("*.npy"))
    assert len(cached) == 1
    again, source = calibration_vectors(BertBackend(folder))
    assert source == "cache" and np.array_equal(again, first)
    assert load_quantizer(BertBackend(folder), "tiny").native.id == Quantization.calibrate(first).id
    # another model (other weights) does not read that cache
    other = tmp_path / "tiny2"
    write_tiny_model(other, seed=1)
    assert calibration_vectors(BertBackend(other))[1] == "computed"


def test_encode_dtype_is_the_one_function_for_every_dtype(client) -> None:
    vectors = HashBackend(DIMS).embed(TEXTS)
    q = _published(client)
    quantizer = load_quantizer(HashBackend(DIMS), "hash-40")
    tensor, used = encode_dtype(vectors, "uint8", quantizer)
    assert used is not None and used.id == q.id and tensor.dtype == "uint8"
    for dtype in ("float32", "float16", "bfloat16", "binary"):
        tensor, used = encode_dtype(vectors, dtype)
        assert used is None and tensor.dtype == dtype
    with pytest.raises(densewire.InvalidFieldError):
        encode_dtype(vectors, "float64")


# -- over HTTP: the client's dequantize, and inspect ------------------------------------------------
@pytest.fixture(scope="module")
def server():
    with ServerProcess("--model", "hash:64", "--no-demo-tables") as s:
        yield s


def test_client_dequantizes_with_the_published_ranges(server) -> None:
    texts = [f"text {i}" for i in range(50)]
    with densewire.Client(server.url) as c:
        floats = c.embed(texts)
        codes = c.embed(texts, dtype="int8")
        assert codes.dtype == np.int8
        emb = c.create(texts, dtype="uint8")
        q = c.quantization(emb.quantization)
        assert q is c.quantization(emb.quantization)  # fetched once
        values = c.embed_many(texts, dtype="int8", dequantize=True, batch_size=16)
        with pytest.raises(ValueError):
            c.embed(texts, dtype="float16", dequantize=True)
    assert values.dtype == np.float32 and values.shape == floats.shape
    _assert_close(q, floats, values)
    cos = (values * floats).sum(axis=1) / np.linalg.norm(values, axis=1) / np.linalg.norm(floats, axis=1)
    assert cos.min() > 0.99


def test_inspect_shows_the_quantization_id(server) -> None:
    curl = ["curl", "-si", server.url + "/v1/embeddings", "-H", "Content-Type: application/json",
            "-H", "Accept: application/octet-stream", "-d", '{"input": ["hello"], "dtype": "int8"}']
    answer = subprocess.run(curl, capture_output=True, check=True).stdout
    out = subprocess.run([sys.executable, "-m", "densewire", "inspect"], input=answer, capture_output=True)
    text = out.stdout.decode()
    assert out.returncode == 0, out.stderr
    qid = [line for line in answer.decode("latin-1").splitlines() if line.lower().startswith("densewire-quantization")]
    assert qid and qid[0].split(":", 1)[1].strip() in text and "dtype      int8" in text
