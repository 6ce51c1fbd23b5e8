"""Elasticsearch / OpenSearch ``_bulk`` request bodies (NDJSON) of vectors.

Each row becomes an action line and a source line, as the elasticsearch client's ``bulk`` helpers write
them (``expand_action``, compact JSON):

    {"index":{"_id":"7","_index":"docs"}}
    {"embedding":"P4AAAMAgAAA9zMzN"}

with the vector as big-endian float32 Base64 (the packed ``dense_vector`` form Elasticsearch 9.3 and
later accept, the bytes of ``elasticsearch.helpers.pack_dense_vector``), or with ``vector_format="floats"``
as a JSON array of the shortest float32 decimals, for older Elasticsearch and OpenSearch. A chunk of rows
whose byte length is a multiple of 3 is Base64-encoded in one call and cut per row.

``element_type`` is the field's (Elasticsearch's names): ``float`` as above; ``bfloat16`` as Base64 of
big-endian bfloat16 (half the bytes; float32 rounded to nearest even by SPEC.md section 3.2, bfloat16
input as it is), which Elasticsearch takes for a ``bfloat16`` field by its length; ``byte`` (int8
vectors) as Base64 of the bytes; ``bit`` (binary vectors, ``dims`` in bits) as hexadecimal, the one
string form Elasticsearch reads for bits. With ``vector_format="floats"`` each is a JSON array.

>>> import numpy as np
>>> print(b"".join(bulk_lines(np.array([[1.0, -2.5, 0.1]], np.float32), index="docs", ids=[7])).decode(), end="")
{"index":{"_id":"7","_index":"docs"}}
{"embedding":"P4AAAMAgAAA9zMzN"}
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import orjson
import pybase64

from .._convert import convert, widen
from .._errors import InvalidFieldError, NonFiniteError
from .._tensor import Tensor

__all__ = ["ELEMENT_TYPES", "VECTOR_FORMATS", "bulk_lines", "element_type_of", "float32_rows"]

VECTOR_FORMATS = ("base64", "floats")
#: Elasticsearch's ``dense_vector`` element types (9.x: no float16)
ELEMENT_TYPES = ("float", "bfloat16", "byte", "bit")


def element_type_of(dtype: str) -> str:
    """The element type a field created for vectors of ``dtype`` gets (float16 and float64: float)."""
    return {"bfloat16": "bfloat16", "int8": "byte", "binary": "bit"}.get(dtype, "float")


def float32_rows(vectors: Tensor | np.ndarray, field: str, row0: int = 0) -> np.ndarray:
    """The rows as float32 (float64 rounded by SPEC.md section 3.3, float16/bfloat16 widened), finite."""
    t = vectors if isinstance(vectors, Tensor) else Tensor.from_array(np.asarray(vectors))
    if t.dtype in ("int8", "uint8", "binary"):
        raise InvalidFieldError(f"a bulk body carries float vectors, not {t.dtype}", field=field)
    a = convert(t.array, "float32").array if t.dtype == "float64" else widen(t)
    with np.errstate(over="ignore", invalid="ignore"):
        total = a.sum(dtype=np.float32)
    if not np.isfinite(total) and not (finite := np.isfinite(a)).all():
        r, c = np.unravel_index(int(np.argmin(finite.ravel())), finite.shape)
        raise NonFiniteError(f"{a[r, c]} in a dense_vector (Elasticsearch and OpenSearch refuse NaN and infinity)",
                             field=f"{field}[{row0 + r}][{c}]")
    return a


def _base64_rows(big: np.ndarray) -> list[bytes]:
    """Base64 of each row of a C-contiguous 2-D array (its bytes as they are)."""
    big = np.ascontiguousarray(big)
    row = big.shape[1] * big.itemsize
    if row % 3 == 0 and big.size:  # one encode for the chunk, cut at row boundaries (4 characters per 3 bytes)
        text = pybase64.b64encode(memoryview(big.reshape(-1).view(np.uint8)))
        step = row // 3 * 4
        return [text[i:i + step] for i in range(0, len(text), step)]
    return [pybase64.b64encode(big[i].tobytes()) for i in range(big.shape[0])]


def _values(t: Tensor, element_type: str, vector_format: str, field: str, row0: int) -> list[bytes]:
    """The JSON value of each row's vector for a field of ``element_type``."""
    if element_type in ("float", "bfloat16"):
        a = float32_rows(t, field, row0)  # finite, or NonFiniteError naming the value
        if element_type == "float":
            if vector_format == "base64":
                return [b'"' + v + b'"' for v in _base64_rows(a.astype(">f4"))]
            return [orjson.dumps(row, option=orjson.OPT_SERIALIZE_NUMPY) for row in a]
        bits = t.array.view("<u2") if t.dtype == "bfloat16" else convert(t if t.dtype == "float64" else a, "bfloat16").array
        if vector_format == "base64":
            return [b'"' + v + b'"' for v in _base64_rows(np.asarray(bits).astype(">u2"))]
        wide = (np.asarray(bits, np.uint32) << 16).view(np.float32)
        return [orjson.dumps(row, option=orjson.OPT_SERIALIZE_NUMPY) for row in wide]
    want = {"byte": "int8", "bit": "binary"}[element_type]
    if t.dtype != want:
        raise InvalidFieldError(f"a dense_vector of element_type {element_type} takes {want} vectors, not {t.dtype}",
                                field=field)
    if vector_format == "floats":
        return [orjson.dumps(row.astype(np.int64 if element_type == "byte" else np.uint8).tolist()) for row in t.array]
    if element_type == "byte":
        return [b'"' + v + b'"' for v in _base64_rows(np.asarray(t.array).view(np.int8))]
    return [b'"' + row.tobytes().hex().encode() + b'"' for row in np.asarray(t.array)]


def bulk_lines(vectors: Tensor | np.ndarray, *, index: str, field: str = "embedding", ids: Sequence[Any] | None = None,
               vector_format: str = "base64", op_type: str = "index", rows_per_chunk: int = 4096,
               row0: int = 0, element_type: str = "float") -> Iterator[bytes]:
    """The NDJSON lines of a bulk request, one chunk of rows (as one bytes) at a time. ``ids`` (one per
    row, None for an id Elasticsearch chooses) become ``_id`` strings."""
    if vector_format not in VECTOR_FORMATS:
        raise InvalidFieldError(f"vector_format must be one of {', '.join(VECTOR_FORMATS)}, not {vector_format!r}",
                                field="vector_format")
    if element_type not in ELEMENT_TYPES:
        raise InvalidFieldError(f"element_type must be one of {', '.join(ELEMENT_TYPES)}, not {element_type!r}",
                                field="element_type")
    t = vectors if isinstance(vectors, Tensor) else Tensor.from_array(np.asarray(vectors))
    if ids is not None and len(ids) != t.n:
        raise InvalidFieldError(f"{len(ids)} ids for {t.n} vectors", field="ids")
    index_json = orjson.dumps(index)
    key = orjson.dumps(field)
    for start in range(0, t.n, rows_per_chunk):
        stop = min(start + rows_per_chunk, t.n)
        values = _values(Tensor(t.array[start:stop], t.dtype, t.d), element_type, vector_format, field, row0 + start)
        chunk_ids = [None] * (stop - start) if ids is None else ids[start:stop]
        out = bytearray()
        for i, value in zip(chunk_ids, values):
            if i is None:
                out += b'{"%s":{"_index":%s}}\n' % (op_type.encode(), index_json)
            else:
                out += b'{"%s":{"_id":%s,"_index":%s}}\n' % (op_type.encode(), orjson.dumps(str(i)), index_json)
            out += b"{%s:%s}\n" % (key, value)
        yield bytes(out)
