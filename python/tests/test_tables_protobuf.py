"""Columnar Protobuf tables (SPEC.md section 15.6) against the protobuf runtime, with classes compiled
from the shipped proto/densewire/v1/table.proto; views, byte-stream-split, wire-format errors."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_tables_model import random_table

import densewire
from densewire import Column, DensewireError, Table
from densewire._tables._binary import decode_varints, encode_varints, join_bytes, split_bytes
from densewire._tables._protobuf import TYPE_ENUM

from conftest import REPO


@pytest.fixture(scope="module")
def table_pb2(tmp_path_factory):
    from grpc_tools import protoc

    out = tmp_path_factory.mktemp("pb_table")
    status = protoc.main(["protoc", f"-I{REPO / 'proto'}", f"--python_out={out}", str(REPO / "proto/densewire/v1/table.proto")])
    assert status == 0, "protoc failed on proto/densewire/v1/table.proto"
    spec = importlib.util.spec_from_file_location("densewire_v1_table_pb2", out / "densewire/v1/table_pb2.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _naive_split(data: bytes, width: int) -> bytes:
    m = len(data) // width
    return bytes(data[i * width + k] for k in range(width) for i in range(m))


def _runtime_message(pb2, t: Table, split: bool):
    msg = pb2.Table(name=t.name, rows=t.rows)
    for c in t.columns:
        col = msg.columns.add(name=c.name)
        d = c.dims
        col.type = 8 if d else TYPE_ENUM[c.type]
        if d:
            col.dimensions = d
        if c.type == "string":
            col.data = "".join(c.values).encode()
            col.lengths.extend(len(v.encode()) for v in c.values)
        else:
            plain = bytes(np.ascontiguousarray(c.values).view(np.uint8).reshape(-1)) if t.rows else b""
            width = 4 if d else np.dtype(c.values.dtype).itemsize if c.type != "uuid" else 16
            if split and width >= 2:
                col.encoding = 1
                col.data = _naive_split(plain, width)
            else:
                col.data = plain
    return msg


@given(st.integers(0, 2 ** 32 - 1), st.integers(0, 40), st.booleans())
@settings(max_examples=60, deadline=None)
def test_agrees_with_the_protobuf_runtime_both_ways(table_pb2, seed, rows, split) -> None:
    t = random_table(seed, rows, finite=False)
    ours = densewire.encode_table(t, "protobuf", byte_stream_split=split)
    theirs = _runtime_message(table_pb2, t, split).SerializeToString(deterministic=True)
    assert ours == theirs
    parsed = table_pb2.Table.FromString(ours)
    assert parsed.name == t.name and parsed.rows == t.rows and len(parsed.columns) == len(t.columns)
    assert densewire.decode_table(theirs, "protobuf") == t


def test_decoder_accepts_unpacked_lengths_unknown_fields_and_repeated_columns(table_pb2) -> None:
    t = Table("s", [Column("s", "string", ["ab", "", "ü"]), Column("x", "float64", [1.0, 2.0, 3.0])])
    body = densewire.encode_table(t, "protobuf")
    msg = table_pb2.Table.FromString(body)
    # unpacked lengths (field 6 as three varints), an unknown varint field 15 and an unknown bytes field 9
    col = msg.columns[0]
    unpacked = (b"\x0a\x01s\x10\x06\x2a" + bytes([len(col.data)]) + col.data + b"\x30\x02\x30\x00\x30\x02"
                + b"\x78\x05" + b"\x4a\x03abc")
    second = msg.columns[1].SerializeToString()
    body2 = (b"\x0a\x01s\x10\x03" + b"\x1a" + bytes([len(unpacked)]) + unpacked + b"\x1a" + bytes([len(second)]) + second
             + b"\xa0\x01\x07")
    assert densewire.decode_table(body2, "protobuf") == t


def test_fixed_width_columns_are_views_into_the_body_when_aligned() -> None:
    t = random_table(5, 64, finite=False, types=("int64", "float64", "uuid", "bool", "float32[3]"))
    body = bytearray(densewire.encode_table(t, "protobuf", byte_stream_split=False))
    back = densewire.decode_table(body, "protobuf")
    body_arr = np.frombuffer(body, np.uint8)
    for c in back.columns:
        a = c.values
        assert a.flags.aligned
        shares = np.shares_memory(a, body_arr)
        if c.type in ("uuid", "bool"):
            assert shares, c.type  # byte items: always views
        else:
            assert shares == ((body_arr.ctypes.data + _offset_in(body, bytes(np.ascontiguousarray(a).view(np.uint8)))) % a.dtype.itemsize == 0)
    split = densewire.decode_table(densewire.encode_table(t, "protobuf"), "protobuf")
    assert split == back


def _offset_in(body: bytearray, data: bytes) -> int:
    return bytes(body).index(data)


def test_byte_stream_split_matches_the_definition() -> None:
    rng = np.random.default_rng(2)
    for width in (2, 4, 8, 16):
        data = rng.integers(0, 256, width * 37, dtype=np.uint8)
        s = split_bytes(data, width)
        assert s.tobytes() == _naive_split(data.tobytes(), width)
        assert join_bytes(s.reshape(-1), width).reshape(-1).tobytes() == data.tobytes()


def test_bss_policies(table_pb2) -> None:
    t = random_table(9, 5, types=("bool", "string", "int32", "int64", "float32", "float64", "uuid", "float32[2]"))
    # the default (the server's): float32, float64 and vectors (enum values 4, 5, 8) only
    msg = table_pb2.Table.FromString(densewire.encode_table(t, "protobuf"))
    assert [c.encoding for c in msg.columns] == [1 if c.type in (4, 5, 8) else 0 for c in msg.columns]
    # True: every fixed-width column of width >= 2, never bool (1) or string (6)
    msg = table_pb2.Table.FromString(densewire.encode_table(t, "protobuf", byte_stream_split=True))
    for c in msg.columns:
        assert c.encoding == (0 if c.type in (1, 6) else 1)
    msg = table_pb2.Table.FromString(densewire.encode_table(t, "protobuf", byte_stream_split=False))
    assert all(c.encoding == 0 for c in msg.columns)
    with pytest.raises(ValueError, match="byte_stream_split"):
        densewire.encode_table(t, "protobuf", byte_stream_split="uuids")


def test_packed_varints_vectorised_match_the_scalar_writer() -> None:
    from densewire._protobuf import _varint

    v = np.array([0, 1, 127, 128, 255, 300, 16383, 16384, 2 ** 21, 2 ** 28 - 1, 2 ** 28, 2 ** 32 - 1], np.uint64)
    packed = encode_varints(v)
    assert packed == b"".join(_varint(int(x)) for x in v)
    assert decode_varints(packed, "f", 0).tolist() == v.tolist()
    # a 10-byte varint is read as a uint32 reads it: the low 32 bits
    assert decode_varints(_varint(2 ** 64 - 1), "f", 0).tolist() == [2 ** 32 - 1]
    with pytest.raises(densewire.MalformedError):
        decode_varints(b"\x80", "f", 3)
    with pytest.raises(densewire.MalformedError):
        decode_varints(b"\xff" * 10 + b"\x01", "f", 3)


@pytest.mark.parametrize("body, category, field", [
    # a column with dimensions on a non-vector type
    (b"\x10\x01\x1a\x07\x0a\x01x\x10\x05\x18\x02", "invalid_field", "columns[0].dimensions"),
    # lengths on a fixed-width column
    (b"\x10\x01\x1a\x0e\x0a\x01x\x10\x02\x2a\x04\x01\x00\x00\x00\x32\x01\x04", "invalid_field", "columns[0].lengths"),
    # bool byte 2
    (b"\x10\x01\x1a\x08\x0a\x01b\x10\x01\x2a\x01\x02", "invalid_field", "columns[0].data[0]"),
    # duplicate column names
    (b"\x1a\x05\x0a\x01a\x10\x02\x1a\x05\x0a\x01a\x10\x02", "invalid_field", "columns[1].name"),
    # a column without a name
    (b"\x1a\x02\x10\x02", "invalid_field", "columns[0].name"),
    # rows with the wrong wire type
    (b"\x12\x01\x01", "malformed", None),
    # a column field running past the end of the embedded column
    (b"\x1a\x03\x0a\x05a", "malformed", None),
])
def test_column_level_errors(body, category, field) -> None:
    with pytest.raises(DensewireError) as info:
        densewire.decode_table(body, "protobuf")
    assert info.value.category == category, info.value
    assert info.value.field == field


def test_every_truncation_fails_cleanly() -> None:
    t = random_table(11, 3, finite=False)
    body = densewire.encode_table(t, "protobuf")
    for cut in range(len(body)):
        try:
            densewire.decode_table(body[:cut], "protobuf")
        except DensewireError as exc:
            assert exc.category in ("truncated", "malformed", "length_mismatch", "shape_mismatch", "invalid_field")
            if exc.category == "truncated":
                assert exc.offset == cut


def test_large_table_round_trips_and_bss_is_exact() -> None:
    t = random_table(4, 200_000, finite=False, types=("uuid", "int32", "float64", "float32", "float32[8]"))
    for split in (False, True):
        body = densewire.encode_table(t, "protobuf", byte_stream_split=split)
        assert densewire.decode_table(body, "protobuf") == t
