"""Other servers' dialects on a running densewire serve, each driven by that ecosystem's own client:
vLLM's request shapes (its tests: embed_dtype, endianness, bytes, bytes_only), TEI through
huggingface_hub's InferenceClient, Cohere's ClientV2, Ollama's Client, and LangChain's OpenAIEmbeddings
sending cl100k_base token ids (issue 17)."""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import sys

import httpx
import numpy as np
import pytest

import densewire
from densewire._server.tokenids import CL100K_PATH, CL100K_SHA256, Cl100kVocabulary
from densewire._server.vllm import to_fp8
from server_support import ServerProcess

NAMES = ("minilm-test", "all-minilm")
TEXTS = ["The quick brown fox jumps over the lazy dog", "embeddings at memory speed", "naïve café ünïcode"]


@pytest.fixture(scope="module")
def server():
    with ServerProcess("--model", "minilm", "--served-model-name", *NAMES) as s:
        yield s


@pytest.fixture(scope="module")
def reference(server) -> np.ndarray:
    """The float32 vectors of TEXTS, as densewire's raw body gives them."""
    r = httpx.post(server.url + "/v1/embeddings", json={"input": TEXTS}, headers={"Accept": "application/octet-stream"})
    assert r.status_code == 200, r.text
    return densewire.decode(r.content, "raw", r.headers).tensor.array.copy()


def _post(server, path: str, doc, **kw) -> httpx.Response:
    return httpx.post(server.url + path, json=doc, timeout=30, **kw)


def _cos(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = a / np.linalg.norm(a, axis=-1, keepdims=True)
    b = b / np.linalg.norm(b, axis=-1, keepdims=True)
    return np.sum(a * b, axis=-1)


# -- fp8 (no server) -------------------------------------------------------------------------------

def test_fp8_known_codes() -> None:
    x = np.array([1.0, -2.0, 0.0, -0.0, 448.0, 464.0, 465.0, 1e9, np.inf, np.nan, 2.0 ** -9, 0.3], dtype=np.float32)
    e4 = to_fp8(x, "fp8_e4m3")
    assert list(e4[:8]) == [0x38, 0xC0, 0x00, 0x80, 0x7E, 0x7E, 0x7F, 0x7F]
    assert e4[8] == 0x7F and e4[9] & 0x7F == 0x7F
    assert e4[10] == 0x01  # 2^-9 is e4m3's smallest subnormal
    assert e4[11] == 0x2A  # 0.3 -> 0.3125 = 1.25 * 2^-2: 0 0101 010
    e5 = to_fp8(np.array([1.0, 57344.0, 61440.0, np.inf, -np.inf, 2.0 ** -16, 0.3], dtype=np.float32), "fp8_e5m2")
    assert list(e5) == [0x3C, 0x7B, 0x7C, 0x7C, 0xFC, 0x01, 0x35]


@pytest.mark.parametrize("kind, ml_name", [("fp8_e4m3", "float8_e4m3fn"), ("fp8_e5m2", "float8_e5m2")])
def test_fp8_matches_ml_dtypes_on_every_finite_value_in_range(kind, ml_name) -> None:
    """Round to nearest even, subnormals, both signs: the same bytes as ml_dtypes' conversion (which
    follows the same IEEE rules as torch's) for every float16-exact value and random float32 values."""
    import ml_dtypes

    rng = np.random.default_rng(17)
    halves = np.arange(0, 0x7C00, dtype=np.uint16).view(np.float16).astype(np.float32)
    values = np.concatenate([halves, -halves, rng.standard_normal(200_000).astype(np.float32),
                             (rng.standard_normal(50_000) * 1e-3).astype(np.float32)])
    limit = 464.0 if kind == "fp8_e4m3" else 57344.0
    values = values[np.abs(values) <= limit]
    ours = to_fp8(values, kind)
    theirs = values.astype(getattr(ml_dtypes, ml_name)).view(np.uint8)
    bad = np.flatnonzero(ours != theirs)
    assert bad.size == 0, [(float(values[i]), hex(ours[i]), hex(theirs[i])) for i in bad[:5]]


# -- cl100k_base (no server) -----------------------------------------------------------------------

def test_cl100k_vocabulary_is_tiktokens(tmp_path, monkeypatch) -> None:
    """The shipped file is tiktoken's (sha256), and decoding ids gives back what tiktoken encoded."""
    assert hashlib.sha256(CL100K_PATH.read_bytes()).hexdigest() == CL100K_SHA256
    tiktoken = _offline_tiktoken(tmp_path, monkeypatch)
    enc = tiktoken.get_encoding("cl100k_base")
    vocabulary = Cl100kVocabulary()
    assert vocabulary.size == enc.n_vocab - 21 == 100256  # the ordinary tokens; 21 ids are special or unused
    for text in [*TEXTS, "emoji 🦊 and 中文 and tabs\tand\nnewlines", "<|endoftext|> is text here"]:
        ids = enc.encode(text, disallowed_special=())
        assert vocabulary.decode(ids, "input[0]") == text
    for special in (100256, 100257, 100276):
        with pytest.raises(densewire.InvalidFieldError) as ei:
            vocabulary.decode([15339, 1917, special, 5], "input[2]")
        assert ei.value.field == "input[2][2]"


def test_cl100k_file_checked(tmp_path) -> None:
    bad = tmp_path / "cl100k_base.tiktoken"
    bad.write_bytes(CL100K_PATH.read_bytes()[:-10])
    with pytest.raises(RuntimeError, match="sha256"):
        Cl100kVocabulary(bad)


def _offline_tiktoken(tmp_path, monkeypatch):
    """tiktoken reading cl100k_base from a cache directory filled with densewire's copy (no network):
    its cache key is the sha1 of the file's URL, and it checks the sha256 itself."""
    url = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"
    cache = tmp_path / "tiktoken"
    cache.mkdir()
    shutil.copy(CL100K_PATH, cache / hashlib.sha1(url.encode()).hexdigest())
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(cache))
    import tiktoken
    import tiktoken.registry

    tiktoken.registry.ENCODINGS.pop("cl100k_base", None)
    return tiktoken


# -- vLLM ------------------------------------------------------------------------------------------

def test_vllm_base64_embed_dtype_and_endianness(server, reference) -> None:
    """vLLM's test_base64_embed_dtype_and_endianness: each row decodes with the asked dtype and order."""
    for dtype, np_dtype in (("float32", "f4"), ("float16", "f2")):
        for endianness in ("native", "little", "big"):
            r = _post(server, "/v1/embeddings", {"model": NAMES[0], "input": TEXTS, "encoding_format": "base64",
                                                 "embed_dtype": dtype, "endianness": endianness})
            assert r.status_code == 200, r.text
            doc = r.json()
            assert list(doc)[:6] == ["id", "object", "created", "model", "data", "usage"]
            assert doc["id"].startswith("embd-") and doc["model"] == NAMES[0]
            assert doc["usage"]["completion_tokens"] == 0 and doc["usage"]["prompt_tokens_details"] is None
            order = {"native": sys.byteorder, "little": "little", "big": "big"}[endianness]
            got = np.array([np.frombuffer(base64.b64decode(d["embedding"]), dtype=("<" if order == "little" else ">")
                                          + np_dtype) for d in doc["data"]])
            np.testing.assert_array_equal(got, reference.astype(np_dtype))
            assert [d["index"] for d in doc["data"]] == [0, 1, 2] and doc["data"][0]["object"] == "embedding"
            emb = densewire.decode(r.content, "json")  # densewire's decoder reads it too
            np.testing.assert_array_equal(emb.tensor.array, reference.astype(np_dtype))


def test_vllm_float_ignores_embed_dtype(server, reference) -> None:
    r = _post(server, "/v1/embeddings", {"input": TEXTS, "encoding_format": "float", "embed_dtype": "float16"})
    assert r.status_code == 200, r.text
    np.testing.assert_array_equal(np.array([d["embedding"] for d in r.json()["data"]], dtype=np.float32), reference)


def test_vllm_bytes_and_bytes_only(server, reference) -> None:
    """vLLM's test_bytes_embed_dtype_and_endianness / test_bytes_only_embed_dtype_and_endianness."""
    for dtype in ("float32", "float16", "bfloat16", "fp8_e4m3", "fp8_e5m2"):
        for endianness in ("native", "big"):
            body = {"model": NAMES[1], "input": TEXTS, "encoding_format": "bytes", "embed_dtype": dtype,
                    "endianness": endianness, "request_id": "abc"}
            r = _post(server, "/v1/embeddings", body)
            assert r.status_code == 200, r.text
            assert r.headers["content-type"] == "application/octet-stream"
            meta = json.loads(r.headers["metadata"])
            assert meta["id"] == "embd-abc" and meta["model"] == NAMES[0]
            assert meta["usage"]["prompt_tokens"] == meta["usage"]["total_tokens"] > 0
            size = len(r.content) // 3
            assert meta["data"] == [{"index": i, "embed_dtype": dtype, "endianness": endianness, "start": i * size,
                                     "end": (i + 1) * size, "shape": [384]} for i in range(3)]
            expected = _vllm_bytes(reference, dtype, endianness)
            assert r.content == expected
            only = _post(server, "/v1/embeddings", {**body, "encoding_format": "bytes_only"})
            assert only.status_code == 200 and "metadata" not in only.headers and only.content == expected
            if dtype in ("float32", "float16", "bfloat16") and endianness == "native":
                emb = densewire.decode(r.content, "raw", r.headers)  # a densewire raw body as well
                assert emb.tensor.dtype == dtype and emb.tensor.array.shape == (3, 384)


def _vllm_bytes(vectors: np.ndarray, dtype: str, endianness: str) -> bytes:
    if dtype.startswith("fp8"):
        return to_fp8(vectors, dtype).tobytes()
    if dtype == "bfloat16":
        rows = densewire.convert(densewire.Tensor.from_array(vectors), "bfloat16").array
    else:
        rows = vectors.astype(dtype)
    return (rows.byteswap() if endianness == "big" else rows).tobytes()


def test_vllm_fp8_json_is_refused_by_densewire_decoders(server, reference) -> None:
    r = _post(server, "/v1/embeddings", {"input": TEXTS[:1], "encoding_format": "base64", "embed_dtype": "fp8_e4m3"})
    assert r.status_code == 200 and r.json()["dtype"] == "fp8_e4m3"
    assert base64.b64decode(r.json()["data"][0]["embedding"]) == to_fp8(reference[:1], "fp8_e4m3").tobytes()
    with pytest.raises(densewire.UnknownDtypeError):
        densewire.decode(r.content, "json")
    r2 = _post(server, "/v1/embeddings", {"input": "a", "embed_dtype": "fp8_e5m2", "encoding_format": "base64"},
               headers={"Accept": "application/octet-stream"})
    assert r2.status_code == 400 and r2.json()["error"]["param"] == "embed_dtype"


def test_vllm_truncate_prompt_tokens_and_side(server) -> None:
    def vec(doc):
        r = _post(server, "/v1/embeddings", doc, headers={"Accept": "application/octet-stream"})
        assert r.status_code == 200, r.text
        return densewire.decode(r.content, "raw", r.headers).tensor.array[0], int(r.headers["densewire-prompt-tokens"])

    text = "red green blue black"
    cut, tokens = vec({"input": text, "truncate_prompt_tokens": 4})  # [CLS] red green [SEP]
    assert tokens == 4
    np.testing.assert_allclose(cut, vec({"input": "red green"})[0], atol=1e-5)
    left, _ = vec({"input": text, "truncate_prompt_tokens": 4, "truncation_side": "left"})
    np.testing.assert_allclose(left, vec({"input": "blue black"})[0], atol=1e-5)
    full, _ = vec({"input": text, "truncate_prompt_tokens": -1})
    np.testing.assert_array_equal(full, vec({"input": text})[0])


def test_vllm_field_errors(server) -> None:
    for doc, field in (({"input": "a", "embed_dtype": "float8"}, "embed_dtype"),
                       ({"input": "a", "endianness": "middle"}, "endianness"),
                       ({"input": "a", "embed_dtype": "float16", "dtype": "bfloat16"}, "embed_dtype"),
                       ({"input": "a", "truncate_prompt_tokens": 0}, "truncate_prompt_tokens"),
                       ({"input": "a", "priority": 3}, "priority"),
                       ({"input": "a", "use_activation": False}, "use_activation"),
                       ({"input": "a", "encoding_format": "hex"}, "encoding_format")):
        r = _post(server, "/v1/embeddings", doc)
        assert r.status_code == 400, (doc, r.text)  # OpenAI's and vLLM's status for an invalid parameter
        assert r.json()["error"]["param"] == field, (doc, r.text)
    ok = _post(server, "/v1/embeddings", {"input": "a", "user": "u", "priority": 0, "add_special_tokens": True,
                                          "normalize": True, "padding": "do_not_pad", "cache_salt": "s",
                                          "mm_processor_kwargs": {}})
    assert ok.status_code == 200, ok.text


def test_unknown_field_lists_the_known_ones(server) -> None:
    r = _post(server, "/v1/embeddings", {"input": "a", "temperature": 1})
    assert r.status_code == 400
    err = r.json()["error"]
    assert err["param"] == "temperature"
    for known in ("input", "dimensions", "dtype", "user", "embed_dtype", "endianness", "truncate_prompt_tokens"):
        assert known in err["message"]


# -- model names -----------------------------------------------------------------------------------

def test_several_served_names(server) -> None:
    listed = httpx.get(server.url + "/v1/models").json()["data"]
    assert [m["id"] for m in listed] == list(NAMES)
    for name in NAMES:
        r = _post(server, "/v1/embeddings", {"model": name, "input": "a"})
        assert r.status_code == 200 and r.json()["model"] == NAMES[0]
    r = _post(server, "/v1/embeddings", {"model": "text-embedding-3-small", "input": "a"})
    assert r.status_code == 404
    assert "'minilm-test', 'all-minilm'" in r.json()["error"]["message"]
    assert httpx.get(server.url + "/v1/models/all-minilm").json()["id"] == "all-minilm"


@pytest.fixture(scope="module")
def hash_server():
    with ServerProcess("--model", "hash:32", "--accept-any-model", "--token-ids", "reject",
                       "--served-model-name", "h") as s:
        yield s


def test_accept_any_model(hash_server) -> None:
    import openai

    with openai.OpenAI(base_url=hash_server.url + "/v1", api_key="x", max_retries=0) as c:
        resp = c.embeddings.create(model="text-embedding-ada-002", input=["a", "b"])
    assert resp.model == "h" and len(resp.data) == 2


def test_token_ids_reject(hash_server) -> None:
    r = _post(hash_server, "/v1/embeddings", {"input": [[1, 2, 3]]})
    assert r.status_code == 400
    err = r.json()["error"]
    assert err["param"] == "input" and "check_embedding_ctx_length" in err["message"]


def test_token_ids_model_reads_the_models_ids() -> None:
    with ServerProcess("--model", "hash:16", "--token-ids", "model") as s:
        a = _post(s, "/v1/embeddings", {"input": [[200000, 5]]})
        assert a.status_code == 200, a.text  # beyond cl100k: the hash model takes any id


def test_token_ids_cl100k_out_of_vocabulary_names_the_position(server) -> None:
    r = _post(server, "/v1/embeddings", {"input": [[15339, 1917], [15339, 1917, 11, 100257]]})
    assert r.status_code == 400 and r.json()["error"]["param"] == "input[1][3]"
    r = _post(server, "/v1/embeddings", {"input": [15339, 200000]})
    assert r.status_code == 400 and r.json()["error"]["param"] == "input[1]"


def test_langchain_openai_embeddings_default_settings(server, reference, tmp_path, monkeypatch) -> None:
    """LangChain's OpenAIEmbeddings with check_embedding_ctx_length=True (its default) sends cl100k_base
    ids; read as cl100k_base they give the vectors of the texts."""
    _offline_tiktoken(tmp_path, monkeypatch)
    from langchain_openai import OpenAIEmbeddings

    lc = OpenAIEmbeddings(model=NAMES[0], base_url=server.url + "/v1", api_key="unused", max_retries=0)
    assert lc.check_embedding_ctx_length is True
    got = np.array(lc.embed_documents(TEXTS), dtype=np.float32)
    assert got.shape == reference.shape
    assert _cos(got, reference).min() >= 0.999
    query = np.array(lc.embed_query(TEXTS[1]), dtype=np.float32)
    assert _cos(query, reference[1]) >= 0.999


# -- TEI -------------------------------------------------------------------------------------------

def test_huggingface_hub_feature_extraction_at_the_root(server, reference) -> None:
    from huggingface_hub import InferenceClient

    client = InferenceClient(model=server.url)
    got = client.feature_extraction(TEXTS[0])
    np.testing.assert_allclose(np.asarray(got, dtype=np.float32).reshape(-1), reference[0], atol=1e-6)


def test_tei_embed(server, reference) -> None:
    r = _post(server, "/embed", {"inputs": TEXTS})
    assert r.status_code == 200, r.text
    np.testing.assert_allclose(np.array(r.json(), dtype=np.float32), reference, atol=1e-6)
    raw = _post(server, "/embed", {"inputs": TEXTS}, headers={"Accept": "application/octet-stream"})
    np.testing.assert_allclose(densewire.decode(raw.content, "raw", raw.headers).tensor.array, reference, atol=1e-6)
    cut = np.array(_post(server, "/embed", {"inputs": TEXTS[0], "dimensions": 32}).json(), dtype=np.float32)
    assert cut.shape == (1, 32) and abs(np.linalg.norm(cut) - 1) < 1e-5


def test_tei_errors(server) -> None:
    r = _post(server, "/embed", {"inputs": []})
    assert r.status_code == 400 and r.json()["error_type"] == "Empty"
    r = _post(server, "/embed", {"inputs": "word " * 1000, "truncate": False})
    assert r.status_code == 413 and r.json()["error_type"] == "Validation" and "inputs[0]" in r.json()["error"]
    r = _post(server, "/embed", {"inputs": 5})
    assert r.status_code == 422 and r.json()["error"].startswith("inputs:")


def test_tei_tokenize_and_info(server) -> None:
    r = _post(server, "/tokenize", {"inputs": " naïve test"})
    assert r.status_code == 200, r.text
    tokens = r.json()[0]
    assert tokens[0] == {"id": 101, "text": "[CLS]", "special": True, "start": None, "stop": None}
    assert tokens[-1]["special"] and tokens[-1]["text"] == "[SEP]"
    word = tokens[-2]
    assert word["text"] == "test" and " naïve test".encode()[word["start"]:word["stop"]] == b"test"
    info = httpx.get(server.url + "/info").json()
    assert info["model_id"] == NAMES[0] and info["max_input_length"] == 256
    assert info["model_type"] == {"embedding": {"pooling": "mean"}}


# -- Cohere ----------------------------------------------------------------------------------------

def test_cohere_client_v2(server, reference) -> None:
    import cohere

    co = cohere.ClientV2(api_key="unused", base_url=server.url)
    resp = co.embed(texts=TEXTS, model=NAMES[0], input_type="search_document",
                    embedding_types=["float", "ubinary", "binary", "base64"])
    got = np.array(resp.embeddings.float_, dtype=np.float32)
    np.testing.assert_allclose(got, reference, atol=1e-6)
    packed = np.packbits(reference > 0, axis=1)
    assert np.array(resp.embeddings.ubinary).tolist() == packed.tolist()
    assert np.array(resp.embeddings.binary).tolist() == (packed.astype(int) - 128).tolist()
    assert np.frombuffer(base64.b64decode(resp.embeddings.base64[0]), "<f4").tolist() == reference[0].tolist()
    assert resp.texts == TEXTS
    quant = co.embed(texts=TEXTS, model=NAMES[0], input_type="search_document", embedding_types=["int8", "uint8"])
    ranges = densewire.Quantization.from_json(httpx.get(server.url + "/v1/models").json()["data"][0]["quantization"])
    uint8 = np.array(quant.embeddings.uint8)
    assert np.array(quant.embeddings.int8).tolist() == (uint8 - 128).tolist()
    assert uint8.tolist() == ranges.quantize(reference, "uint8").array.tolist()
    short = co.embed(texts=TEXTS[:1], model=NAMES[1], input_type="search_query", embedding_types=["float"],
                     output_dimension=64)
    assert len(short.embeddings.float_[0]) == 64


def test_cohere_errors(server) -> None:
    import cohere

    co = cohere.ClientV2(api_key="unused", base_url=server.url)
    with pytest.raises(cohere.errors.NotFoundError):
        co.embed(texts=["a"], model="embed-v4.0", input_type="search_query", embedding_types=["float"])
    r = _post(server, "/v2/embed", {"texts": ["a"], "model": NAMES[0], "embedding_types": ["float", "float64"]})
    assert r.status_code == 400 and r.json()["message"].startswith("embedding_types[1]:")
    r = _post(server, "/v2/embed", {"texts": ["a " * 600], "truncate": "NONE", "max_tokens": 10})
    assert r.status_code == 400 and r.json()["message"].startswith("texts[0]:")


def test_cohere_truncate_start_keeps_the_end(server) -> None:
    text = "red green " + "filler " * 400 + "blue black"
    end = _post(server, "/v2/embed", {"texts": [text], "truncate": "START", "max_tokens": 4}).json()
    want = _post(server, "/v2/embed", {"texts": ["blue black"]}).json()
    np.testing.assert_allclose(end["embeddings"]["float"][0], want["embeddings"]["float"][0], atol=1e-5)
    start = _post(server, "/v2/embed", {"texts": [text], "truncate": "START"}).json()  # the last 254 tokens
    assert start["meta"]["billed_units"]["input_tokens"] == 256


def test_cohere_one_type_by_accept(server, reference) -> None:
    r = _post(server, "/v2/embed", {"texts": TEXTS, "embedding_types": ["ubinary"]},
              headers={"Accept": "application/vnd.msgpack"})
    assert r.status_code == 200, r.text
    emb = densewire.decode(r.content, "msgpack")
    assert emb.tensor.dtype == "binary" and emb.tensor.array.tolist() == np.packbits(reference > 0, axis=1).tolist()
    r = _post(server, "/v2/embed", {"texts": TEXTS, "embedding_types": ["float", "binary"]},
              headers={"Accept": "application/octet-stream"})
    assert r.status_code == 406


# -- Ollama ----------------------------------------------------------------------------------------

def test_ollama_client_embed(server, reference) -> None:
    import ollama

    client = ollama.Client(host=server.url)
    resp = client.embed(model=NAMES[1], input=TEXTS)
    got = np.array(resp.embeddings, dtype=np.float32)
    np.testing.assert_allclose(got, reference / np.linalg.norm(reference, axis=1, keepdims=True), atol=1e-6)
    assert resp.model == NAMES[1] and resp.prompt_eval_count > 0
    one = client.embed(model=NAMES[0] + ":latest", input=TEXTS[2], dimensions=16)
    assert len(one.embeddings[0]) == 16
    with pytest.raises(ollama.ResponseError) as ei:
        client.embed(model="nomic-embed-text", input="a")
    assert ei.value.status_code == 404 and "'minilm-test'" in ei.value.error


def test_ollama_embeddings_and_errors(server, reference) -> None:
    r = _post(server, "/api/embeddings", {"model": NAMES[0], "prompt": TEXTS[0]})
    assert r.status_code == 200, r.text
    np.testing.assert_allclose(np.array(r.json()["embedding"], dtype=np.float32), reference[0], atol=1e-6)
    assert _post(server, "/api/embeddings", {"model": NAMES[0], "prompt": ""}).json() == {"embedding": []}
    assert _post(server, "/api/embed", {"model": NAMES[0], "input": []}).json()["embeddings"] == []
    r = _post(server, "/api/embed", {"input": "a"})
    assert r.status_code == 400 and r.json() == {"error": "model: model is required"}
    r = _post(server, "/api/embed", {"model": NAMES[0], "input": "word " * 1000, "truncate": False})
    assert r.status_code == 400 and r.json()["error"].startswith("input[0]:")
    # Ollama reads every body as JSON: its documentation's `curl ... -d '{...}'` sends a form Content-Type
    r = httpx.post(server.url + "/api/embed", content=json.dumps({"model": NAMES[0], "input": TEXTS[0]}),
                   headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert r.status_code == 200, r.text
    np.testing.assert_allclose(np.array(r.json()["embeddings"][0], dtype=np.float32), reference[0], atol=1e-6)
    r = httpx.post(server.url + "/v1/embeddings", content=json.dumps({"input": TEXTS[0]}),
                   headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert r.status_code == 415  # densewire's own routes keep asking for application/json
    raw = _post(server, "/api/embed", {"model": NAMES[0], "input": TEXTS}, headers={"Accept": "application/octet-stream"})
    assert raw.status_code == 200 and densewire.decode(raw.content, "raw", raw.headers).tensor.array.shape == (3, 384)
