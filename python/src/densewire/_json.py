"""The JSON embeddings envelope (SPEC.md section 6): OpenAI-compatible, Base64 or float rows.

Decoding a Base64 response takes a fast path that reads each Base64 row exactly once: rows are
located by their length (known from the first row) instead of by scanning them, the small JSON
glue between them (the same bytes but for the index digits) is checked with numpy, the JSON
around one row is parsed by orjson, and all rows are decoded in one SIMD pybase64 call. Anything
unexpected (escapes, rows of different lengths, a bad character, irregular layout) falls back to
the general path (msgspec), which parses everything and names the exact error.
"""

from __future__ import annotations

import json
import re

import msgspec
import numpy as np
import orjson
import pybase64

from ._base64 import b64decode_strict, b64encode
from ._convert import convert, widen
from ._errors import (DensewireError, InvalidFieldError, LengthMismatchError, MalformedError,
                      NonFiniteError, ShapeMismatchError)
from ._coerce import as_embeddings
from ._outbuf import OutBuffer
from ._tensor import Embeddings, Tensor, Usage, check_byteorder, check_dtype, check_no_kind, row_bytes

__all__ = ["encode_json", "decode_json", "from_openai"]

_FLOATS = ("float32", "float16", "bfloat16", "float64")
_BYTE_AT = re.compile(r"\(byte (\d+)\)")


def encode_json(emb: Embeddings | Tensor, encoding_format: str = "base64", byteorder: str = "little") -> bytes:
    """The canonical JSON response: compact, keys in SPEC.md order, rows as Base64 or numbers.

    >>> import numpy as np
    >>> encode_json(Embeddings(Tensor.from_array(np.array([1.0, 0.5], dtype=np.float32)), "m"))
    b'{"object":"list","data":[{"object":"embedding","index":0,"embedding":"AACAPwAAAD8="}],"model":"m","usage":{"prompt_tokens":0,"total_tokens":0},"dtype":"float32","byteorder":"little","dimensions":2}'
    """
    emb = as_embeddings(emb)
    t = emb.tensor
    check_byteorder(byteorder)
    usage = emb.usage or Usage()
    tail = b'],"model":%s,"usage":{"prompt_tokens":%d,"total_tokens":%d},"dtype":"%s","byteorder":"%s","dimensions":%d' % (
        orjson.dumps(emb.model or ""), usage.prompt_tokens, usage.total_tokens, t.dtype.encode(),
        (byteorder if encoding_format == "base64" else "little").encode(), t.d)
    tail += (b',"quantization":%s}' % orjson.dumps(emb.quantization)) if emb.quantization is not None else b"}"
    if encoding_format == "base64":
        return _base64_envelope(t, byteorder, tail)
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


_CHUNK = 48 << 10  # bytes of tensor per pybase64 call: its output stays small and comes from the heap


def _base64_envelope(t: Tensor, byteorder: str, tail: bytes) -> bytes:
    """The Base64 envelope, written straight into the ``bytes`` it returns (:class:`OutBuffer`): the
    only large allocation of a call is the result itself, with no scratch buffer to copy from, and
    on a process's first call its pages are backed in one go rather than faulted in 4 KiB at a time.
    (Joining a list of parts over one big Base64 string made two large allocations a call, and a
    reused scratch buffer still left the first call 3.9x a warm one: bench/python/RESULTS-cold-encode.md.)

    Rows whose index has the same number of digits lie at a fixed stride, so each such group is one
    2-D numpy view of the buffer: the JSON around the rows is written a column at a time, and the
    Base64 of 48 KiB of tensor at a time (pybase64's output stays small and is reused from the heap).
    """
    n, rb = t.n, row_bytes(t.dtype, t.d)
    w = (rb + 2) // 3 * 4
    raw = memoryview(t.to_bytes(byteorder)).cast("B") if n else memoryview(b"")
    groups, lo, digits = [], 0, 1  # (first row, end, digits of the index, comma before the row)
    while lo < n:
        hi = 1 if lo == 0 else min(n, 10 ** digits)
        groups.append((lo, hi, digits, 1 if lo else 0))
        lo = hi
        digits = len(str(hi))
    fixed = len(_PRE1) + len(_PRE2) + w + len(_POST)
    size = len(_HEAD) + len(tail) + sum((hi - lo) * (comma + fixed + nd) for lo, hi, nd, comma in groups)
    buf = OutBuffer(size)
    out = buf.array
    out[:len(_HEAD)] = _bytes_array(_HEAD)
    pos = len(_HEAD)
    per_chunk = max(1, _CHUNK // max(rb, 1))
    for lo, hi, nd, comma in groups:
        stride = comma + fixed + nd
        block = out[pos:pos + (hi - lo) * stride].reshape(hi - lo, stride)  # a view: writes land in the result
        col = comma
        if comma:
            block[:, 0] = 0x2C  # ','
        block[:, col:col + len(_PRE1)] = _bytes_array(_PRE1)
        col += len(_PRE1)
        index = np.arange(lo, hi)
        for k in range(nd):
            block[:, col + k] = index // 10 ** (nd - 1 - k) % 10 + 0x30
        col += nd
        block[:, col:col + len(_PRE2)] = _bytes_array(_PRE2)
        col += len(_PRE2)
        for c0 in range(lo, hi, per_chunk):
            c1 = min(hi, c0 + per_chunk)
            if rb % 3 == 0:  # whole Base64 groups: the rows' encodings are one encoding's slices
                enc = b64encode(raw[c0 * rb:c1 * rb])
            else:
                enc = b"".join([b64encode(raw[i * rb:(i + 1) * rb]) for i in range(c0, c1)])
            block[c0 - lo:c1 - lo, col:col + w] = np.frombuffer(enc, np.uint8).reshape(c1 - c0, w)
        col += w
        block[:, col:col + len(_POST)] = _bytes_array(_POST)
        pos += (hi - lo) * stride
    out[pos:pos + len(tail)] = _bytes_array(tail)
    if pos + len(tail) != size:  # every byte of the uninitialised result must have been written
        raise AssertionError(f"envelope of {pos + len(tail)} bytes, {size} planned")
    out = block = None  # no writable view of the result outlives the call
    return buf.finish()


def _bytes_array(b: bytes) -> np.ndarray:
    return np.frombuffer(b, np.uint8)


_HEAD = b'{"object":"list","data":['
_PRE1 = b'{"object":"embedding","index":'
_PRE2 = b',"embedding":"'
_POST = b'"}'


def decode_json(body: bytes | bytearray | memoryview | str) -> Embeddings:
    """Decode a JSON embeddings response (densewire's or any OpenAI-compatible server's)."""
    if not isinstance(body, str):
        fast = _decode_base64_fast(bytes(body) if not isinstance(body, bytes) else body)
        if fast is not None:
            return fast
    return _from_doc(load_object(body))


def load_object(body: bytes | bytearray | memoryview | str) -> dict:
    """The JSON object of a response body, or the ``malformed`` error of section 6.

    A number beyond binary64 (``1e3080``) is well-formed JSON that msgspec refuses: in a usage count it
    is the ``invalid_field`` of SPEC.md 6.2, so the body is read again with such numbers standing for
    +Infinity there (which ``Usage.parse`` rejects) and ``malformed`` anywhere else.
    """
    try:
        doc = msgspec.json.decode(body)
    except msgspec.DecodeError as exc:
        at = _BYTE_AT.search(str(exc))
        err = MalformedError(f"invalid JSON: {exc}", offset=int(at.group(1)) if at else None)
        doc = _out_of_range_usage(body, err) if "out of range" in str(exc) else None
        if doc is None:
            raise err from None
    except UnicodeDecodeError:  # msgspec's error for a string that is not UTF-8 (found by fuzzing)
        raise MalformedError("invalid JSON: a string is not valid UTF-8", offset=_utf8_error_at(body)) from None
    if not isinstance(doc, dict):
        raise MalformedError("an embeddings response must be a JSON object", offset=0)
    return doc


class _OutOfRange(float):
    """A JSON number past binary64, read as +Infinity."""


def _out_of_range_usage(body, err: MalformedError) -> dict | None:
    """The document when its only numbers beyond binary64 are usage counts, else None."""
    def number(text: str) -> float:
        v = float(text)
        return _OutOfRange(v) if v in (float("inf"), float("-inf")) else v

    def constant(name: str):
        raise err

    try:
        doc = json.loads(bytes(body) if not isinstance(body, str) else body, parse_float=number,
                         parse_constant=constant)
    except (ValueError, RecursionError):
        return None
    if not isinstance(doc, dict):
        return None
    usage = doc.get("usage")
    stack = [v for k, v in doc.items() if k != "usage"]
    if isinstance(usage, dict):
        stack += [v for v in usage.values() if not isinstance(v, _OutOfRange)]
    else:
        stack.append(usage)
    while stack:
        v = stack.pop()
        if isinstance(v, _OutOfRange):
            return None
        if isinstance(v, dict):
            stack += v.values()
        elif isinstance(v, list):
            stack += v
    return doc


def _from_doc(doc: dict) -> Embeddings:
    check_no_kind(doc, "kind")
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
    return Embeddings(tensor, model, Usage.parse(doc.get("usage")), _quantization(doc))


def _quantization(doc: dict) -> str | None:
    """SPEC.md 6.2: the optional ``quantization`` id, a string."""
    q = doc.get("quantization")
    if q is not None and not isinstance(q, str):
        raise InvalidFieldError(f"must be a string, got {q!r}", field="quantization")
    return q


def from_openai(response) -> np.ndarray:
    """The vectors of an OpenAI embeddings response as one ``(n, d)`` float32 array, rows in ``index``
    order: an ``openai`` SDK ``CreateEmbeddingResponse`` (asked for with ``encoding_format="base64"``,
    or with float lists), its ``model_dump()`` dict, or the raw JSON body as bytes or str.

    >>> from_openai('{"data":[{"object":"embedding","index":0,"embedding":"AACAPwAAIMA="}]}')
    array([[ 1. , -2.5]], dtype=float32)
    """
    if isinstance(response, (bytes, bytearray, memoryview, str)):
        emb = decode_json(response)
    elif isinstance(response, dict):
        emb = _from_doc(response)
    elif hasattr(response, "data"):  # the SDK's pydantic model: no model_dump() of every float
        emb = _from_doc({"data": [{"index": e.index, "embedding": e.embedding} for e in response.data]})
    else:
        raise TypeError(f"from_openai takes an OpenAI embeddings response (SDK object, dict, bytes or str), "
                        f"got {type(response).__name__}")
    t = emb.tensor
    return t.array if t.dtype == "float32" else widen(t) if t.dtype == "bfloat16" else t.array.astype(np.float32)


def _utf8_error_at(body) -> int | None:
    """The offset of the first byte that is not UTF-8, or None (a str, or an escaped lone surrogate)."""
    if isinstance(body, str):
        return None
    try:
        bytes(body).decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start
    return None


def place_by_index(data: list, needs_embedding: bool = False) -> list[tuple[int, dict]]:
    """(position, item) in ``index`` order, with section 6.2's item and index errors."""
    n = len(data)
    placed: list = [None] * n
    for pos, item in enumerate(data):
        if not isinstance(item, dict) or (needs_embedding and "embedding" not in item):
            raise InvalidFieldError("each item must be an object with an embedding" if needs_embedding
                                    else "each item must be an object", field=f"data[{pos}]")
        index = item.get("index")
        if not isinstance(index, int) or isinstance(index, bool):
            raise InvalidFieldError("missing" if index is None else f"must be an integer, got {index!r}",
                                    field=f"data[{pos}].index")
        if not 0 <= index < n:
            raise ShapeMismatchError(f"index {index} is outside 0..{n - 1}", field=f"data[{pos}].index")
        if placed[index] is not None:
            raise ShapeMismatchError(f"index {index} occurs twice", field=f"data[{pos}].index")
        placed[index] = (pos, item)
    return placed


def _place_rows(data: list) -> tuple[list, list[int]]:
    placed = place_by_index(data, needs_embedding=True)
    return [item["embedding"] for _, item in placed], [pos for pos, _ in placed]


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
    if dims is None:  # from the first item of data, by position
        k0 = positions.index(0)
        first = _decode_row(rows[k0], 0)
        size = 1 if dtype == "binary" else row_bytes(dtype, 1)
        if len(first) % size:
            raise LengthMismatchError(f"{len(first)} bytes is not a whole number of {dtype} items",
                                      offset=len(first) - len(first) % size, field="data[0].embedding")
        dims = len(first) * 8 if dtype == "binary" else len(first) // size
    rb = row_bytes(dtype, dims)
    width = rb // 3 * 4
    if rb % 3 == 0 and all(len(r) == width for r in rows):
        try:  # one SIMD decode of every row; a failure is located row by row below
            return Tensor.from_bytes(b64decode_strict("".join(rows)), dtype, (n, dims), byteorder)
        except DensewireError:
            pass
    # rows are checked before the tensor exists, so a declared `dimensions` far beyond what the rows
    # carry is a row's error, never an allocation of n * rb bytes
    parts = []
    for k, row in enumerate(rows):
        raw = _decode_row(row, positions[k])
        if len(raw) != rb:
            raise LengthMismatchError(f"{len(raw)} bytes, expected {dims} {dtype} dimensions ({rb} bytes)",
                                      offset=min(len(raw), rb), field=f"data[{positions[k]}].embedding")
        parts.append(raw)
    return Tensor.from_bytes(bytearray().join(parts), dtype, (n, dims), byteorder)


def _decode_row(row: str, pos: int) -> bytes:
    try:
        return b64decode_strict(row)
    except DensewireError as exc:
        raise exc.located(field=f"data[{pos}].embedding") from None


def _decode_number_rows(rows: list, positions: list[int], dtype: str, dims: int | None) -> Tensor:
    width = row_bytes(dtype, dims) if dims is not None and dtype == "binary" else dims
    if width is None and isinstance(rows[positions.index(0)], list):  # from the first item of data, by position
        width = len(rows[positions.index(0)])
    for k, row in enumerate(rows):
        if not isinstance(row, list):
            raise InvalidFieldError("every embedding must be an array like the first", field=f"data[{positions[k]}].embedding")
        if width is None:
            width = len(row)
        if len(row) != width:
            raise ShapeMismatchError(f"{len(row)} values, expected {width}", field=f"data[{positions[k]}].embedding")
    values = np.array(rows)
    # numpy reads True as 1 in a list of numbers: a boolean is no number (SPEC.md 3.5), so look for one
    # in every row (a pass at C speed per row, about a fifth of the time of the rows' decoding)
    if values.dtype.kind not in "fiu" or values.ndim != 2 or _has_bool(rows):
        k, j = _first_bad_item(rows)
        raise InvalidFieldError("values must be numbers", field=f"data[{positions[k]}].embedding"
                                + (f"[{j}]" if j is not None else ""))
    if dtype in _FLOATS:
        return convert(values.astype(np.float64), dtype)
    lo, hi = (-128, 127) if dtype == "int8" else (0, 255)
    if values.dtype.kind == "f" or (values.size and (values.min() < lo or values.max() > hi)):
        wrong = np.argwhere((values < lo) | (values > hi) | (values != np.floor(values)))
        if len(wrong):  # floats with no fraction are integers (3.0 is the number 3, SPEC.md 3.5)
            bad = wrong[0]
            raise InvalidFieldError(f"{values[tuple(bad)]} is not a {dtype} value",
                                    field=f"data[{positions[bad[0]]}].embedding[{bad[1]}]")
    storage = np.int8 if dtype == "int8" else np.uint8
    d = (dims if dims is not None else values.shape[1] * 8) if dtype == "binary" else None
    return Tensor.from_array(values.astype(storage), dtype, d)


def _has_bool(rows: list) -> bool:
    """Whether a row holds True or False (a pass at C speed: set() of the items' types per row)."""
    return any(bool in set(map(type, row)) for row in rows)


def _first_bad_item(rows: list) -> tuple[int, int | None]:
    """(row, item) of the first value that is not a number (item None: a row that is no flat list)."""
    for k, row in enumerate(rows):
        for j, v in enumerate(row):
            if not isinstance(v, (int, float)) or isinstance(v, bool):
                return k, j
    return 0, None



_ROW = re.compile(rb'"embedding"\s*:\s*"')  # the key; "embedding" as a value is followed by , or }
_INDEX = re.compile(rb'"index"\s*:\s*(\d+)')


def _segments(body: bytes, buf: np.ndarray, s0: int, width: int) -> tuple[list[tuple[int, int, int]], int] | None:
    """Where the Base64 rows are, predicted from the first two rows and verified with numpy.

    Between two rows stands the same glue (``"},{"object":"embedding","index":7,"embedding":"``)
    but for the index digits, so rows are equally spaced within each run of indexes with the same
    number of digits (1-9, 10-99, ...). Returns those runs as (first row start, rows, stride)
    and the number the first glue holds (1: index before embedding, 0: after), or None."""
    m = _ROW.search(body, s0 + width)
    if m is None:
        return [(s0, 1, 0)], 1
    glue = body[s0 + width:m.start()] + m.group()
    im = _INDEX.search(glue)
    if im is None or im.group(1) not in (b"0", b"1"):
        return None
    first = int(im.group(1))
    pre = np.frombuffer(glue[:im.start(1)], np.uint8)
    post = np.frombuffer(glue[im.end(1):], np.uint8)
    segments = []
    start, row, digits = s0, 0, 1  # row: index of the row at `start`; its glue holds row + first
    while True:
        num = row + first
        if digits < len(str(num)):
            digits += 1
            continue
        stride = width + pre.size + digits + post.size
        limit = min(10 ** digits - first - row, (len(body) - start - width) // stride)  # glues of this width
        if limit <= 0:
            segments.append((start, 1, stride))
            return segments, first
        g = np.lib.stride_tricks.as_strided(buf[start + width:], (limit, stride - width), (stride, 1))
        ok = (g[:, :pre.size] == pre).all(axis=1) & (g[:, pre.size + digits:] == post).all(axis=1)
        nums = np.arange(num, num + limit)
        expect = (nums[:, None] // 10 ** np.arange(digits - 1, -1, -1)) % 10 + 0x30
        ok &= (g[:, pre.size:pre.size + digits] == expect).all(axis=1)
        good = limit if ok.all() else int(np.argmin(ok))
        if good < limit:
            segments.append((start, good + 1, stride))
            return segments, first
        segments.append((start, limit, stride))
        start, row = start + limit * stride, row + limit


def _decode_base64_fast(body: bytes) -> Embeddings | None:
    """The fast path for Base64 rows, or None to let the general path decide (and explain)."""
    m = _ROW.search(body)
    if m is None:
        return None
    s0 = m.end()
    width = body.find(b'"', s0) - s0
    if width <= 0 or width % 4 or body[s0 + width - 1] == 0x3D:  # '=': padded rows decode one by one
        return None
    buf = np.frombuffer(body, np.uint8)
    found = _segments(body, buf, s0, width)
    if found is None:
        return None
    segments, first = found
    n = sum(count for _, count, _ in segments)
    second = segments[0][0] + segments[0][2] if segments[0][1] > 1 else segments[1][0] if len(segments) > 1 else 0
    last_start, last_count, last_stride = segments[-1]
    last_end = last_start + (last_count - 1) * last_stride + width
    if last_end >= len(body) or body[last_end] != 0x22:
        return None
    try:
        # head and tail around one row, and around the first glue, are all the JSON left to read
        doc = orjson.loads(body[:s0] + body[last_end:])
        if n > 1:
            two = orjson.loads(body[:s0] + body[s0 + width:second] + body[last_end:])
            want = [0, 1] if first == 1 else [0, n - 1]
            if [item.get("index") for item in two["data"]] != want or two["data"][0].get("embedding") != "":
                return None
        if "kind" in doc:
            return None  # the general path names it
        data = doc["data"]
        if len(data) != 1 or data[0].get("embedding") != "" or data[0].get("index", 0) != (0 if first == 1 else n - 1):
            return None
        dtype = check_dtype(doc.get("dtype", "float32"))
        byteorder = check_byteorder(doc.get("byteorder", "little"))
        dims = doc.get("dimensions")
        rows = np.empty((n, width), np.uint8)  # every row copied out once, run by run, then decoded
        k = 0
        for start, count, stride in segments:
            rows[k:k + count] = np.lib.stride_tricks.as_strided(buf[start:], (count, width), (stride, 1))
            k += count
        raw = pybase64.b64decode(rows, validate=True)
    except (DensewireError, orjson.JSONDecodeError, KeyError, TypeError, ValueError, IndexError, AttributeError):
        return None
    rb = len(raw) // n
    size = 1 if dtype == "binary" else row_bytes(dtype, 1)
    if len(raw) % n or rb % size:
        return None
    d = rb * 8 if dtype == "binary" else rb // size
    if dims is not None:
        if not isinstance(dims, int) or isinstance(dims, bool) or row_bytes(dtype, dims) != rb:
            return None
        d = dims
    model = doc.get("model")
    if model is not None and not isinstance(model, str):
        return None
    quantization = doc.get("quantization")
    if quantization is not None and not isinstance(quantization, str):
        return None
    try:
        return Embeddings(Tensor.from_bytes(raw, dtype, (n, d), byteorder), model, Usage.parse(doc.get("usage")),
                          quantization)
    except DensewireError:
        return None
