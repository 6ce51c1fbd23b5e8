"""Elasticsearch sinks of per-token and sparse output: ``rank_vectors`` and ``sparse_vector`` fields,
written by ``_bulk`` with each row's id as ``_id`` (a block written again replaces its documents).

* :class:`EsSparseVectorSink`: a sparse column (``BatchEmbedder(output="sparse")``, SPLADE) into a
  ``sparse_vector`` field, each row a ``{token: weight}`` object. The tokens are the model's vocabulary
  entries of the indices, from ``vocab``: a ``tokenizer.json`` (the Hugging Face layout every model
  folder has), a ``vocab.txt`` (one token a line, BERT's), a folder holding either, or a sequence of
  strings; its size must be the column's vocabulary size. (A server's ``/tokenize`` goes from text to
  ids, and TEI's ``/decode`` joins ids into text, merging WordPieces: neither gives the token of one id.)
  Elasticsearch 9.5.3 refuses a weight that is not a positive normal float (``featureValue must be a
  positive normal float``): zero weights are left out, as pgvector's sparsevec leaves them out, and a
  negative or non-finite one is an error naming the row before anything is sent. Feature names with
  dots (``"."``, ``"a.b"``) are taken as they are. The bodies carry each weight's float32 exactly (its
  shortest round-trip text); the node indexes it as Lucene's FeatureField does, keeping the float's top
  17 bits (8 of the mantissa: what ``_source`` with ``exclude_vectors: false`` answers since 9.2).
* :class:`EsRankVectorsSink`: a per-token column (``output="tokens"``, ColBERT multi-vectors) into a
  ``rank_vectors`` field (``dims`` the token vectors' width, element type float), each row an array of
  its token vectors, read by ``maxSimDotProduct`` / ``maxSimCosine`` script scores. ``vector_format``:
  ``"floats"`` (the default) writes each inner vector as a JSON array of float32 values (shortest
  round-trip text: the stored floats are the column's bit for bit); ``"base64"`` writes each one as the
  Base64 of its big-endian float32 bytes, the form ``dense_vector`` takes since 9.1. The rank-vectors
  mapper (x-pack's ``rank-vectors`` module, Enterprise or trial license) parses each inner vector with
  dense_vector's element parser, but the Elasticsearch 9.5.3 the tests run (the integ-test distribution,
  the one Maven Central carries) has no ``rank_vectors`` type at all (``The mapper type [rank_vectors]
  declared on field [...] does not exist``): the sink says so before a document is sent, and Base64 inner
  vectors stay unverified against a node, hence not the default.

The index is checked before the first request of each worker (the field of the right type; for
rank_vectors its dims), or created with ``create_index=True``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pybase64

from .._stores._es import EsConnection, EsError, EsIndex, _error_type, _reason
from ._columns import ids_of, sparse_chunks, token_chunks
from ._errors import BatchError
from ._essink import _pieces

__all__ = ["EsSparseVectorSink", "EsRankVectorsSink", "load_vocabulary"]

_MIN_NORMAL = float(np.finfo(np.float32).tiny)


def load_vocabulary(vocab: str | Path | Sequence[str]) -> list[str]:
    """The tokens of a vocabulary by id: a list of strings as given, or read from a ``tokenizer.json``, a
    ``vocab.txt`` or a folder holding one of them (tokenizer.json first)."""
    if not isinstance(vocab, (str, Path)):
        tokens = list(vocab)
        if not all(isinstance(t, str) for t in tokens):
            raise BatchError("a vocabulary is a sequence of strings (the token of each id)", column=None)
        return tokens
    path = Path(vocab)
    if path.is_dir():
        found = next((path / n for n in ("tokenizer.json", "vocab.txt") if (path / n).is_file()), None)
        if found is None:
            raise BatchError(f"{path} holds no tokenizer.json or vocab.txt", column=None)
        path = found
    if not path.is_file():
        raise BatchError(f"no vocabulary file {path}", column=None)
    if path.suffix == ".json":
        return _tokenizer_json_tokens(path)
    return path.read_text(encoding="utf-8").splitlines()


def _tokenizer_json_tokens(path: Path) -> list[str]:
    """The token of each id of a Hugging Face ``tokenizer.json``: its model's vocabulary (WordPiece and BPE: a
    ``{token: id}`` object; Unigram: a list of ``[token, score]``) and its added tokens, read as JSON (no
    tokenizers library needed on a Ray or Spark worker)."""
    try:
        doc = orjson.loads(path.read_bytes())
        vocab = doc["model"]["vocab"]
        ids = dict(vocab) if isinstance(vocab, dict) else {entry[0]: i for i, entry in enumerate(vocab)}
        for added in doc.get("added_tokens") or []:
            ids[added["content"]] = added["id"]
    except (orjson.JSONDecodeError, KeyError, TypeError, IndexError) as exc:
        raise BatchError(f"{path} is not a tokenizer.json with a model vocabulary: {exc}", column=None) from None
    tokens: list[str | None] = [None] * (max(ids.values()) + 1 if ids else 0)
    for token, i in ids.items():
        tokens[int(i)] = token
    missing = [i for i, t in enumerate(tokens) if t is None]
    if missing:
        raise BatchError(f"{path} names no token for id {missing[0]} (of {len(tokens)})", column=None)
    return tokens  # type: ignore[return-value]


def _properties(field: str, prop: dict) -> dict:
    for part in reversed(field.split(".")[1:]):
        prop = {"properties": {part: prop}}
    return {field.split(".")[0]: prop}


class _EsFieldSink:
    """What both sinks share: the connection settings, the mapping check (once per process) and the
    ``_bulk`` requests of a block's documents."""

    kind = ""

    def __init__(self, url: str, *, index: str, field: str, id_column: str, create_index: bool = False,
                 max_bytes: int = 32 << 20, timeout: float = 120.0, retries: int = 2, api_key: str | None = None,
                 ca_file: str | None = None) -> None:
        if not str(url).lower().startswith(("http://", "https://")):
            raise BatchError(f"an Elasticsearch URL is http(s)://HOST:PORT, not {url!r}", column=None)
        self.url, self.index, self.field, self.id_column = str(url), index, field, id_column
        self.create_index, self.max_bytes, self.timeout, self.retries = create_index, max_bytes, timeout, retries
        self.api_key, self.ca_file = api_key, ca_file
        self._target: EsIndex | None = None

    def __getstate__(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "_target"} | {"_target": None}

    def _prop(self, dims: int | None) -> dict:
        raise NotImplementedError

    def _check(self, mapping: dict, dims: int | None) -> None:
        where = f"field {self.field!r} of index {self.index!r}"
        if mapping.get("type") != self.kind:
            raise BatchError(f"{where} is a {mapping.get('type', 'object')}, not a {self.kind}", column=self.field)

    def check(self, dims: int | None = None) -> EsIndex:
        """The index, its field checked (or created, ``create_index``) once per process."""
        if self._target is not None:
            return self._target
        try:
            conn = EsConnection(self.url, api_key=self.api_key, ca_file=self.ca_file, timeout=self.timeout,
                                retries=self.retries)
            target = EsIndex(conn, self.index, self.field)
            mapping = target.field_mapping()
            if not mapping:
                if not self.create_index:
                    what = f"index {self.index!r} does not exist" if mapping is None else \
                        f"index {self.index!r} has no mapping for field {self.field!r}"
                    raise BatchError(f"{what}: pass create_index=True to create it with a {self.kind} field, or "
                                     f"create it yourself", category="not_found", column=self.field)
                self._create(target, mapping is None, dims)
                mapping = target.field_mapping() or {}
        except EsError as exc:
            raise BatchError(exc.message, category=exc.category, column=self.field) from exc
        self._check(mapping, dims)
        self._target = target
        return target

    def _create(self, target: EsIndex, new_index: bool, dims: int | None) -> None:
        properties = _properties(self.field, self._prop(dims))
        path = "/" + self.index
        if new_index:
            status, answer = target.conn.request("PUT", path, {"mappings": {"properties": properties}}, ok=(200, 400))
            if status == 400 and _error_type(answer) == "resource_already_exists_exception":
                return
        else:
            status, answer = target.conn.request("PUT", f"{path}/_mapping", {"properties": properties},
                                                 ok=(200, 400))
        if status != 200:
            reason = _reason(answer)
            if "does not exist" in reason and self.kind in reason:
                reason = (f"this Elasticsearch has no {self.kind} field type (x-pack's rank-vectors module, which "
                          f"the integ-test distribution lacks, and an Enterprise or trial license): {reason}")
            raise BatchError(f"Elasticsearch would not create field {self.field!r} of index {self.index!r}: "
                             f"{reason}", category="invalid_field", column=self.field)

    def _values(self, data: pa.Table | pa.RecordBatch, block: str) -> tuple[Any, list[bytes], int | None]:
        """(ids, each row's JSON value, the dims the field must have)."""
        raise NotImplementedError

    def bodies(self, data: pa.Table | pa.RecordBatch, *, block: str) -> tuple[list[bytes], int | None]:
        """The ``_bulk`` bodies of ``data`` (each at most ``max_bytes`` unless one row is larger), checked
        first, and the dims the field must have."""
        ids, values, dims = self._values(data, block)
        index_json, key = orjson.dumps(self.index), orjson.dumps(self.field)
        lines = bytearray()
        for i, value in zip(ids.tolist() if isinstance(ids, np.ndarray) else ids, values):
            lines += b'{"index":{"_id":%s,"_index":%s}}\n{%s:%s}\n' % (orjson.dumps(str(i)), index_json, key, value)
        bodies: list[bytes] = []
        current: list[bytes] = []
        size = 0
        for piece in _pieces(bytes(lines), self.max_bytes) if lines else []:
            if current and size + len(piece) > self.max_bytes:
                bodies.append(b"".join(current))
                current, size = [], 0
            current.append(piece)
            size += len(piece)
        if current:
            bodies.append(b"".join(current))
        return bodies, dims

    def write(self, data: pa.Table | pa.RecordBatch, *, block: str) -> int:
        """Index the block's documents; the documents created (not those replaced)."""
        bodies, dims = self.bodies(data, block=block)
        if not bodies:
            return 0
        target = self.check(dims)
        created = 0
        for body in bodies:
            try:
                created += target.bulk(body)
            except EsError as exc:
                raise BatchError(exc.message, category=exc.category, row_id=exc.row_id, block=block) from exc
        return created

    def close(self) -> None:
        """Nothing held open between requests (each request its own connection)."""


class EsSparseVectorSink(_EsFieldSink):
    """A sparse column's rows as ``{token: weight}`` objects in the ``sparse_vector`` field ``field``."""

    kind = "sparse_vector"

    def __init__(self, url: str, *, index: str, field: str, id_column: str, vocab: str | Path | Sequence[str],
                 **options: Any) -> None:
        super().__init__(url, index=index, field=field, id_column=id_column, **options)
        self.vocab = load_vocabulary(vocab)
        self._keys = [orjson.dumps(t) for t in self.vocab]

    def _prop(self, dims: int | None) -> dict:
        return {"type": "sparse_vector"}

    def _values(self, data: pa.Table | pa.RecordBatch, block: str) -> tuple[Any, list[bytes], int | None]:
        ids = ids_of(data, self.id_column, block=block)
        pieces = sparse_chunks(data, self.field, id_column=self.id_column, block=block,
                               vocab_size=None if _has_vocab_meta(data, self.field) else len(self.vocab))
        out: list[bytes] = []
        for row0, sv in pieces:
            if sv.vocab_size != len(self.vocab):
                raise BatchError(f"sparse vectors of a {sv.vocab_size}-token vocabulary, and the vocabulary given has "
                                 f"{len(self.vocab)} tokens", category="shape_mismatch", column=self.field, block=block)
            values = sv.values_float32() if sv.dtype != "float64" else sv.values.astype(np.float32)
            bad = ~(np.isfinite(values) & (values >= 0) & ((values == 0) | (values >= _MIN_NORMAL)))
            if bad.any():
                j = int(np.argmax(bad))
                row = row0 + int(np.searchsorted(sv.offsets, j, side="right")) - 1
                raise BatchError(f"weight {values[j]} of token {self.vocab[int(sv.indices[j])]!r}: a sparse_vector "
                                 f"weight is a positive normal float", category="invalid_field", column=self.field,
                                 row=row, row_id=_id_at(ids, row), block=block)
            keep = values != 0  # zero weights are left out (the node refuses them)
            rows = np.repeat(np.arange(sv.n), sv.nnz)[keep]
            offsets = np.searchsorted(rows, np.arange(sv.n + 1)).tolist()  # the kept entries' row offsets
            kept = values[keep]
            # float32's shortest round-trip text (orjson's numpy float32), one dump for the chunk
            texts = orjson.dumps(kept, option=orjson.OPT_SERIALIZE_NUMPY)[1:-1].split(b",") if kept.size else []
            keys = self._keys
            pairs = [keys[i] + b":" + t for i, t in zip(sv.indices[keep].tolist(), texts)]
            out += [b"{" + b",".join(pairs[offsets[r]:offsets[r + 1]]) + b"}" for r in range(sv.n)]
        return ids, out, None


class EsRankVectorsSink(_EsFieldSink):
    """A per-token column's rows as arrays of token vectors in the ``rank_vectors`` field ``field``."""

    kind = "rank_vectors"

    def __init__(self, url: str, *, index: str, field: str, id_column: str, vector_format: str = "floats",
                 **options: Any) -> None:
        if vector_format not in ("floats", "base64"):
            raise BatchError(f"vector_format must be floats or base64, not {vector_format!r}", column=field)
        super().__init__(url, index=index, field=field, id_column=id_column, **options)
        self.vector_format = vector_format

    def _prop(self, dims: int | None) -> dict:
        if dims is None:
            raise BatchError("a rank_vectors field is created for the token vectors' dims: the block has none",
                             column=self.field)
        return {"type": "rank_vectors", "dims": dims, "element_type": "float"}

    def _check(self, mapping: dict, dims: int | None) -> None:
        super()._check(mapping, dims)
        have = mapping.get("dims")
        if dims is not None and have is not None and int(have) != dims:
            raise BatchError(f"field {self.field!r} of index {self.index!r} has {have} dims; the token vectors have "
                             f"{dims}", category="shape_mismatch", column=self.field)
        if mapping.get("element_type", "float") != "float":
            raise BatchError(f"field {self.field!r} of index {self.index!r} has element_type "
                             f"{mapping.get('element_type')}; the token vectors are float", column=self.field)

    def _values(self, data: pa.Table | pa.RecordBatch, block: str) -> tuple[Any, list[bytes], int | None]:
        ids = ids_of(data, self.id_column, block=block)
        out: list[bytes] = []
        dims = None
        for row0, ragged in token_chunks(data, self.field, id_column=self.id_column, block=block):
            rows = np.ascontiguousarray(ragged.values, np.float32)
            if rows.size and not np.isfinite(rows).all():
                t = int(np.argmin(np.isfinite(rows).all(axis=1)))
                row = row0 + int(np.searchsorted(ragged.offsets, t, side="right")) - 1
                raise BatchError("a non-finite value in a token vector (Elasticsearch refuses NaN and infinity)",
                                 category="non_finite", column=self.field, row=row, row_id=_id_at(ids, row),
                                 block=block)
            if ragged.rows.n:
                dims = ragged.d
            if self.vector_format == "base64":
                big = rows.astype(">f4")
                inner = [b'"' + pybase64.b64encode(big[i].tobytes()) + b'"' for i in range(len(big))]
            else:
                inner = [orjson.dumps(rows[i], option=orjson.OPT_SERIALIZE_NUMPY) for i in range(len(rows))]
            offsets = ragged.offsets.tolist()
            out += [b"[" + b",".join(inner[offsets[r]:offsets[r + 1]]) + b"]" for r in range(ragged.n)]
        return ids, out, dims


def _has_vocab_meta(data: Any, column: str) -> bool:
    return column in data.schema.names and b"densewire.vocabulary_size" in (data.schema.field(column).metadata or {})


def _id_at(ids: Any, row: int) -> Any:
    v = ids[row]
    return v.item() if isinstance(v, np.generic) else v
