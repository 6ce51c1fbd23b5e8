"""densewire.pgvector without a database: the binary COPY writer and reader (SPEC.md section 16) on random
inputs of every type, in chunks, with every kind of id, and their errors. The golden cases are in
test_golden_pgcopy.py; a real PostgreSQL with pgvector in test_pgvector_postgres.py."""

from __future__ import annotations

import doctest
import struct
import uuid

import numpy as np
import pytest

import densewire
from densewire import NonFiniteError, Tensor, pgvector
from densewire._stores import _esbulk, _pgcopy
from densewire._stores._pgcopy_read import _Walker, _header

RNG = np.random.default_rng(18)


def test_doctests() -> None:
    for module in (pgvector, _pgcopy, _esbulk):
        result = doctest.testmod(module)
        assert result.attempted > 0 and result.failed == 0, module.__name__


def _walk(body: bytes, **kw) -> pgvector.CopyData:
    """The tuple-by-tuple reader alone (the fast path bypassed)."""
    cols = pgvector.CopyColumns(**kw)
    buf = memoryview(body)
    return _Walker(buf, cols, 0).read(_header(buf))


@pytest.mark.parametrize("pg_type", ["vector", "halfvec"])
@pytest.mark.parametrize("id_type", [None, "int8", "int4", "uuid", "text"])
def test_round_trip_every_id_type(pg_type: str, id_type: str | None) -> None:
    n, d = 37, 13
    v = RNG.standard_normal((n, d)).astype(np.float32)
    ids = {None: None, "int8": RNG.integers(-(1 << 62), 1 << 62, n), "int4": RNG.integers(-(1 << 31), 1 << 31, n),
           "uuid": [uuid.UUID(int=int(x)) for x in RNG.integers(0, 1 << 62, n)],
           "text": [f"doc-{i}-{'é' * (i % 5)}" for i in range(n)]}[id_type]
    body = pgvector.encode_copy(v, pg_type=pg_type, ids=ids, id_type=id_type)
    got = pgvector.decode_copy(body, pg_type=pg_type, id_type=id_type)
    expected = v if pg_type == "vector" else densewire.convert(v, "float16").array
    assert got.tensor.array.dtype == expected.dtype
    assert np.array_equal(got.tensor.array.view(np.uint8), expected.view(np.uint8))  # bit for bit
    if id_type is None:
        assert got.ids is None
    else:
        assert [str(i) for i in got.ids] == [str(i) for i in ids]
    walked = _walk(body, pg_type=pg_type, id_type=id_type)  # both readers agree
    assert np.array_equal(walked.tensor.array.view(np.uint8), got.tensor.array.view(np.uint8))
    assert [str(i) for i in (walked.ids if id_type else [])] == [str(i) for i in (got.ids if id_type else [])]


def test_null_ids_of_every_type() -> None:
    v = np.arange(12, dtype=np.float32).reshape(4, 3)
    for id_type, ids in (("int8", [5, None, 7, None]), ("int4", [None, 1, 2, 3]), ("text", ["a", None, "", None]),
                         ("uuid", [None, str(uuid.UUID(int=9)), None, str(uuid.UUID(int=10))])):
        body = pgvector.encode_copy(v, ids=ids, id_type=id_type)
        got = pgvector.decode_copy(body, id_type=id_type)
        assert [None if i is None else str(i) for i in got.ids] == [None if i is None else str(i) for i in ids]
        assert np.array_equal(got.tensor.array, v)
        assert body.count(b"\xff\xff\xff\xff") == sum(i is None for i in ids)  # a NULL is the length -1


def test_layout_of_one_tuple() -> None:
    """The bytes of SPEC.md section 16, spelled out with struct."""
    body = pgvector.encode_copy(np.array([[1.5, -0.0]], np.float32), ids=np.array([-2]), id_type="int8")
    expected = (b"PGCOPY\n\xff\r\n\x00" + struct.pack(">ii", 0, 0) + struct.pack(">h", 2) + struct.pack(">iq", 8, -2)
                + struct.pack(">ihh", 12, 2, 0) + struct.pack(">ff", 1.5, -0.0) + struct.pack(">h", -1))
    assert body == expected


@pytest.mark.parametrize("d", [1, 7, 8, 9, 1536])
def test_bit_from_floats_and_bits(d: int) -> None:
    v = RNG.standard_normal((5, d)).astype(np.float32)
    got = pgvector.decode_copy(pgvector.encode_copy(v, pg_type="bit"), pg_type="bit")
    assert got.tensor.dtype == "binary" and got.tensor.d == d
    assert np.array_equal(got.tensor.array, np.packbits(v > 0, axis=1))
    packed = np.packbits(v > 0, axis=1)
    packed[:, -1] |= np.uint8((1 << (-d % 8)) - 1)  # the input's pad bits set: the writer clears them
    again = pgvector.decode_copy(pgvector.encode_copy(Tensor.from_array(packed, "binary", d), pg_type="bit"),
                                 pg_type="bit")
    assert np.array_equal(again.tensor.array, got.tensor.array)


def test_sparsevec_round_trip() -> None:
    v = RNG.standard_normal((20, 50)).astype(np.float32)
    v[RNG.random(v.shape) < 0.8] = 0.0
    v[3] = 0.0  # a row with no non-zero value
    v[4, 5] = -0.0
    body = pgvector.encode_copy(v, pg_type="sparsevec", ids=list(range(20)), id_type="int8")
    got = pgvector.decode_copy(body, pg_type="sparsevec", id_type="int8")
    assert np.array_equal(got.tensor.array, v) and got.ids.tolist() == list(range(20))
    assert not np.signbit(got.tensor.array[4, 5])  # -0.0 is not stored: it reads back as +0.0
    nnz = int((v != 0).sum())
    assert len(body) == 21 + 20 * (2 + 12 + 4 + 12) + 8 * nnz


def test_sparsevec_dense_tensor_is_bounded_before_it_is_allocated() -> None:
    """SPEC.md 16.2: a sparsevec row of 12 bytes can stand for 4 GB of zeros; the reader refuses a dense
    tensor above 4096 times the stream's size (at least 64 MiB), at the offset of the row's d, as Go and
    Rust do, and reads the largest one under the bound."""
    def stream(d: int, rows: int) -> bytes:
        row = struct.pack(">hiiii", 1, 12, d, 0, 0)  # one column, a sparsevec of d dimensions, no non-zero
        return _pgcopy.HEADER + row * rows + _pgcopy.TRAILER

    huge = stream(1_000_000_000, 1)  # 4 GB dense from a 35-byte stream
    with pytest.raises(densewire.InvalidFieldError) as err:
        pgvector.decode_copy(huge, pg_type="sparsevec")
    assert (err.value.field, err.value.offset) == ("embedding", 19 + 2 + 4)
    d = 1 << 20  # 4 MiB a row: the 17th row passes the 64 MiB floor (the stream is far smaller)
    with pytest.raises(densewire.InvalidFieldError) as err:
        pgvector.decode_copy(stream(d, 17), pg_type="sparsevec")
    assert err.value.offset == 19 + 16 * 18 + 2 + 4
    got = pgvector.decode_copy(stream(d, 16), pg_type="sparsevec")
    assert got.tensor.shape == (16, d) and not got.tensor.array.any()


def test_chunks_make_the_same_stream_and_number_rows_in_errors() -> None:
    v = RNG.standard_normal((1000, 8)).astype(np.float32)
    ids = np.arange(1000)
    cols = pgvector.CopyColumns("vector", "embedding", "int8")
    whole = pgvector.encode_copy(v, ids=ids, id_type="int8")
    for reuse in (False, True):
        pieces = b"".join(bytes(p) for p in pgvector.iter_copy(v, cols, ids, rows_per_chunk=64, reuse_buffer=reuse))
        assert pieces == whole
    v[700, 3] = np.inf
    it = pgvector.iter_copy(v, cols, ids, rows_per_chunk=64)
    produced = []
    with pytest.raises(NonFiniteError) as err:
        for piece in it:
            produced.append(bytes(piece))
    assert err.value.field == "embedding[700][3]"
    assert len(produced) == 1 + 700 // 64  # the header and the chunks before the bad one


def test_conversions_into_each_type() -> None:
    v64 = RNG.standard_normal((4, 6))
    got = pgvector.decode_copy(pgvector.encode_copy(v64), d=6).tensor.array
    assert np.array_equal(got, v64.astype(np.float32))
    bf = densewire.convert(v64.astype(np.float32), "bfloat16")
    assert np.array_equal(pgvector.decode_copy(pgvector.encode_copy(bf)).tensor.array, bf.to_float32())
    half = pgvector.decode_copy(pgvector.encode_copy(v64, pg_type="halfvec"), pg_type="halfvec").tensor.array
    assert np.array_equal(half, v64.astype(np.float16))  # float64 rounds to float16 directly
    with pytest.raises(densewire.InvalidFieldError, match="int8 tensor"):
        pgvector.encode_copy(Tensor.from_array(np.ones((1, 3), np.int8)))


def test_writer_errors() -> None:
    v = np.ones((3, 2), np.float32)
    with pytest.raises(densewire.InvalidFieldError) as err:
        pgvector.encode_copy(np.ones((1, 16001), np.float32))
    assert err.value.field == "embedding"
    assert pgvector.decode_copy(pgvector.encode_copy(np.ones((1, 16001), np.float32), pg_type="bit"),
                                pg_type="bit").tensor.d == 16001
    with pytest.raises(densewire.ShapeMismatchError):
        pgvector.encode_copy(v, ids=[1, 2], id_type="int8")
    with pytest.raises(densewire.InvalidFieldError) as err:
        pgvector.encode_copy(v, ids=[1, "x", 3], id_type="int8", id_column="key")
    assert err.value.field == "key[1]"
    with pytest.raises(densewire.InvalidFieldError) as err:
        pgvector.encode_copy(v, ids=np.array([0, 1 << 63, 2], np.uint64), id_type="int8")
    assert err.value.field == "id[1]"
    with pytest.raises(densewire.InvalidFieldError) as err:
        pgvector.encode_copy(v, ids=[None, "not-a-uuid", None], id_type="uuid")
    assert err.value.field == "id[1]"
    with pytest.raises(densewire.InvalidFieldError):
        pgvector.encode_copy(v, id_type="int8")  # an id column and no ids
    with pytest.raises(densewire.InvalidFieldError):
        pgvector.CopyColumns("vectors")
    dense = np.ones((2, 16001), np.float32)
    dense[0, 0] = 0.0
    with pytest.raises(densewire.InvalidFieldError) as err:
        pgvector.encode_copy(dense, pg_type="sparsevec")
    assert err.value.field == "embedding[1]"
    big = np.full((1, 2), 1e38, np.float32)  # a finite input whose sum overflows: still written
    assert np.array_equal(pgvector.decode_copy(pgvector.encode_copy(big)).tensor.array, big)


def test_reader_takes_the_fast_path_only_for_uniform_tuples() -> None:
    v = RNG.standard_normal((50, 4)).astype(np.float32)
    body = bytearray(pgvector.encode_copy(v, ids=np.arange(50), id_type="int8"))
    got = pgvector.decode_copy(bytes(body), id_type="int8")
    assert got.tensor.array.flags.owndata or got.tensor.array.base is not None
    assert np.array_equal(got.tensor.array, v)
    tuple_size = 2 + (4 + 8) + (4 + 4 + 4 * 4)
    body[19 + tuple_size * 10 + 21] = 1  # a non-zero unused word in row 10
    with pytest.raises(densewire.MalformedError) as err:
        pgvector.decode_copy(bytes(body), id_type="int8")
    assert err.value.offset == 19 + tuple_size * 10 + 20
    empty = pgvector.decode_copy(pgvector.encode_copy(np.zeros((0, 5), np.float32)), d=5)
    assert empty.tensor.shape == (0, 5)
    with pytest.raises(densewire.ShapeMismatchError):  # an id column the reader did not expect
        pgvector.decode_copy(pgvector.encode_copy(v, ids=np.arange(50), id_type="int8"))


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf, 65520.0, -1e6])
def test_halfvec_refuses_values_that_are_not_finite_in_float16(bad: float) -> None:
    """Checked on the float16 exponent bits: NaN, infinities, and finite float32 values that round to
    an infinite float16 (|x| >= 65520) are refused with the row and column; 65504 (the largest) is not."""
    v = np.ones((5, 4), np.float32)
    v[3, 2] = bad
    with pytest.raises(NonFiniteError) as err:
        pgvector.encode_copy(v, pg_type="halfvec")
    assert err.value.field == "embedding[3][2]"
    v[3, 2] = 65504.0
    back = pgvector.decode_copy(pgvector.encode_copy(v, pg_type="halfvec"), pg_type="halfvec").tensor.array
    assert back[3, 2] == np.float16(65504.0)


@pytest.mark.parametrize("pg_type,bad", [("vector", np.nan), ("vector", -np.inf), ("halfvec", 70000.0),
                                         ("halfvec", np.nan)])
def test_items_are_checked_block_by_block_and_the_bad_one_named(pg_type: str, bad: float) -> None:
    """encode_tuples converts, checks and swaps a chunk in blocks of about _BLOCK_BYTES of input: a value
    that is not finite (or, for halfvec, overflows float16) in a later block of a later chunk is named
    by its row in the whole stream and its column; the blocks before it and after it encode exactly as a
    stream of the same rows without it."""
    d = 1536
    block = _pgcopy._BLOCK_BYTES // (4 * d)
    v = RNG.standard_normal((5 * block + 7, d)).astype(np.float32)
    body = pgvector.encode_copy(v, pg_type=pg_type, ids=np.arange(len(v)), id_type="int8")
    got = pgvector.decode_copy(body, pg_type=pg_type, id_type="int8")
    assert np.array_equal(got.tensor.array, v if pg_type == "vector" else densewire.convert(v, "float16").array)
    row = 3 * block + 5  # in the second chunk of 2 * block + 3 rows, its second block
    v[row, 1000] = bad
    cols = pgvector.CopyColumns(pg_type, "embedding", "int8")
    with pytest.raises(NonFiniteError) as err:
        for _ in pgvector.iter_copy(v, cols, np.arange(len(v)), rows_per_chunk=2 * block + 3, reuse_buffer=True):
            pass
    assert err.value.field == f"embedding[{row}][1000]"


@pytest.mark.parametrize("pg_type", ["vector", "halfvec"])
@pytest.mark.parametrize("id_type,ids", [(None, None), ("int8", list(range(-3, 47))), ("int4", np.arange(50, dtype=np.int32)),
                                         ("uuid", [uuid.UUID(int=i * 7919) for i in range(50)])])
def test_gathered_tuples_are_the_contiguous_ones(pg_type: str, id_type, ids) -> None:
    """encode_tuple_parts (what copy_vectors gathers with sendmsg on the socket) gives, row by row, the
    bytes encode_tuples lays out contiguously, over chunks that reuse its arrays (the last one shorter);
    tuples of varying width (NULL or text ids) and the bit and sparsevec types are left to encode_tuples."""
    v = RNG.standard_normal((50, 37)).astype(np.float64 if pg_type == "halfvec" else np.float32)
    cols = pgvector.CopyColumns(pg_type, "embedding", id_type)
    buffer: list = []
    for start in (0, 20, 40):
        stop = min(start + 20, 50)
        chunk_ids = None if ids is None else ids[start:stop]
        heads, items, p, w = _pgcopy.encode_tuple_parts(v[start:stop], cols, chunk_ids, start, buffer)
        gathered = b"".join(bytes(heads[r * p:(r + 1) * p]) + bytes(items[r * w:(r + 1) * w])
                            for r in range(stop - start))
        assert gathered == bytes(pgvector.encode_tuples(v[start:stop], cols, chunk_ids, start))
    assert _pgcopy.encode_tuple_parts(v, pgvector.CopyColumns(pg_type, "embedding", "int8"), [None] * 50, 0, []) is None
    assert _pgcopy.encode_tuple_parts(v, pgvector.CopyColumns(pg_type, "embedding", "text"), ["a"] * 50, 0, []) is None
    assert _pgcopy.encode_tuple_parts(v, pgvector.CopyColumns("bit"), None, 0, []) is None
    v[33, 5] = np.inf
    with pytest.raises(NonFiniteError) as err:
        _pgcopy.encode_tuple_parts(v[20:40], cols, None if ids is None else ids[20:40], 20, buffer)
    assert err.value.field == "embedding[33][5]"


class _FakePgconn:
    """What _SocketWriter uses of psycopg's PGconn, over one end of a socket pair."""

    def __init__(self, sock) -> None:
        self.socket = sock.fileno()
        self.consumed = 0

    def flush(self) -> int:
        return 0

    def consume_input(self) -> None:
        self.consumed += 1

    def is_busy(self) -> int:
        return 1


class _FakeConn:
    def __init__(self, sock) -> None:
        self.pgconn = _FakePgconn(sock)
        self.closed = False

    def close(self) -> None:
        self.closed = True


def test_a_message_interrupted_part_way_is_sent_whole_before_the_exception_goes_on() -> None:
    """The direct writer never leaves half a CopyData message on the socket: interrupted while the socket
    is full (here, KeyboardInterrupt raised by the first wait), it sends the rest, then lets the exception
    go on; the peer reads exactly the whole message."""
    import socket
    import threading

    from densewire._stores import _pgvector
    a, b = socket.socketpair()
    a.setblocking(False)  # as libpq's socket
    writer = _pgvector._SocketWriter(_FakeConn(a))
    data = memoryview(RNG.integers(0, 256, 8 << 20, dtype=np.uint8))  # far more than the socket holds
    received = bytearray()

    def read_all() -> None:
        while len(received) < 5 + data.nbytes:
            received.extend(b.recv(1 << 20))

    reader = threading.Thread(target=read_all)
    waits = []

    def interrupted_wait() -> None:
        waits.append(1)
        if len(waits) == 1:
            reader.start()  # the peer reads from now on; the writer is interrupted meanwhile
            raise KeyboardInterrupt
        _pgvector._SocketWriter._wait(writer)

    writer._wait = interrupted_wait
    with pytest.raises(KeyboardInterrupt):
        writer.send(data)
    reader.join(timeout=120)
    assert not reader.is_alive()  # the whole message arrived
    writer.close()
    assert bytes(received[:5]) == b"d" + struct.pack(">i", data.nbytes + 4) and received[5:] == data
    assert not writer.conn.closed
    a.close(), b.close()


def test_a_message_that_cannot_be_finished_closes_the_connection() -> None:
    """When the rest of an interrupted message cannot be sent either (the peer is gone), the connection
    is closed: its protocol state is lost, nothing more may be said on it."""
    import socket

    from densewire._stores import _pgvector
    a, b = socket.socketpair()
    a.setblocking(False)
    conn = _FakeConn(a)
    writer = _pgvector._SocketWriter(conn)

    def peer_gone() -> None:
        b.close()
        raise KeyboardInterrupt

    writer._wait = peer_gone
    with pytest.raises(KeyboardInterrupt):
        writer.send(memoryview(np.zeros(8 << 20, np.uint8)))
    assert conn.closed
    a.close()


def test_gathered_rows_arrive_whole_through_partial_sends() -> None:
    """send_rows gathers each row's head and items with sendmsg, restarting from any byte a partial send
    stops at (inside a head or inside the items): the peer reads the message encode_tuples would make."""
    import socket
    import threading

    from densewire._stores import _pgvector
    a, b = socket.socketpair()
    a.setblocking(False)
    writer = _pgvector._SocketWriter(_FakeConn(a))
    v = RNG.standard_normal((700, 1000)).astype(np.float32)
    cols = pgvector.CopyColumns("vector", "embedding", "int8")
    expected = bytes(pgvector.encode_tuples(v, cols, np.arange(700)))
    received = bytearray()

    def read_all() -> None:
        while len(received) < 5 + len(expected):
            received.extend(b.recv(RNG.integers(1, 100_000)))  # odd sizes: the writer's sends stop anywhere

    reader = threading.Thread(target=read_all)
    reader.start()
    parts = _pgcopy.encode_tuple_parts(v, cols, np.arange(700), 0, [])
    assert writer.send_rows(*parts) == len(expected)
    reader.join(timeout=120)
    assert not reader.is_alive()  # the whole message arrived
    writer.close()
    assert bytes(received) == b"d" + struct.pack(">i", len(expected) + 4) + expected
    a.close(), b.close()
