"""Loading and reading pgvector columns over psycopg 3 with binary COPY (SPEC.md section 16).

:func:`copy_vectors` streams ``COPY table (id, embedding) FROM STDIN (FORMAT BINARY)`` from an
``(n, d)`` array in chunks (memory bounded by the chunk, a progress bar on a TTY); :func:`read_vectors`
runs ``COPY (SELECT ...) TO STDOUT (FORMAT BINARY)`` and returns one ``(n, d)`` tensor. Column types are
read from the catalog, so the caller names columns only. psycopg itself is not imported here: the
functions take a connection the caller opened.
"""

from __future__ import annotations

import os
import select
import socket
import struct
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._errors import InvalidFieldError
from .._optional import missing, require
from ._pgcopy import (HEADER, ID_TYPES, TRAILER, VECTOR_TYPES, CopyColumns, CopyData, encode_tuple_parts,
                      encode_tuples)
from ._pgcopy_read import read_stream
from .._ragged import SparseVectors
from .._tensor import Tensor

__all__ = ["CopyStats", "copy_vectors", "direct_socket_reason", "read_vectors", "column_types", "quote_ident", "quote_table", "progress_bar"]

COMMAND_OK = 1  # libpq's PGRES_COMMAND_OK (psycopg.pq.ExecStatus.COMMAND_OK)

#: catalog type name -> the name in a COPY's columns (varchar and text share their binary form)
_TYPE_NAMES = {"vector": "vector", "halfvec": "halfvec", "bit": "bit", "varbit": "bit", "sparsevec": "sparsevec",
               "int8": "int8", "int4": "int4", "text": "text", "varchar": "text", "bpchar": "text", "uuid": "uuid"}


@dataclass(frozen=True, slots=True)
class CopyStats:
    """What one :func:`copy_vectors` sent: rows, bytes of the stream, seconds."""

    rows: int
    bytes: int
    seconds: float
    #: the tuples went out on the connection's socket directly (True) or through libpq's output buffer
    direct: bool = False


def quote_ident(name: str) -> str:
    """An SQL identifier, double-quoted: ``embedding`` -> ``"embedding"``."""
    return '"' + name.replace('"', '""') + '"'


def quote_table(table: str) -> str:
    """``schema.table`` or ``table`` with each part quoted (a part already in double quotes is kept)."""
    if table.startswith('"') or "." not in table:
        return table if table.startswith('"') else quote_ident(table)
    return ".".join(quote_ident(part) for part in table.split("."))


def _columns(columns: str | Sequence[str]) -> list[str]:
    cols = [columns] if isinstance(columns, str) else list(columns)
    if not 1 <= len(cols) <= 2:
        raise InvalidFieldError(f"columns names the vector column, or an id column and the vector column; got {cols}",
                                field="columns")
    return cols


def column_types(conn: Any, select: str) -> list[tuple[str, str]]:
    """(name, type) of each column a SELECT returns, the type as :data:`VECTOR_TYPES` or ids name it
    (the catalog's ``typname`` otherwise)."""
    with conn.cursor() as cur:
        cur.execute(f"SELECT * FROM ({select}) AS densewire_q LIMIT 0")
        oids = [d.type_code for d in cur.description]
        names = [d.name for d in cur.description]
        cur.execute("SELECT oid::int8, typname FROM pg_type WHERE oid = ANY(%s)", (oids,))
        by_oid = {int(o): t for o, t in cur.fetchall()}
    return [(name, _TYPE_NAMES.get(by_oid.get(oid, "?"), by_oid.get(oid, "?"))) for name, oid in zip(names, oids)]


def _copy_columns(types: list[tuple[str, str]], pg_type: str | None, id_type: str | None) -> CopyColumns:
    (vname, vtype) = types[-1]
    vtype = pg_type or vtype
    if vtype not in VECTOR_TYPES:
        raise InvalidFieldError(f"column {vname} is of type {vtype}, not one of {', '.join(VECTOR_TYPES)}", field=vname)
    if len(types) == 1:
        return CopyColumns(vtype, vname)
    (iname, itype) = types[0]
    itype = id_type or itype
    if itype not in ID_TYPES:
        raise InvalidFieldError(f"id column {iname} is of type {itype}, not one of {', '.join(ID_TYPES)}", field=iname)
    return CopyColumns(vtype, vname, itype, iname)


def progress_bar(total: int | None, enabled: bool | None, unit: str = " rows") -> tuple[Callable[[int], None], Callable[[], None]]:
    """(update, close) of a tqdm bar on standard error; ``enabled=None`` means when it is a terminal and
    tqdm is installed (it comes with the serve extra)."""
    if enabled is None:
        enabled = sys.stderr.isatty() and not missing("tqdm")
    if not enabled:
        return (lambda _k: None), (lambda: None)
    tqdm = require("tqdm", extra="serve", feature="a progress bar").tqdm
    bar = tqdm(total=total, unit=unit, file=sys.stderr, dynamic_ncols=True)
    return bar.update, bar.close


def copy_vectors(conn: Any, table: str, columns: str | Sequence[str], vectors: Tensor | np.ndarray | SparseVectors,
                 ids: Any = None, *, pg_type: str | None = None, id_type: str | None = None,
                 rows_per_chunk: int = 512, progress: bool | None = None, direct: bool = False) -> CopyStats:
    """Load ``vectors`` (an ``(n, d)`` array or Tensor) into ``table`` with binary COPY over a psycopg 3
    connection; ``columns`` is the vector column's name, or ``(id_column, vector_column)`` with ``ids``
    (n ints, texts, UUIDs; None for NULL). The columns' types (vector, halfvec, bit, sparsevec; int8,
    int4, text, uuid) come from the catalog unless ``pg_type``/``id_type`` say them, and the vectors are
    converted to them (SPEC.md section 16.2); a :class:`SparseVectors` fills a ``sparsevec`` column from its
    indices and values, without a dense row. The stream goes out ``rows_per_chunk`` rows at a time,
    each chunk checked before it is written: a bad value aborts the COPY (PostgreSQL keeps none of its
    rows) and raises the densewire error naming the row. The COPY runs in the connection's transaction:
    commit it (or use an autocommit connection).

    ``direct`` chooses how the tuples are sent. False (the default): each chunk is handed to libpq in one
    blocking ``PQputCopyData``, which copies it into its output buffer and sends it. True: each chunk's
    CopyData message is written on the connection's socket itself, gathered from the tuples' parts with
    no copy (InvalidFieldError on ``direct`` when the connection is TLS or GSS-encrypted, see
    :func:`direct_socket_reason`). The socket path spends about a tenth less client CPU a row but, on an
    idle machine, loaded 100,000 x 1,536 vectors at 87 % of the server's own rate against libpq's 98 %
    (bench/ingest/RESULTS.md), so libpq's is the default. Either way libpq ends the COPY, so the server's
    errors (bad data, constraint violations, naming the COPY's line) are raised by psycopg as usual.
    """
    cols = _columns(columns)
    if len(cols) == 2 and ids is None:
        raise InvalidFieldError(f"columns names an id column ({cols[0]}) but no ids were given", field=cols[0])
    target = quote_table(table)
    col_list = ", ".join(quote_ident(c) for c in cols)
    types = column_types(conn, f"SELECT {col_list} FROM {target}") if (pg_type is None or
                                                                         (len(cols) == 2 and id_type is None)) else \
        [(c, "") for c in cols]
    layout = _copy_columns(types, pg_type, id_type)
    sparse = isinstance(vectors, SparseVectors)  # sparsevec rows from their indices and values
    t = vectors if sparse or isinstance(vectors, Tensor) else Tensor.from_array(np.asarray(vectors))
    if direct and (why_not := direct_socket_reason(conn)):
        raise InvalidFieldError(f"direct=True, but the COPY cannot be written on the socket: {why_not}",
                                field="direct")
    update, close = progress_bar(t.n, progress)
    sent = 0
    began = time.perf_counter()
    try:
        with conn.cursor() as cur, cur.copy(f"COPY {target} ({col_list}) FROM STDIN (FORMAT BINARY)") as copy:
            copy.write(HEADER)  # through psycopg, which then knows that the stream carries its own signature
            sent += len(HEADER)
            writer = _SocketWriter(conn) if direct else None
            tuples: list = []  # the arrays encode_tuples and encode_tuple_parts reuse from chunk to chunk
            parts_buffer: list = []
            try:
                for start in range(0, t.n, rows_per_chunk):
                    stop = min(start + rows_per_chunk, t.n)
                    chunk = t.slice(start, stop) if sparse else Tensor(t.array[start:stop], t.dtype, t.d)
                    chunk_ids = None if ids is None else ids[start:stop]
                    # on the socket, fixed-width tuples go out gathered from their heads and their items
                    parts = None if writer is None or sparse else encode_tuple_parts(chunk, layout, chunk_ids, start,
                                                                           parts_buffer)
                    if parts is not None:
                        sent += writer.send_rows(*parts)
                    else:
                        piece = encode_tuples(chunk, layout, chunk_ids, start, tuples)
                        if writer is not None:
                            writer.send(piece)
                        else:
                            _put_copy_data(conn, piece)
                        sent += piece.nbytes
                    update(stop - start)
            finally:
                if writer is not None:
                    writer.close()
            copy.write(TRAILER)  # libpq's output buffer is empty: this follows the last message sent directly
            sent += len(TRAILER)
    finally:
        close()
    return CopyStats(t.n, sent, time.perf_counter() - began, writer is not None)


def direct_socket_reason(conn: Any) -> str:
    """Why :func:`copy_vectors` cannot write CopyData messages on ``conn``'s socket itself ("" when it
    can). The bytes libpq sends are the protocol's as they are only without encryption: TLS
    (``PQsslInUse``) and GSS encryption rule the direct path out. libpq sets ``PQconnectionUsedGSSAPI``
    whenever GSS encryption is established (and for GSS authentication, which is then ruled out too, to
    be safe); where that function is missing (libpq before 16), only a Unix-domain socket (on which libpq
    never negotiates encryption) or ``gssencmode=disable`` is taken as proof."""
    if os.name != "posix":
        return "the direct path needs a POSIX socket"
    pgconn = conn.pgconn
    if pgconn.ssl_in_use:
        return "the connection uses TLS"
    try:
        if pgconn.used_gssapi:
            return "the connection used GSSAPI (it may be GSS-encrypted)"
    except Exception:  # psycopg's NotSupportedError: libpq < 16 cannot tell
        options = {o.keyword: o.val for o in pgconn.info}
        gssencmode = (options.get(b"gssencmode") or b"").decode()
        if not conn.info.host.startswith("/") and gssencmode != "disable":
            return "this libpq cannot tell whether the connection is GSS-encrypted"
    return ""


_COPY_DATA = struct.Struct(">ci")  # a CopyData message's header: b"d", then the length of the rest + 4
#: bytes of gathered tuples a sendmsg is given (about what a Unix socket takes in one call), in at most
#: _GATHER_ROWS rows (2 buffers a row, under Linux's IOV_MAX of 1024)
_GATHER_BYTES = 256 * 1024
_GATHER_ROWS = 500


class _SocketWriter:
    """CopyData messages written on the connection's socket, bypassing libpq's output buffer.

    libpq's output buffer is flushed first, then every message goes out with ``sendmsg`` (the header and
    the tuples' buffers gathered, no concatenation) on a duplicate of libpq's descriptor, which shares its
    O_NONBLOCK file status: when the socket is full, ``poll`` waits until it is writable or readable, and
    what the server sends meanwhile (notices, an error) is read into libpq with ``consume_input``, so the
    server never blocks writing to a client that is blocked writing to it. A message is never left half
    sent: if sending stops part way (an interrupt, a signal handler raising), the rest is sent before the
    exception goes on, and if even that fails the connection is closed, as its protocol state is lost."""

    def __init__(self, conn: Any) -> None:
        self.conn, self.pgconn = conn, conn.pgconn
        self.done = 0
        self._iov: list[Any] = []
        self._iov_key: tuple[int, ...] = ()
        self.sock = socket.socket(fileno=os.dup(self.pgconn.socket))
        self.poll = select.poll()
        self.poll.register(self.sock.fileno(), select.POLLOUT | select.POLLIN)
        try:
            while self.pgconn.flush():  # 1 while libpq still holds bytes (the header, a notice's reply)
                self._wait()
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        self.sock.close()  # the duplicate only: libpq's descriptor stays open

    def _wait(self) -> None:
        for _fd, events in self.poll.poll():
            if events & (select.POLLIN | select.POLLHUP | select.POLLERR):
                self.pgconn.consume_input()  # raises psycopg's OperationalError if the connection is gone
                self.pgconn.is_busy()  # parses what came: notices go to their handlers now, not at the end

    def send(self, data: memoryview) -> None:
        """One CopyData message of ``data``, whole."""
        head = _COPY_DATA.pack(b"d", data.nbytes + 4)
        parts: list[Any] = [head, data]
        self._message(len(head) + data.nbytes, lambda done: _rest(parts, done))

    def send_rows(self, heads: memoryview, items: memoryview, head_size: int, items_size: int) -> int:
        """One CopyData message of fixed-width tuples gathered from ``heads`` and ``items``
        (:func:`encode_tuple_parts`), about :data:`_GATHER_BYTES` a ``sendmsg``;
        the bytes of the tuples."""
        size = head_size + items_size
        k = heads.nbytes // head_size
        key = (heads.obj.__array_interface__["data"][0], items.obj.__array_interface__["data"][0], head_size,
               items_size)
        if self._iov_key != key or len(self._iov) < 2 * k:  # the same arrays as the last chunk: the same views
            self._iov = [m for r in range(k) for m in (heads[r * head_size:(r + 1) * head_size],
                                                      items[r * items_size:(r + 1) * items_size])]
            self._iov_key = key
        iov = self._iov
        head = _COPY_DATA.pack(b"d", k * size + 4)
        g = max(1, min(_GATHER_ROWS, _GATHER_BYTES // size))

        def rest(done: int) -> list[Any]:
            if done < len(head):
                return [head[done:], *iov[:2 * min(g, k)]]
            r, o = divmod(done - len(head), size)
            end = 2 * min(r + g, k)
            if o < head_size:
                return [heads[r * head_size + o:(r + 1) * head_size], *iov[2 * r + 1:end]]
            return [items[r * items_size + o - head_size:(r + 1) * items_size], *iov[2 * r + 2:end]]

        self._message(len(head) + k * size, rest)
        return k * size

    def _message(self, total: int, rest: Callable[[int], list[Any]]) -> None:
        """Send ``total`` bytes, ``rest(done)`` giving the buffers from byte ``done`` on."""
        self.done = 0
        try:
            self._send(total, rest)
        except BaseException:
            if 0 < self.done < total:  # part of the message is out: the rest must follow, or nothing can
                try:
                    self._send(total, rest)
                except BaseException:  # the connection's protocol state is lost: close it, raise the first
                    self.close()
                    self.conn.close()
            raise

    def _send(self, total: int, rest: Callable[[int], list[Any]]) -> None:
        while self.done < total:
            try:
                self.done += self.sock.sendmsg(rest(self.done), (), socket.MSG_NOSIGNAL)
            except BlockingIOError:
                self._wait()
            except InterruptedError:
                pass


def _rest(parts: list[Any], done: int) -> list[Any]:
    """The buffers of ``parts`` from byte ``done`` on."""
    for i, p in enumerate(parts):
        size = len(p) if isinstance(p, bytes) else p.nbytes
        if done < size:
            return [memoryview(p)[done:], *parts[i + 1:]] if done else parts[i:]
        done -= size
    return []


def _put_copy_data(conn: Any, data: memoryview) -> None:
    """One chunk of tuples to libpq in one ``PQputCopyData`` call, with the connection in blocking mode.

    psycopg's ``copy.write`` hands libpq 128 KiB at a time on its non-blocking connection and flushes
    every 1 MiB; each time the socket takes only part of libpq's buffer (a Unix socket takes about
    200 KiB), libpq moves the unsent rest to the buffer's start, so up to a megabyte is copied again
    per send. In blocking mode libpq sends the whole chunk in its own loop (waiting on the socket in C,
    and reading any notice the server sends meanwhile, so neither side can stall the other) and moves
    only the last few KiB: one copy of the chunk into libpq's buffer is all the client does. The
    connection is non-blocking again afterwards, whatever happens."""
    pgconn = conn.pgconn
    pgconn.nonblocking = 0
    try:
        pgconn.put_copy_data(data)  # 1, or psycopg raises OperationalError (0 means "retry" only when non-blocking)
    finally:
        pgconn.nonblocking = 1


def read_vectors(conn: Any, table: str | None = None, columns: str | Sequence[str] = "embedding", *,
                 query: str | None = None, order_by: str | None = None, d: int = 0) -> CopyData:
    """A vector column (and an id column before it) read with ``COPY ... TO STDOUT (FORMAT BINARY)`` into
    one ``(n, d)`` tensor of the column type's dtype (vector: float32, halfvec: float16, bit: packed
    binary, sparsevec: dense float32) and the ids. Either ``table`` and ``columns`` (``order_by`` an SQL
    expression, e.g. the id column), or ``query``, a SELECT of those one or two columns."""
    if query is None:
        if table is None:
            raise InvalidFieldError("read_vectors needs a table or a query", field="table")
        cols = _columns(columns)
        query = f"SELECT {', '.join(quote_ident(c) for c in cols)} FROM {quote_table(table)}"
        if order_by:
            query += f" ORDER BY {order_by}"
    types = column_types(conn, query)
    if not 1 <= len(types) <= 2:
        raise InvalidFieldError(f"the query returns {len(types)} columns; it needs the vector column, or an id "
                                "column and the vector column", field="query")
    layout = _copy_columns(types, None, None)
    with conn.cursor() as cur, cur.copy(f"COPY ({query}) TO STDOUT (FORMAT BINARY)") as copy:
        stream = _read_copy_out(conn, copy)
    return read_stream(memoryview(stream), layout, d)


def _read_copy_out(conn: Any, copy: Any) -> bytearray:
    """The whole output of a started ``COPY ... TO STDOUT``, in one buffer.

    The server sends one CopyData message a row. psycopg's ``copy.read()`` hands each over through a
    generator and a wait call; here the rows libpq already holds are taken straight from its
    connection (``pgconn.get_copy_data`` without waiting) and appended to one ``bytearray`` (it grows
    by reallocation: glibc moves large blocks by remapping pages, not by copying them). Only when libpq
    holds no complete row does ``copy.read()`` wait for the next one, so waiting, interruption and the
    end of the COPY stay psycopg's; if libpq reports the end itself, its final result is read here."""
    pgconn = conn.pgconn
    out = bytearray()
    while True:
        nbytes, data = pgconn.get_copy_data(1)  # 1: never block; 0 when no whole message is buffered
        if nbytes > 0:
            out += data
        elif nbytes == 0:
            data = copy.read()  # waits for the next row; b"" once the COPY has ended (and is finished)
            if not data:
                return out
            out += data
        else:  # -1: the COPY ended within what libpq had buffered; its result follows
            _finish_copy_out(conn)
            return out


def _finish_copy_out(conn: Any) -> None:
    pgconn = conn.pgconn
    failed = None
    while (res := pgconn.get_result()) is not None:  # already received with the end of the COPY
        if res.status != COMMAND_OK and failed is None:
            failed = res
    if failed is not None:
        errors = require("psycopg", extra="serve", feature="reading pgvector columns").errors
        raise errors.error_from_result(failed, encoding=conn.info.encoding)

