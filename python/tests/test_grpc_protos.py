"""proto/: densewire's text of the Open Inference Protocol's gRPC API keeps the protocol's names and numbers
(every message, field, type and method compared with the descriptors tritonclient ships, which are
Triton's own), and proto/generate.py --check passes on the committed code and fails on stale code."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from google.protobuf import descriptor_pb2
from tritonclient.grpc import service_pb2 as triton

REPO = Path(__file__).resolve().parents[2]


def _ours(tmp: Path) -> descriptor_pb2.FileDescriptorProto:
    """proto/inference/grpc_service.proto as protoc reads it (a descriptor set: not registered in this
    process's pool, where tritonclient's file defines the same names)."""
    from grpc_tools import protoc

    out = tmp / "grpc_service.pb"
    assert protoc.main(["protoc", f"-I{REPO / 'proto'}", f"--descriptor_set_out={out}",
                        str(REPO / "proto/inference/grpc_service.proto")]) == 0
    return descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file[0]


def _fields(message: descriptor_pb2.DescriptorProto, prefix: str = "") -> dict:
    out = {}
    for f in message.field:
        out[f"{prefix}{message.name}.{f.name}"] = (f.number, f.type, f.label, f.type_name.rsplit(".", 1)[-1],
                                                   f.oneof_index if f.HasField("oneof_index") else None)
    for nested in message.nested_type:
        out.update(_fields(nested, f"{prefix}{message.name}."))
    return out


def test_inference_messages_and_methods_are_tritons(tmp_path) -> None:
    ours = _ours(tmp_path)
    theirs = descriptor_pb2.FileDescriptorProto()
    triton.DESCRIPTOR.CopyToProto(theirs)
    assert ours.package == theirs.package == "inference"
    by_name = {m.name: m for m in theirs.message_type}
    for message in ours.message_type:
        mine = _fields(message)
        assert mine == {k: v for k, v in _fields(by_name[message.name]).items() if k in mine}, message.name
        assert set(mine) == set(_fields(by_name[message.name])), message.name  # no field left out
    (service,) = ours.service
    (their_service,) = theirs.service
    assert service.name == their_service.name == "GRPCInferenceService"
    methods = {m.name: (m.input_type, m.output_type, m.client_streaming, m.server_streaming)
               for m in their_service.method}
    for m in service.method:
        assert methods[m.name] == (m.input_type, m.output_type, m.client_streaming, m.server_streaming), m.name


def test_generate_check_passes_and_fails_when_stale(tmp_path) -> None:
    tree = tmp_path / "tree"
    shutil.copytree(REPO / "proto", tree / "proto", ignore=shutil.ignore_patterns("__pycache__"))
    out = tree / "python/src/densewire/_server/grpcpb"
    shutil.copytree(REPO / "python/src/densewire/_server/grpcpb", out, ignore=shutil.ignore_patterns("__pycache__"))
    run = lambda: subprocess.run([sys.executable, str(tree / "proto/generate.py"), "--check"],  # noqa: E731
                                 capture_output=True, text=True, timeout=120)
    ok = run()
    assert ok.returncode == 0, ok.stderr
    proto = tree / "proto/tei/v1/tei.proto"
    proto.write_text(proto.read_text().replace("message DecodeResponse {\n    string text = 1;",
                                               "message DecodeResponse {\n    string text = 1;\n    bool cut = 2;"))
    stale = run()
    assert stale.returncode == 1 and "tei_pb2.py" in stale.stderr and "proto/generate.py" in stale.stderr
    assert subprocess.run([sys.executable, str(tree / "proto/generate.py")], timeout=120).returncode == 0
    assert run().returncode == 0
    (out / "old_pb2.py").write_text("# no longer generated\n")
    assert run().returncode == 1


def test_served_messages_live_beside_another_copy_of_the_protocol() -> None:
    """densewire's generated messages are in its own descriptor pool: tritonclient's copy of inference.* (imported
    above, in the default pool) and the server's load in one process."""
    from densewire._server.grpcpb import POOL, grpc_service_pb2, tei_pb2

    assert triton.ModelInferRequest.DESCRIPTOR.full_name == grpc_service_pb2.ModelInferRequest.DESCRIPTOR.full_name
    assert grpc_service_pb2.DESCRIPTOR.pool is POOL and tei_pb2.DESCRIPTOR.pool is POOL
    wire = triton.ModelInferRequest(model_name="m", id="x").SerializeToString()
    assert grpc_service_pb2.ModelInferRequest.FromString(wire).id == "x"
