"""Error matrix: every bad request gets its status, code and param in the OpenAI envelope, never a
5xx; plus the API key."""

from __future__ import annotations

import gzip
import zlib
from typing import Any

import brotli
import httpx
import orjson
import pytest
import zstandard

from server_support import ServerProcess

MAX_INPUTS = 8
MAX_BODY = 64 * 1024
DIMS = 32


@pytest.fixture(scope="module")
def server():
    with ServerProcess("--model", f"hash:{DIMS}", "--max-client-batch-size", str(MAX_INPUTS),
                       "--max-body-bytes", str(MAX_BODY), "--served-model-name", "test-model") as s:
        yield s


@pytest.fixture(scope="module")
def client():
    with httpx.Client(timeout=30) as c:
        yield c


def J(doc: Any) -> bytes:
    return orjson.dumps(doc)


JSON = {"Content-Type": "application/json"}
LONG_TEXT = " ".join(["w"] * 10_000)  # more words (tokens) than the hash backend's 8192

# id: (body bytes, extra headers, status, code, param)
CASES: dict[str, tuple[bytes, dict[str, str], int, str, str | None]] = {
    "not_json": (b"{", JSON, 400, "malformed", None),
    "not_utf8": (b'{"input": "\xff\xfe"}', JSON, 400, "malformed", None),
    "nan_literal": (b'{"input": "a", "dimensions": NaN}', JSON, 400, "malformed", None),
    "top_level_array": (J(["a"]), JSON, 400, "malformed", None),
    "top_level_string": (J("a"), JSON, 400, "malformed", None),
    "empty_body": (b"", JSON, 400, "malformed", None),
    "missing_input": (J({"model": "test-model"}), JSON, 400, "invalid_field", "input"),
    "input_null": (J({"input": None}), JSON, 400, "invalid_field", "input"),
    "input_number": (J({"input": 5}), JSON, 400, "invalid_field", "input"),
    "input_object": (J({"input": {"a": 1}}), JSON, 400, "invalid_field", "input"),
    "input_empty_string": (J({"input": ""}), JSON, 400, "invalid_field", "input"),
    "input_empty_list": (J({"input": []}), JSON, 400, "invalid_field", "input"),
    "input_item_empty": (J({"input": ["a", ""]}), JSON, 400, "invalid_field", "input[1]"),
    "input_mixed": (J({"input": ["a", 1]}), JSON, 400, "invalid_field", "input[1]"),
    "input_item_null": (J({"input": [None]}), JSON, 400, "invalid_field", "input[0]"),
    "input_item_bool": (J({"input": [True]}), JSON, 400, "invalid_field", "input[0]"),
    "input_item_float": (J({"input": [1.5]}), JSON, 400, "invalid_field", "input[0]"),
    "token_ids_mixed": (J({"input": [1, "a"]}), JSON, 400, "invalid_field", "input[1]"),
    "token_ids_negative": (J({"input": [[1, 2], [3, -4]]}), JSON, 400, "invalid_field", "input[1][1]"),
    "token_ids_empty_row": (J({"input": [[1, 2], []]}), JSON, 400, "invalid_field", "input[1]"),
    "token_ids_row_not_list": (J({"input": [[1, 2], 3]}), JSON, 400, "invalid_field", "input[1]"),
    "token_id_huge": (b'{"input": [123456789012345678901234567890]}', JSON, 400, "invalid_field", "input[0]"),
    "too_many_inputs": (J({"input": ["a"] * (MAX_INPUTS + 1)}), JSON, 400, "invalid_field", "input"),
    "unknown_field": (J({"input": "a", "encodingformat": "float"}), JSON, 400, "invalid_field", "encodingformat"),
    "model_not_string": (J({"input": "a", "model": 3}), JSON, 400, "invalid_field", "model"),
    "model_unknown": (J({"input": "a", "model": "text-embedding-3-small"}), JSON, 404, "not_found", "model"),
    "encoding_format_bad": (J({"input": "a", "encoding_format": "hex"}), JSON, 400, "invalid_field", "encoding_format"),
    "encoding_format_number": (J({"input": "a", "encoding_format": 1}), JSON, 400, "invalid_field", "encoding_format"),
    "dimensions_zero": (J({"input": "a", "dimensions": 0}), JSON, 400, "invalid_field", "dimensions"),
    "dimensions_negative": (J({"input": "a", "dimensions": -3}), JSON, 400, "invalid_field", "dimensions"),
    "dimensions_float": (J({"input": "a", "dimensions": 1.5}), JSON, 400, "invalid_field", "dimensions"),
    "dimensions_string": (J({"input": "a", "dimensions": "8"}), JSON, 400, "invalid_field", "dimensions"),
    "dimensions_bool": (J({"input": "a", "dimensions": True}), JSON, 400, "invalid_field", "dimensions"),
    "dimensions_too_big": (J({"input": "a", "dimensions": DIMS + 1}), JSON, 400, "invalid_field", "dimensions"),
    "user_number": (J({"input": "a", "user": 1}), JSON, 400, "invalid_field", "user"),
    "dtype_unknown": (J({"input": "a", "dtype": "fp16"}), JSON, 400, "unknown_dtype", "dtype"),
    "dtype_case": (J({"input": "a", "dtype": "Float32"}), JSON, 400, "unknown_dtype", "dtype"),
    "dtype_float64": (J({"input": "a", "dtype": "float64"}), JSON, 400, "invalid_field", "dtype"),
    "dtype_number": (J({"input": "a", "dtype": 1}), JSON, 400, "invalid_field", "dtype"),
    "byteorder_bad": (J({"input": "a", "byteorder": "middle"}), JSON, 400, "invalid_field", "byteorder"),
    "truncate_string": (J({"input": "a", "truncate": "yes"}), JSON, 400, "invalid_field", "truncate"),
    "truncate_false_too_long": (J({"input": ["short", LONG_TEXT], "truncate": False}), JSON, 400,
                                "invalid_field", "input[1]"),
    "content_type_text": (J({"input": "a"}), {"Content-Type": "text/plain"}, 415, "unsupported_media_type",
                          "Content-Type"),
    "content_type_form": (b"input=a", {"Content-Type": "application/x-www-form-urlencoded"}, 415,
                          "unsupported_media_type", "Content-Type"),
    "content_encoding_compress": (J({"input": "a"}), {**JSON, "Content-Encoding": "compress"}, 415,
                                  "unsupported_media_type", "Content-Encoding"),
    "content_encoding_corrupt_br": (b"not brotli", {**JSON, "Content-Encoding": "br"}, 400,
                                    "malformed", "Content-Encoding"),
    "content_encoding_corrupt_deflate": (b"not deflate", {**JSON, "Content-Encoding": "deflate"}, 400,
                                         "malformed", "Content-Encoding"),
    "content_encoding_corrupt_gzip": (b"\x1f\x8b\x08\x00garbage", {**JSON, "Content-Encoding": "gzip"}, 400,
                                      "malformed", "Content-Encoding"),
    "content_encoding_truncated_gzip": (gzip.compress(J({"input": "a"}))[:-6], {**JSON, "Content-Encoding": "gzip"},
                                        400, "malformed", "Content-Encoding"),
    "content_encoding_corrupt_zstd": (b"\x28\xb5\x2f\xfdgarbage", {**JSON, "Content-Encoding": "zstd"}, 400,
                                      "malformed", "Content-Encoding"),
    "body_too_large": (J({"input": ["x" * 1000] * 70}), JSON, 413, "payload_too_large", None),
    "gzip_bomb": (gzip.compress(b'{"input": "' + b"a" * (MAX_BODY * 50) + b'"}'),
                  {**JSON, "Content-Encoding": "gzip"}, 413, "payload_too_large", None),
    "zstd_bomb": (zstandard.ZstdCompressor(level=19).compress(b'{"input": "' + b"a" * (MAX_BODY * 500) + b'"}'),
                  {**JSON, "Content-Encoding": "zstd"}, 413, "payload_too_large", None),
    "br_bomb": (brotli.compress(b'{"input": "' + b"a" * (MAX_BODY * 500) + b'"}', quality=5),
                {**JSON, "Content-Encoding": "br"}, 413, "payload_too_large", None),
    "deflate_bomb": (zlib.compress(b'{"input": "' + b"a" * (MAX_BODY * 50) + b'"}', 9),
                     {**JSON, "Content-Encoding": "deflate"}, 413, "payload_too_large", None),
    "accept_unsupported": (J({"input": "a"}), {**JSON, "Accept": "text/html"}, 406, "not_acceptable", "Accept"),
}


def check_envelope(r: httpx.Response, status: int, code: str, param: str | None) -> dict[str, Any]:
    assert r.status_code == status, r.text
    assert r.headers["content-type"] == "application/json"
    assert r.headers["vary"] == "Accept, Accept-Encoding"
    doc = r.json()
    assert set(doc) == {"error"}
    err = doc["error"]
    assert set(err) == {"message", "type", "param", "code", "offset"}
    assert err["type"] == "invalid_request_error"
    assert err["code"] == code
    assert err["param"] == param
    assert isinstance(err["message"], str) and err["message"]
    return err


@pytest.mark.parametrize("case", list(CASES))
def test_error(server, client, case: str) -> None:
    body, headers, status, code, param = CASES[case]
    r = client.post(server.url + "/v1/embeddings", content=body, headers=headers)
    check_envelope(r, status, code, param)


def test_every_category_is_exercised() -> None:
    codes = {c[3] for c in CASES.values()}
    assert codes >= {"malformed", "invalid_field", "unknown_dtype", "not_found", "unsupported_media_type",
                     "payload_too_large", "not_acceptable"}


def test_format_parameter_unknown(server, client) -> None:
    r = client.post(server.url + "/v1/embeddings?format=xml", json={"input": "a"})
    check_envelope(r, 406, "not_acceptable", "format")


def test_malformed_json_offset(server, client) -> None:
    r = client.post(server.url + "/v1/embeddings", content=b'{"input": "a",}', headers=JSON)
    err = check_envelope(r, 400, "malformed", None)
    assert isinstance(err["offset"], int)


def test_unknown_route_and_method(server, client) -> None:
    check_envelope(client.get(server.url + "/v1/nothing"), 404, "not_found", None)
    check_envelope(client.get(server.url + "/v1/models/not-this-one"), 404, "not_found", "model")
    r = client.get(server.url + "/v1/embeddings")
    assert r.status_code == 405 and r.headers["allow"] == "POST"
    assert r.json()["error"]["code"] == "method_not_allowed"


def test_byteorder_big_only_for_base64(server, client) -> None:
    """SPEC.md 6.1: byteorder is only meaningful for Base64; numbers and binary bodies stay little."""
    r = client.post(server.url + "/v1/embeddings", json={"input": "a", "byteorder": "big"})
    assert r.status_code == 200 and r.json()["byteorder"] == "little"
    r = client.post(server.url + "/v1/embeddings", json={"input": "a", "byteorder": "big"},
                    headers={"Accept": "application/octet-stream"})
    assert r.status_code == 200 and r.headers["densewire-byteorder"] == "little"
    r = client.post(server.url + "/v1/embeddings", json={"input": "a", "byteorder": "big", "encoding_format": "base64"})
    assert r.status_code == 200 and r.json()["byteorder"] == "big"


def test_truncate_true_accepts_long_input(server, client) -> None:
    r = client.post(server.url + "/v1/embeddings", json={"input": ["short", LONG_TEXT], "truncate": True})
    assert r.status_code == 200
    assert r.headers["Densewire-Truncated"] == "1" and r.json()["truncated"] == [1]
    models = client.get(server.url + "/v1/models").json()["data"][0]
    usage = r.json()["usage"]
    assert usage["prompt_tokens"] <= 1 + models["max_tokens"] + 5  # the long one counted as truncated


def test_compressed_request_bodies(server, client) -> None:
    doc = J({"input": ["compressed", "request"]})
    plain = client.post(server.url + "/v1/embeddings", content=doc, headers=JSON).json()
    for enc, data in (("gzip", gzip.compress(doc)), ("zstd", zstandard.ZstdCompressor().compress(doc)),
                      ("identity", doc), ("gzip", gzip.compress(doc[:10]) + gzip.compress(doc[10:])),
                      ("br", brotli.compress(doc)), ("deflate", zlib.compress(doc)),
                      ("deflate", zlib.compress(doc)[2:-4])):  # the last: a bare deflate stream (RFC 1951)
        r = client.post(server.url + "/v1/embeddings", content=data, headers={**JSON, "Content-Encoding": enc})
        assert r.status_code == 200, (enc, r.text)
        assert r.json()["data"] == plain["data"]


def test_chunked_body_over_limit(server, client) -> None:
    def chunks():
        yield b'{"input": "'
        for _ in range(MAX_BODY // 1000 + 2):
            yield b"a" * 1000
        yield b'"}'

    r = client.post(server.url + "/v1/embeddings", content=chunks(), headers=JSON)
    check_envelope(r, 413, "payload_too_large", None)


def test_server_survives_everything(server, client) -> None:
    assert client.get(server.url + "/health").status_code == 200
    text = server.log_text()
    assert "Traceback" not in text, text[-3000:]


# -- API key --------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def keyed_server():
    with ServerProcess("--model", "hash:16", env={"DENSEWIRE_API_KEY": "s3cret"}) as s:
        yield s


@pytest.mark.parametrize("auth", [None, "Bearer wrong", "Basic czNjcmV0", "Bearer", "s3cret", "Bearer s3cret2"])
def test_api_key_rejected(keyed_server, client, auth: str | None) -> None:
    headers = {} if auth is None else {"Authorization": auth}
    for method, path in (("POST", "/v1/embeddings"), ("GET", "/v1/models")):
        r = client.request(method, keyed_server.url + path, json={"input": "a"}, headers=headers)
        check_envelope(r, 401, "unauthorized", "Authorization")
        assert r.headers["www-authenticate"].startswith("Bearer")


def test_api_key_accepted(keyed_server, client) -> None:
    h = {"Authorization": "Bearer s3cret"}
    assert client.post(keyed_server.url + "/v1/embeddings", json={"input": "a"}, headers=h).status_code == 200
    assert client.get(keyed_server.url + "/v1/models", headers=h).status_code == 200
    assert client.get(keyed_server.url + "/health").status_code == 200  # open for probes
    assert client.get(keyed_server.url + "/metrics").status_code == 200


@pytest.mark.parametrize("value, says", [
    (1e30, "1e+30 is out of range: must be an integer between 1 and 32"),
    (-3, "-3 is out of range: must be an integer between 1 and 32"),
    (DIMS + 1, f"{DIMS + 1} is out of range: must be an integer between 1 and 32"),
    (2.5, "must be an integer, not 2.5"),
])
def test_a_number_out_of_range_is_called_out_of_range(server, client, value: Any, says: str) -> None:
    r = client.post(server.url + "/v1/embeddings", json={"input": "a", "dimensions": value})
    err = check_envelope(r, 400, "invalid_field", "dimensions")
    assert err["message"] == f"dimensions: {says}"


def test_token_id_out_of_range(server, client) -> None:
    r = client.post(server.url + "/v1/embeddings", json={"input": [[1, 1e30]]})
    err = check_envelope(r, 400, "invalid_field", "input[0][1]")
    assert "out of range" in err["message"]
