"""Every golden case of testdata/golden/pgcopy.json (SPEC.md section 16) that Python claims
(capabilities.json), one test per case id: writing the input gives the stream byte for byte, reading the
stream gives the values and ids, and the invalid cases fail with their category, offset and field."""

from __future__ import annotations

import json

import numpy as np
import pytest

from densewire import DensewireError, Tensor
from densewire._tensor import storage_dtype
from densewire.pgvector import decode_copy, encode_copy
from golden_capabilities import GOLDEN, claimed_cases

_BITS = {"float32": "<u4", "float16": "<u2", "bfloat16": "<u2", "float64": "<u8", "binary": "u1"}
_CASES = json.loads((GOLDEN / "pgcopy.json").read_text())["cases"]
_CLAIMED = {c["id"] for c in claimed_cases({"pgcopy.json": _CASES})}


def _params(prefix: str):
    return [pytest.param(c, id=c["id"]) for c in _CASES if c["id"] in _CLAIMED and c["id"].startswith(prefix)]


def _tensor(case: dict) -> Tensor:
    n, d = case["shape"]
    dtype = case["dtype"]
    width = (d + 7) // 8 if dtype == "binary" else d
    bits = np.array([int(h, 16) for h in case["items"]], dtype=np.uint64).astype(_BITS[dtype])
    return Tensor(bits.view(storage_dtype(dtype)).reshape(n, width), dtype, d)


def _columns(case: dict) -> dict:
    cols = case["columns"]
    kw = {"pg_type": cols[-1]["type"], "column": cols[-1]["name"]}
    if len(cols) == 2:
        kw.update(id_type=cols[0]["type"], id_column=cols[0]["name"])
    return kw


def _hex_items(t: Tensor, dtype: str) -> list[str]:
    bits = np.ascontiguousarray(t.array).view(_BITS[dtype]).ravel()
    return [f"{int(v):0{2 * np.dtype(_BITS[dtype]).itemsize}x}" for v in bits]


def test_the_golden_file_has_every_kind_of_case() -> None:
    ids = {c["id"].split(".")[0] + "." + c["id"].split(".")[1] for c in _CASES}
    assert {"pgcopy.vector", "pgcopy.halfvec", "pgcopy.bit", "pgcopy.sparsevec", "invalid.pgcopy",
            "invalid.pgcopy_encode"} <= ids
    assert len(_params("")) == len(_CASES)  # Python claims every pgcopy feature


@pytest.mark.parametrize("case", _params("pgcopy."))
def test_valid(case: dict) -> None:
    body = encode_copy(_tensor(case), ids=case.get("ids"), **_columns(case))
    assert body.hex() == case["encoded_hex"]
    got = decode_copy(bytes.fromhex(case["encoded_hex"]), d=case["shape"][1], **_columns(case))
    assert got.tensor.dtype == case["value_dtype"]
    assert got.tensor.shape == tuple(case["shape"])
    assert _hex_items(got.tensor, case["value_dtype"]) == case["values"]
    if "ids" in case:
        assert [None if v is None else str(v) for v in got.ids] == case["ids"]
    else:
        assert got.ids is None


@pytest.mark.parametrize("case", _params("invalid.pgcopy."))
def test_invalid_stream(case: dict) -> None:
    with pytest.raises(DensewireError) as err:
        decode_copy(bytes.fromhex(case["input_hex"]), **_columns(case))
    assert err.value.category == case["error"]
    assert err.value.offset == case["offset"]
    if "field" in case:
        assert err.value.field == case["field"]


@pytest.mark.parametrize("case", _params("invalid.pgcopy_encode."))
def test_invalid_input(case: dict) -> None:
    with pytest.raises(DensewireError) as err:
        encode_copy(_tensor(case), ids=case.get("ids"), **_columns(case))
    assert (err.value.category, err.value.field) == (case["error"], case["field"])
