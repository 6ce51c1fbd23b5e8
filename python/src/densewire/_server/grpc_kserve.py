"""The Open Inference Protocol over gRPC (``inference.GRPCInferenceService``, proto/inference/grpc_service.proto)
on densewire's pipeline: the model of SPEC.md 19.5 (input ``text``, ``BYTES``, ``[N]`` or ``[N, 1]``; output
``embedding``, ``[N, d]``, FP32 unless the parameter ``datatype`` asks FP16, BF16, INT8 or UINT8, the last
two with their ``quantization`` id; parameters ``dimensions`` and ``truncate``; the request ``id``
echoed), found under each served name and its last path segment.

``ModelInfer`` reads the texts from ``raw_input_contents`` (each element a 4-byte little-endian length and
its bytes) or from ``contents.bytes_contents``, and answers in the same form as asked: raw contents for
raw inputs (as Triton always answers, and KServe for raw requests), typed contents otherwise (FP16 and
BF16 have no typed field: always raw). ``ModelStreamInfer`` is Triton's: one ``ModelStreamInferResponse``
per request, in order, a failed request answered by its ``error_message`` while the stream goes on.
``ServerLive``/``ServerReady``/``ModelReady`` are ``/health``, ``/ready`` and the model's readiness.
"""

from __future__ import annotations

from typing import Any, AsyncIterator

import grpc
import numpy as np

from densewire import DensewireError, InvalidFieldError, NotFoundError, ShapeMismatchError, __version__
from densewire._kserve import KSERVE_DATATYPES, bytes_elements, kserve_datatype

from .dialects import _length_error, _request
from .grpc_server import abort, error_text, incoming_of, ordered, run_grpc, service, stream, unary
from .grpcpb import grpc_service_pb2 as pb
from .pipeline import Call

__all__ = ["handlers", "INPUT", "OUTPUT", "ANSWER_DATATYPES"]

INPUT, OUTPUT, PLATFORM, VERSION = "text", "embedding", "densewire", "1"
#: the output datatypes a request may ask for (SPEC.md 19.5)
ANSWER_DATATYPES = ("FP32", "FP16", "BF16", "INT8", "UINT8")
_TYPED_FIELD = {"FP32": "fp32_contents", "INT8": "int_contents", "UINT8": "uint_contents"}
_HINT = "send the parameter truncate: true to embed its first tokens, or run the server with --auto-truncate"


def model_names(e: Any) -> set[str]:
    """Each served name and its last path segment (Triton's model names have no '/')."""
    return {n for name in e.served_names for n in (name, name.rsplit("/", 1)[-1])}


def find_model(e: Any, name: str, version: str, field: str = "model_name") -> None:
    if not (name in model_names(e) or e.accept_any_model):
        raise NotFoundError(f"unknown model {name!r}; this server serves {e.names_text()}", field=field)
    if version not in ("", VERSION):
        raise NotFoundError(f"model {name!r} has no version {version!r}; its one version is {VERSION!r}",
                            field=field.replace("name", "version"))


def _param(params: Any, key: str, kind: str, field: str) -> Any:
    """A parameter's value of the oneof ``kind`` (bool_param, int64_param, string_param), None when absent."""
    if key not in params:
        return None
    p = params[key]
    which = p.WhichOneof("parameter_choice")
    if which != kind:
        raise InvalidFieldError(f"must be a {kind.split('_')[0]} parameter, not {which or 'empty'}",
                                field=f"{field}.{key}")
    return getattr(p, kind)


def _texts(req: pb.ModelInferRequest, max_inputs: int) -> list[str]:
    """The texts of the one ``BYTES`` input, from raw or typed contents, each checked as UTF-8."""
    if len(req.inputs) != 1:
        raise InvalidFieldError(f"the model takes one input, {INPUT!r}; {len(req.inputs)} were sent", field="inputs")
    tensor = req.inputs[0]
    if tensor.name != INPUT:
        raise InvalidFieldError(f"unknown input {tensor.name!r}; the model's input is {INPUT!r}", field="inputs[0].name")
    datatype = kserve_datatype(tensor.datatype, "inputs[0].datatype")
    if datatype != "BYTES":
        raise InvalidFieldError(f"the input {INPUT!r} is BYTES (one UTF-8 text per element), not {datatype}",
                                field="inputs[0].datatype")
    shape = list(tensor.shape)
    if not (len(shape) == 1 or (len(shape) == 2 and shape[1] == 1)) or shape[0] < 0:
        raise ShapeMismatchError(f"the input {INPUT!r} has shape [N] or [N, 1], not {shape}", field="inputs[0].shape")
    n = shape[0]
    if n > max_inputs:
        raise InvalidFieldError(f"{n} texts are more than the {max_inputs} of one request (--max-client-batch-size)",
                                field="inputs[0].shape")
    if req.raw_input_contents:
        if tensor.HasField("contents"):
            raise InvalidFieldError("raw_input_contents and contents cannot both be given",
                                    field="inputs[0].contents")
        if len(req.raw_input_contents) != 1:
            raise InvalidFieldError(f"{len(req.raw_input_contents)} raw contents for 1 input",
                                    field="raw_input_contents")
        blob = memoryview(req.raw_input_contents[0])
        elements = bytes_elements(blob, 0, "raw_input_contents[0]")
        offsets = np.cumsum([0] + [4 + len(e) for e in elements])[:-1] + 4
    else:
        elements = list(tensor.contents.bytes_contents)
        offsets = None
    if len(elements) != n:
        where = "raw_input_contents[0]" if offsets is not None else "inputs[0].contents.bytes_contents"
        raise ShapeMismatchError(f"the shape {shape} says {n} texts, the data holds {len(elements)}", field=where)
    texts = []
    for j, e in enumerate(elements):
        try:
            texts.append(e.decode("utf-8"))
        except UnicodeDecodeError as exc:
            at = int(offsets[j]) + exc.start if offsets is not None else exc.start
            raise InvalidFieldError(f"not UTF-8 text: byte {e[exc.start]:#04x} at {exc.start} of the element",
                                    field=f"inputs[0].data[{j}]", offset=at) from None
    return texts


def _answer_datatype(req: pb.ModelInferRequest) -> str:
    """The output's datatype: its own parameter, else the request's, else FP32; unknown outputs not_found."""
    wanted = _param(req.parameters, "datatype", "string_param", "parameters")
    for i, out in enumerate(req.outputs):
        if out.name != OUTPUT:
            raise NotFoundError(f"unknown output {out.name!r}; the model's output is {OUTPUT!r}",
                                field=f"outputs[{i}].name")
        own = _param(out.parameters, "datatype", "string_param", f"outputs[{i}].parameters")
        wanted = own if own is not None else wanted
    wanted = wanted or "FP32"
    if wanted not in ANSWER_DATATYPES:
        kserve_datatype(wanted, "parameters.datatype")  # unknown_dtype for a name that is no datatype
        raise InvalidFieldError(f"the output {OUTPUT!r} is one of {', '.join(ANSWER_DATATYPES)}, not {wanted}",
                                field="parameters.datatype")
    return wanted


async def infer(call: Call, req: pb.ModelInferRequest) -> pb.ModelInferResponse:
    """One ModelInferRequest through the pipeline's model call, its vectors in the asked datatype."""
    service_ = call.service
    find_model(service_, req.model_name, req.model_version)
    datatype = _answer_datatype(req)
    texts = _texts(req, call.st.cfg.max_client_batch_size)
    dims = _param(req.parameters, "dimensions", "int64_param", "parameters")
    truncate = _param(req.parameters, "truncate", "bool_param", "parameters")
    if dims is not None:
        if not 1 <= dims <= service_.dimensions:
            raise InvalidFieldError(f"must be in [1, {service_.dimensions}], not {dims}", field="parameters.dimensions")
        service_.check_dimensions(dims, field="parameters.dimensions")
    er = _request(texts, None, dims=dims, truncate=bool(truncate) or call.st.cfg.auto_truncate)
    try:
        vectors, _tokens = await call.embed(er)
    except InvalidFieldError as err:
        raise _length_error(err, "inputs[0].data", _HINT) from None
    tensor, quantization = await call.quantized(vectors, KSERVE_DATATYPES[datatype], dims)
    array = tensor.array
    out = pb.ModelInferResponse.InferOutputTensor(name=OUTPUT, datatype=datatype, shape=list(array.shape))
    if quantization is not None:
        out.parameters["quantization"].string_param = quantization
    answer = pb.ModelInferResponse(model_name=req.model_name, model_version=VERSION, id=req.id)
    if req.raw_input_contents or datatype not in _TYPED_FIELD:
        answer.outputs.append(out)
        answer.raw_output_contents.append(np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<")).tobytes())
    else:
        getattr(out.contents, _TYPED_FIELD[datatype]).extend(array.reshape(-1))
        answer.outputs.append(out)
    return answer


def _metadata(e: Any, name: str) -> pb.ModelMetadataResponse:
    t = pb.ModelMetadataResponse.TensorMetadata
    return pb.ModelMetadataResponse(name=name, versions=[VERSION], platform=PLATFORM,
                                    inputs=[t(name=INPUT, datatype="BYTES", shape=[-1])],
                                    outputs=[t(name=OUTPUT, datatype="FP32", shape=[-1, e.dimensions])])


def handlers(st: Any) -> list[grpc.GenericRpcHandler]:
    name = "inference.GRPCInferenceService"

    async def live(_m: Any, _c: grpc.aio.ServicerContext) -> pb.ServerLiveResponse:
        return pb.ServerLiveResponse(live=True)

    async def ready(_m: Any, _c: grpc.aio.ServicerContext) -> pb.ServerReadyResponse:
        return pb.ServerReadyResponse(ready=st.readiness() is None)

    async def checked(context: grpc.aio.ServicerContext) -> Any:
        """The API key and a loaded model, for the calls outside admission (metadata, readiness)."""
        try:
            st.check_auth(incoming_of(context))
            return st.require_embedder()
        except DensewireError as err:
            await abort(context, err)

    async def model_ready(m: pb.ModelReadyRequest, context: grpc.aio.ServicerContext) -> pb.ModelReadyResponse:
        e = await checked(context)
        try:
            find_model(e, m.name, m.version, "name")
        except DensewireError as err:
            await abort(context, err)
        return pb.ModelReadyResponse(ready=st.readiness() is None)

    async def server_metadata(_m: Any, context: grpc.aio.ServicerContext) -> pb.ServerMetadataResponse:
        await checked(context)
        return pb.ServerMetadataResponse(name="densewire", version=__version__, extensions=[])

    async def model_metadata(m: pb.ModelMetadataRequest, context: grpc.aio.ServicerContext) -> pb.ModelMetadataResponse:
        e = await checked(context)
        try:
            find_model(e, m.name, m.version, "name")
        except DensewireError as err:
            await abort(context, err)
        return _metadata(e, m.name)

    async def model_infer(m: pb.ModelInferRequest, context: grpc.aio.ServicerContext) -> pb.ModelInferResponse:
        return await run_grpc(st, context, f"/{name}/ModelInfer", lambda call: infer(call, m))

    async def stream_infer(msgs: AsyncIterator[Any], context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        async def each(m: Any) -> pb.ModelStreamInferResponse:
            if isinstance(m, DensewireError):
                return pb.ModelStreamInferResponse(error_message=error_text(m))
            try:
                answer = await run_grpc(st, _StreamItem(context), f"/{name}/ModelStreamInfer",
                                        lambda call: infer(call, m))
            except _Refused as refused:
                return pb.ModelStreamInferResponse(error_message=refused.text)
            return pb.ModelStreamInferResponse(infer_response=answer)

        async for out in ordered(msgs, each):
            yield out

    u = lambda fn, req, resp: unary(st, fn, req, resp)  # noqa: E731
    return [service(name, [
        ("ServerLive", u(live, pb.ServerLiveRequest, pb.ServerLiveResponse)),
        ("ServerReady", u(ready, pb.ServerReadyRequest, pb.ServerReadyResponse)),
        ("ModelReady", u(model_ready, pb.ModelReadyRequest, pb.ModelReadyResponse)),
        ("ServerMetadata", u(server_metadata, pb.ServerMetadataRequest, pb.ServerMetadataResponse)),
        ("ModelMetadata", u(model_metadata, pb.ModelMetadataRequest, pb.ModelMetadataResponse)),
        ("ModelInfer", u(model_infer, pb.ModelInferRequest, pb.ModelInferResponse)),
        ("ModelStreamInfer", stream(st, stream_infer, pb.ModelInferRequest, pb.ModelStreamInferResponse)),
    ])]


class _Refused(Exception):
    def __init__(self, text: str) -> None:
        self.text = text


class _StreamItem:
    """The context of one request of a Triton stream: its failure is the stream's ``error_message`` (the
    stream goes on) instead of the end of the call."""

    def __init__(self, context: grpc.aio.ServicerContext) -> None:
        self._context = context

    def __getattr__(self, name: str) -> Any:
        return getattr(self._context, name)

    async def abort(self, code: grpc.StatusCode, details: str = "", trailing_metadata: Any = ()) -> None:
        raise _Refused(details)
