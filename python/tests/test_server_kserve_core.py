"""The transport-neutral KServe v2 core (``_server/kserve.py``) as the gRPC adapter calls it: inputs built
from ``raw_input_contents`` (read by ``bytes_elements``) or ``bytes_contents``, without body offsets;
the model's names; the statuses of SPEC.md 19.4. The HTTP parser over the same rules is tested by the
golden cases (test_golden_kserve.py) and end to end with tritonclient (test_server_kserve.py)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from densewire import (InvalidFieldError, NotFoundError, RateLimitedError, ShapeMismatchError, UnauthorizedError,
                       UnknownDtypeError)
from densewire._kserve import bytes_elements, encode_bytes_elements
from densewire._server.kserve import (InferInput, RequestedOutput, find_model, infer_request, kserve_error_doc,
                                      kserve_status, model_metadata, model_names)

KW = {"max_inputs": 4, "native_dimensions": 8}


def _raw(texts: list[bytes]) -> InferInput:
    raw = encode_bytes_elements(texts)  # what tritonclient.grpc puts in raw_input_contents[0]
    return InferInput("text", "BYTES", (len(texts),), bytes_elements(memoryview(raw), 0, "inputs[0]"), binary=True)


def test_raw_input_contents_and_bytes_contents_give_the_same_request() -> None:
    a = infer_request([_raw([b"a", "é".encode()])], [RequestedOutput("embedding", {"binary_data": True})],
                      {"datatype": "UINT8", "dimensions": 4}, "r9", **KW)
    b = infer_request([InferInput("text", "BYTES", (2, 1), [b"a", "é".encode()])], [], {"binary_data_output": True,
                      "datatype": "UINT8", "dimensions": 4}, "r9", **KW)
    assert a == b
    assert (a.texts, a.dtype, a.binary, a.dimensions, a.id) == (["a", "é"], "uint8", True, 4, "r9")
    assert a.embeddings_request(auto_truncate=False).truncate is False
    assert infer_request([_raw([b"x"])], [], {"truncate": True}, None, **KW).embeddings_request(False).truncate


def test_errors_name_the_tensor_and_field_without_offsets() -> None:
    with pytest.raises(InvalidFieldError) as info:
        infer_request([_raw([b"ok", b"\xff"])], [], None, None, **KW)
    assert (info.value.field, info.value.offset) == ("inputs[0].data[1]", None)
    with pytest.raises(ShapeMismatchError) as info:
        infer_request([InferInput("text", "BYTES", (3,), [b"a"], binary=True)], [], None, None, **KW)
    assert info.value.field == "inputs[0]"
    with pytest.raises(InvalidFieldError, match="--max-client-batch-size"):
        infer_request([_raw([b"t"] * 5)], [], None, None, **KW)
    with pytest.raises(InvalidFieldError) as info:
        infer_request([_raw([b"a"]), _raw([b"b"])], [], None, None, **KW)
    assert info.value.field == "inputs"
    with pytest.raises(NotFoundError) as info:
        infer_request([_raw([b"a"])], [RequestedOutput("logits")], None, None, **KW)
    assert info.value.field == "outputs[0].name"
    with pytest.raises(InvalidFieldError) as info:
        infer_request([_raw([b"a"])], [RequestedOutput("embedding", {"datatype": "FP64"})], None, None, **KW)
    assert info.value.field == "outputs[0].parameters.datatype"
    with pytest.raises(UnknownDtypeError):
        infer_request([_raw([b"a"])], [], {"datatype": "fp16"}, None, **KW)
    with pytest.raises(InvalidFieldError) as info:
        infer_request([_raw([b"a"])], [], {"dimensions": 9}, None, **KW)
    assert info.value.field == "parameters.dimensions"


def _embedder(names: tuple[str, ...], any_model: bool = False) -> SimpleNamespace:
    return SimpleNamespace(served_names=names, aliases={*names, "hash-8"}, accept_any_model=any_model,
                           dimensions=8, names_text=lambda: ", ".join(map(repr, names)))


def test_model_names_and_versions() -> None:
    e = _embedder(("org/all-MiniLM-L6-v2", "minilm"))
    assert model_names(e)[:2] == ["org/all-MiniLM-L6-v2", "minilm"] and "all-MiniLM-L6-v2" in model_names(e)
    for name in ("org/all-MiniLM-L6-v2", "all-MiniLM-L6-v2", "minilm", "hash-8"):
        find_model(e, name, None)
        find_model(e, name, "1")
    with pytest.raises(NotFoundError) as info:
        find_model(e, "other")
    assert info.value.field == "model_name" and "'minilm'" in info.value.message
    with pytest.raises(NotFoundError) as info:
        find_model(e, "minilm", "2")
    assert info.value.field == "model_version"
    find_model(_embedder(("m",), any_model=True), "text-embedding-3-small")  # --accept-any-model
    assert model_metadata(e, "minilm")["outputs"] == [{"name": "embedding", "datatype": "FP32", "shape": [-1, 8]}]


def test_statuses_and_error_document() -> None:
    assert kserve_status(InvalidFieldError("x", field="f")) == 400  # Triton's 400, not 422
    assert kserve_status(NotFoundError("x")) == 404
    assert kserve_status(RateLimitedError("x")) == 429
    assert kserve_status(UnauthorizedError("x")) == 401
    doc = kserve_error_doc(InvalidFieldError("not UTF-8", field="inputs[0].data[1]", offset=7))
    assert doc == {"error": "inputs[0].data[1]: not UTF-8", "code": "invalid_field", "param": "inputs[0].data[1]",
                   "offset": 7}
