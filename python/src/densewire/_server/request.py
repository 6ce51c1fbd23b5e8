"""Parsing and validation of ``POST /v1/embeddings`` request bodies (SPEC.md section 6.1).

Every problem is a ``DensewireError`` naming the field, so the client sees which one was wrong.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import orjson

from densewire import InvalidFieldError, MalformedError, UnknownDtypeError

__all__ = ["EmbeddingsRequest", "parse_embeddings_request", "REQUEST_FIELDS", "SERVED_DTYPES", "ALL_DTYPES"]

REQUEST_FIELDS = ("input", "model", "encoding_format", "dimensions", "user", "dtype", "byteorder", "truncate")
SERVED_DTYPES = ("float32", "float16", "bfloat16", "int8", "uint8", "binary")
ALL_DTYPES = ("float32", "float16", "bfloat16", "float64", "int8", "uint8", "binary")


@dataclass
class EmbeddingsRequest:
    texts: list[str] | None  # exactly one of texts / token_ids is set
    token_ids: list[list[int]] | None
    model: str | None
    encoding_format: str
    dimensions: int | None
    dtype: str
    byteorder: str
    truncate: bool

    @property
    def count(self) -> int:
        return len(self.texts if self.texts is not None else self.token_ids)  # type: ignore[arg-type]


def _type_name(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, (int, float)):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    return "object"


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _integer(v: Any, field: str, low: int, high: int, what: str = "an integer") -> int:
    """``v`` as an int in [low, high], else an error that says which: a number outside the range is
    out of range (``1e30``, ``-1``, ``1e400``), one inside it that is not an int is not an integer
    (``2.5``, ``3.0``: JSON numbers with a fraction or exponent are floats)."""
    if _is_int(v):
        if low <= v <= high:
            return v
    elif isinstance(v, float):
        if math.isfinite(v) and low <= v <= high:
            raise InvalidFieldError(f"must be {what}, not {v!r}", field=field)
    else:
        raise InvalidFieldError(f"must be {what}, not {_type_name(v)}", field=field)
    shown = f"{v:g}" if isinstance(v, float) else str(v)
    raise InvalidFieldError(f"{shown} is out of range: must be {what} between {low} and {high}", field=field)


def _token_list(v: list[Any], field: str) -> list[int]:
    if not v:
        raise InvalidFieldError("must not be an empty list of token ids", field=field)
    for j, tok in enumerate(v):
        if not _is_int(tok):
            if isinstance(tok, float):
                _integer(tok, f"{field}[{j}]", 0, 0xFFFFFFFF, "a token id (an integer)")  # raises
            raise InvalidFieldError(
                f"must be a token id (an integer), not {_type_name(tok)}", field=f"{field}[{j}]")
        if tok < 0 or tok > 0xFFFFFFFF:
            raise InvalidFieldError(f"{tok} is out of range: a token id is between 0 and {0xFFFFFFFF}",
                                    field=f"{field}[{j}]")
    return v


def _parse_input(value: Any, max_inputs: int) -> tuple[list[str] | None, list[list[int]] | None]:
    if isinstance(value, str):
        if not value:
            raise InvalidFieldError("must not be an empty string", field="input")
        return [value], None
    if not isinstance(value, list):
        raise InvalidFieldError(
            f"must be a string, an array of strings, an array of token ids or an array of "
            f"arrays of token ids, not {_type_name(value)}", field="input")
    if not value:
        raise InvalidFieldError("must not be an empty array", field="input")
    if len(value) > max_inputs:
        raise InvalidFieldError(
            f"{len(value)} items; at most {max_inputs} are allowed per request", field="input")
    first = value[0]
    if isinstance(first, str):
        for i, item in enumerate(value):
            if not isinstance(item, str):
                raise InvalidFieldError(
                    f"must be a string like the other items, not {_type_name(item)}",
                    field=f"input[{i}]")
            if not item:
                raise InvalidFieldError("must not be an empty string", field=f"input[{i}]")
        return value, None
    if _is_int(first):
        return None, [_token_list(value, "input")]
    if isinstance(first, list):
        out: list[list[int]] = []
        for i, item in enumerate(value):
            if not isinstance(item, list):
                raise InvalidFieldError(
                    f"must be an array of token ids like the other items, not {_type_name(item)}",
                    field=f"input[{i}]")
            out.append(_token_list(item, f"input[{i}]"))
        return None, out
    raise InvalidFieldError(
        f"must be a string, a token id or an array of token ids, not {_type_name(first)}",
        field="input[0]")


def parse_embeddings_request(body: bytes, *, max_inputs: int, native_dimensions: int) -> EmbeddingsRequest:
    """Parse and check a request body; raises ``DensewireError`` naming the field."""
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise MalformedError(f"request body is not valid JSON: {exc}", offset=getattr(exc, "pos", None)) from None
    if not isinstance(doc, dict):
        raise MalformedError(f"request body must be a JSON object, not {_type_name(doc)}")
    for key in doc:
        if key not in REQUEST_FIELDS:
            raise InvalidFieldError(
                f"unknown field; the accepted fields are {', '.join(REQUEST_FIELDS)}", field=key)
    if "input" not in doc:
        raise InvalidFieldError("is required", field="input")
    texts, token_ids = _parse_input(doc["input"], max_inputs)

    model = doc.get("model")
    if model is not None and not isinstance(model, str):
        raise InvalidFieldError(f"must be a string, not {_type_name(model)}", field="model")

    encoding_format = doc.get("encoding_format", "float")
    if encoding_format is None:
        encoding_format = "float"
    if encoding_format not in ("float", "base64"):
        raise InvalidFieldError(
            f"must be 'float' or 'base64', not {encoding_format!r}", field="encoding_format")

    dimensions = doc.get("dimensions")
    if dimensions is not None:
        dimensions = _integer(dimensions, "dimensions", 1, native_dimensions)

    user = doc.get("user")
    if user is not None and not isinstance(user, str):
        raise InvalidFieldError(f"must be a string, not {_type_name(user)}", field="user")

    dtype = doc.get("dtype", "float32")
    if dtype is None:
        dtype = "float32"
    if not isinstance(dtype, str):
        raise InvalidFieldError(f"must be a string, not {_type_name(dtype)}", field="dtype")
    if dtype not in ALL_DTYPES:
        raise UnknownDtypeError(
            f"unknown dtype {dtype!r}; the server answers in {', '.join(SERVED_DTYPES)}", field="dtype")
    if dtype not in SERVED_DTYPES:
        raise InvalidFieldError(
            f"dtype {dtype!r} is not produced by the server; use one of {', '.join(SERVED_DTYPES)}",
            field="dtype")

    byteorder = doc.get("byteorder", "little")
    if byteorder is None:
        byteorder = "little"
    if byteorder not in ("little", "big"):
        raise InvalidFieldError(f"must be 'little' or 'big', not {byteorder!r}", field="byteorder")

    truncate = doc.get("truncate", True)
    if truncate is None:
        truncate = True
    if not isinstance(truncate, bool):
        raise InvalidFieldError(f"must be a boolean, not {_type_name(truncate)}", field="truncate")

    return EmbeddingsRequest(
        texts=texts, token_ids=token_ids, model=model, encoding_format=encoding_format,
        dimensions=dimensions, dtype=dtype, byteorder=byteorder, truncate=truncate,
    )
