"""densewire.from_openai on what the official OpenAI SDK returns from a real densewire serve, and
decode_base64 on the SDK's per-row strings."""

from __future__ import annotations

import numpy as np
import openai
import pytest

import densewire
from server_support import ServerProcess

TEXTS = [f"an embedding request, row {i}" for i in range(7)]


@pytest.fixture(scope="module")
def server():
    with ServerProcess("--model", "hash:96", "--served-model-name", "dw-hash") as s:
        yield s


@pytest.fixture(scope="module")
def reference(server) -> np.ndarray:
    with densewire.Client(server.url) as c:
        return c.embed(TEXTS)


@pytest.fixture(scope="module")
def sdk(server):
    with openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0) as c:
        yield c


def test_sdk_response_with_base64_strings(sdk, reference) -> None:
    resp = sdk.embeddings.create(model="dw-hash", input=TEXTS, encoding_format="base64")
    assert isinstance(resp.data[0].embedding, str)  # the SDK leaves them alone when asked for base64
    got = densewire.from_openai(resp)
    assert got.dtype == np.float32 and got.shape == (7, 96)
    assert got.tobytes() == reference.tobytes()
    # one string per row: decode_base64 without a shape is that row's vector
    assert densewire.decode_base64(resp.data[3].embedding).tobytes() == reference[3].tobytes()


def test_sdk_response_with_float_lists(sdk, reference) -> None:
    resp = sdk.embeddings.create(model="dw-hash", input=TEXTS)  # the SDK decodes base64 to floats itself
    assert isinstance(resp.data[0].embedding, list)
    assert densewire.from_openai(resp).tobytes() == reference.tobytes()


def test_raw_json_as_bytes_str_and_dict(sdk, reference) -> None:
    raw = sdk.embeddings.with_raw_response.create(model="dw-hash", input=TEXTS, encoding_format="base64")
    body = raw.http_response.content
    assert densewire.from_openai(body).tobytes() == reference.tobytes()
    assert densewire.from_openai(body.decode()).tobytes() == reference.tobytes()
    assert densewire.from_openai(raw.parse().model_dump(warnings=False)).tobytes() == reference.tobytes()


def test_rows_are_put_in_index_order(reference) -> None:
    rows = [{"object": "embedding", "index": i, "embedding": densewire.encode_base64(reference[i])}
            for i in (2, 0, 1)]
    got = densewire.from_openai({"object": "list", "data": rows})
    assert got.tobytes() == reference[:3].tobytes()


def test_bad_input_says_what_and_where(reference) -> None:
    good = densewire.encode_base64(reference[0])
    with pytest.raises(densewire.InvalidBase64Error) as info:
        densewire.from_openai({"data": [{"index": 0, "embedding": good}, {"index": 1, "embedding": good[:-8] + "!!!!!!!="}]})
    assert info.value.field == "data[1].embedding"
    with pytest.raises(densewire.LengthMismatchError) as info:
        densewire.from_openai({"data": [{"index": 0, "embedding": good}, {"index": 1, "embedding": good[:-8]}]})
    assert info.value.field == "data[1].embedding"
    with pytest.raises(TypeError, match="OpenAI embeddings response"):
        densewire.from_openai(42)
