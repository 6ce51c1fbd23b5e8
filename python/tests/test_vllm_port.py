# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
#
# Ported from vllm-project/vllm (Apache License 2.0, https://www.apache.org/licenses/LICENSE-2.0):
#   tests/entrypoints/pooling/embed/test_online.py             at 00bd1493b3e82d6c13c68ee8a0e1c5a96707e190
#   tests/entrypoints/pooling/embed/test_online_dimensions.py  at 27437309f7d9b411bf938315906d4f81d1bff83e
#   tests/entrypoints/pooling/basic/test_truncation.py         at 1711f0da91cefaccba52d3af38e2918798234c82
#
# What was changed (densewire, issue 27; SPEC.md 6.3 lists the deliberate differences):
# - The server is `densewire serve` on the built-in all-MiniLM-L6-v2 (384 dimensions, 256 tokens), named
#   MODEL_NAME with --served-model-name, started by server_support.ServerProcess; vLLM's RemoteOpenAIServer,
#   --runner/--dtype/--enforce-eager flags and the ROCm settings are gone. vLLM's models (multilingual-e5-small,
#   snowflake-arctic-embed-m-v1.5, all-MiniLM-L12-v2) are replaced by MiniLM-L6: vLLM's --max-model-len 128
#   is `--backend-option max_tokens=128`, its `--hf_overrides '{"matryoshka_dimensions":[256]}'` is
#   `--matryoshka-dimensions 256`.
# - The "hf_model" reference (sentence-transformers on torch) is densewire's numpy engine in this process,
#   which tests/test_backends_bert.py checks against sentence-transformers' own vectors; vectors are compared
#   by cosine similarity as vLLM's check_embeddings_close does. Async clients are the sync ones (no
#   pytest-asyncio); fp8/bf16 rows are decoded with numpy instead of torch.
# - Token-id inputs: densewire reads them as OpenAI's cl100k_base ids (--token-ids, SPEC.md 6.1), so the ids
#   sent are tiktoken's cl100k_base encoding of the text (vLLM's test sends the e5 model's own ids), and usage
#   counts the model's tokens of the decoded text.
# - Errors: vLLM's `type` is "BadRequestError"; densewire answers OpenAI's "invalid_request_error" with its
#   `code`, `param` and a message that starts with the field. Messages are checked for their substance
#   (the bad value, vLLM's sentence) rather than for pydantic's "literal_error" wording.
# - test_use_activation: densewire answers only normalised vectors, so use_activation false is a 400 naming
#   the field (vLLM returns the unnormalised vector).
# - Not ported (routes densewire does not serve): test_chat_request (chat `messages`), the two
#   test_invocations_* (SageMaker's /invocations), test_pooling_* (/pooling), and the /tokenize half of
#   test_basic (densewire's /tokenize is TEI's).
# - The embed_dtype x endianness loops are parametrized, so each combination is its own test.
"""vLLM's embedding API tests, run against densewire serve (issue 27)."""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import sys

import httpx
import numpy as np
import openai
import pytest

from densewire._server.tokenids import CL100K_PATH
from server_support import ServerProcess

MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
EMBED_DTYPES = ("float32", "float16", "bfloat16", "fp8_e4m3", "fp8_e5m2")
ENDIANNESS = ("native", "big", "little")
input_text = "The best thing about vLLM is that it supports many different models"


# -- helpers: the parts of vLLM's test utilities these tests use -------------------------------------

def _cl100k():
    """tiktoken's cl100k_base, read from densewire's copy of the ranks (no network)."""
    import os
    import tempfile

    import tiktoken
    import tiktoken.registry

    url = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"
    cache = tempfile.mkdtemp(prefix="dw-tiktoken-")
    shutil.copy(CL100K_PATH, os.path.join(cache, hashlib.sha1(url.encode()).hexdigest()))
    old = os.environ.get("TIKTOKEN_CACHE_DIR")
    os.environ["TIKTOKEN_CACHE_DIR"] = cache
    try:
        tiktoken.registry.ENCODINGS.pop("cl100k_base", None)
        return tiktoken.get_encoding("cl100k_base")
    finally:
        if old is None:
            os.environ.pop("TIKTOKEN_CACHE_DIR", None)
        else:
            os.environ["TIKTOKEN_CACHE_DIR"] = old


def check_embeddings_close(embeddings_0_lst, embeddings_1_lst, name_0: str, name_1: str, tol: float = 1e-3) -> None:
    """vLLM's tests/models/utils.py: every pair of rows has cosine similarity >= 1 - tol."""
    assert len(embeddings_0_lst) == len(embeddings_1_lst)
    for i, (a, b) in enumerate(zip(embeddings_0_lst, embeddings_1_lst)):
        a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
        assert a.shape == b.shape, (i, a.shape, b.shape)
        sim = float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))
        assert sim >= 1 - tol, f"{name_0} vs {name_1}, row {i}: cosine {sim}"


def run_embedding_correctness_test(hf_model, inputs: list[str], vllm_outputs, dimensions: int | None = None) -> None:
    """vLLM's embed_utils: the reference vectors (cut to ``dimensions`` and renormalised) against the server's."""
    ref = np.asarray(hf_model.embed(inputs), dtype=np.float64)
    if dimensions is not None:
        ref = ref[:, :dimensions]
    ref /= np.linalg.norm(ref, axis=1, keepdims=True)
    check_embeddings_close(ref, vllm_outputs, "hf", "server", tol=1e-2)


def _decode_rows(body: bytes, items: list[dict], embed_dtype: str, endianness: str) -> list[list[float]]:
    """vLLM's decode_pooling_output / binary2tensor with numpy: each item's byte range as float32."""
    out = []
    for item in items:
        raw = body[item["start"]:item["end"]]
        out.append(_to_float32(raw, embed_dtype, endianness).tolist())
    return out


def _to_float32(raw: bytes, embed_dtype: str, endianness: str) -> np.ndarray:
    order = {"native": "=", "big": ">", "little": "<"}[endianness]
    if embed_dtype == "float32":
        return np.frombuffer(raw, dtype=order + "f4").astype(np.float32)
    if embed_dtype == "float16":
        return np.frombuffer(raw, dtype=order + "f2").astype(np.float32)
    if embed_dtype == "bfloat16":
        u16 = np.frombuffer(raw, dtype=order + "u2").astype(np.uint32)
        return (u16 << 16).view(np.float32)
    codes = np.frombuffer(raw, dtype=np.uint8)
    return _fp8_to_float32(codes, embed_dtype)


def _fp8_to_float32(codes: np.ndarray, kind: str) -> np.ndarray:
    """float8_e4m3fn / float8_e5m2 codes to float32 (finite values; the tests' vectors have no NaN)."""
    exp_bits, man_bits, bias = (4, 3, 7) if kind == "fp8_e4m3" else (5, 2, 15)
    c = codes.astype(np.int64)
    sign = np.where(c & 0x80, -1.0, 1.0)
    e = (c >> man_bits) & ((1 << exp_bits) - 1)
    m = c & ((1 << man_bits) - 1)
    normal = (1 + m / (1 << man_bits)) * np.power(2.0, e - bias)
    sub = (m / (1 << man_bits)) * 2.0 ** (1 - bias)
    return (sign * np.where(e == 0, sub, normal)).astype(np.float32)


# -- servers ------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def server():
    with ServerProcess("--model", "minilm", "--served-model-name", MODEL_NAME) as s:
        yield s


@pytest.fixture(scope="module")
def client(server):
    with openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0) as c:
        yield c


class _Reference:
    """The "hf_model" of vLLM's tests: densewire's numpy engine on the same model, in this process."""

    def __init__(self) -> None:
        from densewire._backends.registry import load_backend

        self.backend = load_backend("minilm", engine="numpy")

    def embed(self, texts: list[str]) -> np.ndarray:
        return np.asarray(self.backend.embed(list(texts)), dtype=np.float32)

    def count(self, text: str) -> int:
        return int(self.backend.count_tokens([text])[0])


@pytest.fixture(scope="module")
def hf_model():
    return _Reference()


@pytest.fixture(scope="module")
def input_tokens():
    return _cl100k().encode(input_text)


def _post(server, doc) -> httpx.Response:
    return httpx.post(server.url + "/v1/embeddings", json=doc, timeout=60)


# -- test_online.py -----------------------------------------------------------------------------------

def test_basic(server, client) -> None:
    # test /v1/models
    response = httpx.get(server.url + "/v1/models")
    model = response.json()["data"][0]["id"]
    assert model == MODEL_NAME

    models = client.models.list().data
    served_model = models[0]
    assert served_model.id == MODEL_NAME


def test_completion_request(client, hf_model, input_tokens) -> None:
    n_model_tokens = hf_model.count(input_text)
    # test input: str
    embeddings = client.embeddings.create(model=MODEL_NAME, input=input_text, encoding_format="float")
    assert len(embeddings.data) == 1
    assert len(embeddings.data[0].embedding) == 384
    assert embeddings.usage.prompt_tokens == n_model_tokens
    assert embeddings.usage.total_tokens == n_model_tokens
    run_embedding_correctness_test(hf_model, [input_text], [d.embedding for d in embeddings.data])

    # test input: list[int] (cl100k_base ids, decoded by the server, counted in the model's tokens)
    embeddings = client.embeddings.create(model=MODEL_NAME, input=input_tokens, encoding_format="float")
    assert len(embeddings.data) == 1
    assert len(embeddings.data[0].embedding) == 384
    assert embeddings.usage.prompt_tokens == n_model_tokens
    assert embeddings.usage.total_tokens == n_model_tokens
    run_embedding_correctness_test(hf_model, [input_text], [d.embedding for d in embeddings.data])


def test_completion_request_batched(client, hf_model, input_tokens) -> None:
    N = 10
    input_texts = [input_text] * N
    n_model_tokens = hf_model.count(input_text)

    # test input: list[str]
    embeddings = client.embeddings.create(model=MODEL_NAME, input=input_texts, encoding_format="float")
    assert len(embeddings.data) == N
    assert len(embeddings.data[0].embedding) == 384
    assert embeddings.usage.prompt_tokens == n_model_tokens * N
    assert embeddings.usage.total_tokens == n_model_tokens * N
    run_embedding_correctness_test(hf_model, input_texts, [d.embedding for d in embeddings.data])

    # test list[list[int]]
    embeddings = client.embeddings.create(model=MODEL_NAME, input=[input_tokens] * N, encoding_format="float")
    assert len(embeddings.data) == N
    assert len(embeddings.data[0].embedding) == 384
    assert embeddings.usage.prompt_tokens == n_model_tokens * N
    assert embeddings.usage.total_tokens == n_model_tokens * N
    run_embedding_correctness_test(hf_model, input_texts, [d.embedding for d in embeddings.data])


def test_truncate_prompt_tokens(client) -> None:
    input_texts = ["Como o Brasil pode fomentar o desenvolvimento de modelos de IA?"]

    # test single embedding
    embeddings = client.embeddings.create(model=MODEL_NAME, input=input_texts,
                                          extra_body={"truncate_prompt_tokens": 10})
    assert len(embeddings.data) == 1
    assert len(embeddings.data[0].embedding) == 384
    assert embeddings.usage.prompt_tokens == 10
    assert embeddings.usage.total_tokens == 10

    ids = _cl100k().encode(input_texts[0])
    embeddings = client.embeddings.create(model=MODEL_NAME, input=ids, extra_body={"truncate_prompt_tokens": 10})
    assert len(embeddings.data) == 1
    assert len(embeddings.data[0].embedding) == 384
    assert embeddings.usage.prompt_tokens == 10
    assert embeddings.usage.total_tokens == 10

    # invalid_truncate_prompt_tokens
    with pytest.raises(openai.BadRequestError) as err:
        client.embeddings.create(model=MODEL_NAME, input=input_texts, extra_body={"truncate_prompt_tokens": 8193})
    message = err.value.response.json()["error"]["message"]
    assert "truncate_prompt_tokens value is greater than max_model_len" in message, message


def test_base64_embedding(hf_model, client) -> None:
    input_texts = ["Hello my name is", "The best thing about vLLM is that it supports many different models"]

    responses_float = client.embeddings.create(input=input_texts, model=MODEL_NAME, encoding_format="float")
    float_data = [d.embedding for d in responses_float.data]
    run_embedding_correctness_test(hf_model, input_texts, float_data)

    responses_base64 = client.embeddings.create(input=input_texts, model=MODEL_NAME, encoding_format="base64")
    base64_data = [np.frombuffer(base64.b64decode(d.embedding), dtype="float32").tolist()
                   for d in responses_base64.data]
    run_embedding_correctness_test(hf_model, input_texts, base64_data)

    # Default response is float32 decoded from base64 by OpenAI Client
    responses_default = client.embeddings.create(input=input_texts, model=MODEL_NAME)
    default_data = [d.embedding for d in responses_default.data]
    run_embedding_correctness_test(hf_model, input_texts, default_data)


@pytest.fixture(scope="module")
def float_data(client) -> list[list[float]]:
    responses_float = client.embeddings.create(input=[input_text] * 3, model=MODEL_NAME, encoding_format="float")
    return [d.embedding for d in responses_float.data]


@pytest.mark.parametrize("endianness", ENDIANNESS)
@pytest.mark.parametrize("embed_dtype", EMBED_DTYPES)
def test_base64_embed_dtype_and_endianness(server, float_data, embed_dtype: str, endianness: str) -> None:
    responses_base64 = _post(server, {"model": MODEL_NAME, "input": [input_text] * 3, "encoding_format": "base64",
                                      "embed_dtype": embed_dtype, "endianness": endianness})
    assert responses_base64.status_code == 200, responses_base64.text
    base64_data = [_to_float32(base64.b64decode(d["embedding"]), embed_dtype, endianness).tolist()
                   for d in responses_base64.json()["data"]]
    check_embeddings_close(float_data, base64_data, "float_data", "base64_data", tol=1e-2)


@pytest.mark.parametrize("endianness", ENDIANNESS)
@pytest.mark.parametrize("embed_dtype", EMBED_DTYPES)
def test_bytes_embed_dtype_and_endianness(server, float_data, embed_dtype: str, endianness: str) -> None:
    responses_bytes = _post(server, {"model": MODEL_NAME, "input": [input_text] * 3, "encoding_format": "bytes",
                                     "embed_dtype": embed_dtype, "endianness": endianness})
    assert responses_bytes.status_code == 200, responses_bytes.text
    metadata = json.loads(responses_bytes.headers["metadata"])
    bytes_data = _decode_rows(responses_bytes.content, metadata["data"], embed_dtype, endianness)
    check_embeddings_close(float_data, bytes_data, "float_data", "bytes_data", tol=1e-2)


@pytest.mark.parametrize("endianness", ENDIANNESS)
@pytest.mark.parametrize("embed_dtype", EMBED_DTYPES)
def test_bytes_only_embed_dtype_and_endianness(server, client, embed_dtype: str, endianness: str) -> None:
    input_texts = ["The best thing about vLLM is that it supports many different models"] * 2
    responses_float = client.embeddings.create(input=input_texts, model=MODEL_NAME, encoding_format="float")
    float_data = [d.embedding for d in responses_float.data]
    embedding_size = len(float_data[0])

    responses_bytes = _post(server, {"model": MODEL_NAME, "input": input_texts, "encoding_format": "bytes_only",
                                     "embed_dtype": embed_dtype, "endianness": endianness})
    assert responses_bytes.status_code == 200, responses_bytes.text
    assert "metadata" not in responses_bytes.headers
    size = len(responses_bytes.content) // len(input_texts)
    items = [{"start": i * size, "end": (i + 1) * size, "shape": [embedding_size]} for i in range(len(input_texts))]
    bytes_data = _decode_rows(responses_bytes.content, items, embed_dtype, endianness)
    assert all(len(row) == embedding_size for row in bytes_data)
    check_embeddings_close(float_data, bytes_data, "float_data", "bytes_data", tol=1e-2)


@pytest.mark.parametrize("param_name", ["encoding_format", "embed_dtype", "endianness"])
def test_params_not_supported(server, param_name: str) -> None:
    responses_base64 = _post(server, {"model": MODEL_NAME, "input": input_text, "encoding_format": "base64",
                                      param_name: f"bad_{param_name}"})
    assert responses_base64.status_code == 400
    error = responses_base64.json()["error"]
    assert error["type"] == "invalid_request_error" and error["param"] == param_name
    assert f"bad_{param_name}" in error["message"]


def test_use_activation(server) -> None:
    def get_outputs(use_activation):
        doc = {"model": MODEL_NAME, "input": input_text, "encoding_format": "float"}
        if use_activation is not None:
            doc["use_activation"] = use_activation
        return _post(server, doc)

    default = get_outputs(use_activation=None)
    w_normal = get_outputs(use_activation=True)
    assert default.status_code == w_normal.status_code == 200
    a = np.array(default.json()["data"][0]["embedding"])
    b = np.array(w_normal.json()["data"][0]["embedding"])
    assert np.allclose(a, b, atol=1e-2), "Default should use normal."
    assert abs(np.linalg.norm(b) - 1) < 1e-3
    wo_normal = get_outputs(use_activation=False)  # changed: densewire answers normalised vectors only
    assert wo_normal.status_code == 400 and wo_normal.json()["error"]["param"] == "use_activation"


# -- test_online_dimensions.py ------------------------------------------------------------------------

MODELS = [
    {"name": "not-matryoshka", "args": (), "is_matryoshka": False, "matryoshka_dimensions": None},
    {"name": "matryoshka-256", "args": ("--matryoshka-dimensions", "256"), "is_matryoshka": True,
     "matryoshka_dimensions": [256]},
]


@pytest.fixture(scope="module", params=MODELS, ids=[m["name"] for m in MODELS])
def model_info(request):
    return request.param


@pytest.fixture(scope="module")
def dimensions_server(model_info):
    with ServerProcess("--model", "minilm", "--served-model-name", MODEL_NAME, *model_info["args"]) as s:
        yield s


def test_matryoshka(model_info, dimensions_server, hf_model) -> None:
    client = openai.OpenAI(base_url=dimensions_server.url + "/v1", api_key="unused", max_retries=0)
    input_texts = ["The chef prepared a delicious meal."]

    def make_request_and_correctness_test(dimensions):
        prompts = input_texts * 3
        kw = {} if dimensions is None else {"dimensions": dimensions}
        embeddings = client.embeddings.create(model=MODEL_NAME, input=prompts, encoding_format="float", **kw)
        assert len(embeddings.data) == 3
        assert len(embeddings.data[0].embedding) > 0
        assert embeddings.usage.prompt_tokens > 0
        assert embeddings.usage.total_tokens > 0
        if dimensions is not None:
            assert len(embeddings.data[0].embedding) == dimensions
        run_embedding_correctness_test(hf_model, prompts, [d.embedding for d in embeddings.data], dimensions)

    try:
        if model_info["is_matryoshka"]:
            valid_dimensions: list[int | None] = [None]
            if model_info["matryoshka_dimensions"] is not None:
                valid_dimensions += model_info["matryoshka_dimensions"][:2]
            for dimensions in valid_dimensions:
                make_request_and_correctness_test(dimensions)

            invalid_dimensions: list[int | None] = [-1]
            if model_info["matryoshka_dimensions"] is not None:
                assert 5 not in model_info["matryoshka_dimensions"]
                invalid_dimensions.append(5)
            for dimensions in invalid_dimensions:
                with pytest.raises(openai.BadRequestError):
                    make_request_and_correctness_test(dimensions)
        else:
            for dimensions in [None]:
                make_request_and_correctness_test(dimensions)
            for dimensions in [-1, 16]:
                with pytest.raises(openai.BadRequestError):
                    make_request_and_correctness_test(dimensions)
    finally:
        client.close()


# -- basic/test_truncation.py ---------------------------------------------------------------------------

max_model_len = 128

truncation_input = """Immerse yourself in the enchanting chronicle of calculus, a 
    mathematical domain that has radically transformed our comprehension of 
    change and motion. Despite its roots in ancient civilizations, the 
    formal birth of calculus predominantly occurred in the 17th century, 
    primarily under the influential guidance of Sir Isaac Newton and Gottfried 
    Wilhelm Leibniz. The earliest traces of calculus concepts are found in 
    ancient Greek mathematics,most notably in the works of Eudoxus and 
    Archimedes, around 300 BCE. They utilized the 'method of exhaustion'—a 
    technique for computing areas and volumes through the use of finite sums. 
    This methodology laid crucial foundational work for integral calculus. 
    In the 17th century, both Newton and Leibniz independently pioneered 
    calculus, each contributing unique perspectives that would shape this new 
    field."""


@pytest.fixture(scope="module")
def truncation_client():
    with ServerProcess("--model", "minilm", "--served-model-name", MODEL_NAME,
                       "--backend-option", f"max_tokens={max_model_len}") as s:
        with openai.OpenAI(base_url=s.url + "/v1", api_key="unused", max_retries=0) as c:
            yield c


def test_smaller_truncation_size(truncation_client) -> None:
    truncation_size = 10
    kwargs = {"model": MODEL_NAME, "input": truncation_input, "truncate_prompt_tokens": truncation_size}
    response = truncation_client.post("/embeddings", cast_to=object, body=kwargs)
    assert response["usage"]["prompt_tokens"] == truncation_size


def test_bigger_truncation_size(truncation_client) -> None:
    truncation_size = max_model_len + 1
    kwargs = {"model": MODEL_NAME, "input": truncation_input, "truncate_prompt_tokens": truncation_size}
    with pytest.raises(openai.BadRequestError) as err:
        truncation_client.post("/embeddings", cast_to=object, body=kwargs)
    assert err.value.status_code == 400
    error_details = err.value.response.json()["error"]
    assert error_details["type"] == "invalid_request_error"  # vLLM: "BadRequestError"
    expected_message = ("truncate_prompt_tokens value is greater than max_model_len."
                        " Please request a smaller truncation size.")
    assert expected_message in error_details["message"]
    assert error_details["param"] == "truncate_prompt_tokens"


def test_max_truncation_size(truncation_client) -> None:
    truncation_size = -1
    kwargs = {"model": MODEL_NAME, "input": truncation_input, "truncate_prompt_tokens": truncation_size}
    response = truncation_client.post("/embeddings", cast_to=object, body=kwargs)
    assert response["usage"]["prompt_tokens"] == max_model_len
