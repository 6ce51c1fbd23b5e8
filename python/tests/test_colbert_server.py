"""ColBERT models through ``densewire serve --model FOLDER`` (``_server/multivector.py``, the per-token
routes of ``_server/tokens.py``): the generated PyLate and colbert-ai checkpoints (``colbert_checkpoints``)
answer documents by default and queries with ``"is_query": true`` on TEI's ``/embed_all``, vLLM's
``/pooling`` (``token_embed``) and ``/v1/embeddings`` with ``"return_multivector": true``, in each route's
JSON and densewire's ragged binary forms, equal to PyLate's / colbert-ai's recorded vectors; the model
says it is multi-vector; a pooled call is a 400 naming what to ask for; the output limit, truncation,
the cache keyed by mode, and the errors."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import httpx
import numpy as np
import pytest

import densewire
from colbert_checkpoints import DOCUMENTS, QUERIES, write_case
from server_support import ServerProcess, metric_value
from tiny_bert import write_tiny_model

REFERENCE = json.loads((Path(__file__).parent / "data" / "colbert-reference.json").read_text(encoding="utf-8"))
TOLERANCE = 1e-5
LIMIT = 64 * 16 * 4  # --max-token-output-bytes: 64 vectors of 16 floats
FORMATS = {"raw": "application/octet-stream", "msgpack": "application/msgpack",
           "protobuf": "application/x-protobuf", "arrow": "application/vnd.apache.arrow.stream"}


def _expected(case: str, mode: str) -> list[np.ndarray]:
    rec = REFERENCE["cases"][case]
    ref = rec["colbert-ai" if rec["layout"] == "colbert-ai" else "pylate"]
    return [np.array(m, dtype=np.float64) for m in ref[mode]]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    folder = write_case(tmp_path_factory.mktemp("pylate") / "tiny-colbert", "pylate")
    with ServerProcess("--model", str(folder), "--precision", "fp32", "--blas-threads", "1",
                       "--max-token-output-bytes", str(LIMIT)) as s:
        yield s


@pytest.fixture(scope="module")
def colbert_ai_server(tmp_path_factory):
    folder = write_case(tmp_path_factory.mktemp("colbert-ai") / "tiny-colbertv2", "colbert-ai")
    prewarm = folder.parent / "prewarm.txt"
    prewarm.write_text("".join(d + "\n" for d in DOCUMENTS[:3]), encoding="utf-8")
    with ServerProcess("--model", str(folder), "--precision", "fp32", "--blas-threads", "1",
                       "--prewarm", str(prewarm)) as s:
        yield s


@pytest.fixture(scope="module")
def plain_server(tmp_path_factory):
    folder = write_tiny_model(tmp_path_factory.mktemp("plain") / "tiny-bert")
    with ServerProcess("--model", str(folder), "--precision", "fp32", "--blas-threads", "1") as s:
        yield s


def _close(got, expected: list[np.ndarray]) -> None:
    got = [np.asarray(m, dtype=np.float64) for m in got]
    assert [m.shape for m in got] == [m.shape for m in expected]
    assert max(np.abs(g - e).max() for g, e in zip(got, expected)) <= TOLERANCE


def _post(server, path: str, body: dict, accept: str | None = None) -> httpx.Response:
    headers = {"Accept": accept} if accept else {}
    return httpx.post(server.url + path, json=body, headers=headers, timeout=120)


def test_model_says_it_is_multi_vector(server) -> None:
    card = httpx.get(server.url + "/v1/models", timeout=30).json()["data"][0]
    assert card["dimensions"] == 16
    assert card["multi_vector"] == {"layout": "pylate", "dimensions": 16, "query_prefix": "[Q] ",
                                    "document_prefix": "[D] ", "query_length": 12, "document_length": 14,
                                    "do_query_expansion": True, "attend_to_expansion_tokens": False}
    info = httpx.get(server.url + "/info", timeout=30).json()
    assert info["multi_vector"]["layout"] == "pylate"
    assert httpx.get(server.url + "/health", timeout=30).json()["multi_vector"]["dimensions"] == 16


def test_embed_all_documents_by_default_queries_on_request(server) -> None:
    r = _post(server, "/embed_all", {"inputs": DOCUMENTS, "truncate": True})
    assert r.status_code == 200, r.text
    _close(r.json(), _expected("pylate", "documents"))
    r = _post(server, "/embed_all", {"inputs": QUERIES, "is_query": True})
    assert r.status_code == 200, r.text
    _close(r.json(), _expected("pylate", "queries"))
    assert all(len(m) == 12 for m in r.json())  # expanded to query_length


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_binary_forms_are_the_ragged_tensor(server, fmt) -> None:
    for path, body in (("/embed_all", {"inputs": QUERIES, "is_query": True}),
                       ("/pooling", {"input": QUERIES, "task": "token_embed", "is_query": True}),
                       ("/v1/embeddings", {"input": QUERIES, "return_multivector": True, "is_query": True})):
        r = _post(server, path, body, FORMATS[fmt])
        assert r.status_code == 200, (path, r.text)
        got = densewire.decode(r.content, fmt, headers=dict(r.headers), kind="ragged").tensor
        assert isinstance(got, densewire.RaggedTensor) and got.d == 16 and got.dtype == "float32"
        _close(list(got), _expected("pylate", "queries"))


def test_pooling_in_vllm_shapes(server) -> None:
    r = _post(server, "/pooling", {"input": DOCUMENTS[:3], "task": "token_embed"})
    assert r.status_code == 200, r.text
    doc = r.json()
    assert doc["object"] == "list" and [d["index"] for d in doc["data"]] == [0, 1, 2]
    _close([d["data"] for d in doc["data"]], _expected("pylate", "documents")[:3])
    r = _post(server, "/pooling", {"input": QUERIES, "task": "token_embed", "is_query": True,
                                   "encoding_format": "base64"})
    got = [np.frombuffer(base64.b64decode(d["data"]), "<f4").reshape(-1, 16) for d in r.json()["data"]]
    _close(got, _expected("pylate", "queries"))


def test_v1_embeddings_return_multivector(server) -> None:
    r = _post(server, "/v1/embeddings", {"input": DOCUMENTS[:3], "return_multivector": True,
                                         "encoding_format": "float"})
    assert r.status_code == 200, r.text
    doc = r.json()
    assert doc["kind"] == "ragged" and doc["dimensions"] == 16
    _close([d["embedding"] for d in doc["data"]], _expected("pylate", "documents")[:3])
    got = densewire.decode(_post(server, "/v1/embeddings", {"input": QUERIES, "return_multivector": True,
                                                            "is_query": True}).content, "json", kind="ragged")
    _close(list(got.tensor), _expected("pylate", "queries"))
    # the queries' own tokens, [CLS] [Q] ... [SEP] (3 + 2 + 5 words and marks, 3 each), not the expansion
    assert got.usage.prompt_tokens == 10 + 9


def test_half_precision_rows(server) -> None:
    for body in ({"dtype": "float16"}, {"embed_dtype": "float16"}):
        r = _post(server, "/v1/embeddings", {"input": QUERIES, "return_multivector": True, "is_query": True, **body},
                  FORMATS["msgpack"])
        got = densewire.decode(r.content, "msgpack", kind="ragged").tensor
        assert got.dtype == "float16"
        expected = _expected("pylate", "queries")
        assert max(np.abs(np.asarray(g, np.float64) - e).max() for g, e in zip(got, expected)) < 1e-3


def test_pooled_call_is_a_400_saying_what_to_ask_for(server) -> None:
    for body in ({"input": "a cat"}, {"input": [[7, 8]]}):
        r = _post(server, "/v1/embeddings", body)
        assert r.status_code == 400, r.text
        err = r.json()["error"]
        assert err["param"] == "return_multivector" and "multi-vector" in err["message"]
        assert '"return_multivector": true' in err["message"]
    r = _post(server, "/embed", {"inputs": "a cat"})
    assert r.status_code in (400, 422) and "return_multivector" in r.text
    r = _post(server, "/v1/embeddings", {"input": "a cat", "is_query": True})
    assert r.status_code == 400 and r.json()["error"]["param"] == "is_query"


@pytest.mark.parametrize("body, param", [
    ({"input": "x", "return_multivector": True, "is_query": "yes"}, "is_query"),
    ({"input": "x", "return_multivector": True, "dimensions": 8}, "dimensions"),
    ({"input": "x", "return_multivector": True, "dtype": "int8"}, "dtype"),
    ({"input": "x", "return_multivector": True, "embed_dtype": "fp8_e4m3"}, "embed_dtype"),
    ({"input": "x", "return_multivector": True, "encoding_format": "bytes"}, "encoding_format"),
    ({"input": [[7, 8]], "return_multivector": True}, "input"),
    ({"input": "x", "return_multivector": 1}, "return_multivector"),
])
def test_multivector_request_errors(server, body, param) -> None:
    r = _post(server, "/v1/embeddings", body)
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == param


def test_truncation_at_the_document_length(server) -> None:
    long = DOCUMENTS[-1]  # 24 tokens + the marker: over document_length 14
    r = _post(server, "/v1/embeddings", {"input": long, "return_multivector": True})
    assert r.status_code == 400 and r.json()["error"]["param"] == "input[0]"
    assert "maximum context length is 14 tokens" in r.json()["error"]["message"]
    r = _post(server, "/embed_all", {"inputs": [long]})
    assert r.status_code == 413 and r.json()["error_type"] == "Validation"
    r = _post(server, "/v1/embeddings", {"input": long, "return_multivector": True, "truncate": True,
                                         "encoding_format": "float"})
    assert r.status_code == 200 and r.json()["truncated"] == [0]
    _close([r.json()["data"][0]["embedding"]], _expected("pylate", "documents")[-1:])


def test_output_is_bounded(server) -> None:
    """Six expanded queries are 72 vectors: past the 64 of --max-token-output-bytes, a 413 naming it."""
    r = _post(server, "/embed_all", {"inputs": ["red house"] * 6, "is_query": True})
    assert r.status_code == 413, r.text
    assert "--max-token-output-bytes" in r.json()["error"] and str(LIMIT) in r.json()["error"]
    r = _post(server, "/v1/embeddings", {"input": ["red house"] * 6, "return_multivector": True, "is_query": True})
    assert r.status_code == 413 and r.json()["error"]["code"] == "payload_too_large"
    assert _post(server, "/embed_all", {"inputs": ["red house"] * 5, "is_query": True}).status_code == 200


def test_cache_keyed_by_mode(server) -> None:
    text = "the cat jumps over the river"
    hits = lambda: metric_value(server.metrics(), "densewire_cache_hits_total", layer="memory")  # noqa: E731
    before = hits()
    doc = _post(server, "/embed_all", {"inputs": [text]}).json()
    query = _post(server, "/embed_all", {"inputs": [text], "is_query": True}).json()
    assert hits() == before and len(doc[0]) == 9 and len(query[0]) == 12  # another mode: no hit
    assert _post(server, "/embed_all", {"inputs": [text], "is_query": True}).json() == query
    assert _post(server, "/v1/embeddings", {"input": text, "return_multivector": True}).status_code == 200
    assert hits() == before + 2


def test_maxsim_ranks_as_the_reference(server) -> None:
    """Queries and documents from the server score as PyLate's own vectors do."""
    def ragged(body: dict) -> densewire.RaggedTensor:
        r = _post(server, "/embed_all", body, FORMATS["raw"])
        return densewire.decode(r.content, "raw", headers=dict(r.headers), kind="ragged").tensor

    q, d = ragged({"inputs": QUERIES, "is_query": True}), ragged({"inputs": DOCUMENTS, "truncate": True})
    got = densewire.maxsim(q, d)
    want = densewire.maxsim(densewire.RaggedTensor.from_arrays([m.astype(np.float32) for m in _expected("pylate", "queries")]),
                            densewire.RaggedTensor.from_arrays([m.astype(np.float32) for m in _expected("pylate", "documents")]))
    assert np.abs(got - want).max() < 1e-4 and np.array_equal(np.argmax(got, axis=1), np.argmax(want, axis=1))


@pytest.mark.parametrize("accept", [densewire.DEFAULT_ACCEPT, "application/json"])
def test_client_embed_tokens_modes(server, accept) -> None:
    """The Python client's embed_tokens asks for documents by default, queries with is_query=True."""
    with densewire.Client(server.url, accept=accept) as client:
        queries = client.embed_tokens(QUERIES, is_query=True)
        documents = client.embed_tokens(DOCUMENTS[:3])
    assert isinstance(queries, densewire.RaggedTensor) and np.shares_memory(queries[1], queries.values)
    _close(list(queries), _expected("pylate", "queries"))
    _close(list(documents), _expected("pylate", "documents")[:3])


def test_readme_example(server) -> None:
    """README's ColBERT block against the served PyLate checkpoint: the query ranks the fox document first."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    (block,) = re.findall(r"```python colbert\n(.*?)```", readme, re.S)
    scope: dict = {}
    exec(compile(block.replace("http://127.0.0.1:8000", server.url), "README.md colbert block", "exec"), scope)
    want = densewire.maxsim(np.array(_expected("pylate", "queries")[0], np.float32),
                            densewire.RaggedTensor.from_arrays([m.astype(np.float32) for m in _expected("pylate", "documents")[:2]]))
    assert scope["scores"].shape == (1, 2) and np.abs(scope["scores"][0] - want).max() < 1e-4


def test_colbert_ai_checkpoint_served(colbert_ai_server) -> None:
    card = httpx.get(colbert_ai_server.url + "/v1/models", timeout=30).json()["data"][0]
    assert card["multi_vector"]["layout"] == "colbert-ai" and card["multi_vector"]["query_prefix"] == "[unused0]"
    before = metric_value(colbert_ai_server.metrics(), "densewire_cache_hits_total", layer="memory")
    r = _post(colbert_ai_server, "/embed_all", {"inputs": DOCUMENTS, "truncate": True})
    assert r.status_code == 200, r.text
    # --prewarm embedded the first three documents (as documents) into the cache at start
    assert metric_value(colbert_ai_server.metrics(), "densewire_cache_hits_total", layer="memory") == before + 3
    _close(r.json(), _expected("colbert-ai", "documents"))
    r = _post(colbert_ai_server, "/pooling", {"input": QUERIES, "task": "token_embed", "is_query": True},
              FORMATS["arrow"])
    _close(list(densewire.decode(r.content, "arrow", kind="ragged").tensor), _expected("colbert-ai", "queries"))


def test_single_vector_model_gives_token_states_and_refuses_is_query(plain_server) -> None:
    """On a model that is not multi-vector, return_multivector answers /embed_all's token states, and
    is_query is a 400/422 naming it (it has no query mode)."""
    texts = ["the cat", "a quick brown fox"]
    states = _post(plain_server, "/embed_all", {"inputs": texts}).json()
    r = _post(plain_server, "/v1/embeddings", {"input": texts, "return_multivector": True, "encoding_format": "float"})
    assert r.status_code == 200, r.text
    assert [d["embedding"] for d in r.json()["data"]] == states and r.json()["dimensions"] == 32
    assert "multi_vector" not in httpx.get(plain_server.url + "/v1/models", timeout=30).json()["data"][0]
    for path, body, field in (("/v1/embeddings", {"input": texts, "return_multivector": True, "is_query": True},
                               lambda j: j["error"]["param"]),
                              ("/pooling", {"input": texts, "task": "token_embed", "is_query": True},
                               lambda j: j["error"]["param"]),
                              ("/embed_all", {"inputs": texts, "is_query": True}, lambda j: j["error"])):
        r = _post(plain_server, path, body)
        assert r.status_code in (400, 422), (path, r.text)
        assert "is_query" in field(r.json()), (path, r.text)
    assert len(_post(plain_server, "/v1/embeddings", {"input": texts}).json()["data"][0]["embedding"]) == 32
