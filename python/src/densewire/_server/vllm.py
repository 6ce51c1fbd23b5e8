"""vLLM's dialect of ``POST /v1/embeddings`` (SPEC.md 6.3): ``embed_dtype``, ``endianness`` and the
``bytes`` / ``bytes_only`` binary response, answered as vLLM answers them.

What vLLM does (``vllm/utils/serial_utils.py``, ``vllm/entrypoints/pooling/embed/serving.py``):

* ``encoding_format: "float"``: the float32 values as JSON numbers, whatever ``embed_dtype`` says;
* ``"base64"``: each row's bytes in ``embed_dtype`` and ``endianness``, Base64 in the JSON envelope;
* ``"bytes"``: ``application/octet-stream``, the rows' bytes back to back, and a ``metadata`` header
  holding JSON ``{"id", "created", "model", "data": [{"index", "embed_dtype", "endianness", "start",
  "end", "shape"}], "usage": {"prompt_tokens", "total_tokens"}}``;
* ``"bytes_only"``: the same body without the header (it outgrows header limits on large batches).

``endianness`` ``native`` is the server's byte order. fp8 rows are torch's ``float8_e4m3fn`` and
``float8_e5m2`` bytes: :func:`to_fp8` reproduces torch's conversion from float32 bit for bit.
A response whose rows are densewire dtypes in little-endian order also carries densewire's own
description (JSON ``dtype``/``byteorder``/``dimensions``; the raw ``Densewire-*`` headers), so densewire's
decoders read it too; fp8 JSON says ``"dtype": "fp8_e4m3"``, which they refuse rather than misread.
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from typing import Any

import numpy as np
import orjson
import pybase64

from densewire import Embeddings, InvalidFieldError, Tensor, convert, encode
from densewire._convert import widen

from .request import EmbeddingsRequest, _type_name

__all__ = ["to_fp8", "vllm_rows", "render_vllm_json", "render_vllm_bytes", "vllm_id"]

#: the embed_dtype values of vLLM's /pooling (its per-token and sparse answers)
_POOLING_DTYPES = ("float32", "float16", "bfloat16")

FP8 = ("fp8_e4m3", "fp8_e5m2")


def to_fp8(x: np.ndarray, kind: str) -> np.ndarray:
    """float32 -> fp8 bytes (uint8) exactly as torch's ``tensor.to(torch.float8_e4m3fn / float8_e5m2)``
    (c10's ``fp8e4m3fn_from_fp32_value`` / ``fp8e5m2_from_fp32_value``): round to nearest, ties to even;
    e4m3fn has no infinity, so magnitudes above 464 (and NaN, +-Inf) become NaN (0x7f, with the sign);
    e5m2 gives +-Inf from 65536 on (0x7c) and NaN (0x7f) for NaN."""
    f = np.ascontiguousarray(x, dtype=np.float32)
    bits = f.view(np.uint32)
    sign = bits & np.uint32(0x80000000)
    mag = bits ^ sign
    if kind == "fp8_e4m3":
        limit, small, denorm, shift, bias = 1087 << 20, 121 << 23, 141 << 23, 20, (7 - 127) << 23
        over = np.uint32(0x7F)
        round_add = 0x7FFFF
    elif kind == "fp8_e5m2":
        limit, small, denorm, shift, bias = 143 << 23, 113 << 23, 134 << 23, 21, (15 - 127) << 23
        over = np.where(mag > np.uint32(0x7F800000), np.uint32(0x7F), np.uint32(0x7C))
        round_add = 0xFFFFF
    else:
        raise ValueError(f"unknown fp8 kind {kind!r}")
    denorm_f = np.array([denorm], dtype=np.uint32).view(np.float32)[0]
    with np.errstate(over="ignore", invalid="ignore"):
        # below the smallest normal: add a magic number so that float32 rounding does the work
        sub = ((mag.view(np.float32) + denorm_f).view(np.uint32) - np.uint32(denorm)) & np.uint32(0xFF)
        odd = (mag >> np.uint32(shift)) & np.uint32(1)
        norm = ((mag + np.uint32(bias & 0xFFFFFFFF) + np.uint32(round_add) + odd) >> np.uint32(shift)) & np.uint32(0xFF)
    out = np.where(mag >= np.uint32(limit), over, np.where(mag < np.uint32(small), sub, norm))
    return (out | (sign >> np.uint32(24))).astype(np.uint8)


def vllm_rows(vectors: np.ndarray, req: EmbeddingsRequest) -> np.ndarray:
    """The rows as vLLM writes them for base64 and bytes: ``(n, row_bytes)`` uint8, in ``embed_dtype``
    and the requested byte order."""
    kind = req.embed_dtype
    if kind in FP8:
        return to_fp8(vectors, kind)
    if kind == "float32":
        arr = np.ascontiguousarray(vectors, dtype=np.float32)
    elif kind == "float16":
        arr = vectors.astype(np.float16)
    else:  # bfloat16: densewire's conversion (round to nearest even), as torch's
        arr = convert(Tensor.from_array(np.ascontiguousarray(vectors, dtype=np.float32)), "bfloat16").array
    order = sys.byteorder if req.endianness == "native" else req.endianness
    if order == "big":
        arr = arr.byteswap()
    return np.ascontiguousarray(arr).view(np.uint8).reshape(len(vectors), -1)


def vllm_id(req: EmbeddingsRequest, header_request_id: str | None) -> str:
    """vLLM's response id: ``embd-`` and the request's ``request_id`` (or ``X-Request-Id``), else a uuid."""
    return "embd-" + (req.request_id or header_request_id or uuid.uuid4().hex)


def render_vllm_json(emb: Embeddings, vectors: np.ndarray, req: EmbeddingsRequest, response_id: str) -> bytes:
    """vLLM's JSON response (``id``, ``object``, ``created``, ``model``, ``data``, ``usage`` with
    ``completion_tokens`` and ``prompt_tokens_details``), with densewire's ``dtype``, ``byteorder``
    and ``dimensions`` after them."""
    usage = emb.usage
    n, d = vectors.shape
    head = {"id": response_id, "object": "list", "created": int(time.time()), "model": emb.model or ""}
    if req.encoding_format == "float":
        values = widen(emb.tensor) if emb.tensor.dtype == "bfloat16" else emb.tensor.array
        data = orjson.dumps([{"index": i, "object": "embedding", "embedding": row} for i, row in enumerate(values)],
                            option=orjson.OPT_SERIALIZE_NUMPY)
        dtype, byteorder = emb.tensor.dtype, "little"
    else:
        rows = vllm_rows(vectors, req)
        data = orjson.dumps([{"index": i, "object": "embedding", "embedding": pybase64.b64encode(row.tobytes()).decode()}
                             for i, row in enumerate(rows)])
        dtype = req.embed_dtype
        byteorder = sys.byteorder if req.endianness == "native" else req.endianness
    tail = {"usage": {"prompt_tokens": usage.prompt_tokens if usage else 0,
                      "total_tokens": usage.total_tokens if usage else 0,
                      "completion_tokens": 0, "prompt_tokens_details": None},
            "dtype": dtype, "byteorder": byteorder, "dimensions": d}
    return orjson.dumps(head)[:-1] + b',"data":' + data + b"," + orjson.dumps(tail)[1:]


def render_vllm_bytes(emb: Embeddings, vectors: np.ndarray, req: EmbeddingsRequest,
                      response_id: str) -> tuple[bytes | memoryview, dict[str, str]]:
    """vLLM's ``bytes`` / ``bytes_only`` body and headers. Little-endian rows of a densewire dtype are
    densewire's raw body (SPEC.md 7) too, with its ``Densewire-*`` headers."""
    order = sys.byteorder if req.endianness == "native" else req.endianness
    headers: dict[str, str] = {}
    if req.embed_dtype not in FP8 and order == "little":
        body, raw_headers = encode(emb, "raw")
        headers.update(raw_headers)
    else:
        body = vllm_rows(vectors, req).tobytes()
    headers["Content-Type"] = "application/octet-stream"
    if req.encoding_format == "bytes":
        n, d = vectors.shape
        size = len(body) // n if n else 0
        usage = emb.usage
        items = [{"index": i, "embed_dtype": req.embed_dtype, "endianness": req.endianness, "start": i * size,
                  "end": (i + 1) * size, "shape": [d]} for i in range(n)]
        headers["metadata"] = json.dumps({
            "id": response_id, "created": int(time.time()), "model": emb.model or "", "data": items,
            "usage": {"prompt_tokens": usage.prompt_tokens if usage else 0,
                      "total_tokens": usage.total_tokens if usage else 0}})
    return body, headers


def check_vllm_format(req: EmbeddingsRequest, fmt: str) -> None:
    """fp8 exists only in vLLM's own responses: not in densewire's binary formats."""
    if req.embed_dtype in FP8 and fmt != "json" and req.encoding_format not in ("bytes", "bytes_only"):
        raise InvalidFieldError(
            f"{req.embed_dtype} is served only in vLLM's responses (encoding_format base64, bytes or bytes_only), "
            f"not as {fmt}", field="embed_dtype")


# -- /pooling (tokens.py, sparse_routes.py) ---------------------------------------------------------

def _choice(doc: dict[str, Any], key: str, allowed: tuple[str, ...], default: str) -> str:
    v = doc.get(key)
    if v is None:
        return default
    if v not in allowed:
        raise InvalidFieldError(f"must be one of {', '.join(allowed)}, not {v!r}", field=key)
    return v


def _pooling_inputs(value: Any, max_inputs: int) -> list[str]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value or not all(isinstance(s, str) and s for s in value):
        raise InvalidFieldError(f"must be a non-empty string or array of non-empty strings, not {_type_name(value)}",
                                field="input")
    if len(value) > max_inputs:
        raise InvalidFieldError(f"{len(value)} inputs; at most {max_inputs} are allowed", field="input")
    return value


def _vllm_matrix_bytes(m: np.ndarray, embed_dtype: str, endianness: str) -> bytes:
    """One matrix as vLLM writes a tensor's bytes: in ``embed_dtype`` and the byte order asked for."""
    if embed_dtype == "float16":
        arr = m.astype(np.float16)
    elif embed_dtype == "bfloat16":
        arr = convert(Tensor.from_array(np.ascontiguousarray(m, np.float32)), "bfloat16").array
    else:
        arr = np.ascontiguousarray(m, np.float32)
    order = sys.byteorder if endianness == "native" else endianness
    return (arr.byteswap() if order == "big" else arr).tobytes()
