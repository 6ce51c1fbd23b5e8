"""Record transformers' and sentence-transformers' SPLADE outputs on the tiny checkpoints of
``python/tests/tiny_splade.py`` into ``splade-reference.json`` (what ``test_splade.py`` compares densewire
with; the tests do not need torch).

Run once, in a separate venv holding torch, transformers and sentence-transformers (not densewire's)::

    python3 -m venv .venv-ref
    .venv-ref/bin/pip install torch==2.11.0 transformers==5.3.0 sentence-transformers==5.3.0
    .venv-ref/bin/python python/tests/data/make_splade_reference.py

For each layout it writes the checkpoint, checks that transformers loads every tensor of it
(``BertForMaskedLM``: no missing or unexpected keys, the decoder tied to the word embeddings), and records:
the token ids of ``AutoTokenizer``; transformers' weights (``log(1 + relu(logits))`` times the attention
mask, max over the tokens, as TEI and SPLADE's authors compute them); and ``SparseEncoder.encode``'s. It
also saves a SparseEncoder built from the Hugging Face folder and records the layout sentence-transformers
writes (modules.json, the SpladePooling config), which ``tiny_splade`` must match. Weights are float32,
as hex bits of their little-endian bytes beside the decimals.
"""

from __future__ import annotations

import hashlib
import json
import sys
import tempfile
from pathlib import Path

import numpy as np
import sentence_transformers
import torch
import transformers

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from tiny_splade import TEXTS, write_splade  # noqa: E402


def _sparse(row: np.ndarray) -> dict:
    idx = np.flatnonzero(row > 0)
    vals = row[idx].astype("<f4")
    return {"indices": idx.tolist(), "values_f32le_hex": vals.tobytes().hex(), "values": [float(v) for v in vals]}


def transformers_weights(folder: Path) -> tuple[list[list[int]], np.ndarray]:
    tok = transformers.AutoTokenizer.from_pretrained(str(folder))
    model, info = transformers.BertForMaskedLM.from_pretrained(str(folder), output_loading_info=True)
    bad = {k: v for k, v in info.items() if v and k in ("missing_keys", "unexpected_keys", "mismatched_keys")}
    assert not bad, f"transformers did not load {folder} whole: {bad}"
    assert torch.equal(model.cls.predictions.decoder.weight, model.bert.embeddings.word_embeddings.weight) or \
        not model.config.tie_word_embeddings
    model.eval()
    batch = tok(TEXTS, padding=True, return_tensors="pt")
    with torch.no_grad():
        logits = model(**batch).logits
    act = torch.log1p(torch.relu(logits)) * batch["attention_mask"].unsqueeze(-1)
    weights = act.max(dim=1).values.numpy().astype(np.float32)
    ids = [[int(t) for t, m in zip(row, mask) if m] for row, mask in zip(batch["input_ids"], batch["attention_mask"])]
    return ids, weights


def sparse_encoder_weights(folder: Path) -> np.ndarray:
    model = sentence_transformers.SparseEncoder(str(folder), device="cpu")
    out = model.encode(TEXTS, convert_to_tensor=True)
    return out.to_dense().numpy().astype(np.float32)


def saved_layout(hf_folder: Path) -> dict:
    """What SparseEncoder.save writes for a BertForMaskedLM folder (MLMTransformer + SpladePooling)."""
    from sentence_transformers.sparse_encoder.models import MLMTransformer, SpladePooling

    mlm = MLMTransformer(str(hf_folder))
    model = sentence_transformers.SparseEncoder(modules=[mlm, SpladePooling(pooling_strategy="max")], device="cpu")
    with tempfile.TemporaryDirectory() as tmp:
        model.save(tmp)
        modules = json.loads((Path(tmp) / "modules.json").read_text())
        pooling_path = next(m["path"] for m in modules if m["type"].endswith("SpladePooling"))
        pooling = json.loads((Path(tmp) / pooling_path / "config.json").read_text())
        files = sorted(str(p.relative_to(tmp)) for p in Path(tmp).rglob("*") if p.is_file())
    return {"modules": [{k: m[k] for k in ("path", "type")} for m in modules], "pooling_config": pooling, "files": files}


def main() -> None:
    doc: dict = {"generated_by": "python/tests/data/make_splade_reference.py",
                 "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                              "sentence_transformers": sentence_transformers.__version__, "numpy": np.__version__},
                 "texts": TEXTS, "layouts": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for layout in ("hf", "sparse-encoder"):
            folder = write_splade(Path(tmp) / layout, layout)
            ids, hf = transformers_weights(folder)
            entry = {"weights_sha256": hashlib.sha256((folder / "model.safetensors").read_bytes()).hexdigest(),
                     "ids": ids, "transformers": [_sparse(r) for r in hf]}
            if layout == "sparse-encoder":
                st = sparse_encoder_weights(folder)
                entry["sentence_transformers"] = [_sparse(r) for r in st]
                entry["max_difference_transformers_vs_sentence_transformers"] = float(np.abs(st - hf).max())
            else:
                doc["sparse_encoder_saved_layout"] = saved_layout(folder)
            doc["layouts"][layout] = entry
    out = HERE / "splade-reference.json"
    out.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
