"""Backend wrapping ``sentence_transformers.SentenceTransformer`` (optional).

Serves any model sentence-transformers can load (a local folder, or a name
already in the local Hugging Face cache), with torch on CPU or GPU. The
package is imported only when this backend is built.
"""

from __future__ import annotations

import copy
import threading
from typing import Any

import numpy as np

from .._optional import require
from .base import Backend, check_ids, check_texts, empty_result

__all__ = ["SentenceTransformerBackend", "import_sentence_transformers", "PerThreadTokenizer"]


def import_sentence_transformers() -> Any:
    """The sentence_transformers module, or ImportError naming the pip command."""
    return require("sentence_transformers", package="sentence-transformers", feature="the 'st:' backend",
                   alternative="serve the built-in numpy runtime on the model folder instead (spec: the folder path)")


class PerThreadTokenizer:
    """A private copy of a Hugging Face tokenizer for each thread that asks.

    A Hugging Face fast tokenizer keeps its truncation and padding settings in
    mutable state that every call sets and then reads: one object shared by
    threads (``count_tokens`` on the event loop, ``encode`` in the model pool)
    lets one call's settings leak into another's, which fails as "Unable to
    create tensor" (issue 19.5). Copies are made from ``source`` on first use.
    """

    def __init__(self, source: Any) -> None:
        self._source = copy.deepcopy(source)  # never used directly: the template of the copies
        self._lock = threading.Lock()
        self._local = threading.local()

    def get(self) -> Any:
        tok = getattr(self._local, "tok", None)
        if tok is None:
            with self._lock:
                tok = self._local.tok = copy.deepcopy(self._source)
        return tok


class SentenceTransformerBackend(Backend):
    """Embeddings from ``SentenceTransformer.encode``.

    Args:
        model_name_or_path: what ``SentenceTransformer(...)`` accepts.
        name: model id served (default: ``model_name_or_path``).
        device: torch device, e.g. ``"cpu"`` or ``"cuda"`` (default: its choice).
        batch_size: encode() batch size.
        max_tokens: override the model's ``max_seq_length``.
        model_kwargs: extra keyword arguments for ``SentenceTransformer``.
    """

    def __init__(
        self,
        model_name_or_path: str,
        name: str | None = None,
        *,
        device: str | None = None,
        batch_size: int = 32,
        max_tokens: int | None = None,
        model_kwargs: dict[str, Any] | None = None,
    ) -> None:
        st = import_sentence_transformers()
        self._batch_size = int(batch_size)
        self._model = st.SentenceTransformer(model_name_or_path, device=device, **(model_kwargs or {}))
        # encode() tokenizes with the model's own tokenizer: calls to it take turns; count_tokens
        # and embed_tokens each use a tokenizer of their own (per thread), never the model's
        self._encode_lock = threading.Lock()
        self._tokenizers = PerThreadTokenizer(self._model.tokenizer)
        if max_tokens is not None:
            self._model.max_seq_length = int(max_tokens)
        self.max_tokens = int(self._model.max_seq_length)
        get_dim = getattr(self._model, "get_embedding_dimension", None) or getattr(
            self._model, "get_sentence_embedding_dimension"
        )
        dim = get_dim()
        if dim is None:  # some pipelines cannot tell before running
            dim = int(self._encode(["dimension probe"]).shape[1])
        self.dimensions = int(dim)
        self.name = name or str(model_name_or_path)

    def _encode(self, texts: list[str]) -> np.ndarray:
        with self._encode_lock:
            out = self._model.encode(
                list(texts),
                batch_size=self._batch_size,
                convert_to_numpy=True,
                normalize_embeddings=False,  # a Normalize module in the pipeline still applies
                show_progress_bar=False,
            )
        return np.ascontiguousarray(out, dtype=np.float32)

    def count_tokens(self, texts: list[str]) -> list[int]:
        """Tokens per text as the model's tokenizer counts them, with special tokens."""
        check_texts(texts)
        if not texts:
            return []
        enc = self._tokenizers.get()(list(texts), add_special_tokens=True, truncation=False)
        return [len(ids) for ids in enc["input_ids"]]

    def embed(self, texts: list[str]) -> np.ndarray:
        check_texts(texts)
        if not texts:
            return empty_result(self.dimensions)
        return self._encode(texts)

    def embed_tokens(self, ids: list[list[int]]) -> np.ndarray:
        """Embed token ids (without special tokens; they are added here)."""
        check_ids(ids)
        if not ids:
            return empty_result(self.dimensions)
        torch = require("torch", package="torch", feature="the 'st:' backend")

        tok = self._tokenizers.get()
        room = max(self.max_tokens - tok.num_special_tokens_to_add(pair=False), 0)
        outs = []
        for start in range(0, len(ids), self._batch_size):
            seqs = [tok.build_inputs_with_special_tokens([int(t) for t in s][:room])
                    for s in ids[start:start + self._batch_size]]
            batch = tok.pad({"input_ids": seqs}, padding=True, return_tensors="pt")
            features = {k: v.to(self._model.device) for k, v in batch.items()}
            with self._encode_lock, torch.inference_mode():
                emb = self._model(features)["sentence_embedding"]
            outs.append(emb.float().cpu().numpy())
        return np.ascontiguousarray(np.concatenate(outs), dtype=np.float32)
