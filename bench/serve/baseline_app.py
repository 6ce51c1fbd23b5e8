"""The FastAPI endpoints that densewire serve is compared with (bench/serve/bench.py starts them).

All three answer POST /v1/embeddings for a request like OpenAI's, with the same (n, d) float32
matrix for every request (made once at start, so no model is measured):

* /json/v1/embeddings   -- the usual way: `.tolist()` in a dict returned from the endpoint, through
                           FastAPI's standard JSON response (jsonable_encoder + json.dumps);
* /orjson/v1/embeddings -- the same dict through ORJSONResponse;
* /raw/v1/embeddings    -- the matrix's bytes in a plain Response (application/octet-stream).
"""

from __future__ import annotations

import os

import numpy as np
from fastapi import FastAPI, Response
from fastapi.responses import ORJSONResponse
from pydantic import BaseModel

N = int(os.environ.get("BENCH_N", "256"))
D = int(os.environ.get("BENCH_D", "1024"))
_rng = np.random.default_rng(0)
MATRIX = _rng.standard_normal((N, D), dtype=np.float32)
MATRIX /= np.linalg.norm(MATRIX, axis=1, keepdims=True)

app = FastAPI()


class EmbeddingsRequest(BaseModel):
    input: list[str]
    model: str | None = None
    encoding_format: str | None = None


def _payload(req: EmbeddingsRequest) -> dict:
    rows = MATRIX[: len(req.input)]
    return {
        "object": "list",
        "data": [{"object": "embedding", "index": i, "embedding": row.tolist()} for i, row in enumerate(rows)],
        "model": "baseline",
        "usage": {"prompt_tokens": len(req.input), "total_tokens": len(req.input)},
    }


@app.post("/json/v1/embeddings")
def standard_json(req: EmbeddingsRequest):
    return _payload(req)


@app.post("/orjson/v1/embeddings", response_class=ORJSONResponse)
def orjson_json(req: EmbeddingsRequest):
    return ORJSONResponse(_payload(req))


@app.post("/raw/v1/embeddings")
def raw_bytes(req: EmbeddingsRequest):
    rows = MATRIX[: len(req.input)]
    return Response(rows.tobytes(), media_type="application/octet-stream",
                    headers={"Densewire-Dtype": "float32", "Densewire-Shape": f"{rows.shape[0]},{rows.shape[1]}"})
