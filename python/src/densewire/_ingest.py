"""``densewire ingest SOURCE --to DEST``: vectors into PostgreSQL (pgvector, binary COPY), into
Elasticsearch (``_bulk`` with packed vectors) or into an Elasticsearch/OpenSearch bulk body.

SOURCE is a densewire body in any format (a file or ``-``, the format detected as ``densewire inspect``
does), or with ``--embed URL`` a text file, one text a line, embedded on the way by a densewire server.
Row ``i`` of the source has the id ``--first-id + i`` (or the ``i``-th line of ``--ids FILE``). Rows
go in blocks (``--block-rows``): one COPY and commit per block for PostgreSQL, so an interrupted run
leaves whole blocks; ``--start-id``/``--end-id`` take an id range and ``--resume`` skips the ids the
destination already holds (texts are embedded only for the rows that are still missing).

An ``http(s)://HOST:9200`` destination is an Elasticsearch node: ``--index`` is checked before anything
is sent (its ``--field`` a ``dense_vector`` of the data's dims and element type) or, missing, created
with ``--create-index`` (``--similarity``, ``--index-type``); each block's ``_bulk`` answer is read item
by item (429-rejected items sent again alone, a refused document an error naming its id); the ids are
``_id``, so a rerun replaces rather than duplicates. ``--es-api-key`` (or ``DENSEWIRE_ES_API_KEY``),
``https://user:password@host`` and ``--ca-file`` for a secured cluster.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, BinaryIO

import numpy as np

from ._client import Client
from ._errors import InvalidFieldError
from ._ingest_multi import OUTPUTS, ingest_multi
from ._ingest_stores import add_store_options, ingest_store, is_store
from ._stores._es import INDEX_TYPES, SIMILARITIES, EsConnection, EsError, EsIndex, is_es_url
from ._stores._esbulk import ELEMENT_TYPES, VECTOR_FORMATS, bulk_lines, element_type_of
from ._optional import require
from ._stores._pgvector import column_types, copy_vectors, progress_bar, quote_ident, quote_table
from ._tensor import Tensor

__all__ = ["add_ingest_command", "run_ingest", "Summary"]


@dataclass
class Summary:
    rows: int = 0
    skipped: int = 0
    bytes: int = 0
    seconds: float = 0.0
    destination: str = ""
    notes: list[str] = field(default_factory=list)

    def line(self) -> str:
        rate = self.rows / self.seconds if self.seconds else 0.0
        mb = self.bytes / self.seconds / 1e6 if self.seconds else 0.0
        skipped = f", {self.skipped:,} skipped" if self.skipped else ""
        return (f"densewire ingest: {self.rows:,} rows{skipped}, {self.bytes:,} bytes in {self.seconds:.2f} s "
                f"({rate:,.0f} rows/s, {mb:,.1f} MB/s) -> {self.destination}")


# ------------------------------------------------------------------------------------ sources
def _id_list(args: argparse.Namespace, n: int | None) -> Any:
    """The ids of the source's rows: None means first_id + row number (computed per block)."""
    if args.ids is None:
        return None
    with open(args.ids, encoding="utf-8") as f:
        ids = [line.rstrip("\r\n") for line in f]
    if n is not None and len(ids) != n:
        raise InvalidFieldError(f"--ids has {len(ids)} lines for {n} rows", field="--ids")
    if all(s.lstrip("-").isdigit() for s in ids):
        return np.array([int(s) for s in ids], dtype=np.int64)
    return ids


def _block_ids(ids: Any, first_id: int, lo: int, hi: int) -> Any:
    return np.arange(first_id + lo, first_id + hi, dtype=np.int64) if ids is None else ids[lo:hi]


def _texts(path: str) -> Iterator[str]:
    f = sys.stdin if path == "-" else open(path, encoding="utf-8")
    try:
        for line in f:
            yield line.rstrip("\r\n")
    finally:
        if f is not sys.stdin:
            f.close()


def text_blocks(args: argparse.Namespace) -> Iterator[tuple[list[str], Any]]:
    """(texts, ids) of each block of ``--block-rows`` lines of the text file SOURCE."""
    ids_all = _id_list(args, None)
    texts = _texts(args.input)
    for lo in itertools.count(0, args.block_rows):
        block = list(itertools.islice(texts, args.block_rows))
        if not block:
            return
        yield block, _block_ids(ids_all, args.first_id, lo, lo + len(block))


def source_blocks(args: argparse.Namespace, keep) -> Iterator[tuple[Tensor | None, Any, int]]:
    """(vectors, ids, rows of the source seen) per block; ``keep(ids)`` is the mask of rows to write,
    applied before any text is embedded."""
    if args.embed:
        with Client(args.embed, api_key=args.api_key) as client:
            for block, ids in text_blocks(args):
                mask = keep(ids)
                chosen = [t for t, k in zip(block, mask) if k]
                vectors = None
                if chosen:
                    array = client.embed_many(chosen, batch_size=args.batch_size, concurrency=args.concurrency,
                                              model=args.model)
                    vectors = Tensor.from_array(array)
                yield vectors, _select(ids, mask), len(block)
        return
    emb, _, _, _ = args.load_input(args)  # densewire._cli.load_input: the format detected as inspect does
    t = emb.tensor
    ids_all = _id_list(args, t.n)
    for lo in range(0, t.n, args.block_rows):
        hi = min(lo + args.block_rows, t.n)
        ids = _block_ids(ids_all, args.first_id, lo, hi)
        mask = keep(ids)
        rows = np.asarray(t.array[lo:hi])[mask]
        yield (Tensor(rows, t.dtype, t.d) if len(rows) else None), _select(ids, mask), hi - lo


def _select(ids: Any, mask: np.ndarray) -> Any:
    return ids[mask] if isinstance(ids, np.ndarray) else [i for i, k in zip(ids, mask) if k]


def _range_filter(args: argparse.Namespace):
    def keep(ids: Any) -> np.ndarray:
        if args.start_id is None and args.end_id is None:
            return np.ones(len(ids), bool)
        if not isinstance(ids, np.ndarray):
            raise InvalidFieldError("--start-id and --end-id need integer ids", field="--ids")
        mask = np.ones(len(ids), bool)
        if args.start_id is not None:
            mask &= ids >= args.start_id
        if args.end_id is not None:
            mask &= ids < args.end_id
        return mask
    return keep


# ------------------------------------------------------------------------------------ destinations
def _psycopg():
    return require("psycopg", extra="serve", feature="ingesting into PostgreSQL")


def _ingest_postgres(args: argparse.Namespace, summary: Summary) -> None:
    psycopg = _psycopg()
    if not args.table or not args.column:
        raise SystemExit("densewire ingest: a PostgreSQL destination needs --table and --column")
    columns = [args.id_column, args.column] if args.id_column else [args.column]
    if args.resume and not args.id_column:
        raise SystemExit("densewire ingest: --resume needs --id-column (the ids tell which rows are there)")
    try:
        with psycopg.connect(args.to) as conn:
            types = dict(column_types(conn, f"SELECT {', '.join(map(quote_ident, columns))} FROM {quote_table(args.table)}"))
            pg_type, id_type = types[args.column], types.get(args.id_column) if args.id_column else None
            conn.commit()
            summary.destination = f"postgresql table {args.table} ({', '.join(f'{c} {types[c]}' for c in columns)})"
            present = _present_pg(conn, args, id_type) if args.resume else None
            keep = _with_present(_range_filter(args), present)
            update, close = progress_bar(None, args.progress)
            try:
                for vectors, ids, seen in source_blocks(args, keep):
                    if vectors is not None:
                        stats = copy_vectors(conn, args.table, columns, vectors, ids if args.id_column else None,
                                             pg_type=pg_type, id_type=id_type, progress=False)
                        conn.commit()
                        summary.rows += stats.rows
                        summary.bytes += stats.bytes
                    summary.skipped += seen - (0 if vectors is None else vectors.n)
                    update(seen)
            finally:
                close()
    except psycopg.Error as exc:
        raise SystemExit(f"densewire ingest: PostgreSQL: {str(exc).strip()}") from None


def _present_pg(conn: Any, args: argparse.Namespace, id_type: str | None) -> set:
    """The ids the table holds already (text of non-integer ids)."""
    col = quote_ident(args.id_column)
    cast = "" if id_type in ("int8", "int4") else "::text"
    with conn.cursor() as cur:
        cur.execute(f"SELECT {col}{cast} FROM {quote_table(args.table)} WHERE {col} IS NOT NULL")
        present = {row[0] for row in cur}
    conn.commit()
    return present


def _with_present(keep, present: set | None):
    if not present:
        return keep

    def both(ids: Any) -> np.ndarray:
        mask = keep(ids)
        if isinstance(ids, np.ndarray):
            return mask & ~np.isin(ids, np.fromiter((p for p in present if isinstance(p, int)), np.int64))
        return mask & np.fromiter((str(i) not in present for i in ids), bool, len(ids))
    return both


def _present_bulk(path: str) -> set:
    """The ``_id`` of every action line of an existing bulk body."""
    present: set = set()
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        return present
    with f:
        for k, line in enumerate(f):
            if k % 2 == 0 and line.strip():
                action = json.loads(line)
                meta = next(iter(action.values()))
                if "_id" in meta:
                    present.add(int(meta["_id"]) if meta["_id"].lstrip("-").isdigit() else meta["_id"])
    return present


def _ingest_bulk(args: argparse.Namespace, summary: Summary, path: str) -> None:
    if not args.index:
        raise SystemExit("densewire ingest: an es-bulk destination needs --index")
    if args.resume and path == "-":
        raise SystemExit("densewire ingest: --resume needs an es-bulk FILE (it reads the ids written there)")
    present = _present_bulk(path) if args.resume else None
    keep = _with_present(_range_filter(args), present)
    summary.destination = (f"{'standard output' if path == '-' else path}: bulk body for index {args.index}, field "
                           f"{args.field} ({'packed big-endian Base64' if args.vector_format == 'base64' else 'floats'})")
    out: BinaryIO = sys.stdout.buffer if path == "-" else open(path, "ab" if args.resume else "wb")
    update, close = progress_bar(None, args.progress)
    try:
        for vectors, ids, seen in source_blocks(args, keep):
            if vectors is not None:
                for chunk in bulk_lines(vectors, index=args.index, field=args.field,
                                        ids=None if args.no_ids else ids, vector_format=args.vector_format):
                    out.write(chunk)
                    summary.bytes += len(chunk)
                summary.rows += vectors.n
            summary.skipped += seen - (0 if vectors is None else vectors.n)
            update(seen)
        out.flush()
    finally:
        close()
        if out is not sys.stdout.buffer:
            out.close()


def _ingest_es(args: argparse.Namespace, summary: Summary) -> None:
    if not args.index:
        raise SystemExit("densewire ingest: an Elasticsearch destination needs --index")
    if args.resume and args.no_ids:
        raise SystemExit("densewire ingest: --resume needs the ids (it skips those the index holds): drop --no-ids")
    try:
        conn = EsConnection(args.to, api_key=args.es_api_key or os.environ.get("DENSEWIRE_ES_API_KEY"),
                            ca_file=args.ca_file)
        target = EsIndex(conn, args.index, args.field)
        mapping = target.field_mapping()
        if mapping is None and not args.create_index:
            raise EsError(f"index {args.index!r} does not exist: pass --create-index to create it with a "
                          f"dense_vector field {args.field!r}", category="not_found", field="--index")
        present = _numeric(target.ids()) if args.resume and mapping is not None else None
        keep = _with_present(_range_filter(args), present)
        update, close = progress_bar(None, args.progress)
        prepared = False
        try:
            for vectors, ids, seen in source_blocks(args, keep):
                if vectors is not None:
                    if not prepared:  # the mapping checked (or the index created) before the first request
                        dims = vectors.d
                        if args.dims is not None and args.dims != dims:
                            raise EsError(f"--dims {args.dims}, but the vectors have {dims}",
                                          category="shape_mismatch", field="--dims")
                        summary.destination = target.prepare(
                            dims=dims, element_type=args.element_type, data_element_type=element_type_of(vectors.dtype),
                            create=args.create_index, similarity=args.similarity, index_type=args.index_type)
                        prepared = True
                    rows = max(1, (8 << 20) // (vectors.d * 6 + 64))  # bulk requests of about 8 MB
                    for chunk in bulk_lines(vectors, index=args.index, field=args.field,
                                            ids=None if args.no_ids else ids,
                                            vector_format=args.vector_format, element_type=target.element_type,
                                            rows_per_chunk=rows):
                        target.bulk(chunk)
                        summary.bytes += len(chunk)
                    summary.rows += vectors.n
                summary.skipped += seen - (0 if vectors is None else vectors.n)
                update(seen)
        finally:
            close()
        if prepared:
            target.refresh()  # searchable when the command returns
        if not summary.destination:
            summary.destination = f"index {args.index!r} (nothing to write)"
    except EsError as exc:
        where = f" (document id {exc.row_id})" if exc.row_id is not None else ""
        raise SystemExit(f"densewire ingest: Elasticsearch: {exc}{where}; the blocks sent before are written "
                         f"whole, rerun with --resume to go on" if summary.rows else
                         f"densewire ingest: Elasticsearch: {exc}{where}") from None
    except ValueError as exc:  # densewire's own checks of the vectors (non-finite, a dtype the field cannot take)
        raise SystemExit(f"densewire ingest: {exc}") from None


def _numeric(ids: set[str]) -> set:
    """Ids as the source's ints where they are integer text (the --first-id/--ids numbering)."""
    return {int(i) if i.lstrip("-").isdigit() else i for i in ids}


def run_ingest(args: argparse.Namespace) -> int:
    summary = Summary()
    start = time.perf_counter()
    args.output = getattr(args, "output", "dense")
    if getattr(args, "vector_format", None) is None and args.output == "dense":
        args.vector_format = "base64"
    if args.output != "dense":
        ingest_multi(args, summary, progress_bar(None, args.progress), text_blocks)
    elif args.to.startswith(("postgresql://", "postgres://")):
        _ingest_postgres(args, summary)
    elif is_es_url(args.to):
        _ingest_es(args, summary)
    elif args.to.startswith("es-bulk:"):
        _ingest_bulk(args, summary, args.to[len("es-bulk:"):] or "-")
    elif is_store(args.to):
        ingest_store(args, summary, source_blocks(args, _range_filter(args)), progress_bar(None, args.progress))
    else:
        raise SystemExit(f"densewire ingest: --to must be postgresql://..., http(s)://HOST:9200 (Elasticsearch), "
                         f"es-bulk:FILE (es-bulk:- for standard output), opensearch+http(s)://..., lancedb:PATH, "
                         f"chroma+http(s)://... or milvus+http(s)://..., not {args.to!r}")
    summary.seconds = time.perf_counter() - start
    if not args.quiet:
        print(summary.line(), file=sys.stderr)
    return 0


def add_ingest_command(sub: Any, add_input_options, load_input) -> None:
    """The ``ingest`` verb, with the CLI's input options and its input loader (format detection)."""
    p = sub.add_parser("ingest", help="load vectors into PostgreSQL/pgvector (binary COPY), Elasticsearch (_bulk "
                                      "with packed vectors) or an Elasticsearch/OpenSearch bulk body",
                       description=__doc__.split("\n\n")[0].replace("``", ""))
    add_input_options(p)
    p.add_argument("--to", required=True, metavar="DEST",
                   help="postgresql://USER@HOST/DB, http(s)://[USER:PASSWORD@]HOST:9200 (Elasticsearch), "
                        "es-bulk:FILE (es-bulk:- for standard output), or a vector store: "
                        "opensearch+http(s)://[USER:PASSWORD@]HOST:9200 (with --index), lancedb:PATH (with --table, "
                        "--column), chroma+http(s)://HOST:8000 (with --collection), milvus+http(s)://HOST:19530 (with "
                        "--collection, --field)")
    p.add_argument("--embed", metavar="URL", help="SOURCE is a text file, one text a line, embedded by the densewire "
                                                  "server at URL")
    p.add_argument("--model", help="--embed: the model to ask for")
    p.add_argument("--output", choices=OUTPUTS, default="dense",
                   help="--embed: dense (a vector a text, default); tokens (the per-token states, /embed_all: into a "
                        "table of one row per id and token position, or an Elasticsearch rank_vectors field); "
                        "sparse (/embed_sparse: into a sparsevec column, or a sparse_vector field keyed by --vocab)")
    p.add_argument("--vocab", metavar="PATH", help="--output sparse into Elasticsearch: the model's tokenizer.json, "
                                                   "vocab.txt or its folder (the sparse_vector's tokens)")
    p.add_argument("--api-key", help="--embed: the server's API key")
    p.add_argument("--batch-size", type=int, default=256, help="--embed: texts per request (default 256)")
    p.add_argument("--concurrency", type=int, default=4, help="--embed: requests in flight (default 4)")
    g = p.add_argument_group("PostgreSQL")
    g.add_argument("--table", help="the table (schema.table allowed)")
    g.add_argument("--column", help="the vector column: vector, halfvec, bit or sparsevec (converted to its type)")
    g.add_argument("--id-column", help="the id column (int8, int4, text or uuid); without it no ids are written")
    g.add_argument("--position-column", default="position", help="--output tokens: the token position column "
                                                                  "(default position)")
    g = p.add_argument_group("Elasticsearch / OpenSearch bulk body")
    g.add_argument("--index", help="the _index of every action")
    g.add_argument("--field", default="embedding", help="the dense_vector / knn_vector field (default embedding)")
    g.add_argument("--vector-format", choices=VECTOR_FORMATS, default=None,
                   help="base64: packed big-endian float32 (Elasticsearch 9.3+, default); floats: JSON numbers "
                        "(older Elasticsearch, OpenSearch; the default of --output tokens' rank_vectors)")
    g.add_argument("--no-ids", action="store_true", help="write no _id (Elasticsearch chooses them)")
    g = p.add_argument_group("Elasticsearch (--to http(s)://HOST:9200)")
    g.add_argument("--create-index", action="store_true",
                   help="create the index (or the field) when missing, with a dense_vector mapping; for "
                        "OpenSearch, LanceDB, Chroma, Milvus: the index, table or collection")
    g.add_argument("--dims", type=int, help="the field's dims (default: the data's; must match it)")
    g.add_argument("--similarity", choices=SIMILARITIES, help="--create-index: the similarity (ES default cosine)")
    g.add_argument("--index-type", choices=INDEX_TYPES, help="--create-index: index_options.type (ES default "
                                                             "bbq_hnsw for 384+ dims, else int8_hnsw)")
    g.add_argument("--element-type", choices=ELEMENT_TYPES,
                   help="the field's element type (default: the existing field's, else from the data: int8 byte, "
                        "binary bit, bfloat16 bfloat16, others float)")
    g.add_argument("--es-api-key", metavar="KEY", help="an Elasticsearch API key (the encoded id:key; or "
                                                        "DENSEWIRE_ES_API_KEY); also sent to an OpenSearch URL")
    g.add_argument("--ca-file", metavar="PEM", help="the CA certificate(s) to verify an https:// Elasticsearch "
                                                    "or OpenSearch node with")
    add_store_options(p)
    g = p.add_argument_group("ids, ranges and resuming")
    g.add_argument("--ids", metavar="FILE", help="one id per line for the source's rows (default: row numbers)")
    g.add_argument("--first-id", type=int, default=0, help="the id of the first row when ids are row numbers "
                                                           "(default 0)")
    g.add_argument("--start-id", type=int, help="write only rows whose id is >= this")
    g.add_argument("--end-id", type=int, help="write only rows whose id is < this")
    g.add_argument("--resume", action="store_true", help="skip the ids the destination holds already")
    g.add_argument("--block-rows", type=int, default=50_000,
                   help="rows per block: one COPY and commit (PostgreSQL), one embedding pass (default 50000)")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="progress bar on standard error (default: when it is a terminal)")
    p.add_argument("--quiet", action="store_true", help="no summary line at the end")
    p.set_defaults(func=run_ingest, load_input=load_input)

