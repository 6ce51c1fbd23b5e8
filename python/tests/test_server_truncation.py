"""No silent truncation, and each route's own rules for it (issue 27).

On /v1/embeddings an input longer than the model reads is a 400 that names the input, its token count and
the limit, unless the request asks to cut (truncate_prompt_tokens, vLLM's semantics; densewire's truncate)
or the server runs with --auto-truncate (TEI's flag). TEI's /embed answers 413 unless truncate or
--auto-truncate; Cohere cuts by default (truncate END) and refuses with NONE; Ollama cuts by default and
refuses with truncate false. Whenever an input is cut the answer says so (Densewire-Truncated, and in
OpenAI JSON "truncated": [indexes]), the log says so and densewire_truncated_inputs counts it.
Also: the Matryoshka rule of `dimensions` (vLLM's 400 "does not support matryoshka representation")."""

from __future__ import annotations

import json
import shutil
from types import SimpleNamespace

import httpx
import numpy as np
import pytest

import densewire
from densewire._server.matryoshka import declared_matryoshka, parse_matryoshka
from densewire._server.tokenids import CL100K_PATH
from server_support import ServerProcess, metric_value, parse_metrics
from tiny_bert import write_tiny_model

LONG = "embeddings " * 400  # 801 words, 1602 MiniLM tokens with [CLS] and [SEP]
LONG_TOKENS = 1602
MAX = 256


@pytest.fixture(scope="module")
def server():
    with ServerProcess("--model", "minilm", "--served-model-name", "m") as s:
        yield s


@pytest.fixture(scope="module")
def auto_server():
    with ServerProcess("--model", "minilm", "--served-model-name", "m", "--auto-truncate") as s:
        yield s


def _post(server, path: str, doc, **kw) -> httpx.Response:
    return httpx.post(server.url + path, json=doc, timeout=60, **kw)


def _truncated_count(server, route: str) -> float:
    return metric_value(parse_metrics(httpx.get(server.url + "/metrics").text), "densewire_truncated_inputs_total",
                        route=route)


# -- /v1/embeddings -------------------------------------------------------------------------------------

def test_a_long_input_is_a_400_naming_index_count_and_limit(server) -> None:
    r = _post(server, "/v1/embeddings", {"input": ["short", "also short", LONG]})
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["type"] == "invalid_request_error" and err["code"] == "invalid_field" and err["param"] == "input[2]"
    assert err["message"].startswith(f"input[2]: this model's maximum context length is {MAX} tokens, however you "
                                     f"requested {LONG_TOKENS} tokens")
    for hint in ("truncate_prompt_tokens", "--auto-truncate"):
        assert hint in err["message"]


def test_asking_to_truncate_cuts_and_says_so(server) -> None:
    before = _truncated_count(server, "/v1/embeddings")
    full = _post(server, "/v1/embeddings", {"input": ["short", LONG], "truncate_prompt_tokens": -1})
    assert full.status_code == 200, full.text
    assert full.headers["Densewire-Truncated"] == "1"
    doc = full.json()
    assert doc["truncated"] == [1] and doc["usage"]["prompt_tokens"] == 3 + MAX
    # densewire's own field asks the same
    same = _post(server, "/v1/embeddings", {"input": ["short", LONG], "truncate": True})
    assert same.json()["truncated"] == [1] and same.json()["data"] == doc["data"]
    # an input short enough is not reported; nothing cut: no header, no field
    none = _post(server, "/v1/embeddings", {"input": ["short"], "truncate_prompt_tokens": -1})
    assert "Densewire-Truncated" not in none.headers and "truncated" not in none.json()
    assert _truncated_count(server, "/v1/embeddings") == before + 2
    assert "/v1/embeddings: cut 1 input(s) to the token limit: index 1" in server.log_text()


def test_truncate_prompt_tokens_counts_as_vllm(server) -> None:
    r = _post(server, "/v1/embeddings", {"input": ["red green blue black", "red"], "truncate_prompt_tokens": 4})
    assert r.status_code == 200 and r.json()["truncated"] == [0]  # "red" is 3 tokens: not cut
    assert r.json()["usage"]["prompt_tokens"] == 4 + 3
    big = _post(server, "/v1/embeddings", {"input": "a", "truncate_prompt_tokens": MAX + 1})
    assert big.status_code == 400 and big.json()["error"]["param"] == "truncate_prompt_tokens"
    assert "truncate_prompt_tokens value is greater than max_model_len" in big.json()["error"]["message"]
    exact = _post(server, "/v1/embeddings", {"input": LONG, "truncate_prompt_tokens": MAX})
    assert exact.status_code == 200 and exact.json()["usage"]["prompt_tokens"] == MAX


def test_binary_and_vllm_answers_carry_the_header(server) -> None:
    raw = _post(server, "/v1/embeddings", {"input": [LONG, "x"], "truncate": True},
                headers={"Accept": "application/octet-stream"})
    assert raw.status_code == 200 and raw.headers["Densewire-Truncated"] == "1"
    assert densewire.decode(raw.content, "raw", raw.headers).tensor.shape == (2, 384)
    vllm = _post(server, "/v1/embeddings", {"input": [LONG], "truncate_prompt_tokens": -1, "encoding_format": "bytes",
                                            "embed_dtype": "float16"})
    assert vllm.status_code == 200 and vllm.headers["Densewire-Truncated"] == "1"
    vjson = _post(server, "/v1/embeddings", {"input": [LONG, LONG + "x"], "truncate_prompt_tokens": -1,
                                             "encoding_format": "base64", "embed_dtype": "float16"},
                  headers={"Accept-Encoding": "gzip"})
    assert vjson.json()["truncated"] == [0, 1] and vjson.headers["Densewire-Truncated"] == "2"
    assert vjson.headers["Content-Encoding"] == "gzip"


def test_token_ids_count_the_models_tokens_after_decoding(server) -> None:
    """LangChain's cl100k_base ids of a long text: refused with the model's count of the decoded text."""
    import hashlib
    import os
    import tempfile

    import tiktoken
    import tiktoken.registry

    url = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"
    cache = tempfile.mkdtemp(prefix="dw-tiktoken-")
    shutil.copy(CL100K_PATH, os.path.join(cache, hashlib.sha1(url.encode()).hexdigest()))
    os.environ["TIKTOKEN_CACHE_DIR"] = cache
    try:
        tiktoken.registry.ENCODINGS.pop("cl100k_base", None)
        ids = tiktoken.get_encoding("cl100k_base").encode(LONG)
    finally:
        os.environ.pop("TIKTOKEN_CACHE_DIR", None)
    assert len(ids) != LONG_TOKENS  # cl100k's count is not the model's
    r = _post(server, "/v1/embeddings", {"input": [ids]})
    assert r.status_code == 400 and r.json()["error"]["param"] == "input[0]"
    assert f"however you requested {LONG_TOKENS} tokens" in r.json()["error"]["message"]
    cut = _post(server, "/v1/embeddings", {"input": [ids], "truncate_prompt_tokens": -1})
    assert cut.status_code == 200 and cut.json()["truncated"] == [0] and cut.json()["usage"]["prompt_tokens"] == MAX


def test_auto_truncate_cuts_by_default_and_still_says_so(auto_server) -> None:
    r = _post(auto_server, "/v1/embeddings", {"input": [LONG]})
    assert r.status_code == 200 and r.headers["Densewire-Truncated"] == "1" and r.json()["truncated"] == [0]
    refused = _post(auto_server, "/v1/embeddings", {"input": [LONG], "truncate": False})
    assert refused.status_code == 400 and refused.json()["error"]["param"] == "input[0]"
    assert httpx.get(auto_server.url + "/info").json()["auto_truncate"] is True
    assert _post(auto_server, "/embed", {"inputs": LONG}).headers["Densewire-Truncated"] == "1"


# -- the other routes keep their servers' rules -------------------------------------------------------

def test_tei_refuses_with_413_unless_asked(server) -> None:
    assert httpx.get(server.url + "/info").json()["auto_truncate"] is False
    r = _post(server, "/embed", {"inputs": ["a", LONG]})
    assert r.status_code == 413 and r.json()["error_type"] == "Validation"
    assert r.json()["error"].startswith(f"inputs[1]: `inputs` must have less than {MAX} tokens. Given: {LONG_TOKENS}")
    ok = _post(server, "/embed", {"inputs": ["a", LONG], "truncate": True})
    assert ok.status_code == 200 and ok.headers["Densewire-Truncated"] == "1" and len(ok.json()) == 2


def test_cohere_cuts_by_default_and_refuses_with_none(server) -> None:
    r = _post(server, "/v2/embed", {"texts": [LONG], "model": "m"})
    assert r.status_code == 200 and r.headers["Densewire-Truncated"] == "1"
    none = _post(server, "/v2/embed", {"texts": ["a", LONG], "truncate": "NONE"})
    assert none.status_code == 400 and none.json()["message"].startswith("texts[1]: ")
    assert f"maximum context length is {MAX} tokens" in none.json()["message"]
    # the model is judged before the other fields, as on every route
    wrong = _post(server, "/v2/embed", {"texts": [], "model": "embed-v4.0"})
    assert wrong.status_code == 404 and "embed-v4.0" in wrong.json()["message"]


def test_ollama_cuts_by_default_and_refuses_with_false(server) -> None:
    r = _post(server, "/api/embed", {"model": "m", "input": [LONG]})
    assert r.status_code == 200 and r.headers["Densewire-Truncated"] == "1"
    assert r.json()["prompt_eval_count"] == MAX
    refused = _post(server, "/api/embed", {"model": "m", "input": [LONG], "truncate": False})
    assert refused.status_code == 400 and refused.json()["error"].startswith("input[0]: ")
    assert "context length" in refused.json()["error"]


# -- dimensions: Matryoshka models only -------------------------------------------------------------------

def test_dimensions_on_a_model_that_is_not_matryoshka(server) -> None:
    r = _post(server, "/v1/embeddings", {"input": "a", "dimensions": 128})
    assert r.status_code == 400 and r.json()["error"]["param"] == "dimensions"
    assert "does not support matryoshka representation" in r.json()["error"]["message"]
    same = _post(server, "/v1/embeddings", {"input": "a", "dimensions": 384})  # its own size changes nothing
    assert same.status_code == 200 and len(same.json()["data"][0]["embedding"]) == 384
    wrong_model = _post(server, "/v1/embeddings", {"input": "a", "model": "text-embedding-3-small", "dimensions": 1536})
    assert wrong_model.status_code == 404 and wrong_model.json()["error"]["param"] == "model"


def test_a_model_folder_declares_its_matryoshka_sizes(tmp_path) -> None:
    folder = write_tiny_model(tmp_path / "tiny")
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "matryoshka_dimensions": [16, 8]}))
    with ServerProcess("--model", str(folder), "--engine", "numpy") as s:
        ok = _post(s, "/v1/embeddings", {"input": "the cat", "dimensions": 16})
        assert ok.status_code == 200 and len(ok.json()["data"][0]["embedding"]) == 16
        bad = _post(s, "/v1/embeddings", {"input": "the cat", "dimensions": 12})
        assert bad.status_code == 400 and "only supports [16, 8] matryoshka dimensions" in bad.json()["error"]["message"]
    with ServerProcess("--model", str(folder), "--engine", "numpy", "--matryoshka-dimensions", "any") as s:
        assert _post(s, "/v1/embeddings", {"input": "the cat", "dimensions": 12}).status_code == 200


def test_declared_matryoshka_sources(tmp_path) -> None:
    assert parse_matryoshka("any") is True and parse_matryoshka("none") is False and parse_matryoshka("") is None
    assert parse_matryoshka("256, 768,256") == (768, 256)
    with pytest.raises(ValueError):
        parse_matryoshka("0")
    (tmp_path / "config_sentence_transformers.json").write_text('{"is_matryoshka": true}')
    assert declared_matryoshka(SimpleNamespace(path=tmp_path), None) is True
    assert declared_matryoshka(SimpleNamespace(path=tmp_path), (64,)) == (64,)  # the flag wins
    assert declared_matryoshka(SimpleNamespace(path=tmp_path / "nowhere"), None) is False
    from densewire._backends.hash import HashBackend

    assert declared_matryoshka(HashBackend(8), None) is True  # prefix-truncatable by construction
    v = np.asarray(HashBackend(8).embed(["x"]))[0]
    w = np.asarray(HashBackend(4).embed(["x"]))[0]
    np.testing.assert_allclose(v[:4] / np.linalg.norm(v[:4]), w, rtol=1e-5)
