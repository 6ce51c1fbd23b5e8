"""The JSON envelope: round trips, the fast Base64 path against a plain reference decoder, errors."""

from __future__ import annotations

import base64
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import densewire
from densewire import Embeddings, Tensor, Usage
from densewire._json import _decode_base64_fast

DTYPE_NP = {"float32": "<f4", "float16": "<f2", "float64": "<f8", "int8": "i1", "uint8": "u1"}


def reference_decode(text: bytes | str) -> np.ndarray:
    """SPEC.md section 6 the slow, obvious way: stdlib json, rows by index, one decode per row."""
    doc = json.loads(text)
    dtype = doc.get("dtype", "float32")
    order = "<" if doc.get("byteorder", "little") == "little" else ">"
    rows = sorted(doc["data"], key=lambda item: item["index"])
    arrays = [np.frombuffer(base64.b64decode(r["embedding"]), DTYPE_NP[dtype].replace("<", order)) for r in rows]
    return np.stack(arrays).astype(DTYPE_NP[dtype]) if arrays else np.empty((0, 0), DTYPE_NP[dtype])


def tensors(max_n: int = 40, max_d: int = 40):
    return st.tuples(st.sampled_from(list(DTYPE_NP)), st.integers(0, max_n), st.integers(1, max_d),
                     st.integers(0, 2**32 - 1)).map(_make)


def _make(args) -> Tensor:
    dtype, n, d, seed = args
    raw = np.random.default_rng(seed).integers(0, 256, size=n * d * np.dtype(DTYPE_NP[dtype]).itemsize, dtype=np.uint8)
    return Tensor.from_array(raw.view(DTYPE_NP[dtype]).reshape(n, d))


def _bits(a: np.ndarray) -> bytes:
    return np.ascontiguousarray(a).tobytes()


@settings(max_examples=150, deadline=None)
@given(tensors(), st.sampled_from(["little", "big"]))
def test_base64_round_trip_keeps_every_bit(t: Tensor, byteorder: str) -> None:
    body = densewire.encode_json(Embeddings(t, "m", Usage(3, 3)), "base64", byteorder)
    got = densewire.decode_json(body)
    assert got.tensor.shape == t.shape and got.tensor.dtype == t.dtype
    assert _bits(got.tensor.array) == _bits(t.array)
    assert got.model == "m" and got.usage == Usage(3, 3)
    if t.n:
        assert _bits(reference_decode(body)) == _bits(t.array)


@settings(max_examples=100, deadline=None)
@given(tensors(max_n=120), st.sampled_from(["compact", "pretty", "index_after", "shuffled"]), st.data())
def test_any_layout_decodes_like_the_reference(t: Tensor, layout: str, data) -> None:
    """Other servers' layouts (pretty-printed, other key orders, rows out of order) decode the same."""
    doc = json.loads(densewire.encode_json(Embeddings(t, "m")))
    if layout == "index_after":
        doc["data"] = [{"object": "embedding", "embedding": r["embedding"], "index": r["index"]} for r in doc["data"]]
    if layout == "shuffled":
        doc["data"] = data.draw(st.permutations(doc["data"]))
    text = json.dumps(doc, indent=2 if layout == "pretty" else None).encode()
    assert _bits(densewire.decode_json(text).tensor.array) == _bits(t.array)


@settings(max_examples=100, deadline=None)
@given(tensors(max_n=150), st.data())
def test_tampered_index_digits_never_misplace_rows(t: Tensor, data) -> None:
    """Swap the index values of two rows in the raw text: rows must follow their indexes."""
    if t.n < 2:
        return
    body = densewire.encode_json(Embeddings(t, "m")).decode()
    i, j = sorted(data.draw(st.lists(st.integers(0, t.n - 1), min_size=2, max_size=2, unique=True)))
    a, b = f'"index":{i},', f'"index":{j},'
    body = body.replace(a, "\0").replace(b, a).replace("\0", b)
    expected = t.array.copy()
    expected[[i, j]] = expected[[j, i]]
    assert _bits(densewire.decode_json(body.encode()).tensor.array) == _bits(expected)


@pytest.mark.parametrize("n, d, dtype", [(1, 3, "float32"), (11, 5, "float32"), (1203, 12, "float16"),
                                         (150, 7, "float64"), (101, 9, "binary"), (0, 4, "float32")])
def test_base64_envelope_is_the_json_of_its_rows(n: int, d: int, dtype: str) -> None:
    """Across index digit groups (9 -> 10, 99 -> 100, 999 -> 1000), rows whose bytes are or are not
    whole Base64 groups, and twice in a row (the second call reuses the first's scratch buffer)."""
    rng = np.random.default_rng(n)
    t = densewire.convert(rng.standard_normal((n, d)).astype(np.float32), dtype)
    emb = Embeddings(t, "m", Usage(3, 4))
    for _ in range(2):
        doc = json.loads(densewire.encode_json(emb, "base64", "big"))
        assert [item["index"] for item in doc["data"]] == list(range(n))
        rows = [base64.b64decode(item["embedding"]) for item in doc["data"]]
        assert b"".join(rows) == bytes(t.to_bytes("big"))
        assert doc["model"] == "m" and doc["dimensions"] == d and doc["byteorder"] == "big"


def test_fast_path_is_taken_for_regular_documents() -> None:
    t = Tensor.from_array(np.arange(1000 * 12, dtype=np.float32).reshape(1000, 12))
    body = densewire.encode_json(Embeddings(t, "m"))
    fast = _decode_base64_fast(body)
    assert fast is not None and _bits(fast.tensor.array) == _bits(t.array)


def test_fast_path_declines_escaped_slashes() -> None:
    """JSON may escape '/' as '\\/' (PHP does): the general path must handle it."""
    t = Tensor.from_array(np.full((2, 6), 255, dtype=np.uint8))
    body = densewire.encode_json(Embeddings(t, "m")).decode()
    escaped = body.replace("/", "\\/")
    assert escaped.count("\\/") == 16
    assert _decode_base64_fast(escaped.encode()) is None
    assert _bits(densewire.decode_json(escaped.encode()).tensor.array) == _bits(t.array)


def test_float_rows_round_trip_through_shortest_decimals() -> None:
    values = np.array([[0.1, -2.5, 1e-45, 3.4028235e38], [0.0, -0.0, 65504.0, 1.0]], dtype=np.float32)
    body = densewire.encode_json(Embeddings(Tensor.from_array(values)), "float")
    assert b"0.1," in body  # float32 0.1 written as 0.1, not 0.10000000149011612
    assert _bits(densewire.decode_json(body).tensor.array) == _bits(values)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "binary"])
def test_float_rows_of_narrow_dtypes(dtype: str) -> None:
    t = densewire.convert(np.array([[0.1, -2.5, 3.0, 0.0, 7.0, -1.0, 2.0, 0.5, 9.0]], dtype=np.float32), dtype)
    got = densewire.decode_json(densewire.encode_json(Embeddings(t), "float"))
    assert got.tensor.dtype == dtype and got.tensor.shape == t.shape
    assert _bits(got.tensor.array) == _bits(t.array)


def test_empty_batch_keeps_dimensions() -> None:
    t = Tensor.from_bytes(b"", "float32", (0, 384))
    for fmt in ("base64", "float"):
        got = densewire.decode_json(densewire.encode_json(Embeddings(t), fmt))
        assert got.tensor.shape == (0, 384)


@pytest.mark.parametrize("body, category, field", [
    (b'[1, 2]', "malformed", None),
    (b'{"data": [{"index": 0, "embedding": [1.0, "x"]}]}', "invalid_field", "data[0].embedding[1]"),
    # numpy would read True as 1.0: a boolean is no number, wherever it stands in the rows
    (b'{"data": [{"index": 1, "embedding": [1.0, 2.0]}, {"index": 0, "embedding": [true, 2.0]}]}', "invalid_field",
     "data[1].embedding[0]"),
    (b'{"data": [{"index": 0, "embedding": [1.0]}], "usage": {"prompt_tokens": -1}}', "invalid_field", "usage.prompt_tokens"),
    (b'{"data": [{"index": 0, "embedding": [300]}], "dtype": "int8"}', "invalid_field", "data[0].embedding[0]"),
    (b'{"data": [{"index": true, "embedding": [1.0]}]}', "invalid_field", "data[0].index"),
    (b'{"data": [{"index": 0, "embedding": "AACAPw=="}], "dimensions": -1}', "invalid_field", "dimensions"),
    # a declared dimensions far beyond the rows is the row's error (was a MemoryError: 4 TB allocated first)
    (b'{"data": [{"index": 0, "embedding": "AACAPw=="}], "dimensions": 1000000000000}', "length_mismatch",
     "data[0].embedding"),
    (b'{"data": [{"index": 0, "embedding": [255, 0, 240]}], "dtype": "binary", "dimensions": 2222222222222220}',
     "shape_mismatch", "data[0].embedding"),
])
def test_errors_name_the_field(body: bytes, category: str, field: str | None) -> None:
    with pytest.raises(densewire.DensewireError) as info:
        densewire.decode_json(body)
    assert info.value.category == category
    assert info.value.field == field
    envelope = info.value.to_envelope()["error"]
    assert envelope["code"] == category and envelope["param"] == field


def test_malformed_json_reports_the_byte_offset() -> None:
    with pytest.raises(densewire.MalformedError) as info:
        densewire.decode_json(b'{"data": [1,, 2]}')
    assert info.value.offset == 12


@pytest.mark.parametrize("dtype,row,want", [("int8", "[3.0, -128, 127.0]", [3, -128, 127]),
                                            ("uint8", "[0.0, 255.0, 128]", [0, 255, 128])])
def test_integral_floats_are_integers_of_int8_and_uint8_rows(dtype, row, want) -> None:
    """3.0 is the number 3 (SPEC.md 3.5): an int8/uint8 number row may write it so (this raised IndexError
    instead of decoding); 2.5 and out-of-range values stay invalid_field on the item."""
    body = ('{"object":"list","data":[{"object":"embedding","index":0,"embedding":%s}],"dtype":"%s"}' % (row, dtype))
    assert densewire.decode_json(body.encode()).tensor.array.tolist() == [want]
    with pytest.raises(densewire.InvalidFieldError) as info:
        densewire.decode_json(body.replace(row, "[1, 2.5]").encode())
    assert info.value.field == "data[0].embedding[1]"
