"""The official OpenAI Python SDK, unchanged, as a client of densewire serve."""

from __future__ import annotations

import asyncio

import httpx
import numpy as np
import openai
import pytest

import densewire
from server_support import ServerProcess

DIMS = 64
KEY = "sk-test-key"
TEXTS = ["The quick brown fox", "jumps over the lazy dog", "embeddings at memory speed"]


@pytest.fixture(scope="module")
def server():
    with ServerProcess("--model", f"hash:{DIMS}", "--api-key", KEY, "--served-model-name", "dw-hash") as s:
        yield s


@pytest.fixture(scope="module")
def reference(server) -> np.ndarray:
    r = httpx.post(server.url + "/v1/embeddings", json={"input": TEXTS},
                   headers={"Accept": "application/octet-stream", "Authorization": f"Bearer {KEY}"})
    assert r.status_code == 200, r.text
    return densewire.decode(r.content, "raw", r.headers).tensor.array.copy()


@pytest.fixture(scope="module")
def client(server):
    with openai.OpenAI(base_url=server.url + "/v1", api_key=KEY, max_retries=0) as c:
        yield c


def test_default_base64(client, reference) -> None:
    resp = client.embeddings.create(model="dw-hash", input=TEXTS)  # the SDK asks for base64 itself
    assert resp.model == "dw-hash"
    assert [d.index for d in resp.data] == [0, 1, 2]
    got = np.array([d.embedding for d in resp.data], dtype=np.float32)
    assert got.tobytes() == reference.tobytes()
    assert resp.usage.prompt_tokens == resp.usage.total_tokens > 0


def test_float(client, reference) -> None:
    resp = client.embeddings.create(model="dw-hash", input=TEXTS, encoding_format="float")
    got = np.array([d.embedding for d in resp.data], dtype=np.float32)
    assert got.tobytes() == reference.tobytes()


def test_single_string_and_dimensions(client, reference) -> None:
    resp = client.embeddings.create(model="dw-hash", input=TEXTS[1], dimensions=16)
    got = np.array(resp.data[0].embedding, dtype=np.float32)
    cut = reference[1, :16]
    np.testing.assert_allclose(got, cut / np.linalg.norm(cut), rtol=1e-6, atol=1e-7)


def test_token_ids(client) -> None:
    one = client.embeddings.create(model="dw-hash", input=[5, 6, 7])
    many = client.embeddings.create(model="dw-hash", input=[[5, 6, 7], [8, 9]])
    assert len(one.data) == 1 and len(many.data) == 2
    assert one.data[0].embedding == many.data[0].embedding
    assert len(many.data[1].embedding) == DIMS


def test_models_list(client) -> None:
    models = client.models.list()
    assert [m.id for m in models.data] == ["dw-hash"]
    assert client.models.retrieve("dw-hash").id == "dw-hash"


def test_errors_map_to_sdk_exceptions(client, server) -> None:
    with pytest.raises(openai.NotFoundError) as ei:
        client.embeddings.create(model="text-embedding-3-small", input="a")
    assert ei.value.code == "not_found" and ei.value.param == "model"
    with pytest.raises(openai.BadRequestError) as ei2:  # 400, as OpenAI and vLLM answer an invalid parameter
        client.embeddings.create(model="dw-hash", input="a", dimensions=DIMS * 2)
    assert ei2.value.code == "invalid_field" and ei2.value.param == "dimensions"
    assert ei2.value.body["type"] == "invalid_request_error"
    # the model is judged first: an unserved model with OpenAI's 1536 dimensions is the 404 naming it
    with pytest.raises(openai.NotFoundError) as ei3:
        client.embeddings.create(model="text-embedding-3-small", input="a", dimensions=1536)
    assert ei3.value.param == "model" and "text-embedding-3-small" in str(ei3.value)
    with pytest.raises(openai.AuthenticationError):
        with openai.OpenAI(base_url=server.url + "/v1", api_key="wrong", max_retries=0) as bad:
            bad.embeddings.create(model="dw-hash", input="a")


def test_extra_body_densewire_fields(client, reference) -> None:
    # densewire's own fields pass through the SDK's extra_body; float32 keeps the SDK decoding right
    resp = client.embeddings.create(model="dw-hash", input=TEXTS, extra_body={"dtype": "float32", "truncate": True})
    got = np.array([d.embedding for d in resp.data], dtype=np.float32)
    assert got.tobytes() == reference.tobytes()


def test_async_client_concurrent(server, reference) -> None:
    async def run() -> list[np.ndarray]:
        async with openai.AsyncOpenAI(base_url=server.url + "/v1", api_key=KEY, max_retries=0) as ac:
            resps = await asyncio.gather(*(ac.embeddings.create(model="dw-hash", input=TEXTS) for _ in range(20)))
        return [np.array([d.embedding for d in r.data], dtype=np.float32) for r in resps]

    for got in asyncio.run(run()):
        assert got.tobytes() == reference.tobytes()
