"""Every case of testdata/golden/tables.json (SPEC.md section 15) that Python claims (capabilities.json), one
test per case id; the others are listed in the test summary."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pytest

import densewire
from densewire import Column, DensewireError, Table
from golden_capabilities import GOLDEN, assert_golden_error, claimed_cases

ALL_CASES = json.loads((GOLDEN / "tables.json").read_text())["cases"]
CASES = claimed_cases({"tables.json": ALL_CASES})
_BITS = {"float32": ("<u4", "<f4"), "float64": ("<u8", "<f8")}


def _column(c: dict) -> Column:
    """The expected column from a case's values (ints as decimal text, floats as hex bits)."""
    t, values = c["type"], c["values"]
    if t in _BITS:
        u, f = _BITS[t]
        return Column(c["name"], t, np.array([int(h, 16) for h in values], np.uint64).astype(u).view(f))
    if t.startswith("float32["):
        d = densewire._tables.vector_dims(t)
        bits = np.array([int(h, 16) for row in values for h in row], np.uint64).astype("<u4")
        return Column(c["name"], t, bits.view("<f4").reshape(len(values), d))
    if t in ("int32", "int64"):
        return Column(c["name"], t, np.array([int(v) for v in values], dtype="<i4" if t == "int32" else "<i8"))
    return Column(c["name"], t, values)


def expected_table(case: dict) -> Table:
    return Table(case["table"], [_column(c) for c in case["columns"]], case["rows"])


def _body(case: dict):
    return case["input_text"] if "input_text" in case else case["encoded_text"] if "encoded_text" in case else \
        bytes.fromhex(case.get("encoded_hex") or case["input_hex"])


def _columns_arg(case: dict):
    if "headers" in case:
        return case["headers"]["Densewire-Columns"]
    return [(c["name"], c["type"]) for c in case.get("columns", [])] or None


def _pyarrow_values(col, type_: str):
    """What pyarrow itself reads from a column, in the shape of a Column's values."""
    if isinstance(col.type, pa.BaseExtensionType):
        col = col.storage
    if type_ == "string":
        return col.to_pylist()
    if type_ == "uuid":
        return np.frombuffer(b"".join(col.to_pylist()), np.uint8).reshape(len(col), 16)
    if type_.startswith("float32["):
        return np.asarray(col.values.to_numpy(), np.float32).reshape(len(col), col.type.list_size)
    return col.to_numpy(zero_copy_only=False)


@pytest.mark.parametrize("case", [pytest.param(c, id=c["id"]) for c in CASES if c["id"].startswith("table.")])
def test_valid(case: dict) -> None:
    fmt = case["format"]
    expected = expected_table(case)
    assert densewire.table_headers(expected) == {"Densewire-Version": "1", **case["headers"]}
    assert densewire.parse_columns_header(case["headers"]["Densewire-Columns"]) == expected.schema
    decoded = densewire.decode_table(_body(case), fmt, columns=_columns_arg(case), name=case["table"])
    assert decoded == expected  # names, types, rows, and every value bit for bit
    split = case.get("column_encoding") == "byte_stream_split"
    encoded = densewire.encode_table(expected, fmt, byte_stream_split=split)
    if case["byte_exact"]:
        assert encoded.hex() == case["encoded_hex"]
    again = densewire.decode_table(encoded, fmt, columns=densewire.columns_header(expected), name=case["table"])
    assert again == expected
    if fmt in ("json", "json-rows", "json-columns"):  # our own text is JSON that the standard library reads alike
        assert json.loads(encoded) == json.loads(case["encoded_text"])
    if fmt == "arrow":  # pyarrow reads our stream to the same values, types and metadata
        reader = pa.ipc.open_stream(encoded)
        at = reader.read_all()
        assert at.num_rows == expected.rows
        assert at.schema.metadata == {b"densewire.version": b"1", b"densewire.table": case["table"].encode()}
        for field, col in zip(at.schema, expected.columns):
            assert field.name == col.name and not field.nullable
            assert field.metadata[b"densewire.type"] == col.type.encode()
            got = _pyarrow_values(at.column(col.name).combine_chunks(), col.type)
            if col.type == "string":
                assert got == col.values
            else:
                assert np.asarray(got).tobytes() == np.ascontiguousarray(col.values).tobytes()
            if col.type == "uuid":
                assert field.type == pa.uuid()


@pytest.mark.parametrize("case", [pytest.param(c, id=c["id"]) for c in CASES if c["id"].startswith("invalid.")])
def test_invalid(case: dict) -> None:
    fmt = case["format"]
    with pytest.raises(DensewireError) as info:
        if case["direction"] == "encode":
            densewire.encode_table(expected_table(case), fmt)
        else:
            densewire.decode_table(_body(case), fmt, columns=_columns_arg(case))
    assert_golden_error(info.value, case)


def test_every_format_and_every_case_kind_is_covered() -> None:
    formats = {c["format"] for c in CASES if c["id"].startswith("table.")}
    assert formats == set(densewire.TABLE_FORMATS)
    assert {c.get("column_encoding") for c in CASES if c["format"] == "protobuf" and "column_encoding" in c} == {
        "plain", "byte_stream_split"}
    assert any(c.get("direction") == "encode" for c in CASES)
