"""The Open Inference Protocol over gRPC (``inference.GRPCInferenceService``, proto/inference/grpc_service.proto)
on densewire's pipeline: the model of SPEC.md 19.5 (input ``text``, ``BYTES``, ``[N]`` or ``[N, 1]``; output
``embedding``, ``[N, d]``, FP32 unless the parameter ``datatype`` asks FP16, BF16, INT8 or UINT8, the last
two with their ``quantization`` id; parameters ``dimensions`` and ``truncate``; the request ``id``
echoed), found under each served name and its last path segment. The protocol's rules are kserve.py's,
shared with the HTTP routes (kserve_routes.py); this module only moves them in and out of protobuf.

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

from densewire import DensewireError, InvalidFieldError
from densewire._kserve import bytes_elements

from .grpc_call import abort, error_text, incoming_of, ordered, run_grpc, service, stream, unary
from .grpcpb import grpc_service_pb2 as pb
from .kserve import (InferInput, RequestedOutput, embed_infer, find_model, infer_request, model_metadata,
                     server_metadata)
from .pipeline import Call

__all__ = ["handlers"]

#: the datatypes with a typed contents field (FP16 and BF16 have none: always raw)
_TYPED_FIELD = {"FP32": "fp32_contents", "INT8": "int_contents", "UINT8": "uint_contents"}


def _value(p: pb.InferParameter) -> Any:
    which = p.WhichOneof("parameter_choice")
    return getattr(p, which) if which is not None else None


def _inputs(req: pb.ModelInferRequest) -> list[InferInput]:
    """Each input as kserve.py reads it: a BYTES input's elements from ``raw_input_contents[i]`` (with the
    offset of each element's bytes in that blob) or from ``contents.bytes_contents``."""
    raw = req.raw_input_contents
    if raw and len(raw) != len(req.inputs):
        raise InvalidFieldError(f"{len(raw)} raw contents for {len(req.inputs)} inputs: one per input, in order",
                                field="raw_input_contents")
    out = []
    for i, t in enumerate(req.inputs):
        elements = offsets = None
        if raw:
            if t.HasField("contents"):
                raise InvalidFieldError("has contents beside raw_input_contents: send one or the other",
                                        field=f"inputs[{i}].contents")
            if t.datatype == "BYTES":
                elements = bytes_elements(memoryview(raw[i]), 0, f"raw_input_contents[{i}]")
                offsets, at = [], 0
                for e in elements:
                    offsets.append(at + 4)
                    at += 4 + len(e)
        elif t.datatype == "BYTES":
            elements = list(t.contents.bytes_contents)
        out.append(InferInput(t.name, t.datatype, tuple(t.shape), elements, offsets, binary=bool(raw)))
    return out


async def infer(call: Call, req: pb.ModelInferRequest) -> pb.ModelInferResponse:
    """One ModelInferRequest on kserve.py's core and the pipeline's model call; raw outputs for raw inputs."""
    find_model(call.service, req.model_name, req.model_version)
    ireq = infer_request(_inputs(req), [RequestedOutput(o.name, {k: _value(v) for k, v in o.parameters.items()})
                                        for o in req.outputs],
                         {k: _value(v) for k, v in req.parameters.items()}, req.id or None,
                         max_inputs=call.st.cfg.max_client_batch_size, native_dimensions=call.service.dimensions,
                         raw=bool(req.raw_input_contents))
    output, _tokens = await embed_infer(call, ireq)
    tensor = pb.ModelInferResponse.InferOutputTensor(name=output.name, datatype=output.datatype,
                                                     shape=list(output.shape))
    for key, value in output.parameters.items():
        if isinstance(value, str):
            tensor.parameters[key].string_param = value
    raw = ireq.binary or output.datatype not in _TYPED_FIELD
    if not raw:
        getattr(tensor.contents, _TYPED_FIELD[output.datatype]).extend(output.tensor.array.reshape(-1))
    answer = pb.ModelInferResponse(model_name=req.model_name, model_version="1", id=req.id, outputs=[tensor])
    if raw:
        answer.raw_output_contents.append(bytes(output.tensor.to_bytes()))
    return answer


def _metadata(e: Any, name: str) -> pb.ModelMetadataResponse:
    doc = model_metadata(e, name)
    t = pb.ModelMetadataResponse.TensorMetadata
    return pb.ModelMetadataResponse(name=doc["name"], versions=doc["versions"], platform=doc["platform"],
                                    inputs=[t(**x) for x in doc["inputs"]], outputs=[t(**x) for x in doc["outputs"]])


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
            find_model(e, m.name, m.version)
        except DensewireError as err:
            await abort(context, err)
        return pb.ModelReadyResponse(ready=st.readiness() is None)

    async def server_meta(_m: Any, context: grpc.aio.ServicerContext) -> pb.ServerMetadataResponse:
        await checked(context)
        return pb.ServerMetadataResponse(**server_metadata())

    async def model_metadata(m: pb.ModelMetadataRequest, context: grpc.aio.ServicerContext) -> pb.ModelMetadataResponse:
        e = await checked(context)
        try:
            find_model(e, m.name, m.version)
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
        ("ServerMetadata", u(server_meta, pb.ServerMetadataRequest, pb.ServerMetadataResponse)),
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
