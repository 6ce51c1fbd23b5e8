"""SPLADE: sparse vocabulary weights from a ``BertForMaskedLM`` checkpoint, on any BERT engine.

A SPLADE model is a BERT encoder and its masked-language-model head: per token, the transform
(``dense``, GELU, ``LayerNorm``) and the decoder (tied to the word embeddings, plus a bias) give one
logit per vocabulary entry; the text's weight of entry ``j`` is ``max_t log(1 + relu(logit[t, j]))``
over its tokens ``t`` (``sum`` with a SparseEncoder configured so). Every token the model reads counts,
``[CLS]`` and ``[SEP]`` included, as TEI (``BertSpladeHead``, padding masked only) and
sentence-transformers' ``SpladePooling`` compute it; vLLM's ``SPLADESparsePooler`` drops them.

:class:`SpladeBackend` wraps the engine that runs the encoder (numpy, ONNX Runtime or OpenVINO, all
packed: sequences back to back, only attention padded) and applies the head to the engine's packed
states, so the vocabulary-sized product runs on real tokens only, ``block_rows`` tokens at a time
(memory: ``block_rows x vocabulary`` floats). ``max`` pooling takes the largest logit first and applies
the monotone ``log(1 + relu(.))`` once per vocabulary entry. It answers ``embed_sparse`` (the server's
``POST /embed_sparse`` and vLLM's ``/pooling``) and refuses pooled vectors (``pooled = False``).

Checkpoints: a Hugging Face folder or Hub id (naver/splade-cocondenser-ensembledistil's layout:
``cls.predictions.*`` beside ``bert.*``), served with ``--pooling splade`` as TEI's flag says, and a
sentence-transformers SparseEncoder folder (``MLMTransformer`` + ``SpladePooling`` in modules.json),
recognised by itself. RoBERTa-family heads (``lm_head.*``) are read as well.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from .._errors import InvalidFieldError
from .._optional import require
from .base import Backend, check_ids, check_texts
from .bert import _layer_norm, gelu
from .bert_model import SentenceEncoder, read_json

__all__ = ["SpladeBackend", "SpladeHead", "is_splade_folder", "SPLADE_POOLINGS"]

_F32 = np.float32
#: pooling_strategy values of sentence-transformers' SpladePooling
SPLADE_POOLINGS = ("max", "sum")


def splade_pooling_config(folder: Path) -> dict[str, Any] | None:
    """The SpladePooling module's config of a SparseEncoder folder (None: not one), checked."""
    modules_file = folder / "modules.json"
    if not modules_file.is_file():
        return None
    for mod in read_json(modules_file):
        if str(mod.get("type", "")).rsplit(".", 1)[-1] == "SpladePooling":
            cfg_file = folder / mod.get("path", "") / "config.json"
            cfg = read_json(cfg_file) if cfg_file.is_file() else {}
            strategy = cfg.get("pooling_strategy", "max")
            act = cfg.get("activation_function", "relu")
            if strategy not in SPLADE_POOLINGS:
                raise ValueError(f"{cfg_file}: pooling_strategy {strategy!r} is not supported ({', '.join(SPLADE_POOLINGS)})")
            if act != "relu":
                raise ValueError(f"{cfg_file}: activation_function {act!r} is not supported (only relu, SPLADE's)")
            return {"pooling_strategy": strategy, "activation_function": act}
    return None


def is_splade_folder(folder: Path) -> bool:
    """Whether ``folder`` is a sentence-transformers SparseEncoder with SPLADE pooling."""
    return splade_pooling_config(Path(folder)) is not None


class SpladeHead:
    """The MLM head of a checkpoint, in float32: ``(in, out)`` transform matrix, LayerNorm, the
    ``(hidden, vocab)`` decoder and its bias."""

    def __init__(self, weights_file: Path, eps: float, word_embeddings: np.ndarray | None = None) -> None:
        load_file = require("safetensors.numpy", extra="serve", feature="SPLADE models").load_file
        t = load_file(str(weights_file))

        def find(*names: str) -> np.ndarray | None:
            for n in names:
                if n in t:
                    return np.ascontiguousarray(t[n], dtype=_F32)
            return None

        bert = "cls.predictions."
        if bert + "transform.dense.weight" in t:
            dense_w, dense_b = find(bert + "transform.dense.weight"), find(bert + "transform.dense.bias")
            ln_w, ln_b = find(bert + "transform.LayerNorm.weight"), find(bert + "transform.LayerNorm.bias")
            dec_w = find(bert + "decoder.weight")
            dec_b = find(bert + "bias", bert + "decoder.bias")
            word_keys = [k for k in t if k.endswith("embeddings.word_embeddings.weight")]
        elif "lm_head.dense.weight" in t:  # RoBERTa family
            dense_w, dense_b = find("lm_head.dense.weight"), find("lm_head.dense.bias")
            ln_w, ln_b = find("lm_head.layer_norm.weight"), find("lm_head.layer_norm.bias")
            dec_w = find("lm_head.decoder.weight")
            dec_b = find("lm_head.bias", "lm_head.decoder.bias")
            word_keys = [k for k in t if k.endswith("embeddings.word_embeddings.weight")]
        else:
            raise ValueError(f"{weights_file} has no masked-language-model head (cls.predictions.* or lm_head.*): "
                             "SPLADE needs a BertForMaskedLM checkpoint; serve this model without --pooling splade")
        if dec_w is None:  # tied to the word embeddings: save_pretrained leaves the copy out
            dec_w = word_embeddings if word_embeddings is not None else (
                np.ascontiguousarray(t[word_keys[0]], dtype=_F32) if word_keys else None)
        missing = [n for n, v in (("transform.dense", dense_w), ("transform.dense.bias", dense_b),
                                  ("transform.LayerNorm", ln_w), ("transform.LayerNorm.bias", ln_b),
                                  ("decoder", dec_w), ("bias", dec_b)) if v is None]
        if missing:
            raise ValueError(f"{weights_file}: the MLM head lacks {', '.join(missing)}")
        assert dense_w is not None and dec_w is not None and dec_b is not None
        self.dense_w = np.ascontiguousarray(dense_w.T)
        self.dense_b, self.ln_w, self.ln_b, self.eps = dense_b, ln_w, ln_b, float(eps)
        self.decoder = np.ascontiguousarray(dec_w.T)  # (hidden, vocab)
        self.bias = dec_b
        if self.decoder.shape[1] != self.bias.shape[0]:
            raise ValueError(f"{weights_file}: decoder of {self.decoder.shape[1]} entries, bias of {self.bias.shape[0]}")
        self.vocab_size = int(self.bias.shape[0])

    def transform(self, states: np.ndarray) -> np.ndarray:
        """``LayerNorm(gelu(states @ dense + b))``, ``(tokens, hidden)``."""
        x = states @ self.dense_w
        x += self.dense_b
        gelu(x, out=x)
        return _layer_norm(x, self.ln_w, self.ln_b, self.eps)

    def pool(self, states: np.ndarray, lengths: np.ndarray, strategy: str, block_rows: int) -> np.ndarray:
        """``(sequences, vocab)`` SPLADE weights of packed ``states`` (``lengths`` tokens each, all > 0)."""
        x = self.transform(np.asarray(states, dtype=_F32))
        n, v = len(lengths), self.vocab_size
        ends = np.cumsum(lengths)
        starts = ends - lengths
        out = np.full((n, v), -np.inf if strategy == "max" else 0.0, dtype=_F32)
        for a in range(0, int(ends[-1]), block_rows):
            b = min(a + block_rows, int(ends[-1]))
            logits = x[a:b] @ self.decoder
            logits += self.bias
            first = int(np.searchsorted(ends, a, side="right"))  # sequences meeting rows a..b-1
            last = int(np.searchsorted(starts, b, side="left"))
            seg = np.maximum(starts[first:last], a) - a
            if strategy == "max":
                part = np.maximum.reduceat(logits, seg, axis=0)
                np.maximum(out[first:last], part, out=out[first:last])
            else:
                np.maximum(logits, 0, out=logits)
                np.log1p(logits, out=logits)
                out[first:last] += np.add.reduceat(logits, seg, axis=0)
        if strategy == "max":
            np.maximum(out, 0, out=out)
            np.log1p(out, out=out)
        return out


class SpladeBackend(Backend):
    """Sparse vectors from a SPLADE checkpoint on ``encoder``'s engine (see the module doc).

    Args:
        encoder: the BERT-family engine backend of the checkpoint (numpy, ONNX or OpenVINO).
        pooling_strategy: ``"max"`` (SPLADE's) or ``"sum"``; None: the SparseEncoder config's, else max.
        block_rows: tokens whose vocabulary logits are computed at once.
    """

    #: pooled dense vectors are not this model's output (the server answers 400 on those routes)
    pooled = False

    def __init__(self, encoder: SentenceEncoder, *, pooling_strategy: str | None = None, block_rows: int = 256) -> None:
        if not isinstance(encoder, SentenceEncoder):
            raise ValueError(f"--pooling splade needs a BERT-family model on the built-in engines, not {encoder!r}")
        folder = encoder.model.folder
        cfg = splade_pooling_config(folder) or {}
        self.pooling_strategy = pooling_strategy or cfg.get("pooling_strategy", "max")
        if self.pooling_strategy not in SPLADE_POOLINGS:
            raise ValueError(f"pooling_strategy must be one of {', '.join(SPLADE_POOLINGS)}, not {self.pooling_strategy!r}")
        if block_rows < 1:
            raise ValueError("block_rows must be positive")
        self.encoder = encoder
        encoder.model.pooling = ["splade"]  # what /info reports (TEI's model_type.embedding.pooling)
        word = getattr(encoder, "_word", None)  # the numpy engine holds the embeddings already
        self.head = SpladeHead(encoder.model.weights_file, encoder.model.eps, word)
        self.block_rows = int(block_rows)
        self.sparse_vocab_size = self.head.vocab_size
        self.dimensions = self.head.vocab_size
        self.name, self.max_tokens = encoder.name, encoder.max_tokens
        self.max_chars_per_token = encoder.max_chars_per_token

    def __getattr__(self, name: str) -> Any:  # the tokenizer, engine and precision of the encoder
        if name == "encoder":
            raise AttributeError(name)
        return getattr(self.encoder, name)

    def count_tokens(self, texts: list[str]) -> list[int]:
        return self.encoder.count_tokens(texts)

    def _not_pooled(self) -> InvalidFieldError:
        return InvalidFieldError(f"the model {self.name} is a SPLADE (sparse) model: it answers sparse vectors on "
                                 "POST /embed_sparse (or vLLM's /pooling), not pooled dense vectors", field="model")

    def embed(self, texts: list[str]) -> np.ndarray:
        raise self._not_pooled()

    def embed_tokens(self, ids: list[list[int]]) -> np.ndarray:
        raise self._not_pooled()

    def embed_encoded(self, seqs: list[list[int]]) -> np.ndarray:
        raise self._not_pooled()

    def _wrap(self, ids: list[list[int]], side: str) -> list[list[int]]:
        """Token ids without special tokens, cut to ``max_tokens`` at ``side``'s end and wrapped in them."""
        enc = self.encoder
        pre, suf = enc._prefix, enc._suffix
        room = enc.max_tokens - len(pre) - len(suf)
        if side == "right":
            return [pre + s[:room] + suf for s in ids]
        return [pre + (s[len(s) - room:] if len(s) > room else s) + suf for s in ids]

    def _pooled_chunks(self, texts: list[str], side: str = "right", seqs: list[list[int]] | None = None):
        """``(input indexes, (rows, vocab) weights)`` per engine call, texts cut at ``max_tokens`` keeping their
        first tokens (``side`` "right", the tokenizer's truncation) or their last ("left"), inside the special
        tokens; or the sequences ``seqs`` as they are."""
        enc = self.encoder
        if seqs is not None:
            pass
        elif side == "right":
            check_texts(texts)
            seqs = [e.ids for e in enc._tok.encode_batch(enc._prepare(list(texts)))]
        else:
            seqs = self._wrap(enc.split_tokens(texts), side)
        lengths = np.fromiter((len(s) for s in seqs), dtype=np.intp, count=len(seqs))
        if not lengths.all():
            raise ValueError(f"input {int(np.argmin(lengths))} has no tokens at all")
        order = np.argsort(-lengths, kind="stable")
        sorted_seqs, sorted_lengths = [seqs[i] for i in order.tolist()], lengths[order]
        for start, end, hidden in enc._hidden_chunks(sorted_seqs, sorted_lengths):
            yield order[start:end], self.head.pool(hidden, sorted_lengths[start:end], self.pooling_strategy,
                                                   self.block_rows)

    def sparse_weights(self, texts: list[str], side: str = "right") -> np.ndarray:
        """The dense ``(len(texts), vocab)`` float32 SPLADE weights (texts cut at ``max_tokens``, ``side`` as
        :meth:`embed_sparse`)."""
        out = np.zeros((len(texts), self.sparse_vocab_size), _F32)
        for rows, weights in self._pooled_chunks(texts, side):
            out[rows] = weights
        return out

    def embed_sparse(self, texts: list[str], side: str = "right") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(indices, values, nnz)``: each text's non-zero weights (indices ascending), back to back; a text
        over ``max_tokens`` keeps its first tokens (``side`` "right") or its last ("left"). Each engine call's
        weights are made sparse before the next runs, so memory holds one call's ``rows x vocab`` floats,
        not the request's."""
        return self._sparse(self._pooled_chunks(texts, side), len(texts))

    def embed_sparse_ids(self, ids: list[list[int]], side: str = "right") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`embed_sparse` of token-id sequences (the tokenizer's ids, as :meth:`embed_tokens` of a dense
        model takes them: a sequence already wrapped in the special tokens is taken as complete)."""
        check_ids(ids, self.sparse_vocab_size)
        enc = self.encoder
        pre, suf = enc._prefix, enc._suffix
        bare = []
        for seq in ids:
            seq = [int(t) for t in seq]
            if len(seq) >= len(pre) + len(suf) and seq[:len(pre)] == pre and (not suf or seq[len(seq) - len(suf):] == suf):
                seq = seq[len(pre):len(seq) - len(suf)]
            bare.append(seq)
        return self._sparse(self._pooled_chunks([], side, self._wrap(bare, side)), len(ids))

    def _sparse(self, chunks, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        parts: list[tuple[np.ndarray, np.ndarray]] = [None] * n  # type: ignore[list-item]
        for rows, weights in chunks:
            for r, row in zip(rows.tolist(), weights):
                idx = np.flatnonzero(row > 0)
                parts[r] = (idx.astype(np.uint32), row[idx])
        if not n:
            return np.zeros(0, np.uint32), np.zeros(0, _F32), np.zeros(0, np.int64)
        nnz = np.fromiter((p[0].size for p in parts), np.int64, count=len(parts))
        return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]), nnz

    def close(self) -> None:
        self.encoder.close()

    def __repr__(self) -> str:
        return f"SpladeBackend({self.encoder!r}, vocab={self.sparse_vocab_size}, pooling={self.pooling_strategy!r})"
