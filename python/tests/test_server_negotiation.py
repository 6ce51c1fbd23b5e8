"""Content negotiation: unit tests of the Accept / Accept-Encoding logic, and the full matrix of
media type x dtype x compression against a real server, every body decoded by densewire.decode."""

from __future__ import annotations

import itertools

import httpx
import numpy as np
import pytest

import densewire
from densewire import NotAcceptableError
from densewire._server.negotiation import negotiate_encoding, negotiate_format
from server_support import ServerProcess

TEXTS = [f"text number {i} with some words" for i in range(40)]
DIMS = 96
MEDIA = {
    "application/json": "json",
    "application/octet-stream": "raw",
    "application/vnd.msgpack": "msgpack",
    "application/msgpack": "msgpack",
    "application/x-msgpack": "msgpack",
    "application/protobuf": "protobuf",
    "application/x-protobuf": "protobuf",
    "application/vnd.apache.arrow.stream": "arrow",
}
DTYPES = ("float32", "float16", "bfloat16", "binary")
CODINGS = ("identity", "gzip", "br", "zstd")


# -- unit: Accept ---------------------------------------------------------------------------------
@pytest.mark.parametrize("accept, expected", [
    (None, "json"),
    ("", "json"),
    ("*/*", "json"),
    ("application/*", "json"),
    ("application/octet-stream", "raw"),
    ("application/x-msgpack", "msgpack"),
    ("application/x-protobuf", "protobuf"),
    ("application/vnd.apache.arrow.stream", "arrow"),
    ("Application/Octet-Stream; charset=binary", "raw"),
    ("application/json;q=0.5, application/octet-stream", "raw"),
    ("application/json;q=0.9, application/vnd.msgpack;q=0.9", "json"),  # tie: server order
    ("application/vnd.msgpack;q=0.9, application/protobuf;q=0.9", "msgpack"),
    ("*/*;q=0.1, application/protobuf", "protobuf"),
    ("application/*;q=0.2, application/json;q=0", "raw"),  # q=0 excludes; more specific wins
    ("text/html, application/vnd.apache.arrow.stream;q=0.3", "arrow"),
    ("application/json;q=bogus, application/octet-stream;q=0.1", "raw"),  # malformed range ignored
    ("application/msgpack;q=0.4, application/vnd.msgpack;q=0.8, application/octet-stream;q=0.7", "msgpack"),
])
def test_accept(accept: str | None, expected: str) -> None:
    assert negotiate_format(accept) == expected


@pytest.mark.parametrize("accept", ["text/html", "application/json;q=0, application/*;q=0", "image/*",
                                    "*/*;q=0", "application/xml"])
def test_accept_nothing_fits(accept: str) -> None:
    with pytest.raises(NotAcceptableError) as ei:
        negotiate_format(accept)
    assert ei.value.field == "Accept"
    for mt in densewire.MEDIA_TYPES.values():
        assert mt in ei.value.message


def test_format_param_overrides_accept() -> None:
    assert negotiate_format("application/json", "arrow") == "arrow"
    assert negotiate_format("text/html", "RAW") == "raw"
    with pytest.raises(NotAcceptableError) as ei:
        negotiate_format("application/json", "xml")
    assert ei.value.field == "format"


@pytest.mark.parametrize("header, expected", [
    (None, None),
    ("", None),
    ("identity", None),
    ("gzip", "gzip"),
    ("gzip, deflate, br", "br"),
    ("gzip, deflate, br, zstd", "zstd"),
    ("zstd;q=0.5, gzip", "gzip"),
    ("br;q=0, gzip;q=0.1", "gzip"),
    ("*", "zstd"),
    ("*;q=0.5, br;q=0", "zstd"),
    ("deflate", None),
    ("gzip;q=0.5, identity", None),
    ("x-gzip", "gzip"),
])
def test_accept_encoding(header: str | None, expected: str | None) -> None:
    assert negotiate_encoding(header) == expected


# -- HTTP matrix ----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def server():
    with ServerProcess("--model", f"hash:{DIMS}", "--compress-min-bytes", "64") as s:
        yield s


@pytest.fixture(scope="module")
def reference(server: ServerProcess) -> np.ndarray:
    r = httpx.post(server.url + "/v1/embeddings", json={"input": TEXTS},
                   headers={"Accept": "application/octet-stream"})
    assert r.status_code == 200, r.text
    emb = densewire.decode(r.content, "raw", r.headers)
    assert emb.tensor.dtype == "float32" and emb.tensor.shape == (len(TEXTS), DIMS)
    return emb.tensor.array.copy()


def _bits(a: np.ndarray) -> bytes:
    return np.ascontiguousarray(a).tobytes()


@pytest.fixture(scope="module")
def client():
    with httpx.Client(timeout=30) as c:
        yield c


@pytest.mark.parametrize("media, dtype, coding", list(itertools.product(MEDIA, DTYPES, CODINGS)))
def test_matrix(server, reference, client, media: str, dtype: str, coding: str) -> None:
    fmt = MEDIA[media]
    body = {"input": TEXTS, "dtype": dtype, "model": f"hash:{DIMS}"}
    encodings = ["float", "base64"] if fmt == "json" else ["base64"]
    expected = densewire.convert(densewire.Tensor.from_array(reference), dtype)
    for enc in encodings:
        body["encoding_format"] = enc
        r = client.post(server.url + "/v1/embeddings", json=body,
                        headers={"Accept": media, "Accept-Encoding": coding})
        assert r.status_code == 200, r.text
        assert r.headers["vary"] == "Accept, Accept-Encoding"
        assert r.headers["content-type"].split(";")[0] == densewire.MEDIA_TYPES[fmt]
        if coding == "identity":
            assert "content-encoding" not in r.headers
        else:
            assert r.headers["content-encoding"] == coding
        emb = densewire.decode(r.content, fmt, r.headers)
        assert emb.tensor.dtype == dtype
        assert emb.tensor.shape == (len(TEXTS), DIMS)
        assert _bits(emb.tensor.array) == _bits(expected.array), (media, dtype, coding, enc)
        assert emb.usage is not None and emb.usage.prompt_tokens > 0
        assert emb.model


def test_json_big_endian_base64(server, reference, client) -> None:
    r = client.post(server.url + "/v1/embeddings",
                    json={"input": TEXTS, "encoding_format": "base64", "byteorder": "big"})
    assert r.status_code == 200
    doc = r.json()
    assert doc["byteorder"] == "big"
    emb = densewire.decode(r.content, "json")
    assert _bits(emb.tensor.array) == _bits(reference)


def test_format_query_parameter(server, reference, client) -> None:
    for fmt in densewire.FORMATS:
        r = client.post(server.url + f"/v1/embeddings?format={fmt}", json={"input": TEXTS},
                        headers={"Accept": "application/json"})
        assert r.status_code == 200
        assert r.headers["content-type"].split(";")[0] == densewire.MEDIA_TYPES[fmt]
        assert _bits(densewire.decode(r.content, fmt, r.headers).tensor.array) == _bits(reference)


def test_q_values_over_http(server, client) -> None:
    r = client.post(server.url + "/v1/embeddings", json={"input": "x"},
                    headers={"Accept": "application/json;q=0.2, application/vnd.msgpack;q=0.8, */*;q=0.1"})
    assert r.headers["content-type"] == "application/vnd.msgpack"


def test_not_acceptable_over_http(server, client) -> None:
    r = client.post(server.url + "/v1/embeddings", json={"input": "x"}, headers={"Accept": "text/csv"})
    assert r.status_code == 406
    assert r.headers["content-type"] == "application/json"
    assert r.headers["vary"] == "Accept, Accept-Encoding"
    err = r.json()["error"]
    assert err["code"] == "not_acceptable" and err["param"] == "Accept"
    assert "application/vnd.apache.arrow.stream" in err["message"]


def test_small_responses_are_not_compressed(server, client) -> None:
    r = client.post(server.url + "/v1/embeddings", json={"input": "x", "dtype": "binary"},
                    headers={"Accept": "application/octet-stream", "Accept-Encoding": "zstd"})
    assert r.status_code == 200
    assert "content-encoding" not in r.headers  # 12 bytes < --compress-min-bytes 64


def test_dimensions_truncate_and_renormalise(server, reference, client) -> None:
    r = client.post(server.url + "/v1/embeddings", json={"input": TEXTS, "dimensions": 10},
                    headers={"Accept": "application/octet-stream"})
    got = densewire.decode(r.content, "raw", r.headers).tensor.array
    cut = reference[:, :10]
    want = cut / np.linalg.norm(cut, axis=1, keepdims=True)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, rtol=1e-6)


def test_duplicate_and_mixed_inputs_keep_order(server, reference, client) -> None:
    texts = [TEXTS[3], TEXTS[1], TEXTS[3], TEXTS[0]]
    r = client.post(server.url + "/v1/embeddings", json={"input": texts},
                    headers={"Accept": "application/octet-stream"})
    got = densewire.decode(r.content, "raw", r.headers).tensor.array
    assert _bits(got) == _bits(reference[[3, 1, 3, 0]])
