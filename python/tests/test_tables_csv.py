"""CSV tables (SPEC.md section 15.4): RFC 4180 quoting, line ends, non-finite spellings, errors."""

from __future__ import annotations

import csv
import io

import numpy as np
import pytest
from test_tables_model import random_table

import densewire
from densewire import Column, DensewireError, Table
from densewire._tables._csv import csv_field


@pytest.mark.parametrize("text, field", [
    ("plain", "plain"), ("", '""'), ("a,b", '"a,b"'), ('say "hi"', '"say ""hi"""'), ("a\nb", '"a\nb"'),
    ("a\rb", '"a\rb"'), (" lead", '" lead"'), ("trail ", '"trail "'), ("in side", "in side"), ('"', '""""'),
    ("ü ✓", "ü ✓"), ("tab\t", "tab\t"),
])
def test_quoting(text, field) -> None:
    assert csv_field(text) == field


def test_random_tables_agree_with_pythons_csv_reader() -> None:
    for seed in range(30):
        t = random_table(seed, seed % 8, types=("string", "int32", "float64", "uuid", "bool", "float32[3]"))
        body = densewire.encode_table(t, "csv")
        assert body.endswith(b"\r\n")
        records = list(csv.reader(io.StringIO(body.decode(), newline=""), strict=True))
        assert records[0] == [c.name for c in t.columns] and len(records) == t.rows + 1
        strings = next(k for k, c in enumerate(t.columns) if c.type == "string")
        assert [r[strings] for r in records[1:]] == t.columns[strings].values
        assert densewire.decode_table(body, "csv", columns=t.schema, name=t.name) == t


def test_lf_line_ends_bom_and_no_final_newline_are_accepted() -> None:
    t = Table("", [Column("a", "int32", [1, 2]), Column("s", "string", ["x y", ""])])
    for body in ("a,s\n1,x y\n2,\"\"\n", "\ufeffa,s\r\n1,x y\r\n2,\"\"", "a,s\r\n1,x y\r\n2,\r\n"):
        assert densewire.decode_table(body.encode(), "csv", columns="a=int32,s=string") == t


def test_non_finite_spellings_and_canonical_nan() -> None:
    f64 = np.array([0x7FF4000000000001, 0xFFF0000000000000, 0x7FF0000000000000, 0xFFF8000000000001], np.uint64).view("<f8")
    f32 = np.array([0x7FA00001, 0xFF800000, 0x7F800000, 0xFFC00001], np.uint32).view("<f4")
    vec = np.array([[np.nan, np.inf], [-np.inf, 1.5], [0.1, -0.0], [1, 2]], np.float32)
    t = Table("t", [Column("d", "float64", f64), Column("f", "float32", f32), Column("v", "float32[2]", vec)])
    body = densewire.encode_table(t, "csv")
    assert body.split(b"\r\n")[1:3] == [b'NaN,NaN,"[NaN,Infinity]"', b'-Infinity,-Infinity,"[-Infinity,1.5]"']
    back = densewire.decode_table(body, "csv", columns=t.schema)
    assert back.column("d").values.view("<u8").tolist() == [0x7FF8000000000000, 0xFFF0000000000000, 0x7FF0000000000000,
                                                            0x7FF8000000000000]
    assert back.column("f").values.view("<u4").tolist() == [0x7FC00000, 0xFF800000, 0x7F800000, 0x7FC00000]
    assert back.column("v").values.view("<u4")[2].tolist() == [0x3DCCCCCD, 0x80000000]


def test_record_lines_count_a_quoted_line_break_once() -> None:
    body = 'a,b\r\n"x\r\ny",1\r\n"z",no\r\n'
    with pytest.raises(densewire.InvalidFieldError) as info:
        densewire.decode_table(body, "csv", columns="a=string,b=int32")
    assert info.value.field == "line 3, b"


@pytest.mark.parametrize("body, columns, category, field", [
    ("a,b\r\n1,2\r\n", "a=int32", "shape_mismatch", "header"),
    ("b,a\r\n", "a=int32,b=int32", "shape_mismatch", "header"),
    ("", "a=int32", "shape_mismatch", "header"),
    ("a\r\n1\r\n\r\n", "a=int32", "shape_mismatch", "line 3"),
    ("a\r\n1.0\r\n", "a=int32", "invalid_field", "line 2, a"),
    ("a\r\n 1\r\n", "a=int64", "invalid_field", "line 2, a"),
    ("a\r\n2147483648\r\n", "a=int32", "invalid_field", "line 2, a"),
    ("a\r\n1_000\r\n", "a=float64", "invalid_field", "line 2, a"),
    ("a\r\nnan\r\n", "a=float64", "invalid_field", "line 2, a"),
    ("a\r\ninf\r\n", "a=float32", "invalid_field", "line 2, a"),
    ("a\r\n1e400\r\n", "a=float64", "invalid_field", "line 2, a"),  # beyond float64: only words spell infinity
    ("a\r\nInfinity\r\n-1e39\r\n", "a=float32", "invalid_field", "line 3, a"),
    ('a\r\n"[1,-Infinity]"\r\n"[1,1e400]"\r\n', "a=float32[2]", "invalid_field", "line 3, a"),
    ('a\r\n"[1,4e38]"\r\n', "a=float32[2]", "invalid_field", "line 2, a"),
    ("a\r\nTrue\r\n", "a=bool", "invalid_field", "line 2, a"),
    ("a\r\n7c9e6679-7425-40de-944b-e07fc1f90ae\r\n", "a=uuid", "invalid_field", "line 2, a"),
    ('a\r\n"[1,2,3]"\r\n', "a=float32[2]", "invalid_field", "line 2, a"),
    ('a\r\n"[1,x]"\r\n', "a=float32[2]", "invalid_field", "line 2, a"),
    ('a\r\n1,2\r\n', "a=float32[2]", "shape_mismatch", "line 2"),
    ('a\r\n"x"y\r\n', "a=string", "malformed", None),
    ('a\r\n"x\r\n', "a=string", "truncated", None),
    ("a\r\n1\r\n", None, "invalid_field", "Densewire-Columns"),
])
def test_errors(body, columns, category, field) -> None:
    with pytest.raises(DensewireError) as info:
        densewire.decode_table(body, "csv", columns=columns)
    assert info.value.category == category, info.value
    assert info.value.field == field


def test_truncated_offset_is_the_byte_length() -> None:
    body = 'a\r\n"ü\r\n'.encode()
    with pytest.raises(densewire.TruncatedError) as info:
        densewire.decode_table(body, "csv", columns="a=string")
    assert info.value.offset == len(body)


def test_invalid_utf8_is_malformed_at_its_offset() -> None:
    with pytest.raises(densewire.MalformedError) as info:
        densewire.decode_table(b"a\r\n\xff\r\n", "csv", columns="a=string")
    assert info.value.offset == 3


def test_large_table_round_trips() -> None:
    t = random_table(12, 100_000)
    assert densewire.decode_table(densewire.encode_table(t, "csv"), "csv", columns=t.schema, name=t.name) == t
