"""``EsBulkSink``: blocks as Elasticsearch / OpenSearch ``_bulk`` bodies with packed vectors.

The NDJSON lines are :func:`densewire._stores._esbulk.bulk_lines`' (big-endian float32 Base64, the packed
``dense_vector`` form; ``vector_format="floats"`` for stores that only take JSON arrays), each row's
``_id`` its id, so that writing a block again replaces its documents rather than adding copies.

* A path (a folder): one file a block, ``<block>.ndjson``, written to a temporary name in the folder
  and renamed over it, so a block written again replaces its file whole and a reader never sees half
  of one (load them with ``curl -H 'Content-Type: application/x-ndjson' --data-binary @file``).
* An ``http(s)://`` URL (Elasticsearch, :mod:`densewire._stores._es`): the index's mapping is checked
  before the first request of each worker (the field a ``dense_vector`` of the vectors' dims and element
  type), or the index created with ``create_index=True`` (``similarity``, ``index_type``); then ``POST
  <url>/_bulk`` with the lines, ``max_bytes`` at most a request, retried on 429, 503 and connection
  errors (the client's :class:`RetryPolicy`), and items rejected with 429 inside a bulk answer sent again
  alone; an item the store refused is a :class:`BatchError` naming its id, the block and the reason.
  ``api_key``, basic auth (``https://user:password@host:9200``) and ``ca_file`` for TLS.
"""

from __future__ import annotations

import os
import re
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pyarrow as pa

from .._stores._es import EsConnection, EsError, EsIndex
from .._stores._esbulk import ELEMENT_TYPES, VECTOR_FORMATS, bulk_lines, element_type_of
from .._tensor import Tensor
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
    replaced). ``concurrency``: bulk requests of a block in flight at once (each on its own connection,
    as ``parallel_bulk`` and the Java ``BulkIngester`` do): a node indexes a request, and builds an HNSW
    graph, in one write thread, so one request at a time leaves its other cores to merges
    (bench/stores/RESULTS-elasticsearch.md: ``bbq_hnsw`` on 2 cores, Base64 1.05x float arrays one at a
    time, 1.24x two at a time). A block fails as a whole on the first refused request; the requests
    already sent are replaced, not duplicated, when the block is written again."""

    def __init__(self, path_or_url: str, *, index: str, field: str, id_column: str, vector_format: str = "base64",
                 max_bytes: int = 32 << 20, timeout: float = 120.0, retries: int = 2,
                 api_key: str | None = None, ca_file: str | None = None, create_index: bool = False,
                 similarity: str | None = None, index_type: str | None = None,
                 element_type: str | None = None, concurrency: int = 1) -> None:
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
            raise BatchError(f"concurrency is the bulk requests in flight, an integer >= 1, not {concurrency!r}")
        if vector_format not in VECTOR_FORMATS:
            raise BatchError(f"vector_format must be one of {', '.join(VECTOR_FORMATS)}, not {vector_format!r}")
        if element_type is not None and element_type not in ELEMENT_TYPES:
            raise BatchError(f"element_type must be one of {', '.join(ELEMENT_TYPES)}, not {element_type!r}")
        self.path_or_url, self.index, self.field, self.id_column = str(path_or_url), index, field, id_column
        self.vector_format, self.max_bytes, self.timeout, self.retries = vector_format, max_bytes, timeout, retries
        self.api_key, self.ca_file, self.create_index = api_key, ca_file, create_index
        self.similarity, self.index_type, self.element_type = similarity, index_type, element_type
        self.concurrency = concurrency
        self.is_url = self.path_or_url.lower().startswith(("http://", "https://"))
        self._target: EsIndex | None = None  # the checked index, once per process (not pickled)
        if not self.is_url:  # resolved where the sink is made (the driver): workers run in other folders
            self.path_or_url = os.path.abspath(self.path_or_url)

    def __getstate__(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "_target"} | {"_target": None}

    def target(self, dims: int, dtype: str) -> EsIndex:
        """The index, its mapping checked (or created) for vectors of ``dims`` and ``dtype`` (once)."""
        if self._target is None:
            try:
                conn = EsConnection(self.path_or_url, api_key=self.api_key, ca_file=self.ca_file,
                                    timeout=self.timeout, retries=self.retries)
                target = EsIndex(conn, self.index, self.field)
                target.prepare(dims=dims, element_type=self.element_type, data_element_type=element_type_of(dtype),
                               create=self.create_index, similarity=self.similarity, index_type=self.index_type)
            except EsError as exc:
                raise BatchError(exc.message, category=exc.category, column=self.field) from exc
            self._target = target
        return self._target

    def bodies(self, data: pa.Table | pa.RecordBatch, *, block: str, element_type: str | None = None) -> list[bytes]:
        """The bulk request bodies of ``data`` (checked first: ids, vectors), each at most ``max_bytes``
        unless one row is larger."""
        ids = ids_of(data, self.id_column, block=block)
        pieces = vector_chunks(data, self.field, id_column=self.id_column, block=block)
        element_type = element_type or self.element_type or "float"
        bodies: list[bytes] = []
        current: list[bytes] = []
        size = 0
        try:
            for row0, a in pieces:
                chunk_ids = ids[row0:row0 + len(a)]
                rows = max(1, min(1024, self.max_bytes // (a.shape[1] * 6 + 100 + len(str(ids[-1]))) if len(a) else 1))
                for lines in bulk_lines(_tensor(a, element_type), index=self.index, field=self.field, ids=chunk_ids,
                                        vector_format=self.vector_format, rows_per_chunk=rows, row0=row0,
                                        element_type=element_type):
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
        if not self.is_url:
            return self._write_file(self.bodies(data, block=block), data.num_rows, block)
        if data.num_rows == 0:
            return 0
        pieces = [a for _r, a in vector_chunks(data, self.field, id_column=self.id_column, block=block,
                                               skip_empty=True)]
        t = _tensor(pieces[0], self.element_type or ("bit" if pieces[0].dtype == np.uint8 else "float"))
        target = self.target(t.d, t.dtype)
        bodies = self.bodies(data, block=block, element_type=target.element_type)

        def send(body: bytes) -> int:
            try:
                return target.bulk(body)
            except EsError as exc:
                raise BatchError(exc.message, category=exc.category, row_id=exc.row_id, block=block) from exc

        if self.concurrency == 1 or len(bodies) == 1:
            return sum(send(body) for body in bodies)
        with ThreadPoolExecutor(min(self.concurrency, len(bodies)), thread_name_prefix="densewire-es-bulk") as pool:
            return sum(pool.map(send, bodies))

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


def _tensor(a: np.ndarray, element_type: str) -> Tensor:
    """A block's (k, d) values as the Tensor the field's element type reads: uint8 bytes are packed bits
    for a ``bit`` field (d * 8 dims), uint16 bfloat16 bits for a ``bfloat16`` one."""
    if element_type == "bit" and a.dtype == np.uint8:
        return Tensor(a, "binary", a.shape[1] * 8)
    if element_type == "bfloat16" and a.dtype == np.uint16:
        return Tensor(a, "bfloat16", a.shape[1])
    return Tensor.from_array(a)


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
