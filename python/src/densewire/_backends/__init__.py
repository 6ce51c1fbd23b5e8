"""Embedding backends: the models behind ``densewire serve``.

``load_backend(spec, **options)`` builds one from a short spec string:
``"minilm"`` (built-in numpy all-MiniLM-L6-v2), ``"hash:DIM"``, a model
folder path, ``"st:NAME_OR_PATH"`` or ``"upstream:URL"`` (with ``model=``).
Optional dependencies (httpx, sentence-transformers, tokenizers,
safetensors) are imported only when the backend needing them is built, through
``densewire._optional.require``. The interface is in ``base``, the factory in
``registry``; the public names are ``densewire.server.load_backend`` and
``densewire.server.Backend``.
"""

from .base import BUILTIN_MODEL_NAME, Backend
from .bert import BertBackend, GeluScratch, ModelIntegrityError, ModelNotFoundError, default_model_path, gelu
from .blas import limit_blas_threads
from .hash import HashBackend
from .sentence_transformers import SentenceTransformerBackend
from .registry import DEFAULT_SPEC, load_backend
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
