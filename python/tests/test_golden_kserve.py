"""Every golden case of testdata/golden/kserve.json (SPEC.md section 19) that Python claims
(capabilities.json), one test per case id: ``decode_kserve`` reads each response body to its outputs
(datatype, shape, parameters, the items bit for bit or the BYTES elements; binary outputs as views over
the body, not copies); the server's request parser (``_server.kserve.parse_http_infer``, which HTTP and
gRPC share) reads each request to its texts and options; each invalid body fails with its category,
offset and field."""

from __future__ import annotations

import json

import numpy as np
import pytest

from densewire import DensewireError, decode_kserve
from densewire._server.kserve import parse_http_infer
from golden_capabilities import GOLDEN, assert_golden_error, claimed_cases

_CASES = json.loads((GOLDEN / "kserve.json").read_text())["cases"]
_CLAIMED = {c["id"] for c in claimed_cases({"kserve.json": _CASES})}
_BITS = {1: "u1", 2: "<u2", 4: "<u4", 8: "<u8"}


def _params(prefix: str) -> list:
    return [pytest.param(c, id=c["id"]) for c in _CASES if c["id"] in _CLAIMED and c["id"].startswith(prefix)]


@pytest.mark.parametrize("case", _params("kserve.response."))
def test_response(case: dict) -> None:
    body = bytes.fromhex(case["encoded_hex"])
    got = decode_kserve(body, case["headers"])
    assert list(got.outputs) == [o["name"] for o in case["outputs"]]
    assert got.model_name == case.get("model_name")
    assert got.model_version == case.get("model_version")
    assert got.id == case.get("response_id")
    for want in case["outputs"]:
        out = got.outputs[want["name"]]
        assert (out.datatype, list(out.shape), out.binary) == (want["datatype"], want["shape"], want["binary"])
        assert {k: v for k, v in out.parameters.items() if k != "binary_data_size"} == want["parameters"]
        if want["datatype"] == "BYTES":
            assert out.tensor is None and [e.hex() for e in out.elements] == want["elements_hex"]
            if "elements_text" in want:
                assert [e.decode() for e in out.elements] == want["elements_text"]
            continue
        t = out.tensor
        n, d = (1, want["shape"][0]) if len(want["shape"]) == 1 else want["shape"]
        assert (t.dtype, t.shape) == (want["dtype"], (n, d))
        bits = t.array.view(_BITS[t.array.dtype.itemsize]).reshape(-1)
        assert [f"{int(b):0{2 * t.array.dtype.itemsize}x}" for b in bits] == want["items"], want["decimal"]
        assert out.quantization == want["parameters"].get("quantization")
        if want["binary"] and t.n:  # zero-copy: the tensor is a view over the body
            assert np.shares_memory(t.array, np.frombuffer(body, np.uint8))


@pytest.mark.parametrize("case", _params("invalid.kserve."))
def test_invalid(case: dict) -> None:
    with pytest.raises(DensewireError) as info:
        decode_kserve(bytes.fromhex(case["input_hex"]), case["headers"])
    assert_golden_error(info.value, case)


def _parse(case: dict):
    return parse_http_infer(bytes.fromhex(case["input_hex"]), case["headers"], max_inputs=64, native_dimensions=4)


@pytest.mark.parametrize("case", _params("kserve.request."))
def test_request(case: dict) -> None:
    req = _parse(case)
    assert (req.texts, req.binary, req.datatype, req.id) == (case["texts"], case["binary_output"], case["datatype"],
                                                             case.get("request_id"))


@pytest.mark.parametrize("case", _params("invalid.kserve_request."))
def test_invalid_request(case: dict) -> None:
    with pytest.raises(DensewireError) as info:
        _parse(case)
    assert_golden_error(info.value, case)


def test_embeddings_of_a_response() -> None:
    """``KServeResponse.embeddings`` gives the model and the quantization id with the tensor."""
    case = next(c for c in _CASES if c["id"] == "kserve.response.int8.quantization")
    emb = decode_kserve(bytes.fromhex(case["encoded_hex"]), case["headers"]).embeddings()
    assert (emb.model, emb.quantization, emb.tensor.dtype) == ("m", "455fc59476466b04", "int8")
    assert emb.array.tolist() == [[127, -128], [0, -1]]


def test_module_doctests() -> None:
    import doctest

    import densewire._kserve as module

    result = doctest.testmod(module)
    assert result.attempted and not result.failed


def test_integral_floats_are_integers_of_int8_and_uint8_data() -> None:
    """3.0 is the number 3 (SPEC.md 3.5): INT8/UINT8 JSON data may write it so; 2.5 stays invalid_field."""
    doc = b'{"outputs":[{"name":"e","datatype":"INT8","shape":[1,3],"data":[3.0,-128,127.0]}]}'
    assert decode_kserve(doc).outputs["e"].tensor.array.tolist() == [[3, -128, 127]]
    with pytest.raises(DensewireError) as info:
        decode_kserve(doc.replace(b"3.0", b"2.5"))
    assert (info.value.category, info.value.field) == ("invalid_field", "outputs[0].data[0]")
