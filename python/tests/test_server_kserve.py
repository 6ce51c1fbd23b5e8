"""The Open Inference Protocol (KServe v2 REST, SPEC.md 19) on a running densewire serve, driven by
Triton's own ``tritonclient.http``, unchanged: server and model metadata, liveness and readiness, infer
with and without binary data both ways, BYTES texts of shape [N] and [N, 1], the requested datatypes
(the vectors bit for bit those of /v1/embeddings on the same texts), the request id echoed, parameters,
the raw binary request, bad input answered 4xx naming the tensor, field and offset, and the same
admission (429 + Retry-After) as /v1/embeddings."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import httpx
import numpy as np
import pytest
import tritonclient.http as triton
from tritonclient.utils import InferenceServerException

import densewire
from server_support import GatedUpstream, ServerProcess, metric_value, wait_until

FULL = "sentence-transformers/all-MiniLM-L6-v2"
SHORT = "all-MiniLM-L6-v2"
TEXTS = ["The quick brown fox jumps over the lazy dog", "embeddings at memory speed", "naïve café ünïcode"]


@pytest.fixture(scope="module")
def server():
    with ServerProcess("--model", "hash:24", "--served-model-name", FULL, "--max-client-batch-size", "16") as s:
        yield s


@pytest.fixture(scope="module")
def client(server):
    c = triton.InferenceServerClient(server.url.removeprefix("http://"))
    yield c
    c.close()


def _reference(server, texts=TEXTS, dtype: str = "float32", **extra) -> densewire.Embeddings:
    r = httpx.post(server.url + "/v1/embeddings", json={"input": texts, "dtype": dtype, **extra},
                   headers={"Accept": "application/octet-stream"}, timeout=30)
    assert r.status_code == 200, r.text
    return densewire.decode(r.content, "raw", r.headers)


def _infer(client, texts=TEXTS, *, binary_in=True, binary_out=True, shape=None, name=SHORT, **kw):
    inp = triton.InferInput("text", shape or [len(texts)], "BYTES")
    inp.set_data_from_numpy(np.array(texts, dtype=object).reshape(shape or [len(texts)]), binary_data=binary_in)
    out = triton.InferRequestedOutput("embedding", binary_data=binary_out)
    return client.infer(name, [inp], outputs=[out], **kw)


def test_server_and_model_metadata_and_health(client, server) -> None:
    assert client.is_server_live() and client.is_server_ready()
    meta = client.get_server_metadata()
    assert meta["name"] == "densewire" and "binary_tensor_data" in meta["extensions"]
    for name in (FULL, SHORT):  # found under its served name and under the last path segment
        assert client.is_model_ready(name)
        assert client.is_model_ready(name, model_version="1")
        m = client.get_model_metadata(name)
        assert m["name"] == name and m["versions"] == ["1"]
        assert m["inputs"] == [{"name": "text", "datatype": "BYTES", "shape": [-1]}]
        assert m["outputs"] == [{"name": "embedding", "datatype": "FP32", "shape": [-1, 24]}]
    assert not client.is_model_ready("nope")
    with pytest.raises(InferenceServerException) as info:
        client.get_model_metadata("nope")
    assert info.value.status() == "404" and "unknown model 'nope'" in info.value.message()
    with pytest.raises(InferenceServerException) as info:
        client.get_model_metadata(SHORT, model_version="2")
    assert info.value.status() == "404" and "version" in info.value.message()


@pytest.mark.parametrize("binary_in", [True, False], ids=["binary_in", "json_in"])
@pytest.mark.parametrize("binary_out", [True, False], ids=["binary_out", "json_out"])
def test_infer_equals_v1_embeddings_bit_for_bit(client, server, binary_in, binary_out) -> None:
    want = _reference(server).tensor.array
    result = _infer(client, binary_in=binary_in, binary_out=binary_out, request_id="req-7")
    got = result.as_numpy("embedding")
    assert got.dtype == np.float32 and got.shape == (3, 24)
    assert got.tobytes() == want.tobytes()
    response = result.get_response()
    assert response["id"] == "req-7" and response["model_name"] == SHORT
    assert ("binary_data_size" in response["outputs"][0].get("parameters", {})) == binary_out


def test_bytes_input_of_shape_n_by_1_and_version_route(client, server) -> None:
    want = _reference(server).tensor.array
    got = _infer(client, shape=[3, 1], name=FULL, model_version="1").as_numpy("embedding")
    assert got.tobytes() == want.tobytes()


@pytest.mark.parametrize("datatype,dtype", [("FP16", "float16"), ("BF16", "bfloat16"), ("INT8", "int8"),
                                            ("UINT8", "uint8")])
def test_requested_datatype(client, server, datatype, dtype) -> None:
    """The embeddings in the datatype asked (request parameter), the bits /v1/embeddings gives for that
    dtype; int8/uint8 carry the quantization id as an output parameter."""
    want = _reference(server, dtype=dtype)
    result = _infer(client, parameters={"datatype": datatype})
    out = result.get_output("embedding")
    assert out["datatype"] == datatype and out["shape"] == [3, 24]
    got = result.as_numpy("embedding")
    assert got.view(np.uint8).tobytes() == np.asarray(want.tensor.array).view(np.uint8).tobytes()
    assert out["parameters"].get("quantization") == want.quantization
    if dtype in ("int8", "uint8"):
        assert want.quantization and len(want.quantization) == 16


def test_json_output_datatypes_read_by_densewire(server) -> None:
    """JSON outputs in every datatype (INT8 asked per output) read back by densewire's decoder to the same
    bits as the binary extension."""
    for datatype in ("FP32", "FP16", "BF16", "INT8", "UINT8"):
        bodies = []
        for binary in (True, False):
            doc = {"inputs": [{"name": "text", "shape": [3], "datatype": "BYTES", "data": TEXTS}],
                   "outputs": [{"name": "embedding", "parameters": {"binary_data": binary, "datatype": datatype}}]}
            r = httpx.post(server.url + f"/v2/models/{SHORT}/infer", json=doc)
            assert r.status_code == 200, r.text
            bodies.append(densewire.decode_kserve(r.content, r.headers).outputs["embedding"])
        assert bodies[0].binary and not bodies[1].binary
        assert bodies[0].tensor.array.tobytes() == bodies[1].tensor.array.tobytes(), datatype
        assert bodies[0].quantization == bodies[1].quantization


def test_dimensions_and_truncate_parameters(client, server) -> None:
    want = _reference(server, dimensions=8).tensor.array
    got = _infer(client, parameters={"dimensions": 8}).as_numpy("embedding")
    assert got.shape == (3, 8) and got.tobytes() == want.tobytes()
    long = [" ".join(["word"] * 9000)]  # more than hash's 8192 tokens
    with pytest.raises(InferenceServerException) as info:
        _infer(client, long)
    assert info.value.status() == "400" and "inputs[0].data[0]" in info.value.message()
    assert "truncate" in info.value.message()
    cut = _infer(client, long, parameters={"truncate": True}).as_numpy("embedding")
    assert cut.tobytes() == _reference(server, long, truncate=True).tensor.array.tobytes()


def test_raw_binary_request(server) -> None:
    """Triton's raw binary request: Inference-Header-Content-Length 0, the body is the one text."""
    r = httpx.post(server.url + f"/v2/models/{SHORT}/infer", content=TEXTS[2].encode(),
                   headers={"Content-Type": "application/octet-stream", "Inference-Header-Content-Length": "0"})
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "application/octet-stream"
    out = densewire.decode_kserve(r.content, r.headers).outputs["embedding"]
    assert out.binary and out.tensor.array.tobytes() == _reference(server, [TEXTS[2]]).tensor.array.tobytes()


def _bad(server, body: bytes, header_length: int | None = None, path: str = f"/v2/models/{SHORT}/infer"):
    headers = {"Content-Type": "application/octet-stream" if header_length is not None else "application/json"}
    if header_length is not None:
        headers["Inference-Header-Content-Length"] = str(header_length)
    r = httpx.post(server.url + path, content=body, headers=headers)
    assert 400 <= r.status_code < 500, (r.status_code, r.text)
    return r.status_code, r.json()


def test_bad_input_is_4xx_naming_tensor_field_and_offset(client, server) -> None:
    header = json.dumps({"inputs": [{"name": "text", "shape": [2], "datatype": "BYTES",
                                     "parameters": {"binary_data_size": 11}}]}).encode()
    status, doc = _bad(server, header + b"\x01\x00\x00\x00a\x02\x00\x00\x00j\xff", len(header))
    assert (status, doc["code"], doc["param"], doc["offset"]) == (400, "invalid_field", "inputs[0].data[1]",
                                                                   len(header) + 10)
    assert doc["error"].startswith("inputs[0].data[1]: text 1 is not UTF-8")
    status, doc = _bad(server, header + b"\x01\x00\x00\x00a", len(header))
    assert (status, doc["code"], doc["param"]) == (400, "truncated", "inputs[0].parameters.binary_data_size")
    status, doc = _bad(server, header, len(header) + 5)
    assert (status, doc["code"], doc["param"]) == (400, "truncated", "Inference-Header-Content-Length")
    status, doc = _bad(server, b'{"inputs":[{"name":"text","shape":[2],"datatype":"BYTES","data":["a"]}]}')
    assert (status, doc["code"], doc["param"]) == (400, "shape_mismatch", "inputs[0].data")
    status, doc = _bad(server, b'{"inputs":[{"name":"text","shape":[1],"datatype":"FP32","data":[1.0]}]}')
    assert (status, doc["param"]) == (400, "inputs[0].datatype")
    status, doc = _bad(server, b'{"inputs":[{"name":"text","shape":[1],"datatype":"BYTES","data":["a"]}],'
                               b'"outputs":[{"name":"logits"}]}')
    assert (status, doc["code"], doc["param"]) == (404, "not_found", "outputs[0].name")
    status, doc = _bad(server, b'{"inputs":[{"name":"text","shape":[1],"datatype":"BYTES","data":["a"]}],'
                               b'"parameters":{"datatype":"FP8"}}')
    assert (status, doc["code"], doc["param"]) == (400, "unknown_dtype", "parameters.datatype")
    status, doc = _bad(server, b'{"inputs": [', path="/v2/models/nope/infer")
    assert (status, doc["code"]) == (404, "not_found")  # the model is judged first
    status, doc = _bad(server, b'{"inputs": [')
    assert (status, doc["code"]) == (400, "malformed")
    r = httpx.post(server.url + f"/v2/models/{SHORT}/infer", content=b"{}", headers={"Content-Type": "text/plain"})
    assert r.status_code == 415
    # the same through tritonclient: the message names the tensor and the element
    inp = triton.InferInput("text", [1], "BYTES")
    inp.set_data_from_numpy(np.array([b"\xc3\x28"], dtype=object))
    with pytest.raises(InferenceServerException) as info:
        client.infer(SHORT, [inp])
    assert info.value.status() == "400" and "inputs[0].data[0]" in info.value.message()
    wrong = triton.InferInput("input_ids", [1], "BYTES")
    wrong.set_data_from_numpy(np.array(["a"], dtype=object))
    with pytest.raises(InferenceServerException) as info:
        client.infer(SHORT, [wrong])
    assert info.value.status() == "400" and "unknown input 'input_ids'" in info.value.message()
    many = ["t"] * 17
    with pytest.raises(InferenceServerException) as info:
        _infer(client, many)
    assert "--max-client-batch-size" in info.value.message()
    assert "Traceback" not in server.log_text()


def test_metrics_and_cache_are_the_servers(client, server) -> None:
    """The route is counted like every other, and its texts go through the server's cache: texts
    /v1/embeddings embedded are cache hits over KServe, and new ones are misses that /v1/embeddings then hits."""
    def hits() -> float:
        return metric_value(server.metrics(), "densewire_cache_hits_total", layer="memory")

    before = metric_value(server.metrics(), "densewire_requests_total", route="/v2/models/{name}/infer",
                          status="200", format="kserve-binary")
    _reference(server)
    h0 = hits()
    _infer(client)
    assert hits() == h0 + len(TEXTS)
    fresh = ["never embedded before", "nor this one"]
    got = _infer(client, fresh).as_numpy("embedding")
    h1 = hits()
    assert _reference(server, fresh).tensor.array.tobytes() == got.tobytes() and hits() == h1 + 2
    after = metric_value(server.metrics(), "densewire_requests_total", route="/v2/models/{name}/infer",
                         status="200", format="kserve-binary")
    assert after == before + 2


def test_full_admission_is_429_with_retry_after() -> None:
    """Admission is /v1/embeddings': with the one slot taken, an inference request is a 429 with
    Retry-After, which tritonclient raises with status 429."""
    with GatedUpstream() as upstream, ServerProcess(*upstream.server_args(), "--max-batch-wait-ms", "0",
                                                    "--cache-bytes", "0", "--max-concurrent-requests", "1") as s, \
            ThreadPoolExecutor(2) as pool:
        name = httpx.get(s.url + "/v1/models").json()["data"][0]["id"].rsplit("/", 1)[-1]
        doc = {"inputs": [{"name": "text", "shape": [1], "datatype": "BYTES", "data": ["a1"]}]}
        first = pool.submit(httpx.post, s.url + f"/v2/models/{name}/infer", json=doc, timeout=30)
        wait_until(lambda: "a1" in upstream.received, "the first request at the model")
        r = httpx.post(s.url + f"/v2/models/{name}/infer", json={**doc, "inputs": [{**doc["inputs"][0], "data": ["b"]}]})
        assert r.status_code == 429 and int(r.headers["retry-after"]) >= 1
        assert r.json()["code"] == "rate_limited"
        assert httpx.get(s.url + "/v2/health/ready").status_code == 503
        assert httpx.get(s.url + "/v2/health/live").status_code == 200
        c = triton.InferenceServerClient(s.url.removeprefix("http://"))
        inp = triton.InferInput("text", [1], "BYTES")
        inp.set_data_from_numpy(np.array(["c"], dtype=object))
        with pytest.raises(InferenceServerException) as info:
            c.infer(name, [inp])
        assert info.value.status() == "429"
        c.close()
        upstream.gate.set()
        assert first.result().status_code == 200
        assert "b" not in upstream.received and "c" not in upstream.received


def test_api_key_body_limit_and_compression() -> None:
    """--api-key as Authorization (401 without it; the health and model-ready probes stay public),
    --max-body-bytes (413 naming the limit), and tritonclient's gzip/deflate request and response
    compression."""
    with ServerProcess("--model", "hash:24", "--api-key", "k", "--max-body-bytes", "4K",
                       "--compress-min-bytes", "64") as s:
        c = triton.InferenceServerClient(s.url.removeprefix("http://"))
        assert c.is_server_live() and c.is_server_ready() and c.is_model_ready("hash-24")
        with pytest.raises(InferenceServerException) as info:
            c.get_model_metadata("hash-24")
        assert info.value.status() == "401"
        auth = {"Authorization": "Bearer k"}
        assert c.get_model_metadata("hash-24", headers=auth)["name"] == "hash-24"
        inp = triton.InferInput("text", [2], "BYTES")
        inp.set_data_from_numpy(np.array(TEXTS[:2], dtype=object))
        with pytest.raises(InferenceServerException) as info:
            c.infer("hash-24", [inp])
        assert info.value.status() == "401"
        want = httpx.post(s.url + "/v1/embeddings", json={"input": TEXTS[:2]}, headers={
            **auth, "Accept": "application/octet-stream"})
        want = densewire.decode(want.content, "raw", want.headers).tensor.array
        for algorithm in ("gzip", "deflate"):
            result = c.infer("hash-24", [inp], headers=auth, request_compression_algorithm=algorithm,
                             response_compression_algorithm=algorithm)
            assert result.as_numpy("embedding").tobytes() == want.tobytes()
        big = triton.InferInput("text", [8], "BYTES")
        big.set_data_from_numpy(np.array(["x" * 1000] * 8, dtype=object))
        with pytest.raises(InferenceServerException) as info:
            c.infer("hash-24", [big], headers=auth)
        assert info.value.status() == "413" and "4096" in info.value.message()
        c.close()
        assert "Traceback" not in s.log_text()
