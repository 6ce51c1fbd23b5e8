"""Which output sizes a model was trained to give (``dimensions``), as vLLM decides it (issue 27).

Cutting a vector to its first ``k`` components and renormalising keeps its meaning only for a model
trained for it (Matryoshka Representation Learning). vLLM refuses ``dimensions`` on other models with a
400 ("does not support matryoshka representation"); densewire does the same, from what the model declares:

* ``--matryoshka-dimensions`` (``any``, ``none`` or sizes such as ``768,512,256``) wins;
* else the backend's own ``matryoshka`` attribute: the hash backend's vectors are prefix-truncatable by
  construction (``True``); an ``upstream:`` model is the upstream's to judge (``True``);
* else the model folder's ``config.json`` or ``config_sentence_transformers.json``: ``matryoshka_dimensions``
  (a list: only those sizes) or ``is_matryoshka: true`` (any size), the keys vLLM reads from the Hugging Face
  config (and its ``--hf-overrides``);
* else not Matryoshka. ``dimensions`` equal to the model's own size changes nothing and is always accepted.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Union

__all__ = ["Matryoshka", "parse_matryoshka", "declared_matryoshka"]

#: False: not trained for it; True: any size; a tuple: only these sizes
Matryoshka = Union[bool, tuple[int, ...]]


def parse_matryoshka(text: str) -> Matryoshka | None:
    """``--matryoshka-dimensions``: ``any``, ``none``, or comma-separated sizes; '' means unset (None)."""
    t = text.strip().lower()
    if not t:
        return None
    if t in ("any", "all", "true"):
        return True
    if t in ("none", "false"):
        return False
    sizes = []
    for part in t.split(","):
        part = part.strip()
        if not part.isdigit() or int(part) < 1:
            raise ValueError(f"{part!r} is not a size: give any, none or sizes such as 768,512,256")
        sizes.append(int(part))
    return tuple(sorted(set(sizes), reverse=True))


def _from_config(doc: Any) -> Matryoshka | None:
    if not isinstance(doc, dict):
        return None
    dims = doc.get("matryoshka_dimensions")
    if isinstance(dims, list) and dims and all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in dims):
        return tuple(sorted(set(dims), reverse=True))
    if doc.get("is_matryoshka") is True:
        return True
    return None


def declared_matryoshka(backend: Any, flag: Matryoshka | None) -> Matryoshka:
    """What the server accepts as ``dimensions`` for this backend (see the module doc)."""
    if flag is not None:
        return flag
    own = getattr(backend, "matryoshka", None)
    if own is not None:
        return own if isinstance(own, bool) else tuple(own)
    folder = getattr(backend, "path", None)
    if folder is not None:
        for name in ("config.json", "config_sentence_transformers.json"):
            file = Path(folder) / name
            try:
                found = _from_config(json.loads(file.read_text("utf-8")))
            except (OSError, ValueError):
                continue
            if found is not None:
                return found
    return False
