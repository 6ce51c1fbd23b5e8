"""grpc_kserve.py with the real client: tritonclient.grpc, unchanged, against `densewire serve --grpc-port`
(HTTP and gRPC from one process at once): liveness, readiness, metadata, infer with raw and typed contents
(vectors bit for bit those of POST /v1/embeddings on the same texts), Triton's stream_infer, and every bad
input answered INVALID_ARGUMENT / NOT_FOUND / RESOURCE_EXHAUSTED with a message naming the tensor,
field and offset (never UNKNOWN or INTERNAL)."""

from __future__ import annotations

import queue
from concurrent.futures import ThreadPoolExecutor

import grpc
import httpx
import numpy as np
import pytest
import tritonclient.grpc as tg
from tritonclient.grpc import service_pb2 as pb
from tritonclient.grpc import service_pb2_grpc as pb_grpc
from tritonclient.utils import InferenceServerException

from server_support import ServerProcess, free_port, metric_value

TEXTS = ["a sentence to embed", "another one, longer than the first", "é ü 漢字"]
NAME = "all-MiniLM-L6-v2"  # the last path segment of the served name


@pytest.fixture(scope="module")
def server():
    port = free_port()
    with ServerProcess("--model", "hash:16", "--served-model-name", f"org/{NAME}", "--grpc-port", str(port),
                       "--max-body-bytes", "4096") as s:
        s.grpc = f"127.0.0.1:{port}"
        yield s


@pytest.fixture(scope="module")
def client(server):
    c = tg.InferenceServerClient(server.grpc)
    yield c
    c.close()


@pytest.fixture(scope="module")
def stub(server):
    with grpc.insecure_channel(server.grpc) as channel:
        yield pb_grpc.GRPCInferenceServiceStub(channel)


def _http(server, texts, dtype="float32"):
    r = httpx.post(server.url + "/v1/embeddings", json={"input": texts, "dtype": dtype},
                   headers={"Accept": "application/octet-stream"}, timeout=30)
    assert r.status_code == 200, r.text
    return r


def _text_input(texts, shape=None):
    inp = tg.InferInput("text", shape or [len(texts)], "BYTES")
    inp.set_data_from_numpy(np.array([t.encode() for t in texts], dtype=object).reshape(shape or [len(texts)]))
    return inp


def _raw_request(elements: list[bytes], shape: list[int], **fields) -> pb.ModelInferRequest:
    blob = b"".join(len(e).to_bytes(4, "little") + e for e in elements)
    req = pb.ModelInferRequest(**{"model_name": NAME, **fields})
    req.inputs.add(name="text", datatype="BYTES", shape=shape)
    req.raw_input_contents.append(blob)
    return req


def _rpc_error(call, *args) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as info:
        call(*args)
    return info.value


def test_live_ready_and_metadata(client) -> None:
    assert client.is_server_live() and client.is_server_ready()
    assert client.is_model_ready(NAME) and client.is_model_ready(f"org/{NAME}")
    meta = client.get_model_metadata(NAME, as_json=True)
    assert meta["name"] == NAME and meta["versions"] == ["1"] and meta["platform"] == "densewire"
    assert meta["inputs"] == [{"name": "text", "datatype": "BYTES", "shape": ["-1"]}]
    assert meta["outputs"] == [{"name": "embedding", "datatype": "FP32", "shape": ["-1", "16"]}]
    assert client.get_server_metadata(as_json=True)["name"] == "densewire"
    with pytest.raises(InferenceServerException, match="NOT_FOUND.*unknown model 'nope'"):
        client.get_model_metadata("nope")


def test_infer_raw_equals_v1_embeddings_bit_for_bit(server, client) -> None:
    result = client.infer(NAME, [_text_input(TEXTS)], outputs=[tg.InferRequestedOutput("embedding")],
                          request_id="req-7")
    got = result.as_numpy("embedding")
    assert got.dtype == np.float32 and got.shape == (3, 16)
    assert result.get_response().id == "req-7"
    assert got.tobytes() == _http(server, TEXTS).content
    # [N, 1] is the same request
    again = client.infer(NAME, [_text_input(TEXTS, [3, 1])]).as_numpy("embedding")
    assert again.tobytes() == got.tobytes()


@pytest.mark.parametrize("datatype,dtype", [("FP16", "float16"), ("INT8", "int8")])
def test_infer_in_another_datatype(server, client, datatype, dtype) -> None:
    out = tg.InferRequestedOutput("embedding")
    out._output.parameters["datatype"].string_param = datatype  # per-output parameter, as the protocol has it
    result = client.infer(NAME, [_text_input(TEXTS)], outputs=[out])
    tensor = result.get_response().outputs[0]
    assert tensor.datatype == datatype
    http = _http(server, TEXTS, dtype)
    assert result.get_response().raw_output_contents[0] == http.content
    if dtype == "int8":
        assert tensor.parameters["quantization"].string_param == http.headers["densewire-quantization"]


def test_typed_contents_both_ways(server, stub) -> None:
    req = pb.ModelInferRequest(model_name=NAME)
    inp = req.inputs.add(name="text", datatype="BYTES", shape=[3])
    inp.contents.bytes_contents.extend(t.encode() for t in TEXTS)
    answer = stub.ModelInfer(req)
    assert not answer.raw_output_contents  # asked in typed contents, answered so
    values = np.array(answer.outputs[0].contents.fp32_contents, dtype=np.float32)
    assert values.tobytes() == _http(server, TEXTS).content


def test_stream_infer_answers_in_order_and_an_error_does_not_end_the_stream(client) -> None:
    results: queue.Queue = queue.Queue()
    client.start_stream(callback=lambda result, error: results.put((result, error)))
    try:
        client.async_stream_infer(NAME, [_text_input(TEXTS[:1])], request_id="s1")
        client.async_stream_infer(NAME, [_text_input(TEXTS[:1])], request_id="s2",
                                  outputs=[tg.InferRequestedOutput("nope")])
        client.async_stream_infer(NAME, [_text_input(TEXTS[1:])], request_id="s3")
        got = [results.get(timeout=30) for _ in range(3)]
    finally:
        client.stop_stream()
    (r1, e1), (r2, e2), (r3, e3) = got
    assert e1 is None and r1.get_response().id == "s1" and r1.as_numpy("embedding").shape == (1, 16)
    assert r2 is None and "outputs[0].name: unknown output 'nope'" in str(e2)
    assert e3 is None and r3.get_response().id == "s3" and r3.as_numpy("embedding").shape == (2, 16)


def test_grpc_and_http_at_once(server, client) -> None:
    route = "/inference.GRPCInferenceService/ModelInfer"
    before = metric_value(server.metrics(), "densewire_requests_total", route=route, status="200", format="grpc")
    with ThreadPoolExecutor(8) as pool:
        grpcs = [pool.submit(lambda i=i: client.infer(NAME, [_text_input([f"text {i}"])]).as_numpy("embedding"))
                 for i in range(12)]
        https = [pool.submit(lambda i=i: _http(server, [f"text {i}"]).content) for i in range(12)]
        for g, h in zip(grpcs, https):
            assert g.result().tobytes() == h.result()
    after = metric_value(server.metrics(), "densewire_requests_total", route=route, status="200", format="grpc")
    assert after - before == 12  # one /metrics for both transports


@pytest.mark.parametrize("request_of,code,message", [
    (lambda: _wrong_datatype(), "INVALID_ARGUMENT", "inputs[0].datatype: the input 'text' is BYTES"),
    (lambda: _raw_request([b"a", b"b"], [3]), "INVALID_ARGUMENT", "inputs[0]: 2 elements, the shape [3] holds 3"),
    (lambda: _raw_request([b"ok", b"bad \xff"], [2]), "INVALID_ARGUMENT",
     "inputs[0].data[1]: text 1 is not UTF-8 (byte 4 of the element: invalid start byte) (offset 14)"),
    (lambda: _cut_blob(), "INVALID_ARGUMENT", "raw_input_contents[0]: a BYTES element of 9 bytes runs past"),
    (lambda: _raw_request([b"a"], [1], model_name="nope"), "NOT_FOUND", "model_name: unknown model 'nope'"),
    (lambda: _raw_request([b"a"], [1], model_version="2"), "NOT_FOUND", "model_version: model"),
    (lambda: _with_output("scores"), "NOT_FOUND", "outputs[0].name: unknown output 'scores'"),
    (lambda: _with_datatype("INT64"), "INVALID_ARGUMENT", "parameters.datatype: INT64 has no densewire dtype"),
    (lambda: _raw_request([b"x" * 5000], [1]), "RESOURCE_EXHAUSTED",
     "over the limit of 4096 bytes (--max-body-bytes)"),
])
def test_bad_input_is_named_never_unknown(stub, request_of, code, message) -> None:
    err = _rpc_error(stub.ModelInfer, request_of())
    assert err.code().name == code, err.details()
    assert message in err.details()


def _wrong_datatype() -> pb.ModelInferRequest:
    req = pb.ModelInferRequest(model_name=NAME)
    req.inputs.add(name="text", datatype="FP32", shape=[1])
    req.raw_input_contents.append(np.float32(1).tobytes())
    return req


def _cut_blob() -> pb.ModelInferRequest:
    req = _raw_request([b"a"], [1])
    req.raw_input_contents[0] = req.raw_input_contents[0] + (9).to_bytes(4, "little") + b"abc"
    return req


def _with_output(name: str) -> pb.ModelInferRequest:
    req = _raw_request([b"a"], [1])
    req.outputs.add(name=name)
    return req


def _with_datatype(datatype: str) -> pb.ModelInferRequest:
    req = _raw_request([b"a"], [1])
    req.parameters["datatype"].string_param = datatype
    return req
