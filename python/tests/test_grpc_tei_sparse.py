"""grpc_tei.py's EmbedSparse and EmbedAll (and their streams) with a client generated from TEI's tei.proto
(conftest.py) against `densewire serve --grpc-port`: the sparse vectors of the hash model bit for bit those
of TEI's HTTP POST /embed_sparse on the same server, the per-token states of the built-in MiniLM bit for bit
those of POST /embed_all; streams in order; a model without the output asked for FAILED_PRECONDITION (as
TEI's router answers it); truncation; --max-token-output-bytes RESOURCE_EXHAUSTED;
--api-key; admission full RESOURCE_EXHAUSTED with grpc-retry-pushback-ms."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import grpc
import httpx
import numpy as np
import pytest

import densewire
from server_support import GatedUpstream, ServerProcess, free_port, wait_until

TEXTS = ["The quick brown fox", "jumps over the lazy dog dog", "naïve café"]
SPARSE_LIMIT = 4096  # --max-token-output-bytes of the hash server: 511 non-zeros of 8 bytes, with the offsets
TOKENS_LIMIT = 200 * 384 * 4  # that of the MiniLM server: 200 tokens of 384 floats (the model reads 256)
KEY = "k-grpc-sparse"


def _serve(*args: str):
    port = free_port()
    s = ServerProcess("--grpc-port", str(port), *args)
    s.grpc = f"127.0.0.1:{port}"
    return s


@pytest.fixture(scope="module")
def hashed():
    """The hash model (sparse output, no per-token output), behind --api-key."""
    with _serve("--model", "hash:384", "--max-token-output-bytes", str(SPARSE_LIMIT), "--api-key", KEY) as s:
        with grpc.insecure_channel(s.grpc) as ch:
            s.channel = ch
            yield s


@pytest.fixture(scope="module")
def minilm():
    """The built-in MiniLM (per-token output, no sparse head)."""
    with _serve("--blas-threads", "1", "--max-token-output-bytes", str(TOKENS_LIMIT)) as s:
        with grpc.insecure_channel(s.grpc) as ch:
            s.channel = ch
            yield s


AUTH = (("authorization", f"Bearer {KEY}"),)


def _sparse(answer) -> tuple[list[int], bytes]:
    return [v.index for v in answer.sparse_embeddings], np.array([v.value for v in answer.sparse_embeddings],
                                                                  "<f4").tobytes()


def _http_sparse(server, body: dict) -> list[tuple[list[int], bytes]]:
    r = httpx.post(server.url + "/embed_sparse", json=body, timeout=60,
                   headers={"Accept": densewire.MEDIA_TYPES["raw"], "Authorization": f"Bearer {KEY}"})
    assert r.status_code == 200, r.text
    s = densewire.decode(r.content, "raw", r.headers, kind="sparse").tensor
    return [(s[i][0].tolist(), s[i][1].astype("<f4").tobytes()) for i in range(s.n)]


def test_embed_sparse_equals_http_embed_sparse_bit_for_bit(tei, hashed) -> None:
    pb, stubs = tei
    embed = stubs.EmbedStub(hashed.channel)
    want = _http_sparse(hashed, {"inputs": TEXTS})
    for text, (indices, values) in zip(TEXTS, want):
        answer = embed.EmbedSparse(pb.EmbedSparseRequest(inputs=text), metadata=AUTH)
        assert _sparse(answer) == (indices, values) and indices == sorted(set(indices)) and indices
        assert answer.metadata.compute_chars == len(text)
        assert answer.metadata.compute_tokens == len(text.split())  # the hash model's tokens are words
    assert len(want[1][0]) == 5  # "dog" twice: one entry


def test_embed_sparse_stream_answers_in_order(tei, hashed) -> None:
    pb, stubs = tei
    want = _http_sparse(hashed, {"inputs": TEXTS})
    streamed = list(stubs.EmbedStub(hashed.channel).EmbedSparseStream(
        iter([pb.EmbedSparseRequest(inputs=t) for t in TEXTS * 3]), metadata=AUTH))
    assert [_sparse(a) for a in streamed] == want * 3


def test_embed_sparse_truncation(tei, hashed) -> None:
    pb, stubs = tei
    embed = stubs.EmbedStub(hashed.channel)
    long = " ".join(f"w{i % 10}" for i in range(8190)) + " past the limit"  # 8193 words: the hash model reads 8192
    with pytest.raises(grpc.RpcError) as info:
        embed.EmbedSparse(pb.EmbedSparseRequest(inputs=long), metadata=AUTH)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "inputs[0]: `inputs` must have less than 8192 tokens. Given: 8193" in info.value.details()
    right = embed.EmbedSparse(pb.EmbedSparseRequest(inputs=long, truncate=True), metadata=AUTH)
    left = embed.EmbedSparse(pb.EmbedSparseRequest(inputs=long, truncate=True,
                                                   truncation_direction=pb.TRUNCATION_DIRECTION_LEFT), metadata=AUTH)
    assert right.metadata.compute_tokens == left.metadata.compute_tokens == 8192
    assert [_sparse(right)] == _http_sparse(hashed, {"inputs": long, "truncate": True})
    assert [_sparse(left)] == _http_sparse(hashed, {"inputs": long, "truncate": True, "truncation_direction": "Left"})
    assert _sparse(left) != _sparse(right)  # "past the limit" kept, "w0" dropped


def test_embed_sparse_output_is_bounded(tei, hashed) -> None:
    pb, stubs = tei
    many = " ".join(f"t{j}" for j in range(600))  # 600 non-zeros: 4.8 KB, over SPARSE_LIMIT
    with pytest.raises(grpc.RpcError) as info:
        stubs.EmbedStub(hashed.channel).EmbedSparse(pb.EmbedSparseRequest(inputs=many), metadata=AUTH)
    assert info.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert info.value.details().startswith("inputs: ") and "--max-token-output-bytes" in info.value.details()
    assert str(SPARSE_LIMIT) in info.value.details()


def test_api_key_is_asked_of_both(tei, hashed) -> None:
    pb, stubs = tei
    embed = stubs.EmbedStub(hashed.channel)
    for call in (lambda: embed.EmbedSparse(pb.EmbedSparseRequest(inputs="a")),
                 lambda: list(embed.EmbedSparseStream(iter([pb.EmbedSparseRequest(inputs="a")]))),
                 lambda: embed.EmbedAll(pb.EmbedAllRequest(inputs="a"))):
        with pytest.raises(grpc.RpcError) as info:
            call()
        assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED


def _http_states(server, text: str) -> densewire.RaggedTensor:
    r = httpx.post(server.url + "/embed_all", json={"inputs": [text]}, timeout=120,
                   headers={"Accept": densewire.MEDIA_TYPES["raw"]})
    assert r.status_code == 200, r.text
    return densewire.decode(r.content, "raw", r.headers, kind="ragged").tensor


def _matrix(answer) -> np.ndarray:
    return np.array([list(t.embeddings) for t in answer.token_embeddings], "<f4")


def test_embed_all_equals_http_embed_all_bit_for_bit(tei, minilm) -> None:
    pb, stubs = tei
    embed = stubs.EmbedStub(minilm.channel)
    tok = stubs.TokenizeStub(minilm.channel)
    for text in TEXTS:
        answer = embed.EmbedAll(pb.EmbedAllRequest(inputs=text))
        (want,) = _http_states(minilm, text)
        got = _matrix(answer)
        assert got.shape == want.shape and got.shape[1] == 384
        assert got.tobytes() == np.ascontiguousarray(want, "<f4").tobytes()
        tokens = tok.Tokenize(pb.EncodeRequest(inputs=text, add_special_tokens=True)).tokens
        assert len(tokens) == got.shape[0] == answer.metadata.compute_tokens  # [CLS] and [SEP] included
        assert answer.metadata.compute_chars == len(text)


def test_embed_all_stream_answers_in_order(tei, minilm) -> None:
    pb, stubs = tei
    embed = stubs.EmbedStub(minilm.channel)
    single = [_matrix(embed.EmbedAll(pb.EmbedAllRequest(inputs=t))).tobytes() for t in TEXTS]
    streamed = list(embed.EmbedAllStream(iter([pb.EmbedAllRequest(inputs=t) for t in TEXTS * 2])))
    assert [_matrix(a).tobytes() for a in streamed] == single * 2


def test_embed_all_truncation_and_bound(tei, minilm) -> None:
    """600 words are 602 tokens: refused uncut; cut (truncate) to the model's 256 they are over the
    server's 200-token --max-token-output-bytes: RESOURCE_EXHAUSTED naming the limit and the 256 tokens."""
    pb, stubs = tei
    embed = stubs.EmbedStub(minilm.channel)
    with pytest.raises(grpc.RpcError) as info:
        embed.EmbedAll(pb.EmbedAllRequest(inputs="word " * 600))
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "inputs[0]: `inputs` must have less than 256 tokens. Given: 602" in info.value.details()
    with pytest.raises(grpc.RpcError) as info:
        embed.EmbedAll(pb.EmbedAllRequest(inputs="word " * 600, truncate=True))
    assert info.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert info.value.details().startswith("inputs: 256 tokens x 384 floats")
    assert "--max-token-output-bytes" in info.value.details() and str(TOKENS_LIMIT) in info.value.details()
    fits = embed.EmbedAll(pb.EmbedAllRequest(inputs="word " * 150, truncate=True))
    assert _matrix(fits).shape == (152, 384)


@pytest.mark.parametrize("target,stub,method,make,code,message", [
    ("minilm", "EmbedStub", "EmbedSparse", lambda pb: pb.EmbedSparseRequest(inputs="a"), "FAILED_PRECONDITION",
     "model: Model is not an embedding model with SPLADE pooling: the model "),
    ("minilm", "EmbedStub", "EmbedSparseStream", lambda pb: iter([pb.EmbedSparseRequest(inputs="a")]),
     "FAILED_PRECONDITION", "Model is not an embedding model with SPLADE pooling"),
    ("hashed", "EmbedStub", "EmbedAll", lambda pb: pb.EmbedAllRequest(inputs="a"), "FAILED_PRECONDITION",
     "model: the model hash-384 (HashBackend) gives no per-token output"),
    ("hashed", "EmbedStub", "EmbedAllStream", lambda pb: iter([pb.EmbedAllRequest(inputs="a")]),
     "FAILED_PRECONDITION", "gives no per-token output"),
    ("hashed", "EmbedStub", "EmbedAll", lambda pb: pb.EmbedAllRequest(inputs=""), "FAILED_PRECONDITION",
     "gives no per-token output"),  # the model first, as TEI's router
    ("minilm", "EmbedStub", "EmbedSparse", lambda pb: pb.EmbedSparseRequest(inputs=""), "FAILED_PRECONDITION",
     "Model is not an embedding model with SPLADE pooling"),
    ("hashed", "EmbedStub", "EmbedSparse", lambda pb: pb.EmbedSparseRequest(inputs=""), "INVALID_ARGUMENT",
     "inputs: `inputs` cannot be empty"),
    ("hashed", "EmbedStub", "EmbedSparse", lambda pb: pb.EmbedSparseRequest(inputs="a", prompt_name="query"),
     "INVALID_ARGUMENT", "prompt_name: prompt_name 'query' is not a prompt"),
    ("minilm", "EmbedStub", "EmbedAll", lambda pb: pb.EmbedAllRequest(inputs=""), "INVALID_ARGUMENT",
     "inputs: `inputs` cannot be empty"),
    ("minilm", "EmbedStub", "EmbedAll",
     lambda pb: pb.EmbedAllRequest(inputs="a", truncation_direction=pb.TRUNCATION_DIRECTION_LEFT),
     "INVALID_ARGUMENT", "truncation_direction: only TRUNCATION_DIRECTION_RIGHT is served"),
])
def test_errors(tei, request, target, stub, method, make, code, message) -> None:
    pb, stubs = tei
    server = request.getfixturevalue(target)
    with pytest.raises(grpc.RpcError) as info:
        out = getattr(getattr(stubs, stub)(server.channel), method)(make(pb), metadata=AUTH)
        if method.endswith("Stream"):
            list(out)
    assert info.value.code().name == code, info.value.details()
    assert message in (info.value.details() or "")


def test_admission_full_is_resource_exhausted_with_pushback(tei) -> None:
    """One slot (--max-concurrent-requests 1), held by an HTTP call at a model that answers when the test
    says (server_support.GatedUpstream: the fault injected): EmbedSparse, EmbedAll and their streams are
    turned away by the same admission, before the model is asked anything."""
    pb, stubs = tei
    with GatedUpstream() as upstream, ThreadPoolExecutor(1) as pool, \
            _serve(*upstream.server_args(), "--max-concurrent-requests", "1",
                   "--max-batch-wait-ms", "0") as server, grpc.insecure_channel(server.grpc) as channel:
        held = pool.submit(httpx.post, server.url + "/v1/embeddings", json={"input": ["held"]}, timeout=60)
        wait_until(lambda: "held" in upstream.received, "the first call at the model")
        embed = stubs.EmbedStub(channel)
        for call in (lambda: embed.EmbedSparse(pb.EmbedSparseRequest(inputs="a"), timeout=30),
                     lambda: embed.EmbedAll(pb.EmbedAllRequest(inputs="a"), timeout=30),
                     lambda: list(embed.EmbedSparseStream(iter([pb.EmbedSparseRequest(inputs="a")]), timeout=30)),
                     lambda: list(embed.EmbedAllStream(iter([pb.EmbedAllRequest(inputs="a")]), timeout=30))):
            with pytest.raises(grpc.RpcError) as info:
                call()
            assert info.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, info.value.details()
            assert "--max-concurrent-requests" in info.value.details()
            assert int(dict(info.value.trailing_metadata())["grpc-retry-pushback-ms"]) >= 1000
        upstream.gate.set()
        assert held.result().status_code == 200
        with pytest.raises(grpc.RpcError) as info:  # the slot given back: the model's own answer
            embed.EmbedSparse(pb.EmbedSparseRequest(inputs="a"), timeout=30)
        assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION
