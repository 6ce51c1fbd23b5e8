"""Record PyLate's and colbert-ai's own vectors of the generated ColBERT checkpoints as golden numbers
(``python/tests/data/colbert-reference.json``), which ``python/tests/test_colbert*.py`` compare densewire to.

Run once, in a reference venv that is not densewire's (torch, pylate and colbert-ai are no dependency of
densewire, and the tests read only the recorded numbers)::

    python3 -m venv .venv-ref && .venv-ref/bin/pip install pylate==1.6.0
    .venv-ref/bin/python python/tests/data/colbert_reference.py pylate
    # colbert-ai 0.2.22 needs transformers 4 (HF_ColBERT fails on 5's all_tied_weights_keys): a second venv
    # with transformers 4.49.0 before the first one's packages on its path
    python3 -m venv .venv-ref2 && .venv-ref2/bin/pip install transformers==4.49.0
    echo "$PWD/.venv-ref/lib/python3.11/site-packages" > .venv-ref2/lib/python3.11/site-packages/zz-ref.pth
    .venv-ref/bin/pip install --no-deps colbert-ai==0.2.22 && .venv-ref/bin/pip install ujson bitarray ninja gitpython python-dotenv
    .venv-ref2/bin/python python/tests/data/colbert_reference.py colbert-ai

Each run records one library's vectors (and its versions) into the file, keeping the other's.

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


def main(library: str) -> None:
    file = HERE / "colbert-reference.json"
    out: dict = (json.loads(file.read_text()) if file.is_file()
                 else {"generated_by": "python/tests/data/colbert_reference.py", "versions": {}, "cases": {}})
    versions = out["versions"][library] = {}
    for dist in (library, "torch", "transformers", "sentence-transformers", "tokenizers"):
        try:
            versions[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            pass
    with tempfile.TemporaryDirectory() as tmp:
        for name, (layout, options) in CASES.items():
            folder = Path(tmp) / name
            write_case(folder, name)
            case = out["cases"].setdefault(name, {})
            case.update(layout=layout, options=options, weights_sha256=_sha(folder))
            if library == "pylate":  # PyLate reads both layouts (colbert-ai's by its stanford-nlp loader)
                case["pylate"] = _pylate(folder)
            elif layout == "colbert-ai":
                case["colbert-ai"] = _colbert_ai(folder)
            print(name, {k: len(v["queries"]) for k, v in case.items() if isinstance(v, dict) and "queries" in v})
    file.write_text(json.dumps(out) + "\n")


if __name__ == "__main__":
    if sys.argv[1:] not in (["pylate"], ["colbert-ai"]):
        sys.exit("usage: colbert_reference.py pylate|colbert-ai")
    main(sys.argv[1])
