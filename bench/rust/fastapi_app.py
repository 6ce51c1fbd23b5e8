"""FastAPI raw-bytes embeddings endpoints for bench/rust/loopback.sh, in the variants a user would
write, each answering POST {prefix}/v1/embeddings with the (n, d) float32 matrix's bytes in a plain
``Response`` (application/octet-stream, with densewire's ``Densewire-Dtype`` and ``Densewire-Shape``
headers so that densewire's clients can decode it too):

* ``/cached`` and ``/cached-async``: transport only. The same matrix for every request, made once at
  start (the same endpoint as ``bench/serve/baseline_app.py``'s ``/raw``); ``def`` (FastAPI runs it
  in its threadpool) and ``async def`` (on the event loop).
* ``/computed`` and ``/computed-async``: the vectors computed for each request, no cache, by the
  same hash algorithm as the axum example server (``rust/examples/server.rs`` with ``--no-cache``):
  FNV-1a 64 of each text's UTF-8 bytes seeds a SplitMix64 sequence, each value
  ``(x >> 40) / 2^23 - 1`` as float32, then each row L2-normalised. Vectorised with numpy (a
  column loop over the texts' bytes for FNV-1a, whole-matrix uint64 arithmetic for SplitMix64),
  as a Python user would write it; loopback.sh checks that both servers answer the same vectors.

    BENCH_DIMS=1024 uvicorn --app-dir bench/rust fastapi_app:app --port 8003
"""

from __future__ import annotations

import os

import numpy as np
from fastapi import FastAPI, Response
from pydantic import BaseModel

D = int(os.environ.get("BENCH_DIMS", "1024"))
N = int(os.environ.get("BENCH_N", "256"))
_rng = np.random.default_rng(0)
MATRIX = _rng.standard_normal((N, D), dtype=np.float32)
MATRIX /= np.linalg.norm(MATRIX, axis=1, keepdims=True)

_FNV_OFFSET = np.uint64(0xCBF29CE484222325)
_FNV_PRIME = np.uint64(0x100000001B3)
_GAMMA = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
# state after k+1 SplitMix64 steps = seed + (k+1) * gamma (mod 2^64)
_STEPS = (np.arange(1, D + 1, dtype=np.uint64) * _GAMMA)[None, :]


def fnv1a(texts: list[str]) -> np.ndarray:
    """FNV-1a 64 of each text's UTF-8 bytes, vectorised over the texts."""
    raw = [t.encode("utf-8") for t in texts]
    lengths = np.fromiter((len(b) for b in raw), dtype=np.int64, count=len(raw))
    width = int(lengths.max(initial=0))
    padded = np.frombuffer(b"".join(b.ljust(width, b"\0") for b in raw), dtype=np.uint8).reshape(len(raw), width)
    h = np.full(len(raw), _FNV_OFFSET, dtype=np.uint64)
    for j in range(width):
        live = lengths > j
        h = np.where(live, (h ^ padded[:, j].astype(np.uint64)) * _FNV_PRIME, h)
    return h


def hash_embed(texts: list[str], dims: int = D) -> np.ndarray:
    """The axum example's hash model: (len(texts), dims) float32, rows L2-normalised."""
    z = fnv1a(texts)[:, None] + _STEPS[:, :dims]
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    z ^= z >> np.uint64(31)
    out = (z >> np.uint64(40)).astype(np.float32)
    out *= np.float32(1.0 / (1 << 23))
    out -= np.float32(1.0)
    norms = np.sqrt(np.einsum("ij,ij->i", out, out))
    out /= np.maximum(norms, np.float32(1e-30))[:, None]
    return out


class EmbeddingsRequest(BaseModel):
    input: list[str]
    model: str | None = None
    encoding_format: str | None = None


def _respond(m: np.ndarray) -> Response:
    return Response(m.tobytes(), media_type="application/octet-stream",
                    headers={"Densewire-Dtype": "float32", "Densewire-Shape": f"{m.shape[0]},{m.shape[1]}"})


app = FastAPI()


@app.post("/cached/v1/embeddings")
def cached(req: EmbeddingsRequest) -> Response:
    return _respond(MATRIX[: len(req.input)])


@app.post("/cached-async/v1/embeddings")
async def cached_async(req: EmbeddingsRequest) -> Response:
    return _respond(MATRIX[: len(req.input)])


@app.post("/computed/v1/embeddings")
def computed(req: EmbeddingsRequest) -> Response:
    return _respond(hash_embed(req.input))


@app.post("/computed-async/v1/embeddings")
async def computed_async(req: EmbeddingsRequest) -> Response:
    return _respond(hash_embed(req.input))


@app.get("/health")
def health() -> str:
    return "ok"
