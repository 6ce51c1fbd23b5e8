"""The HTTP server's guarantees over gRPC (grpc_server.py), with real processes and real clients: the
standard health service (grpc-health-probe's Check and Watch, grpcio-health-checking's stubs), reflection
listing the services, --api-key as `authorization` metadata, admission full -> RESOURCE_EXHAUSTED with
grpc-retry-pushback-ms, a client's deadline honoured and its cancelled work dropped before the model,
and SIGTERM draining both servers (GOAWAY, the calls in flight answered, then exit). The busy model is
the GatedUpstream of server_support (the fault injected: a model that answers when the test says)."""

from __future__ import annotations

import shutil
import signal
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor

import grpc
import httpx
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from tritonclient.grpc import service_pb2 as pb
from tritonclient.grpc import service_pb2_grpc as pb_grpc

from server_support import GatedUpstream, ServerProcess, free_port, metric_value, wait_until

SERVING, NOT_SERVING = health_pb2.HealthCheckResponse.SERVING, health_pb2.HealthCheckResponse.NOT_SERVING


def _serve(*args: str, upstream: GatedUpstream | None = None) -> ServerProcess:
    port = free_port()
    model = upstream.server_args() if upstream else ["--model", "hash:8"]
    s = ServerProcess(*model, "--grpc-port", str(port), "--max-batch-wait-ms", "0", "--cache-bytes", "0", *args)
    s.grpc = f"127.0.0.1:{port}"
    return s


def _infer_request(*texts: str, model: str = "gated") -> pb.ModelInferRequest:
    req = pb.ModelInferRequest(model_name=model)
    req.inputs.add(name="text", datatype="BYTES", shape=[len(texts)]).contents.bytes_contents.extend(
        t.encode() for t in texts)
    return req


def test_health_and_reflection() -> None:
    with _serve() as server, grpc.insecure_channel(server.grpc) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        assert health.Check(health_pb2.HealthCheckRequest()).status == SERVING  # what grpc-health-probe asks
        for name in ("inference.GRPCInferenceService", "tei.v1.Embed"):
            assert health.Check(health_pb2.HealthCheckRequest(service=name)).status == SERVING
        with pytest.raises(grpc.RpcError) as info:
            health.Check(health_pb2.HealthCheckRequest(service="no.such.Service"))
        assert info.value.code() == grpc.StatusCode.NOT_FOUND
        watch = health.Watch(health_pb2.HealthCheckRequest())
        assert next(watch).status == SERVING
        watch.cancel()

        refl = reflection_pb2_grpc.ServerReflectionStub(channel)
        answer = next(refl.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")])))
        names = {s.name for s in answer.list_services_response.service}
        assert {"inference.GRPCInferenceService", "tei.v1.Info", "tei.v1.Embed", "tei.v1.Tokenize",
                "grpc.health.v1.Health", "grpc.reflection.v1alpha.ServerReflection"} <= names
        found = next(refl.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(
            file_containing_symbol="inference.GRPCInferenceService")])))
        assert found.file_descriptor_response.file_descriptor_proto  # grpcurl can describe the methods
        for symbol in ("tei.v1.Embed", "grpc.health.v1.Health"):
            found = next(refl.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(
                file_containing_symbol=symbol)])))
            assert found.file_descriptor_response.file_descriptor_proto, symbol


def test_api_key_as_authorization_metadata() -> None:
    with _serve("--api-key", "s3cret") as server, grpc.insecure_channel(server.grpc) as channel:
        stub = pb_grpc.GRPCInferenceServiceStub(channel)
        for metadata in ((), (("authorization", "Bearer wrong"),)):
            with pytest.raises(grpc.RpcError) as info:
                stub.ModelInfer(_infer_request("a", model="hash-8"), metadata=metadata)
            assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED
            with pytest.raises(grpc.RpcError) as info:
                stub.ModelMetadata(pb.ModelMetadataRequest(name="hash-8"), metadata=metadata)
            assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED
        ok = stub.ModelInfer(_infer_request("a", model="hash-8"), metadata=(("authorization", "Bearer s3cret"),))
        assert ok.outputs[0].shape == [1, 8]
        assert stub.ServerLive(pb.ServerLiveRequest()).live  # probes need no key, as /health
        health = health_pb2_grpc.HealthStub(channel)
        assert health.Check(health_pb2.HealthCheckRequest()).status == SERVING


def test_admission_full_is_resource_exhausted_with_pushback() -> None:
    with GatedUpstream() as upstream, ThreadPoolExecutor(2) as pool, \
            _serve("--max-concurrent-requests", "1", upstream=upstream) as server, \
            grpc.insecure_channel(server.grpc) as channel:
        stub = pb_grpc.GRPCInferenceServiceStub(channel)
        held = pool.submit(stub.ModelInfer, _infer_request("held"), timeout=60)
        wait_until(lambda: "held" in upstream.received, "the first call at the model")
        future = stub.ModelInfer.future(_infer_request("turned away"), timeout=30)
        with pytest.raises(grpc.RpcError):
            future.result()
        assert future.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "--max-concurrent-requests" in future.details()
        trailers = dict(future.trailing_metadata())
        assert int(trailers["grpc-retry-pushback-ms"]) >= 1000
        http = httpx.post(server.url + "/v1/embeddings", json={"input": ["http too"]})  # one admission for both
        assert http.status_code == 429 and int(http.headers["retry-after"]) >= 1
        upstream.gate.set()
        assert held.result().outputs[0].shape == [1, 4]
        assert "turned away" not in upstream.received


def test_deadline_honoured_and_cancelled_work_dropped() -> None:
    with GatedUpstream() as upstream, ThreadPoolExecutor(2) as pool, \
            _serve("--model-threads", "1", upstream=upstream) as server, \
            grpc.insecure_channel(server.grpc) as channel:
        stub = pb_grpc.GRPCInferenceServiceStub(channel)
        first = pool.submit(stub.ModelInfer, _infer_request("first"), timeout=60)
        wait_until(lambda: "first" in upstream.received, "the first call at the model")
        t0 = time.monotonic()
        with pytest.raises(grpc.RpcError) as info:
            stub.ModelInfer(_infer_request("late"), timeout=0.5)  # queued behind the first: its deadline passes
        assert info.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED and time.monotonic() - t0 < 5
        cancelled = stub.ModelInfer.future(_infer_request("cancelled"), timeout=60)
        time.sleep(0.3)
        cancelled.cancel()
        wait_until(lambda: metric_value(server.metrics(), "densewire_admission_active") == 1, "slots given back")
        m = server.metrics()
        assert metric_value(m, "densewire_admission_rejections_total", reason="timeout") == 1  # the deadline
        assert metric_value(m, "densewire_admission_rejections_total", reason="disconnected") == 1  # the cancel
        upstream.gate.set()
        assert first.result().outputs[0].shape == [1, 4]
        time.sleep(0.3)
        assert "late" not in upstream.received and "cancelled" not in upstream.received  # dropped, never embedded


def test_sigterm_drains_http_and_grpc() -> None:
    with GatedUpstream() as upstream, ThreadPoolExecutor(3) as pool:
        server = _serve("--timeout-graceful-shutdown", "60", upstream=upstream).start()
        channel = grpc.insecure_channel(server.grpc)
        try:
            stub = pb_grpc.GRPCInferenceServiceStub(channel)
            watch = health_pb2_grpc.HealthStub(channel).Watch(health_pb2.HealthCheckRequest())
            assert next(watch).status == SERVING
            in_grpc = pool.submit(stub.ModelInfer, _infer_request("via grpc"), timeout=60)
            in_http = pool.submit(httpx.post, server.url + "/v1/embeddings", json={"input": ["via http"]}, timeout=60)
            wait_until(lambda: metric_value(server.metrics(), "densewire_admission_active") == 2, "two admitted")
            assert server.proc is not None
            server.proc.send_signal(signal.SIGTERM)
            wait_until(lambda: "draining (SIGTERM)" in server.log_text(), "the drain to begin")
            assert next(watch).status == NOT_SERVING  # a watching probe is told at once
            fresh = grpc.insecure_channel(server.grpc)  # GOAWAY: no new call is taken
            with pytest.raises(grpc.RpcError) as info:
                pb_grpc.GRPCInferenceServiceStub(fresh).ModelInfer(_infer_request("new"), timeout=10)
            assert info.value.code() == grpc.StatusCode.UNAVAILABLE
            fresh.close()
            assert httpx.post(server.url + "/v1/embeddings", json={"input": ["new"]}).status_code == 503
            upstream.gate.set()
            assert in_grpc.result().outputs[0].shape == [1, 4]  # the calls in flight are answered
            assert in_http.result().status_code == 200
            assert server.proc.wait(60) == -signal.SIGTERM  # uvicorn re-raises the signal once shut down
            assert "Application shutdown complete" in server.log_text() and "Traceback" not in server.log_text()
            assert "new" not in upstream.received
        finally:
            channel.close()
            server.stop()


def test_tls_with_the_http_servers_certificate(tmp_path) -> None:
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    openssl = shutil.which("openssl")
    assert openssl, "openssl is needed by this test (Debian: apt-get install openssl)"
    subprocess.run([openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-keyout", str(key), "-out", str(cert), "-days", "2", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True)
    server = _serve("--ssl-keyfile", str(key), "--ssl-certfile", str(cert))
    server.url = server.url.replace("http://", "https://")
    server.start(wait=False)
    try:
        creds = grpc.ssl_channel_credentials(root_certificates=cert.read_bytes())
        with grpc.secure_channel(server.grpc, creds) as channel:
            stub = pb_grpc.GRPCInferenceServiceStub(channel)
            wait_until(lambda: _live(stub), "the TLS gRPC server")
            assert stub.ModelInfer(_infer_request("over tls", model="hash-8")).outputs[0].shape == [1, 8]
        with grpc.insecure_channel(server.grpc) as plain:
            with pytest.raises(grpc.RpcError) as info:
                pb_grpc.GRPCInferenceServiceStub(plain).ServerLive(pb.ServerLiveRequest(), timeout=5)
            assert info.value.code() == grpc.StatusCode.UNAVAILABLE
    finally:
        server.stop()


def _live(stub) -> bool:
    try:
        return stub.ServerLive(pb.ServerLiveRequest(), timeout=2).live
    except grpc.RpcError:
        return False
