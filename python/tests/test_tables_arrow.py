"""Arrow IPC tables (SPEC.md section 15.7): pyarrow interop, from_arrow/to_arrow, views, errors."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from test_tables_model import random_table

import densewire
from densewire import Column, DensewireError, Table


def _stream(*batches, schema=None) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, schema or batches[0].schema) as w:
        for b in batches:
            w.write_batch(b)
    return sink.getvalue().to_pybytes()


def test_random_tables_round_trip_with_every_bit() -> None:
    for seed in range(20):
        t = random_table(seed, seed % 6 * 5, finite=False)
        body = densewire.encode_table(t, "arrow")
        assert densewire.decode_table(body, "arrow") == t
        assert Table.from_arrow(pa.ipc.open_stream(body).read_all()) == t
        assert Table.from_arrow(t.to_arrow()) == t


def test_numeric_columns_are_views_into_the_body() -> None:
    t = random_table(1, 100, finite=False, types=("int32", "int64", "float32", "float64", "uuid", "float32[4]", "bool"))
    body = densewire.encode_table(t, "arrow")
    arr = np.frombuffer(body, np.uint8)
    back = densewire.decode_table(body, "arrow")
    for c in back.columns:
        assert np.shares_memory(c.values, arr) == (c.type != "bool"), c.type


def test_to_arrow_does_not_copy_numeric_columns() -> None:
    t = Table("t", [Column("x", "float64", np.arange(10.0)), Column("v", "float32[2]", np.ones((10, 2), np.float32))])
    at = t.to_arrow()
    assert at.column("x").chunk(0).buffers()[1].address == t.column("x").values.ctypes.data
    assert at.schema.field("x").metadata == {b"densewire.type": b"float64"}


def test_foreign_streams_without_densewire_metadata_infer_types() -> None:
    batch = pa.record_batch({
        "b": pa.array([True, False]), "i": pa.array([1, 2], pa.int32()), "l": pa.array([3, 4], pa.int64()),
        "f": pa.array([0.5, 1.5], pa.float32()), "d": pa.array([0.1, 0.2]), "s": pa.array(["x", "ÿ"], pa.large_string()),
        "u": pa.array([b"\x01" * 16, b"\x02" * 16], pa.binary(16)),
        "v": pa.FixedSizeListArray.from_arrays(pa.array([1, 2, 3, 4], pa.float32()), 2),
    })
    t = densewire.decode_table(_stream(batch), "arrow")
    assert t.schema == [("b", "bool"), ("i", "int32"), ("l", "int64"), ("f", "float32"), ("d", "float64"),
                        ("s", "string"), ("u", "uuid"), ("v", "float32[2]")]
    assert t.name == "" and t.rows == 2 and t.column("s").values == ["x", "ÿ"]


def test_several_batches_are_concatenated() -> None:
    schema = pa.schema([pa.field("x", pa.int32(), nullable=False, metadata={"densewire.type": "int32"})],
                       metadata={"densewire.table": "t", "densewire.version": "1"})
    b1 = pa.record_batch([pa.array([1, 2], pa.int32())], schema=schema)
    b2 = pa.record_batch([pa.array([3], pa.int32())], schema=schema)
    t = densewire.decode_table(_stream(b1, b2), "arrow")
    assert t == Table("t", [Column("x", "int32", [1, 2, 3])])


@pytest.mark.parametrize("arr, meta, category", [
    (pa.array([1, None], pa.int32()), "int32", "invalid_field"),
    (pa.array([1, 2], pa.int64()), "int32", "invalid_field"),
    (pa.array([1.0, 2.0], pa.float64()), "float32", "invalid_field"),
    (pa.array([1, 2], pa.int32()), "decimal", "unknown_dtype"),
    (pa.array([b"a", b"b"], pa.binary()), None, "invalid_field"),
    (pa.FixedSizeListArray.from_arrays(pa.array([1, 2, 3, 4], pa.float32()), 2), "float32[3]", "invalid_field"),
])
def test_column_errors_name_the_column(arr, meta, category) -> None:
    field = pa.field("c", arr.type, metadata={"densewire.type": meta} if meta else None)
    body = _stream(pa.record_batch([arr], schema=pa.schema([field])))
    with pytest.raises(DensewireError) as info:
        densewire.decode_table(body, "arrow")
    assert info.value.category == category and info.value.field == "c"


def test_broken_streams() -> None:
    body = densewire.encode_table(random_table(2, 10), "arrow")
    with pytest.raises(densewire.TruncatedError):
        densewire.decode_table(body[:len(body) // 2], "arrow")
    with pytest.raises(densewire.MalformedError):
        densewire.decode_table(b"\x00" * 16 + body, "arrow")
    assert densewire.decode_table(body[:-8], "arrow") == densewire.decode_table(body, "arrow")  # EOS is optional


def test_missing_pyarrow_names_the_extra(monkeypatch) -> None:
    import builtins

    real = builtins.__import__

    def no_pyarrow(name, *args, **kwargs):
        if name == "pyarrow" or name.startswith("pyarrow."):
            raise ImportError(name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pyarrow)
    with pytest.raises(ImportError, match=r"densewire\[arrow\]"):
        densewire.encode_table(Table("t", []), "arrow")
