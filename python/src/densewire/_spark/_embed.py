"""``embed``: a DataFrame's text column in, a non-null ``array<float>`` vector column out, through
``mapInArrow``.

Each task runs one :class:`densewire.batch.BatchEmbedder` over the Arrow record batches Spark hands
it (``spark.sql.execution.arrow.maxRecordsPerBatch`` rows each); the embedder appends a
``FixedSizeList<float32>[d]`` column made of the buffers the answers were read into, one chunk a
request. Spark has no fixed-size list, so each chunk goes back to Spark as a ``list<float>`` array
built from two buffers only: the int32 offsets ``0, d, 2d, ...`` (one ``arange``) and the
fixed-size list's own values buffer. No vector becomes a Python object on the way from the socket
to the JVM.

The dimension is asked once on the driver (one text, ``url=``) or read from the engine (``model=``)
unless ``dimensions=`` is given: every task checks its answers against it, so a replica serving
another dimension fails the job with a :class:`~densewire.batch.BatchError` naming the column, the
row and the partition, and the column's metadata carries it to :func:`write_pgvector`'s checks.

``output="tokens"`` makes the per-token states a non-null ``array<array<float>>`` (the outer offsets the
answer's, the inner ``0, d, 2d, ...`` over the same values buffer), ``output="sparse"`` a
``struct<indices: array<int>, values: array<float>>`` (Spark has no unsigned int: the uint32 indices are
read as int32, which holds every index of a vocabulary under 2^31), the hidden size or the vocabulary
size in the field's ``densewire.dimensions`` metadata.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql import types as T

from .._batch import BatchEmbedder, BatchError
from .._batch._embedder import DEFAULT_TIMEOUT
from ._types import DIMENSIONS_KEY, DTYPE_KEY, OUTPUT_KEY, VOCABULARY_KEY, check_id_column, check_new_column, check_text_column, element_type

__all__ = ["embed", "spark_vectors", "spark_tokens", "spark_sparse"]

_MAX_VALUES = 2**31 - 1  # a Spark array column's offsets are int32


def spark_vectors(column: pa.FixedSizeListArray, *, max_values: int = _MAX_VALUES) -> list[pa.ListArray]:
    """A ``FixedSizeList<T>[d]`` array as ``list<T>`` arrays over the same values buffer (offsets
    ``0, d, 2d, ...``; non-null lists of non-null values), cut so that no piece has more than
    ``max_values`` values (int32 offsets)."""
    d = column.type.list_size
    inner = column.type.value_type
    typ = pa.list_(pa.field("element", inner, nullable=False))
    values = column.flatten()  # the values of these rows: a zero-copy slice of the child
    n = len(column)
    step = n if d == 0 else max(1, max_values // d)
    out = []
    for lo in range(0, n, step) if n else [0]:
        k = min(step, n - lo)
        offsets = np.arange(0, (k + 1) * d, d, dtype=np.int32) if d else np.zeros(k + 1, np.int32)
        out.append(pa.ListArray.from_buffers(typ, k, [None, pa.py_buffer(offsets)],
                                             children=[values.slice(lo * d, k * d)]))
    return out


def spark_tokens(column: pa.ListArray) -> list[pa.ListArray]:
    """A ``List<FixedSizeList<T>[d]>`` array as ``list<list<T>>`` over the same buffers (its own outer
    offsets, inner offsets ``0, d, 2d, ...``)."""
    inner = column.values.slice(int(column.offsets[0].as_py()), int(column.offsets[-1].as_py())
                                - int(column.offsets[0].as_py()))
    (rows,) = spark_vectors(inner)
    outer = np.asarray(column.offsets.to_numpy(), np.int32)
    outer = outer - outer[0]
    typ = pa.list_(pa.field("element", rows.type, nullable=False))
    return [pa.ListArray.from_buffers(typ, len(column), [None, pa.py_buffer(outer)], children=[rows])]


def spark_sparse(column: pa.StructArray) -> list[pa.StructArray]:
    """A ``Struct<indices: List<UInt32>, values: List<T>>`` array with the indices as int32 (the same
    buffer) and Spark's list field names."""
    idx, val = column.flatten()
    ints = idx.values
    ints = pa.Array.from_buffers(pa.int32(), len(ints), [None, ints.buffers()[1]], offset=ints.offset)
    idx_type = pa.list_(pa.field("element", pa.int32(), nullable=False))
    val_type = pa.list_(pa.field("element", val.type.value_type, nullable=False))
    idx = pa.ListArray.from_buffers(idx_type, len(idx), [None, idx.buffers()[1]], children=[ints], offset=idx.offset)
    val = pa.ListArray.from_buffers(val_type, len(val), [None, val.buffers()[1]], children=[val.values],
                                    offset=val.offset)
    return [pa.StructArray.from_arrays([idx, val], fields=[pa.field("indices", idx_type, nullable=False),
                                                             pa.field("values", val_type, nullable=False)])]


_TO_SPARK = {"dense": spark_vectors, "tokens": spark_tokens, "sparse": spark_sparse}


def _spark_batches(table: pa.Table, output_column: str, output: str = "dense") -> Iterator[pa.RecordBatch]:
    """The record batches of an embedded table with its output column in Spark's types: one batch a
    chunk of the column (the other columns sliced to match, no copy)."""
    index = table.schema.get_field_index(output_column)
    convert = _TO_SPARK[output]
    for batch in table.to_batches():
        row0 = 0
        for piece in convert(batch.column(index)):
            rows = batch.slice(row0, len(piece))
            row0 += len(piece)
            columns = list(rows.columns)
            columns[index] = piece
            yield pa.RecordBatch.from_arrays(columns, names=rows.schema.names)


class _EmbedPartitions:
    """The function ``mapInArrow`` runs in each task: one embedder per task, its connections closed at
    the end of the partition. ``block`` in errors: the partition, the stage and the attempt."""

    def __init__(self, options: dict[str, Any], dimensions: int | None) -> None:
        self.options, self.dimensions = options, dimensions

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        ctx = TaskContext.get()
        where = "partition ?" if ctx is None else (f"partition {ctx.partitionId()} (stage {ctx.stageId()}, "
                                                  f"attempt {ctx.attemptNumber()})")
        output = self.options["output_column"]
        with BatchEmbedder(**self.options) as embedder:
            if self.dimensions is not None:
                embedder.dimensions = self.dimensions
            for i, batch in enumerate(batches):
                out = embedder(pa.Table.from_batches([batch]), block=f"{where}, batch {i}")
                yield from _spark_batches(out, output, self.options.get("output", "dense"))


def embed(df: Any, *, url: str | Sequence[str] | None = None, model: str | None = None, text_column: str = "text",
          output_column: str = "embedding", dtype: str = "float32", batch_size: int = 256, max_in_flight: int = 4,
          retries: int = 2, timeout: float | None = DEFAULT_TIMEOUT, threads: int | None = None,
          api_key: str | None = None, id_column: str | None = None, dimensions: int | None = None,
          output: str = "dense", vocab_size: int | None = None) -> Any:
    """``df`` with ``output_column`` appended: the vectors of ``text_column``, a non-null ``array<float>``
    (``array<double>`` for ``dtype="float64"``, ``array<tinyint>`` for ``"int8"``) of non-null values.

    ``url=``: one ``densewire serve`` (or a load balancer in front of a fleet) or a list of replicas;
    each task sends ``batch_size`` texts a request, up to ``max_in_flight`` at once, spread across the
    replicas, a failed request retried ``retries`` times on another. ``model=``: the engine in each
    executor's Python worker (loaded once per worker process), with ``threads`` threads (default
    ``spark.task.cpus``). ``dimensions``: the vectors' dimension if known (else asked on the driver:
    one text to the servers, or the engine loaded there). ``id_column`` names the ids errors quote.
    ``output``: ``"dense"``, ``"tokens"`` (``array<array<float>>``) or ``"sparse"`` (``struct<indices:
    array<int>, values: array<float>>``), as :class:`densewire.batch.BatchEmbedder`'s; ``vocab_size`` its
    vocabulary size for servers answering TEI's JSON.

    Lazy, like any transformation: the schema is checked now (a missing or non-string text column, an
    output column that exists, a dtype Spark cannot hold raise :class:`~densewire.batch.BatchError`
    here), the rows when an action runs (a null or empty text fails its task, naming the column, the
    row, its id and the partition).
    """
    check_text_column(df, text_column)
    check_new_column(df, output_column)
    if id_column is not None:
        check_id_column(df, id_column)
    element = element_type(dtype)
    if threads is None and model is not None and url is None:
        threads = max(1, int(df.sparkSession.conf.get("spark.task.cpus", "1") or 1))
    options = dict(url=url, model=model, text_column=text_column, output_column=output_column, dtype=dtype,
                   batch_size=batch_size, max_in_flight=max_in_flight, retries=retries, timeout=timeout,
                   threads=threads, api_key=api_key, id_column=id_column, output=output, vocab_size=vocab_size)
    BatchEmbedder.check_output(output, dtype, output_column)
    if dimensions is None:
        dimensions = _ask_dimensions(options)
    elif dimensions < 1:
        raise BatchError(f"dimensions must be at least 1, got {dimensions}")
    if output == "tokens":
        typ: Any = T.ArrayType(T.ArrayType(element, containsNull=False), containsNull=False)
    elif output == "sparse":
        if dimensions >= 1 << 31:
            raise BatchError(f"a vocabulary of {dimensions} tokens has indices Spark's int cannot hold",
                             column=output_column)
        typ = T.StructType([T.StructField("indices", T.ArrayType(T.IntegerType(), containsNull=False), False),
                            T.StructField("values", T.ArrayType(element, containsNull=False), False)])
    else:
        typ = T.ArrayType(element, containsNull=False)
    metadata: dict[str, Any] = {DIMENSIONS_KEY: dimensions, DTYPE_KEY: dtype}
    if output != "dense":  # a dense column's metadata stays what it was
        metadata[OUTPUT_KEY] = output
    if output == "sparse":
        metadata[VOCABULARY_KEY] = dimensions
    field = T.StructField(output_column, typ, nullable=False, metadata=metadata)
    schema = T.StructType([*df.schema.fields, field])
    return df.mapInArrow(_EmbedPartitions(options, dimensions), schema)


def _ask_dimensions(options: dict[str, Any]) -> int:
    """The dimension of the vectors: the engine's (``model=``), or the servers' answer to one text."""
    with BatchEmbedder(**{**options, "id_column": None}) as embedder:
        if embedder.dimensions is None:
            embedder(pa.table({options["text_column"]: ["densewire"]}), block="the driver's dimension probe")
        assert embedder.dimensions is not None
        return embedder.dimensions
