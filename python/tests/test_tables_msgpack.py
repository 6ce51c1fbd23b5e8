"""Columnar MessagePack tables (SPEC.md section 15.5) against msgpack-python; views and errors."""

from __future__ import annotations

import msgpack
import msgspec
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_tables_model import random_table

import densewire
from densewire import Column, DensewireError, Table
from densewire._msgpack import _str


def _as_python(t: Table) -> dict:
    cols = []
    for c in t.columns:
        data = c.values if c.type == "string" else np.ascontiguousarray(c.values).tobytes()
        cols.append({"name": c.name, "type": c.type, "data": data})
    return {"name": t.name, "rows": t.rows, "columns": cols}


@given(st.integers(0, 2 ** 32 - 1), st.integers(0, 40))
@settings(max_examples=60, deadline=None)
def test_agrees_with_msgpack_python_both_ways(seed, rows) -> None:
    t = random_table(seed, rows, finite=False)
    ours = densewire.encode_table(t, "msgpack")
    assert ours == msgpack.packb(_as_python(t), use_bin_type=True)  # msgpack-python writes smallest encodings
    assert msgpack.unpackb(ours, raw=False) == _as_python(t)
    assert densewire.decode_table(msgpack.packb(_as_python(t), use_bin_type=True), "msgpack") == t


@pytest.mark.parametrize("n", [0, 1, 15, 16, 65535, 65536])
def test_string_arrays_use_the_smallest_headers(n) -> None:
    values = ["x" * (i % 40) for i in range(n)] + ["y" * 300, "z" * 70000] if n else []
    body = msgspec.msgpack.encode(values)
    head = {0: b"\x90", 1: b"\x93", 15: b"\xdc\x00\x11", 16: b"\xdc\x00\x12"}.get(n)
    if head:
        assert body.startswith(head)
    assert body == msgpack.packb(values)
    assert b"".join(_str(v) for v in values) == body[len(body) - sum(len(_str(v)) for v in values):]


def test_decoder_accepts_any_key_order_wide_ints_and_unknown_keys() -> None:
    doc = {"extra": [1, {"a": None}], "columns": [{"data": b"\x01\x00", "x": 1.5, "type": "bool", "name": "b"}],
           "rows": 2, "name": "t"}
    body = msgpack.packb(doc, use_bin_type=True).replace(b"\xa4rows\x02", b"\xa4rows\xcf" + (2).to_bytes(8, "big"))
    assert densewire.decode_table(body, "msgpack") == Table("t", [Column("b", "bool", [True, False])])


def test_fixed_width_columns_are_views_into_the_body_when_aligned() -> None:
    t = random_table(7, 50, finite=False, types=("int32", "float64", "uuid", "bool", "float32[2]"))
    body = bytearray(densewire.encode_table(t, "msgpack"))
    arr = np.frombuffer(body, np.uint8)
    back = densewire.decode_table(body, "msgpack")
    assert back == t
    for c in back.columns:
        assert c.values.flags.aligned
        aligned = (arr.ctypes.data + bytes(body).index(np.ascontiguousarray(c.values).tobytes())) % c.values.dtype.itemsize == 0
        assert np.shares_memory(c.values, arr) == aligned


@pytest.mark.parametrize("doc, category, field", [
    ({"name": "t", "rows": -1, "columns": []}, "invalid_field", "rows"),
    ({"name": "t", "rows": 1}, "invalid_field", "columns"),
    ({"name": 3, "rows": 0, "columns": []}, "invalid_field", "name"),
    ({"rows": 1, "columns": [[1]]}, "invalid_field", "columns[0]"),
    ({"rows": 1, "columns": [{"type": "int32", "data": b"\0" * 4}]}, "invalid_field", "columns[0].name"),
    ({"rows": 1, "columns": [{"name": "a", "data": b"\0" * 4}]}, "invalid_field", "columns[0].type"),
    ({"rows": 1, "columns": [{"name": "a", "type": 5, "data": b"\0" * 4}]}, "invalid_field", "columns[0].type"),
    ({"rows": 1, "columns": [{"name": "a", "type": "int32"}]}, "invalid_field", "columns[0].data"),
    ({"rows": 1, "columns": [{"name": "a", "type": "int32", "data": [1]}]}, "invalid_field", "columns[0].data"),
    ({"rows": 1, "columns": [{"name": "a", "type": "string", "data": b"x"}]}, "invalid_field", "columns[0].data"),
    ({"rows": 1, "columns": [{"name": "a", "type": "string", "data": [b"x"]}]}, "invalid_field", "columns[0].data[0]"),
    ({"rows": 0, "columns": [{"name": "a", "type": "int32", "data": b""}, {"name": "a", "type": "int32", "data": b""}]},
     "invalid_field", "columns[1].name"),
    ({"rows": 2, "columns": [{"name": "u", "type": "uuid", "data": b"\0" * 31}]}, "length_mismatch", "columns[0].data"),
])
def test_field_errors(doc, category, field) -> None:
    with pytest.raises(DensewireError) as info:
        densewire.decode_table(msgpack.packb(doc, use_bin_type=True), "msgpack")
    assert info.value.category == category, info.value
    assert info.value.field == field


@pytest.mark.parametrize("body, category, offset", [
    (b"", "truncated", 0), (b"\x92\x01\x02", "malformed", 0), (b"\x80\xc0", "malformed", 1),
    (b"\x81\x01\x02", "malformed", 1), (b"\x81\xa1a\xc1", "malformed", 3),
])
def test_structure_errors(body, category, offset) -> None:
    with pytest.raises(DensewireError) as info:
        densewire.decode_table(body, "msgpack")
    assert (info.value.category, info.value.offset) == (category, offset)


def test_every_truncation_fails_cleanly() -> None:
    body = densewire.encode_table(random_table(3, 3, finite=False), "msgpack")
    for cut in range(len(body)):
        with pytest.raises(DensewireError) as info:
            densewire.decode_table(body[:cut], "msgpack")
        assert info.value.category == "truncated" and info.value.offset == cut


def test_large_table_round_trips() -> None:
    t = random_table(8, 150_000, finite=False)
    assert densewire.decode_table(densewire.encode_table(t, "msgpack"), "msgpack") == t
