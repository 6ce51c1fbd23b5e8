"""One JSON request to Chroma's HTTP API, with credentials from the URL (OpenSearch goes through _es.EsConnection).

``http(s)://user:password@host:port`` becomes Basic authentication; the answer is parsed JSON; an HTTP
error is :class:`StoreHttpError` with the status and the store's own message (its first 500 bytes).
"""

from __future__ import annotations

import base64
import re
import urllib.error
import urllib.request
from typing import Any

import orjson

__all__ = ["StoreHttpError", "split_credentials", "request_json"]

_USERINFO = re.compile(r"^(https?://)([^/@]+)@")


class StoreHttpError(Exception):
    def __init__(self, method: str, url: str, status: int, text: str, retry_after: str | None = None) -> None:
        self.method, self.url, self.status, self.text, self.retry_after = method, url, status, text, retry_after
        super().__init__(f"{method} {url} answered HTTP {status}: {text}")


def split_credentials(url: str) -> tuple[str, dict[str, str]]:
    """``url`` without its ``user:password@`` and the ``Authorization`` header it carried (or none)."""
    m = _USERINFO.match(url)
    if not m:
        return url.rstrip("/"), {}
    header = "Basic " + base64.b64encode(urllib.request.unquote(m.group(2)).encode()).decode()
    return (m.group(1) + url[len(m.group(0)):]).rstrip("/"), {"Authorization": header}


def request_json(method: str, url: str, body: Any = None, *, headers: dict[str, str] | None = None,
                 timeout: float = 60.0, raw: bytes | None = None,
                 content_type: str = "application/json") -> Any:
    """``method url`` with ``body`` as JSON (or the bytes ``raw``); the answer's JSON (None when empty)."""
    data = raw if raw is not None else (None if body is None else orjson.dumps(body))
    h = {"Accept": "application/json", **(headers or {})}
    if data is not None:
        h["Content-Type"] = content_type
    request = urllib.request.Request(url, data=data, headers=h, method=method)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            answer = response.read()
    except urllib.error.HTTPError as exc:
        raise StoreHttpError(method, url, exc.code, exc.read()[:500].decode("utf-8", "replace"),
                             exc.headers.get("Retry-After")) from None
    return orjson.loads(answer) if answer.strip() else None
