"""densewire.quantize / dequantize / Quantization (SPEC.md section 17) against a one-value-at-a-time
reference of the spec's rule, and the quantization id carried by every codec."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

import densewire
from densewire import (DensewireError, Embeddings, InvalidFieldError, Quantization, ShapeMismatchError, Tensor, Usage)


def reference_code(x: float, lo: float, hi: float) -> int:
    """SPEC.md 17.3 in plain Python floats (binary64), one value."""
    step = (hi - lo) / 255
    if math.isnan(x):
        return 0
    if step == 0:
        return 255 if x > lo else 0
    q = (x - lo) / step
    return 255 if q >= 255 else 0 if q < 0 else math.floor(q)


def reference_value(u: int, lo: float, hi: float) -> np.float32:
    step = (hi - lo) / 255
    return np.float32(lo if step == 0 else lo + (u + 0.5) * step)


def random_case(seed: int, n: int = 40, d: int = 23) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((n, d)) * 0.2).astype(np.float32)
    lower = (rng.uniform(-0.5, -0.05, d)).astype(np.float32)
    upper = (lower + rng.uniform(0.0, 0.6, d)).astype(np.float32)
    upper[3] = lower[3]  # a zero step
    x[0, :4] = [np.nan, np.inf, -np.inf, -0.0]
    x[1, :3] = [lower[0], upper[1], (lower[2] + upper[2]) / 2]
    return x, lower, upper


@pytest.mark.parametrize("seed", range(5))
def test_quantize_and_dequantize_match_the_reference_value_by_value(seed: int) -> None:
    x, lower, upper = random_case(seed)
    codes = densewire.quantize(x, lower, upper, "uint8").array
    expected = np.array([[reference_code(float(x[i, j]), float(lower[j]), float(upper[j]))
                          for j in range(x.shape[1])] for i in range(x.shape[0])], dtype=np.uint8)
    assert np.array_equal(codes, expected)
    values = densewire.dequantize(codes, lower, upper)
    want = np.array([[reference_value(int(codes[i, j]), float(lower[j]), float(upper[j]))
                      for j in range(x.shape[1])] for i in range(x.shape[0])], dtype=np.float32)
    assert np.array_equal(values.view(np.uint32), want.view(np.uint32))


def test_int8_is_uint8_minus_128_and_keeps_the_order() -> None:
    x, lower, upper = random_case(7)
    u = densewire.quantize(x, lower, upper, "uint8").array.astype(np.int16)
    i = densewire.quantize(x, lower, upper, "int8").array.astype(np.int16)
    assert np.array_equal(i, u - 128)
    ramp = np.linspace(-1, 1, 1001, dtype=np.float32)[:, None]
    codes = densewire.quantize(ramp, [-0.5], [0.5], "int8").array.ravel()
    assert codes[0] == -128 and codes[-1] == 127 and np.all(np.diff(codes.astype(int)) >= 0)


def test_in_range_values_come_back_within_half_a_step() -> None:
    rng = np.random.default_rng(3)
    lower, upper = np.full(64, -0.3, np.float32), np.full(64, 0.3, np.float32)
    x = rng.uniform(-0.3, 0.3, (200, 64)).astype(np.float32)
    back = densewire.dequantize(densewire.quantize(x, lower, upper, "int8"), lower, upper)
    assert np.abs(back - x).max() <= 0.6 / 255 / 2 * (1 + 1e-6)


def test_quantize_takes_float16_bfloat16_and_float64_values() -> None:
    x = np.array([[0.25, -0.5, 0.75]], np.float32)
    lo, hi = [-1.0, -1.0, -1.0], [1.0, 1.0, 1.0]
    want = densewire.quantize(x, np.float32(lo), np.float32(hi), "uint8").array
    for t in (densewire.convert(x, "float16"), densewire.convert(x, "bfloat16"), x.astype(np.float64)):
        assert np.array_equal(densewire.quantize(t, np.float32(lo), np.float32(hi), "uint8").array, want)


def test_bad_arguments_are_typed_errors() -> None:
    x = np.zeros((1, 2), np.float32)
    with pytest.raises(InvalidFieldError) as e:
        densewire.quantize(x, np.float32([0, 0]), np.float32([1, 1]), "float16")
    assert e.value.field == "dtype"
    with pytest.raises(ShapeMismatchError) as e:
        densewire.quantize(x, np.float32([0]), np.float32([1, 1]))
    assert e.value.field == "lower"
    with pytest.raises(InvalidFieldError) as e:
        densewire.dequantize(np.zeros((1, 2), np.int8), np.float32([0, np.nan]), np.float32([1, 1]))
    assert e.value.field == "lower[1]"
    with pytest.raises(InvalidFieldError) as e:
        densewire.quantize(Tensor.from_array(np.zeros((1, 2), np.int8)), np.float32([0, 0]), np.float32([1, 1]))
    assert e.value.field == "dtype"
    with pytest.raises(ValueError):
        densewire.dequantize(np.zeros((1, 2), np.float32), np.float32([0, 0]), np.float32([1, 1]))


def test_calibrate_is_min_and_max_and_the_id_follows_the_bits() -> None:
    v = np.array([[0.1, -0.2], [0.3, 0.0], [-0.1, 0.4]], np.float32)
    q = Quantization.calibrate(v, model="m")
    assert q.lower.tolist() == v.min(axis=0).tolist() and q.upper.tolist() == v.max(axis=0).tolist()
    assert q.id == densewire.quantization_id(q.lower, q.upper) and len(q.id) == 16
    assert densewire.quantization_id(v.min(axis=0).copy(), v.max(axis=0).copy()) == q.id
    flipped = densewire.quantization_id(np.float32([-0.2, -0.1]), np.float32([0.3, 0.4]))  # lower swapped
    assert flipped != q.id
    with pytest.raises(ValueError):
        Quantization.calibrate(np.array([[np.nan, 0.0]], np.float32))


def test_published_object_round_trips_and_is_checked() -> None:
    q = Quantization.calibrate(np.array([[0.1, -0.2, 0.5], [0.3, 0.0, 0.5]], np.float32), model="m",
                               calibration={"name": "set", "texts": 2, "sha256": "00"})
    doc = q.to_json()
    assert list(doc) == ["object", "id", "model", "method", "calibration", "dimensions", "lower", "upper"]
    back = Quantization.from_json(json.dumps(doc))
    assert (back.id, back.model, back.calibration, back.dimensions) == (q.id, "m", doc["calibration"], 3)
    assert np.array_equal(back.lower, q.lower) and not back.lower.flags.writeable
    for key, value, field in (("method", "absmax", "method"), ("id", 5, "id"), ("dimensions", True, "dimensions"),
                              ("lower", "AAAA", "lower"), ("id", "0" * 16, "id")):
        with pytest.raises(DensewireError) as e:
            Quantization.from_json({**doc, key: value})
        assert e.value.field == field, (key, value, str(e.value))
    assert Quantization.from_json({**doc, "future_key": [1]}).id == q.id  # unknown keys are ignored


def test_cohere_binary_is_the_packed_byte_minus_128() -> None:
    packed = densewire.convert(np.array([[1, -1, 1, -1, 1, -1, 1, -1, -1]], np.float32), "binary")
    assert packed.array.tolist() == [[0xAA, 0x00]]
    assert densewire.cohere_binary(packed).tolist() == [[0xAA - 128, -128]]
    assert densewire.from_cohere_binary([[42, -128]]).tolist() == [[170, 0]]
    with pytest.raises(InvalidFieldError):
        densewire.from_cohere_binary([200])


FORMATS = ["json", "raw", "msgpack", "protobuf", "arrow"]


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("dtype", ["int8", "uint8"])
def test_every_format_carries_the_id(fmt: str, dtype: str) -> None:
    x, lower, upper = random_case(11, n=300, d=24)  # 300 Base64 rows: JSON's fast path reads the id too
    codes = densewire.quantize(np.nan_to_num(x), lower, upper, dtype)
    emb = Embeddings(codes, "m", Usage(3, 3), "0123456789abcdef")
    for encoding_format in (["base64", "float"] if fmt == "json" else ["base64"]):
        body, headers = densewire.encode(emb, fmt, encoding_format=encoding_format)
        back = densewire.decode(body, fmt, headers)
        assert back.quantization == "0123456789abcdef"
        assert np.array_equal(back.tensor.array, codes.array) and back.tensor.dtype == dtype
        plain, plain_headers = densewire.encode(Embeddings(codes, "m", Usage(3, 3)), fmt, encoding_format=encoding_format)
        assert densewire.decode(plain, fmt, plain_headers).quantization is None
        assert b"0123456789abcdef" not in bytes(plain) and "Densewire-Quantization" not in plain_headers


def test_json_quantization_of_another_type_is_invalid_on_both_paths() -> None:
    one = b'{"data":[{"index":0,"embedding":"AAAA"}],"dtype":"uint8","quantization":5}'
    many = (b'{"data":[' + b",".join(b'{"object":"embedding","index":%d,"embedding":"AAAA"}' % i for i in range(20))
            + b'],"dtype":"uint8","dimensions":3,"quantization":["x"]}')
    for body in (one, many):
        with pytest.raises(InvalidFieldError) as e:
            densewire.decode_json(body)
        assert e.value.field == "quantization"
