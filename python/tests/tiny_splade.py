"""Tiny random-weight SPLADE checkpoints (``BertForMaskedLM``), written by the tests that need them and by
``python/tests/data/make_splade_reference.py`` (which records transformers' and sentence-transformers'
outputs on the very same files).

``write_splade(folder, layout=...)``: ``tiny_bert``'s BERT encoder (its small real WordPiece vocabulary)
under the ``bert.`` prefix plus the MLM head as ``transformers`` saves a ``BertForMaskedLM``:
``cls.predictions.transform.dense``, ``cls.predictions.transform.LayerNorm``, ``cls.predictions.bias``;
the decoder tied to the word embeddings (no ``cls.predictions.decoder.weight`` in the file, as
``save_pretrained`` drops tied tensors) unless ``untied``. Layouts:

* ``"hf"``: a Hugging Face folder (config.json with ``architectures: ["BertForMaskedLM"]``,
  model.safetensors, tokenizer.json, tokenizer_config.json, vocab.txt), as naver/splade-* ship;
* ``"sparse-encoder"``: the same files plus sentence-transformers' SparseEncoder pipeline (modules.json
  with ``MLMTransformer`` and ``SpladePooling``, ``1_SpladePooling/config.json``,
  ``sentence_bert_config.json``, ``config_sentence_transformers.json``), as ``SparseEncoder.save`` writes it.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from tiny_bert import HIDDEN, MAX_POS, write_tiny_model

LAYOUTS = ("hf", "sparse-encoder")
TEXTS = ["the quick brown fox jumps over the lazy dog", "a cat", "blue river, green tree!", "walking and singing",
         "the sun the moon the stars", "x"]


def write_splade(folder: Path, layout: str = "hf", *, seed: int = 7, untied: bool = False,
                 pooling_strategy: str = "max") -> Path:
    """Write a tiny SPLADE checkpoint of ``layout`` (see the module doc) and return its folder."""
    from safetensors.numpy import load_file, save_file

    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}")
    write_tiny_model(folder, "bert-bare-hf", seed=seed)
    config = json.loads((folder / "config.json").read_text())
    vocab = int(config["vocab_size"])
    config.update(architectures=["BertForMaskedLM"], tie_word_embeddings=not untied)
    (folder / "config.json").write_text(json.dumps(config, indent=2))
    tensors = load_file(str(folder / "model.safetensors"))
    rng = np.random.default_rng(seed + 1000)

    def rand(*shape: int, scale: float) -> np.ndarray:
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    tensors.update({
        "cls.predictions.transform.dense.weight": rand(HIDDEN, HIDDEN, scale=1 / math.sqrt(HIDDEN)),
        "cls.predictions.transform.dense.bias": rand(HIDDEN, scale=0.1),
        "cls.predictions.transform.LayerNorm.weight": 1 + rand(HIDDEN, scale=0.1),
        "cls.predictions.transform.LayerNorm.bias": rand(HIDDEN, scale=0.1),
        "cls.predictions.bias": rand(vocab, scale=1.0) - 9.0,  # most of the vocabulary stays at zero
    })
    if untied:
        tensors["cls.predictions.decoder.weight"] = rand(vocab, HIDDEN, scale=1.0)
        tensors["cls.predictions.decoder.bias"] = tensors["cls.predictions.bias"]
    save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})
    words = json.loads((folder / "tokenizer.json").read_text())["model"]["vocab"]
    (folder / "vocab.txt").write_text("".join(t + "\n" for t, _ in sorted(words.items(), key=lambda kv: kv[1])))
    (folder / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "BertTokenizer", "do_lower_case": True, "model_max_length": MAX_POS,
        "cls_token": "[CLS]", "sep_token": "[SEP]", "pad_token": "[PAD]", "unk_token": "[UNK]",
        "mask_token": "[MASK]"}, indent=2))
    if layout == "sparse-encoder":
        modules = [{"idx": 0, "name": "0", "path": "",
                    "type": "sentence_transformers.sparse_encoder.models.MLMTransformer"},
                   {"idx": 1, "name": "1", "path": "1_SpladePooling",
                    "type": "sentence_transformers.sparse_encoder.models.SpladePooling"}]
        (folder / "modules.json").write_text(json.dumps(modules, indent=2))
        (folder / "1_SpladePooling").mkdir(exist_ok=True)
        (folder / "1_SpladePooling" / "config.json").write_text(json.dumps(
            {"pooling_strategy": pooling_strategy, "activation_function": "relu", "word_embedding_dimension": vocab},
            indent=2))
        (folder / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": MAX_POS,
                                                                       "do_lower_case": False}, indent=2))
        (folder / "config_sentence_transformers.json").write_text(json.dumps(
            {"model_type": "SparseEncoder", "prompts": {"query": "", "document": ""}, "default_prompt_name": None,
             "similarity_fn_name": "dot"}, indent=2))
    return folder
