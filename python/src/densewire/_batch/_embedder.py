"""``BatchEmbedder``: an Arrow table or record batch in, the same with a vector column appended.

``output`` says which column: ``"dense"`` (the default) one pooled vector a row; ``"tokens"`` the
model's per-token states of each row (TEI's ``/embed_all``, the multi-vectors of a ColBERT model), a
``List<FixedSizeList<float32>[d]>`` column (SPEC.md 20.7), each request's ragged answer one chunk whose
values are the buffer the body was read into (the outer offsets are the answer's uint32 offsets as
Arrow's int32: one small array per request, the only copy); ``"sparse"`` a learned sparse vector a row
(SPLADE: TEI's ``/embed_sparse``), ``Struct<indices: List<UInt32>, values: List<float32>>`` over the
answer's index and value buffers, the vocabulary size in the field's ``densewire.vocabulary_size``
metadata. The names are the client's methods' (``embed_tokens``, ``embed_sparse``) and TEI's routes'.

The column is ``FixedSizeList<dtype>[d]``, non-null, its values buffer the one the vectors arrived
in: with ``url=`` each request's answer is read into one buffer and decoded as a view (raw), which
becomes one chunk of the column with no copy and no per-row object (a record batch, which holds one
array a column, gets the chunks joined once); with ``model=`` the engine's own output array is the
buffer. bfloat16 vectors are their uint16 bits, ``binary`` the packed bytes, as on the wire.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from .._client._loop import LoopThread
from .._convert import convert
from .._ragged import RaggedTensor, SparseVectors
from .._ragged_arrow import ragged_array, sparse_array
from .._tensor import DTYPES
from ._columns import texts_of, value_type
from ._engine import engine
from ._errors import BatchError
from ._fleet import Fleet

__all__ = ["BatchEmbedder"]

DEFAULT_TIMEOUT = 120.0
#: what a BatchEmbedder appends: one vector a row, the per-token matrix of a row, a sparse vector a row
OUTPUTS = ("dense", "tokens", "sparse")


class BatchEmbedder:
    """Embed the ``text_column`` of Arrow tables or record batches, by a fleet of servers (``url=``, one
    URL or a list) or by the engine in this process (``model=``).

    ``batch_size`` texts go in one request (or one engine call); with ``url=`` up to ``max_in_flight``
    requests are in flight at once from this embedder, spread across the replicas, each retried up to
    ``retries`` times on another replica when one fails (see :class:`Fleet`); ``timeout`` bounds a
    request and the wait for a replica to come back. ``model`` with ``url`` is the model id sent to
    the servers. ``threads`` sizes the in-process engine (default: the worker's CPUs). ``id_column``
    names the ids errors quote. ``output`` is ``"dense"``, ``"tokens"`` or ``"sparse"`` (see the module;
    the per-token and sparse outputs are float32). ``vocab_size``: the sparse model's vocabulary size, for
    servers answering TEI's JSON (``[[{"index", "value"}]]`` states none; densewire's binary answers do,
    and are checked against it). :attr:`dimensions` is known once the model is loaded (``model=``) or
    the first answer came (``url=``); an answer of another dimension later is a :class:`BatchError`.
    """

    def __init__(self, *, url: str | Sequence[str] | None = None, model: str | None = None,
                 text_column: str = "text", output_column: str = "embedding", dtype: str = "float32",
                 batch_size: int = 256, max_in_flight: int = 4, retries: int = 2,
                 timeout: float | None = DEFAULT_TIMEOUT, threads: int | None = None, api_key: str | None = None,
                 id_column: str | None = None, output: str = "dense", vocab_size: int | None = None) -> None:
        self.check_output(output, dtype, output_column)
        if vocab_size is not None and (output != "sparse" or vocab_size < 1):
            raise BatchError(f"vocab_size (a positive vocabulary size) is for output='sparse', got {vocab_size!r} "
                             f"with output={output!r}", column=output_column)
        if url is None and model is None:
            raise BatchError("give url= (one densewire server or a list of replicas) or model= (an engine to run "
                             "in this process)", category="invalid_field")
        if dtype not in DTYPES:
            raise BatchError(f"dtype must be one of {', '.join(DTYPES)}, not {dtype!r}")
        if batch_size < 1 or max_in_flight < 1 or retries < 0:
            raise BatchError(f"batch_size and max_in_flight must be at least 1 and retries at least 0, got "
                             f"batch_size={batch_size}, max_in_flight={max_in_flight}, retries={retries}")
        self.urls = None if url is None else ([url] if isinstance(url, str) else list(url))
        self.model, self.text_column, self.output_column, self.dtype = model, text_column, output_column, dtype
        self.batch_size, self.max_in_flight, self.retries, self.timeout = batch_size, max_in_flight, retries, timeout
        self.threads, self.api_key, self.id_column, self.output = threads, api_key, id_column, output
        self.vocab_size = vocab_size
        #: the vector width (dense), the hidden size (tokens) or the vocabulary size (sparse)
        self.dimensions: int | None = vocab_size
        self._fleet: Fleet | None = None
        self._loop: LoopThread | None = None
        self._engine = None
        if self.urls is None:
            self._engine = engine(model, threads)  # type: ignore[arg-type]
            self.dimensions = self._engine_width(output_column)
            if vocab_size is not None and vocab_size != self.dimensions:
                raise BatchError(f"vocab_size={vocab_size}, but the model's vocabulary has {self.dimensions} tokens",
                                 category="shape_mismatch", column=output_column)

    @staticmethod
    def check_output(output: str, dtype: str, column: str | None = None) -> None:
        """A BatchError unless ``output`` is one of :data:`OUTPUTS` in a dtype it comes in."""
        if output not in OUTPUTS:
            raise BatchError(f"output must be one of {', '.join(OUTPUTS)}, not {output!r}", column=column)
        if output != "dense" and dtype != "float32":
            raise BatchError(f"{output} output is float32 (the servers' per-token and sparse answers), not {dtype}",
                             column=column)

    # pickled by an engine's driver and rebuilt in each worker: the settings travel, not the connections
    def __getstate__(self) -> dict[str, Any]:
        return {"url": self.urls, "model": self.model, "text_column": self.text_column,
                "output_column": self.output_column, "dtype": self.dtype, "batch_size": self.batch_size,
                "max_in_flight": self.max_in_flight, "retries": self.retries, "timeout": self.timeout,
                "threads": self.threads, "api_key": self.api_key, "id_column": self.id_column, "output": self.output,
                "vocab_size": self.vocab_size}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(**state)  # type: ignore[misc]

    def __enter__(self) -> "BatchEmbedder":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connections (the in-process engine stays loaded for the next embedder)."""
        if self._loop is not None:
            fleet, self._fleet = self._fleet, None
            self._loop.close(fleet.close() if fleet is not None else None)
            self._loop = None

    @property
    def replicas(self) -> list[Any]:
        """The fleet's replicas (url=), with their state: requests sent, in flight, down and why."""
        return [] if self._fleet is None else list(self._fleet.replicas)

    # ---------------------------------------------------------------------------------- embedding
    def __call__(self, data: pa.Table | pa.RecordBatch, *, block: str | None = None) -> pa.Table | pa.RecordBatch:
        """``data`` with :attr:`output_column` appended (``block`` names the block in errors)."""
        if not isinstance(data, (pa.Table, pa.RecordBatch)):
            raise BatchError(f"a BatchEmbedder takes a pyarrow Table or RecordBatch, not {type(data).__name__}",
                             block=block)
        if self.output_column in data.schema.names:
            raise BatchError("the output column is already in the data", column=self.output_column, block=block)
        texts = texts_of(data, self.text_column, id_column=self.id_column, block=block)
        spans = [(lo, min(lo + self.batch_size, len(texts))) for lo in range(0, len(texts), self.batch_size)]
        if self._engine is not None:
            pieces = [self._embed_here(texts[lo:hi]) for lo, hi in spans]
        else:
            pieces = self._run(self._embed_remote(texts, spans, block))
        chunks = [self._chunk(a) for a in pieces]
        if not chunks:  # no rows: the dimension is known from the model or an earlier block, else 0
            chunks = [self._chunk(self._empty())]
        typ = chunks[0].type
        metadata = {"densewire.dtype": self.dtype}
        if self.output == "sparse":
            metadata["densewire.vocabulary_size"] = str(self.dimensions or 0)
        field = pa.field(self.output_column, typ, nullable=False, metadata=metadata)
        if isinstance(data, pa.Table):
            return data.append_column(field, pa.chunked_array(chunks, typ))
        column = chunks[0] if len(chunks) == 1 else pa.concat_arrays(chunks)
        return data.append_column(field, column)

    def _empty(self) -> Any:
        d = self.dimensions or 0
        if self.output == "tokens":
            return RaggedTensor.from_arrays([], "float32", d)
        if self.output == "sparse":
            return SparseVectors(np.empty(0, np.uint32), np.empty(0, np.float32), [0], max(d, 1))
        return np.empty((0, self._width()), value_type(self.dtype).to_pandas_dtype())

    def _engine_width(self, column: str) -> int:
        """The engine's vector width, hidden size (tokens) or vocabulary size (sparse); a BatchError when the
        model has no such output."""
        e = self._engine
        if self.output == "dense":
            return e.dimensions  # type: ignore[union-attr]
        if self.output == "tokens":
            if not hasattr(e, "embed_token_states"):
                raise BatchError(f"the model {self.model} ({type(e).__name__}) gives no per-token output; use a "
                                 f"transformer model (minilm, a folder or a Hugging Face id)", column=column)
            return int(e.model.hidden)  # type: ignore[union-attr]
        fn = getattr(e, "embed_sparse", None)
        if fn is None:
            raise BatchError(f"the model {self.model} ({type(e).__name__}) has no sparse head; use a SPLADE model "
                             f"(a BertForMaskedLM checkpoint)", column=column)
        return int(e.sparse_vocab_size)  # type: ignore[union-attr]

    def _width(self) -> int:
        d = self.dimensions or 0
        return (d + 7) // 8 if self.dtype == "binary" else d

    def _embed_here(self, texts: list[str]) -> Any:
        e = self._engine
        if self.output == "tokens":
            rows, lengths = e.embed_token_states(texts)  # type: ignore[union-attr]
            return RaggedTensor.from_lengths(rows, lengths)
        if self.output == "sparse":  # the backends' (indices, values, nnz), as the server's /embed_sparse reads it
            indices, values, nnz = e.embed_sparse(texts)  # type: ignore[union-attr]
            return SparseVectors(indices, values, np.concatenate([[0], np.cumsum(nnz, dtype=np.int64)]),
                                 self.dimensions or 1)
        vectors = e.embed(texts)  # type: ignore[union-attr]
        return vectors if self.dtype == "float32" else convert(vectors, self.dtype).array

    def _run(self, coro: Any) -> Any:
        if self._loop is None:
            self._loop = LoopThread("densewire-batch")
        return self._loop.run(coro)

    async def _embed_remote(self, texts: list[str], spans: list[tuple[int, int]], block: str | None) -> list[Any]:
        if self._fleet is None:
            self._fleet = Fleet(self.urls or [], model=self.model, dtype=self.dtype, timeout=self.timeout,
                                retries=self.retries, api_key=self.api_key, max_in_flight=self.max_in_flight)
        fleet = self._fleet
        gate = asyncio.Semaphore(self.max_in_flight)

        async def one(lo: int, hi: int) -> Any:
            async with gate:
                if self.output == "tokens":
                    t = await fleet.embed_tokens(texts[lo:hi], block=block, row0=lo)
                elif self.output == "sparse":
                    t = await fleet.embed_sparse(texts[lo:hi], block=block, row0=lo, vocab_size=self.vocab_size)
                else:
                    t = await fleet.embed(texts[lo:hi], block=block, row0=lo)
            if t.dtype != self.dtype:
                raise BatchError(f"asked for {self.dtype} vectors, a server answered {t.dtype}",
                                 category="invalid_field", column=self.output_column, row=lo, block=block)
            if t.n != hi - lo:
                raise BatchError(f"sent {hi - lo} texts, a server answered {t.n} vectors", category="shape_mismatch",
                                 column=self.output_column, row=lo, block=block)
            self._check_dimensions(t.vocab_size if self.output == "sparse" else t.d, lo, block)
            return t if self.output != "dense" else t.array

        tasks = [asyncio.ensure_future(one(lo, hi)) for lo, hi in spans]
        try:
            return await asyncio.gather(*tasks)
        finally:
            for task in tasks:  # the first error ends the block: do not leave the other requests running
                task.cancel()

    def _check_dimensions(self, d: int, row: int, block: str | None) -> None:
        if self.dimensions is None:
            self.dimensions = d
        elif d != self.dimensions:
            what = {"dense": "vectors", "tokens": "token states", "sparse": "sparse vectors"}[self.output]
            hint = "; TEI's JSON states no vocabulary size (one past the largest index is assumed): pass " \
                   "vocab_size=" if self.output == "sparse" and self.vocab_size is None else ""
            raise BatchError(f"a server answered {d}-dimensional {what} in a job of {self.dimensions}-dimensional "
                             f"ones{hint}", category="shape_mismatch", column=self.output_column, row=row, block=block)

    def _chunk(self, a: Any) -> pa.Array:
        """One request's answer as an Arrow array over its own buffers: a ``(k, w)`` array as
        ``FixedSizeList<dtype>[w]``, a RaggedTensor or SparseVectors as SPEC.md 20.7's column."""
        if isinstance(a, RaggedTensor):
            return ragged_array(a)
        if isinstance(a, SparseVectors):
            return sparse_array(a)
        a = np.ascontiguousarray(a)  # the decoders' views are contiguous: no copy
        k, w = a.shape
        inner = value_type(self.dtype)
        values = pa.Array.from_buffers(inner, k * w, [None, pa.py_buffer(a)])
        typ = pa.list_(pa.field("item", inner, nullable=False), w)
        if w:
            return pa.FixedSizeListArray.from_arrays(values, type=typ)
        return pa.FixedSizeListArray.from_buffers(typ, k, [None], children=[values])  # from_arrays divides by w
