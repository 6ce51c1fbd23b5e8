"""densewire.pgvector against a real PostgreSQL with pgvector 0.8.6 (a throw-away cluster, pgvector built
from the vendored source by scripts/services.sh): the golden streams load and read back as pgvector
means them, the server's own COPY output is byte for byte the golden stream, copy_vectors converts to
each column type as pgvector's casts do, a bad chunk aborts the COPY, and read_vectors returns one array."""

from __future__ import annotations

import json

import numpy as np
import psycopg
import pytest

import densewire
from densewire import Tensor, pgvector
from densewire._tensor import storage_dtype
from golden_capabilities import GOLDEN

_BITS = {"float32": "<u4", "float16": "<u2", "bfloat16": "<u2", "float64": "<u8", "binary": "u1"}
_VALID = [c for c in json.loads((GOLDEN / "pgcopy.json").read_text())["cases"] if c["id"].startswith("pgcopy.")]
RNG = np.random.default_rng(1806)


@pytest.fixture
def pg(pgvector_db):
    """The session's PostgreSQL with pgvector (conftest): every test here makes its own tables first."""
    return pgvector_db


@pytest.fixture
def conn(pg):
    with psycopg.connect(pg.url, autocommit=True) as c:
        yield c


def _table(conn, name: str, case: dict) -> str:
    cols = [f'"{c["name"]}" {c["type"]}' + (f"({case['shape'][1]})" if c["type"] in pgvector.VECTOR_TYPES else "")
            for c in case["columns"]]
    conn.execute(f"DROP TABLE IF EXISTS {name}")
    conn.execute(f"CREATE TABLE {name} (n serial, {', '.join(cols)})")
    return ", ".join(f'"{c["name"]}"' for c in case["columns"])


def test_pgvector_is_the_vendored_version(conn) -> None:
    assert conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()[0] == "0.8.6"


@pytest.mark.parametrize("case", [pytest.param(c, id=c["id"]) for c in _VALID if c["shape"][0] > 0])
def test_golden_streams_load_and_come_back_byte_for_byte(conn, case: dict) -> None:
    """PostgreSQL accepts every golden stream; the values it stores print as the golden values; and its
    own COPY TO output of the rows is exactly the golden stream."""
    cols = _table(conn, "golden", case)
    with conn.cursor() as cur, cur.copy(f"COPY golden ({cols}) FROM STDIN (FORMAT BINARY)") as copy:
        copy.write(bytes.fromhex(case["encoded_hex"]))
    vec = case["columns"][-1]["name"]
    rows = conn.execute(f'SELECT "{vec}"::text FROM golden ORDER BY n').fetchall()
    n, d = case["shape"]
    values = case["values"]
    pg_type = case["pg_type"]
    for r, (text,) in enumerate(rows):
        if pg_type == "bit":
            width = (d + 7) // 8
            bits = "".join(f"{int(h, 16):08b}" for h in values[r * width:(r + 1) * width])[:d]
            assert text == bits
        else:
            got = np.array([float(x) for x in text.strip("[]").split(",")], np.float32) if pg_type != "sparsevec" \
                else _dense(text, d)
            dtype = "float16" if pg_type == "halfvec" else "float32"
            expected = np.array([int(h, 16) for h in values[r * d:(r + 1) * d]], np.uint32).astype(_BITS[dtype]) \
                .view(storage_dtype(dtype)).astype(np.float32)
            assert np.array_equal(got, expected), (r, text)
    out = bytearray()
    with conn.cursor() as cur, cur.copy(f"COPY (SELECT {cols} FROM golden ORDER BY n) TO STDOUT (FORMAT BINARY)") as copy:
        for data in copy:
            out += data
    assert out.hex() == case["encoded_hex"]


def _dense(text: str, d: int) -> np.ndarray:
    body, dims = text.split("/")
    assert int(dims) == d
    out = np.zeros(d, np.float32)
    for item in body.strip("{}").split(","):
        if item:
            k, v = item.split(":")
            out[int(k) - 1] = float(v)  # the text form numbers dimensions from 1
    return out


def _case_tensor(case: dict) -> Tensor:
    n, d = case["shape"]
    width = (d + 7) // 8 if case["dtype"] == "binary" else d
    bits = np.array([int(h, 16) for h in case["items"]], np.uint64).astype(_BITS[case["dtype"]])
    return Tensor(bits.view(storage_dtype(case["dtype"])).reshape(n, width), case["dtype"], d)


@pytest.mark.parametrize("pg_type", ["vector", "halfvec", "bit", "sparsevec"])
def test_copy_vectors_matches_pgvectors_own_casts(conn, pg_type: str) -> None:
    """float32 input into each type: what copy_vectors stores equals what pgvector's text input and casts
    make of the same float32 values (halfvec rounding, bit packing, sparse zeros)."""
    n, d = 300, 21
    v = RNG.standard_normal((n, d)).astype(np.float32) * np.float32(3000)
    v[RNG.random(v.shape) < 0.3] = 0.0
    v[0, :4] = [-0.0, 1e-45, 65519.99, 2.9802322e-08]  # halfvec: signed zero, subnormal, rounding, tie
    conn.execute("DROP TABLE IF EXISTS items")
    conn.execute(f"CREATE TABLE items (id int8 PRIMARY KEY, embedding {pg_type}({d}), ref vector({d}))")
    stats = pgvector.copy_vectors(conn, "items", ("id", "embedding"), v, np.arange(n), rows_per_chunk=64)
    assert stats.rows == n and stats.bytes > n * d
    with conn.cursor() as cur:
        cur.executemany("UPDATE items SET ref = %s::vector WHERE id = %s",
                        [("[" + ",".join(repr(float(x)) for x in row) + "]", i) for i, row in enumerate(v)])
    cast = {"vector": "ref", "halfvec": "ref::halfvec", "sparsevec": "ref::sparsevec",
            "bit": "binary_quantize(ref)"}[pg_type]
    diff = conn.execute(f"SELECT count(*) FROM items WHERE embedding IS DISTINCT FROM {cast}").fetchone()[0]
    assert diff == 0
    got = pgvector.read_vectors(conn, "items", ("id", "embedding"), order_by="id")
    assert got.ids.tolist() == list(range(n))
    expected = {"vector": v, "halfvec": densewire.convert(v, "float16").array, "sparsevec": v + np.float32(0.0),
                "bit": np.packbits(v > 0, axis=1)}[pg_type]
    assert np.array_equal(got.tensor.array, expected)


def test_a_bad_chunk_aborts_the_copy(conn) -> None:
    conn.execute("DROP TABLE IF EXISTS items")
    conn.execute("CREATE TABLE items (id int8, embedding vector(8))")
    v = RNG.standard_normal((1000, 8)).astype(np.float32)
    v[900, 2] = np.nan
    with pytest.raises(densewire.NonFiniteError) as err:
        pgvector.copy_vectors(conn, "items", ("id", "embedding"), v, np.arange(1000), rows_per_chunk=100)
    assert err.value.field == "embedding[900][2]"
    assert conn.execute("SELECT count(*) FROM items").fetchone()[0] == 0  # nothing of the 900 good rows stayed


def test_ids_of_every_type_and_nulls(conn) -> None:
    v = RNG.standard_normal((4, 3)).astype(np.float32)
    for id_type, ids in (("int4", [1, None, 3, 4]), ("text", ["a", "ü", None, ""]),
                         ("uuid", ["00112233-4455-6677-8899-aabbccddeeff", None, None, "f47ac10b-58cc-4372-a567-0e02b2c3d479"])):
        conn.execute("DROP TABLE IF EXISTS items")
        conn.execute(f"CREATE TABLE items (n serial, key {id_type}, embedding vector(3))")
        pgvector.copy_vectors(conn, "items", ("key", "embedding"), v, ids)
        rows = conn.execute("SELECT key::text FROM items ORDER BY n").fetchall()
        assert [r[0] for r in rows] == [None if i is None else str(i) for i in ids]
        got = pgvector.read_vectors(conn, query="SELECT key, embedding FROM items ORDER BY n")
        assert [None if i is None else str(i) for i in got.ids] == [None if i is None else str(i) for i in ids]
        assert np.array_equal(got.tensor.array, v)


def test_errors_name_the_column(conn) -> None:
    conn.execute("DROP TABLE IF EXISTS items")
    conn.execute("CREATE TABLE items (id int8, label text, embedding vector(3))")
    with pytest.raises(densewire.InvalidFieldError, match="label is of type text"):
        pgvector.copy_vectors(conn, "items", "label", np.ones((1, 3), np.float32))
    with pytest.raises(psycopg.errors.DataException, match="expected 3 dimensions, not 4"):
        pgvector.copy_vectors(conn, "items", "embedding", np.ones((1, 4), np.float32))
    conn.execute("INSERT INTO items VALUES (1, 'x', NULL)")
    with pytest.raises(densewire.InvalidFieldError) as err:
        pgvector.read_vectors(conn, "items", "embedding")
    assert err.value.field == "embedding"


def test_read_many_rows_in_one_array(conn) -> None:
    conn.execute("DROP TABLE IF EXISTS items")
    conn.execute("CREATE TABLE items (id int8, embedding halfvec(384))")
    v = RNG.standard_normal((5000, 384)).astype(np.float32)
    pgvector.copy_vectors(conn, "items", ("id", "embedding"), v, np.arange(5000))
    got = pgvector.read_vectors(conn, "items", ("id", "embedding"), order_by="id")
    assert got.tensor.array.shape == (5000, 384) and got.tensor.dtype == "float16"
    assert np.array_equal(got.tensor.array, v.astype(np.float16))


@pytest.mark.parametrize("n", [3, 4000])
def test_read_vectors_ends_the_copy_cleanly_or_raises_the_servers_error(conn, n: int) -> None:
    """A few rows arrive with the end of the COPY in one read, thousands over many (the loop then waits
    through psycopg's read): either way the COPY is ended and its result read, so the connection is
    ready for the next query; an error raised by the server part way through the rows is psycopg's own."""
    conn.execute("DROP TABLE IF EXISTS items")
    conn.execute("CREATE TABLE items (id int8, embedding vector(64))")
    v = RNG.standard_normal((n, 64)).astype(np.float32)
    pgvector.copy_vectors(conn, "items", ("id", "embedding"), v, np.arange(n))
    for _ in range(2):
        got = pgvector.read_vectors(conn, "items", ("id", "embedding"), order_by="id")
        assert got.ids.tolist() == list(range(n)) and np.array_equal(got.tensor.array, v)
        assert conn.execute("SELECT 1").fetchone() == (1,)
    with pytest.raises(psycopg.errors.DivisionByZero):
        pgvector.read_vectors(conn, query=f"SELECT id, CASE WHEN id < {n - 1} THEN embedding "  # the heap's order
                                          "ELSE (1 / (id - id))::text::vector END FROM items")
    assert conn.execute("SELECT count(*) FROM items").fetchone() == (n,)


def test_copy_leaves_the_connection_non_blocking(conn) -> None:
    """copy_vectors hands libpq each chunk in blocking mode; psycopg's non-blocking mode is back after a
    load, and after a load the server refused."""
    conn.execute("DROP TABLE IF EXISTS items")
    conn.execute("CREATE TABLE items (id int8, embedding vector(4))")
    v = RNG.standard_normal((2000, 4)).astype(np.float32)
    assert conn.pgconn.nonblocking == 1
    pgvector.copy_vectors(conn, "items", ("id", "embedding"), v, np.arange(2000), rows_per_chunk=300)
    assert conn.pgconn.nonblocking == 1
    with pytest.raises(psycopg.errors.DataException):
        pgvector.copy_vectors(conn, "items", "embedding", np.ones((700, 5), np.float32), rows_per_chunk=300)
    assert conn.pgconn.nonblocking == 1
    assert conn.execute("SELECT count(*) FROM items").fetchone() == (2000,)
    got = pgvector.read_vectors(conn, "items", ("id", "embedding"), order_by="id")
    assert np.array_equal(got.tensor.array, v)


@pytest.fixture
def unix_conn(pg):
    """A connection over the cluster's Unix-domain socket (in its folder), as the benchmark's."""
    with psycopg.connect(host=str(pg.tmp), port=pg.port, user="dw", dbname="postgres", autocommit=True) as c:
        yield c


@pytest.mark.parametrize("direct", [True, False])
@pytest.mark.parametrize("over", ["tcp", "unix"])
def test_each_sending_path_loads_the_same_rows(request, over: str, direct: bool) -> None:
    """The tuples written on the socket directly and through libpq's buffer load the same rows, over TCP
    and a Unix socket, with a stream larger than the sockets' buffers (many partial sends)."""
    conn = request.getfixturevalue("conn" if over == "tcp" else "unix_conn")
    assert pgvector.direct_socket_reason(conn) == ""  # neither TLS nor GSS on the test cluster
    conn.execute("DROP TABLE IF EXISTS items")
    conn.execute("CREATE TABLE items (id int8, embedding vector(768), h halfvec(768))")
    v = RNG.standard_normal((1500, 768)).astype(np.float32)
    stats = pgvector.copy_vectors(conn, "items", ("id", "embedding"), v, np.arange(1500), rows_per_chunk=200,
                                  direct=direct)
    assert (stats.rows, stats.direct) == (1500, direct)
    assert stats.bytes == 19 + 1500 * (2 + 4 + 8 + 4 + 4 + 4 * 768) + 2
    got = pgvector.read_vectors(conn, "items", ("id", "embedding"), order_by="id")
    assert got.ids.tolist() == list(range(1500)) and np.array_equal(got.tensor.array, v)
    conn.execute("TRUNCATE items")
    stats = pgvector.copy_vectors(conn, "items", ("id", "h"), v, np.arange(1500), rows_per_chunk=300, direct=direct)
    assert stats.direct == direct
    got = pgvector.read_vectors(conn, "items", ("id", "h"), order_by="id")
    assert np.array_equal(got.tensor.array, v.astype(np.float16))
    assert conn.pgconn.nonblocking == 1 and conn.execute("SELECT 1").fetchone() == (1,)


@pytest.mark.parametrize("direct", [True, False])
def test_a_server_error_mid_stream_is_raised_with_its_line(conn, direct: bool) -> None:
    """A row the server refuses part way through a stream far larger than the socket's buffers (here a
    duplicate key at row 1200): the server reports it and discards the rest of the COPY, the client keeps
    sending until the end, and psycopg raises the server's error naming the COPY's line; the connection
    is ready for the next statement and no row stays."""
    conn.execute("DROP TABLE IF EXISTS items")
    conn.execute("CREATE TABLE items (id int8 PRIMARY KEY, embedding vector(1024))")
    ids = np.arange(4000)
    ids[1200] = 7
    v = RNG.standard_normal((4000, 1024)).astype(np.float32)
    with pytest.raises(psycopg.errors.UniqueViolation) as err:
        pgvector.copy_vectors(conn, "items", ("id", "embedding"), v, ids, rows_per_chunk=256, direct=direct)
    assert "line 1201" in (err.value.diag.context or "")
    assert conn.execute("SELECT count(*) FROM items").fetchone() == (0,)
    stats = pgvector.copy_vectors(conn, "items", ("id", "embedding"), v[:10], np.arange(10), direct=direct)
    assert stats.direct == direct and conn.execute("SELECT count(*) FROM items").fetchone() == (10,)


def test_server_notices_while_the_client_sends_are_read_not_deadlocked(unix_conn) -> None:
    """A trigger that sends a 4 KB notice for every row: the server writes 12 MB back while the client
    writes to it, over a Unix socket (whose buffers hold a few hundred KB, where loopback TCP's can hold
    the lot). The direct path reads them whenever the socket is full (else both sides would block on
    their writes, for ever), and each reaches the connection's notice handler."""
    conn = unix_conn
    conn.execute("DROP TABLE IF EXISTS items")
    conn.execute("CREATE TABLE items (id int8, embedding vector(256))")
    conn.execute("""CREATE OR REPLACE FUNCTION items_notice() RETURNS trigger LANGUAGE plpgsql AS $$
                    BEGIN RAISE NOTICE 'row % %', NEW.id, repeat('x', 4096); RETURN NEW; END $$""")
    conn.execute("CREATE TRIGGER items_notice BEFORE INSERT ON items FOR EACH ROW EXECUTE FUNCTION items_notice()")
    notices: list[str] = []
    conn.add_notice_handler(lambda diag: notices.append(diag.message_primary or ""))
    v = RNG.standard_normal((3000, 256)).astype(np.float32)
    stats = pgvector.copy_vectors(conn, "items", ("id", "embedding"), v, np.arange(3000), rows_per_chunk=1000,
                                  direct=True)
    assert stats.direct
    assert len(notices) == 3000 and notices[-1].startswith("row 2999 ")
    assert conn.execute("SELECT count(*) FROM items").fetchone() == (3000,)
