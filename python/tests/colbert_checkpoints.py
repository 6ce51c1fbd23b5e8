"""Tiny random-weight ColBERT checkpoints in the two real layouts, written by the tests (and by
``python/tests/data/colbert_reference.py``, which records PyLate's and colbert-ai's vectors of them).

A 2-layer BERT of hidden size 32 (``tiny_bert``'s sizes) with a small real WordPiece vocabulary
(``vocab.txt`` and the ``tokenizers`` library's ``tokenizer.json``: specials, ``[unused0]``/``[unused1]``,
the punctuation the skiplists drop, a few words), seeded so every run writes the same bytes:

* :func:`write_pylate` - PyLate's save layout: ``modules.json`` (Transformer, ``pylate.models.Dense.Dense``),
  ``1_Dense/config.json`` + ``1_Dense/model.safetensors`` (``linear.weight``, 32 -> 16, no bias),
  ``config_sentence_transformers.json`` with the prefixes, lengths, expansion and skiplist, the prefix
  tokens ``"[Q] "``/``"[D] "`` added to the tokenizer and the embeddings resized for them, as
  ``ColBERT.__init__`` does before saving;
* :func:`write_colbert_ai` - colbert-ai's ``Checkpoint.save``: ``HF_ColBERT.save_pretrained`` (config.json
  with ``architectures: ["HF_ColBERT"]``, model.safetensors holding ``bert.*`` and ``linear.weight``), the
  raw tokenizer's files and ``artifact.metadata``.
"""

from __future__ import annotations

import json
import math
import string
from pathlib import Path

import numpy as np

from tiny_bert import HEADS, HIDDEN, INTER, LAYERS

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "[unused0]", "[unused1]"]
PUNCTUATION = list(".,!?;:'\"()-")
WORDS = ("the a of to in is for on with cat dog house tree river blue green red quick brown fox jumps over "
         "lazy night day sun moon star sea ##s ##ed ##ing ##ly run walk read write").split()
MAX_POS = 64
DIM = 16
#: the texts the reference vectors are recorded for (punctuation for the skiplist; the last one is
#: longer than the document length, so it is cut)
DOCUMENTS = ["The quick brown fox jumps over the lazy dog.", "A cat, a dog; a river!",
             "Sun and moon (night, day)?", ("the blue sea " * 8).strip()]
QUERIES = ["quick fox?", "red house", "the river, the sea"]
#: case -> (layout, writer options): the checkpoints the reference vectors are recorded for
CASES = {
    "pylate": ("pylate", {}),
    "pylate-attend-expansion": ("pylate", {"attend_to_expansion_tokens": True}),
    "pylate-no-expansion": ("pylate", {"do_query_expansion": False}),
    "pylate-gamma-beta": ("pylate", {"tf_layer_norm_names": True, "seed": 11}),
    "colbert-ai": ("colbert-ai", {}),
}


def _tokenizer(added: list[str]):  # noqa: ANN202 (tokenizers.Tokenizer)
    from tokenizers import AddedToken, Tokenizer, normalizers, pre_tokenizers, processors
    from tokenizers.models import WordPiece

    vocab = {tok: i for i, tok in enumerate(SPECIALS + PUNCTUATION + WORDS)}
    tok = Tokenizer(WordPiece(vocab, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])])
    tok.add_special_tokens([AddedToken(t, special=True) for t in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")])
    if added:  # PyLate: tokenizer.add_tokens([query_prefix, document_prefix])
        tok.add_tokens([AddedToken(t, special=False, normalized=True) for t in added])
    return tok, SPECIALS + PUNCTUATION + WORDS


def _weights(vocab: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)

    def rand(*shape: int, scale: float = 0.2) -> np.ndarray:
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    t = {"embeddings.word_embeddings.weight": rand(vocab, HIDDEN, scale=1.0),
         "embeddings.position_embeddings.weight": rand(MAX_POS, HIDDEN, scale=1.0),
         "embeddings.token_type_embeddings.weight": rand(2, HIDDEN, scale=1.0),
         "embeddings.LayerNorm.weight": 1 + rand(HIDDEN, scale=0.1),
         "embeddings.LayerNorm.bias": rand(HIDDEN, scale=0.1)}
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
    t["linear.weight"] = rand(DIM, HIDDEN, scale=1 / math.sqrt(HIDDEN))  # torch Linear (out, in), no bias
    return t


def _bert_files(folder: Path, added: list[str], seed: int, architecture: str) -> tuple[dict[str, np.ndarray], int]:
    tok, vocab_list = _tokenizer(added)
    folder.mkdir(parents=True, exist_ok=True)
    tok.save(str(folder / "tokenizer.json"))
    (folder / "vocab.txt").write_text("".join(t + "\n" for t in vocab_list), encoding="utf-8")
    special = {"unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": "[PAD]", "cls_token": "[CLS]",
               "mask_token": "[MASK]"}
    (folder / "special_tokens_map.json").write_text(json.dumps(special))
    (folder / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "BertTokenizer", "do_lower_case": True, "model_max_length": MAX_POS, **special}))
    vocab = tok.get_vocab_size()
    config = {"architectures": [architecture], "model_type": "bert", "hidden_size": HIDDEN,
              "num_attention_heads": HEADS, "num_hidden_layers": LAYERS, "intermediate_size": INTER,
              "vocab_size": vocab, "max_position_embeddings": MAX_POS, "type_vocab_size": 2,
              "layer_norm_eps": 1e-12, "hidden_act": "gelu", "pad_token_id": 0,
              "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1}
    (folder / "config.json").write_text(json.dumps(config, indent=2))
    return _weights(vocab, seed), vocab


def write_pylate(folder: Path, *, seed: int = 3, query_length: int = 12, document_length: int = 14,
                 do_query_expansion: bool = True, attend_to_expansion_tokens: bool = False,
                 tf_layer_norm_names: bool = False) -> Path:
    """A PyLate ColBERT folder as ``ColBERT.save`` writes it (PyLate 1.6.0 on transformers 5.3 names the
    LayerNorm tensors ``gamma``/``beta``: ``tf_layer_norm_names``)."""
    from safetensors.numpy import save_file

    t, _ = _bert_files(folder, ["[Q] ", "[D] "], seed, "BertModel")
    linear = t.pop("linear.weight")
    if tf_layer_norm_names:
        t = {(k.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta")
              if ".LayerNorm." in k or k.startswith("embeddings.LayerNorm") else k): v for k, v in t.items()}
    save_file(t, str(folder / "model.safetensors"), metadata={"format": "pt"})
    (folder / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Dense", "type": "pylate.models.Dense.Dense"}], indent=2))
    (folder / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": document_length - 1,
                                                                  "do_lower_case": False}))
    dense = folder / "1_Dense"
    dense.mkdir(exist_ok=True)
    (dense / "config.json").write_text(json.dumps({"in_features": HIDDEN, "out_features": DIM, "bias": False,
                                                   "activation_function": "torch.nn.modules.linear.Identity",
                                                   "use_residual": False}))
    save_file({"linear.weight": linear}, str(dense / "model.safetensors"))
    (folder / "config_sentence_transformers.json").write_text(json.dumps({
        "model_type": "ColBERT", "__version__": {"sentence_transformers": "5.3.0", "transformers": "5.3.0",
                                                 "pytorch": "2.11.0+cu130"}, "prompts": {"query": "", "document": ""}, "default_prompt_name": None,
        "similarity_fn_name": "MaxSim", "query_prefix": "[Q] ", "document_prefix": "[D] ",
        "query_length": query_length, "document_length": document_length, "attend_to_expansion_tokens":
        attend_to_expansion_tokens, "do_query_expansion": do_query_expansion,
        "skiplist_words": list(string.punctuation)}, indent=2))
    return folder


def write_colbert_ai(folder: Path, *, seed: int = 5, query_maxlen: int = 10, doc_maxlen: int = 14,
                     attend_to_mask_tokens: bool = False, mask_punctuation: bool = True) -> Path:
    """A colbert-ai checkpoint folder as ``Checkpoint.save`` / ``HF_ColBERT.save_pretrained`` write it."""
    from safetensors.numpy import save_file

    t, _ = _bert_files(folder, [], seed, "HF_ColBERT")
    linear = t.pop("linear.weight")
    save_file({**{"bert." + k: v for k, v in t.items()}, "linear.weight": linear},
              str(folder / "model.safetensors"), metadata={"format": "pt"})
    (folder / "artifact.metadata").write_text(json.dumps({
        "query_token_id": "[unused0]", "doc_token_id": "[unused1]", "query_token": "[Q]", "doc_token": "[D]",
        "query_maxlen": query_maxlen, "doc_maxlen": doc_maxlen, "dim": DIM, "mask_punctuation": mask_punctuation,
        "attend_to_mask_tokens": attend_to_mask_tokens, "similarity": "cosine", "interaction": "colbert",
        "checkpoint": str(folder), "nbits": 2}, indent=4))
    return folder


def write_case(folder: Path, case: str) -> Path:
    """The checkpoint of ``case`` (see CASES) in ``folder``."""
    layout, options = CASES[case]
    return (write_pylate if layout == "pylate" else write_colbert_ai)(folder, **options)
