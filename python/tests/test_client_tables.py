"""densewire.TablesClient and AsyncTablesClient against a real `densewire serve` with small tables."""

from __future__ import annotations

import asyncio
import time

import httpx

import pytest

import densewire
from server_support import ServerProcess

ROWS = 300


@pytest.fixture(scope="module")
def server():
    with ServerProcess("--model", "hash:8", "--no-demo-tables", "--table", f"t=demo:rows={ROWS}",
                       "--table", f"f=demo:rows={ROWS // 2},coordinates=float32", "--table-compression", "fast",
                       "--api-key", "k1") as s:
        deadline = time.monotonic() + 120  # until the compressed representations are built
        while {t["status"] for t in httpx.get(s.url + "/health", timeout=10).json()["tables"].values()} != {"ready"}:
            assert time.monotonic() < deadline, s.log_text()[-3000:]
            time.sleep(0.1)
        yield s


def expected(name: str) -> densewire.Table:
    if name == "t":
        return densewire.demo_table(rows=ROWS, name="t")
    return densewire.demo_table(rows=ROWS // 2, coordinates="float32", name="f")


def test_lists_the_tables(server) -> None:
    with densewire.TablesClient(server.url, api_key="k1") as client:
        infos = {i.name: i for i in client.list_tables()}
    assert set(infos) == {"t", "f"}
    assert infos["t"].rows == ROWS and infos["f"].rows == ROWS // 2
    assert infos["f"].columns == (("uuid", "uuid"), ("status", "int32"), ("longitude", "float32"),
                                  ("latitude", "float32"))
    assert "protobuf" in infos["t"].formats and infos["t"].version


def test_negotiates_protobuf_by_default(server) -> None:
    with densewire.TablesClient(server.url, api_key="k1") as client:
        fetched = client.table("t")
    assert isinstance(fetched, densewire.FetchedTable)
    assert fetched.format == "protobuf" and fetched.table == expected("t")
    assert fetched.etag and fetched.last_modified


@pytest.mark.parametrize("fmt", densewire.TABLE_FORMATS)
def test_every_format_decodes_to_the_same_table(server, fmt: str) -> None:
    with densewire.TablesClient(server.url, api_key="k1", accept_encoding="identity") as client:
        fetched = client.table("f", format=fmt)
    assert fetched.format == fmt
    assert fetched.table == expected("f")


def test_if_none_match_gives_not_modified(server) -> None:
    with densewire.TablesClient(server.url, api_key="k1") as client:
        first = client.table("t", format="arrow")
        again = client.table("t", format="arrow", if_none_match=first.etag)
        other = client.table("t", format="csv", if_none_match=first.etag)  # another representation
    assert again == densewire.NotModified(first.etag)
    assert isinstance(other, densewire.FetchedTable) and other.etag != first.etag and other.table == expected("t")


@pytest.mark.parametrize("coding", ["gzip", "zstd", "br"])
def test_compressed_answers_decode(server, coding: str) -> None:
    with densewire.TablesClient(server.url, api_key="k1", accept_encoding=coding) as client:
        fetched = client.table("t", format="json-columns")
    assert coding in fetched.etag  # the server's ETag names the representation's content coding
    assert fetched.table == expected("t")


def test_asks_for_every_coding_it_reads_by_default(server) -> None:
    from densewire._client._compression import available_codings

    assert available_codings() == ["zstd", "br", "gzip"]  # this environment has zstandard and brotli
    with densewire.TablesClient(server.url, api_key="k1") as client:
        fetched = client.table("t", format="json")
    assert "zstd" in fetched.etag and fetched.table == expected("t")


def test_errors_are_typed(server) -> None:
    with densewire.TablesClient(server.url, api_key="k1") as client:
        with pytest.raises(densewire.BadRequestError) as info:
            client.table("nope")
    assert info.value.status_code == 404 and info.value.code == "not_found" and info.value.param == "name"
    with densewire.TablesClient(server.url, api_key="wrong") as client:
        with pytest.raises(densewire.BadRequestError) as info:
            client.list_tables()
    assert info.value.status_code == 401
    with pytest.raises(ValueError, match="unknown table format"):
        densewire.TablesClient(server.url).table("t", format="xml")


def test_async_client_fetches_many_in_order(server) -> None:
    async def go():
        async with densewire.AsyncTablesClient(server.url, api_key="k1", concurrency=2) as client:
            return await client.list_tables(), await client.tables(["f", "t", "f"], format="msgpack")

    infos, tables = asyncio.run(go())
    assert len(infos) == 2
    assert tables == [expected("f"), expected("t"), expected("f")]
