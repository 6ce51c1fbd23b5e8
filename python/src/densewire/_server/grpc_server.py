"""The gRPC server of ``densewire serve --grpc-port PORT``: ``grpc.aio`` in uvicorn's event loop, started
by the app's lifespan once the model is loaded and stopped at its end, serving grpc_kserve.py's and
grpc_tei.py's services (on grpc_call.py, the pipeline's gRPC transport), the standard health service and
server reflection, over TLS with the HTTP server's --ssl-certfile/--ssl-keyfile when given. On SIGTERM (lifecycle.py's drain) the health statuses go NOT_SERVING and the server
stops with the grace of ``--timeout-graceful-shutdown``: GOAWAY at once, the calls in flight finish.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection, reflection_pb2

from . import grpc_kserve, grpc_tei
from .grpcpb import POOL
from .logs import log

__all__ = ["GrpcServer"]

#: grpc's own receive limit, as a multiple of --max-body-bytes (past it the core refuses the message;
#: below it grpc_call.parse_message answers RESOURCE_EXHAUSTED naming the flag)
_CORE_LIMIT_FACTOR = 4

# reflection answers from densewire's descriptor pool (grpcpb.POOL): the health and reflection services'
# files are added to it beside densewire's own
for _file in (health_pb2.DESCRIPTOR, reflection_pb2.DESCRIPTOR):
    POOL.AddSerializedFile(_file.serialized_pb)


class GrpcServer:
    """The gRPC server of one ``densewire serve`` process (created in the app's lifespan, in uvicorn's loop)."""

    def __init__(self, st: Any) -> None:
        self.st = st
        self.server: grpc.aio.Server | None = None
        self.health: Any = None
        self.services: list[str] = []
        self._stopping: asyncio.Task[None] | None = None

    async def start(self) -> None:
        cfg = self.st.cfg
        limit = cfg.max_body_bytes * _CORE_LIMIT_FACTOR
        self.server = grpc.aio.server(options=[
            ("grpc.max_receive_message_length", min(limit, 2**31 - 1)),
            ("grpc.max_send_message_length", -1),
            ("grpc.so_reuseport", 0),  # a port already in use fails here instead of being shared
        ])
        handlers = [*grpc_kserve.handlers(self.st), *grpc_tei.handlers(self.st)]
        self.server.add_generic_rpc_handlers(handlers)
        self.health = health.aio.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self.server)
        self.services = [h.service_name() for h in handlers]
        names = [*self.services, health_pb2.DESCRIPTOR.services_by_name["Health"].full_name,
                 reflection.SERVICE_NAME]
        reflection.enable_server_reflection(names, self.server, pool=POOL)
        address = f"{'[' + cfg.host + ']' if ':' in cfg.host else cfg.host}:{cfg.grpc_port}"
        try:
            if cfg.ssl_certfile:  # the HTTP server's certificate: gRPC over TLS too (h2 by ALPN)
                key = Path(cfg.ssl_keyfile or cfg.ssl_certfile).read_bytes()
                creds = grpc.ssl_server_credentials([(key, Path(cfg.ssl_certfile).read_bytes())])
                port = self.server.add_secure_port(address, creds)
            else:
                port = self.server.add_insecure_port(address)
        except RuntimeError as exc:
            raise RuntimeError(f"--grpc-port: cannot listen on {address}: {exc}") from None
        await self.server.start()
        await self.set_serving(self.st.ready)
        self.st.lifecycle.on_drain(self.drain)
        log.info("gRPC%s on %s:%d: %s, grpc.health.v1.Health, reflection", " (TLS)" if cfg.ssl_certfile else "",
                 cfg.host, port, ", ".join(self.services))

    async def set_serving(self, serving: bool) -> None:
        status = health_pb2.HealthCheckResponse.SERVING if serving else health_pb2.HealthCheckResponse.NOT_SERVING
        for name in ("", *self.services):
            await self.health.set(name, status)

    def drain(self) -> None:
        """SIGTERM: health NOT_SERVING, GOAWAY (no new calls), the calls in flight finish within the grace."""
        if self.server is None or self._stopping is not None:
            return

        async def stop() -> None:
            await self.health.enter_graceful_shutdown()
            await self.server.stop(self.st.cfg.timeout_graceful_shutdown)  # type: ignore[union-attr]

        self._stopping = asyncio.get_running_loop().create_task(stop())

    async def stop(self) -> None:
        """The lifespan's end (the admitted calls are answered): what is still open (health watches) is
        cancelled."""
        if self.server is None:
            return
        await self.server.stop(0)
        if self._stopping is not None:
            await asyncio.gather(self._stopping, return_exceptions=True)
        self.server = None
