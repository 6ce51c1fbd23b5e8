"""--cors-origins: pages on other origins may call the API and read its Densewire-* headers and ETag
(the real server, a process; the browser side is typescript/test/cors.test.ts in Chromium)."""

from __future__ import annotations

import httpx
import pytest

from server_support import ServerProcess

ORIGIN = "https://maps.example.com"


@pytest.fixture(scope="module")
def server():
    with ServerProcess("--model", "hash:8", "--no-demo-tables", "--table", "t=demo:rows=5", "--api-key", "k1",
                       "--public-tables", "--cors-origins", f"{ORIGIN},http://localhost:5173",
                       "--table-compression", "off") as s:
        yield s


def _list(header: str) -> set[str]:
    return {h.strip().lower() for h in header.split(",")}


def test_preflight_for_a_conditional_table_request(server) -> None:
    r = httpx.options(server.url + "/v1/tables/t", headers={
        "Origin": ORIGIN, "Access-Control-Request-Method": "GET", "Access-Control-Request-Headers": "if-none-match"})
    assert r.status_code == 200
    assert r.headers["access-control-allow-origin"] == ORIGIN
    assert "if-none-match" in _list(r.headers["access-control-allow-headers"])
    assert int(r.headers["access-control-max-age"]) > 0


def test_preflight_for_an_embeddings_request_with_a_key_and_a_raw_body(server) -> None:
    r = httpx.options(server.url + "/v1/embeddings", headers={
        "Origin": "http://localhost:5173", "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization, content-type, densewire-shape, densewire-dtype"})
    assert r.status_code == 200
    assert r.headers["access-control-allow-origin"] == "http://localhost:5173"
    assert {"authorization", "content-type", "densewire-shape", "densewire-dtype"} <= _list(
        r.headers["access-control-allow-headers"])
    assert "POST" in r.headers["access-control-allow-methods"]


def test_a_table_exposes_the_headers_its_decoders_need(server) -> None:
    r = httpx.get(server.url + "/v1/tables/t?format=protobuf", headers={"Origin": ORIGIN})
    assert r.status_code == 200
    assert r.headers["access-control-allow-origin"] == ORIGIN
    exposed = _list(r.headers["access-control-expose-headers"])
    assert {"etag", "densewire-columns", "densewire-rows", "densewire-table", "content-encoding"} <= exposed
    assert {"accept", "accept-encoding", "origin"} <= _list(r.headers["vary"])  # caches keep origins apart
    assert r.headers["timing-allow-origin"] == ORIGIN  # Resource Timing sizes, for /demo on another origin
    # a revalidation answered 304 still carries the CORS headers, or the browser refuses it
    again = httpx.get(server.url + "/v1/tables/t?format=protobuf",
                      headers={"Origin": ORIGIN, "If-None-Match": r.headers["etag"]})
    assert again.status_code == 304 and again.headers["access-control-allow-origin"] == ORIGIN


def test_embeddings_expose_shape_and_dtype(server) -> None:
    r = httpx.post(server.url + "/v1/embeddings", json={"input": ["a", "b"]}, headers={
        "Origin": ORIGIN, "Authorization": "Bearer k1", "Accept": "application/octet-stream"})
    assert r.status_code == 200 and r.headers["densewire-shape"] == "2,8"
    assert {"densewire-shape", "densewire-dtype", "densewire-byteorder"} <= _list(r.headers["access-control-expose-headers"])
    # errors too are readable by the page: a 401 carries the CORS headers and its JSON message
    r = httpx.post(server.url + "/v1/embeddings", json={"input": "a"}, headers={"Origin": ORIGIN})
    assert r.status_code == 401 and r.headers["access-control-allow-origin"] == ORIGIN
    assert "API key" in r.json()["error"]["message"]


def test_other_origins_get_no_cors_headers(server) -> None:
    r = httpx.options(server.url + "/v1/tables/t", headers={
        "Origin": "https://elsewhere.example", "Access-Control-Request-Method": "GET"})
    assert r.status_code == 400 and "access-control-allow-origin" not in r.headers
    r = httpx.get(server.url + "/v1/tables/t", headers={"Origin": "https://elsewhere.example"})
    assert r.status_code == 200 and "access-control-allow-origin" not in r.headers  # the browser blocks it
    assert "timing-allow-origin" not in r.headers


def test_without_the_flag_there_is_no_cors() -> None:
    with ServerProcess("--model", "hash:8", "--no-demo-tables", "--table", "t=demo:rows=5",
                       "--table-compression", "off") as s:
        r = httpx.get(s.url + "/v1/tables/t", headers={"Origin": ORIGIN})
        assert r.status_code == 200 and "access-control-allow-origin" not in r.headers
        r = httpx.options(s.url + "/v1/tables/t", headers={"Origin": ORIGIN, "Access-Control-Request-Method": "GET"})
        assert r.status_code == 405


def test_kserve_binary_responses_are_readable_by_a_page(server) -> None:
    """A page sending the binary tensor extension is allowed its header, and can read the answer's
    Inference-Header-Content-Length, without which it cannot find where the blobs start (SPEC.md 19.3)."""
    r = httpx.options(server.url + "/v2/models/hash-8/infer", headers={
        "Origin": ORIGIN, "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization, content-type, inference-header-content-length"})
    assert r.status_code == 200 and "inference-header-content-length" in _list(r.headers["access-control-allow-headers"])
    doc = {"inputs": [{"name": "text", "shape": [1], "datatype": "BYTES", "data": ["a"]}],
           "parameters": {"binary_data_output": True}}
    r = httpx.post(server.url + "/v2/models/hash-8/infer", json=doc, headers={"Origin": ORIGIN,
                                                                             "Authorization": "Bearer k1"})
    assert r.status_code == 200 and r.headers["access-control-allow-origin"] == ORIGIN
    assert "inference-header-content-length" in _list(r.headers["access-control-expose-headers"])
