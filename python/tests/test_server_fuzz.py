"""Property test of the embeddings request parsers (hypothesis, seeded from real requests): whatever
the body (JSON documents near the real ones, raw bytes mutated from them, compressed or not) and the
headers (Accept, Accept-Encoding, Content-Type, Content-Encoding, ?format=), the answer is a 2xx or a
4xx with the OpenAI error envelope, never a 5xx. Runs the real app in-process (lifespan included).
A long run: DENSEWIRE_FUZZ_EXAMPLES=20000 pytest python/tests/test_server_fuzz.py (bench/load/RESULTS.md)."""

from __future__ import annotations

import gzip
import json
import os
import zlib
from typing import Any

import brotli
import orjson
import pytest
import zstandard
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

import densewire
from densewire._backends.hash import HashBackend
from densewire._server.app import create_app
from densewire._server.config import ServerConfig

DIMS = 8

#: Real requests, as the OpenAI SDKs and densewire's clients send them.
SEEDS: list[dict[str, Any]] = [
    {"input": "hello", "model": "hash-8"},
    {"input": ["a", "b"], "encoding_format": "base64"},
    {"input": ["a"], "encoding_format": "float", "dimensions": 4},
    {"input": [[1, 2, 3], [4]], "model": "hash-8"},
    {"input": [1, 2, 3]},
    {"input": "x", "dtype": "float16", "byteorder": "big", "encoding_format": "base64"},
    {"input": "x", "dtype": "binary", "truncate": False, "user": "u"},
    {"input": ["a", "b"], "encoding_format": "bytes", "embed_dtype": "fp8_e4m3", "endianness": "big"},
    {"input": "x y z", "encoding_format": "base64", "embed_dtype": "bfloat16", "truncate_prompt_tokens": 2,
     "truncation_side": "left", "request_id": "r"},
]
FIELDS = ["input", "model", "encoding_format", "dimensions", "user", "dtype", "byteorder", "truncate", "extra",
          "embed_dtype", "endianness", "truncate_prompt_tokens", "truncation_side", "priority"]
MEDIA = ["application/json", "application/octet-stream", "application/msgpack", "application/x-protobuf",
         "application/vnd.apache.arrow.stream", "*/*", "application/*", "text/html", "", "application/json; q=0"]
CODINGS = ["gzip", "zstd", "br", "deflate", "identity", "*", "x-gzip", "gzip;q=0", ""]

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([0, -1, 1e30, 2.5, 2**32, 2**63, "float", "base64", "float32", "bfloat16", "int8",
                     "little", "big", "hash-8", "", "\u0000", "\ud7ff", "bytes", "bytes_only", "fp8_e4m3",
                     "fp8_e5m2", "native", "left", "START", "NONE", "ubinary", "binary", "uint8"]),
    st.text(max_size=20),
)
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
    st.sampled_from(FIELDS) | st.text(max_size=5), inner, max_size=3), max_leaves=12)
documents = st.one_of(
    st.sampled_from(SEEDS),
    st.builds(lambda seed, changes, drop: {**{k: v for k, v in seed.items() if k not in drop}, **changes},
              st.sampled_from(SEEDS), st.dictionaries(st.sampled_from(FIELDS), values, max_size=3),
              st.sets(st.sampled_from(FIELDS), max_size=2)),
    values,
)


def _dumps(doc: Any) -> bytes:
    return json.dumps(doc).encode()  # json, not orjson: integers beyond 64 bits too


def _mutate(data: bytes, flips: list[tuple[int, int]], cut: int | None) -> bytes:
    b = bytearray(data)
    for pos, byte in flips:
        if b:
            b[pos % len(b)] = byte
    return bytes(b[:cut] if cut is not None else b)


bodies = st.one_of(
    documents.map(_dumps),
    st.builds(_mutate, st.sampled_from(SEEDS).map(_dumps),
              st.lists(st.tuples(st.integers(0, 200), st.integers(0, 255)), max_size=4),
              st.none() | st.integers(0, 60)),
    st.binary(max_size=64),
)


def _encode(body: bytes, coding: str) -> bytes:
    if coding == "gzip":
        return gzip.compress(body)
    if coding == "zstd":
        return zstandard.ZstdCompressor().compress(body)
    if coding == "deflate":
        return zlib.compress(body)
    if coding == "br":
        return brotli.compress(body)
    return body


@pytest.fixture(scope="module")
def client():
    cfg = ServerConfig(demo_tables=False, max_client_batch_size=8, max_body_bytes=4096)
    with TestClient(create_app(cfg, backend=HashBackend(DIMS)), raise_server_exceptions=False) as c:
        yield c


@settings(max_examples=int(os.environ.get("DENSEWIRE_FUZZ_EXAMPLES", "300")), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=bodies, accept=st.sampled_from(MEDIA) | st.text(max_size=30),
       accept_encoding=st.sampled_from(CODINGS) | st.text(max_size=20),
       content_type=st.sampled_from(["application/json", "application/json; charset=utf-8", "text/plain",
                                     "application/msgpack", "application/x+json", ""]),
       content_encoding=st.sampled_from(CODINGS), encode_it=st.booleans(),
       fmt=st.none() | st.sampled_from(["json", "raw", "msgpack", "protobuf", "arrow", "xml", ""]))
@example(body=b'{"input": "a", "dimensions": 1e30}', accept="application/json", accept_encoding="gzip",
         content_type="application/json", content_encoding="identity", encode_it=False, fmt=None)
@example(body=b'{"input": [[1, 1e30]]}', accept="*/*", accept_encoding="", content_type="application/json",
         content_encoding="gzip", encode_it=True, fmt="raw")
def test_every_request_gets_2xx_or_a_4xx_envelope(client, body: bytes, accept: str, accept_encoding: str,
                                                 content_type: str, content_encoding: str, encode_it: bool,
                                                 fmt: str | None) -> None:
    headers = {"Accept": accept, "Accept-Encoding": accept_encoding}
    if content_type:
        headers["Content-Type"] = content_type
    if content_encoding:
        headers["Content-Encoding"] = content_encoding
        if encode_it:
            body = _encode(body, content_encoding)
    headers = {k: v for k, v in headers.items() if v.isascii() and v.isprintable()}
    r = client.post("/v1/embeddings", content=body, headers=headers, params={"format": fmt} if fmt is not None else None)
    assert r.status_code < 500, (r.status_code, r.content[:300])
    if r.status_code >= 400:
        err = orjson.loads(r.content)["error"]
        assert err["type"] == "invalid_request_error" and err["code"] and err["message"]
    else:
        assert r.status_code == 200


#: Real requests of the other servers' routes (dialects.py), as their clients send them.
DIALECT_SEEDS: dict[str, list[dict[str, Any]]] = {
    "/embed": [{"inputs": "a"}, {"inputs": ["a", "b"], "truncate": True, "normalize": False},
               {"inputs": [[1, 2]], "truncation_direction": "Left", "dimensions": 4}],
    "/": [{"inputs": "hello"}],
    "/tokenize": [{"inputs": ["a b"], "add_special_tokens": False}],
    "/v2/embed": [{"texts": ["a"], "model": "hash-8", "input_type": "search_query",
                   "embedding_types": ["float", "binary", "ubinary", "base64"]},
                  {"texts": ["a b c"], "truncate": "START", "max_tokens": 2, "output_dimension": 4}],
    "/api/embed": [{"model": "hash-8", "input": ["a", "b"], "truncate": False, "dimensions": 4}],
    "/api/embeddings": [{"model": "hash-8", "prompt": "a", "options": {}}],
    "/v2/models/hash-8/infer": [  # KServe v2 (SPEC.md 19.5); its errors are {"error": ...} too
        {"id": "r", "inputs": [{"name": "text", "shape": [2], "datatype": "BYTES", "data": ["a", "b c"]}],
         "outputs": [{"name": "embedding", "parameters": {"binary_data": True, "datatype": "INT8"}}]},
        {"inputs": [{"name": "text", "shape": [1, 1], "datatype": "BYTES", "data": [["x"]]}],
         "parameters": {"binary_data_output": False, "datatype": "BF16", "dimensions": 4, "truncate": True}},
    ],
}
DIALECT_FIELDS = ["inputs", "truncate", "normalize", "truncation_direction", "dimensions", "prompt_name",
                  "add_special_tokens", "texts", "model", "input_type", "embedding_types", "output_dimension",
                  "max_tokens", "input", "prompt", "options", "keep_alive", "outputs", "parameters", "id",
                  "name", "shape", "datatype", "data", "binary_data", "binary_data_output", "binary_data_size"]
dialect_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
    st.sampled_from(DIALECT_FIELDS) | st.text(max_size=5), inner, max_size=3), max_leaves=12)


def _dialect_document(route: str) -> st.SearchStrategy[Any]:
    seeds = DIALECT_SEEDS[route]
    return st.one_of(
        st.sampled_from(seeds),
        st.builds(lambda seed, changes, drop: {**{k: v for k, v in seed.items() if k not in drop}, **changes},
                  st.sampled_from(seeds), st.dictionaries(st.sampled_from(DIALECT_FIELDS), dialect_values, max_size=3),
                  st.sets(st.sampled_from(DIALECT_FIELDS), max_size=2)),
        dialect_values,
    )


def _error_shape(route: str, doc: Any) -> bool:
    if route in ("/embed", "/", "/tokenize"):
        return isinstance(doc.get("error"), str) and isinstance(doc.get("error_type"), str)
    if route == "/v2/embed":
        return isinstance(doc.get("message"), str)
    return isinstance(doc.get("error"), str)


@settings(max_examples=int(os.environ.get("DENSEWIRE_FUZZ_EXAMPLES", "300")), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), route=st.sampled_from(sorted(DIALECT_SEEDS)),
       accept=st.sampled_from(MEDIA) | st.text(max_size=30), mutate=st.booleans())
def test_dialect_routes_answer_2xx_or_their_own_4xx(client, data, route: str, accept: str, mutate: bool) -> None:
    body = _dumps(data.draw(_dialect_document(route)))
    if mutate:
        body = _mutate(body, data.draw(st.lists(st.tuples(st.integers(0, 200), st.integers(0, 255)), max_size=4)),
                       data.draw(st.none() | st.integers(0, 60)))
    headers = {"Content-Type": "application/json"}
    if accept.isascii() and accept.isprintable():
        headers["Accept"] = accept
    r = client.post(route, content=body, headers=headers)
    assert r.status_code < 500, (route, r.status_code, r.content[:300])
    if r.status_code >= 400:
        assert _error_shape(route, orjson.loads(r.content)), (route, r.content[:300])
    else:
        assert r.status_code == 200


KSERVE_HEADER = orjson.dumps({"inputs": [{"name": "text", "shape": [2], "datatype": "BYTES",
                                          "parameters": {"binary_data_size": 13}}],
                              "outputs": [{"name": "embedding", "parameters": {"binary_data": True}}]})
KSERVE_BLOB = b"\x01\x00\x00\x00a\x04\x00\x00\x00b c!"


@settings(max_examples=int(os.environ.get("DENSEWIRE_FUZZ_EXAMPLES", "300")), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(flips=st.lists(st.tuples(st.integers(0, 200), st.integers(0, 255)), max_size=4),
       cut=st.none() | st.integers(0, 120), length=st.none() | st.integers(-2, 200) | st.text(max_size=6))
def test_kserve_binary_extension_bodies_answer_2xx_or_4xx(client, flips, cut, length) -> None:
    """The binary tensor extension (a JSON header, then BYTES blobs) mutated, cut, and given any
    Inference-Header-Content-Length: a 200 or a KServe 4xx, never a 5xx."""
    body = _mutate(KSERVE_HEADER + KSERVE_BLOB, flips, cut)
    headers = {"Content-Type": "application/octet-stream"}
    value = str(len(KSERVE_HEADER)) if length is None else str(length)
    if value.isascii() and value.isprintable():
        headers["Inference-Header-Content-Length"] = value
    r = client.post("/v2/models/hash-8/infer", content=body, headers=headers)
    assert r.status_code < 500, (r.status_code, r.content[:300])
    if r.status_code >= 400:
        assert isinstance(orjson.loads(r.content).get("error"), str), r.content[:300]
    else:
        assert r.status_code == 200
        out = densewire.decode_kserve(r.content, r.headers).outputs["embedding"]  # JSON or binary, as asked
        assert out.tensor.shape[1] == DIMS
