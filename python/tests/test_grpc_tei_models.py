"""grpc_tei.py's EmbedSparse and EmbedAll on the checkpoints they exist for, with TEI's client (conftest.py):
a tiny SPLADE ``BertForMaskedLM`` served with ``--pooling splade`` (tiny_splade.py) answers EmbedSparse
bit for bit as TEI's HTTP POST /embed_sparse on the same server, and a tiny PyLate ColBERT checkpoint
(colbert_checkpoints.py) answers EmbedAll with its document vectors, bit for bit those of POST /embed_all
(cut at its document length with truncate)."""

from __future__ import annotations

import grpc
import httpx
import numpy as np
import pytest

import densewire
from colbert_checkpoints import DOCUMENTS, write_case
from server_support import ServerProcess, free_port
from tiny_splade import TEXTS, write_splade


def _serve(folder, *flags: str):
    port = free_port()
    s = ServerProcess("--model", str(folder), *flags, "--precision", "fp32", "--blas-threads", "1",
                      "--grpc-port", str(port))
    s.grpc = f"127.0.0.1:{port}"
    return s


def _http(server, route: str, text: str, kind: str, **body):
    r = httpx.post(server.url + route, json={"inputs": [text], **body}, timeout=120,
                   headers={"Accept": densewire.MEDIA_TYPES["raw"]})
    assert r.status_code == 200, r.text
    return densewire.decode(r.content, "raw", r.headers, kind=kind).tensor


def test_splade_embed_sparse_equals_http_bit_for_bit(tei, tmp_path) -> None:
    pb, stubs = tei
    with _serve(write_splade(tmp_path / "splade"), "--pooling", "splade") as server, \
            grpc.insecure_channel(server.grpc) as channel:
        embed = stubs.EmbedStub(channel)
        for text in TEXTS:
            answer = embed.EmbedSparse(pb.EmbedSparseRequest(inputs=text))
            idx, val = _http(server, "/embed_sparse", text, "sparse")[0]
            assert [v.index for v in answer.sparse_embeddings] == idx.tolist() and idx.size > 0
            assert np.array([v.value for v in answer.sparse_embeddings], "<f4").tobytes() == val.astype("<f4").tobytes()
            assert all(v.value > 0 for v in answer.sparse_embeddings)  # SPLADE's log(1 + relu): non-zeros only
        streamed = list(embed.EmbedSparseStream(iter([pb.EmbedSparseRequest(inputs=t) for t in TEXTS])))
        assert [[v.index for v in a.sparse_embeddings] for a in streamed] == \
            [[v.index for v in embed.EmbedSparse(pb.EmbedSparseRequest(inputs=t)).sparse_embeddings] for t in TEXTS]


def test_colbert_embed_all_is_its_document_vectors(tei, tmp_path) -> None:
    pb, stubs = tei
    with _serve(write_case(tmp_path / "colbert", "pylate")) as server, grpc.insecure_channel(server.grpc) as channel:
        embed = stubs.EmbedStub(channel)
        for text, cut in zip(DOCUMENTS, (False, False, False, True)):  # the last is over the document length
            answer = embed.EmbedAll(pb.EmbedAllRequest(inputs=text, truncate=cut))
            got = np.array([list(t.embeddings) for t in answer.token_embeddings], "<f4")
            (want,) = _http(server, "/embed_all", text, "ragged", truncate=cut)
            assert got.shape == want.shape and got.tobytes() == np.ascontiguousarray(want, "<f4").tobytes()
            assert np.allclose(np.linalg.norm(got, axis=1), 1, atol=1e-5)  # ColBERT's normalized vectors
        with pytest.raises(grpc.RpcError) as info:
            embed.EmbedAll(pb.EmbedAllRequest(inputs=DOCUMENTS[3]))
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "must have less than" in info.value.details()
        with pytest.raises(grpc.RpcError) as info:  # no sparse head
            embed.EmbedSparse(pb.EmbedSparseRequest(inputs=DOCUMENTS[0]))
        assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION and "no sparse head" in info.value.details()
