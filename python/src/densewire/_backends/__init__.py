"""Embedding backends: the models behind ``densewire serve``.

``load_backend(spec, **options)`` builds one from a short spec string:
``"minilm"`` (built-in numpy all-MiniLM-L6-v2), ``"hash:DIM"``, a model
folder path, ``"st:NAME_OR_PATH"`` or ``"upstream:URL"`` (with ``model=``).
Optional dependencies (httpx, sentence-transformers, tokenizers,
safetensors) are imported only when the backend needing them is built.
"""

from .base import BUILTIN_MODEL_NAME, DEFAULT_SPEC, Backend, load_backend
from .bert import (
    BertBackend,
    GeluScratch,
    ModelIntegrityError,
    ModelNotFoundError,
    default_model_path,
    gelu,
    limit_blas_threads,
)
from .hash import HashBackend
from .sentence_transformers import SentenceTransformerBackend
from .upstream import UpstreamBackend, UpstreamError, embeddings_url

__all__ = [
    "BUILTIN_MODEL_NAME",
    "DEFAULT_SPEC",
    "Backend",
    "BertBackend",
    "GeluScratch",
    "HashBackend",
    "ModelIntegrityError",
    "ModelNotFoundError",
    "SentenceTransformerBackend",
    "UpstreamBackend",
    "UpstreamError",
    "default_model_path",
    "embeddings_url",
    "gelu",
    "limit_blas_threads",
    "load_backend",
]
