"""``densewire ingest --to`` into the vector stores the batch sinks write: OpenSearch, LanceDB, Chroma, Milvus.

Each block of the source becomes an Arrow table (the ids and a ``FixedSizeList`` vector column over the
block's own buffer) handed to the store's :mod:`densewire.batch` sink, the one Ray and Spark jobs use:
rows are written by id (replaced or upserted), so a run that is interrupted and run again leaves each id
once. The destinations, each named as the store's own tools name it:

* ``opensearch+http(s)://[USER:PASSWORD@]HOST:9200``: ``--index`` (a k-NN index; ``--create-index``
  makes it with a lucene HNSW ``knn_vector`` of the data's dimension) and ``--field``; basic auth from
  the URL, ``--ca-file`` for TLS and ``--es-api-key`` as for Elasticsearch, on the index check and the
  ``_bulk`` requests alike;
* ``lancedb:PATH`` (a folder, or ``lancedb:s3://bucket/db``): ``--table`` and ``--column`` (a fixed-size
  list; ``--create-index`` makes the table), rows merged by id;
* ``chroma+http(s)://HOST:8000``: ``--collection`` (``--create-index`` makes it, ``--space-type`` l2,
  cosine or ip), embeddings upserted as Base64 little-endian float32;
* ``milvus+http(s)://HOST:19530`` (pymilvus' ``uri`` after the ``milvus+``): ``--collection`` and
  ``--field`` (``--create-index`` makes it: the ids its INT64 primary key, an AUTOINDEX with
  ``--space-type`` L2, IP or COSINE), upserted with float32 / float16 columns as binary.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterable
from typing import Any

import numpy as np
import pyarrow as pa

from ._batch import BatchError, ChromaSink, LanceDBSink, MilvusSink, OpenSearchSink
from ._stores._esbulk import float32_rows
from ._tensor import Tensor

__all__ = ["STORE_SCHEMES", "is_store", "add_store_options", "ingest_store"]

STORE_SCHEMES = ("opensearch+http://", "opensearch+https://", "lancedb:", "chroma+http://", "chroma+https://",
                 "milvus+http://", "milvus+https://")


def is_store(to: str) -> bool:
    return to.lower().startswith(STORE_SCHEMES)


def add_store_options(p: argparse.ArgumentParser) -> None:
    p.epilog = ("Vector stores: opensearch+http(s)://[USER:PASSWORD@]HOST:9200 --index NAME [--field F] (a k-NN index; "
                "JSON float arrays); lancedb:PATH --table NAME --column C (the Arrow vectors as they are, merged by "
                "id); chroma+http(s)://HOST:8000 --collection NAME (Base64 little-endian float32 upserts); "
                "milvus+http(s)://HOST:19530 --collection NAME [--field F] (binary float32/float16 upserts). "
                "Each writes by id (a rerun replaces), checks the target's dimension first, and makes a missing "
                "target with --create-index.")
    g = p.add_argument_group("OpenSearch, LanceDB, Chroma, Milvus (--create-index makes the index, table or "
                             "collection with the data's dimension)")
    g.add_argument("--space-type", default="l2", help="--create-index: the distance, as the store names it "
                   "(OpenSearch l2, cosinesimil, innerproduct; Chroma l2, cosine, ip; Milvus L2, COSINE, IP; "
                   "default l2 / L2)")
    g.add_argument("--collection", help="the Chroma or Milvus collection")


def store_sink(args: argparse.Namespace) -> tuple[Any, str]:
    """The sink ``--to`` names, and the destination for the summary line."""
    to = args.to
    low = to.lower()
    if low.startswith(("opensearch+http://", "opensearch+https://")):
        if not args.index:
            raise SystemExit("densewire ingest: an OpenSearch destination needs --index")
        url = to[len("opensearch+"):]
        sink = OpenSearchSink(url, index=args.index, field=args.field, id_column="id", create_index=args.create_index,
                              space_type=args.space_type, ca_file=args.ca_file,
                              api_key=args.es_api_key or os.environ.get("DENSEWIRE_ES_API_KEY"))
        return sink, f"OpenSearch {url.split('@')[-1]} index {args.index}, field {args.field} (float arrays)"
    if low.startswith("lancedb:"):
        if not args.table or not args.column:
            raise SystemExit("densewire ingest: a LanceDB destination needs --table and --column")
        uri = to[len("lancedb:"):]
        sink = LanceDBSink(uri, table=args.table, column=args.column, id_column="id", create_table=args.create_index)
        return sink, f"LanceDB {uri} table {args.table}, column {args.column} (Arrow)"
    if low.startswith(("chroma+http://", "chroma+https://")):
        if not args.collection:
            raise SystemExit("densewire ingest: a Chroma destination needs --collection")
        url = to[len("chroma+"):]
        space = "l2" if args.space_type == "l2" else args.space_type
        sink = ChromaSink(url, collection=args.collection, column="embedding", id_column="id",
                          create_collection=args.create_index, space=space)
        return sink, f"Chroma {url.split('@')[-1]} collection {args.collection} (Base64 float32)"
    if low.startswith(("milvus+http://", "milvus+https://")):
        if not args.collection:
            raise SystemExit("densewire ingest: a Milvus destination needs --collection")
        uri = to[len("milvus+"):]
        sink = MilvusSink(uri, collection=args.collection, column=args.field, id_column="id",
                          create_collection=args.create_index, metric=args.space_type.upper())
        return sink, f"Milvus {uri} collection {args.collection}, field {args.field} (binary vectors)"
    raise SystemExit(f"densewire ingest: no store for {to!r}")


def _column(args: argparse.Namespace) -> str:
    low = args.to.lower()
    return args.column if low.startswith("lancedb:") else "embedding" if low.startswith("chroma+") else args.field


def _table(vectors: Tensor, ids: Any, field: str) -> pa.Table:
    a = np.asarray(vectors.array)
    if vectors.dtype not in ("float32", "float16"):
        a = float32_rows(vectors, field)
    values = pa.array(np.ascontiguousarray(a).reshape(-1))
    return pa.table({"id": pa.array(ids), field: pa.FixedSizeListArray.from_arrays(values, vectors.d)})


def ingest_store(args: argparse.Namespace, summary: Any, blocks: Iterable[tuple[Tensor | None, Any, int]],
                 progress: Any) -> None:
    """``blocks`` (source_blocks' vectors, ids, rows seen) into the store ``--to`` names."""
    if args.resume:
        raise SystemExit("densewire ingest: --resume is for postgresql:// and es-bulk:; a store destination "
                         "replaces rows by id, so run the same command again without it")
    sink, summary.destination = store_sink(args)
    update, close = progress
    try:
        for k, (vectors, ids, seen) in enumerate(blocks):
            if vectors is not None:
                table = _table(vectors, ids, _column(args))
                sink.write(table, block=f"block {k}")
                summary.rows += vectors.n
                summary.bytes += table.nbytes
            summary.skipped += seen - (0 if vectors is None else vectors.n)
            update(seen)
    except BatchError as exc:
        raise SystemExit(f"densewire ingest: {exc}") from None
    finally:
        close()
        getattr(sink, "close", lambda: None)()
