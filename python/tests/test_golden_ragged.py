"""Every golden case of testdata/golden/ragged.json and sparse.json (SPEC.md section 19) that Python claims,
one test per case id: valid cases decode to their parts and, where byte-exact, encode to their bytes;
invalid cases fail with their category, offset and field. The byte-exact MessagePack and Protobuf
bodies are also checked against msgpack-python and the protobuf runtime."""

from __future__ import annotations

import json

import numpy as np
import pytest

import densewire
from densewire import DensewireError, Embeddings, RaggedTensor, SparseVectors, Usage
from densewire._ragged_protobuf import decode_protobuf_kind, encode_protobuf_kind
from densewire._tensor import storage_dtype
from golden_capabilities import GOLDEN, assert_golden_error, claimed_cases

_BITS = {"float32": "<u4", "float16": "<u2", "bfloat16": "<u2", "float64": "<u8", "int8": "u1", "uint8": "u1",
         "binary": "u1"}
_FILES = {name: json.loads((GOLDEN / name).read_text())["cases"] for name in ("ragged.json", "sparse.json")}
_CLAIMED = claimed_cases(_FILES)
_VALID = [pytest.param(c, id=c["id"]) for c in _CLAIMED if c.get("direction") is None]
_INVALID = [pytest.param(c, id=c["id"]) for c in _CLAIMED if c.get("direction") == "decode"]


def _hex_items(array: np.ndarray, dtype: str) -> list[str]:
    bits = np.ascontiguousarray(array).view(_BITS[dtype]).ravel()
    return [f"{int(v):0{2 * np.dtype(_BITS[dtype]).itemsize}x}" for v in bits]


def _expected(case: dict) -> Embeddings:
    dtype, (n, d) = case["dtype"], case["shape"]
    bits = np.array([int(h, 16) for h in case["items"]], np.uint64).astype(_BITS[dtype]).view(storage_dtype(dtype))
    if case["kind"] == "ragged":
        width = densewire.row_bytes(dtype, d) if dtype == "binary" else d
        rows = densewire.Tensor(bits.reshape(-1, width), dtype, d)
        t = RaggedTensor(rows, case["offsets"])
    else:
        t = SparseVectors(case["indices"], bits, case["offsets"], d, dtype)
    usage = Usage(**case["usage"]) if "usage" in case else None
    return Embeddings(t, case.get("model"), usage)


def _decode(case: dict, body) -> Embeddings:
    if case["format"] == "protobuf":
        return decode_protobuf_kind(body, case["message"])
    return densewire.decode(body, case["format"], case.get("headers"), kind=case["kind"])


def _assert_parts(got: Embeddings, case: dict) -> None:
    t = got.tensor
    assert t.dtype == case["dtype"]
    assert list(t.shape) == case["shape"]
    assert t.offsets.tolist() == case["offsets"]
    assert t.offsets.dtype == np.dtype("<u4")
    if case["kind"] == "ragged":
        assert isinstance(t, RaggedTensor)
        assert _hex_items(t.values, t.dtype) == case["items"]
        for i in range(t.n):  # matrix i is a view of its rows in the one buffer
            m = t[i]
            assert m.shape[0] == case["offsets"][i + 1] - case["offsets"][i]
            if m.size:
                assert np.shares_memory(m, t.values)
    else:
        assert isinstance(t, SparseVectors)
        assert t.indices.tolist() == case["indices"]
        assert _hex_items(t.values, t.dtype) == case["items"]


def _encode(case: dict, emb: Embeddings):
    fmt = case["format"]
    if fmt == "protobuf":
        return encode_protobuf_kind(emb if case["message"].endswith("Response") else emb.tensor), None
    if fmt == "json":
        return densewire.encode(emb, "json", encoding_format=case["encoding_format"], byteorder=case["byteorder"])
    return densewire.encode(emb, fmt)


@pytest.mark.parametrize("case", _VALID)
def test_valid(case: dict) -> None:
    body = case["encoded_text"] if "encoded_text" in case else bytes.fromhex(case["encoded_hex"])
    decoded = _decode(case, body)
    _assert_parts(decoded, case)
    if "usage" in case:
        assert decoded.model == case["model"]
        assert decoded.usage == Usage(**case["usage"])
    if case["format"] in ("raw", "msgpack", "protobuf"):  # binary bodies are views: no copy of the values
        values = decoded.tensor.values
        if values.size:
            assert not values.flags.owndata
    encoded, headers = _encode(case, _expected(case))
    if case["format"] == "raw":
        assert headers == {"Content-Type": "application/octet-stream", **case["headers"]}
    if case["byte_exact"]:
        assert bytes(encoded).hex() == case["encoded_hex"]
    elif case["format"] == "json":  # the same keys in the same order; numbers may be spelt otherwise (SPEC 3.5)
        ours, theirs = json.loads(encoded), json.loads(case["encoded_text"])
        assert list(ours) == list(theirs)
        assert [list(item) for item in ours["data"]] == [list(item) for item in theirs["data"]]
        assert {k: v for k, v in ours.items() if k != "data"} == {k: v for k, v in theirs.items() if k != "data"}
    _assert_parts(_decode(case, encoded), case)


@pytest.mark.parametrize("case", _INVALID)
def test_invalid(case: dict) -> None:
    body = case["input_text"] if "input_text" in case else bytes.fromhex(case["input_hex"])
    with pytest.raises(DensewireError) as info:
        _decode(case, body)
    assert_golden_error(info.value, case)


@pytest.mark.parametrize("case", [c for c in _VALID if c.values[0]["format"] in ("msgpack", "protobuf")])
def test_official_serializers_agree(case: dict, tensor_pb2) -> None:
    """msgpack-python and the protobuf runtime re-encode every byte-exact body to the same bytes."""
    body = bytes.fromhex(case["encoded_hex"])
    if case["format"] == "msgpack":
        import msgpack

        doc = msgpack.unpackb(body)
        assert msgpack.packb(doc, use_bin_type=True) == body
        assert list(doc)[:2] in (["model", "kind"], ["kind", "dtype"])
    else:
        message = getattr(tensor_pb2, case["message"])()
        message.ParseFromString(body)
        assert message.SerializeToString() == body
        inner = message.embeddings if case["message"].endswith("Response") else message
        assert list(inner.shape) == case["shape"]
        assert np.frombuffer(inner.offsets, "<u4").tolist() == case["offsets"]
