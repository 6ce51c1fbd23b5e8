"""The connection protocol ``densewire serve`` gives uvicorn: HTTP/1.1 by httptools, HTTP/2 by zttp.

Each connection starts as :class:`HTTPProtocol`, uvicorn's httptools protocol (the fastest HTTP/1.1
of the servers measured in bench/serve/RESULTS-http2.md), and becomes uvicorn's HTTP/2 protocol
(``ZttpH2Protocol``, the zttp parser) when

* its TLS handshake chose ``h2`` by ALPN (``--ssl-certfile``: the server offers h2 and http/1.1), or
* a cleartext connection opens with the HTTP/2 connection preface (h2c with prior knowledge:
  ``curl --http2-prior-knowledge``, httpx with ``http1=False, http2=True``, gRPC-style clients).

A cleartext HTTP/1.1 request that offers an upgrade other than to WebSocket (``Upgrade: h2c`` from the
JDK ``HttpClient`` defaults and ``curl --http2``) is answered as HTTP/1.1, as RFC 9110 section 7.8
allows ("a server MAY ignore a received Upgrade header field"), with its body intact, Content-Length or
chunked, and the connection stays open for the next request. uvicorn's httptools protocol loses that
body (Kludex/uvicorn#2722): llhttp reads the bytes after such a head as the new protocol, and uvicorn
drops them. Here the head is parsed again without its upgrade offer by a fresh parser, which then
reads the body and whatever follows on the connection.
"""

from __future__ import annotations

from typing import Any, ClassVar

import httptools
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.protocols.http.zttp_h2_impl import ZttpH2Protocol

__all__ = ["HTTPProtocol", "HTTP2_PREFACE"]

#: RFC 9113 section 3.4: what an HTTP/2 client sends first on a connection.
HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

#: Connection-specific fields of an upgrade offer, left out when the offer is declined.
_OFFER_FIELDS = frozenset({b"upgrade", b"http2-settings"})


class HTTPProtocol(HttpToolsProtocol):
    """uvicorn's httptools HTTP/1.1 protocol that declines h2c upgrade offers without losing the
    request, and hands HTTP/2 connections (ALPN h2, or the preface) to uvicorn's HTTP/2 protocol."""

    #: uvicorn reads this for the TLS context of --ssl-certfile: h2 preferred, then HTTP/1.1.
    alpn_protocols: ClassVar[list[str]] = ["h2", "http/1.1"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._args, self._kwargs = args, kwargs
        self._sniff: bytes | None = b""  # the first bytes of the connection until HTTP/2 is ruled out
        self._declined: tuple[bytes, bytes, list[tuple[bytes, bytes]]] | None = None

    # -- HTTP/2 ---------------------------------------------------------------------------------------
    def connection_made(self, transport: Any) -> None:  # type: ignore[override]
        super().connection_made(transport)
        ssl_object = transport.get_extra_info("ssl_object")
        if ssl_object is not None:
            self._sniff = None
            if ssl_object.selected_alpn_protocol() == "h2":
                self._switch_to_http2(b"")

    def _switch_to_http2(self, data: bytes) -> None:
        self.connections.discard(self)
        self._unset_keepalive_if_required()
        h2 = ZttpH2Protocol(*self._args, **self._kwargs)
        self.transport.set_protocol(h2)
        h2.connection_made(self.transport)
        if data:
            h2.data_received(data)

    # -- HTTP/1.1 -------------------------------------------------------------------------------------
    def data_received(self, data: bytes) -> None:
        if self._sniff is not None:
            data = self._sniff + data
            if len(data) < len(HTTP2_PREFACE) and HTTP2_PREFACE.startswith(data):
                self._sniff = data  # could still be the preface: wait for more
                return
            self._sniff = None
            if data.startswith(HTTP2_PREFACE):
                self._switch_to_http2(data)
                return
        self._unset_keepalive_if_required()
        while True:
            try:
                self.parser.feed_data(data)
                return
            except httptools.HttpParserError:
                msg = "Invalid HTTP request received."
                self.logger.warning(msg)
                self.send_400_response(msg)
                return
            except httptools.HttpParserUpgrade as exc:
                if self._declined is None:  # an upgrade to WebSocket (uvicorn's own handling)
                    if self._should_upgrade():
                        self.handle_websocket_upgrade()
                    else:
                        self._unsupported_upgrade_warning()
                    return
                # Parse the same request again without its offer: a new parser reads the head, then
                # the body and anything after it (pipelined requests) from where llhttp stopped.
                data = self._declined_head() + data[exc.args[0]:]
                self._declined = None
                self.parser = httptools.HttpRequestParser(self)
                try:
                    self.parser.set_dangerous_leniencies(lenient_data_after_close=True)
                except AttributeError:  # httptools < 0.6.3, as uvicorn
                    pass

    def _declined_head(self) -> bytes:
        assert self._declined is not None
        method, version, headers = self._declined
        lines = [method, b" ", self.url, b" HTTP/", version, b"\r\n"]
        for name, value in headers:
            if name in _OFFER_FIELDS:
                continue
            if name == b"connection":
                tokens = [t.strip() for t in value.split(b",")]
                value = b", ".join(t for t in tokens if t and t.lower() not in _OFFER_FIELDS)
                if not value:
                    continue
            lines += [name, b": ", value, b"\r\n"]
        lines.append(b"\r\n")
        return b"".join(lines)

    def on_headers_complete(self) -> None:
        if self.parser.should_upgrade() and not self._should_upgrade() and self.parser.get_method() != b"CONNECT":
            # An offer we decline: no request cycle yet; data_received parses the request again.
            self._declined = (self.parser.get_method(), self.parser.get_http_version().encode(), self.headers)
            return
        super().on_headers_complete()

    def on_body(self, body: bytes) -> None:
        if self._declined is None:
            super().on_body(body)

    def on_message_complete(self) -> None:
        if self._declined is None:
            super().on_message_complete()
