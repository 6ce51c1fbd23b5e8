"""The Open Inference Protocol (KServe v2) of the server, transport-neutral (SPEC.md 19.5).

HTTP (``kserve_routes.py``) and gRPC (``inference.GRPCInferenceService``) are two thin adapters over
these functions; neither parses nor renders anything of the protocol itself:

1. ``find_model(embedder, name, version)``: ``NotFoundError`` unless the model is served under ``name``
   (a served name, an alias, or the last path segment of one: ``all-MiniLM-L6-v2``) and ``version`` is
   absent, empty or ``"1"``. ``server_metadata()`` and ``model_metadata(embedder, name)`` are the
   metadata as dicts (HTTP writes them as JSON; gRPC fills ``ServerMetadataResponse`` /
   ``ModelMetadataResponse`` from the same keys: ``inputs``/``outputs`` are ``{name, datatype, shape}``).
2. Reading a request: ``InferInput(name, datatype, shape, elements, offsets)`` per input (``elements``
   the bytes of each ``BYTES`` element: from JSON ``data``, from a binary blob (``bytes_elements``),
   or over gRPC from ``contents.bytes_contents`` or ``raw_input_contents[i]`` read by
   ``densewire._kserve.bytes_elements``; ``offsets`` their body offsets, or None), ``RequestedOutput(name,
   parameters)`` per requested output, the request's ``parameters`` as a plain dict (gRPC:
   ``InferParameter`` values unwrapped) and its ``id``, then ``infer_request(...)`` gives the
   :class:`InferRequest` (texts, output datatype, binary or not, dimensions, truncate, id). Over HTTP,
   ``parse_http_infer(body, headers, max_inputs)`` does all of that from a body.
3. ``await embed_infer(call, req)`` embeds on the shared pipeline's ``Call`` (admission, caches,
   batcher, metrics are the pipeline's) and gives ``(KServeOutput, prompt_tokens)``: the ``embedding``
   output with its ``tensor`` in the requested dtype and, for int8/uint8, ``parameters["quantization"]``.
4. Writing: HTTP ``densewire.encode_kserve([output], model_name=..., model_version="1", id=req.id)``;
   gRPC ``output.tensor.to_bytes()`` as ``raw_output_contents[0]`` with ``output.datatype``,
   ``output.shape`` and ``output.parameters``.

Errors are densewire's categories with the field (and body offset) of SPEC.md 19.3; SPEC.md 19.4 maps
them to HTTP statuses (``kserve_status``) and gRPC codes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from densewire import (DensewireError, InvalidFieldError, MalformedError, NotFoundError, ShapeMismatchError,
                       TruncatedError, __version__)
from densewire._kserve import (KSERVE_DATATYPES, KServeOutput, bytes_elements, json_elements, kserve_datatype,
                               output_for, parse_header_length, split_header)

from .request import EmbeddingsRequest, _integer, _type_name

__all__ = ["INPUT", "OUTPUT", "VERSION", "SERVED_DATATYPES", "InferInput", "RequestedOutput", "InferRequest",
           "find_model", "model_names", "server_metadata", "model_metadata", "infer_request",
           "parse_http_infer", "embed_infer", "kserve_status", "kserve_error_doc"]

INPUT, OUTPUT, VERSION = "text", "embedding", "1"
#: the embedding output's datatypes (SPEC.md 19.5): no FP64 (servers do not widen)
SERVED_DATATYPES = ("FP32", "FP16", "BF16", "INT8", "UINT8")


@dataclass(frozen=True)
class InferInput:
    """One input tensor as a transport gave it: ``elements`` for ``BYTES`` (None for other datatypes)."""

    name: str
    datatype: str
    shape: tuple[int, ...]
    elements: list[bytes] | None
    offsets: list[int] | None = None  # body offset of each element's bytes (binary data), for errors
    binary: bool = False


@dataclass(frozen=True)
class RequestedOutput:
    name: str
    parameters: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class InferRequest:
    texts: list[str]
    datatype: str  # of the embedding output (SERVED_DATATYPES)
    binary: bool  # the embedding output as binary data (a blob, or gRPC raw_output_contents)
    dimensions: int | None = None
    truncate: bool | None = None  # None: the server's --auto-truncate
    id: str | None = None
    output: str = OUTPUT

    @property
    def dtype(self) -> str:
        return KSERVE_DATATYPES[self.datatype]

    def embeddings_request(self, auto_truncate: bool) -> EmbeddingsRequest:
        return EmbeddingsRequest(texts=self.texts, token_ids=None, model=None, encoding_format="float",
                                 dimensions=self.dimensions, dtype=self.dtype, byteorder="little",
                                 truncate=auto_truncate if self.truncate is None else self.truncate)


# -- models and metadata -------------------------------------------------------------------------------

def model_names(embedder: Any) -> list[str]:
    """Every name the model is found under: its names and aliases, and the last path segment of each."""
    names = [*embedder.served_names, *sorted(n for n in embedder.aliases if n)]
    return list(dict.fromkeys([*names, *(n.rsplit("/", 1)[-1] for n in names)]))


def find_model(embedder: Any, name: str, version: str | None = None) -> None:
    if not (name in model_names(embedder) or (embedder.accept_any_model and name)):
        raise NotFoundError(f"unknown model {name!r}; this server serves {embedder.names_text()} (also under "
                            f"the last segment of the name)", field="model_name")
    if version not in (None, "", VERSION):
        raise NotFoundError(f"model {name!r} has no version {version!r}; its one version is {VERSION!r}",
                            field="model_version")


def server_metadata() -> dict[str, Any]:
    return {"name": "densewire", "version": __version__, "extensions": ["binary_tensor_data"]}


def model_metadata(embedder: Any, name: str) -> dict[str, Any]:
    return {"name": name, "versions": [VERSION], "platform": "densewire",
            "inputs": [{"name": INPUT, "datatype": "BYTES", "shape": [-1]}],
            "outputs": [{"name": OUTPUT, "datatype": "FP32", "shape": [-1, embedder.dimensions]}]}


# -- requests ------------------------------------------------------------------------------------------

def _texts(inp: InferInput, max_inputs: int) -> list[str]:
    f = "inputs[0]"
    if inp.name != INPUT:
        raise InvalidFieldError(f"unknown input {inp.name!r}; the model's one input is {INPUT!r} (BYTES)",
                                field=f"{f}.name")
    kserve_datatype(inp.datatype, f"{f}.datatype")
    if inp.datatype != "BYTES" or inp.elements is None:
        raise InvalidFieldError(f"the input {INPUT!r} is BYTES (UTF-8 texts), not {inp.datatype}",
                                field=f"{f}.datatype")
    shape = inp.shape
    if not (len(shape) == 1 or (len(shape) == 2 and shape[1] == 1)):
        raise InvalidFieldError(f"must be [N] or [N, 1] (N texts), not {list(shape)}", field=f"{f}.shape")
    if len(inp.elements) != shape[0]:
        raise ShapeMismatchError(f"{len(inp.elements)} elements, the shape {list(shape)} holds {shape[0]}",
                                 field=f if inp.binary else f"{f}.data")
    if shape[0] == 0:
        raise InvalidFieldError("has no texts: send at least one", field=f"{f}.shape")
    if shape[0] > max_inputs:
        raise InvalidFieldError(f"{shape[0]} texts; at most {max_inputs} are allowed (--max-client-batch-size)",
                                field=f"{f}.shape")
    texts = []
    for j, e in enumerate(inp.elements):
        try:
            text = e.decode("utf-8")
        except UnicodeDecodeError as exc:
            offset = inp.offsets[j] + exc.start if inp.offsets is not None else None
            raise InvalidFieldError(f"text {j} is not UTF-8 (byte {exc.start} of the element: {exc.reason})",
                                    field=f"{f}.data[{j}]", offset=offset) from None
        if not text:
            raise InvalidFieldError(f"text {j} is empty", field=f"{f}.data[{j}]")
        texts.append(text)
    return texts


def _bool(value: Any, field: str) -> bool:
    if not isinstance(value, bool):
        raise InvalidFieldError(f"must be a boolean, not {_type_name(value)}", field=field)
    return value


def _datatype(value: Any, field: str) -> str:
    kserve_datatype(value, field)
    if value not in SERVED_DATATYPES:
        raise InvalidFieldError(f"the embedding output is one of {', '.join(SERVED_DATATYPES)}, not {value}",
                                field=field)
    return value


def infer_request(inputs: Sequence[InferInput], outputs: Sequence[RequestedOutput],
                  parameters: Mapping[str, Any] | None, id: str | None, *, max_inputs: int,
                  native_dimensions: int, raw: bool = False) -> InferRequest:
    """The texts and options of an inference request, whatever the transport (SPEC.md 19.5); ``raw``:
    a raw binary request, all of whose outputs are binary."""
    params = dict(parameters or {})
    if len(inputs) != 1:
        raise InvalidFieldError(f"{len(inputs)} inputs; the model has one, {INPUT!r} (BYTES [N] or [N, 1])",
                                field="inputs")
    texts = _texts(inputs[0], max_inputs)
    binary = _bool(params["binary_data_output"], "parameters.binary_data_output") \
        if params.get("binary_data_output") is not None else raw
    datatype = _datatype(params["datatype"], "parameters.datatype") if params.get("datatype") is not None else "FP32"
    for i, out in enumerate(outputs):
        f = f"outputs[{i}]"
        if out.name != OUTPUT:
            raise NotFoundError(f"unknown output {out.name!r}; the model's one output is {OUTPUT!r}",
                                field=f"{f}.name")
        if out.parameters.get("binary_data") is not None:
            binary = _bool(out.parameters["binary_data"], f"{f}.parameters.binary_data")
        if out.parameters.get("datatype") is not None:
            datatype = _datatype(out.parameters["datatype"], f"{f}.parameters.datatype")
        if out.parameters.get("classification"):
            raise InvalidFieldError("the model is not a classifier: it has no class_count / classification",
                                    field=f"{f}.parameters.classification")
    dims = params.get("dimensions")
    if dims is not None:
        dims = _integer(dims, "parameters.dimensions", 1, native_dimensions)
    truncate = _bool(params["truncate"], "parameters.truncate") if params.get("truncate") is not None else None
    if id is not None and not isinstance(id, str):
        raise InvalidFieldError(f"must be a string, not {_type_name(id)}", field="id")
    return InferRequest(texts, datatype, binary, dims, truncate, id or None)


def _object(value: Any, field: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidFieldError(f"must be an object, not {_type_name(value)}", field=field)
    return value


def parse_http_infer(body: bytes, headers: Mapping[str, str], *, max_inputs: int,
                     native_dimensions: int) -> InferRequest:
    """An HTTP inference request body (JSON, or the binary tensor extension, or a raw binary request)."""
    kw = {"max_inputs": max_inputs, "native_dimensions": native_dimensions}
    if parse_header_length(headers, len(body)) == 0:  # Triton's raw binary request: the body is the one text
        inp = InferInput(INPUT, "BYTES", (1,), [bytes(body)], [0], binary=True)
        return infer_request([inp], [], None, None, raw=True, **kw)
    view = memoryview(body)
    doc, pos = split_header(view, headers)
    inputs_doc = doc.get("inputs")
    if not isinstance(inputs_doc, list):
        raise InvalidFieldError(f"must be an array of inputs, not {_type_name(inputs_doc)}", field="inputs")
    inputs = []
    for i, o in enumerate(inputs_doc):
        f = f"inputs[{i}]"
        if not isinstance(o, dict):
            raise InvalidFieldError(f"must be an object, not {_type_name(o)}", field=f)
        name, datatype, shape = o.get("name"), o.get("datatype"), o.get("shape")
        if not isinstance(name, str):
            raise InvalidFieldError(f"must be a string, not {_type_name(name)}", field=f"{f}.name")
        datatype = kserve_datatype(datatype, f"{f}.datatype")
        if not (isinstance(shape, list) and all(isinstance(s, int) and not isinstance(s, bool) and s >= 0
                                                for s in shape)):
            raise InvalidFieldError("must be an array of non-negative integers", field=f"{f}.shape")
        params = _object(o.get("parameters"), f"{f}.parameters")
        size = params.get("binary_data_size")
        elements = offsets = None
        if size is not None:
            sfield = f"{f}.parameters.binary_data_size"
            if not isinstance(size, int) or isinstance(size, bool) or not 0 <= size < 1 << 53:  # SPEC.md 19.3
                raise InvalidFieldError("must be an integer from 0 to 2^53 - 1", field=sfield)
            if "data" in o:
                raise InvalidFieldError("has both data and parameters.binary_data_size", field=f"{f}.data")
            if size > len(view) - pos:
                raise TruncatedError(f"a blob of {size} bytes at offset {pos} runs past the end of the "
                                     f"{len(view)}-byte body", offset=len(view), field=sfield)
            if datatype == "BYTES":
                elements = bytes_elements(view[pos:pos + size], pos, f)
                offsets, at = [], pos
                for e in elements:
                    offsets.append(at + 4)
                    at += 4 + len(e)
            pos += size
        elif "data" in o:
            values = json_elements(o["data"], f"{f}.data")
            if datatype == "BYTES":
                elements = []
                for j, v in enumerate(values):
                    if not isinstance(v, str):
                        raise InvalidFieldError(f"must be a string, not {_type_name(v)}", field=f"{f}.data[{j}]")
                    elements.append(v.encode("utf-8", "surrogatepass"))
        else:
            raise InvalidFieldError("has neither data nor parameters.binary_data_size", field=f"{f}.data")
        inputs.append(InferInput(name, datatype, tuple(shape), elements, offsets, binary=size is not None))
    if pos != len(view):
        raise MalformedError(f"{len(view) - pos} bytes after the last input tensor", offset=pos)
    outputs = []
    outputs_doc = doc.get("outputs")
    if outputs_doc is not None and not isinstance(outputs_doc, list):
        raise InvalidFieldError(f"must be an array of outputs, not {_type_name(outputs_doc)}", field="outputs")
    for i, o in enumerate(outputs_doc or []):
        if not isinstance(o, dict) or not isinstance(o.get("name"), str):
            raise InvalidFieldError("must be an object with a string name", field=f"outputs[{i}]")
        outputs.append(RequestedOutput(o["name"], _object(o.get("parameters"), f"outputs[{i}].parameters")))
    return infer_request(inputs, outputs, _object(doc.get("parameters"), "parameters"), doc.get("id"), **kw)


# -- embedding -----------------------------------------------------------------------------------------

async def embed_infer(call: Any, req: InferRequest) -> tuple[KServeOutput, int]:
    """The embedding output of a request, on the pipeline's ``Call`` (pipeline.py): the vectors in the
    requested dtype, int8/uint8 with their quantization id, and the prompt tokens."""
    call.service.check_dimensions(req.dimensions, field="parameters.dimensions")
    try:
        vectors, tokens = await call.embed(req.embeddings_request(call.st.cfg.auto_truncate))
    except InvalidFieldError as err:
        raise _on_input(err) from None
    tensor, quantization = await call.quantized(vectors, req.dtype, req.dimensions)
    return output_for(tensor, req.output, binary=req.binary, quantization=quantization), tokens


def _on_input(err: InvalidFieldError) -> InvalidFieldError:
    """An error on ``input[i]`` (a text too long to embed, not asked to be cut) placed on the KServe input."""
    f = err.field or ""
    if not f.startswith("input["):
        return err
    hint = "; send the parameter truncate: true to cut it, or run the server with --auto-truncate"
    return InvalidFieldError(err.message + hint, field="inputs[0].data" + f[len("input"):], offset=err.offset)


# -- errors --------------------------------------------------------------------------------------------

def kserve_status(err: DensewireError) -> int:
    """SPEC.md 19.4: the category's status, but 400 for invalid_field (Triton's)."""
    return 400 if isinstance(err, InvalidFieldError) else err.http_status


def kserve_error_doc(err: DensewireError) -> dict[str, Any]:
    """KServe's ``{"error": message}``, the field first, with densewire's code, param and offset beside it."""
    message = f"{err.field}: {err.message}" if err.field else err.message
    return {"error": message, "code": err.category, "param": err.field, "offset": err.offset}
