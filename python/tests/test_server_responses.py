"""The response classes in someone else's Starlette / FastAPI app (as deploy/README.md shows)."""

from __future__ import annotations

import httpx
import numpy as np
import pytest
from fastapi import FastAPI, Request

import densewire
from densewire import Embeddings, Tensor, Usage
from densewire.server import RESPONSE_CLASSES, RawEmbeddingsResponse, negotiated_response

VECTORS = np.arange(24, dtype=np.float32).reshape(3, 8) / 7


def make_app() -> FastAPI:
    app = FastAPI()

    @app.post("/embed")
    async def embed(request: Request):
        emb = Embeddings(Tensor.from_array(VECTORS), model="my-model", usage=Usage(3, 3))
        return negotiated_response(request, emb, compress_min_bytes=16)

    @app.get("/raw")
    async def raw():
        return RawEmbeddingsResponse(Embeddings(Tensor.from_array(VECTORS), model="my-model"))

    return app


@pytest.fixture()
def client():
    transport = httpx.ASGITransport(app=make_app())
    return httpx.AsyncClient(transport=transport, base_url="http://app")


async def _check(client: httpx.AsyncClient, fmt: str) -> None:
    r = await client.post("/embed", headers={"Accept": densewire.MEDIA_TYPES[fmt], "Accept-Encoding": "gzip"})
    assert r.status_code == 200
    assert r.headers["vary"] == "Accept, Accept-Encoding"
    assert r.headers["content-encoding"] == "gzip"
    emb = densewire.decode(r.content, fmt, r.headers)
    assert emb.model == "my-model" and np.array_equal(emb.tensor.array, VECTORS)


def test_negotiated_response_in_fastapi(client) -> None:
    import asyncio

    async def run() -> None:
        for fmt in densewire.FORMATS:
            await _check(client, fmt)
        r = await client.post("/embed", headers={"Accept": "text/html"})
        assert r.status_code == 406 and r.json()["error"]["code"] == "not_acceptable"
        r = await client.get("/raw")
        assert r.headers["densewire-shape"] == "3,8"
        assert np.array_equal(densewire.decode(r.content, "raw", r.headers).tensor.array, VECTORS)

    asyncio.run(run())


def test_classes_cover_every_format() -> None:
    assert set(RESPONSE_CLASSES) == set(densewire.FORMATS)
    for fmt, cls in RESPONSE_CLASSES.items():
        assert cls.media_type == densewire.MEDIA_TYPES[fmt]
