"""Table sources of ``densewire serve``: files (CSV, JSON Lines, Parquet, Arrow), SQLite and a real
PostgreSQL server (a throw-away cluster: initdb + pg_ctl on a free port), their type mapping,
overrides, NULL errors, and the configuration errors that the command line reports."""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx
import numpy as np
import pytest

import densewire
from densewire import Column, Table, decode_table, encode_table
from densewire._server.cli import add_serve_arguments, config_from_args
from densewire._server.config import ServerConfig, validate
from densewire._server.tables.build import load_and_encode, table_version
from densewire._server.tables.config import load_tables_config, parse_compression, parse_table_arg, table_specs
from densewire._server.tables.sources import load_table
from densewire._server.tables.spec import TableLoadError, TableSpec
from densewire._tables._model import to_float32
from server_support import REPO, ServerProcess, free_port, metric_value

pa = pytest.importorskip("pyarrow")  # a dependency of the test extra: present, never skipped in CI
import pyarrow.parquet as pq  # noqa: E402

UUIDS = [uuid.UUID(int=(i + 1) * 0x0123456789ABCDEF0123456789ABCDEF % (1 << 128)) for i in range(4)]


def spec(kind: str, location: str, name: str = "t", query: str | None = None, **columns: str) -> TableSpec:
    return TableSpec(name, kind, location, query, tuple(columns.items()))


def schema(table: Table) -> list[tuple[str, str]]:
    return [(c.name, c.type) for c in table.columns]


# -- files ---------------------------------------------------------------------------------------
def test_csv_inference_and_overrides(tmp_path: Path) -> None:
    p = tmp_path / "t.csv"
    rows = ["id,flag,n,x,name,vec"]
    for i, u in enumerate(UUIDS):
        rows.append(f'{u},{"true" if i % 2 else "false"},{i * 1000},{i + 0.1},"name, {i}","[{i},0.5,-1]"')
    p.write_text("\n".join(rows) + "\n")
    t = load_table(spec("csv", str(p)))
    assert schema(t) == [("id", "uuid"), ("flag", "bool"), ("n", "int64"), ("x", "float64"), ("name", "string"),
                         ("vec", "float32[3]")]
    assert bytes(t.column("id").values[2]) == UUIDS[2].bytes
    assert t.column("flag").values.tolist() == [False, True, False, True]
    assert t.column("name").values == [f"name, {i}" for i in range(4)]
    assert t.column("vec").values[3].tolist() == [3.0, 0.5, -1.0]
    t2 = load_table(spec("csv", str(p), n="int32", x="float32", id="string"))
    assert schema(t2)[:4] == [("id", "string"), ("flag", "bool"), ("n", "int32"), ("x", "float32")]
    assert t2.column("x").values.tobytes() == to_float32(np.array([0.1, 1.1, 2.1, 3.1])).tobytes()
    assert t2.column("id").values[0] == str(UUIDS[0])


def test_csv_null_and_range_errors(tmp_path: Path) -> None:
    p = tmp_path / "t.csv"
    p.write_text("a,b\n1,2\n3,\n5,6\n")
    with pytest.raises(TableLoadError, match=r"column 'b' is NULL at row 1"):
        load_table(spec("csv", str(p)))
    p.write_text("a\n1\n3000000000\n")
    with pytest.raises(TableLoadError, match=r"column 'a'.*int32"):
        load_table(spec("csv", str(p), a="int32"))
    p.write_text("a\nNaN\n1.5\n")  # NaN is a value, not a NULL (SPEC.md 15.4)
    assert np.isnan(load_table(spec("csv", str(p))).column("a").values[0])


def test_jsonl(tmp_path: Path) -> None:
    p = tmp_path / "t.jsonl"
    p.write_text('{"id": "%s", "v": [1, 2.5], "s": 1, "ok": true}\n{"id": "%s", "v": [3, 4], "s": 0, "ok": false}\n'
                 % (UUIDS[0], UUIDS[1]))
    t = load_table(spec("jsonl", str(p), s="int32"))
    assert schema(t) == [("id", "uuid"), ("v", "float32[2]"), ("s", "int32"), ("ok", "bool")]
    assert t.column("v").values.tolist() == [[1.0, 2.5], [3.0, 4.0]]
    p.write_text('{"a": 1, "b": 2}\n{"a": 3}\n')  # a missing key is a null
    with pytest.raises(TableLoadError, match=r"column 'b' is NULL at row 1"):
        load_table(spec("jsonl", str(p)))
    p.write_text('{"v": [1, 2]}\n{"v": [1, 2, 3]}\n')
    with pytest.raises(TableLoadError, match=r"column 'v' row 1: a vector of 3 items"):
        load_table(spec("jsonl", str(p)))


def _arrow_table() -> "pa.Table":
    n = 5
    return pa.table({
        "i8": pa.array(np.arange(n, dtype=np.int8)),
        "i64": pa.array(np.arange(n, dtype=np.int64) << 40),
        "f32": pa.array(np.linspace(0, 1, n, dtype=np.float32)),
        "f64": pa.array(np.linspace(0, 1, n)),
        "b": pa.array([True, False] * 2 + [True]),
        "s": pa.array([f"é{i}" for i in range(n)]),
        "u": pa.array([u.bytes for u in UUIDS] + [UUIDS[0].bytes], pa.binary(16)),
        "vec": pa.FixedSizeListArray.from_arrays(pa.array(np.arange(3 * n, dtype=np.float32)), 3),
    })


def test_parquet_types(tmp_path: Path) -> None:
    p = tmp_path / "t.parquet"
    pq.write_table(_arrow_table(), p)
    t = load_table(spec("parquet", str(p), f64="float32"))
    assert schema(t) == [("i8", "int32"), ("i64", "int64"), ("f32", "float32"), ("f64", "float32"), ("b", "bool"),
                         ("s", "string"), ("u", "uuid"), ("vec", "float32[3]")]
    assert t.column("i64").values.tolist() == [i << 40 for i in range(5)]
    assert t.column("vec").values.shape == (5, 3)
    nulls = _arrow_table().set_column(3, "f64", pa.array([0.0, None, 1.0, 2.0, 3.0]))
    pq.write_table(nulls, p)
    with pytest.raises(TableLoadError, match=r"column 'f64' is NULL at row 1"):
        load_table(spec("parquet", str(p)))


def test_arrow_file_and_stream(tmp_path: Path) -> None:
    src = densewire.demo_table(rows=300, name="t")
    (tmp_path / "t.arrows").write_bytes(encode_table(src, "arrow"))  # a densewire stream: types from metadata
    assert load_table(spec("arrow", str(tmp_path / "t.arrows"))) == src
    with pa.OSFile(str(tmp_path / "t.arrow"), "wb") as f, pa.ipc.new_file(f, _arrow_table().schema) as w:
        w.write_table(_arrow_table())
    t = load_table(spec("arrow", str(tmp_path / "t.arrow")))
    assert t.rows == 5 and schema(t)[-2:] == [("u", "uuid"), ("vec", "float32[3]")]
    (tmp_path / "bad.arrow").write_bytes(b"not arrow at all")
    with pytest.raises(TableLoadError, match="not an Arrow IPC"):
        load_table(spec("arrow", str(tmp_path / "bad.arrow")))


# -- SQLite --------------------------------------------------------------------------------------
def make_sqlite(path: Path, rows: int = 4) -> None:
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE t (id UUID, n INTEGER, x REAL, ok BOOLEAN, name TEXT, v BLOB)")
    con.executemany("INSERT INTO t VALUES (?, ?, ?, ?, ?, ?)", [
        (str(UUIDS[i % 4]), i, i / 3, i % 2, f"row {i}", np.array([i, -i, 0.5], "<f4").tobytes())
        for i in range(rows)])
    con.commit()
    con.close()


def test_sqlite_types(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    make_sqlite(db)
    with pytest.raises(TableLoadError, match=r"column 'v' holds binary values: declare its type"):
        load_table(spec("sqlite", str(db), query="SELECT * FROM t"))
    t = load_table(spec("sqlite", str(db), query="SELECT * FROM t", v="float32[3]", x="float32"))
    assert schema(t) == [("id", "uuid"), ("n", "int64"), ("x", "float32"), ("ok", "bool"), ("name", "string"),
                         ("v", "float32[3]")]
    assert t.column("x").values.tobytes() == to_float32(np.arange(4) / 3).tobytes()
    assert t.column("ok").values.tolist() == [False, True, False, True]
    assert t.column("v").values[2].tolist() == [2.0, -2.0, 0.5]
    t = load_table(spec("sqlite", str(db), query="SELECT n AS k, name FROM t WHERE n < 2", k="int32"))
    assert schema(t) == [("k", "int32"), ("name", "string")] and t.rows == 2


def test_sqlite_errors(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    make_sqlite(db)
    con = sqlite3.connect(db)
    con.execute("UPDATE t SET x = NULL WHERE n = 2")
    con.commit()
    con.close()
    with pytest.raises(TableLoadError, match=r"column 'x' is NULL at row 2"):
        load_table(spec("sqlite", str(db), query="SELECT n, x FROM t ORDER BY n"))
    with pytest.raises(TableLoadError, match=r"no such table: missing"):
        load_table(spec("sqlite", str(db), query="SELECT * FROM missing"))
    with pytest.raises(TableLoadError, match=r"names no column"):
        load_table(spec("sqlite", str(db), query="SELECT n FROM t", nope="int32"))
    res = load_and_encode(spec("sqlite", str(db), query="SELECT n, x FROM t ORDER BY n"), None)
    assert "NULL at row 2" in res["error"]


def test_version_follows_data(tmp_path: Path) -> None:
    a = densewire.demo_table(rows=50)
    b = densewire.demo_table(rows=50)
    assert table_version(a) == table_version(b)
    b.column("status").values[7] ^= 1
    assert table_version(a) != table_version(b)
    res = load_and_encode(TableSpec("points", "demo", "rows=50"), None)
    assert res["version"] == table_version(a) and set(res["bodies"]) == set(densewire.TABLE_FORMATS)
    assert load_and_encode(TableSpec("points", "demo", "rows=50"), res["version"])["unchanged"] is True


def test_non_finite_is_a_per_format_error(tmp_path: Path) -> None:
    p = tmp_path / "t.csv"
    p.write_text("a\nNaN\n1\n")
    res = load_and_encode(spec("csv", str(p)), None)
    assert set(res["errors"]) == {"json", "json-rows", "json-columns"}
    assert res["errors"]["json"][0] == "non_finite"
    assert np.isnan(decode_table(res["bodies"]["arrow"], "arrow").column("a").values[0])


# -- configuration -------------------------------------------------------------------------------
def parse(argv: list[str]) -> ServerConfig:
    p = argparse.ArgumentParser()
    add_serve_arguments(p)
    cfg = config_from_args(p.parse_args(argv), {})
    validate(cfg)
    return cfg


def test_config_file(tmp_path: Path) -> None:
    make_sqlite(tmp_path / "geo.db")
    (tmp_path / "c.csv").write_text("a\n1\n")
    cfg_file = tmp_path / "tables.toml"
    cfg_file.write_text('''
refresh = 30
[tables.geo]
source = "sqlite:geo.db"
query = "SELECT n, x FROM t"
cache_control = "public, max-age=60"
columns = { x = "float32" }
[tables.c]
source = "c.csv"
refresh = 0
[tables.points]
source = "demo:rows=10,coordinates=float32"
''')
    cfg = parse(["--tables-config", str(cfg_file), "--table", f"extra={tmp_path / 'c.csv'}"])
    specs = {s.name: s for s in table_specs(cfg)}
    assert list(specs) == ["points_f32", "extra", "geo", "c", "points"]  # the file's points replaces the demo's
    geo = specs["geo"]
    assert (geo.kind, geo.location, geo.query) == ("sqlite", str(tmp_path / "geo.db"), "SELECT n, x FROM t")
    assert geo.columns == (("x", "float32"),) and geo.refresh == 30 and geo.cache_control == "public, max-age=60"
    assert specs["c"].refresh == 0 and specs["points"].location == "rows=10,coordinates=float32"
    cfg = parse(["--no-demo-tables", "--table", f"q=sqlite:{tmp_path / 'geo.db'} SELECT n FROM t WHERE n > 1"])
    (only,) = table_specs(cfg)
    assert only.query == "SELECT n FROM t WHERE n > 1"
    assert parse_table_arg(f"t=sqlite:{tmp_path / 'geo.db'}").query == 'SELECT * FROM "t"'
    from densewire._server.config import config_from_env, config_to_env

    both = ServerConfig(table=("a=demo:", f"b=sqlite:{tmp_path / 'geo.db'} SELECT n FROM t"), demo_tables=False,
                        table_compression="br=9", table_refresh=5, tables_config=str(cfg_file))
    assert config_from_env(config_to_env(both)) == both  # what --workers N hands to its workers
    assert parse_compression("fast") == {"gzip": 4, "zstd": 3, "br": 4}
    assert parse_compression("br=9,gzip=off") == {"zstd": 19, "br": 9}


@pytest.mark.parametrize("argv, message", [
    (["--table", "points"], "use NAME=SOURCE"),
    (["--table", "a/b=x.csv"], "table name 'a/b'"),
    (["--table", "t=data.xlsx"], "cannot tell the kind of source"),
    (["--table", "t=/nonexistent/t.csv"], "does not exist"),
    (["--table", "t=demo:rows=ten"], "rows must be a non-negative integer"),
    (["--table", "t=demo:", "--table", "t=demo:"], "configured twice"),
    (["--table-compression", "br=12"], "br level must be in 0..11"),
    (["--table-compression", "lzma=3"], "use best, fast, off"),
    (["--table-load-timeout", "0"], "table-load-timeout"),
])
def test_bad_command_line(argv: list[str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse(argv)


@pytest.mark.parametrize("text, message", [
    ("[tables.t\nsource = 1", "not valid TOML"),
    ("[tables.t]\nsource = 'demo:'\nrefresh = -1", "refresh must be a non-negative number"),
    ("[tables.t]\nsource = 'demo:'\ncolumns = { a = 'float16' }", "unknown type 'float16'"),
    ("[tables.t]\nsorce = 'demo:'", "unknown key\\(s\\) sorce"),
    ("[tables.t]\nquery = 'SELECT 1'", "'source' \\(a string\\) is required"),
    ("[tables.t]\nsource = 't.csv'\nquery = 'SELECT 1'", "a csv file takes no query"),
    ("[tables.t]\nsource = 't.csv'", "t.csv does not exist"),
    ("tables = 3", "must be a table of tables"),
    ("demo_tables = 'no'", "demo_tables must be true or false"),
])
def test_bad_config_file(tmp_path: Path, text: str, message: str) -> None:
    f = tmp_path / "tables.toml"
    f.write_text(text)
    with pytest.raises(ValueError, match=message) as ei:
        load_tables_config(f)
    assert str(f) in str(ei.value)


def test_bad_config_is_a_clear_cli_error(tmp_path: Path) -> None:
    f = tmp_path / "tables.toml"
    f.write_text("[tables.geo]\nsource = 'missing.db'\n")
    proc = subprocess.run([sys.executable, "-m", "densewire.server", "--model", "hash:4", "--port", str(free_port()),
                           "--tables-config", str(f)], capture_output=True, text=True, timeout=60, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(REPO / "python" / "src")})
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("densewire serve: --tables-config")
    assert "[tables.geo]" in proc.stderr and "missing.db does not exist" in proc.stderr
    assert "Traceback" not in proc.stderr


# -- PostgreSQL (a real server) --------------------------------------------------------------------
def _pg_bin() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not found:
        proc = subprocess.run(["bash", str(REPO / "scripts" / "services.sh"), "install"], capture_output=True,
                              text=True, timeout=900)
        found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
        if not found:
            raise RuntimeError("PostgreSQL is needed and scripts/services.sh could not install it:\n"
                               + proc.stdout + proc.stderr)
    return Path(found[-1]).parent


class PostgresProcess:
    """A throw-away PostgreSQL cluster (initdb + pg_ctl) on a free loopback port; as root the server
    runs as the 'postgres' user (PostgreSQL refuses to run as root)."""

    def __init__(self) -> None:
        self.bin = _pg_bin()
        self.port = free_port()
        self.tmp = Path(tempfile.mkdtemp(prefix="dw-pg-"))
        self.url = f"postgresql://dw@127.0.0.1:{self.port}/postgres"
        self._as: list[str] = []
        if os.geteuid() == 0:
            shutil.chown(self.tmp, "postgres")
            self._as = ["runuser", "-u", "postgres", "--"]

    def _run(self, *args: str) -> None:
        proc = subprocess.run([*self._as, *args], capture_output=True, text=True, timeout=120)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(args)} failed:\n{proc.stdout}{proc.stderr}")

    def start(self) -> "PostgresProcess":
        data = self.tmp / "data"
        self._run(str(self.bin / "initdb"), "-D", str(data), "-U", "dw", "--auth=trust", "-E", "UTF8", "--no-locale")
        self._run(str(self.bin / "pg_ctl"), "-D", str(data), "-l", str(self.tmp / "log"), "-w", "-t", "60", "-o",
                  f"-p {self.port} -k {self.tmp} -c listen_addresses=127.0.0.1 -c fsync=off", "start")
        return self

    def stop(self) -> None:
        try:
            self._run(str(self.bin / "pg_ctl"), "-D", str(self.tmp / "data"), "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.tmp, ignore_errors=True)

    def execute(self, sql: str, params: tuple = ()) -> None:
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(sql, params)


@pytest.fixture(scope="module")
def postgres():
    pg = PostgresProcess().start()
    try:
        pg.execute("""CREATE TABLE places (id uuid NOT NULL, status int2, n int4, big int8, lon float8, lat float8,
                      lon32 real, ok boolean, name text, code varchar(8), emb float4[], price numeric(8, 2))""")
        for i in range(6):
            pg.execute("INSERT INTO places VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                       (UUIDS[i % 4], i % 2, i * 10, (1 << 40) + i, -73.98 + i / 7, 40.75 - i / 9, 1.5 + i,
                        i % 3 == 0, f"place {i} ✓", f"c{i}", [float(i), 0.25, float(-i)], f"{i}.25"))
        yield pg
    finally:
        pg.stop()


def pg_spec(pg: PostgresProcess, query: str, **columns: str) -> TableSpec:
    return TableSpec("places", "postgresql", pg.url, query, tuple(columns.items()))


def test_postgresql_types(postgres) -> None:
    t = load_table(pg_spec(postgres, "SELECT id, status, n, big, lon, lat, lon32, ok, name, code, emb FROM places "
                                     "ORDER BY n"))
    assert schema(t) == [("id", "uuid"), ("status", "int32"), ("n", "int32"), ("big", "int64"), ("lon", "float64"),
                         ("lat", "float64"), ("lon32", "float32"), ("ok", "bool"), ("name", "string"),
                         ("code", "string"), ("emb", "float32[3]")]
    assert t.rows == 6
    assert [bytes(r) for r in t.column("id").values[:4]] == [u.bytes for u in UUIDS]
    assert t.column("big").values[5] == (1 << 40) + 5
    assert t.column("lon").values[3] == -73.98 + 3 / 7  # full double precision
    assert t.column("emb").values[2].tolist() == [2.0, 0.25, -2.0]
    assert t.column("name").values[1] == "place 1 ✓"
    t32 = load_table(pg_spec(postgres, "SELECT lon, lat FROM places ORDER BY n", lon="float32", lat="float32"))
    assert t32.column("lon").values.tobytes() == to_float32(t.column("lon").values).tobytes()


def test_postgresql_errors(postgres) -> None:
    with pytest.raises(TableLoadError, match=r"column 'price' holds decimal values: declare its type"):
        load_table(pg_spec(postgres, "SELECT price FROM places"))
    t = load_table(pg_spec(postgres, "SELECT price FROM places ORDER BY n", price="float64"))
    assert t.column("price").values.tolist() == [i + 0.25 for i in range(6)]
    with pytest.raises(TableLoadError, match=r"column 'x' is NULL at row 3"):
        load_table(pg_spec(postgres, "SELECT CASE WHEN n = 30 THEN NULL ELSE n END AS x FROM places ORDER BY n"))
    with pytest.raises(TableLoadError, match=r"UndefinedTable.*nowhere"):
        load_table(pg_spec(postgres, "SELECT * FROM nowhere"))
    with pytest.raises(TableLoadError, match=r"PostgreSQL type (date|timestamptz) is not supported"):
        load_table(pg_spec(postgres, "SELECT now() AS t"))
    with pytest.raises(TableLoadError, match=r"row 1: a vector of 2 items"):
        load_table(pg_spec(postgres, "SELECT v FROM (VALUES (1, ARRAY[1,2,3]::float4[]), (2, ARRAY[1,2]::float4[])) "
                                     "AS x(k, v) ORDER BY k"))


def test_postgresql_over_http(postgres, tmp_path: Path) -> None:
    """A slow first load (pg_sleep) is waited for; a request past --table-load-timeout gets 503 with
    Retry-After; once loaded every format decodes to the database's rows."""
    cfg = tmp_path / "tables.toml"
    cfg.write_text(f'''
[tables.places]
source = "{postgres.url}"
query = "SELECT id, status, lon, lat, emb FROM places ORDER BY n"
columns = {{ status = "int32" }}
[tables.slow]
source = "{postgres.url}"
query = "SELECT n FROM places, pg_sleep(4) ORDER BY n"
''')
    with ServerProcess("--model", "hash:8", "--no-demo-tables", "--tables-config", str(cfg),
                       "--table-compression", "fast", "--table-load-timeout", "1") as s:
        r = httpx.get(s.url + "/v1/tables/slow", timeout=30)
        assert r.status_code == 503, r.text
        assert r.json()["error"]["code"] == "unavailable" and "still loading" in r.json()["error"]["message"]
        assert r.headers["retry-after"] == "5"
        deadline = time.monotonic() + 60
        while httpx.get(s.url + "/v1/tables/slow").status_code != 200:
            assert time.monotonic() < deadline, s.log_text()[-3000:]
            time.sleep(0.2)
        expected = load_table(pg_spec(postgres, "SELECT id, status, lon, lat, emb FROM places ORDER BY n"))
        for fmt in densewire.TABLE_FORMATS:
            r = httpx.get(s.url + "/v1/tables/places", params={"format": fmt}, timeout=30)
            assert r.status_code == 200
            got = decode_table(r.content, fmt, columns=r.headers["densewire-columns"], name="places")
            assert got == expected, fmt
        unavailable = [v for k, v in s.metrics().items() if k.startswith("densewire_table_requests_total{")
                       and 'result="unavailable"' in k and 'table="slow"' in k]
        assert sum(unavailable) >= 1
