"""Record PyLate's and colbert-ai's own vectors of the generated ColBERT checkpoints as golden numbers
(``python/tests/data/colbert-reference.json``), which ``python/tests/test_colbert*.py`` compare densewire to.

Run once, in a reference venv that is not densewire's (torch, pylate and colbert-ai are no dependency of
densewire, and the tests read only the recorded numbers)::

    python3 -m venv .venv-ref
    .venv-ref/bin/pip install pylate==1.3.4 colbert-ai==0.2.22
    .venv-ref/bin/python python/tests/data/colbert_reference.py

The checkpoints are written by ``python/tests/colbert_checkpoints.py`` (seeded: the same bytes every run;
their sha256 is recorded, and the tests check it before comparing). For each PyLate case:
``pylate.models.ColBERT(folder).encode(texts, is_query=...)``; for the colbert-ai checkpoint:
``colbert.modeling.checkpoint.Checkpoint(folder).queryFromText`` / ``docFromText(keep_dims=False)``, and
PyLate's reading of the same checkpoint (its stanford-nlp loader) beside it.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from colbert_checkpoints import CASES, DOCUMENTS, QUERIES, write_case  # noqa: E402


def _sha(folder: Path) -> str:
    return hashlib.sha256((folder / "model.safetensors").read_bytes()).hexdigest()


def _rows(arrays) -> list:  # noqa: ANN001
    return [[[float(v) for v in row] for row in a.tolist()] for a in arrays]


def _pylate(folder: Path) -> dict:
    from pylate import models

    model = models.ColBERT(str(folder), device="cpu")
    q = model.encode(QUERIES, is_query=True, batch_size=2)
    d = model.encode(DOCUMENTS, is_query=False, batch_size=3)
    return {"queries": _rows(q), "documents": _rows(d),
            "query_ids": model.tokenize(QUERIES, is_query=True)["input_ids"].tolist()}


def _colbert_ai(folder: Path) -> dict:
    import torch
    from colbert.infra import ColBERTConfig
    from colbert.modeling.checkpoint import Checkpoint

    ckpt = Checkpoint(str(folder), colbert_config=ColBERTConfig())
    with torch.no_grad():
        q = ckpt.queryFromText(QUERIES)
        d = ckpt.docFromText(DOCUMENTS, keep_dims=False)
    d = d[0] if isinstance(d, tuple) else d
    return {"queries": _rows([x.float().numpy() for x in q]), "documents": _rows([x.float().numpy() for x in d]),
            "query_ids": ckpt.query_tokenizer.tensorize(QUERIES)[0].tolist()}


def main() -> None:
    out: dict = {"generated_by": "python/tests/data/colbert_reference.py", "versions": {}, "cases": {}}
    for dist in ("pylate", "colbert-ai", "torch", "transformers", "sentence-transformers", "tokenizers"):
        try:
            out["versions"][dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            pass
    with tempfile.TemporaryDirectory() as tmp:
        for name, (layout, options) in CASES.items():
            folder = Path(tmp) / name
            write_case(folder, name)
            case = {"layout": layout, "options": options, "weights_sha256": _sha(folder)}
            if layout == "pylate":
                case["pylate"] = _pylate(folder)
            else:
                try:
                    case["colbert-ai"] = _colbert_ai(folder)
                except Exception as exc:  # noqa: BLE001 - recorded, so the tests say which reference is missing
                    case["colbert-ai-error"] = f"{type(exc).__name__}: {exc}"
                case["pylate"] = _pylate(folder)
            out["cases"][name] = case
            print(name, {k: len(v["queries"]) for k, v in case.items() if isinstance(v, dict) and "queries" in v})
    (HERE / "colbert-reference.json").write_text(json.dumps(out) + "\n")


if __name__ == "__main__":
    main()
