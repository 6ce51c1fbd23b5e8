"""``densewire ingest TEXTS --embed URL --output tokens|sparse --to DEST``: per-token or sparse output of a
densewire (or TEI) server into the stores that index it, through :mod:`densewire.batch`'s sinks.

Each block of ``--block-rows`` texts is embedded with the client's ``embed_tokens`` (TEI's ``/embed_all``)
or ``embed_sparse`` (``/embed_sparse``), ``--batch-size`` texts a request, into an Arrow table of the ids
and the SPEC.md 20.7 column over the answers' buffers, and handed to the sink the Ray and Spark jobs use:

* ``postgresql://...`` with ``--output sparse``: ``--table``, ``--column`` (a ``sparsevec(V)``) and
  ``--id-column`` (unique): :class:`~densewire.batch.PgvectorSink`, rows once by id;
* ``postgresql://...`` with ``--output tokens``: one row per (id, token position), ``--position-column``
  (default ``position``), ``(id, position)`` unique: :class:`~densewire.batch.PgvectorTokensSink`;
* ``http(s)://HOST:9200`` with ``--output sparse``: the ``sparse_vector`` ``--field`` of ``--index``,
  ``{token: weight}`` objects named by ``--vocab`` (the model's tokenizer.json, vocab.txt or its folder);
* ``http(s)://HOST:9200`` with ``--output tokens``: the ``rank_vectors`` ``--field`` (float arrays;
  ``--vector-format base64`` for Base64 inner vectors).

A block is written whole or not at all (PostgreSQL) and by id, so a run interrupted and run again leaves
each id once: there is no ``--resume``.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import pyarrow as pa

from ._batch import BatchError, EsRankVectorsSink, EsSparseVectorSink, PgvectorSink, PgvectorTokensSink
from ._client import Client
from ._ragged import RaggedTensor, SparseVectors
from ._ragged_arrow import ragged_array, sparse_array

__all__ = ["OUTPUTS", "ingest_multi"]

OUTPUTS = ("dense", "tokens", "sparse")


def _sink(args: argparse.Namespace) -> tuple[Any, str]:
    to, output = args.to, args.output
    if to.startswith(("postgresql://", "postgres://")):
        if not args.table or not args.column or not args.id_column:
            raise SystemExit(f"densewire ingest: --output {output} into PostgreSQL needs --table, --column and "
                             f"--id-column")
        if output == "tokens":
            sink = PgvectorTokensSink(to, table=args.table, column=args.column, id_column=args.id_column,
                                      position_column=args.position_column)
            return sink, (f"postgresql table {args.table}: a row per ({args.id_column}, {args.position_column}) "
                          f"with its {args.column}")
        return PgvectorSink(to, table=args.table, column=args.column, id_column=args.id_column), \
            f"postgresql table {args.table}, sparsevec column {args.column}"
    if to.lower().startswith(("http://", "https://")):
        if not args.index:
            raise SystemExit("densewire ingest: an Elasticsearch destination needs --index")
        options = dict(index=args.index, field=args.field, id_column="id", create_index=args.create_index,
                       api_key=args.es_api_key or os.environ.get("DENSEWIRE_ES_API_KEY"), ca_file=args.ca_file)
        if output == "tokens":
            sink = EsRankVectorsSink(to, vector_format=args.vector_format or "floats", **options)
            return sink, f"index {args.index!r}, rank_vectors field {args.field!r}"
        if not args.vocab:
            raise SystemExit("densewire ingest: --output sparse into Elasticsearch needs --vocab (the model's "
                             "tokenizer.json, vocab.txt or its folder: the tokens the sparse_vector is keyed by)")
        return EsSparseVectorSink(to, vocab=args.vocab, **options), \
            f"index {args.index!r}, sparse_vector field {args.field!r}"
    raise SystemExit(f"densewire ingest: --output {output} goes to postgresql://... or http(s)://HOST:9200 "
                     f"(Elasticsearch), not {to!r}")


def _embed(client: Client, texts: list[str], output: str, batch_size: int) -> list[Any]:
    """One answer (a RaggedTensor or SparseVectors) per ``batch_size`` texts."""
    call = client.embed_tokens if output == "tokens" else client.embed_sparse
    return [call(texts[lo:lo + batch_size]) for lo in range(0, len(texts), batch_size)]


def _table(ids: Any, answers: list[Any], column: str, id_column: str) -> pa.Table:
    chunks = [ragged_array(a) if isinstance(a, RaggedTensor) else sparse_array(a) for a in answers]
    meta = {"densewire.dtype": "float32"}
    if answers and isinstance(answers[0], SparseVectors):
        meta["densewire.vocabulary_size"] = str(answers[0].vocab_size)
    typ = chunks[0].type
    id_array = pa.array(ids.tolist() if isinstance(ids, np.ndarray) else list(ids))
    return pa.Table.from_arrays([id_array, pa.chunked_array(chunks, typ)], schema=pa.schema([
        pa.field(id_column, id_array.type), pa.field(column, typ, nullable=False, metadata=meta)]))


def ingest_multi(args: argparse.Namespace, summary: Any, progress: Any,
                 text_blocks: Callable[[argparse.Namespace], Iterable[tuple[list[str], Any]]]) -> None:
    """The texts of ``args.input`` (``text_blocks(args)``: each block's texts and ids), embedded block by
    block, into the sink ``--to`` names."""
    if not args.embed:
        raise SystemExit(f"densewire ingest: --output {args.output} embeds texts on the way: pass --embed URL")
    if args.resume:
        raise SystemExit(f"densewire ingest: --output {args.output} writes by id (a rerun leaves each id once): "
                         f"run the same command again without --resume")
    sink, summary.destination = _sink(args)
    column, id_column = (args.field, "id") if args.to.lower().startswith(("http://", "https://")) else \
        (args.column, args.id_column)
    update, close = progress
    try:
        with Client(args.embed, api_key=args.api_key) as client:
            for k, (block, ids) in enumerate(text_blocks(args)):
                table = _table(ids, _embed(client, block, args.output, args.batch_size), column, id_column)
                sink.write(table, block=f"block {k}")
                summary.rows += len(block)
                summary.bytes += table.nbytes
                update(len(block))
    except BatchError as exc:
        raise SystemExit(f"densewire ingest: {exc}") from None
    finally:
        close()
        sink.close()
