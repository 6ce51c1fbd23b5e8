"""What every BERT-family engine shares: reading a model folder, the tokenizer, pooling.

A sentence-transformers folder (or a bare Hugging Face BERT folder) holds
``config.json``, ``model.safetensors`` and ``tokenizer.json`` (or, as older BERT repositories such as
naver/splade-* ship, ``vocab.txt`` with ``tokenizer_config.json``: :func:`load_tokenizer`), and optionally
``sentence_bert_config.json`` (max length, lower-casing) and ``modules.json``
with a Pooling config and a Normalize module. :class:`BertModel` reads all of
it into one canonical form (weights as ``(in, out)`` float32 matrices, the
position table already shifted for RoBERTa, the token-type-0 row) that the
numpy engine (``bert.py``) and the ONNX builder (``onnx_graph.py``) both use,
and :class:`SentenceEncoder` holds the engine-independent part of a backend:
tokenizing, counting, batching by length, pooling and normalizing.

Supported: ``model_type`` bert, roberta, xlm-roberta, camembert (RoBERTa
positions start at ``pad_token_id + 1``), with or without token-type
embeddings, absolute positions, exact (erf) GELU.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .._errors import InvalidFieldError
from .._optional import require
from .base import Backend, check_ids, check_texts, empty_result

__all__ = ["BertModel", "BertLayer", "ModelNotFoundError", "SentenceEncoder", "pool", "read_pipeline"]

_F32 = np.float32
#: model_type values whose positions are offset by padding_idx + 1 (fairseq style)
ROBERTA_TYPES = frozenset({"roberta", "xlm-roberta", "camembert"})
BERT_TYPES = frozenset({"bert"}) | ROBERTA_TYPES


class ModelNotFoundError(FileNotFoundError):
    """The model files are missing."""


def read_json(path: Path) -> Any:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


_POOLING_KEYS = (  # in the order sentence-transformers concatenates them
    ("pooling_mode_cls_token", "cls"),
    ("pooling_mode_max_tokens", "max"),
    ("pooling_mode_mean_tokens", "mean"),
    ("pooling_mode_mean_sqrt_len_tokens", "mean_sqrt_len"),
    ("pooling_mode_weightedmean_tokens", "weightedmean"),
    ("pooling_mode_lasttoken", "lasttoken"),
)
_SUPPORTED_POOLING = {"cls", "max", "mean", "mean_sqrt_len", "lasttoken"}


def read_pipeline(folder: Path) -> tuple[list[str], bool]:
    """Pooling modes and whether a Normalize module follows, from modules.json."""
    modules_file = folder / "modules.json"
    if not modules_file.is_file():
        return ["mean"], False  # what sentence-transformers does for a bare HF model
    modes: list[str] = []
    normalize = False
    for mod in read_json(modules_file):
        kind = str(mod.get("type", "")).rsplit(".", 1)[-1]
        if kind in ("Transformer", "MLMTransformer") or str(mod.get("type", "")).startswith("pylate."):
            continue  # PyLate's modules (a ColBERT's projection) are read by colbert.py
        if kind == "SpladePooling":  # a SparseEncoder: its head and pooling are splade.py's
            modes = ["splade"]
            continue
        if kind == "Normalize":
            normalize = True
        elif kind == "Pooling":
            cfg_file = folder / mod.get("path", "") / "config.json"
            cfg: dict[str, Any] = (
                read_json(cfg_file) if cfg_file.is_file() else {"pooling_mode_mean_tokens": True}
            )
            if isinstance(cfg.get("pooling_mode"), str):
                modes = [cfg["pooling_mode"]]
            else:
                modes = [m for key, m in _POOLING_KEYS if cfg.get(key)]
            bad = [m for m in modes if m not in _SUPPORTED_POOLING]
            if bad or not modes:
                raise ValueError(f"{cfg_file}: unsupported pooling mode(s) {bad or modes}")
        else:
            raise ValueError(
                f"{modules_file}: module type {mod.get('type')!r} is not supported by the "
                f"built-in runtime (only Transformer, Pooling, Normalize, and a SparseEncoder's MLMTransformer "
                f"and SpladePooling); use 'st:{folder}'"
            )
    return modes or ["mean"], normalize


def load_tokenizer(folder: Path) -> "tokenizers.Tokenizer":  # noqa: F821
    """The folder's ``tokenizer.json``; without one, the BERT WordPiece tokenizer of its ``vocab.txt`` and
    ``tokenizer_config.json`` built as transformers' ``BertTokenizerFast`` converter builds it (BERT's
    normalizer with the config's ``do_lower_case`` and ``strip_accents``, its pre-tokenizer, WordPiece
    with ``[UNK]`` and 100 characters a word, ``[CLS] $A [SEP]``)."""
    tokenizers = require("tokenizers", extra="serve", feature="the BERT engines")
    if (folder / "tokenizer.json").is_file():
        return tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json"))
    cfg_file = folder / "tokenizer_config.json"
    cfg = read_json(cfg_file) if cfg_file.is_file() else {}
    vocab = {}
    with open(folder / "vocab.txt", encoding="utf-8") as f:
        for i, line in enumerate(f):
            vocab.setdefault(line.rstrip("\n"), i)
    unk, cls, sep = (str(cfg.get(k, d)) for k, d in (("unk_token", "[UNK]"), ("cls_token", "[CLS]"),
                                                     ("sep_token", "[SEP]")))
    missing = [t for t in (unk, cls, sep) if t not in vocab]
    if missing:
        raise ValueError(f"{folder / 'vocab.txt'} lacks the special tokens {', '.join(missing)}")
    tok = tokenizers.Tokenizer(tokenizers.models.WordPiece(vocab, unk_token=unk, max_input_chars_per_word=100))
    lower = bool(cfg.get("do_lower_case", True))
    tok.normalizer = tokenizers.normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=bool(cfg.get("tokenize_chinese_chars", True)),
        strip_accents=cfg.get("strip_accents"), lowercase=lower)
    tok.pre_tokenizer = tokenizers.pre_tokenizers.BertPreTokenizer()
    tok.post_processor = tokenizers.processors.TemplateProcessing(
        single=f"{cls}:0 $A:0 {sep}:0", pair=f"{cls}:0 $A:0 {sep}:0 $B:1 {sep}:1",
        special_tokens=[(cls, vocab[cls]), (sep, vocab[sep])])
    tok.decoder = tokenizers.decoders.WordPiece(prefix="##")
    for t in {unk, cls, sep, str(cfg.get("pad_token", "[PAD]")), str(cfg.get("mask_token", "[MASK]"))} & set(vocab):
        tok.add_special_tokens([tokenizers.AddedToken(t, special=True)])
    return tok


def name_from_folder(folder: Path) -> str:
    """'org/name' for a Hugging Face cache snapshot folder, else the folder name."""
    parts = folder.resolve().parts
    for i, p in enumerate(parts):
        if p.startswith("models--") and i + 2 < len(parts) and parts[i + 1] == "snapshots":
            return p[len("models--"):].replace("--", "/")
    return folder.resolve().name


@dataclass(frozen=True)
class BertLayer:
    """One encoder layer; matrices are ``(in, out)`` (torch Linear transposed)."""

    w_q: np.ndarray
    b_q: np.ndarray
    w_k: np.ndarray
    b_k: np.ndarray
    w_v: np.ndarray
    b_v: np.ndarray
    w_o: np.ndarray
    b_o: np.ndarray
    ln1_w: np.ndarray
    ln1_b: np.ndarray
    w_in: np.ndarray
    b_in: np.ndarray
    w_out: np.ndarray
    b_out: np.ndarray
    ln2_w: np.ndarray
    ln2_b: np.ndarray


class BertModel:
    """A BERT-family model folder, read and checked.

    Attributes: ``folder``, ``config`` (config.json), ``model_type``,
    ``hidden``, ``heads``, ``eps``, ``max_tokens``, ``lower_case``,
    ``pooling`` (modes), ``normalize``, ``weights_file``.
    :meth:`load_weights` reads the tensors (separately, since a cached ONNX
    graph does not need them).
    """

    def __init__(self, path: str | Path, max_tokens: int | None = None) -> None:
        folder = Path(path).expanduser()
        missing = [f for f in ("config.json", "model.safetensors", "tokenizer.json") if not (folder / f).is_file()
                   and not (f == "tokenizer.json" and (folder / "vocab.txt").is_file())]
        if "model.safetensors" in missing and (folder / "pytorch_model.bin").is_file():
            missing.append("(only pytorch_model.bin is there, which needs torch: convert it to "
                           f"safetensors, or serve it with 'st:{folder}')")
        if missing:
            raise ModelNotFoundError(f"{folder} is not a usable model folder: missing {', '.join(missing)}")
        self.folder = folder
        self.weights_file = folder / "model.safetensors"
        cfg = read_json(folder / "config.json")
        self.config: dict[str, Any] = cfg
        self.model_type = str(cfg.get("model_type", "bert"))
        if self.model_type not in BERT_TYPES:
            raise ValueError(f"{folder}: model_type {self.model_type!r} is not supported "
                             f"(supported: {', '.join(sorted(BERT_TYPES))}); use 'st:{folder}'")
        if cfg.get("position_embedding_type", "absolute") != "absolute":
            raise ValueError(f"{folder}: only absolute position embeddings are supported")
        act = cfg.get("hidden_act", "gelu")
        if act != "gelu":
            raise ValueError(f"{folder}: hidden_act {act!r} is not supported (only 'gelu', the exact erf form)")
        self.hidden = int(cfg["hidden_size"])
        self.heads = int(cfg["num_attention_heads"])
        self.layers = int(cfg["num_hidden_layers"])
        self.intermediate = int(cfg.get("intermediate_size", 4 * self.hidden))
        if self.hidden % self.heads:
            raise ValueError(f"{folder}: hidden_size {self.hidden} is not a multiple of num_attention_heads")
        self.eps = float(cfg.get("layer_norm_eps", 1e-12))
        # RoBERTa numbers positions from padding_idx + 1 (fairseq); BERT from 0
        self.position_offset = int(cfg.get("pad_token_id", 1)) + 1 if self.model_type in ROBERTA_TYPES else 0
        max_pos = int(cfg.get("max_position_embeddings", 512)) - self.position_offset
        st_cfg_file = folder / "sentence_bert_config.json"
        st_cfg = read_json(st_cfg_file) if st_cfg_file.is_file() else {}
        seq_len = int(st_cfg.get("max_seq_length") or max_pos)
        if max_tokens is not None:
            if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or not 2 < max_tokens <= max_pos:
                raise ValueError(f"max_tokens must be in (2, {max_pos}], not {max_tokens!r}")
            seq_len = max_tokens
        self.max_tokens = min(seq_len, max_pos)
        self.lower_case = bool(st_cfg.get("do_lower_case", False))
        self.pooling, self.normalize = read_pipeline(folder)
        self.dimensions = self.hidden * len(self.pooling)

    def flops_per_token(self, length: int = 0) -> float:
        """Multiply-adds x 2 of the encoder's matrix products per token (attention's
        two length-dependent products included for a sequence of ``length``)."""
        d, i = self.hidden, self.intermediate
        return self.layers * (2.0 * (4 * d * d + 2 * d * i) + 4.0 * length * d)

    def load_weights(self) -> tuple[dict[str, np.ndarray], list[BertLayer]]:
        """The embedding tensors and the layers, float32, in canonical form.

        Embeddings: ``word`` (V, D); ``position`` (positions usable, D) already
        shifted by the RoBERTa offset; ``token_type`` (D,) the type-0 row (zeros
        when the model has no token types); ``ln_w``/``ln_b``.
        """
        load_file = require("safetensors.numpy", extra="serve", feature="the BERT engines").load_file
        tensors = load_file(str(self.weights_file))
        anchor = next((k for k in tensors if k.endswith("embeddings.word_embeddings.weight")), None)
        if anchor is None:
            raise ValueError(f"{self.weights_file} has no embeddings.word_embeddings.weight: not a BERT model")
        prefix = anchor[: -len("embeddings.word_embeddings.weight")]

        def get(key: str) -> np.ndarray:
            name = prefix + key
            if name not in tensors and ".LayerNorm." in key:  # TensorFlow's names, as transformers 5 saves them too
                name = name.replace(".weight", ".gamma").replace(".bias", ".beta")
            try:
                return np.ascontiguousarray(tensors[name], dtype=_F32)
            except KeyError:
                raise ValueError(f"{self.weights_file} lacks tensor {prefix + key!r}") from None

        def dense(key: str) -> tuple[np.ndarray, np.ndarray]:  # torch Linear (out, in) -> (in, out)
            return np.ascontiguousarray(get(key + ".weight").T), get(key + ".bias")

        word = get("embeddings.word_embeddings.weight")
        if (prefix + "embeddings.token_type_embeddings.weight") in tensors:
            token_type = get("embeddings.token_type_embeddings.weight")[0].copy()
        else:
            token_type = np.zeros(self.hidden, dtype=_F32)
        position = get("embeddings.position_embeddings.weight")[self.position_offset:]
        emb = {"word": word, "position": np.ascontiguousarray(position),
               "token_type": token_type, "ln_w": get("embeddings.LayerNorm.weight"),
               "ln_b": get("embeddings.LayerNorm.bias")}
        layers = []
        for n in range(self.layers):
            p = f"encoder.layer.{n}."
            att = p + "attention.self."
            layers.append(BertLayer(
                *dense(att + "query"), *dense(att + "key"), *dense(att + "value"),
                *dense(p + "attention.output.dense"),
                get(p + "attention.output.LayerNorm.weight"), get(p + "attention.output.LayerNorm.bias"),
                *dense(p + "intermediate.dense"), *dense(p + "output.dense"),
                get(p + "output.LayerNorm.weight"), get(p + "output.LayerNorm.bias"),
            ))
        return emb, layers


def pool(x: np.ndarray, lengths: np.ndarray, modes: list[str], normalize: bool) -> np.ndarray:
    """Pool packed token states ``x`` (sequences back to back, ``lengths`` each)."""
    starts = np.zeros(len(lengths), dtype=np.intp)
    np.cumsum(lengths[:-1], out=starts[1:])
    counts = lengths.astype(_F32)[:, None]
    parts = []
    for mode in modes:
        if mode == "cls":
            parts.append(x[starts])
        elif mode == "lasttoken":
            parts.append(x[starts + lengths - 1])
        elif mode == "max":
            parts.append(np.maximum.reduceat(x, starts, axis=0))
        else:
            summed = np.add.reduceat(x, starts, axis=0)
            parts.append(summed / (counts if mode == "mean" else np.sqrt(counts)))
    pooled = parts[0] if len(parts) == 1 else np.concatenate(parts, axis=1)
    if normalize:
        norms = np.sqrt(np.einsum("ij,ij->i", pooled, pooled))
        pooled = pooled / np.maximum(norms, _F32(1e-12))[:, None]
    return pooled.astype(_F32, copy=False)


class SentenceEncoder(Backend):
    """The engine-independent half of a BERT-family backend.

    Subclasses set ``self.model`` (a :class:`BertModel`) before calling
    :meth:`_init_tokenizers`, and implement :meth:`_encode_sorted`, which gets
    sequences sorted longest first and returns their pooled vectors.
    """

    model: BertModel
    engine = "numpy"
    execution_provider: str | None = None

    def _init_tokenizers(self, name: str | None) -> None:
        Tokenizer = require("tokenizers", extra="serve", feature="the BERT engines").Tokenizer
        m = self.model
        self.max_tokens = m.max_tokens
        self.dimensions = m.dimensions
        self.name = name or name_from_folder(m.folder)
        self.path = m.folder
        self._vocab = int(m.config.get("vocab_size", 0)) or None
        self._tok = load_tokenizer(m.folder)
        self._tok.no_padding()
        self._tok.enable_truncation(max_length=self.max_tokens)
        self._counter = load_tokenizer(m.folder)  # own object: truncation state is per tokenizer
        self._counter.no_padding()
        self._counter.no_truncation()
        # the longest vocabulary piece (without WordPiece's '##'), plus one separator: no token covers more
        # of a text whose words are at most the tokenizer's longest word (server/limits.py)
        pieces = [k.removeprefix("##") for k in self._counter.get_vocab()]
        self.max_chars_per_token = max(map(len, pieces), default=1) + 1
        # the special tokens the post-processor wraps a text in ([CLS] ... [SEP], <s> ... </s>)
        with_special = self._counter.encode("a", add_special_tokens=True).ids
        plain = self._counter.encode("a", add_special_tokens=False).ids
        at = next((i for i in range(len(with_special)) if with_special[i:i + len(plain)] == plain), None)
        self._prefix = list(with_special[:at]) if at is not None else []
        self._suffix = list(with_special[at + len(plain):]) if at is not None else []

    def _prepare(self, texts: list[str]) -> list[str]:
        # sentence-transformers strips inputs (and lower-cases if configured)
        return [t.strip().lower() if self.model.lower_case else t.strip() for t in texts]

    def tokenize(self, texts: list[str], add_special_tokens: bool = True) -> list[list[int]]:
        """Token ids as embed() sees them (truncated to max_tokens)."""
        check_texts(texts)
        encs = self._tok.encode_batch(self._prepare(list(texts)), add_special_tokens=add_special_tokens)
        return [e.ids for e in encs]

    @property
    def special_token_count(self) -> int:
        """How many special tokens embed_tokens() wraps a sequence in ([CLS] and [SEP]: 2)."""
        return len(self._prefix) + len(self._suffix)

    def split_tokens(self, texts: list[str]) -> list[list[int]]:
        """Untruncated ids of each text without special tokens: what embed_tokens() takes, so that a
        caller can cut a text at either end (the server's truncation_side and truncate_prompt_tokens)."""
        check_texts(texts)
        return [e.ids for e in self._counter.encode_batch(self._prepare(list(texts)), add_special_tokens=False)]

    def token_spans(self, texts: list[str], add_special_tokens: bool = True) -> list[list[tuple[int, str, bool, int, int]]]:
        """``(id, token, special, start, stop)`` per token, untruncated; start/stop are character offsets
        into the text as given (sentence-transformers strips it first: the offsets are shifted back)."""
        check_texts(texts)
        out = []
        encs = self._counter.encode_batch(self._prepare(list(texts)), add_special_tokens=add_special_tokens)
        for text, e in zip(texts, encs):
            lead = len(text) - len(text.lstrip())
            out.append([(i, tok, bool(sp), a + lead, b + lead)
                        for i, tok, sp, (a, b) in zip(e.ids, e.tokens, e.special_tokens_mask, e.offsets)])
        return out

    def decode_ids(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        """The text of token ids (TEI's Decode); an id outside the vocabulary is an invalid_field error
        naming its index."""
        size = self._counter.get_vocab_size()
        for i, t in enumerate(ids):
            if t >= size:
                raise InvalidFieldError(f"token id {t} is not in the vocabulary of {size} tokens", field=f"ids[{i}]")
        return self._counter.decode(ids, skip_special_tokens=skip_special_tokens)

    def count_tokens(self, texts: list[str]) -> list[int]:
        """Tokens per text including the special tokens ([CLS], [SEP]), untruncated.

        A text is embedded without truncation iff its count <= max_tokens.
        """
        check_texts(texts)
        if not texts:
            return []
        return [len(e.ids) for e in self._counter.encode_batch(self._prepare(list(texts)))]

    def encode(self, texts: list[str]) -> list[list[int]]:
        """Untruncated token ids of each text, special tokens included: ``len`` of each is its
        :meth:`count_tokens`, and :meth:`embed_encoded` embeds them as :meth:`embed` embeds the texts.
        The server tokenizes each text once with it (counting, then the model call), not twice."""
        check_texts(texts)
        if not texts:
            return []
        return [e.ids for e in self._counter.encode_batch(self._prepare(list(texts)))]

    def embed_encoded(self, seqs: list[list[int]]) -> np.ndarray:
        """Embed :meth:`encode`'s sequences; one longer than ``max_tokens`` is cut as the tokenizer's
        truncation cuts its text (its first tokens kept, inside the special tokens), so the vectors are
        :meth:`embed`'s of the same texts."""
        if not seqs:
            return empty_result(self.dimensions)
        limit = self.max_tokens
        if any(len(s) > limit for s in seqs):
            pre, suf = len(self._prefix), len(self._suffix)
            room = limit - pre - suf
            seqs = [s if len(s) <= limit else s[:pre + room] + s[len(s) - suf:] for s in seqs]
        return self._embed_sequences(seqs)

    def embed(self, texts: list[str]) -> np.ndarray:
        check_texts(texts)
        if not texts:
            return empty_result(self.dimensions)
        encs = self._tok.encode_batch(self._prepare(list(texts)))
        return self._embed_sequences([e.ids for e in encs])

    def embed_tokens(self, ids: list[list[int]]) -> np.ndarray:
        """Embed token-id sequences.

        Each sequence is the tokenizer's ids for a text *without* special
        tokens (as OpenAI clients send); [CLS]/[SEP] are added here. A
        sequence that already starts with [CLS] and ends with [SEP] is taken
        as complete. Sequences are truncated to max_tokens like texts.
        """
        check_ids(ids, self._vocab)
        if not ids:
            return empty_result(self.dimensions)
        pre, suf = self._prefix, self._suffix
        room = self.max_tokens - len(pre) - len(suf)
        seqs: list[list[int]] = []
        for seq in ids:
            seq = [int(t) for t in seq]
            n = len(seq)
            if (n >= len(pre) + len(suf) and seq[:len(pre)] == pre
                    and (not suf or seq[n - len(suf):] == suf)):
                seq = seq[len(pre):n - len(suf)]
            seqs.append(pre + seq[:room] + suf)
        return self._embed_sequences(seqs)

    def _embed_sequences(self, seqs: list[list[int]]) -> np.ndarray:
        lengths = np.fromiter((len(s) for s in seqs), dtype=np.intp, count=len(seqs))
        if not lengths.all():
            raise ValueError(f"input {int(np.argmin(lengths))} has no tokens at all")
        order = np.argsort(-lengths, kind="stable")
        out = np.empty((len(seqs), self.dimensions), dtype=_F32)
        out[order] = self._encode_sorted([seqs[i] for i in order.tolist()], lengths[order])
        return out

    def _encode_sorted(self, seqs: list[list[int]], lengths: np.ndarray) -> np.ndarray:
        """Pooled vectors of ``seqs`` (sorted longest first, ``lengths`` each)."""
        out = np.empty((len(seqs), self.dimensions), dtype=_F32)
        for start, end, hidden in self._hidden_chunks(seqs, lengths):
            out[start:end] = pool(hidden, lengths[start:end], self.model.pooling, self.model.normalize)
        return out

    def _hidden_chunks(self, seqs: list[list[int]], lengths: np.ndarray, key_lengths: np.ndarray | None = None):
        """``(start, end, states)`` for consecutive chunks of ``seqs`` (sorted longest first): the packed
        last hidden states of the chunk's tokens, sequences back to back, before pooling. ``key_lengths``:
        only the first so many tokens of each sequence are attended to (None: all)."""
        raise NotImplementedError

    def embed_token_states(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """``(rows, lengths)``: the last hidden state of every token of each text (special tokens
        included, texts cut to ``max_tokens``), as sentence-transformers' ``encode(...,
        output_value="token_embeddings")`` gives them; rows of all texts back to back in input order,
        float32 ``(sum(lengths), hidden)``."""
        check_texts(texts)
        if not texts:
            return np.zeros((0, self.model.hidden), _F32), np.zeros(0, np.intp)
        return self.sequence_states([e.ids for e in self._tok.encode_batch(self._prepare(list(texts)))])

    def sequence_states(self, seqs: list[list[int]],
                        key_lengths: list[int] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``(rows, lengths)``: the last hidden state of every token of the id sequences ``seqs`` (as given:
        no special tokens added, no truncation), rows back to back in input order. ``key_lengths``: how
        many first tokens of each sequence the others attend to (the rest are masked keys whose states
        are still computed, as ColBERT's query expansion tokens); None: all."""
        lengths = np.fromiter((len(s) for s in seqs), dtype=np.intp, count=len(seqs))
        if not len(seqs):
            return np.zeros((0, self.model.hidden), _F32), lengths
        order = np.argsort(-lengths, kind="stable")
        sorted_lengths = lengths[order]
        keys = None if key_lengths is None else np.asarray(key_lengths, dtype=np.intp)[order]
        packed = np.concatenate([np.asarray(h, dtype=_F32) for _, _, h in
                                 self._hidden_chunks([seqs[i] for i in order.tolist()], sorted_lengths, keys)])
        starts_sorted = np.concatenate([[0], np.cumsum(sorted_lengths)[:-1]])
        at = np.empty(len(seqs), np.intp)
        at[order] = starts_sorted  # where each text's rows start in the sorted packing
        starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
        gather = np.repeat(at - starts, lengths) + np.arange(int(lengths.sum()))
        return packed[gather], lengths
