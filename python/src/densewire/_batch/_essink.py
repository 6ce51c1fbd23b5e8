"""``EsBulkSink``: blocks as Elasticsearch / OpenSearch ``_bulk`` bodies with packed vectors.

The NDJSON lines are :func:`densewire._stores._esbulk.bulk_lines`' (big-endian float32 Base64, the packed
``dense_vector`` form; ``vector_format="floats"`` for stores that only take JSON arrays), each row's
``_id`` its id, so that writing a block again replaces its documents rather than adding copies.

* A path (a folder): one file a block, ``<block>.ndjson``, written to a temporary name in the folder
  and renamed over it, so a block written again replaces its file whole and a reader never sees half
  of one (load them with ``curl -H 'Content-Type: application/x-ndjson' --data-binary @file``).
* An ``http(s)://`` URL: ``POST <url>/_bulk`` with the lines, ``max_bytes`` at most a request, retried
  on 429, 503 and connection errors (the client's :class:`RetryPolicy`); an item the store refused is a
  :class:`BatchError` naming its id and the block.
"""

from __future__ import annotations

import base64
import http.client
import os
import re
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa

from .._client._retry import RetryPolicy
from .._stores._esbulk import VECTOR_FORMATS, bulk_lines
from ._columns import ids_of, vector_chunks
from ._errors import BatchError

__all__ = ["EsBulkSink", "block_file_name"]

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def block_file_name(block: str) -> str:
    """``<block>.ndjson``, with characters other than letters, digits, ``._-`` as ``_``."""
    return _UNSAFE.sub("_", block) + ".ndjson"


class EsBulkSink:
    """Write blocks of an Arrow table (``id_column`` and the vector column ``field``) as bulk
    requests into ``index``, to files in the folder ``path_or_url`` or to the ``_bulk`` API at that URL.
    ``write`` returns the rows written (with a URL: the documents the store created, not those it
    replaced)."""

    def __init__(self, path_or_url: str, *, index: str, field: str, id_column: str, vector_format: str = "base64",
                 max_bytes: int = 32 << 20, timeout: float = 120.0, retries: int = 2,
                 api_key: str | None = None) -> None:
        if vector_format not in VECTOR_FORMATS:
            raise BatchError(f"vector_format must be one of {', '.join(VECTOR_FORMATS)}, not {vector_format!r}")
        self.path_or_url, self.index, self.field, self.id_column = str(path_or_url), index, field, id_column
        self.vector_format, self.max_bytes, self.timeout, self.retries = vector_format, max_bytes, timeout, retries
        self.api_key = api_key
        self.is_url = self.path_or_url.lower().startswith(("http://", "https://"))
        if not self.is_url:  # resolved where the sink is made (the driver): workers run in other folders
            self.path_or_url = os.path.abspath(self.path_or_url)

    def bodies(self, data: pa.Table | pa.RecordBatch, *, block: str) -> list[bytes]:
        """The bulk request bodies of ``data`` (checked first: ids, vectors), each at most ``max_bytes``
        unless one row is larger."""
        ids = ids_of(data, self.id_column, block=block)
        pieces = vector_chunks(data, self.field, id_column=self.id_column, block=block)
        bodies: list[bytes] = []
        current: list[bytes] = []
        size = 0
        try:
            for row0, a in pieces:
                chunk_ids = ids[row0:row0 + len(a)]
                rows = max(1, min(1024, self.max_bytes // (a.shape[1] * 6 + 100 + len(str(ids[-1]))) if len(a) else 1))
                for lines in bulk_lines(a, index=self.index, field=self.field, ids=chunk_ids,
                                        vector_format=self.vector_format, rows_per_chunk=rows, row0=row0):
                    for piece in _pieces(lines, self.max_bytes):
                        if current and size + len(piece) > self.max_bytes:
                            bodies.append(b"".join(current))
                            current, size = [], 0
                        current.append(piece)
                        size += len(piece)
        except BatchError as exc:
            raise exc.in_block(block)
        except ValueError as exc:  # densewire's errors: a non-finite value, an integer dtype
            raise BatchError(str(exc), category=getattr(exc, "category", "invalid_field"), column=self.field,
                             block=block) from exc
        if current:
            bodies.append(b"".join(current))
        return bodies

    def write(self, data: pa.Table | pa.RecordBatch, *, block: str) -> int:
        bodies = self.bodies(data, block=block)
        if not self.is_url:
            return self._write_file(bodies, data.num_rows, block)
        return sum(self._post(body, block) for body in bodies)

    def _write_file(self, bodies: list[bytes], rows: int, block: str) -> int:
        folder = Path(self.path_or_url)
        folder.mkdir(parents=True, exist_ok=True)
        final = folder / block_file_name(block)
        fd, tmp = tempfile.mkstemp(prefix=f".{final.name}.", suffix=".tmp", dir=folder)
        try:
            with os.fdopen(fd, "wb") as f:
                for body in bodies:
                    f.write(body)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, final)
        except BaseException:
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass
            raise
        return rows

    def _post(self, body: bytes, block: str) -> int:
        url = self.path_or_url.rstrip("/") + "/_bulk"
        headers = {"Content-Type": "application/x-ndjson", "Accept": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"ApiKey {self.api_key}"
        elif (m := re.match(r"^(https?://)([^/@]+)@", self.path_or_url)):  # user:password@host
            headers["Authorization"] = "Basic " + base64.b64encode(m.group(2).encode()).decode()
            url = m.group(1) + url[len(m.group(0)):]
        policy = RetryPolicy(self.retries)
        attempt = 0
        while True:
            attempt += 1
            try:
                request = urllib.request.Request(url, data=body, headers=headers, method="POST")
                with urllib.request.urlopen(request, timeout=self.timeout) as response:
                    answer = response.read()
                return _created(answer, block)
            except urllib.error.HTTPError as exc:
                text = exc.read()[:500].decode("utf-8", "replace")
                wait = policy.wait(attempt, status=exc.code, retry_after=exc.headers.get("Retry-After"))
                if wait is None:  # not retried, the retries spent, or a Retry-After past a minute (SPEC.md 18.2)
                    raise BatchError(f"POST {url} answered HTTP {exc.code}: {text}", category="internal_error",
                                     block=block) from exc
            except (urllib.error.URLError, http.client.HTTPException, ConnectionError, TimeoutError) as exc:
                wait = policy.wait(attempt)
                if wait is None:
                    raise BatchError(f"POST {url} failed after {attempt} attempts: {exc}", category="unavailable",
                                     block=block) from exc
            time.sleep(wait)


def _pieces(lines: bytes, max_bytes: int) -> list[bytes]:
    """``lines`` (action and source line pairs) cut at row boundaries into pieces of at most
    ``max_bytes`` (a row longer than that is a piece of its own)."""
    if len(lines) <= max_bytes:
        return [lines]
    out: list[bytes] = []
    start = last = 0  # the piece begins at start; its rows so far end at last
    while last < len(lines):
        end = lines.index(b"\n", lines.index(b"\n", last) + 1) + 1  # the end of the next row's two lines
        if end - start > max_bytes and last > start:
            out.append(lines[start:last])
            start = last
        last = end
    out.append(lines[start:])
    return out


def _created(answer: bytes, block: str) -> int:
    """Documents created by a bulk answer; an item in error raises, naming its id."""
    try:
        result: dict[str, Any] = orjson.loads(answer)
        items = result["items"]
    except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
        raise BatchError(f"the _bulk answer is not a bulk response: {answer[:200]!r}", category="malformed",
                         block=block) from exc
    created = 0
    for item in items:
        (op, status), = item.items()
        if "error" in status:
            raise BatchError(f"the store refused the document: {orjson.dumps(status['error']).decode()}",
                             category="internal_error", row_id=status.get("_id"), block=block)
        created += status.get("result") == "created"
    return created
