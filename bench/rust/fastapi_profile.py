#!/usr/bin/env python3
"""Where a FastAPI raw-bytes request's CPU goes, without sockets: each endpoint of fastapi_app.py
called as an ASGI app in-process (routing, pydantic validation, the endpoint, the Response), then
its parts alone. Compare with the server CPU per request that loopback.sh measures over HTTP: the
difference is uvicorn's HTTP handling and the kernel's socket send.

    python bench/rust/fastapi_profile.py
"""
import asyncio, json, time, sys
sys.path.insert(0, __import__("os").path.dirname(__import__("os").path.abspath(__file__)))
import numpy as np
import fastapi_app as f
texts = [f"benchmark sentence number {i} about moving embeddings" for i in range(256)]
body = json.dumps({"input": texts, "encoding_format": "base64"}).encode()
async def call(path):
    sent = []
    async def receive(): return {"type": "http.request", "body": body, "more_body": False}
    async def send(m): sent.append(m)
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
             "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
             "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
             "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 2)}
    await f.app(scope, receive, send)
    assert len(sent[1]["body"]) == 1 << 20
async def main():
    for path in ["/cached/v1/embeddings", "/cached-async/v1/embeddings", "/computed/v1/embeddings", "/computed-async/v1/embeddings"]:
        for _ in range(20): await call(path)
        n = 300; t = time.process_time()
        for _ in range(n): await call(path)
        print(f"profile ASGI app {path}: {(time.process_time() - t) / n * 1e6:.0f} us CPU per request (no server, no socket)")
    m = f.MATRIX
    t = time.process_time()
    for _ in range(300):
        m.tobytes()  # freed each time, as in the endpoint
    print(f"profile MATRIX.tobytes() (1 MiB): {(time.process_time() - t) / 300 * 1e6:.0f} us")
    t = time.process_time(); [f.EmbeddingsRequest.model_validate_json(body) for _ in range(300)]; print(f"profile pydantic parse of the request (256 texts): {(time.process_time() - t) / 300 * 1e6:.0f} us")
    t = time.process_time(); [f.hash_embed(texts) for _ in range(100)]; print(f"profile hash_embed(256 texts x 1024), numpy: {(time.process_time() - t) / 100 * 1e6:.0f} us")
asyncio.run(main())
