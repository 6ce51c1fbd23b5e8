"""Ragged and sparse tensors in the JSON envelope (SPEC.md 20.3): one item per input, its matrix as
Base64 (with its ``shape``) or arrays of rows, its sparse vector as ``indices``/``values`` (with ``nnz``)."""

from __future__ import annotations

import re

import numpy as np
import orjson

from ._base64 import b64decode_strict, b64encode
from ._convert import convert, widen
from ._errors import DensewireError, InvalidFieldError, LengthMismatchError, NonFiniteError, ShapeMismatchError
from ._json import _decode_number_rows, load_object, place_by_index
from ._ragged import MAX_VOCAB, RaggedTensor, SparseVectors, check_indices, check_sparse_dtype, check_vocab_size
from ._tensor import Embeddings, Tensor, Usage, check_byteorder, check_dtype, row_bytes, storage_dtype

__all__ = ["encode_json_kind", "decode_json_kind"]

_FLOATS = ("float32", "float16", "bfloat16", "float64")
_ROW_FIELD = re.compile(r"data\[(\d+)\]\.embedding(.*)")


def _numbers(t: Tensor, field) -> np.ndarray:
    """The values of ``t`` as JSON numbers are written (bfloat16 widened), non-finite ones refused."""
    values = widen(t) if t.dtype == "bfloat16" else t.array
    if t.dtype in _FLOATS:
        finite = np.isfinite(values)
        if not finite.all():
            at = tuple(int(v) for v in np.argwhere(~finite)[0])
            raise NonFiniteError(f"{values[at]} has no JSON number form; use encoding_format 'base64'", field=field(*at))
    return values


def _locate(offsets: np.ndarray, j: int) -> tuple[int, int]:
    """(item, position in it) of flat entry ``j``."""
    i = int(np.searchsorted(offsets, j, "right")) - 1
    return i, int(j - offsets[i])


def encode_json_kind(emb: Embeddings, encoding_format: str = "base64", byteorder: str = "little") -> bytes:
    """The canonical JSON response of a ragged or sparse tensor: compact, keys in SPEC.md order."""
    t = emb.tensor
    check_byteorder(byteorder)
    if encoding_format not in ("base64", "float"):
        raise InvalidFieldError(f"encoding_format must be 'float' or 'base64', got {encoding_format!r}",
                                field="encoding_format")
    b64 = encoding_format == "base64"
    sparse = isinstance(t, SparseVectors)
    offsets = t.offsets.astype(np.int64)
    items = []
    if sparse:
        order = "<" if byteorder == "little" else ">"
        if b64:
            ix = t.indices.astype(order + "u4")
            vals = t.values.astype(storage_dtype(t.dtype, byteorder))
        else:
            vals = _numbers(Tensor(t.values.reshape(1, -1), t.dtype, t.values.size),
                            lambda _, j: "data[%d].values[%d]" % _locate(offsets, j))[0]
        for i in range(t.n):
            a, b = offsets[i], offsets[i + 1]
            if b64:
                pair = b'"%s","values":"%s"' % (b64encode(ix[a:b].tobytes()), b64encode(vals[a:b].tobytes()))
            else:
                pair = orjson.dumps(t.indices[a:b], option=orjson.OPT_SERIALIZE_NUMPY) + b',"values":' + orjson.dumps(
                    vals[a:b], option=orjson.OPT_SERIALIZE_NUMPY)
            items.append(b'{"object":"sparse_embedding","index":%d,"indices":%s,"nnz":%d}' % (i, pair, b - a))
        d = t.vocab_size
    else:
        d = t.d
        if b64:
            rows = t.rows.to_bytes(byteorder)
            rb = row_bytes(t.dtype, d)
        else:
            values = _numbers(t.rows, lambda r, k: "data[%d].embedding[%d][%d]" % (*_locate(offsets, r), k))
        for i in range(t.n):
            a, b = offsets[i], offsets[i + 1]
            if b64:
                emb_text = b'"' + b64encode(memoryview(rows)[a * rb:b * rb]) + b'"'
            else:
                emb_text = orjson.dumps(values[a:b], option=orjson.OPT_SERIALIZE_NUMPY) if b > a else b"[]"
            items.append(b'{"object":"embedding","index":%d,"embedding":%s,"shape":[%d,%d]}' % (i, emb_text, b - a, d))
    usage = emb.usage or Usage()
    return b'{"object":"list","data":[%s],"model":%s,"usage":{"prompt_tokens":%d,"total_tokens":%d},' \
           b'"kind":"%s","dtype":"%s","byteorder":"%s","dimensions":%d}' % (
               b",".join(items), orjson.dumps(emb.model or ""), usage.prompt_tokens, usage.total_tokens,
               b"sparse" if sparse else b"ragged", t.dtype.encode(), (byteorder if b64 else "little").encode(), d)


# ------------------------------------------------------------------------------ decoding
def _count(v, field: str) -> int:
    if not isinstance(v, int) or isinstance(v, bool) or v < 0:
        raise InvalidFieldError(f"must be a non-negative integer, got {v!r}", field=field)
    return v


def _b64(text: str, field: str) -> bytes:
    try:
        return b64decode_strict(text)
    except DensewireError as exc:
        raise exc.located(field=field) from None


def _ragged_item(pos: int, item: dict, dtype: str, byteorder: str, d: int) -> Tensor:
    shape, emb = item.get("shape"), item.get("embedding")
    field = f"data[{pos}]"
    if shape is None and isinstance(emb, str):
        raise InvalidFieldError("a Base64 item needs its shape [m, d]", field=f"{field}.shape")
    if shape is not None:
        if (not isinstance(shape, list) or len(shape) != 2
                or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in shape)):
            raise InvalidFieldError(f"must be [m, d] with two non-negative integers, got {shape!r}", field=f"{field}.shape")
        if shape[1] != d:
            raise ShapeMismatchError(f"shape {shape} disagrees with dimensions {d}", field=f"{field}.shape")
    if isinstance(emb, str):
        raw = _b64(emb, f"{field}.embedding")
        want = shape[0] * row_bytes(dtype, d)
        if len(raw) != want:
            raise LengthMismatchError(f"{len(raw)} bytes, shape {shape} of {dtype} needs {want}",
                                      offset=min(len(raw), want), field=f"{field}.embedding")
        return Tensor.from_bytes(raw, dtype, (shape[0], d), byteorder)
    if not isinstance(emb, list):
        raise InvalidFieldError("must be a Base64 string or an array of rows", field=f"{field}.embedding")
    if shape is not None and len(emb) != shape[0]:
        raise ShapeMismatchError(f"{len(emb)} rows, the shape says {shape[0]}", field=f"{field}.shape")
    if not emb:
        width = row_bytes(dtype, d) if dtype == "binary" else d
        return Tensor(np.empty((0, width), storage_dtype(dtype)), dtype, d)
    try:
        return _decode_number_rows(emb, list(range(len(emb))), dtype, d)
    except DensewireError as exc:  # rows were decoded as items of data: place them inside this item
        m = _ROW_FIELD.fullmatch(exc.field or "")
        raise type(exc)(exc.message, offset=exc.offset,
                        field=f"{field}.embedding[{m.group(1)}]{m.group(2)}" if m else f"{field}.embedding") from None


def _sparse_item(pos: int, item: dict, dtype: str, byteorder: str, vocab: int) -> tuple[np.ndarray, np.ndarray]:
    field = f"data[{pos}]"
    nnz, ix, vals = item.get("nnz"), item.get("indices"), item.get("values")
    if nnz is None and isinstance(ix, str):
        raise InvalidFieldError("a Base64 item needs its nnz", field=f"{field}.nnz")
    if nnz is not None:
        _count(nnz, f"{field}.nnz")
    if not isinstance(ix, (str, list)):
        raise InvalidFieldError("must be a Base64 string or an array of integers", field=f"{field}.indices")
    if type(vals) is not type(ix):
        raise InvalidFieldError("must be of the kind of indices (both Base64 or both arrays)", field=f"{field}.values")
    if isinstance(ix, str):
        order = "<" if byteorder == "little" else ">"
        item_dt = storage_dtype(dtype, byteorder)
        parts = []
        for name, text, want in (("indices", ix, 4 * nnz), ("values", vals, nnz * item_dt.itemsize)):
            raw = _b64(text, f"{field}.{name}")
            if len(raw) != want:
                raise LengthMismatchError(f"{len(raw)} bytes, nnz {nnz} needs {want}", offset=min(len(raw), want),
                                          field=f"{field}.{name}")
            parts.append(raw)
        indices = np.frombuffer(parts[0], order + "u4").astype("<u4")
        values = np.frombuffer(parts[1], item_dt).astype(storage_dtype(dtype))
    else:
        for j, v in enumerate(ix):
            if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v < MAX_VOCAB:
                raise InvalidFieldError(f"an index is an integer from 0 to 2^32 - 1, got {v!r}",
                                        field=f"{field}.indices[{j}]")
        if len(vals) != len(ix) or (nnz is not None and nnz != len(ix)):
            raise ShapeMismatchError(f"{len(ix)} indices, {len(vals)} values" + (f", nnz {nnz}" if nnz is not None else ""),
                                     field=f"{field}.values")
        for j, v in enumerate(vals):
            if not isinstance(v, (int, float)) or isinstance(v, bool):
                raise InvalidFieldError(f"a value is a number, got {v!r}", field=f"{field}.values[{j}]")
        indices = np.array(ix, "<u4")
        values = convert(np.array(vals, np.float64).reshape(1, -1), dtype).array.reshape(-1) if vals else np.empty(
            0, storage_dtype(dtype))
    try:
        check_indices(indices, np.array([0, indices.size], "<u4"), vocab)
    except InvalidFieldError as exc:
        raise InvalidFieldError(exc.message, field=f"{field}.indices[{exc.offset // 4}]") from None
    return indices, values


def decode_json_kind(body, kind: str) -> Embeddings:
    """Decode a ragged or sparse JSON response (the parts are copied out of the text, once)."""
    doc = load_object(body)
    if doc.get("kind") != kind:
        raise InvalidFieldError(f"a {kind} response needs kind {kind!r}, got {doc.get('kind')!r}", field="kind")
    data = doc.get("data")
    if not isinstance(data, list):
        raise InvalidFieldError("missing or not an array", field="data")
    raw_dtype = doc.get("dtype", "float32")
    dtype = check_dtype(raw_dtype) if kind == "ragged" else check_sparse_dtype(raw_dtype)
    byteorder = check_byteorder(doc.get("byteorder", "little"))
    dims = doc.get("dimensions")
    if dims is None:
        raise InvalidFieldError(f"a {kind} response must say its dimensions", field="dimensions")
    d = _count(dims, "dimensions") if kind == "ragged" else check_vocab_size(dims, "dimensions")
    model = doc.get("model")
    if model is not None and not isinstance(model, str):
        raise InvalidFieldError("must be a string", field="model")
    usage = Usage.parse(doc.get("usage"))
    # SPEC.md 20.3: every index first, then the items in the order of data (by position), placed by index
    order = [pos for pos, _ in place_by_index(data)]
    if kind == "ragged":
        mats = [_ragged_item(pos, item, dtype, byteorder, d) for pos, item in enumerate(data)]
        return Embeddings(RaggedTensor.from_arrays([mats[pos].array for pos in order], dtype, d), model, usage)
    by_pos = [_sparse_item(pos, item, dtype, byteorder, d) for pos, item in enumerate(data)]
    pairs = [by_pos[pos] for pos in order]
    offsets = np.concatenate([[0], np.cumsum([p[0].size for p in pairs], dtype=np.int64)])
    indices = np.concatenate([p[0] for p in pairs]) if pairs else np.empty(0, "<u4")
    values = np.concatenate([p[1] for p in pairs]) if pairs else np.empty(0, storage_dtype(dtype))
    return Embeddings(SparseVectors(indices, values, offsets, d, dtype), model, usage)
