"""Every golden case of testdata/golden/ (SPEC.md section 13) that Python claims (capabilities.json), one test
per case id; the others are listed in the test summary."""

from __future__ import annotations

import json

import numpy as np
import pytest

import densewire
from densewire import DensewireError, Embeddings, Tensor, Usage
from densewire._convert import float32_to_bfloat16, float32_to_float16, float64_to_bfloat16, to_binary
from golden_capabilities import GOLDEN, assert_golden_error, claimed_cases

_STORAGE_BITS = {"float32": "<u4", "float16": "<u2", "bfloat16": "<u2", "float64": "<u8",
                 "int8": "u1", "uint8": "u1", "binary": "u1"}


def _load(name: str) -> list[dict]:
    return json.loads((GOLDEN / name).read_text())["cases"]


_CLAIMED = {c["id"] for c in claimed_cases({name: _load(name) for name in (
    "tensors.json", "interop.json", "invalid.json", "conversions.json")})}


def _params(name: str):
    return [pytest.param(c, id=c["id"]) for c in _load(name) if c["id"] in _CLAIMED]


def _items_tensor(dtype: str, shape: list[int], items: list[str]) -> Tensor:
    """Build the expected tensor from the case's hex items (natural big-endian notation)."""
    n, d = shape
    bits = np.array([int(h, 16) for h in items], dtype=np.uint64).astype(_STORAGE_BITS[dtype])
    width = densewire.row_bytes(dtype, d) if dtype == "binary" else d
    storage = bits.view(densewire._tensor.storage_dtype(dtype)).reshape(n, width)
    return Tensor(storage, dtype, d)


def _assert_same(got: Tensor, case: dict) -> None:
    assert got.dtype == case["dtype"]
    assert list(got.shape) == case["shape"]
    got_bits = np.ascontiguousarray(got.array).view(_STORAGE_BITS[got.dtype]).ravel()
    assert [f"{int(v):0{2 * np.dtype(_STORAGE_BITS[got.dtype]).itemsize}x}" for v in got_bits] == case["items"]


def _decode(case: dict, body) -> Embeddings:
    fmt = case["format"]
    if fmt == "base64":
        return Embeddings(densewire.decode_base64(body, case["dtype"], tuple(case["shape"]), case["byteorder"]))
    if fmt == "protobuf":
        return densewire.decode_protobuf(body, case.get("message", "EmbeddingsResponse"))
    return densewire.decode(body, fmt, case.get("headers"))


def _body(case: dict):
    return case["encoded_text"] if "encoded_text" in case else bytes.fromhex(case["encoded_hex"])


@pytest.mark.parametrize("case", _params("tensors.json") + _params("interop.json"))
def test_valid(case: dict) -> None:
    decoded = _decode(case, _body(case))
    _assert_same(decoded.tensor, case)
    if "usage" in case:
        assert decoded.model == case["model"]
        assert decoded.usage == Usage(**case["usage"])
    expected = _items_tensor(case["dtype"], case["shape"], case["items"])
    emb = Embeddings(expected, case.get("model"), Usage(**case["usage"]) if "usage" in case else None)
    fmt = case["format"]
    if fmt == "base64":
        encoded: bytes | str = densewire.encode_base64(expected, case["byteorder"])
    elif fmt == "protobuf" and case.get("message") == "Tensor":
        encoded = densewire.encode_protobuf(expected)
    elif fmt == "json":
        encoded = densewire.encode_json(emb, case.get("encoding_format", "base64"), case["byteorder"])
    else:
        encoded, headers = densewire.encode(emb, fmt)
        if fmt == "raw":
            assert headers == {"Content-Type": "application/octet-stream", **case["headers"]}
    if case["byte_exact"]:
        if isinstance(encoded, str):
            assert encoded == case["encoded_text"]
        else:
            assert bytes(encoded).hex() == case["encoded_hex"]
    # whatever the byte-exactness, our own encoding decodes back to the same tensor
    _assert_same(_decode(case, encoded).tensor, case)


@pytest.mark.parametrize("case", _params("invalid.json"))
def test_invalid(case: dict) -> None:
    with pytest.raises(DensewireError) as info:
        if case["direction"] == "encode":
            t = _items_tensor(case["dtype"], case["shape"], case["items"])
            densewire.encode_json(Embeddings(t), case["encoding_format"])
        else:
            body = case["input_text"] if "input_text" in case else bytes.fromhex(case["input_hex"])
            if case["format"] == "base64":
                densewire.decode_base64(body, case["dtype"], tuple(case["shape"]), case["byteorder"])
            elif case["format"] == "protobuf":
                densewire.decode_protobuf(body, case["message"])
            else:
                densewire.decode(body, case["format"], case.get("headers"))
    assert_golden_error(info.value, case)


@pytest.mark.parametrize("case", _params("conversions.json"))
def test_conversion(case: dict) -> None:
    src = {"float32": ("<u4", "<f4"), "float64": ("<u8", "<f8")}[case["from"]]
    values = np.array([int(h, 16) for h in case["input"]], dtype=np.uint64).astype(src[0]).view(src[1])
    if case["to"] == "binary":
        out = densewire.convert(values.reshape(case["shape"]), "binary").array.ravel()
        assert [f"{b:02x}" for b in out] == case["output"]
        assert [f"{b:02x}" for b in to_binary(values.reshape(case["shape"])).ravel()] == case["output"]
        return
    out = densewire.convert(values.reshape(1, -1), case["to"]).array.ravel()
    width = {"float16": 4, "bfloat16": 4, "float32": 8}[case["to"]]
    bits = out.view({4: "<u2", 8: "<u4"}[width])
    assert [f"{int(b):0{width}x}" for b in bits] == case["output"]
    # the building blocks agree with convert()
    if case["to"] == "float16":
        assert np.array_equal(float32_to_float16(values).view("<u2"), bits)
    if case["to"] == "bfloat16":
        fn = float64_to_bfloat16 if case["from"] == "float64" else float32_to_bfloat16
        assert np.array_equal(fn(values), bits)
