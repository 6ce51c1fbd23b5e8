"""Every golden case of testdata/golden/quantization.json (SPEC.md section 17) that Python claims, one
test per case id: quantize, dequantize, the quantization id and published object, Cohere's binary
names, int8/uint8 responses carrying their id in every format, and the inputs that must fail."""

from __future__ import annotations

import json

import numpy as np
import pytest

import densewire
from densewire import DensewireError, Embeddings, Quantization, Tensor, Usage
from golden_capabilities import GOLDEN, assert_golden_error, claimed_cases


def _load() -> list[dict]:
    return json.loads((GOLDEN / "quantization.json").read_text())["cases"]


_CLAIMED = claimed_cases({"quantization.json": _load()})


def _params(prefix: str):
    return [pytest.param(c, id=c["id"]) for c in _CLAIMED if c["id"].startswith(prefix)]


def _f32(items: list[str]) -> np.ndarray:
    return np.array([int(h, 16) for h in items], dtype=np.uint32).view(np.float32)


def _bytes(items: list[str], dtype: str) -> np.ndarray:
    return np.array([int(h, 16) for h in items], dtype=np.uint8).view(dtype)


def _hex32(values: np.ndarray) -> list[str]:
    return [f"{int(b):08x}" for b in np.ascontiguousarray(values, dtype=np.float32).view(np.uint32).ravel()]


def _hex8(values: np.ndarray) -> list[str]:
    return [f"{int(b):02x}" for b in np.ascontiguousarray(values).view(np.uint8).ravel()]


@pytest.mark.parametrize("case", _params("quantization.quantize."))
def test_quantize(case: dict) -> None:
    n, d = case["shape"]
    x = _f32(case["input"]).reshape(n, d)
    lower, upper = _f32(case["lower"]), _f32(case["upper"])
    u8 = densewire.quantize(x, lower, upper, "uint8")
    i8 = densewire.quantize(x, lower, upper, "int8")
    assert (u8.dtype, i8.dtype, u8.shape, i8.shape) == ("uint8", "int8", (n, d), (n, d))
    assert _hex8(u8.array) == case["uint8"]
    assert _hex8(i8.array) == case["int8"]
    # the same through a Quantization and through a float32 Tensor
    q = Quantization.from_ranges(lower, upper)
    assert _hex8(q.quantize(Tensor.from_array(x), "int8").array) == case["int8"]


@pytest.mark.parametrize("case", _params("quantization.dequantize."))
def test_dequantize(case: dict) -> None:
    n, d = case["shape"]
    codes = _bytes(case["codes"], case["dtype"]).reshape(n, d)
    lower, upper = _f32(case["lower"]), _f32(case["upper"])
    out = densewire.dequantize(codes, lower, upper)
    assert out.dtype == np.float32 and out.shape == (n, d)
    assert _hex32(out) == case["output"]
    assert _hex32(densewire.dequantize(Tensor.from_array(codes), lower, upper)) == case["output"]


@pytest.mark.parametrize("case", _params("quantization.id."))
def test_id(case: dict) -> None:
    lower, upper = _f32(case["lower"]), _f32(case["upper"])
    assert densewire.quantization_id(lower, upper) == case["quantization"]
    q = Quantization.from_json(case["encoded_text"])
    assert (q.id, q.dimensions) == (case["quantization"], case["dimensions"])
    assert _hex32(q.lower) == case["lower"] and _hex32(q.upper) == case["upper"]
    built = Quantization.from_ranges(lower, upper, model=q.model, calibration=q.calibration)
    assert json.dumps(built.to_json(), separators=(",", ":")) == case["encoded_text"]


@pytest.mark.parametrize("case", _params("quantization.binary."))
def test_binary(case: dict) -> None:
    x = _f32(case["input"]).reshape(case["shape"])
    packed = densewire.convert(x, "binary")
    assert _hex8(packed.array) == case["binary"]
    signed = densewire.cohere_binary(packed)
    assert signed.dtype == np.int8 and [str(v) for v in signed.ravel()] == case["cohere_binary"]
    assert _hex8(densewire.from_cohere_binary(signed)) == case["binary"]
    assert _hex8(densewire.from_cohere_binary([int(v) for v in case["cohere_binary"]])) == case["binary"]


def _decode(case: dict, body) -> Embeddings:
    if case["format"] == "protobuf":
        return densewire.decode_protobuf(body, case.get("message", "EmbeddingsResponse"))
    return densewire.decode(body, case["format"], case.get("headers"))


@pytest.mark.parametrize("case", _params("quantization.envelope."))
def test_envelope(case: dict) -> None:
    body = case["encoded_text"] if "encoded_text" in case else bytes.fromhex(case["encoded_hex"])
    decoded = _decode(case, body)
    assert decoded.quantization == case["quantization"]
    assert (decoded.model, decoded.usage) == (case["model"], Usage(**case["usage"]))
    assert decoded.tensor.dtype == case["dtype"] and list(decoded.tensor.shape) == case["shape"]
    assert _hex8(decoded.tensor.array) == case["items"]
    n, d = case["shape"]
    expected = Tensor.from_array(_bytes(case["items"], case["dtype"]).reshape(n, d))
    emb = Embeddings(expected, case["model"], Usage(**case["usage"]), case["quantization"])
    fmt = case["format"]
    if fmt == "json":
        encoded: bytes | str = densewire.encode_json(emb, case["encoding_format"], case["byteorder"])
    else:
        encoded, headers = densewire.encode(emb, fmt)
        if fmt == "raw":
            assert headers == {"Content-Type": "application/octet-stream", **case["headers"]}
    if case["byte_exact"]:
        assert bytes(encoded).hex() == case["encoded_hex"]
    if fmt == "json":  # compact and in spec order: the same text
        assert bytes(encoded).decode() == case["encoded_text"]
    again = _decode(case, encoded)
    assert again.quantization == case["quantization"] and _hex8(again.tensor.array) == case["items"]


@pytest.mark.parametrize("case", _params("invalid.quantization."))
def test_invalid(case: dict) -> None:
    op = case["operation"]
    with pytest.raises(DensewireError) as info:
        if op == "quantize":
            x = _f32(case["input"]).reshape(case["shape"])
            densewire.quantize(x, _f32(case["lower"]), _f32(case["upper"]), "int8")
        elif op == "dequantize":
            codes = _bytes(case["codes"], case["dtype"]).reshape(case["shape"])
            densewire.dequantize(codes, _f32(case["lower"]), _f32(case["upper"]))
        elif op == "id":
            Quantization.from_json(case["input_text"])
        else:
            body = case["input_text"] if "input_text" in case else bytes.fromhex(case["input_hex"])
            _decode(case, body)
    assert_golden_error(info.value, case)
