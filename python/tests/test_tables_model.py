"""Tables model (SPEC.md sections 15.1, 15.2): Column/Table validation, the Densewire-Columns header,
uuid text, float64 -> float32 rounding. ``random_table`` is shared by the other test_tables_* modules."""

from __future__ import annotations

import uuid as uuidlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import densewire
from densewire import Column, Table
from densewire._tables import parse_columns_header, to_float32
from densewire._tables._model import parse_uuid_text, uuid_text

ALL_TYPES = ("bool", "int32", "int64", "float32", "float64", "string", "uuid", "float32[1]", "float32[3]")
_SPECIAL64 = np.array([0x7FF8000000000000, 0xFFF0000000000000, 0x7FF0000000000000, 0x7FF4000000000001,
                       0x8000000000000000, 0x0000000000000001], np.uint64).view("<f8")
_SPECIAL32 = np.array([0x7FC00000, 0xFF800000, 0x7F800000, 0x7FA00001, 0x80000000, 0x00000001], np.uint32).view("<f4")
_TEXTS = ["", " ", "plain", "comma, here", 'say "hi"', "line\nbreak", "cr\rlf\r\n", " lead", "trail ", "ünïcødé ✓",
          "😀 astral", "tab\there", "[1,2]", "NaN", "true", "null", "a\\b", "\x00nul", "é" * 40, "x" * 300]


def random_table(seed: int, rows: int, *, finite: bool = True, types=ALL_TYPES, name: str | None = None) -> Table:
    """A table with one column of each type (in a shuffled order), values drawn from the whole range
    of each type: extremes, subnormals, -0.0, and (unless ``finite``) NaN payloads and infinities."""
    rng = np.random.default_rng(seed)
    cols = []
    for k, t in enumerate(rng.permutation(list(types)).tolist()):
        cname = ["c", "name with space", "é/ü", "comma,name", 'q"uote', "=eq", "%pct"][k % 7] + str(k)
        if t == "bool":
            v = rng.random(rows) < 0.5
        elif t in ("int32", "int64"):
            info = np.iinfo(t)
            v = rng.integers(info.min, info.max, rows, dtype=t, endpoint=True)
            if rows > 2:
                v[:2] = [info.min, info.max]
        elif t in ("float32", "float64") or t.startswith("float32["):
            u = "<u4" if t != "float64" else "<u8"
            shape = (rows, int(t[8:-1])) if t.startswith("float32[") else (rows,)
            bits = rng.integers(0, np.iinfo(u).max, shape, dtype=np.uint64 if u == "<u8" else np.uint32, endpoint=True)
            v = bits.astype(u).view("<f4" if u == "<u4" else "<f8")
            mixed = rng.standard_normal(shape).astype(v.dtype) * 100
            v = np.where(rng.random(shape) < 0.5, v, mixed)
            special = _SPECIAL64 if u == "<u8" else _SPECIAL32
            pick = rng.random(shape) < 0.1
            v = np.where(pick, special[rng.integers(0, len(special), shape)], v)
            if finite:
                v = np.where(np.isfinite(v), v, 1.5).astype(v.dtype)
        elif t == "string":
            v = [_TEXTS[i] for i in rng.integers(0, len(_TEXTS), rows)]
        else:
            v = rng.integers(0, 256, (rows, 16), dtype=np.uint8)
        cols.append(Column(cname, t, v))
    return Table(f"t{seed}" if name is None else name, cols, rows)


# ------------------------------------------------------------------------------ Column / Table
def test_column_keeps_arrays_of_its_dtype_and_converts_lists() -> None:
    a = np.arange(5, dtype="<i4")
    assert Column("a", "int32", a).values is a
    assert Column("b", "int64", [1, -(2 ** 63), 2 ** 63 - 1]).values.dtype == np.int64
    assert Column("c", "bool", [True, False]).values.dtype == np.bool_
    assert Column("d", "bool", np.array([0, 1], np.uint8)).values.tolist() == [False, True]
    assert Column("e", "float32", [0.1]).values[0] == np.float32(0.1)
    v = Column("f", "float32[2]", [[1, 2], [3, 4]]).values
    assert v.dtype == np.float32 and v.shape == (2, 2)
    assert Column("g", "float32[4]", []).values.shape == (0, 4)
    u = Column("h", "uuid", ["7c9e6679-7425-40de-944b-e07fc1f90ae7", uuidlib.UUID(int=1), b"\xff" * 16]).values
    assert u.shape == (3, 16) and bytes(u[0]) == uuidlib.UUID("7c9e6679-7425-40de-944b-e07fc1f90ae7").bytes
    assert bytes(u[1])[-1] == 1 and bytes(u[2]) == b"\xff" * 16


@pytest.mark.parametrize("type_, values", [
    ("int32", [2 ** 31]), ("int32", np.array([2 ** 40])), ("int64", [True]), ("int32", np.array([1.5])),
    ("bool", [1, 0]), ("bool", np.array([2], np.uint8)), ("float64", ["x"]), ("string", [1]),
    ("uuid", ["not a uuid"]), ("uuid", [3]), ("float32[3]", [[1, 2]]), ("float64", np.zeros((2, 2))),
])
def test_column_rejects_values_of_another_type(type_, values) -> None:
    with pytest.raises(densewire.InvalidFieldError) as info:
        Column("col", type_, values)
    assert info.value.field == "col"


@pytest.mark.parametrize("type_", ["Float32", "float16", "float32[]", "float32[0]", "float32[03]", "int", "", "float64[2]"])
def test_unknown_types_are_unknown_dtype(type_) -> None:
    with pytest.raises(densewire.UnknownDtypeError):
        Column("x", type_, [])


def test_table_checks_lengths_names_and_rows() -> None:
    with pytest.raises(densewire.InvalidFieldError) as info:
        Table("t", [Column("a", "int32", [1, 2]), Column("b", "int32", [1])])
    assert info.value.field == "b"
    with pytest.raises(densewire.InvalidFieldError) as info:
        Table("t", [Column("a", "int32", [1]), Column("a", "int64", [1])])
    assert info.value.field == "a"
    with pytest.raises(densewire.InvalidFieldError):
        Column("", "int32", [])
    with pytest.raises(densewire.InvalidFieldError):
        Table("t", [Column("a", "int32", [1])], rows=2)
    assert Table("t", []).rows == 0 and Table("t", [], rows=3).rows == 3
    t = Table("t", [Column("a", "int32", [1, 2])])
    assert t.rows == 2 and t.column("a").type == "int32" and t.schema == [("a", "int32")]
    with pytest.raises(KeyError):
        t.column("zz")


def test_equality_is_bitwise() -> None:
    nan1 = np.array([0x7FF8000000000001], np.uint64).view("<f8")
    nan2 = np.array([0x7FF8000000000002], np.uint64).view("<f8")
    assert Column("x", "float64", nan1) == Column("x", "float64", nan1.copy())
    assert Column("x", "float64", nan1) != Column("x", "float64", nan2)
    assert Column("x", "float64", [0.0]) != Column("x", "float64", [-0.0])
    assert Table("t", [Column("x", "string", ["a"])]) != Table("u", [Column("x", "string", ["a"])])


def test_to_float32_follows_section_3_3() -> None:
    # the largest float32, and the tie above it (rounds to even: infinity), 2^-150 (a tie: to 0), 1.5 * 2^-149
    x = np.array([0.1, 1e39, -1e39, 3.4028234663852886e38, 3.4028235677973366e38, 2.0 ** -150, 2.0 ** -149 * 1.5])
    got = to_float32(x).view("<u4").tolist()
    assert got == [0x3DCCCCCD, 0x7F800000, 0xFF800000, 0x7F7FFFFF, 0x7F800000, 0x00000000, 0x00000002]
    nans = np.array([0x7FF4000000000001, 0xFFF8000000000000], np.uint64).view("<f8")
    assert to_float32(nans).view("<u4").tolist() == [0x7FC00000, 0xFFC00000]
    assert Column("f", "float32", nans).values.view("<u4").tolist() == [0x7FC00000, 0xFFC00000]


# ------------------------------------------------------------------------------ uuid text
def test_uuid_text_round_trips_and_accepts_uppercase() -> None:
    rng = np.random.default_rng(1)
    raw = rng.integers(0, 256, (200, 16), dtype=np.uint8)
    text = [bytes(r).decode() for r in uuid_text(raw)]
    assert text == [str(uuidlib.UUID(bytes=bytes(r))) for r in raw]
    back, bad = parse_uuid_text([s.upper() for s in text])
    assert bad == -1 and np.array_equal(back, raw)
    for broken in ["7c9e6679-7425-40de-944b-e07fc1f90ae", "7c9e6679x7425-40de-944b-e07fc1f90ae7",
                   "7c9e6679-7425-40de-944b-e07fc1f90aeg", "{7c9e6679-7425-40de-944b-e07fc1f90ae}",
                   "7c9e66797425-40de-944b-e07fc1f90ae7ab", "7c9e6679-7425-40de-944b-e07fc1f90aé7"]:
        arr, at = parse_uuid_text([text[0], broken])
        assert arr is None and at == 1, broken


# ------------------------------------------------------------------------------ Densewire-Columns
def test_header_example_of_section_15_2() -> None:
    value = "uuid=uuid,status=int32,longitude=float64,latitude=float64,embedding=float32[384]"
    assert parse_columns_header(value) == [("uuid", "uuid"), ("status", "int32"), ("longitude", "float64"),
                                           ("latitude", "float64"), ("embedding", "float32[384]")]
    assert densewire.columns_header(parse_columns_header(value)) == value


def test_header_percent_encodes_every_byte_outside_unreserved() -> None:
    names = ["a b", "x,y", "k=v", "100%", "é", "😀", "-._~", "A-Z_az09", "/?#[]@!$&'()*+;"]
    header = densewire.columns_header([(n, "int32") for n in names])
    assert header.split(",")[0] == "a%20b=int32"
    assert header.split(",")[4] == "%C3%A9=int32"  # UTF-8, uppercase hex
    assert header.split(",")[6] == "-._~=int32"
    assert all(ch.isascii() for ch in header)
    assert parse_columns_header(header) == [(n, "int32") for n in names]
    assert parse_columns_header("%c3%a9=bool") == [("é", "bool")]  # lowercase hex is read too


@given(st.lists(st.text(min_size=1, max_size=12), min_size=0, max_size=6, unique=True),
       st.lists(st.sampled_from(ALL_TYPES + ("float32[384]",)), min_size=6, max_size=6))
@settings(max_examples=200, deadline=None)
def test_header_round_trips_any_names(names, types) -> None:
    pairs = list(zip(names, types))
    assert parse_columns_header(densewire.columns_header(pairs)) == pairs


@pytest.mark.parametrize("value, category", [
    ("a", "invalid_field"), ("a=int32,b", "invalid_field"), ("a=int32,", "invalid_field"), ("=int32", "invalid_field"),
    ("a%2=int32", "invalid_field"), ("a%zz=int32", "invalid_field"), ("a%=int32", "invalid_field"),
    ("%FF=int32", "invalid_field"), ("a=int32,a=int64", "invalid_field"), ("a=decimal", "unknown_dtype"),
    ("a=INT32", "unknown_dtype"), ("a=float32[0]", "unknown_dtype"), ("a = int32", "unknown_dtype"),
])
def test_header_errors_name_the_header(value, category) -> None:
    with pytest.raises(densewire.DensewireError) as info:
        parse_columns_header(value)
    assert info.value.category == category
    assert info.value.field == "Densewire-Columns"


def test_empty_header_is_no_columns_and_table_headers() -> None:
    assert parse_columns_header("") == []
    t = random_table(3, 4)
    h = densewire.table_headers(t)
    assert h["Densewire-Version"] == "1" and h["Densewire-Rows"] == "4" and h["Densewire-Table"] == "t3"
    assert parse_columns_header(h["Densewire-Columns"]) == t.schema


def test_formats_and_media_types_follow_the_contract() -> None:
    assert densewire.TABLE_FORMATS == ("json", "json-rows", "json-columns", "csv", "msgpack", "protobuf", "arrow")
    assert list(densewire.TABLE_MEDIA_TYPES) == list(densewire.TABLE_FORMATS)
    from densewire._tables import table_format_for_media_type

    assert table_format_for_media_type("application/x-protobuf") == "protobuf"
    assert table_format_for_media_type("Text/CSV; charset=utf-8") == "csv"
    assert table_format_for_media_type("application/octet-stream") is None
    with pytest.raises(densewire.InvalidFieldError):
        densewire.encode_table(random_table(0, 1), "xml")


@pytest.mark.parametrize("fmt", ["json", "json-rows", "json-columns", "csv", "msgpack", "protobuf", "arrow"])
def test_random_tables_round_trip_in_every_format(fmt) -> None:
    for seed in range(25):
        t = random_table(seed, seed % 7 * 3, finite=fmt not in ("msgpack", "protobuf", "arrow"))
        if fmt == "csv":  # CSV reads every NaN back as the canonical quiet NaN
            t = random_table(seed, seed % 7 * 3, finite=True)
        body = densewire.encode_table(t, fmt)
        assert densewire.decode_table(body, fmt, columns=densewire.columns_header(t), name=t.name) == t
