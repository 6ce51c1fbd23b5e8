"""The JSON embeddings envelope (SPEC.md section 6): OpenAI-compatible, Base64 or float rows.

Decoding a Base64 response costs one orjson parse plus, when every row is a whole number of
Base64 groups (``row_bytes % 3 == 0``, e.g. any float32 d divisible by 3: 384, 768, 1536),
a single SIMD Base64 decode of all rows joined; otherwise one decode per row into one buffer.
"""

from __future__ import annotations

import numpy as np
import orjson

from ._base64 import b64decode_strict, b64encode
from ._convert import convert, widen
from ._errors import (DensewireError, InvalidFieldError, LengthMismatchError, MalformedError,
                      NonFiniteError, ShapeMismatchError)
from ._tensor import Embeddings, Tensor, Usage, check_byteorder, check_dtype, row_bytes

__all__ = ["encode_json", "decode_json"]

_FLOATS = ("float32", "float16", "bfloat16", "float64")


def encode_json(emb: Embeddings | Tensor, encoding_format: str = "base64", byteorder: str = "little") -> bytes:
    """The canonical JSON response: compact, keys in SPEC.md order, rows as Base64 or numbers.

    >>> import numpy as np
    >>> encode_json(Embeddings(Tensor.from_array(np.array([1.0, 0.5], dtype=np.float32)), "m"))
    b'{"object":"list","data":[{"object":"embedding","index":0,"embedding":"AACAPwAAAD8="}],"model":"m","usage":{"prompt_tokens":0,"total_tokens":0},"dtype":"float32","byteorder":"little","dimensions":2}'
    """
    if isinstance(emb, Tensor):
        emb = Embeddings(emb)
    t = emb.tensor
    check_byteorder(byteorder)
    usage = emb.usage or Usage()
    tail = b'],"model":%s,"usage":{"prompt_tokens":%d,"total_tokens":%d},"dtype":"%s","byteorder":"%s","dimensions":%d}' % (
        orjson.dumps(emb.model or ""), usage.prompt_tokens, usage.total_tokens, t.dtype.encode(),
        (byteorder if encoding_format == "base64" else "little").encode(), t.d)
    if encoding_format == "base64":
        rows = _base64_rows(t, byteorder)
        parts = [b'{"object":"list","data":[']
        for i, row in enumerate(rows):
            parts.append(b'%s{"object":"embedding","index":%d,"embedding":"' % (b"," if i else b"", i))
            parts.append(row)
            parts.append(b'"}')
        parts.append(tail)
        return b"".join(parts)
    if encoding_format != "float":
        raise InvalidFieldError(f"encoding_format must be 'float' or 'base64', got {encoding_format!r}",
                                field="encoding_format")
    values = widen(t) if t.dtype == "bfloat16" else t.array
    if t.dtype in _FLOATS:
        finite = np.isfinite(values)
        if not finite.all():
            i, j = map(int, np.argwhere(~finite)[0])
            raise NonFiniteError(f"{values[i, j]} has no JSON number form; use encoding_format 'base64'",
                                 field=f"data[{i}].embedding[{j}]")
    data = orjson.dumps([{"object": "embedding", "index": i, "embedding": row} for i, row in enumerate(values)],
                        option=orjson.OPT_SERIALIZE_NUMPY)
    return b'{"object":"list","data":[' + data[1:-1] + tail


def _base64_rows(t: Tensor, byteorder: str) -> list:
    rb = row_bytes(t.dtype, t.d)
    raw = t.to_bytes(byteorder)
    if t.n and rb % 3 == 0:  # rows are whole Base64 groups: one SIMD call, then slices
        whole = memoryview(b64encode(raw))
        w = rb // 3 * 4
        return [whole[i * w:(i + 1) * w] for i in range(t.n)]
    view = memoryview(raw)
    return [b64encode(view[i * rb:(i + 1) * rb]) for i in range(t.n)]


def decode_json(body: bytes | bytearray | memoryview | str) -> Embeddings:
    """Decode a JSON embeddings response (densewire's or any OpenAI-compatible server's)."""
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise MalformedError(f"invalid JSON: {exc.msg}", offset=exc.pos) from None
    if not isinstance(doc, dict):
        raise MalformedError("an embeddings response must be a JSON object", offset=0)
    data = doc.get("data")
    if not isinstance(data, list):
        raise InvalidFieldError("missing or not an array", field="data")
    dtype = check_dtype(doc.get("dtype", "float32"))
    byteorder = check_byteorder(doc.get("byteorder", "little"))
    dims = doc.get("dimensions")
    if dims is not None and (not isinstance(dims, int) or isinstance(dims, bool) or dims < 0):
        raise InvalidFieldError(f"must be a non-negative integer, got {dims!r}", field="dimensions")
    rows, positions = _place_rows(data)
    tensor = _decode_rows(rows, positions, dtype, byteorder, dims) if rows else Tensor.from_bytes(
        b"", dtype, (0, dims or 0))
    model = doc.get("model")
    if model is not None and not isinstance(model, str):
        raise InvalidFieldError("must be a string", field="model")
    return Embeddings(tensor, model, _usage(doc.get("usage")))


def _place_rows(data: list) -> tuple[list, list[int]]:
    n = len(data)
    rows: list = [None] * n
    positions = [0] * n
    for pos, item in enumerate(data):
        if not isinstance(item, dict) or "embedding" not in item:
            raise InvalidFieldError("each item must be an object with an embedding", field=f"data[{pos}]")
        index = item.get("index", pos)
        if not isinstance(index, int) or isinstance(index, bool):
            raise InvalidFieldError(f"must be an integer, got {index!r}", field=f"data[{pos}].index")
        if not 0 <= index < n:
            raise ShapeMismatchError(f"index {index} is outside 0..{n - 1}", field=f"data[{pos}].index")
        if rows[index] is not None:
            raise ShapeMismatchError(f"index {index} occurs twice", field=f"data[{pos}].index")
        rows[index] = item["embedding"]
        positions[index] = pos
    return rows, positions


def _decode_rows(rows: list, positions: list[int], dtype: str, byteorder: str, dims: int | None) -> Tensor:
    first = rows[0]
    if isinstance(first, str):
        return _decode_base64_rows(rows, positions, dtype, byteorder, dims)
    if isinstance(first, list):
        return _decode_number_rows(rows, positions, dtype, dims)
    raise InvalidFieldError("must be a Base64 string or an array of numbers", field=f"data[{positions[0]}].embedding")


def _decode_base64_rows(rows: list, positions: list[int], dtype: str, byteorder: str, dims: int | None) -> Tensor:
    n = len(rows)
    for k, row in enumerate(rows):
        if not isinstance(row, str):
            raise InvalidFieldError("every embedding must be a Base64 string like the first",
                                    field=f"data[{positions[k]}].embedding")
    if dims is None:
        first = _decode_row(rows[0], positions[0])
        size = 1 if dtype == "binary" else row_bytes(dtype, 1)
        if len(first) % size:
            raise LengthMismatchError(f"{len(first)} bytes is not a whole number of {dtype} items",
                                      offset=len(first) - len(first) % size, field=f"data[{positions[0]}].embedding")
        dims = len(first) * 8 if dtype == "binary" else len(first) // size
    rb = row_bytes(dtype, dims)
    width = rb // 3 * 4
    if rb % 3 == 0 and all(len(r) == width for r in rows):
        try:  # one SIMD decode of every row; a failure is located row by row below
            return Tensor.from_bytes(b64decode_strict("".join(rows)), dtype, (n, dims), byteorder)
        except DensewireError:
            pass
    out = bytearray(n * rb)
    for k, row in enumerate(rows):
        raw = _decode_row(row, positions[k])
        if len(raw) != rb:
            raise LengthMismatchError(f"{len(raw)} bytes where a {dtype} row of {dims} dimensions needs {rb}",
                                      offset=min(len(raw), rb), field=f"data[{positions[k]}].embedding")
        out[k * rb:(k + 1) * rb] = raw
    return Tensor.from_bytes(out, dtype, (n, dims), byteorder)


def _decode_row(row: str, pos: int) -> bytes:
    try:
        return b64decode_strict(row)
    except DensewireError as exc:
        raise exc.located(field=f"data[{pos}].embedding") from None


def _decode_number_rows(rows: list, positions: list[int], dtype: str, dims: int | None) -> Tensor:
    width = row_bytes(dtype, dims) if dims is not None and dtype == "binary" else dims
    for k, row in enumerate(rows):
        if not isinstance(row, list):
            raise InvalidFieldError("every embedding must be an array like the first", field=f"data[{positions[k]}].embedding")
        if width is None:
            width = len(row)
        if len(row) != width:
            raise ShapeMismatchError(f"{len(row)} values where {width} are expected", field=f"data[{positions[k]}].embedding")
    values = np.array(rows)
    if values.dtype.kind not in "fiu" or values.ndim != 2:
        k = _first_bad_row(rows)
        raise InvalidFieldError("values must be numbers", field=f"data[{positions[k]}].embedding")
    if dtype in _FLOATS:
        return convert(values.astype(np.float64), dtype)
    lo, hi = (-128, 127) if dtype == "int8" else (0, 255)
    if values.dtype.kind == "f" or (values.size and (values.min() < lo or values.max() > hi)):
        bad = np.argwhere((values < lo) | (values > hi) | (values != np.floor(values)))[0]
        raise InvalidFieldError(f"{values[tuple(bad)]} is not a {dtype} value",
                                field=f"data[{positions[bad[0]]}].embedding[{bad[1]}]")
    storage = np.int8 if dtype == "int8" else np.uint8
    d = (dims if dims is not None else values.shape[1] * 8) if dtype == "binary" else None
    return Tensor.from_array(values.astype(storage), dtype, d)


def _first_bad_row(rows: list) -> int:
    for k, row in enumerate(rows):
        if any(not isinstance(v, (int, float)) or isinstance(v, bool) for v in row):
            return k
    return 0


def _usage(usage: object) -> Usage | None:
    if usage is None:
        return None
    if not isinstance(usage, dict):
        raise InvalidFieldError("must be an object", field="usage")
    values = []
    for key in ("prompt_tokens", "total_tokens"):
        v = usage.get(key, 0)
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise InvalidFieldError(f"must be a non-negative integer, got {v!r}", field=f"usage.{key}")
        values.append(v)
    return Usage(*values)
