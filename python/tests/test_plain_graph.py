"""bench/model/plain_graph.py's standard export (issue 34): the ``onnx/model.onnx`` that bench/peers gives
TEI's ONNX Runtime backend must be the model densewire serves, with transformers' export interface (int64
``input_ids``, ``attention_mask``, ``token_type_ids`` -> ``last_hidden_state`` (batch, sequence, hidden)),
padded as TEI pads it."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from tiny_bert import VARIANTS, write_tiny_model

from densewire._backends import BertBackend, BertModel
from densewire._backends.bert_model import pool

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench" / "model"))
from plain_graph import build_plain  # noqa: E402

TEXTS = ["a short one", "the sun and the moon and the star over the blue sea at night", "it is what it is"]


@pytest.mark.parametrize("variant", ["bert-mean-normalize", "bert-cls-raw", "bert-no-token-types"])
def test_standard_export_is_the_served_model(variant: str, tmp_path: Path) -> None:
    import onnx
    import onnxruntime as ort

    folder = write_tiny_model(tmp_path / "model", variant)
    engine = BertBackend(folder)
    proto = build_plain(BertModel(folder), standard=True)
    onnx.checker.check_model(proto)
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    assert [(i.name, i.type) for i in session.get_inputs()] == [
        ("input_ids", "tensor(int64)"), ("attention_mask", "tensor(int64)"), ("token_type_ids", "tensor(int64)")]
    assert [o.name for o in session.get_outputs()] == ["last_hidden_state"]

    seqs = engine.tokenize(TEXTS)
    width = max(map(len, seqs))
    ids = np.zeros((len(seqs), width), dtype=np.int64)
    mask = np.zeros_like(ids)
    for row, seq in enumerate(seqs):  # padded on the right, as TEI pads a batch
        ids[row, :len(seq)] = seq
        mask[row, :len(seq)] = 1
    (hidden,) = session.run(["last_hidden_state"], {"input_ids": ids, "attention_mask": mask,
                                                    "token_type_ids": np.zeros_like(ids)})
    assert hidden.shape == (len(seqs), width, engine.model.hidden)
    m = engine.model
    got = np.concatenate([pool(hidden[row, :len(seq)], np.array([len(seq)]), m.pooling, m.normalize)
                          for row, seq in enumerate(seqs)])
    np.testing.assert_allclose(got, engine.embed(TEXTS), atol=1e-5, rtol=0)
    if VARIANTS[variant][2] == 2:  # a model with two token types: type 1 must change the answer
        (typed,) = session.run(["last_hidden_state"], {"input_ids": ids, "attention_mask": mask,
                                                       "token_type_ids": np.ones_like(ids)})
        assert not np.allclose(typed, hidden, atol=1e-4)
