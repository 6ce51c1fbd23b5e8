"""Tiny random-weight BERT-family model folders, written by the tests that need them.

``write_tiny_model(folder, variant=...)`` writes config.json, model.safetensors
(random weights), tokenizer.json (a WordPiece vocabulary built with the
``tokenizers`` library) and, per variant, the sentence-transformers pipeline
files. ``naive_forward`` is a deliberately plain, loop-per-sequence encoder
written from the Hugging Face modelling code (positions from
``create_position_ids_from_input_ids`` for RoBERTa), independent of both engines.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

WORDS = ("the a an of to in is was for on with as by at from it this that be are or and not but cat dog "
         "house tree river blue green red quick brown fox jumps over lazy night day sun moon star sea "
         "##s ##ed ##ing ##ly run walk talk sing play read write").split()

#: variant -> (model_type, tensor prefix, token types, pooling config or None, normalize)
VARIANTS = {
    "bert-mean-normalize": ("bert", "bert.", 2, {"pooling_mode_mean_tokens": True}, True),
    "bert-cls-raw": ("bert", "", 2, {"pooling_mode_cls_token": True}, False),
    "bert-no-token-types": ("bert", "", 0, {"pooling_mode_mean_tokens": True}, True),
    "bert-bare-hf": ("bert", "bert.", 2, None, False),  # no modules.json: mean pooling, no Normalize
    "roberta-mean": ("roberta", "roberta.", 1, {"pooling_mode_mean_tokens": True}, True),
    "xlm-roberta-cls": ("xlm-roberta", "", 1, {"pooling_mode_cls_token": True}, True),
}
HIDDEN, HEADS, LAYERS, INTER, MAX_POS = 32, 4, 2, 64, 40


def _tokenizer(specials: list[str], cls: str, sep: str) -> "tokenizers.Tokenizer":  # noqa: F821
    from tokenizers import Tokenizer, normalizers, pre_tokenizers, processors
    from tokenizers.models import WordPiece

    vocab = {tok: i for i, tok in enumerate(specials + WORDS)}
    unk = next(t for t in specials if "unk" in t.lower())
    tok = Tokenizer(WordPiece(vocab, unk_token=unk))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(
        single=f"{cls} $A {sep}", pair=f"{cls} $A {sep} $B:1 {sep}:1",
        special_tokens=[(cls, vocab[cls]), (sep, vocab[sep])])
    return tok


def write_tiny_model(folder: Path, variant: str = "bert-mean-normalize", seed: int = 0,
                     max_seq_length: int | None = None) -> Path:
    """Write a tiny random model folder of ``variant`` (see VARIANTS) and return it."""
    from safetensors.numpy import save_file

    model_type, prefix, type_vocab, pooling, normalize = VARIANTS[variant]
    roberta = model_type != "bert"
    folder.mkdir(parents=True, exist_ok=True)
    if roberta:  # fairseq order: <s>=0, <pad>=1 (padding_idx), </s>=2, <unk>=3
        specials, cls, sep, pad = ["<s>", "<pad>", "</s>", "<unk>"], "<s>", "</s>", 1
    else:
        specials, cls, sep, pad = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"], "[CLS]", "[SEP]", 0
    tok = _tokenizer(specials, cls, sep)
    tok.save(str(folder / "tokenizer.json"))
    vocab = tok.get_vocab_size()
    max_pos = MAX_POS + (pad + 1 if roberta else 0)
    config = {"model_type": model_type, "hidden_size": HIDDEN, "num_attention_heads": HEADS,
              "num_hidden_layers": LAYERS, "intermediate_size": INTER, "vocab_size": vocab,
              "max_position_embeddings": max_pos, "type_vocab_size": max(type_vocab, 1),
              "layer_norm_eps": 1e-5 if roberta else 1e-12, "hidden_act": "gelu", "pad_token_id": pad}
    (folder / "config.json").write_text(json.dumps(config))
    rng = np.random.default_rng(seed)

    def rand(*shape: int, scale: float = 0.2) -> np.ndarray:
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    t: dict[str, np.ndarray] = {
        "embeddings.word_embeddings.weight": rand(vocab, HIDDEN, scale=1.0),
        "embeddings.position_embeddings.weight": rand(max_pos, HIDDEN, scale=1.0),
        "embeddings.LayerNorm.weight": 1 + rand(HIDDEN, scale=0.1),
        "embeddings.LayerNorm.bias": rand(HIDDEN, scale=0.1),
    }
    if type_vocab:
        t["embeddings.token_type_embeddings.weight"] = rand(type_vocab, HIDDEN, scale=1.0)
    for n in range(LAYERS):
        p = f"encoder.layer.{n}."
        for name, (o, i) in {"attention.self.query": (HIDDEN, HIDDEN), "attention.self.key": (HIDDEN, HIDDEN),
                             "attention.self.value": (HIDDEN, HIDDEN), "attention.output.dense": (HIDDEN, HIDDEN),
                             "intermediate.dense": (INTER, HIDDEN), "output.dense": (HIDDEN, INTER)}.items():
            t[p + name + ".weight"] = rand(o, i, scale=1 / math.sqrt(i))
            t[p + name + ".bias"] = rand(o, scale=0.1)
        for ln in ("attention.output.LayerNorm", "output.LayerNorm"):
            t[p + ln + ".weight"] = 1 + rand(HIDDEN, scale=0.1)
            t[p + ln + ".bias"] = rand(HIDDEN, scale=0.1)
    save_file({prefix + k: v for k, v in t.items()}, str(folder / "model.safetensors"))
    if pooling is not None:
        modules = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
                   {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]
        if normalize:
            modules.append({"idx": 2, "name": "2", "path": "2_Normalize",
                            "type": "sentence_transformers.models.Normalize"})
        (folder / "modules.json").write_text(json.dumps(modules))
        (folder / "1_Pooling").mkdir(exist_ok=True)
        (folder / "1_Pooling" / "config.json").write_text(json.dumps({"word_embedding_dimension": HIDDEN, **pooling}))
        st_cfg = {"max_seq_length": max_seq_length or MAX_POS, "do_lower_case": False}
        (folder / "sentence_bert_config.json").write_text(json.dumps(st_cfg))
    return folder


def naive_forward(folder: Path, ids: list[int]) -> np.ndarray:
    """Token states of one sequence, computed the plain way in float64 (independent reference)."""
    from safetensors.numpy import load_file

    cfg = json.loads((folder / "config.json").read_text())
    raw = load_file(str(folder / "model.safetensors"))
    prefix = next(k for k in raw if k.endswith("embeddings.word_embeddings.weight"))[:-len("embeddings.word_embeddings.weight")]
    w = {k[len(prefix):]: v.astype(np.float64) for k, v in raw.items()}
    eps = cfg["layer_norm_eps"]

    def ln(x: np.ndarray, g: np.ndarray, b: np.ndarray) -> np.ndarray:
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + eps) * g + b

    def linear(x: np.ndarray, name: str) -> np.ndarray:
        return x @ w[name + ".weight"].T + w[name + ".bias"]

    ids_arr = np.array(ids)
    if cfg["model_type"] == "bert":
        positions = np.arange(len(ids))
    else:  # transformers' create_position_ids_from_input_ids
        pad = cfg["pad_token_id"]
        mask = (ids_arr != pad).astype(int)
        positions = np.cumsum(mask) * mask + pad
    x = w["embeddings.word_embeddings.weight"][ids_arr] + w["embeddings.position_embeddings.weight"][positions]
    if "embeddings.token_type_embeddings.weight" in w:
        x = x + w["embeddings.token_type_embeddings.weight"][0]
    x = ln(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
    heads, hd = cfg["num_attention_heads"], cfg["hidden_size"] // cfg["num_attention_heads"]
    for n in range(cfg["num_hidden_layers"]):
        p = f"encoder.layer.{n}."
        q, k, v = (linear(x, p + f"attention.self.{m}").reshape(len(ids), heads, hd).transpose(1, 0, 2)
                   for m in ("query", "key", "value"))
        s = q @ k.transpose(0, 2, 1) / math.sqrt(hd)
        s = np.exp(s - s.max(-1, keepdims=True))
        s /= s.sum(-1, keepdims=True)
        ctx = (s @ v).transpose(1, 0, 2).reshape(len(ids), -1)
        x = ln(linear(ctx, p + "attention.output.dense") + x,
               w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"])
        inter = linear(x, p + "intermediate.dense")
        inter = inter * 0.5 * (1 + np.vectorize(math.erf)(inter / math.sqrt(2)))
        x = ln(linear(inter, p + "output.dense") + x, w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"])
    return x
