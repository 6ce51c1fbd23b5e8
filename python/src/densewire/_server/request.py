"""Parsing and validation of ``POST /v1/embeddings`` request bodies (SPEC.md section 6.1).

Every problem is a ``DensewireError`` naming the field, so the client sees which one was wrong.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from typing import Any, Callable

import orjson

from densewire import InvalidFieldError, MalformedError, UnknownDtypeError

__all__ = ["EmbeddingsRequest", "parse_embeddings_request", "REQUEST_FIELDS", "DENSEWIRE_FIELDS", "VLLM_FIELDS",
           "SERVED_DTYPES", "ALL_DTYPES", "ENCODING_FORMATS", "EMBED_DTYPES", "ENDIANNESS"]

#: OpenAI's fields (``user`` accepted and ignored) and densewire's (SPEC.md 6.1); ``return_multivector``
#: (Jina's name) asks for the per-token output, ``is_query`` (PyLate's) a ColBERT model's query mode
DENSEWIRE_FIELDS = ("input", "model", "encoding_format", "dimensions", "user", "dtype", "byteorder", "truncate",
                    "return_multivector", "is_query")
#: what vLLM's clients send on /v1/embeddings besides OpenAI's fields (vLLM's EmbeddingCompletionRequest):
#: served (embed_dtype, endianness, truncate_prompt_tokens, truncation_side, request_id) or accepted at the
#: value that means "as this server does anyway" (priority 0, add_special_tokens true, use_activation /
#: normalize true, padding do_not_pad) or accepted and ignored (cache_salt, mm_processor_kwargs)
VLLM_FIELDS = ("embed_dtype", "endianness", "truncate_prompt_tokens", "truncation_side", "request_id", "priority",
               "add_special_tokens", "use_activation", "normalize", "padding", "cache_salt", "mm_processor_kwargs")
REQUEST_FIELDS = DENSEWIRE_FIELDS + VLLM_FIELDS
SERVED_DTYPES = ("float32", "float16", "bfloat16", "int8", "uint8", "binary")
ALL_DTYPES = ("float32", "float16", "bfloat16", "float64", "int8", "uint8", "binary")
#: float and base64 are OpenAI's; bytes and bytes_only vLLM's binary response (vllm.py)
ENCODING_FORMATS = ("float", "base64", "bytes", "bytes_only")
#: vLLM's embed_dtype values; the fp8 ones exist only in vLLM's dialect (SPEC.md 6.3)
EMBED_DTYPES = ("float32", "float16", "bfloat16", "fp8_e4m3", "fp8_e5m2")
ENDIANNESS = ("native", "big", "little")


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
    #: cut each input to this many tokens (vLLM's truncate_prompt_tokens); None: the model's maximum
    token_limit: int | None = None
    #: which end a cut input keeps: "right" cuts the end (keeps the first tokens), "left" the start
    truncation_side: str = "right"
    #: vLLM's dialect (vllm.py): set when the request sends embed_dtype or endianness, or asks for bytes
    vllm: bool = False
    embed_dtype: str = "float32"  # vLLM's name; fp8_e4m3 / fp8_e5m2 only here
    endianness: str = "native"  # as sent (vLLM's metadata repeats it)
    request_id: str | None = None
    #: how token ids are read, when a route fixes it (TEI's ids are the model's): None = --token-ids
    token_ids_as: str | None = None
    #: token ids sent as one flat array (``input: [1, 2]``): errors name ``input[j]``, else ``input[i][j]``
    flat: bool = False
    #: ``return_multivector``: the per-token output (a ColBERT model's vectors, else the token states; multivector.py)
    multivector: bool = False
    #: ``is_query``: a ColBERT model's query mode (None: not sent, documents)
    is_query: bool | None = None

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


def _optional_bool(doc: dict[str, Any], key: str) -> bool | None:
    v = doc.get(key)
    if v is not None and not isinstance(v, bool):
        raise InvalidFieldError(f"must be a boolean, not {_type_name(v)}", field=key)
    return v


def _choice(doc: dict[str, Any], key: str, choices: tuple[str, ...]) -> str | None:
    v = doc.get(key)
    if v is None:
        return None
    if not isinstance(v, str):
        raise InvalidFieldError(f"must be a string, not {_type_name(v)}", field=key)
    if v not in choices:
        raise InvalidFieldError(f"must be one of {', '.join(map(repr, choices))}, not {v!r}", field=key)
    return v


#: vLLM's error for a truncate_prompt_tokens above the model's maximum (serving code, verbatim)
TRUNCATE_TOO_BIG = ("truncate_prompt_tokens value is greater than max_model_len. Please request a smaller "
                    "truncation size.")


def parse_embeddings_request(body: bytes, *, max_inputs: int, native_dimensions: int,
                             max_tokens: int | None = None, auto_truncate: bool = False,
                             check_model: Callable[[str | None], None] | None = None) -> EmbeddingsRequest:
    """Parse and check a request body; raises ``DensewireError`` naming the field.

    ``check_model`` judges ``model`` before every other field (an unserved model is its 404 whatever else
    the request says); ``auto_truncate`` is what an absent ``truncate`` means (``--auto-truncate``);
    ``max_tokens`` bounds ``truncate_prompt_tokens`` (vLLM's 400 above it)."""
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise MalformedError(f"request body is not valid JSON: {exc}", offset=getattr(exc, "pos", None)) from None
    if not isinstance(doc, dict):
        raise MalformedError(f"request body must be a JSON object, not {_type_name(doc)}")
    model = doc.get("model")
    if model is not None and not isinstance(model, str):
        raise InvalidFieldError(f"must be a string, not {_type_name(model)}", field="model")
    if check_model is not None:
        check_model(model)
    for key in doc:
        if key not in REQUEST_FIELDS:
            raise InvalidFieldError(
                f"unknown field; the accepted fields are {', '.join(DENSEWIRE_FIELDS)} (OpenAI's and densewire's) "
                f"and {', '.join(VLLM_FIELDS)} (vLLM's)", field=key)
    if "input" not in doc:
        raise InvalidFieldError("is required", field="input")
    texts, token_ids = _parse_input(doc["input"], max_inputs)

    encoding_format = doc.get("encoding_format", "float")
    if encoding_format is None:
        encoding_format = "float"
    if encoding_format not in ENCODING_FORMATS:
        raise InvalidFieldError(
            f"must be 'float' or 'base64' (or vLLM's 'bytes' or 'bytes_only'), not {encoding_format!r}",
            field="encoding_format")

    dimensions = doc.get("dimensions")
    if dimensions is not None:
        dimensions = _integer(dimensions, "dimensions", 1, native_dimensions)

    user = doc.get("user")
    if user is not None and not isinstance(user, str):
        raise InvalidFieldError(f"must be a string, not {_type_name(user)}", field="user")

    dtype = doc.get("dtype")
    if dtype is not None:
        if not isinstance(dtype, str):
            raise InvalidFieldError(f"must be a string, not {_type_name(dtype)}", field="dtype")
        if dtype not in ALL_DTYPES:
            raise UnknownDtypeError(
                f"unknown dtype {dtype!r}; the server answers in {', '.join(SERVED_DTYPES)}", field="dtype")
        if dtype not in SERVED_DTYPES:
            raise InvalidFieldError(
                f"dtype {dtype!r} is not produced by the server; use one of {', '.join(SERVED_DTYPES)}",
                field="dtype")

    byteorder = doc.get("byteorder")
    if byteorder is not None and byteorder not in ("little", "big"):
        raise InvalidFieldError(f"must be 'little' or 'big', not {byteorder!r}", field="byteorder")

    truncate = doc.get("truncate")
    if truncate is None:
        truncate = auto_truncate  # no silent cut unless the server runs with --auto-truncate
    if not isinstance(truncate, bool):
        raise InvalidFieldError(f"must be a boolean, not {_type_name(truncate)}", field="truncate")

    # -- vLLM's fields ----------------------------------------------------------------------------
    embed_dtype = _choice(doc, "embed_dtype", EMBED_DTYPES)
    endianness = _choice(doc, "endianness", ENDIANNESS)
    vllm = embed_dtype is not None or endianness is not None or encoding_format in ("bytes", "bytes_only")
    if embed_dtype is not None and dtype is not None and embed_dtype != dtype:
        raise InvalidFieldError(f"{embed_dtype!r} disagrees with dtype {dtype!r}: send one of the two",
                                field="embed_dtype")
    if vllm and dtype in ("binary", "int8", "uint8"):
        raise InvalidFieldError(f"vLLM's fields (embed_dtype, endianness, bytes) do not apply to dtype {dtype!r}",
                                field="dtype")
    if endianness is not None:
        resolved = sys.byteorder if endianness == "native" else endianness
        if byteorder is not None and byteorder != resolved:
            raise InvalidFieldError(f"{endianness!r} disagrees with byteorder {byteorder!r}: send one of the two",
                                    field="endianness")
        byteorder = resolved
    if embed_dtype is not None and embed_dtype in SERVED_DTYPES:
        dtype = embed_dtype
    if vllm and encoding_format == "float" and doc.get("dtype") is None:
        dtype = "float32"  # as vLLM: numbers are the float32 values, embed_dtype applies to base64 and bytes

    token_limit = doc.get("truncate_prompt_tokens")
    if token_limit is not None:
        token_limit = _integer(token_limit, "truncate_prompt_tokens", -1, 0xFFFFFFFF)
        if token_limit == 0:
            raise InvalidFieldError("must be -1 (the model's maximum) or a positive number of tokens",
                                    field="truncate_prompt_tokens")
        if max_tokens is not None and token_limit > max_tokens:
            raise InvalidFieldError(f"{token_limit}: {TRUNCATE_TOO_BIG} (max_model_len is {max_tokens}; -1 cuts "
                                    f"at it)", field="truncate_prompt_tokens")
        if token_limit == -1 or token_limit == max_tokens:  # vLLM: -1 cuts at the model's maximum
            token_limit = None
        truncate = True  # a request that sends a count asks to cut, whatever truncate says
    side = _choice(doc, "truncation_side", ("left", "right")) or "right"

    request_id = doc.get("request_id")
    if request_id is not None and not isinstance(request_id, str):
        raise InvalidFieldError(f"must be a string, not {_type_name(request_id)}", field="request_id")
    priority = doc.get("priority")
    if priority is not None and _integer(priority, "priority", -(2**63), 2**63 - 1) != 0:
        raise InvalidFieldError("priority scheduling is not enabled on this server; send 0 or leave it out",
                                field="priority")
    if _optional_bool(doc, "add_special_tokens") is False:
        raise InvalidFieldError("this server always adds the model's special tokens; send true or leave it out",
                                field="add_special_tokens")
    for key in ("use_activation", "normalize"):
        if _optional_bool(doc, key) is False:
            raise InvalidFieldError("this server answers the model's own (normalised) vectors; send true or "
                                    "leave it out", field=key)
    if _choice(doc, "padding", ("max_length", "do_not_pad")) == "max_length":
        raise InvalidFieldError("this server does not pad inputs; send 'do_not_pad' or leave it out", field="padding")
    salt = doc.get("cache_salt")
    if salt is not None and (not isinstance(salt, str) or not 1 <= len(salt) <= 1024):
        raise InvalidFieldError("must be a string of 1 to 1024 characters", field="cache_salt")
    mm = doc.get("mm_processor_kwargs")
    if mm is not None and not isinstance(mm, dict):
        raise InvalidFieldError(f"must be an object, not {_type_name(mm)}", field="mm_processor_kwargs")

    return EmbeddingsRequest(
        texts=texts, token_ids=token_ids, model=model, encoding_format=encoding_format,
        dimensions=dimensions, dtype=dtype or "float32", byteorder=byteorder or "little", truncate=truncate,
        token_limit=token_limit, truncation_side=side, vllm=vllm, embed_dtype=embed_dtype or dtype or "float32",
        request_id=request_id, endianness=endianness or "native",
        flat=token_ids is not None and bool(doc["input"]) and _is_int(doc["input"][0]),
        multivector=bool(_optional_bool(doc, "return_multivector")), is_query=_optional_bool(doc, "is_query"),
    )
