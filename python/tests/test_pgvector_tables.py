"""The tables API reads pgvector columns: a postgresql: source whose query returns vector/halfvec columns is
read with one binary COPY (seen in the server's statement log) and serves them as float32[d] columns in
every table format (real PostgreSQL with pgvector 0.8.6, real densewire serve)."""

from __future__ import annotations

import time

import httpx
import numpy as np
import psycopg
import pytest

import densewire
from densewire import decode_table, pgvector
from densewire._server.tables.sources import load_table
from densewire._server.tables.spec import TableLoadError, TableSpec
from pgvector_support import start_pgvector
from server_support import ServerProcess

RNG = np.random.default_rng(1804)
N = 40


@pytest.fixture(scope="module")
def pg():
    p = start_pgvector()
    try:
        p.execute("ALTER SYSTEM SET log_statement = 'all'")
        p.execute("SELECT pg_reload_conf()")
        p.execute("CREATE TABLE docs (n int4, name text, code varchar(4), emb vector(6), half halfvec(3))")
        v = RNG.standard_normal((N, 6)).astype(np.float32)
        h = RNG.standard_normal((N, 3)).astype(np.float32)
        with psycopg.connect(p.url, autocommit=True) as conn:
            pgvector.copy_vectors(conn, "docs", ("n", "emb"), v, np.arange(N))
            for i in range(N):
                conn.execute("UPDATE docs SET name = %s, code = %s, half = %s::halfvec WHERE n = %s",
                             (f"doc {i} ✓", f"c{i}", "[" + ",".join(repr(float(x)) for x in h[i]) + "]", i))
        p.vectors, p.halves = v, h
        yield p
    finally:
        p.stop()


def _spec(pg, query: str) -> TableSpec:
    return TableSpec("docs", "postgresql", pg.url, query)


def _log(pg) -> str:
    return (pg.tmp / "log").read_text(errors="replace")


def test_vector_and_halfvec_columns_by_binary_copy(pg) -> None:
    table = load_table(_spec(pg, "SELECT n, name, code, emb, half FROM docs ORDER BY n;"))
    types = {c.name: c.type for c in table.columns}
    assert types == {"n": "int32", "name": "string", "code": "string", "emb": "float32[6]", "half": "float32[3]"}
    cols = {c.name: c.values for c in table.columns}
    assert np.array_equal(cols["emb"], pg.vectors)  # bit for bit: no decimal on the way
    assert np.array_equal(cols["half"], pg.halves.astype(np.float16).astype(np.float32))
    assert list(cols["name"]) == [f"doc {i} ✓" for i in range(N)]
    assert list(cols["n"]) == list(range(N))
    deadline = time.monotonic() + 10  # the statement log is written by the server process
    while "COPY (SELECT n, name, code, emb, half FROM docs ORDER BY n" not in _log(pg):
        assert time.monotonic() < deadline, _log(pg)[-2000:]
        time.sleep(0.1)
    assert "TO STDOUT (FORMAT BINARY)" in _log(pg)


def test_nulls_and_ragged_vectors_fail_to_load(pg) -> None:
    with pytest.raises(TableLoadError, match="emb"):
        load_table(_spec(pg, "SELECT n, CASE WHEN n = 3 THEN NULL ELSE emb END AS emb FROM docs"))
    with pytest.raises(TableLoadError, match="row 1"):
        load_table(_spec(pg, "SELECT v FROM (VALUES (1, '[1,2]'::vector), (2, '[1,2,3]'::vector)) AS t(n, v) ORDER BY n"))
    with pytest.raises(TableLoadError, match="PostgreSQL type date is not supported"):
        load_table(_spec(pg, "SELECT emb, now()::date AS day FROM docs"))


def test_served_in_every_format(pg, tmp_path) -> None:
    cfg = tmp_path / "tables.toml"
    cfg.write_text(f'''
[tables.docs]
source = "{pg.url}"
query = "SELECT n, name, emb, half FROM docs ORDER BY n"
''')
    expected = load_table(_spec(pg, "SELECT n, name, emb, half FROM docs ORDER BY n"))
    with ServerProcess("--model", "hash:8", "--no-demo-tables", "--tables-config", str(cfg),
                       "--table-compression", "fast") as s:
        deadline = time.monotonic() + 60
        while httpx.get(s.url + "/v1/tables/docs", timeout=30).status_code != 200:
            assert time.monotonic() < deadline, s.log_text()[-3000:]
            time.sleep(0.2)
        for fmt in densewire.TABLE_FORMATS:
            r = httpx.get(s.url + "/v1/tables/docs", params={"format": fmt}, timeout=30)
            assert r.status_code == 200, r.text
            assert "emb=float32[6]" in r.headers["densewire-columns"]
            got = decode_table(r.content, fmt, columns=r.headers["densewire-columns"], name="docs")
            assert got == expected, fmt
