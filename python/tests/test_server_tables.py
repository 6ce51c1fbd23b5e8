"""Tables over HTTP (SPEC.md 15.9) against a real ``densewire serve``: listing, negotiation, every
format decoded by ``densewire.decode_table``, pre-built compressions, ETag / 304, HEAD, refresh (a
changed SQLite table swaps in a new version; a failing refresh keeps the last good one and says so),
the metrics that show a warm request serializes nothing, NULL errors, the demo tables and /demo."""

from __future__ import annotations

import gzip
import sqlite3
import time
from pathlib import Path
from typing import Any, Callable

import brotli
import httpx
import numpy as np
import pytest
import zstandard

import densewire
from densewire import TABLE_FORMATS, TABLE_MEDIA_TYPES, decode_table
from densewire._server.negotiation import negotiate_table_format
from densewire._server.tables.routes import if_none_match_matches
from server_support import ServerProcess, metric_value

DECOMPRESS = {"gzip": gzip.decompress, "br": brotli.decompress,
              "zstd": lambda b: zstandard.ZstdDecompressor().decompressobj().decompress(b)}
SMALL_ROWS = 400


def wait_until(cond: Callable[[], Any], what: str, server: ServerProcess | None = None, timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}" + (f"\n{server.log_text()[-4000:]}" if server else ""))
        time.sleep(0.1)


def raw_get(url: str, **headers: str) -> tuple[httpx.Response, bytes]:
    """The body as sent (httpx would undo the Content-Encoding)."""
    with httpx.stream("GET", url, headers=headers, timeout=30) as r:
        return r, b"".join(r.iter_raw())


def listing(server: ServerProcess) -> dict[str, dict[str, Any]]:
    r = httpx.get(server.url + "/v1/tables", timeout=30)
    assert r.status_code == 200 and r.json()["object"] == "list"
    return {t["name"]: t for t in r.json()["data"]}


def decode_response(r: httpx.Response, fmt: str) -> densewire.Table:
    return decode_table(r.content, fmt, columns=r.headers["densewire-columns"], name=r.headers["densewire-table"])


# -- unit ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("accept, expected", [
    (None, "json"), ("*/*", "json"), ("application/*", "json"), ("text/*", "csv"),
    ("text/csv", "csv"), ("application/x-msgpack", "msgpack"), ("application/x-protobuf", "protobuf"),
    ("application/vnd.densewire.rows+json", "json-rows"), ("application/vnd.densewire.columns+json", "json-columns"),
    ("application/json;q=0.5, application/vnd.apache.arrow.stream", "arrow"),
    ("application/vnd.msgpack;q=0.9, application/protobuf;q=0.9", "msgpack"),  # tie: server order
    ("application/*;q=0.3, application/json;q=0", "json-rows"),
])
def test_table_accept(accept: str | None, expected: str) -> None:
    assert negotiate_table_format(accept) == expected


@pytest.mark.parametrize("header, etag, expected", [
    ('"v1-json"', '"v1-json"', True), ('W/"v1-json"', '"v1-json"', True), ('"a", "v1-json" , "b"', '"v1-json"', True),
    ("*", '"v1-json"', True), ('"v1-json-gzip9"', '"v1-json"', False), ('"v0-json"', '"v1-json"', False),
    ("", '"v1-json"', False),
])
def test_if_none_match(header: str, etag: str, expected: bool) -> None:
    assert if_none_match_matches(header, etag) is expected


# -- a server with a few small tables -------------------------------------------------------------
def write_live_db(path: Path, rows: int) -> None:
    con = sqlite3.connect(path)
    con.execute("DROP TABLE IF EXISTS items")
    con.execute("CREATE TABLE items (id INTEGER, name TEXT, x REAL, ok BOOLEAN)")
    con.executemany("INSERT INTO items VALUES (?, ?, ?, ?)", [(i, f"item {i}", i / 4, i % 2) for i in range(rows)])
    con.commit()
    con.close()


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("tables")
    write_live_db(d / "live.db", 50)
    (d / "nan.csv").write_text("a,b\nNaN,1\n2.5,2\n" + "".join(f"{i}.5,{i}\n" for i in range(40)))
    (d / "tables.toml").write_text('''
[tables.small]
source = "demo:rows=%d"
cache_control = "public, max-age=60"
[tables.live]
source = "sqlite:live.db"
query = "SELECT id, name, x, ok FROM items ORDER BY id"
refresh = 0.3
columns = { id = "int32" }
[tables.nan]
source = "nan.csv"
''' % SMALL_ROWS)
    return d


@pytest.fixture(scope="module")
def server(files: Path):
    with ServerProcess("--model", "hash:8", "--no-demo-tables", "--tables-config", str(files / "tables.toml"),
                       "--table-compression", "fast", "--compress-min-bytes", "64") as s:
        wait_until(lambda: all(t["status"] == "ready" for t in listing(s).values()), "tables warm", s)
        yield s


def test_listing(server) -> None:
    tables = listing(server)
    assert list(tables) == ["small", "live", "nan"]
    small = tables["small"]
    assert small["object"] == "table" and small["rows"] == SMALL_ROWS
    assert small["columns"] == [{"name": "uuid", "type": "uuid"}, {"name": "status", "type": "int32"},
                                {"name": "longitude", "type": "float64"}, {"name": "latitude", "type": "float64"}]
    assert small["formats"] == list(TABLE_FORMATS) and small["refresh_error"] is None
    assert small["refreshed_at"].endswith("Z") and len(small["version"]) == 20
    assert tables["live"]["columns"] == [{"name": "id", "type": "int32"}, {"name": "name", "type": "string"},
                                         {"name": "x", "type": "float64"}, {"name": "ok", "type": "bool"}]
    assert tables["nan"]["formats"] == ["csv", "msgpack", "protobuf", "arrow"]  # JSON cannot hold NaN


@pytest.mark.parametrize("fmt", TABLE_FORMATS)
def test_every_format_decodes_to_the_same_table(server, fmt: str) -> None:
    expected = densewire.demo_table(rows=SMALL_ROWS, name="small")
    for how in ("accept", "param"):
        if how == "accept":
            r = httpx.get(server.url + "/v1/tables/small", headers={"Accept": TABLE_MEDIA_TYPES[fmt]})
        else:
            r = httpx.get(server.url + "/v1/tables/small", params={"format": fmt}, headers={"Accept": "text/html"})
        assert r.status_code == 200, r.text
        assert r.headers["content-type"].split(";")[0] == TABLE_MEDIA_TYPES[fmt]
        assert r.headers["densewire-version"] == "1" and r.headers["densewire-table"] == "small"
        assert r.headers["densewire-rows"] == str(SMALL_ROWS)
        assert r.headers["densewire-columns"] == "uuid=uuid,status=int32,longitude=float64,latitude=float64"
        assert r.headers["vary"] == "Accept, Accept-Encoding"
        assert r.headers["cache-control"] == "public, max-age=60"
        assert r.headers["last-modified"].endswith("GMT")
        assert decode_response(r, fmt) == expected
    if fmt == "csv":
        assert r.headers["content-type"] == "text/csv; charset=utf-8; header=present"


def test_aliases_and_not_acceptable(server) -> None:
    for media, fmt in (("application/x-msgpack", "msgpack"), ("application/msgpack", "msgpack"),
                       ("application/x-protobuf", "protobuf"), ("text/*", "csv")):
        r = httpx.get(server.url + "/v1/tables/small", headers={"Accept": media})
        assert r.status_code == 200 and r.headers["content-type"].startswith(TABLE_MEDIA_TYPES[fmt])
    r = httpx.get(server.url + "/v1/tables/small", headers={"Accept": "application/octet-stream"})
    assert r.status_code == 406
    err = r.json()["error"]
    assert err["code"] == "not_acceptable" and err["param"] == "Accept"
    for media in TABLE_MEDIA_TYPES.values():
        assert media in err["message"]
    r = httpx.get(server.url + "/v1/tables/small", params={"format": "raw"})
    assert r.status_code == 406 and r.json()["error"]["param"] == "format"


def test_unknown_table(server) -> None:
    r = httpx.get(server.url + "/v1/tables/nope")
    assert r.status_code == 404
    err = r.json()["error"]
    assert err["code"] == "not_found" and err["param"] == "name" and "small" in err["message"]


@pytest.mark.parametrize("coding", ["gzip", "br", "zstd"])
def test_compression(server, coding: str) -> None:
    plain, plain_body = raw_get(server.url + "/v1/tables/small?format=json-rows", **{"Accept-Encoding": "identity"})
    assert "content-encoding" not in plain.headers
    r, body = raw_get(server.url + "/v1/tables/small?format=json-rows", **{"Accept-Encoding": coding})
    assert r.headers["content-encoding"] == coding
    assert int(r.headers["content-length"]) == len(body) < len(plain_body)
    assert DECOMPRESS[coding](body) == plain_body
    assert r.headers["etag"] != plain.headers["etag"]


def test_etags_differ_per_format_and_coding(server) -> None:
    tags = set()
    for fmt in TABLE_FORMATS:
        for coding in ("identity", "gzip", "br", "zstd"):
            r, _ = raw_get(server.url + f"/v1/tables/small?format={fmt}", **{"Accept-Encoding": coding})
            etag = r.headers["etag"]
            assert etag.startswith('"') and etag.endswith('"') and not etag.startswith("W/")
            tags.add(etag)
    assert len(tags) == len(TABLE_FORMATS) * 4


def test_not_modified(server) -> None:
    url = server.url + "/v1/tables/small?format=protobuf"
    r = httpx.get(url, headers={"Accept-Encoding": "zstd"})
    etag = r.headers["etag"]
    for inm in (etag, f'"x", {etag}', f"W/{etag}", "*"):
        r304 = httpx.get(url, headers={"Accept-Encoding": "zstd", "If-None-Match": inm})
        assert r304.status_code == 304, inm
        assert r304.content == b"" and r304.headers["etag"] == etag
        assert r304.headers["vary"] == "Accept, Accept-Encoding" and r304.headers["cache-control"]
    # the same tag for another coding is another representation
    assert httpx.get(url, headers={"Accept-Encoding": "gzip", "If-None-Match": etag}).status_code == 200
    assert httpx.get(url, headers={"If-None-Match": '"other"'}).status_code == 200
    lm = r.headers["last-modified"]
    assert httpx.get(url, headers={"If-Modified-Since": lm}).status_code == 304
    assert httpx.get(url, headers={"If-Modified-Since": "Mon, 01 Jan 2001 00:00:00 GMT"}).status_code == 200


def test_head(server) -> None:
    get = httpx.get(server.url + "/v1/tables/small?format=arrow", headers={"Accept-Encoding": "identity"})
    head = httpx.head(server.url + "/v1/tables/small?format=arrow", headers={"Accept-Encoding": "identity"})
    assert head.status_code == 200 and head.content == b""
    assert head.headers["content-length"] == str(len(get.content))
    for h in ("etag", "content-type", "densewire-columns", "densewire-rows", "last-modified", "vary"):
        assert head.headers[h] == get.headers[h]


def test_warm_requests_do_not_serialize(server) -> None:
    before = server.metrics()

    def total(m: dict[str, float], prefix: str) -> float:
        return sum(v for k, v in m.items() if k.startswith(prefix) and 'table="small"' in k)

    n = 0
    for fmt in TABLE_FORMATS:
        for coding in ("identity", "gzip", "br", "zstd"):
            r, _ = raw_get(server.url + f"/v1/tables/small?format={fmt}", **{"Accept-Encoding": coding})
            assert r.status_code == 200
            n += 1
    after = server.metrics()
    serializations = "densewire_table_serializations_total"
    assert total(after, serializations) == total(before, serializations) == len(TABLE_FORMATS)
    assert total(after, "densewire_table_compressions_total") == total(before, "densewire_table_compressions_total") > 0
    warm = 'result="warm"'
    warm_after = sum(v for k, v in after.items() if k.startswith("densewire_table_requests_total") and warm in k
                     and 'table="small"' in k)
    warm_before = sum(v for k, v in before.items() if k.startswith("densewire_table_requests_total") and warm in k
                      and 'table="small"' in k)
    assert warm_after - warm_before == n
    assert metric_value(after, "densewire_table_warm", table="small") == 1
    assert metric_value(after, "densewire_table_rows", table="small") == SMALL_ROWS


def test_non_finite_table(server) -> None:
    r = httpx.get(server.url + "/v1/tables/nan", params={"format": "json"})
    assert r.status_code == 422
    assert r.json()["error"]["code"] == "non_finite" and "a[0]" in r.text
    r = httpx.get(server.url + "/v1/tables/nan", params={"format": "csv"})
    assert r.status_code == 200 and r.text.startswith("a,b\r\nNaN,1\r\n")
    t = decode_response(httpx.get(server.url + "/v1/tables/nan", params={"format": "arrow"}), "arrow")
    assert np.isnan(t.column("a").values[0]) and t.column("b").values.tolist()[:2] == [1, 2]


def live_db(files: Path) -> sqlite3.Connection:
    return sqlite3.connect(files / "live.db")


def test_refresh_swaps_in_a_new_version(server, files) -> None:
    url = server.url + "/v1/tables/live?format=json-columns"
    r1 = httpx.get(url)
    v1 = listing(server)["live"]["version"]
    assert decode_response(r1, "json-columns").rows == 50
    # an unchanged source keeps the version (and the ETags)
    loads = lambda: metric_value(server.metrics(), "densewire_table_loads_total", table="live", result="unchanged")
    n0 = loads()
    wait_until(lambda: loads() >= n0 + 2, "unchanged reloads", server)
    assert listing(server)["live"]["version"] == v1
    assert httpx.get(url, headers={"If-None-Match": r1.headers["etag"]}).status_code == 304
    con = live_db(files)
    con.execute("INSERT INTO items VALUES (50, 'new', 12.5, 1)")
    con.commit()
    con.close()
    new = wait_until(lambda: (t := listing(server)["live"])["version"] != v1 and t["status"] == "ready" and t,
                     "the new version", server)
    assert new["rows"] == 51
    r2 = httpx.get(url, headers={"If-None-Match": r1.headers["etag"]})
    assert r2.status_code == 200 and r2.headers["etag"] != r1.headers["etag"]
    t = decode_response(r2, "json-columns")
    assert t.rows == 51 and t.column("name").values[-1] == "new"


def test_failing_refresh_keeps_the_last_good_version(server, files) -> None:
    url = server.url + "/v1/tables/live?format=msgpack"
    good = httpx.get(url)
    version = listing(server)["live"]["version"]
    failures0 = metric_value(server.metrics(), "densewire_table_refresh_failures_total", table="live")
    con = live_db(files)
    con.execute("ALTER TABLE items RENAME TO items_gone")
    con.commit()
    con.close()
    try:
        entry = wait_until(lambda: (t := listing(server)["live"])["refresh_error"] and t, "a refresh error", server)
        assert "no such table: items" in entry["refresh_error"] and entry["status"] == "stale"
        assert entry["version"] == version and entry["refresh_failed_at"].endswith("Z")
        r = httpx.get(url)
        assert r.status_code == 200 and r.content == good.content and r.headers["etag"] == good.headers["etag"]
        health = httpx.get(server.url + "/health")
        assert health.status_code == 200 and health.json()["status"] == "degraded"
        assert "no such table" in health.json()["tables"]["live"]["error"]
        m = server.metrics()
        assert metric_value(m, "densewire_table_refresh_failures_total", table="live") > failures0
        assert metric_value(m, "densewire_table_age_seconds", table="live") > 0
        assert metric_value(m, "densewire_table_last_success_timestamp_seconds", table="live") > 1.7e9
        assert "no such table: items" in server.log_text()
    finally:
        con = live_db(files)
        con.execute("ALTER TABLE items_gone RENAME TO items")
        con.commit()
        con.close()
    wait_until(lambda: listing(server)["live"]["refresh_error"] is None, "recovery", server)
    assert httpx.get(server.url + "/health").json()["status"] == "ok"
    assert listing(server)["live"]["version"] == version  # same data again: same version


def test_openapi_documents_tables(server) -> None:
    doc = httpx.get(server.url + "/openapi.json").json()
    assert {"/v1/tables", "/v1/tables/{name}", "/demo/"} <= set(doc["paths"])
    content = doc["paths"]["/v1/tables/{name}"]["get"]["responses"]["200"]["content"]
    assert set(TABLE_MEDIA_TYPES.values()) <= set(content)
    assert doc["paths"]["/v1/tables/{name}"]["get"]["parameters"][1]["schema"]["enum"] == list(TABLE_FORMATS)


# -- failures before the first version ----------------------------------------------------------
def test_null_fails_the_load_naming_column_and_row(tmp_path: Path) -> None:
    con = sqlite3.connect(tmp_path / "n.db")
    con.execute("CREATE TABLE n (a INTEGER, b REAL)")
    con.executemany("INSERT INTO n VALUES (?, ?)", [(1, 1.5), (2, None), (3, 3.5)])
    con.commit()
    con.close()
    with ServerProcess("--model", "hash:8", "--no-demo-tables", "--table", f"n=sqlite:{tmp_path / 'n.db'}",
                       "--table", "ok=demo:rows=10", "--table-compression", "off") as s:
        wait_until(lambda: listing(s)["n"]["status"] == "failed", "the failed load", s)
        r = httpx.get(s.url + "/v1/tables/n")
        assert r.status_code == 503 and r.headers["retry-after"] == "5"
        err = r.json()["error"]
        assert err["code"] == "unavailable" and err["type"] == "server_error"
        assert "column 'b' is NULL at row 1" in err["message"]
        entry = listing(s)["n"]
        assert entry["rows"] is None and "column 'b' is NULL at row 1" in entry["refresh_error"]
        health = httpx.get(s.url + "/health").json()
        assert health["status"] == "degraded" and health["tables"]["n"]["status"] == "failed"
        assert httpx.get(s.url + "/v1/tables/ok").status_code == 200  # the other tables are served
        assert metric_value(s.metrics(), "densewire_table_refresh_failures_total", table="n") >= 1
        assert "Traceback" not in s.log_text()


def test_api_key_applies_to_tables() -> None:
    with ServerProcess("--model", "hash:8", "--no-demo-tables", "--table", "t=demo:rows=5", "--api-key", "k1",
                       "--table-compression", "off") as s:
        assert httpx.get(s.url + "/v1/tables/t").status_code == 401
        assert httpx.get(s.url + "/v1/tables").status_code == 401
        r = httpx.get(s.url + "/v1/tables/t", headers={"Authorization": "Bearer k1"})
        assert r.status_code == 200 and r.headers["densewire-rows"] == "5"


def test_public_tables_need_no_key_while_embeddings_still_do() -> None:
    with ServerProcess("--model", "hash:8", "--no-demo-tables", "--table", "t=demo:rows=5", "--api-key", "k1",
                       "--public-tables", "--table-compression", "off") as s:
        assert httpx.get(s.url + "/v1/tables").json()["data"][0]["name"] == "t"
        assert httpx.get(s.url + "/v1/tables/t?format=csv").status_code == 200
        assert httpx.head(s.url + "/v1/tables/t").status_code == 200
        assert httpx.post(s.url + "/v1/embeddings", json={"input": "x"}).status_code == 401
        assert httpx.get(s.url + "/v1/models").status_code == 401
        doc = httpx.get(s.url + "/openapi.json").json()
        assert doc["paths"]["/v1/tables/{name}"]["get"]["security"] == []
        assert "401" not in doc["paths"]["/v1/tables/{name}"]["get"]["responses"]
        assert doc["paths"]["/v1/embeddings"]["post"]["security"] == [{"bearer": []}]


def test_prewarm_runs_beside_the_event_loop() -> None:
    """While brotli 11 builds (seconds of CPU in the build process), other routes and the table
    itself (identity, from the first snapshot) keep answering: /health is seen saying 'warming'."""
    with ServerProcess("--model", "hash:8", "--no-demo-tables", "--table", "w=demo:rows=3000",
                       "--table-compression", "br=11,zstd=off,gzip=off") as s:
        seen: list[tuple[str, float]] = []
        table_answers = 0
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            t0 = time.perf_counter()
            h = httpx.get(s.url + "/health", timeout=30).json()
            seen.append((h["tables"]["w"]["status"], time.perf_counter() - t0))
            if h["tables"]["w"]["status"] == "warming":
                r = httpx.get(s.url + "/v1/tables/w?format=arrow", headers={"Accept-Encoding": "br"}, timeout=30)
                assert r.status_code == 200
                table_answers += 1
            if seen[-1][0] == "ready":
                break
            time.sleep(0.05)
        statuses = [st for st, _ in seen]
        assert statuses[-1] == "ready", s.log_text()[-3000:]
        assert statuses.count("warming") >= 3 and table_answers >= 3, statuses
        print(f"/health during pre-warm: {len(seen)} answers, slowest {max(t for _, t in seen) * 1000:.1f} ms")
        m = s.metrics()
        assert metric_value(m, "densewire_table_compressions_total", table="w", format="json", encoding="br") == 1
        assert sum(v for k, v in m.items() if k.startswith("densewire_table_requests_total") and 'table="w"' in k
                   and 'result="warm"' in k) >= table_answers


# -- the demo tables and /demo -------------------------------------------------------------------
def test_demo_tables_by_default() -> None:
    """The 67,627-row demo tables (the only test that builds them; fast compression)."""
    with ServerProcess("--model", "hash:8", "--table-compression", "fast", demo_tables=True) as s:
        tables = wait_until(lambda: (t := listing(s)) and all(x["status"] == "ready" for x in t.values()) and t,
                            "the demo tables", s, timeout=180)
        assert list(tables) == ["points", "points_f32"]
        assert tables["points"]["rows"] == tables["points_f32"]["rows"] == 67627
        assert [c["type"] for c in tables["points_f32"]["columns"]] == ["uuid", "int32", "float32", "float32"]
        expected = densewire.demo_table()
        for fmt in ("json", "arrow"):
            r = httpx.get(s.url + "/v1/tables/points", params={"format": fmt}, timeout=60)
            assert decode_response(r, fmt) == expected
        f32 = httpx.get(s.url + "/v1/tables/points_f32", params={"format": "protobuf"}, timeout=60)
        assert decode_response(f32, "protobuf") == densewire.demo_table(coordinates="float32", name="points_f32")
        sizes = tables["points"]["bytes"]
        assert set(sizes["json"]) == {"identity", "gzip", "zstd", "br"}
        assert tables["points_f32"]["bytes"]["protobuf"]["br"] < sizes["protobuf"]["br"]
        r = httpx.get(s.url + "/demo", follow_redirects=False)
        assert r.status_code in (307, 308) and r.headers["location"].endswith("/demo/")
        page = httpx.get(s.url + "/demo/")
        if (Path(densewire.__file__).parent / "_server" / "static" / "demo" / "index.html").is_file():
            assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        else:
            assert page.status_code == 404 and "the demo page is not built" in page.json()["error"]["message"]


def test_demo_files(tmp_path: Path) -> None:
    import asyncio

    from starlette.applications import Starlette
    from starlette.routing import Mount

    from densewire._server.tables.routes import DemoFiles

    async def fetch(directory: Path, path: str) -> httpx.Response:
        app = Starlette(routes=[Mount("/demo", app=DemoFiles(directory))])
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
            return await c.get(path)

    r = asyncio.run(fetch(tmp_path / "empty", "/demo/"))
    assert r.status_code == 404 and "the demo page is not built" in r.json()["error"]["message"]
    (tmp_path / "index.html").write_text("<!doctype html><title>demo</title>")
    (tmp_path / "app.js").write_text("console.log(1)")
    r = asyncio.run(fetch(tmp_path, "/demo/"))
    assert r.status_code == 200 and "<title>demo</title>" in r.text and r.headers["cache-control"] == "no-cache"
    r = asyncio.run(fetch(tmp_path, "/demo/app.js"))
    assert r.status_code == 200 and "javascript" in r.headers["content-type"] and r.headers["etag"]
