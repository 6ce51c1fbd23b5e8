"""Elasticsearch as a destination: the index checked (or created) with a ``dense_vector`` mapping before
anything is sent, and ``_bulk`` requests whose answers are read item by item.

* :class:`EsConnection`: HTTP(S) to a node, with an API key (``Authorization: ApiKey``), basic auth
  (``user:password@`` in the URL, or ``username=``/``password=``) and TLS verified against a CA file;
  a request answered 429 or 503, or whose connection failed before an answer, is sent again by
  SPEC.md section 18 (:class:`~densewire._client._retry.RetryPolicy`).
* :class:`EsIndex`: one index and vector field. ``prepare(dims, element_type)`` reads the mapping and
  checks that the field is a ``dense_vector`` of those dims and that element type, or creates the index
  (``create=True``) with ``similarity`` and ``index_type`` (``flat``, ``hnsw``, ``int8_hnsw``, ...);
  ``bulk(body)`` posts one body and reads every item: items rejected with 429
  (``es_rejected_execution_exception``, a full write queue) are sent again, alone, by the same
  schedule, never the accepted ones; a refused document (``document_parsing_exception``, ...) is an
  :class:`EsError` naming its id and Elasticsearch's reason. Documents carry their id and the op is
  ``index``, so a block sent again replaces its documents (a version conflict, which only ``create``
  ops meet, means the document is there: not an error). ``ids()`` lists the ids the index holds, for
  ``--resume``.
"""

from __future__ import annotations

import base64
import http.client
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

import orjson

from .._client._retry import RetryPolicy
from .._errors import DensewireError, error_class
from ._esbulk import ELEMENT_TYPES

__all__ = ["EsConnection", "EsIndex", "EsError", "INDEX_TYPES", "SIMILARITIES", "is_es_url"]

#: ``index_options.type`` of a dense_vector, as Elasticsearch 9 names them (``bbq_disk`` needs a license
#: the test distribution does not carry)
INDEX_TYPES = ("flat", "hnsw", "int8_hnsw", "int4_hnsw", "bbq_hnsw", "bbq_flat", "bbq_disk", "int8_flat", "int4_flat")
SIMILARITIES = ("cosine", "dot_product", "l2_norm", "max_inner_product")


def is_es_url(dest: str) -> bool:
    return dest.lower().startswith(("http://", "https://"))


class EsError(DensewireError):
    """An error of Elasticsearch or of talking to it: ``category`` (SPEC.md section 11), ``status`` (the
    HTTP or item status, 0 for a connection), ``row_id`` (the ``_id`` of a refused document)."""

    def __init__(self, message: str, *, category: str = "internal_error", status: int = 0, row_id: Any = None,
                 field: str | None = None) -> None:
        self.category = category
        self.http_status = error_class(category).http_status
        self.status, self.row_id = status, row_id
        super().__init__(message, field=field)


def _reason(answer: Any) -> str:
    """``type: reason`` of an Elasticsearch error object (the root cause's when it says more)."""
    err = answer.get("error", answer) if isinstance(answer, dict) else answer
    if not isinstance(err, dict):
        return str(err)[:300]
    text = f"{err.get('type', 'error')}: {err.get('reason', '')}"
    if err.get("additional_unsuccessful_credentials"):  # a security_exception: which credentials failed, and why
        text += f" ({err['additional_unsuccessful_credentials']})"
    caused = err.get("caused_by")
    if isinstance(caused, dict) and caused.get("reason") and caused["reason"] not in text:
        text += f" (caused by {caused.get('type')}: {caused['reason']})"
    return text


class EsConnection:
    """Requests to one node (or a load balancer in front of a cluster)."""

    def __init__(self, url: str, *, api_key: str | None = None, username: str | None = None,
                 password: str | None = None, ca_file: str | None = None, timeout: float = 120.0,
                 retries: int = 2) -> None:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise EsError(f"not an http(s)://HOST:PORT URL: {url!r}", category="invalid_field", field="url")
        if parts.username is not None and username is None:
            username = urllib.parse.unquote(parts.username)
            password = urllib.parse.unquote(parts.password or "")
        netloc = parts.hostname + (f":{parts.port}" if parts.port else "")
        self.url = urllib.parse.urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))
        self.headers = {"Accept": "application/json"}
        if api_key:
            self.headers["Authorization"] = f"ApiKey {api_key}"
        elif username is not None:
            self.headers["Authorization"] = "Basic " + base64.b64encode(f"{username}:{password or ''}".encode()).decode()
        self.ca_file, self.timeout, self.retries = ca_file, timeout, retries
        self._context = ssl.create_default_context(cafile=ca_file) if parts.scheme == "https" else None

    def __reduce__(self) -> tuple[Any, ...]:  # an SSLContext does not pickle: rebuilt where it lands
        return (_rebuild_connection, (self.url, self.headers, self.ca_file, self.timeout, self.retries))

    def request(self, method: str, path: str, body: bytes | dict | None = None, *,
                content_type: str = "application/json", ok: tuple[int, ...] = (200, 201)) -> tuple[int, Any]:
        """(status, decoded JSON answer). A status in ``ok`` or 404 is returned; 429/503/connection
        failures are retried (SPEC.md 18); any other status is an :class:`EsError` with ES's reason."""
        data = orjson.dumps(body) if isinstance(body, dict) else body
        headers = dict(self.headers)
        if data is not None:
            headers["Content-Type"] = content_type
        url = self.url + path
        policy = RetryPolicy(self.retries)
        attempt = 0
        while True:
            attempt += 1
            try:
                req = urllib.request.Request(url, data=data, headers=headers, method=method)
                with urllib.request.urlopen(req, timeout=self.timeout, context=self._context) as response:
                    return response.status, _json(response.read())
            except urllib.error.HTTPError as exc:
                answer = _json(exc.read())
                if exc.code in ok or exc.code == 404:
                    return exc.code, answer
                wait = policy.wait(attempt, status=exc.code, retry_after=exc.headers.get("Retry-After"))
                if wait is None:
                    raise _http_error(method, self.url, path, exc.code, answer) from None
            except urllib.error.URLError as exc:
                if isinstance(exc.reason, ssl.SSLError):  # a TLS error: not retried (SPEC.md 18.1)
                    raise EsError(f"{method} {self.url}{path}: TLS: {exc.reason} (is --ca-file the node's CA?)",
                                  category="unavailable") from None
                wait = policy.wait(attempt)
                if wait is None:
                    raise EsError(f"{method} {self.url}{path} failed after {attempt} attempts: {exc.reason}",
                                  category="unavailable") from None
            except (http.client.HTTPException, ConnectionError) as exc:
                wait = policy.wait(attempt)
                if wait is None:
                    raise EsError(f"{method} {self.url}{path} failed after {attempt} attempts: {exc!r}",
                                  category="unavailable") from None
            except TimeoutError as exc:
                raise EsError(f"{method} {self.url}{path}: no answer in {self.timeout} s ({exc})",
                              category="unavailable") from None
            time.sleep(wait)


def _rebuild_connection(url: str, headers: dict, ca_file: str | None, timeout: float, retries: int) -> EsConnection:
    c = EsConnection(url, ca_file=ca_file, timeout=timeout, retries=retries)
    c.headers = dict(headers)
    return c


def _json(raw: bytes) -> Any:
    try:
        return orjson.loads(raw) if raw else None
    except orjson.JSONDecodeError:
        return raw[:300].decode("utf-8", "replace")


def _http_error(method: str, url: str, path: str, status: int, answer: Any) -> EsError:
    category = {400: "invalid_field", 401: "unauthorized", 403: "unauthorized", 413: "payload_too_large",
                429: "rate_limited", 503: "unavailable"}.get(status, "internal_error")
    hint = ""
    if status == 401:
        hint = " (check the API key or user and password)"
    elif status == 403:
        hint = " (the credentials lack a privilege on the index)"
    return EsError(f"{method} {url}{path} answered HTTP {status}: {_reason(answer)}{hint}", category=category,
                   status=status)


class EsIndex:
    """One index and its vector field on a connection."""

    def __init__(self, conn: EsConnection, index: str, field: str) -> None:
        if not index or index != index.lower() or any(c in index for c in ' "*\\<|,>/?#:'):
            raise EsError(f"{index!r} is not an Elasticsearch index name (lowercase, none of \\/*?\"<>| ,#:)",
                          category="invalid_field", field="index")
        self.conn, self.index, self.field = conn, index, field
        self._path = "/" + urllib.parse.quote(index, safe="")

    # -------------------------------------------------------------------- mapping
    def field_mapping(self) -> dict | None:
        """The field's mapping; None if the index does not exist; {} if it exists without the field."""
        status, answer = self.conn.request("GET", f"{self._path}/_mapping")
        if status == 404:
            return None
        for index_mapping in answer.values():  # one index (or the indices behind an alias)
            node: Any = index_mapping.get("mappings", {})
            for part in self.field.split("."):
                node = node.get("properties", {}).get(part)
                if node is None:
                    return {}
            return node
        return {}

    def prepare(self, *, dims: int, element_type: str | None = None, data_element_type: str = "float",
                create: bool = False, similarity: str | None = None, index_type: str | None = None) -> str:
        """Check (or with ``create``, make) the field as a ``dense_vector`` of ``dims`` and ``element_type``
        (None: the field's own if it exists, else ``data_element_type``, the one the vectors' dtype maps
        to); nothing is written before this passes. Sets ``.element_type``; returns a description."""
        if element_type is not None and element_type not in ELEMENT_TYPES:
            raise EsError(f"element_type must be one of {', '.join(ELEMENT_TYPES)}", category="invalid_field",
                          field="element_type")
        mapping = self.field_mapping()
        if element_type is None:
            element_type = (mapping or {}).get("element_type", "float") if mapping else data_element_type
        self.element_type = element_type
        if mapping is None or mapping == {}:
            if not create:
                what = f"index {self.index!r} does not exist" if mapping is None else \
                    f"index {self.index!r} has no mapping for field {self.field!r}"
                raise EsError(f"{what}: pass --create-index (create_index=True) to create it with a dense_vector "
                              f"field of {dims} dims, or create it yourself", category="not_found", field="index")
            self._create(mapping is None, dims, element_type, similarity, index_type)
            mapping = self.field_mapping() or {}
        return self._check(mapping, dims, element_type)

    def _create(self, new_index: bool, dims: int, element_type: str, similarity: str | None,
                index_type: str | None) -> None:
        prop: dict[str, Any] = {"type": "dense_vector", "dims": dims, "element_type": element_type, "index": True}
        if similarity:
            if similarity not in SIMILARITIES:
                raise EsError(f"similarity must be one of {', '.join(SIMILARITIES)}", category="invalid_field",
                              field="similarity")
            prop["similarity"] = similarity
        if index_type:
            if index_type not in INDEX_TYPES:
                raise EsError(f"index type must be one of {', '.join(INDEX_TYPES)}", category="invalid_field",
                              field="index_type")
            prop["index_options"] = {"type": index_type}
        for part in reversed(self.field.split(".")[1:]):
            prop = {"properties": {part: prop}}
        properties = {self.field.split(".")[0]: prop}
        if new_index:
            status, answer = self.conn.request("PUT", self._path, {"mappings": {"properties": properties}},
                                               ok=(200, 400))
            if status == 400 and _error_type(answer) == "resource_already_exists_exception":
                return  # another worker created it at the same moment: the check that follows reads its mapping
        else:
            status, answer = self.conn.request("PUT", f"{self._path}/_mapping", {"properties": properties},
                                               ok=(200, 400))
        if status != 200:
            raise EsError(f"Elasticsearch would not create field {self.field!r} of index {self.index!r}: "
                          f"{_reason(answer)}", category="invalid_field", status=status, field="index")

    def _check(self, mapping: dict, dims: int, element_type: str) -> str:
        where = f"field {self.field!r} of index {self.index!r}"
        if mapping.get("type") != "dense_vector":
            raise EsError(f"{where} is a {mapping.get('type', 'object')}, not a dense_vector", category="invalid_field",
                          field=self.field)
        have_type = mapping.get("element_type", "float")
        if have_type != element_type:
            raise EsError(f"{where} has element_type {have_type}; the vectors are for {element_type}",
                          category="invalid_field", field=self.field)
        have_dims = mapping.get("dims")
        if have_dims is not None and int(have_dims) != dims:
            raise EsError(f"{where} has {have_dims} dims; the vectors have {dims}", category="shape_mismatch",
                          field=self.field)
        options = mapping.get("index_options", {}).get("type", "default")
        return (f"{where}: dense_vector {have_dims or dims} dims, {have_type}, "
                f"{mapping.get('similarity', 'cosine')}, {options}")

    # -------------------------------------------------------------------- writing
    def bulk(self, body: bytes) -> int:
        """Post one ``_bulk`` body; the documents it created (not those it replaced). Items rejected with 429
        are sent again alone (SPEC.md 18 schedule); a refused document raises."""
        policy = RetryPolicy(self.conn.retries)
        created = attempt = 0
        pending = body
        while True:
            attempt += 1
            _, answer = self.conn.request("POST", "/_bulk", pending, content_type="application/x-ndjson", ok=(200,))
            items = answer.get("items") if isinstance(answer, dict) else None
            if not isinstance(items, list):
                raise EsError(f"the _bulk answer is not a bulk response: {str(answer)[:200]}", category="malformed")
            rejected: list[int] = []
            for k, item in enumerate(items):
                (_, status), = item.items()
                if "error" not in status:
                    created += status.get("result") == "created"
                elif status.get("status") == 429:
                    rejected.append(k)
                elif status.get("status") == 409 and _error_type(status) == "version_conflict_engine_exception":
                    pass  # a create op for an id that is there: the document is written
                else:
                    raise EsError(f"Elasticsearch refused the document: {_reason(status)}",
                                  category="invalid_field" if status.get("status") == 400 else "internal_error",
                                  status=int(status.get("status", 0)), row_id=status.get("_id"))
            if not rejected:
                return created
            wait = policy.wait(attempt, status=429)
            if wait is None:
                first = items[rejected[0]]
                (_, status), = first.items()
                raise EsError(f"{len(rejected)} documents still rejected after {attempt} attempts: {_reason(status)}",
                              category="rate_limited", status=429, row_id=status.get("_id"))
            time.sleep(wait)
            pairs = _pairs(pending)
            pending = b"".join(pairs[k] for k in rejected)

    def refresh(self) -> None:
        self.conn.request("POST", f"{self._path}/_refresh")

    def ids(self) -> set[str]:
        """Every ``_id`` in the index (after a refresh), for ``--resume``; empty if there is no index."""
        status, _ = self.conn.request("POST", f"{self._path}/_refresh")
        if status == 404:
            return set()
        found: set[str] = set()
        status, page = self.conn.request("POST", f"{self._path}/_search?scroll=2m",
                                         {"size": 10_000, "_source": False, "sort": ["_doc"]})
        scroll = page.get("_scroll_id")
        try:
            while page and page["hits"]["hits"]:
                found.update(h["_id"] for h in page["hits"]["hits"])
                _, page = self.conn.request("POST", "/_search/scroll", {"scroll": "2m", "scroll_id": scroll})
                scroll = page.get("_scroll_id", scroll)
        finally:
            if scroll:
                self.conn.request("DELETE", "/_search/scroll", {"scroll_id": scroll})
        return found


def _error_type(answer: Any) -> str | None:
    err = answer.get("error") if isinstance(answer, dict) else None
    return err.get("type") if isinstance(err, dict) else None


def _pairs(body: bytes) -> list[bytes]:
    """The (action line, source line) pairs of a bulk body of index ops, in order."""
    lines = body.splitlines(keepends=True)
    return [lines[i] + lines[i + 1] for i in range(0, len(lines) - 1, 2)]
