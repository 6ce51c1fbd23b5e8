"""Raw, MessagePack, Protobuf and Arrow: checked against msgpack-python, the protobuf runtime
(classes compiled from the shipped .proto) and pyarrow; and decoded without copying."""

from __future__ import annotations

import msgpack
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import densewire
from densewire import Embeddings, Tensor, Usage

ALL = ["float32", "float16", "bfloat16", "float64", "int8", "uint8", "binary"]


def random_tensor(dtype: str, n: int, d: int, seed: int) -> Tensor:
    nbytes = n * densewire.row_bytes(dtype, d)
    raw = np.random.default_rng(seed).integers(0, 256, nbytes, dtype=np.uint8).tobytes()
    if dtype == "binary" and d % 8 and n:  # padding bits are zero on the wire
        rows = np.frombuffer(raw, np.uint8).reshape(n, -1).copy()
        rows[:, -1] &= (0xFF << (8 - d % 8)) & 0xFF
        raw = rows.tobytes()
    return Tensor.from_bytes(raw, dtype, (n, d))


cases = st.tuples(st.sampled_from(ALL), st.integers(0, 20), st.integers(0, 70), st.integers(0, 2**31)).map(
    lambda a: random_tensor(*a))
envelopes = st.tuples(cases, st.one_of(st.none(), st.text(max_size=40)),
                      st.one_of(st.none(), st.builds(Usage, st.integers(0, 2**40), st.integers(0, 2**40)))).map(
    lambda a: Embeddings(*a))


def same(a: Tensor, b: Tensor) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and np.ascontiguousarray(a.array).tobytes() == np.ascontiguousarray(b.array).tobytes()


def inside(array: np.ndarray, body) -> bool:
    buf = np.frombuffer(body, np.uint8)
    return buf.ctypes.data <= array.ctypes.data and array.ctypes.data + array.nbytes <= buf.ctypes.data + buf.nbytes


@settings(max_examples=120, deadline=None)
@given(envelopes)
def test_msgpack_agrees_with_msgpack_python(emb: Embeddings) -> None:
    body = densewire.encode_msgpack(emb)
    doc = msgpack.unpackb(body, raw=False)
    assert doc["dtype"] == emb.tensor.dtype and doc["shape"] == list(emb.tensor.shape)
    assert doc["data"] == bytes(emb.tensor.to_bytes())
    # msgpack-python writes the same map in the same smallest encodings: byte-exact
    expected = {} if emb.model is None else {"model": emb.model}
    expected |= {"dtype": emb.tensor.dtype, "shape": list(emb.tensor.shape), "data": bytes(emb.tensor.to_bytes())}
    if emb.usage is not None:
        expected["usage"] = {"prompt_tokens": emb.usage.prompt_tokens, "total_tokens": emb.usage.total_tokens}
    assert msgpack.packb(expected, use_bin_type=True) == body
    back = densewire.decode_msgpack(msgpack.packb(expected, use_bin_type=True))
    assert same(back.tensor, emb.tensor) and back.model == emb.model and back.usage == emb.usage


@settings(max_examples=120, deadline=None)
@given(envelopes)
def test_protobuf_agrees_with_the_protobuf_runtime(tensor_pb2, emb: Embeddings) -> None:
    body = densewire.encode_protobuf(emb)
    msg = tensor_pb2.EmbeddingsResponse.FromString(body)
    assert msg.embeddings.data == bytes(emb.tensor.to_bytes())
    assert list(msg.embeddings.shape) == list(emb.tensor.shape)
    assert msg.model == (emb.model or "")
    assert msg.SerializeToString() == body  # byte-exact with the official serializer
    back = densewire.decode_protobuf(msg.SerializeToString())
    assert same(back.tensor, emb.tensor)
    assert back.usage == (emb.usage or Usage())


def test_protobuf_accepts_unpacked_shape_and_skips_unknown_fields(tensor_pb2) -> None:
    t = random_tensor("float32", 2, 3, 1)
    # unpacked shape (two varint fields) + an unknown field 9 (varint) + unknown field 10 (bytes)
    body = b"\x08\x01\x10\x02\x10\x03\x48\x05\x52\x02ab\x1a\x18" + bytes(t.to_bytes())
    assert same(densewire.decode_protobuf(body, "Tensor").tensor, t)


def test_protobuf_skips_unknown_groups_as_the_protobuf_runtime_does(tensor_pb2) -> None:
    t = random_tensor("float32", 2, 3, 1)
    plain = densewire.encode_protobuf(t)
    # field 11 as a group (wire types 3/4) holding a varint and a nested group 12
    group = b"\x5b" + b"\x08\x07" + b"\x63\x10\x01\x64" + b"\x5c"
    body = group + plain
    runtime = tensor_pb2.Tensor.FromString(body)  # the official parser skips (keeps) the group too
    assert (runtime.dtype, list(runtime.shape), runtime.data) == (1, [2, 3], bytes(t.to_bytes()))
    assert same(densewire.decode_protobuf(body, "Tensor").tensor, t)
    with pytest.raises(densewire.MalformedError) as err:  # end tag of another group
        densewire.decode_protobuf(b"\x5b\x08\x07\x64" + plain, "Tensor")
    assert err.value.offset == 3
    with pytest.raises(densewire.TruncatedError):  # no end tag
        densewire.decode_protobuf(b"\x5b\x08\x07", "Tensor")
    with pytest.raises(densewire.MalformedError, match="nested too deeply"):
        densewire.decode_protobuf(b"\x5b" * 100 + b"\x5c" * 100, "Tensor")
    with pytest.raises(densewire.MalformedError):  # a lone end-group tag
        densewire.decode_protobuf(b"\x5c" + plain, "Tensor")


@settings(max_examples=60, deadline=None)
@given(envelopes)
def test_arrow_round_trip_and_pyarrow_reads_it(emb: Embeddings) -> None:
    body = densewire.encode_arrow(emb)
    table = pa.ipc.open_stream(body).read_all()
    assert table.num_rows == emb.tensor.n
    meta = table.schema.metadata
    assert meta[b"densewire.dtype"].decode() == emb.tensor.dtype
    back = densewire.decode_arrow(body)
    assert same(back.tensor, emb.tensor) and back.model == emb.model


@pytest.mark.parametrize("fmt", ["raw", "msgpack", "protobuf", "arrow"])
@pytest.mark.parametrize("dtype", ALL)
def test_binary_formats_decode_without_copying(fmt: str, dtype: str) -> None:
    emb = Embeddings(random_tensor(dtype, 64, 96, 7), "m", Usage(1, 1))
    body, headers = densewire.encode(emb, fmt)
    body = bytes(body)
    got = densewire.decode(body, fmt, headers)
    assert same(got.tensor, emb.tensor)
    assert inside(got.tensor.array, body), f"{fmt} copied the {dtype} data"
    assert not got.tensor.array.flags.writeable  # a view over immutable bytes


def test_raw_headers_round_trip_case_insensitively() -> None:
    emb = Embeddings(random_tensor("float16", 3, 5, 2), "model/x", Usage(7, 9))
    body, headers = densewire.encode_raw(emb)
    lowered = {k.lower(): v for k, v in headers.items()}
    got = densewire.decode_raw(bytes(body), lowered)
    assert same(got.tensor, emb.tensor) and got.model == "model/x" and got.usage == Usage(7, 9)


def test_arrow_missing_extra_names_the_extra(monkeypatch) -> None:
    import builtins

    real = builtins.__import__

    def no_pyarrow(name, *args, **kwargs):
        if name.startswith("pyarrow"):
            raise ImportError("No module named 'pyarrow'")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pyarrow)
    with pytest.raises(ImportError, match=r"densewire\[arrow\]"):
        densewire.encode_arrow(random_tensor("float32", 1, 2, 0))


@pytest.mark.parametrize("fmt", ["msgpack", "protobuf", "arrow"])
def test_every_truncation_fails_cleanly(fmt: str) -> None:
    """Cut a valid body at every length: a DensewireError, never another exception. Two formats have
    one valid cut: Protobuf has no framing (dropping the trailing usage field leaves a valid message)
    and Arrow's end-of-stream marker is optional (a stream may just end after its batch)."""
    emb = Embeddings(random_tensor("float32", 2, 3, 3), "m", Usage(1, 1))
    body = bytes(densewire.encode(emb, fmt)[0])
    decoded = 0
    for cut in range(len(body)):
        try:
            got = densewire.decode(body[:cut], fmt)
        except densewire.DensewireError:
            continue
        decoded += 1
        assert fmt != "msgpack" and same(got.tensor, emb.tensor), f"cut at {cut} decoded to something else"
    assert decoded == (0 if fmt == "msgpack" else 1)
