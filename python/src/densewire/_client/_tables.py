"""``AsyncTablesClient`` and ``TablesClient`` for the tables API (SPEC.md section 15.9).

``GET /v1/tables`` lists the tables; ``GET /v1/tables/{name}`` fetches one, negotiating Protobuf by
default (then Arrow when pyarrow is installed, MessagePack, JSON columns, CSV, JSON objects), asking
for the content codings this install can read, and decoding it by its Content-Type with the
densewire table decoders (fixed-width columns are views of the received buffer where the format
allows). An ``ETag`` from an earlier fetch, passed as ``if_none_match``, gives :class:`NotModified`
when the table has not changed.
"""

from __future__ import annotations

import asyncio
import importlib.util
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import quote

import orjson

from .._errors import DensewireError, InvalidFieldError, ShapeMismatchError, UnsupportedMediaTypeError
from .._tables import TABLE_FORMATS, TABLE_MEDIA_TYPES, Table, decode_table, table_format_for_media_type
from ._compression import available_codings
from ._embeddings import auth_headers, base_url_of
from ._errors import APIError
from ._loop import LoopThread, close_on_loop
from ._retry import RetryPolicy
from ._transport import Response, Transport, raise_for_status

__all__ = ["AsyncTablesClient", "TablesClient", "TableInfo", "FetchedTable", "NotModified", "table_accept"]


@dataclass(frozen=True, slots=True)
class TableInfo:
    """One entry of ``GET /v1/tables``."""

    name: str
    rows: int
    columns: tuple[tuple[str, str], ...]  # (name, type) in order
    version: str
    refreshed_at: str | None
    formats: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class FetchedTable:
    """A table as fetched: the decoded table, the format the server chose and its validators."""

    table: Table
    format: str
    etag: str | None
    last_modified: str | None


@dataclass(frozen=True, slots=True)
class NotModified:
    """304: the version named by ``if_none_match`` is still current."""

    etag: str | None


def table_accept(format: str | None = None) -> str:  # noqa: A002
    """The ``Accept`` header for one format, or (None) the default negotiation.

    >>> table_accept("csv")
    'text/csv, application/json;q=0.1'
    """
    if format == "json":
        return TABLE_MEDIA_TYPES["json"]
    if format is not None:
        if format not in TABLE_FORMATS:
            raise ValueError(f"unknown table format {format!r}; expected one of {', '.join(TABLE_FORMATS)}")
        return f"{TABLE_MEDIA_TYPES[format]}, application/json;q=0.1"
    prefs = [("protobuf", "1"), ("arrow", "0.9"), ("msgpack", "0.8"), ("json-columns", "0.5"), ("csv", "0.3"),
             ("json", "0.1")]
    has_arrow = importlib.util.find_spec("pyarrow") is not None
    return ", ".join(TABLE_MEDIA_TYPES[f] + ("" if q == "1" else f";q={q}") for f, q in prefs
                     if f != "arrow" or has_arrow)


def _parse_list(body) -> list[TableInfo]:
    try:
        data = orjson.loads(body)["data"]
        return [TableInfo(t["name"], int(t["rows"]), tuple((c["name"], c["type"]) for c in t["columns"]),
                          str(t["version"]), t.get("refreshed_at"), tuple(t.get("formats", ())))
                for t in data]
    except (ValueError, KeyError, TypeError) as exc:
        raise InvalidFieldError(f"GET /v1/tables answered an unexpected document: {exc!r}", field="data") from exc


def _decode_table(response: Response) -> FetchedTable | NotModified:
    etag = response.header("ETag")
    if response.status == 304:
        return NotModified(etag)
    raise_for_status(response)
    content_type = response.header("Content-Type", "application/json")
    fmt = table_format_for_media_type(content_type)
    if fmt is None:
        raise UnsupportedMediaTypeError(f"the server answered with Content-Type {content_type!r}",
                                        field="Content-Type")
    try:
        table = decode_table(response.body, fmt, columns=response.header("Densewire-Columns"),
                             name=response.header("Densewire-Table"))
    except DensewireError as exc:
        raise APIError(response.status, f"the server's {fmt} table does not decode: {exc}", exc.category,
                       exc.field, exc.offset) from exc
    rows = response.header("Densewire-Rows")
    if rows is not None and rows.strip() != str(table.rows):
        raise ShapeMismatchError(f"the body has {table.rows} rows, Densewire-Rows says {rows}", field="Densewire-Rows")
    return FetchedTable(table, fmt, etag, response.header("Last-Modified"))


class AsyncTablesClient:
    """The asyncio client of the tables API. ``accept_encoding`` defaults to every coding this
    install reads (tables compress well, unlike float vectors); retries as :class:`AsyncClient`."""

    def __init__(self, base_url: str = "http://127.0.0.1:8000", *, api_key: str | None = None,
                 timeout: float | None = 120.0, accept_encoding: str | None = None, max_retries: int = 2,
                 backoff_base: float = 0.5, backoff_cap: float = 8.0, concurrency: int = 4,
                 max_body: int = 1 << 30) -> None:
        self.base_url = base_url_of(base_url)
        self.concurrency = max(1, concurrency)
        self._headers = {"Accept-Encoding": accept_encoding or ", ".join(available_codings()), **auth_headers(api_key)}
        self._transport = Transport(timeout=timeout, retry=RetryPolicy(max_retries, backoff_base, backoff_cap),
                                    max_body=max_body)

    async def __aenter__(self) -> "AsyncTablesClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._transport.close()

    async def list_tables(self) -> list[TableInfo]:
        """``GET /v1/tables``: the tables the server has."""
        response = await self._transport.request("GET", f"{self.base_url}/v1/tables",
                                                 {**self._headers, "Accept": "application/json"})
        raise_for_status(response)
        return _parse_list(response.body)

    async def table(self, name: str, *, format: str | None = None,  # noqa: A002
                    if_none_match: str | None = None) -> FetchedTable | NotModified:
        """``GET /v1/tables/{name}`` in ``format`` (one of ``TABLE_FORMATS``; None negotiates); a 304
        is :class:`NotModified`; an unknown table raises :class:`BadRequestError` (404 ``not_found``)."""
        headers = {**self._headers, "Accept": table_accept(format)}
        if if_none_match is not None:
            headers["If-None-Match"] = if_none_match
        response = await self._transport.request("GET", f"{self.base_url}/v1/tables/{quote(name, safe='')}", headers)
        return _decode_table(response)

    async def tables(self, names: Sequence[str], *, format: str | None = None) -> list[Table]:  # noqa: A002
        """Several tables, ``concurrency`` at a time, in the order of ``names``."""
        gate = asyncio.Semaphore(self.concurrency)

        async def one(name: str) -> Table:
            async with gate:
                fetched = await self.table(name, format=format)
            assert isinstance(fetched, FetchedTable)  # no If-None-Match was sent
            return fetched.table

        return list(await asyncio.gather(*(one(n) for n in names)))


class TablesClient:
    """The synchronous tables client (the async one on a private event loop thread)."""

    def __init__(self, base_url: str = "http://127.0.0.1:8000", *, api_key: str | None = None,
                 timeout: float | None = 120.0, accept_encoding: str | None = None, max_retries: int = 2,
                 backoff_base: float = 0.5, backoff_cap: float = 8.0, concurrency: int = 4,
                 max_body: int = 1 << 30) -> None:
        self._async = AsyncTablesClient(base_url, api_key=api_key, timeout=timeout, accept_encoding=accept_encoding,
                                        max_retries=max_retries, backoff_base=backoff_base, backoff_cap=backoff_cap,
                                        concurrency=concurrency, max_body=max_body)
        self.base_url = self._async.base_url
        self._loop = LoopThread("densewire-tables-client")
        # closed when collected, or at exit, if its user never calls close(): no open session is left
        self._finalizer = weakref.finalize(self, close_on_loop, self._loop, self._async)

    def __enter__(self) -> "TablesClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._finalizer()

    def list_tables(self) -> list[TableInfo]:
        """``GET /v1/tables``: the tables the server has."""
        return self._loop.run(self._async.list_tables())

    def table(self, name: str, *, format: str | None = None,  # noqa: A002
              if_none_match: str | None = None) -> FetchedTable | NotModified:
        """``GET /v1/tables/{name}``; see :meth:`AsyncTablesClient.table`."""
        return self._loop.run(self._async.table(name, format=format, if_none_match=if_none_match))

    def tables(self, names: Sequence[str], *, format: str | None = None) -> list[Table]:  # noqa: A002
        """Several tables, ``concurrency`` at a time, in the order of ``names``."""
        return self._loop.run(self._async.tables(names, format=format))
