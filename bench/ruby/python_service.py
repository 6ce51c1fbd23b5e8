"""The published case's embedding service, for bench/ruby/roundtrip.sh: a plain Python service that
answers POST /v1/embeddings with ``json.dumps`` of ``ndarray.tolist()``, i.e. the float64 digits of
each float32 value, as FastAPI's or Flask's default JSON response does. The vectors come from the
same ``hash:DIM`` backend as ``densewire serve --model hash:DIM``, so both servers return the same
float32 values.

    python bench/ruby/python_service.py PORT [DIM]
"""
from __future__ import annotations

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from densewire.server import load_backend


def main() -> None:
    port = int(sys.argv[1])
    dim = int(sys.argv[2]) if len(sys.argv) > 2 else 1536
    backend = load_backend(f"hash:{dim}")

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as the Ruby clients expect

        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            self._send(200, json.dumps({"status": "ok"}).encode())

        def do_POST(self) -> None:  # noqa: N802
            req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            texts = req["input"] if isinstance(req["input"], list) else [req["input"]]
            vectors = backend.embed(texts)  # float32 ndarray
            tokens = sum(len(t.split()) for t in texts)
            body = json.dumps({
                "object": "list",
                "data": [{"object": "embedding", "index": i, "embedding": row} for i, row in enumerate(vectors.tolist())],
                "model": req.get("model", f"hash-{dim}"),
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            }).encode()
            self._send(200, body)

        def _send(self, status: int, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()


if __name__ == "__main__":
    main()
