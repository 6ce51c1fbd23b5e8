"""Sparse output through ``densewire serve --model hash:384`` (the CI server every language's client tests
against): TEI's ``POST /embed_sparse`` in TEI's JSON shape and densewire's sparse tensor (SPEC.md 20.2) by
``Accept``; the hash model's sparse vectors checked against the rule its module documents, computed here
again; ``max_active_dims``, truncation, the output limit, the cache by output kind, the errors; and the
Python client's ``embed_sparse`` (sync and async)."""

from __future__ import annotations

import asyncio
import hashlib

import httpx
import numpy as np
import pytest

import densewire
from server_support import ServerProcess, metric_value

TEXTS = ["the quick brown fox", "jumps over the lazy dog dog", "a", "naïve café"]
VOCAB = 30522
LIMIT = 4096  # --max-token-output-bytes: 511 non-zeros of 8 bytes, with the offsets


def expected(text: str, max_words: int | None = None) -> dict[int, np.float32]:
    """The hash model's sparse vector of ``text`` by the rule of ``_backends/hash.py``'s module doc."""
    out: dict[int, np.float32] = {}
    for word in text.split()[:max_words]:
        x = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8, person=b"densewire-sparse").digest(), "little")
        w = np.float32(((x >> 40) + 1) / 2 ** 24)
        out[x % VOCAB] = max(out.get(x % VOCAB, np.float32(0)), w)
    return dict(sorted(out.items()))


@pytest.fixture(scope="module")
def server():
    with ServerProcess("--model", "hash:384", "--max-token-output-bytes", str(LIMIT)) as s:
        yield s


def _post(server, body, **headers) -> httpx.Response:
    return httpx.post(server.url + "/embed_sparse", json=body, headers=headers, timeout=60)


def test_json_is_tei_shape(server) -> None:
    r = _post(server, {"inputs": TEXTS})
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("application/json")
    doc = r.json()
    assert len(doc) == len(TEXTS)
    for text, items in zip(TEXTS, doc):
        want = expected(text)
        assert all(set(item) == {"index", "value"} for item in items)
        assert [item["index"] for item in items] == list(want)  # strictly ascending, the repeated word once
        assert [np.float32(item["value"]) for item in items] == list(want.values())
    assert len(doc[1]) == 5  # "dog" twice: one entry
    single = _post(server, {"inputs": TEXTS[0]}).json()
    assert single == doc[:1]  # a string is a batch of one, as TEI answers


@pytest.mark.parametrize("fmt", ["raw", "msgpack", "protobuf", "arrow"])
def test_binary_formats_are_sparse_tensors(server, fmt) -> None:
    accept = densewire.MEDIA_TYPES[fmt]
    r = _post(server, {"inputs": TEXTS}, Accept=accept)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == accept
    emb = densewire.decode(r.content, fmt, r.headers, kind="sparse")
    s = emb.tensor
    assert isinstance(s, densewire.SparseVectors) and s.shape == (len(TEXTS), VOCAB) and s.dtype == "float32"
    for i, text in enumerate(TEXTS):
        idx, val = s[i]
        want = expected(text)
        assert idx.tolist() == list(want) and val.tobytes() == np.array(list(want.values()), "<f4").tobytes()
    assert emb.model == "hash-384"
    assert emb.usage.prompt_tokens == sum(len(t.split()) for t in TEXTS)
    with pytest.raises(densewire.DensewireError):  # the body says its kind: never read as a dense tensor
        densewire.decode(r.content, fmt, r.headers)


def test_max_active_dims_keeps_the_largest(server) -> None:
    text = "one two three four five six seven"
    full = expected(text)
    top = sorted(sorted(full, key=lambda i: (-full[i], i))[:3])
    r = _post(server, {"inputs": [text], "max_active_dims": 3}, Accept="application/octet-stream")
    idx, val = densewire.decode(r.content, "raw", r.headers, kind="sparse").tensor[0]
    assert idx.tolist() == top and val.tolist() == [full[i] for i in top]
    r = _post(server, {"inputs": [text], "max_active_dims": 0})
    assert r.status_code == 422 and "max_active_dims" in r.json()["error"]


def test_truncation(server) -> None:
    long = " ".join(f"w{i % 10}" for i in range(8190)) + " past the limit"  # 8193 words: the hash model reads 8192
    r = _post(server, {"inputs": [long]})
    assert r.status_code == 413 and r.json()["error_type"] == "Validation"
    assert "must have less than 8192 tokens" in r.json()["error"]
    r = _post(server, {"inputs": [long, "short"], "truncate": True})
    assert r.status_code == 200 and r.headers["densewire-truncated"] == "1"
    assert [e["index"] for e in r.json()[0]] == list(expected(long, 8192)) != list(expected(long))


#: about 600 non-zeros: 4.8 KB of sparse output, over LIMIT
MANY = [" ".join(f"t{i}-{j}" for j in range(60)) for i in range(10)]


def test_output_is_bounded(server) -> None:
    """Past --max-token-output-bytes the answer is a 413 naming the limit; pruning brings it under."""
    texts = MANY
    r = _post(server, {"inputs": texts})
    assert r.status_code == 413, r.text
    assert "--max-token-output-bytes" in r.json()["error"] and str(LIMIT) in r.json()["error"]
    r = _post(server, {"inputs": texts, "max_active_dims": 40})
    assert r.status_code == 200 and [len(v) for v in r.json()] == [40] * 10


def test_cached_by_output_kind(server) -> None:
    text = "a sentence cached as a sparse vector"
    before = metric_value(server.metrics(), "densewire_cache_hits_total", layer="memory")
    first = _post(server, {"inputs": [text]}).json()
    dense = httpx.post(server.url + "/embed", json={"inputs": [text]}, timeout=60).json()  # another kind: no hit
    assert metric_value(server.metrics(), "densewire_cache_hits_total", layer="memory") == before
    again = _post(server, {"inputs": [text]}).json()
    assert again == first and len(dense[0]) == 384
    assert metric_value(server.metrics(), "densewire_cache_hits_total", layer="memory") == before + 1
    pruned = _post(server, {"inputs": [text], "max_active_dims": 2}).json()  # pruned from the cached vector
    assert len(pruned[0]) == 2 and metric_value(server.metrics(), "densewire_cache_hits_total", layer="memory") == before + 2
    assert metric_value(server.metrics(), "densewire_requests_total", route="/embed_sparse", status="200",
                        format="json") >= 3


@pytest.mark.parametrize("body, status, kind, word", [
    ({"inputs": []}, 400, "Empty", "cannot be empty"),
    ({"inputs": [""]}, 400, "Empty", "cannot be empty"),
    ({"inputs": [[101, 102]]}, 422, "Validation", "token-id"),
    ({"inputs": "x", "prompt_name": "query"}, 422, "Validation", "prompt_name"),
    ({"inputs": "x", "truncation_direction": "Left"}, 422, "Validation", "truncation_direction"),
    ({"inputs": "x", "truncate": "yes"}, 422, "Validation", "truncate"),
    ({"inputs": 3}, 422, "Validation", "inputs"),
])
def test_errors(server, body, status, kind, word) -> None:
    r = _post(server, body)
    assert r.status_code == status, r.text
    assert r.json()["error_type"] == kind and word in r.json()["error"]


def test_malformed_body(server) -> None:
    r = httpx.post(server.url + "/embed_sparse", content=b"{", headers={"Content-Type": "application/json"}, timeout=60)
    assert r.status_code in (400, 422) and "JSON" in r.json()["error"]


@pytest.mark.parametrize("accept", [densewire.DEFAULT_ACCEPT, "application/vnd.apache.arrow.stream",
                                    "application/protobuf", "application/json"])
def test_client_embed_sparse(server, accept) -> None:
    """The client asks for the sparse binary form (or reads TEI's JSON) and returns SparseVectors over one buffer."""
    with densewire.Client(server.url, accept=accept) as client:
        got = client.embed_sparse(TEXTS, vocab_size=VOCAB)
        pruned = client.embed_sparse(TEXTS[1], max_active_dims=2, vocab_size=VOCAB)
        with pytest.raises(densewire.APIError) as err:
            client.embed_sparse(MANY)
        assert err.value.status_code == 413 and "--max-token-output-bytes" in err.value.message
    assert isinstance(got, densewire.SparseVectors) and got.shape == (len(TEXTS), VOCAB)
    for i, text in enumerate(TEXTS):
        assert got[i][0].tolist() == list(expected(text)) and got[i][1].tolist() == list(expected(text).values())
    assert np.shares_memory(got[1][0], got.indices)
    assert got.to_scipy().shape == (len(TEXTS), VOCAB)
    assert len(pruned) == 1 and pruned.nnz.tolist() == [2]
    assert client.embed_sparse.__doc__


def test_async_client_embed_sparse(server) -> None:
    async def run() -> densewire.SparseVectors:
        async with densewire.AsyncClient(server.url) as client:
            return await client.embed_sparse(TEXTS, truncate=True)
    got = asyncio.run(run())
    assert [got[i][0].tolist() for i in range(len(TEXTS))] == [list(expected(t)) for t in TEXTS]


def test_client_reads_tei_json_without_a_vocabulary_size(server) -> None:
    with densewire.Client(server.url, accept="application/json") as client:
        got = client.embed_sparse(TEXTS)
    assert got.vocab_size == int(got.indices.max()) + 1
