"""The Open Inference Protocol (KServe v2) and its binary tensor data extension (SPEC.md section 19).

:func:`decode_kserve` reads an inference response (a JSON object alone, or a JSON header of
``Inference-Header-Content-Length`` bytes followed by the binary blobs of the outputs that have
``parameters.binary_data_size``) into :class:`KServeOutput` objects: a densewire :class:`Tensor` per
tensor output (a numpy view over the body for binary data, no copy) or the elements of a ``BYTES``
output. :func:`encode_kserve` writes one. The pieces a server's request parser shares (datatypes,
``BYTES`` elements, blob splitting) are here too.

>>> import numpy as np
>>> t = Tensor.from_array(np.array([[1.0, -2.5]], dtype=np.float32))
>>> body, headers = encode_kserve([KServeOutput("embedding", "FP32", (1, 2), tensor=t, binary=True)])
>>> headers["Inference-Header-Content-Length"], len(body)
('102', 110)
>>> decode_kserve(body, headers).outputs["embedding"].tensor.array
array([[ 1. , -2.5]], dtype=float32)
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import orjson

from ._convert import convert
from ._errors import (InvalidFieldError, MalformedError, NonFiniteError, ShapeMismatchError, TruncatedError,
                      UnknownDtypeError)
from ._tensor import Embeddings, Tensor, widen

__all__ = ["KSERVE_DATATYPES", "KSERVE_OTHER_DATATYPES", "HEADER_LENGTH", "KServeOutput", "KServeResponse",
           "decode_kserve", "encode_kserve", "kserve_datatype", "parse_header_length", "split_header",
           "bytes_elements", "encode_bytes_elements", "json_elements", "output_for"]

#: KServe datatype -> densewire dtype (SPEC.md 19.1); BYTES is text, not a tensor dtype
KSERVE_DATATYPES: dict[str, str] = {"FP32": "float32", "FP16": "float16", "BF16": "bfloat16", "FP64": "float64",
                                    "INT8": "int8", "UINT8": "uint8"}
#: KServe datatypes densewire has no dtype for (unknown_dtype when read)
KSERVE_OTHER_DATATYPES = ("BOOL", "INT16", "INT32", "INT64", "UINT16", "UINT32", "UINT64")
_DATATYPE_OF = {v: k for k, v in KSERVE_DATATYPES.items()}
HEADER_LENGTH = "Inference-Header-Content-Length"
_U32 = struct.Struct("<I")
_INT_RANGE = {"int8": (-128, 127), "uint8": (0, 255)}


@dataclass(frozen=True)
class KServeOutput:
    """One output (or input) tensor: a densewire ``tensor`` for the datatypes of SPEC.md 19.1, or the
    ``elements`` (bytes) of a ``BYTES`` tensor; ``binary``: it travels (travelled) as a blob."""

    name: str
    datatype: str
    shape: tuple[int, ...]
    tensor: Tensor | None = None
    elements: list[bytes] | None = None
    parameters: dict[str, Any] = field(default_factory=dict)
    binary: bool = False

    @property
    def quantization(self) -> str | None:
        q = self.parameters.get("quantization")
        return q if isinstance(q, str) else None


@dataclass(frozen=True)
class KServeResponse:
    """An inference response: its outputs by name, in order, and its ``model_name``, ``model_version``,
    ``id`` and ``parameters`` as sent."""

    outputs: dict[str, KServeOutput]
    model_name: str | None = None
    model_version: str | None = None
    id: str | None = None
    parameters: dict[str, Any] = field(default_factory=dict)

    def embeddings(self, name: str = "embedding") -> Embeddings:
        """The output ``name`` as densewire ``Embeddings`` (the model, and the quantization id of int8/uint8)."""
        out = self.outputs.get(name)
        if out is None or out.tensor is None:
            raise InvalidFieldError(f"no tensor output {name!r}; the response has {', '.join(self.outputs) or 'none'}",
                                    field="outputs")
        return Embeddings(out.tensor, self.model_name, None, out.quantization)


def kserve_datatype(value: object, field: str) -> str:
    """A KServe datatype name checked (BYTES or one of SPEC.md 19.1): ``unknown_dtype`` otherwise."""
    if not isinstance(value, str):
        raise InvalidFieldError(f"must be a string, not {_type_name(value)}", field=field)
    if value == "BYTES" or value in KSERVE_DATATYPES:
        return value
    if value in KSERVE_OTHER_DATATYPES:
        raise UnknownDtypeError(f"{value} has no densewire dtype; expected one of "
                                f"{', '.join(KSERVE_DATATYPES)} or BYTES", field=field)
    raise UnknownDtypeError(f"unknown datatype {value!r}; expected one of {', '.join(KSERVE_DATATYPES)} or BYTES",
                            field=field)


def parse_header_length(headers: Mapping[str, str] | None, body_len: int) -> int | None:
    """``Inference-Header-Content-Length`` checked against the body (SPEC.md 19.3 step 1); None when absent."""
    if not headers:
        return None
    value = next((v for k, v in headers.items() if k.lower() == "inference-header-content-length"), None)
    if value is None:
        return None
    text = value.strip()
    if not (text.isascii() and text.isdigit()):
        raise InvalidFieldError(f"must be a decimal byte count, not {value[:40]!r}", field=HEADER_LENGTH)
    n = int(text)
    if n > body_len:
        raise TruncatedError(f"the JSON header is {n} bytes but the body has only {body_len}",
                             offset=body_len, field=HEADER_LENGTH)
    return n


def split_header(body, headers: Mapping[str, str] | None) -> tuple[dict[str, Any], int]:
    """The JSON object of a body and the offset where its blobs start (SPEC.md 19.3 steps 1-2)."""
    view = memoryview(body)
    h = parse_header_length(headers, view.nbytes)
    if h is None:
        h = view.nbytes
    try:
        doc = orjson.loads(view[:h])
    except orjson.JSONDecodeError as exc:
        raise MalformedError(f"the inference header is not valid JSON: {exc}", offset=getattr(exc, "pos", None)) from None
    if not isinstance(doc, dict):
        raise MalformedError(f"the inference header must be a JSON object, not {_type_name(doc)}", offset=0)
    return doc, h


def bytes_elements(blob: memoryview, start: int, field: str) -> list[bytes]:
    """The elements of a ``BYTES`` blob (4-byte little-endian length, then the bytes), ``start`` its body offset."""
    out, pos, end = [], 0, blob.nbytes
    while pos < end:
        if end - pos < 4:
            raise MalformedError(f"a BYTES element length needs 4 bytes, {end - pos} left in the tensor",
                                 offset=start + pos, field=field)
        (n,) = _U32.unpack_from(blob, pos)
        if n > end - pos - 4:
            raise MalformedError(f"a BYTES element of {n} bytes runs past the end of its tensor "
                                 f"({end - pos - 4} bytes left)", offset=start + pos, field=field)
        out.append(bytes(blob[pos + 4:pos + 4 + n]))
        pos += 4 + n
    return out


def encode_bytes_elements(elements: Sequence[bytes]) -> bytes:
    return b"".join(_U32.pack(len(e)) + e for e in elements)


def json_elements(data: object, field: str) -> list:
    """A JSON ``data`` array, flat or nested, in row-major order."""
    if not isinstance(data, list):
        raise InvalidFieldError(f"must be an array, not {_type_name(data)}", field=field)
    if not any(isinstance(v, list) for v in data):
        return data
    flat: list = []
    stack = [iter(data)]
    while stack:
        for v in stack[-1]:
            if isinstance(v, list):
                stack.append(iter(v))
                break
            flat.append(v)
        else:
            stack.pop()
    return flat


def _type_name(v: object) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null",
            int: "an integer", float: "a number"}.get(type(v), type(v).__name__)


#: the largest entry of a tensor's shape (SPEC.md 19.2): n x row_bytes stays within 64-bit arithmetic
MAX_SHAPE_ENTRY = (1 << 31) - 1


def _shape(value: object, field: str, tensor: bool) -> tuple[int, ...]:
    ok = isinstance(value, list) and all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in value)
    if not ok or (tensor and len(value) not in (1, 2)):  # type: ignore[arg-type]
        raise InvalidFieldError(f"must be an array of {'one or two ' if tensor else ''}non-negative integers, "
                                f"not {orjson.dumps(value).decode()[:60]}", field=field)
    if tensor and max(value, default=0) > MAX_SHAPE_ENTRY:  # type: ignore[type-var]
        raise InvalidFieldError(f"entries are at most {MAX_SHAPE_ENTRY}, not {max(value)}", field=field)  # type: ignore[type-var]
    return tuple(value)  # type: ignore[arg-type]


def _count(shape: Sequence[int]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def _nd(shape: tuple[int, ...]) -> tuple[int, int]:
    return (1, shape[0]) if len(shape) == 1 else (shape[0], shape[1])


def _tensor_from_json(values: list, dtype: str, nd: tuple[int, int], field: str) -> Tensor:
    for j, v in enumerate(values):
        if type(v) is not float and type(v) is not int:
            raise InvalidFieldError(f"must be a number, not {_type_name(v)}", field=f"{field}[{j}]")
    if dtype in _INT_RANGE:
        lo, hi = _INT_RANGE[dtype]
        for j, v in enumerate(values):  # 3.0 is the number 3 (SPEC.md 3.5)
            if not (type(v) is int or v.is_integer()) or not lo <= v <= hi:
                raise InvalidFieldError(f"{v!r} is not a {dtype} value ({lo} to {hi})", field=f"{field}[{j}]")
        storage = np.int8 if dtype == "int8" else np.uint8
        return Tensor(np.array(values, dtype=storage).reshape(nd), dtype, nd[1])
    a = np.array(values, dtype=np.float64).reshape(nd)
    return convert(a, dtype)


def decode_kserve(body, headers: Mapping[str, str] | None = None) -> KServeResponse:
    """Read a KServe v2 inference response (SPEC.md 19.3): binary outputs are zero-copy views over ``body``."""
    view = memoryview(body).cast("B") if not isinstance(body, (bytes, bytearray)) else memoryview(body)
    if parse_header_length(headers, view.nbytes) == 0:
        raise MalformedError("a response has a JSON header; Inference-Header-Content-Length is 0", offset=0,
                             field=HEADER_LENGTH)
    doc, pos = split_header(view, headers)
    outputs_doc = doc.get("outputs")
    if not isinstance(outputs_doc, list):
        raise InvalidFieldError(f"must be an array of outputs, not {_type_name(outputs_doc)}", field="outputs")
    specs = []
    for i, o in enumerate(outputs_doc):
        f = f"outputs[{i}]"
        if not isinstance(o, dict):
            raise InvalidFieldError(f"must be an object, not {_type_name(o)}", field=f)
        name = o.get("name")
        if not isinstance(name, str):
            raise InvalidFieldError(f"must be a string, not {_type_name(name)}", field=f"{f}.name")
        if not isinstance(o.get("datatype"), str):
            raise InvalidFieldError(f"must be a string, not {_type_name(o.get('datatype'))}", field=f"{f}.datatype")
        params = o.get("parameters", {})
        if params is None:
            params = {}
        if not isinstance(params, dict):
            raise InvalidFieldError(f"must be an object, not {_type_name(params)}", field=f"{f}.parameters")
        size = params.get("binary_data_size")
        # SPEC.md 19.3: an integer from 0 to 2^53 - 1; nothing past it is capped or cut to fit
        if size is not None and (not isinstance(size, int) or isinstance(size, bool) or not 0 <= size < 1 << 53):
            raise InvalidFieldError(f"must be an integer from 0 to 2^53 - 1, not {(str(size) if isinstance(size, int) else orjson.dumps(size).decode())[:40]}",
                                    field=f"{f}.parameters.binary_data_size")
        datatype = kserve_datatype(o["datatype"], f"{f}.datatype")
        shape = _shape(o.get("shape"), f"{f}.shape", datatype != "BYTES")
        q = params.get("quantization")
        if q is not None and not isinstance(q, str):
            raise InvalidFieldError(f"must be a string, not {_type_name(q)}", field=f"{f}.parameters.quantization")
        specs.append((f, name, datatype, shape, params, size, o))
    outputs: dict[str, KServeOutput] = {}
    for f, name, datatype, shape, params, size, o in specs:
        has_data = "data" in o
        if size is not None and has_data:
            raise InvalidFieldError("has both data and parameters.binary_data_size", field=f"{f}.data")
        if size is None and not has_data:
            raise InvalidFieldError("has neither data nor parameters.binary_data_size", field=f"{f}.data")
        tensor = elements = None
        if size is not None:
            sfield = f"{f}.parameters.binary_data_size"
            if size > view.nbytes - pos:
                raise TruncatedError(f"a blob of {size} bytes at offset {pos} runs past the end of the "
                                     f"{view.nbytes}-byte body", offset=view.nbytes, field=sfield)
            blob = view[pos:pos + size]
            if datatype == "BYTES":
                elements = bytes_elements(blob, pos, f)
                if len(elements) != _count(shape):
                    raise ShapeMismatchError(f"{len(elements)} BYTES elements, the shape {list(shape)} holds "
                                             f"{_count(shape)}", field=f)
            else:
                dtype = KSERVE_DATATYPES[datatype]
                tensor = Tensor.from_bytes(blob, dtype, _nd(shape), field=sfield, offset=pos)
            pos += size
        else:
            dfield = f"{f}.data"
            values = json_elements(o["data"], dfield)
            if len(values) != _count(shape):
                raise ShapeMismatchError(f"{len(values)} elements, the shape {list(shape)} holds {_count(shape)}",
                                         field=dfield)
            if datatype == "BYTES":
                elements = []
                for j, v in enumerate(values):
                    if not isinstance(v, str):
                        raise InvalidFieldError(f"must be a string, not {_type_name(v)}", field=f"{dfield}[{j}]")
                    elements.append(v.encode())
            else:
                tensor = _tensor_from_json(values, KSERVE_DATATYPES[datatype], _nd(shape), dfield)
        outputs[name] = KServeOutput(name, datatype, shape, tensor, elements, params, size is not None)
    if pos != view.nbytes:
        raise MalformedError(f"{view.nbytes - pos} bytes after the last tensor", offset=pos)
    return KServeResponse(outputs, _str(doc, "model_name"), _str(doc, "model_version"), _str(doc, "id"),
                          doc.get("parameters") if isinstance(doc.get("parameters"), dict) else {})


def _str(doc: dict, key: str) -> str | None:
    v = doc.get(key)
    return v if isinstance(v, str) else None


def _json_data(out: KServeOutput, field: str) -> bytes:
    """An output's JSON ``data`` (flat, row-major), numbers in their shortest form."""
    if out.datatype == "BYTES":
        try:
            return orjson.dumps([e.decode() for e in out.elements or []])
        except UnicodeDecodeError as exc:
            raise InvalidFieldError(f"a BYTES element is not UTF-8 ({exc.reason}); ask for binary data",
                                    field=field) from None
    t = out.tensor
    assert t is not None
    values = widen(t) if t.dtype == "bfloat16" else t.array
    if values.dtype.kind == "f":
        finite = np.isfinite(values)
        if not finite.all():
            i, j = map(int, np.argwhere(~finite)[0])
            raise NonFiniteError(f"{values[i, j]} has no JSON number form; ask for binary data",
                                 field=f"{field}[{i * t.d + j}]")
    return orjson.dumps(values.reshape(-1), option=orjson.OPT_SERIALIZE_NUMPY)


def encode_kserve(outputs: Sequence[KServeOutput], *, model_name: str | None = None,
                  model_version: str | None = None, id: str | None = None,
                  parameters: Mapping[str, Any] | None = None) -> tuple[bytes, dict[str, str]]:
    """A KServe v2 inference response: the JSON object alone when no output is ``binary``, else the header
    and the blobs, with ``Inference-Header-Content-Length`` (SPEC.md 19.3)."""
    parts: list[bytes] = []
    blobs: list[bytes | memoryview] = []
    for i, out in enumerate(outputs):
        params = {k: v for k, v in out.parameters.items() if k != "binary_data_size"}
        head = {"name": out.name, "datatype": out.datatype, "shape": list(out.shape)}
        if out.binary:
            blob = (encode_bytes_elements(out.elements or []) if out.datatype == "BYTES"
                    else out.tensor.to_bytes("little"))  # type: ignore[union-attr]
            params["binary_data_size"] = memoryview(blob).nbytes
            blobs.append(blob)
            head["parameters"] = params
            parts.append(orjson.dumps(head))
        else:
            if params:
                head["parameters"] = params
            parts.append(orjson.dumps(head)[:-1] + b',"data":' + _json_data(out, f"outputs[{i}].data") + b"}")
    top: dict[str, Any] = {}
    for key, value in (("model_name", model_name), ("model_version", model_version), ("id", id)):
        if value is not None:
            top[key] = value
    if parameters:
        top["parameters"] = dict(parameters)
    prefix = orjson.dumps(top)[:-1] + (b"," if top else b"")
    header = prefix + b'"outputs":[' + b",".join(parts) + b"]}"
    if not blobs:
        return header, {"Content-Type": "application/json"}
    return b"".join([header, *blobs]), {"Content-Type": "application/octet-stream",
                                        HEADER_LENGTH: str(len(header))}


def output_for(tensor: Tensor, name: str = "embedding", *, binary: bool = True,
               quantization: str | None = None) -> KServeOutput:
    """An embeddings tensor as a KServe output of its datatype (SPEC.md 19.1)."""
    datatype = _DATATYPE_OF.get(tensor.dtype)
    if datatype is None:
        raise InvalidFieldError(f"{tensor.dtype} has no KServe datatype", field="datatype")
    params = {"quantization": quantization} if quantization is not None else {}
    return KServeOutput(name, datatype, (tensor.n, tensor.d), tensor=tensor, parameters=params, binary=binary)

