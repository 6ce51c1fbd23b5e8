"""ColBERT (late interaction) checkpoints on the BERT engines: a vector per token, projected and normalized.

Two real layouts are read, each as its own library computes it:

* **PyLate** (sentence-transformers layout): ``modules.json`` lists the Transformer and one or more
  ``pylate.models.Dense`` projections (``1_Dense/config.json`` + ``model.safetensors``: ``linear.weight``,
  no bias nor activation as PyLate trains them; a bias, a residual and the identity activation are
  honoured); ``config_sentence_transformers.json`` carries ``query_prefix`` / ``document_prefix`` (tokens
  the tokenizer holds, ``"[Q] "`` / ``"[D] "``), ``query_length``, ``document_length``,
  ``do_query_expansion``, ``attend_to_expansion_tokens`` and ``skiplist_words``. As
  ``pylate.models.ColBERT.encode``: the text is tokenized to ``length - 1`` tokens and the prefix id is
  inserted after the first ([CLS]); a query with expansion is padded to ``query_length`` with the
  tokenizer's mask token, which the other tokens attend to only if ``attend_to_expansion_tokens``, and
  every token is kept; a document drops the tokens of the skiplist (punctuation).
* **colbert-ai** (stanford-futuredata/ColBERT's ``Checkpoint``): a Hugging Face folder whose weights hold
  ``bert.*`` and the projection ``linear.weight``, with ``artifact.metadata`` (``query_maxlen``,
  ``doc_maxlen``, ``mask_punctuation``, ``query_token_id`` ``"[unused0]"``, ``doc_token_id``
  ``"[unused1]"``, ``attend_to_mask_tokens``). As its QueryTokenizer / DocTokenizer: ``". " + text``
  tokenized to the length, the ``.`` replaced by the marker, queries padded with ``[MASK]``; documents
  drop punctuation tokens when ``mask_punctuation``.

The engines give the last hidden state of every token (packed, no padding computed; the expansion
tokens as masked keys); :class:`ColbertHead` projects, drops and L2-normalizes each token's vector.
"""

from __future__ import annotations

import string
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .._errors import InvalidFieldError
from .._optional import require
from .base import check_texts
from .bert_model import SentenceEncoder, read_json

__all__ = ["ColbertConfig", "ColbertHead", "read_colbert", "attach_colbert", "colbert_options"]

_F32 = np.float32
_IDENTITY = ("torch.nn.modules.linear.Identity", "torch.nn.Identity", "Identity")


@dataclass(frozen=True)
class Projection:
    """One linear layer on each token's vector: ``x @ weight (+ bias) (+ residual)``."""

    weight: np.ndarray  # (in, out)
    bias: np.ndarray | None
    residual: np.ndarray | str | None  # (in, out), "identity" (in == out) or None

    def __call__(self, x: np.ndarray) -> np.ndarray:
        y = x @ self.weight
        if self.bias is not None:
            y += self.bias
        if isinstance(self.residual, np.ndarray):
            y += x @ self.residual
        elif self.residual == "identity":
            y += x
        return y


@dataclass(frozen=True)
class ColbertConfig:
    """What a ColBERT checkpoint says about its two modes (names are PyLate's)."""

    layout: str  # "pylate" or "colbert-ai"
    query_prefix: str | None  # the marker token; None: none
    document_prefix: str | None
    query_length: int
    document_length: int
    do_query_expansion: bool
    attend_to_expansion_tokens: bool
    skiplist_words: tuple[str, ...]
    projections: tuple[Projection, ...]

    @property
    def dimensions(self) -> int:
        return int(self.projections[-1].weight.shape[1])

    def info(self) -> dict[str, Any]:
        """The model's multi-vector facts, as /v1/models, /info and /health report them."""
        return {"layout": self.layout, "dimensions": self.dimensions, "query_prefix": self.query_prefix,
                "document_prefix": self.document_prefix, "query_length": self.query_length,
                "document_length": self.document_length, "do_query_expansion": self.do_query_expansion,
                "attend_to_expansion_tokens": self.attend_to_expansion_tokens}


def _tensors(file: Path) -> dict[str, np.ndarray]:
    if not file.is_file():
        torch_file = file.with_name("pytorch_model.bin")
        hint = (f" (only {torch_file.name} is there, which needs torch: convert it to safetensors)"
                if torch_file.is_file() else "")
        raise ValueError(f"{file} is missing{hint}")
    return require("safetensors.numpy", extra="serve", feature="ColBERT models").load_file(str(file))


def _pylate(folder: Path, modules: list[dict[str, Any]]) -> ColbertConfig:
    projections = []
    for mod in modules:
        kind = str(mod.get("type", ""))
        if not kind.startswith("pylate."):
            continue
        if kind.rsplit(".", 1)[-1] != "Dense":
            raise ValueError(f"{folder / 'modules.json'}: PyLate module {kind!r} is not supported (only Dense)")
        sub = folder / mod.get("path", "")
        cfg = read_json(sub / "config.json")
        act = str(cfg.get("activation_function", "torch.nn.modules.linear.Identity"))
        if act not in _IDENTITY:
            raise ValueError(f"{sub / 'config.json'}: activation_function {act!r} is not supported (only Identity)")
        t = _tensors(sub / "model.safetensors")
        weight = np.ascontiguousarray(np.asarray(t["linear.weight"], _F32).T)
        if weight.shape != (int(cfg["in_features"]), int(cfg["out_features"])):
            raise ValueError(f"{sub}: linear.weight is {weight.shape[::-1]}, config says "
                             f"({cfg['out_features']}, {cfg['in_features']})")
        bias = np.asarray(t["linear.bias"], _F32) if cfg.get("bias", True) and "linear.bias" in t else None
        residual: np.ndarray | str | None = None
        if cfg.get("use_residual"):
            residual = (np.ascontiguousarray(np.asarray(t["residual.weight"], _F32).T)
                        if "residual.weight" in t else "identity")
        projections.append(Projection(weight, bias, residual))
    st_file = folder / "config_sentence_transformers.json"
    st = read_json(st_file) if st_file.is_file() else {}
    expansion = st.get("do_query_expansion")
    expansion = True if expansion is None else bool(expansion)
    attend = bool(st.get("attend_to_expansion_tokens") or False) and expansion

    def prefix(key: str, default: str) -> str | None:
        v = st.get(key)
        v = default if v is None else str(v)
        return v or None  # "" means no prefix

    words = st.get("skiplist_words")
    return ColbertConfig("pylate", prefix("query_prefix", "[Q] "), prefix("document_prefix", "[D] "),
                         int(st.get("query_length") or 32), int(st.get("document_length") or 180), expansion,
                         attend, tuple(string.punctuation if words is None else map(str, words)),
                         tuple(projections))


def _colbert_ai(folder: Path) -> ColbertConfig:
    meta = read_json(folder / "artifact.metadata")
    t = _tensors(folder / "model.safetensors")
    if "linear.weight" not in t:
        raise ValueError(f"{folder / 'model.safetensors'} has no linear.weight: not a colbert-ai checkpoint")
    weight = np.ascontiguousarray(np.asarray(t["linear.weight"], _F32).T)
    dim = meta.get("dim")
    if dim is not None and int(dim) != weight.shape[1]:
        raise ValueError(f"{folder}: artifact.metadata says dim {dim}, linear.weight projects to {weight.shape[1]}")
    punct = meta.get("mask_punctuation", True)
    return ColbertConfig("colbert-ai", str(meta.get("query_token_id") or "[unused0]"),
                         str(meta.get("doc_token_id") or "[unused1]"), int(meta.get("query_maxlen") or 32),
                         int(meta.get("doc_maxlen") or 180), True, bool(meta.get("attend_to_mask_tokens", False)),
                         tuple(string.punctuation) if punct else (), (Projection(weight, None, None),))


def read_colbert(folder: str | Path) -> ColbertConfig | None:
    """The ColBERT configuration of a model folder, or None when it is not a ColBERT checkpoint."""
    folder = Path(folder)
    modules_file = folder / "modules.json"
    if modules_file.is_file():
        modules = read_json(modules_file)
        if any(str(m.get("type", "")).startswith("pylate.") for m in modules):
            return _pylate(folder, modules)
    if (folder / "artifact.metadata").is_file():
        return _colbert_ai(folder)
    return None


class ColbertHead:
    """A ColBERT model's two modes on a BERT engine (``encoder``), as its library computes them."""

    def __init__(self, encoder: SentenceEncoder, cfg: ColbertConfig) -> None:
        self.encoder, self.cfg = encoder, cfg
        tok = encoder._counter
        vocab = tok.get_vocab()
        hidden = encoder.model.hidden
        if cfg.projections[0].weight.shape[0] != hidden:
            raise ValueError(f"{encoder.model.folder}: the projection reads {cfg.projections[0].weight.shape[0]} "
                             f"floats, the encoder's hidden size is {hidden}")
        max_pos = int(encoder.model.config.get("max_position_embeddings", 512)) - encoder.model.position_offset
        for what, n in (("query_length", cfg.query_length), ("document_length", cfg.document_length)):
            if not 3 < n <= max_pos:
                raise ValueError(f"{encoder.model.folder}: {what} {n} is not in (3, {max_pos}]")

        def token_id(token: str | None, what: str) -> int | None:
            if token is None:
                return None
            i = tok.token_to_id(token)
            if i is None:
                raise ValueError(f"{encoder.model.folder}: the {what} {token!r} is not a token of the tokenizer")
            return int(i)

        self.query_id = token_id(cfg.query_prefix, "query prefix")
        self.document_id = token_id(cfg.document_prefix, "document prefix")
        mask = token_id("[MASK]", "mask token") if tok.token_to_id("[MASK]") is not None else None
        if mask is None:  # RoBERTa-style vocabularies
            mask = tok.token_to_id("<mask>")
        if mask is None and cfg.do_query_expansion:
            raise ValueError(f"{encoder.model.folder}: query expansion needs a mask token; the tokenizer has none")
        self.mask_id = mask
        unk = tok.token_to_id("[UNK]") if tok.token_to_id("[UNK]") is not None else tok.token_to_id("<unk>")
        if cfg.layout == "colbert-ai":  # raw_tokenizer.encode(symbol, add_special_tokens=False)[0]
            ids = {e.ids[0] for e in tok.encode_batch(list(cfg.skiplist_words), add_special_tokens=False) if e.ids}
        else:  # tokenizer.convert_tokens_to_ids(word): the unknown token for a word not in the vocabulary
            ids = {vocab.get(w, unk) for w in cfg.skiplist_words}
        self.skiplist = np.array(sorted(i for i in ids if i is not None), dtype=np.intp)
        self.dimensions = cfg.dimensions

    def limit(self, is_query: bool) -> int:
        """Tokens the mode reads (special tokens and the marker included): query_length or document_length."""
        return self.cfg.query_length if is_query else self.cfg.document_length

    def _ids(self, texts: list[str]) -> list[list[int]]:
        """Untruncated ids with the special tokens and the marker, before any cut."""
        enc = self.encoder
        if self.cfg.layout == "colbert-ai":
            return [e.ids for e in enc._counter.encode_batch([". " + t for t in texts])]
        return [e.ids for e in enc._counter.encode_batch(enc._prepare(list(texts)))]

    def count_tokens(self, texts: list[str], is_query: bool) -> list[int]:
        """Tokens of each text in the mode (special tokens and marker included), untruncated."""
        check_texts(texts)
        marker = 1 if self.cfg.layout == "pylate" and (self.query_id if is_query else self.document_id) is not None else 0
        return [len(s) + marker for s in self._ids(texts)]

    def sequences(self, texts: list[str], is_query: bool) -> tuple[list[list[int]], list[int]]:
        """``(ids, key lengths)`` the encoder runs: cut to the mode's length, the marker in place, a query
        padded with mask tokens (attended to only with attend_to_expansion_tokens)."""
        enc, cfg = self.encoder, self.cfg
        marker = self.query_id if is_query else self.document_id
        limit = self.limit(is_query)
        pre, suf = enc._prefix, enc._suffix
        out, keys = [], []
        for ids in self._ids(texts):
            if cfg.layout == "colbert-ai":
                room = limit - len(pre) - len(suf)
                body = ids[len(pre):len(ids) - len(suf)][:room]
                seq = pre + body + suf
                if marker is not None and len(seq) > 1:
                    seq[1] = marker  # the "." placeholder
            else:
                room = limit - (marker is not None) - len(pre) - len(suf)
                body = ids[len(pre):len(ids) - len(suf)][:room]
                seq = pre + body + suf
                if marker is not None:
                    seq = seq[:1] + [marker] + seq[1:]
            keys.append(len(seq))
            if is_query and cfg.do_query_expansion and len(seq) < limit:
                seq = seq + [int(self.mask_id)] * (limit - len(seq))  # type: ignore[arg-type]
                if cfg.attend_to_expansion_tokens:
                    keys[-1] = limit
            out.append(seq)
        return out, keys

    def embed(self, texts: list[str], is_query: bool) -> tuple[np.ndarray, np.ndarray]:
        """``(rows, lengths)``: each text's normalized per-token vectors, back to back in input order,
        float32 ``(sum(lengths), dimensions)``; documents without their skiplist tokens."""
        check_texts(texts)
        if not texts:
            return np.zeros((0, self.dimensions), _F32), np.zeros(0, np.intp)
        seqs, keys = self.sequences(texts, is_query)
        states, lengths = self.encoder.sequence_states(seqs, keys)
        x = states
        for p in self.cfg.projections:
            x = p(x)
        if not is_query and len(self.skiplist):
            ids = np.fromiter((t for s in seqs for t in s), dtype=np.intp, count=int(lengths.sum()))
            keep = ~np.isin(ids, self.skiplist)
            owner = np.repeat(np.arange(len(seqs)), lengths)
            lengths = np.bincount(owner[keep], minlength=len(seqs)).astype(np.intp)
            x = x[keep]
        norms = np.sqrt(np.einsum("ij,ij->i", x, x))
        x = x / np.maximum(norms, _F32(1e-12))[:, None]
        return np.ascontiguousarray(x, dtype=_F32), lengths


def colbert_options(folder: str | Path, options: dict[str, Any]) -> dict[str, Any]:
    """``options`` for ``load_bert`` of ``folder``: a ColBERT checkpoint's engine reads sequences of up to
    its longer mode length (its sentence_bert_config.json holds whatever PyLate last set, a length - 1)."""
    cfg = read_colbert(folder)
    if cfg is None or "max_tokens" in options:
        return options
    return {**options, "max_tokens": max(cfg.query_length, cfg.document_length)}


def attach_colbert(backend: Any) -> Any:
    """``backend`` with its ColBERT head (``backend.colbert``) when its folder is a ColBERT checkpoint:
    pooled vectors are then refused by the server, which serves the per-token vectors instead."""
    if not isinstance(backend, SentenceEncoder):
        return backend
    cfg = read_colbert(backend.model.folder)
    if cfg is None:
        return backend
    backend.colbert = head = ColbertHead(backend, cfg)
    backend.dimensions = head.dimensions
    backend.pooled = False  # the server asks _not_pooled for its 400 (Embedder.check_pooled)

    def not_pooled() -> InvalidFieldError:
        return InvalidFieldError(
            f"the model {backend.name} is a multi-vector (ColBERT) model: it gives a vector per token, not one per "
            "input; send \"return_multivector\": true (and \"is_query\": true for queries) on /v1/embeddings, or "
            "POST /embed_all or /pooling with task token_embed", field="return_multivector")

    def pooled(*_: Any, **__: Any) -> Any:
        raise ValueError(f"{not_pooled().message}; in Python: backend.colbert.embed(texts, is_query)")

    backend._not_pooled = not_pooled
    backend.embed = backend.embed_encoded = backend.embed_tokens = pooled  # type: ignore[method-assign]
    return backend

