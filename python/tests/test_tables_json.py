"""The JSON table layouts (SPEC.md section 15.3): shortest digits, non_finite, kinds and paths."""

from __future__ import annotations

import json

import numpy as np
import pytest
from test_tables_model import random_table

import densewire
from densewire import Column, DensewireError, Table

LAYOUTS = ("json", "json-rows", "json-columns")


def test_float_digits_are_shortest_round_trip_in_the_columns_type() -> None:
    """float64: Python's repr digits; float32: the shortest digits that read back to the same float32
    (numpy's float32 repr), never the float64 expansion."""
    rng = np.random.default_rng(0)
    f64 = rng.integers(0, 2 ** 64 - 1, 20000, dtype=np.uint64, endpoint=True).view("<f8")
    f64 = f64[np.isfinite(f64)]
    f32 = rng.integers(0, 2 ** 32 - 1, 20000, dtype=np.uint32, endpoint=True).view("<f4")
    f32 = f32[np.isfinite(f32)]
    f32 = np.concatenate([f32, (rng.standard_normal(20000) * 100).astype(np.float32), np.float32([0.1, 1e-45, 16777217])])
    for values, typ in ((f64, "float64"), (f32, "float32")):
        t = Table("t", [Column("x", typ, values)])
        tokens = json.loads(densewire.encode_table(t, "json-columns"), parse_float=str, parse_int=str)["columns"][0]["values"]
        back = np.array([float(s) for s in tokens]).astype(typ)
        assert back.view("u%d" % back.itemsize).tolist() == values.view("u%d" % values.itemsize).tolist()
        for s, v in zip(tokens, values.tolist() if typ == "float64" else values):
            shortest = repr(v) if typ == "float64" else np.format_float_positional(v, unique=True, trim="-")
            sci = np.format_float_scientific(v, unique=True, trim="-") if typ == "float32" else shortest
            digits = lambda x: len(x.lower().split("e")[0].replace("-", "").replace(".", "").strip("0"))  # noqa: E731
            assert digits(s) <= min(digits(shortest), digits(sci)), (s, shortest)
    assert densewire.encode_table(Table("t", [Column("x", "float32", [0.1])]), "json") == b'[{"x":0.1}]'


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("type_, values, field", [
    ("float64", [1.0, float("nan")], "x[1]"), ("float32", [float("-inf")], "x[0]"),
    ("float32[2]", [[1, 2], [3, 4], [5, float("inf")]], "x[2]"),
])
def test_non_finite_values_fail_to_encode(layout, type_, values, field) -> None:
    t = Table("t", [Column("a", "int32", list(range(len(values)))), Column("x", type_, values)])
    with pytest.raises(densewire.NonFiniteError) as info:
        densewire.encode_table(t, layout)
    assert info.value.field == field


@pytest.mark.parametrize("layout", LAYOUTS)
def test_random_tables_round_trip_and_are_standard_json(layout) -> None:
    for seed in range(40):
        t = random_table(seed, seed % 9)
        body = densewire.encode_table(t, layout)
        json.loads(body)  # strict RFC 8259 (no NaN tokens)
        assert densewire.decode_table(body, layout, columns=densewire.columns_header(t), name=t.name) == t


def test_int64_beyond_2_53_is_exact_in_python() -> None:
    t = Table("t", [Column("n", "int64", [2 ** 63 - 1, -(2 ** 63), 2 ** 53 + 1])])
    for layout in LAYOUTS:
        body = densewire.encode_table(t, layout)
        assert b"9007199254740993" in body
        assert densewire.decode_table(body, layout, columns="n=int64", name="t") == t


def test_integers_are_numbers_in_float_columns_and_wide_ints_round_to_nearest() -> None:
    body = '{"name":"t","rows":2,"columns":[{"name":"x","type":"float32","values":[3,16777217]}]}'
    got = densewire.decode_table(body, "json-columns").column("x").values
    assert got.tolist() == [3.0, 16777216.0]


def test_objects_layout_without_columns_names_the_header() -> None:
    with pytest.raises(densewire.InvalidFieldError) as info:
        densewire.decode_table("[]", "json")
    assert info.value.field == "Densewire-Columns"


@pytest.mark.parametrize("layout, body, columns, category, field", [
    ("json", '[{"a":1,"b":true,"c":3}]', "a=int32,b=bool", "invalid_field", "[0].c"),
    ("json", '[{"a":1,"b":true},5]', "a=int32,b=bool", "invalid_field", "[1]"),
    ("json", '{"a":1}', "a=int32", "malformed", None),
    ("json", '[{"a":1.5}]', "a=int32", "invalid_field", "[0].a"),
    ("json", '[{"a":true}]', "a=int64", "invalid_field", "[0].a"),
    ("json", '[{"a":1}]', "a=bool", "invalid_field", "[0].a"),
    ("json", '[{"a":"x"}]', "a=float64", "invalid_field", "[0].a"),
    ("json", '[{"a":1}]', "a=string", "invalid_field", "[0].a"),
    ("json", '[{"a":[1,"x"]}]', "a=float32[2]", "invalid_field", "[0].a[1]"),
    ("json", '[{"a":9223372036854775808}]', "a=int64", "invalid_field", "[0].a"),
    ("json", '[{"a":-2147483649}]', "a=int32", "invalid_field", "[0].a"),
    ("json", '[{"a":1}', "a=int32", "malformed", None),
    ("json", '[{"a":Infinity}]', "a=float64", "malformed", None),
    ("json", '[{"a":1}]', "a=decimal", "unknown_dtype", "Densewire-Columns"),
    ("json-rows", '{"columns":[{"name":"a","type":"int32"}],"rows":[5]}', None, "invalid_field", "rows[0]"),
    ("json-rows", '{"columns":[{"name":"a"}],"rows":[]}', None, "invalid_field", "columns[0].type"),
    ("json-rows", '{"columns":[{"type":"bool"}],"rows":[]}', None, "invalid_field", "columns[0].name"),
    ("json-rows", '{"columns":[{"name":"a","type":"bool"},{"name":"a","type":"bool"}],"rows":[]}', None,
     "invalid_field", "columns[1].name"),
    ("json-rows", '{"columns":[],"rows":{}}', None, "invalid_field", "rows"),
    ("json-rows", '{"name":5,"columns":[],"rows":[]}', None, "invalid_field", "name"),
    ("json-rows", '[]', None, "malformed", None),
    ("json-columns", '{"columns":[]}', None, "invalid_field", "rows"),
    ("json-columns", '{"rows":1.0,"columns":[]}', None, "invalid_field", "rows"),
    ("json-columns", '{"rows":1,"columns":[{"name":"a","type":"bool"}]}', None, "invalid_field", "columns[0].values"),
    ("json-columns", '{"rows":1,"columns":[{"name":"u","type":"uuid","values":[7]}]}', None, "invalid_field",
     "columns[0].values[0]"),
])
def test_decode_errors(layout, body, columns, category, field) -> None:
    with pytest.raises(DensewireError) as info:
        densewire.decode_table(body, layout, columns=columns)
    assert info.value.category == category, info.value
    assert info.value.field == field


def test_unknown_top_level_keys_are_ignored_and_uppercase_uuids_read() -> None:
    body = ('{"name":"t","extra":{"x":[1]},"rows":1,"columns":[{"name":"u","type":"uuid","hint":1,'
            '"values":["7C9E6679-7425-40DE-944B-E07FC1F90AE7"]}]}')
    t = densewire.decode_table(body, "json-columns")
    assert bytes(t.column("u").values[0]).hex() == "7c9e6679742540de944be07fc1f90ae7"


def test_malformed_json_reports_an_offset() -> None:
    with pytest.raises(densewire.MalformedError) as info:
        densewire.decode_table(b'[{"a":1} x]', "json", columns="a=int32")
    assert info.value.offset == 9


def test_large_table_in_every_layout() -> None:
    t = random_table(6, 100_000)
    for layout in LAYOUTS:
        assert densewire.decode_table(densewire.encode_table(t, layout), layout, columns=t.schema, name=t.name) == t


def test_objects_of_a_table_without_columns() -> None:
    t = Table("t", [], rows=2)
    assert densewire.encode_table(t, "json") == b"[{},{}]"
    assert densewire.decode_table(b"[{},{}]", "json", columns="") == Table("", [], rows=2)
    assert densewire.encode_table(t, "json-rows") == b'{"name":"t","columns":[],"rows":[[],[]]}'
