"""The embedding backend interface (:class:`Backend`) and the checks every backend shares.

The factory that builds a backend from a spec string is :func:`.registry.load_backend`.

A backend turns texts (or token-id sequences) into a float32 matrix. All
methods are synchronous and CPU- or IO-bound; the server calls them from a
thread pool, so implementations must be safe to call from several threads at
once and must not use asyncio.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from types import TracebackType
from typing import Self

import numpy as np

__all__ = ["Backend", "BUILTIN_MODEL_NAME", "check_texts", "check_ids", "empty_result", "whitespace_token_counts"]

#: The model served when no spec is given.
BUILTIN_MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"


class Backend(ABC):
    """An embedding model that the server can call.

    Attributes:
        name: the model id served (what clients send as ``model``).
        dimensions: native output dimension of :meth:`embed`.
        max_chars_per_token: see the class attribute (None: unknown).
        max_tokens: longest input, in tokens as counted by
            :meth:`count_tokens`; :meth:`embed` silently truncates longer
            inputs (as sentence-transformers does). A server that must refuse
            over-long input instead checks :meth:`count_tokens` first.
    """

    name: str
    dimensions: int
    max_tokens: int
    #: The most characters one token covers, with the separator before it, for a tokenizer that splits
    #: at whitespace; the server then cuts long texts before tokenizing them (``_server/limits.py``).
    #: None: texts are passed whole.
    max_chars_per_token: int | None = None
    #: True when a token is a whitespace-separated word (count_tokens counts words, no special tokens):
    #: the server then cuts a text at N tokens by keeping N words (truncate_prompt_tokens, truncation_side)
    tokens_are_words: bool = False

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
