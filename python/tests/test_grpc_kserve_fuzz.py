"""grpc_kserve.py's request reading, fuzzed (hypothesis): any ModelInferRequest, whatever its inputs, raw or
typed contents, shapes, parameters and outputs, is read into texts and options or refused with one of
densewire's errors (a status code of SPEC.md 19.4 with the field named), never another exception (which
would be INTERNAL); and a raw blob of BYTES elements cut anywhere is refused with its offset."""

from __future__ import annotations

import hypothesis.strategies as st
from hypothesis import given, settings

from densewire import DensewireError
from densewire._server.grpc_call import grpc_code
from densewire._server.grpc_kserve import _inputs, _value
from densewire._server.grpcpb import grpc_service_pb2 as pb
from densewire._server.kserve import RequestedOutput, infer_request

DATATYPES = st.sampled_from(["BYTES", "FP32", "INT8", "BOOL", "bytes", "", "FP16", "UINT64"])
NAMES = st.sampled_from(["text", "embedding", "", "x", "TEXT"])


def _blob(elements: list[bytes]) -> bytes:
    return b"".join(len(e).to_bytes(4, "little") + e for e in elements)


@st.composite
def _parameter(draw) -> pb.InferParameter:
    p = pb.InferParameter()
    kind = draw(st.sampled_from(["bool_param", "int64_param", "string_param", "double_param", "uint64_param", None]))
    if kind == "bool_param":
        p.bool_param = draw(st.booleans())
    elif kind == "int64_param":
        p.int64_param = draw(st.integers(-2**63, 2**63 - 1))
    elif kind == "string_param":
        p.string_param = draw(st.sampled_from(["FP32", "FP16", "BF16", "INT8", "UINT8", "FP64", "INT64", "x", ""]))
    elif kind == "double_param":
        p.double_param = draw(st.floats(allow_nan=True))
    elif kind == "uint64_param":
        p.uint64_param = draw(st.integers(0, 2**64 - 1))
    return p


@st.composite
def requests(draw) -> pb.ModelInferRequest:
    req = pb.ModelInferRequest(model_name="m", id=draw(st.text(max_size=5)))
    raw = draw(st.booleans())
    for _ in range(draw(st.integers(0, 2))):
        t = req.inputs.add(name=draw(NAMES), datatype=draw(DATATYPES),
                           shape=draw(st.lists(st.integers(-2, 2**40), max_size=3)))
        elements = draw(st.lists(st.binary(max_size=8), max_size=4))
        if raw:
            blob = _blob(elements)
            if draw(st.booleans()):
                blob = blob[:draw(st.integers(0, len(blob)))] + draw(st.binary(max_size=6))
            req.raw_input_contents.append(blob)
        elif draw(st.booleans()):
            t.contents.bytes_contents.extend(elements)
        if draw(st.booleans()):
            t.contents.fp32_contents.extend([1.0])
    for key in draw(st.lists(st.sampled_from(["datatype", "dimensions", "truncate", "binary_data_output", "x"]),
                             max_size=3)):
        req.parameters[key].CopyFrom(draw(_parameter()))
    for _ in range(draw(st.integers(0, 2))):
        o = req.outputs.add(name=draw(NAMES))
        for key in draw(st.lists(st.sampled_from(["datatype", "binary_data", "classification"]), max_size=2)):
            o.parameters[key].CopyFrom(draw(_parameter()))
    if draw(st.booleans()) and req.raw_input_contents:
        req.raw_input_contents.append(b"extra")
    return req


@settings(max_examples=200, deadline=None)
@given(requests())
def test_any_request_is_read_or_refused_with_a_named_error(req: pb.ModelInferRequest) -> None:
    try:
        ireq = infer_request(_inputs(req), [RequestedOutput(o.name, {k: _value(v) for k, v in o.parameters.items()})
                                            for o in req.outputs],
                             {k: _value(v) for k, v in req.parameters.items()}, req.id or None,
                             max_inputs=16, native_dimensions=8, raw=bool(req.raw_input_contents))
    except DensewireError as err:
        assert err.field or err.offset is not None, repr(err)  # where it went wrong
        assert grpc_code(err).name in ("INVALID_ARGUMENT", "NOT_FOUND"), repr(err)
        return
    assert all(isinstance(t, str) and t for t in ireq.texts) and 1 <= len(ireq.texts) <= 16
    assert ireq.datatype in ("FP32", "FP16", "BF16", "INT8", "UINT8")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(min_size=1, max_size=6), min_size=1, max_size=4), st.data())
def test_a_cut_raw_blob_names_its_offset(texts: list[str], data) -> None:
    blob = _blob([t.encode() for t in texts])
    cut = data.draw(st.integers(1, len(blob) - 1))
    req = pb.ModelInferRequest(model_name="m")
    req.inputs.add(name="text", datatype="BYTES", shape=[len(texts)])
    req.raw_input_contents.append(blob[:cut])
    try:
        infer_request(_inputs(req), [], {}, None, max_inputs=16, native_dimensions=8, raw=True)
    except DensewireError as err:
        assert err.field is not None and err.field.startswith(("raw_input_contents[0]", "inputs[0]")), repr(err)
        if err.field == "raw_input_contents[0]":
            assert err.offset is not None and 0 <= err.offset <= cut
    else:  # a cut exactly between two elements reads as fewer elements, which the shape refuses
        raise AssertionError("a cut blob was read")
