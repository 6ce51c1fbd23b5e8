"""Embedding backends: the models behind ``densewire serve``.

``load_backend(spec, engine=..., quantize=..., threads=..., **options)``
builds one from a short spec string: ``"minilm"`` (the built-in
all-MiniLM-L6-v2), ``"hash:DIM"``, a model folder path, a Hugging Face id
``"org/name"``, ``"st:NAME_OR_PATH"`` or ``"upstream:URL"`` (with
``model=``). BERT-family models run on ONNX Runtime (:class:`OnnxBertBackend`,
fp32 and int8), OpenVINO (:class:`OpenVinoBertBackend`, fp32 and bf16) or numpy
(:class:`BertBackend`, the reference); ``precision.choose`` picks engine and
precision from the CPU's flags (``engine="auto"``, ``precision="auto"``). Optional
dependencies (onnxruntime, httpx, sentence-transformers, tokenizers,
safetensors, huggingface_hub) are imported only when the backend needing them is built, through
``densewire._optional.require``. The interface is in ``base``, the factory in ``registry``; the public
names are ``densewire.server.load_backend`` and ``densewire.server.Backend``.
"""

from .base import BUILTIN_MODEL_NAME, Backend
from .bert import (
    BertBackend,
    GeluScratch,
    ModelIntegrityError,
    ModelNotFoundError,
    default_model_path,
    gelu,
)
from .blas import limit_blas_threads
from .bert_model import BertModel
from .engines import ENGINES
from .hash import HashBackend
from .hub import resolve_hub_model
from .onnx_bert import OnnxBertBackend
from .openvino_bert import OpenVinoBertBackend
from .precision import PRECISIONS, PrecisionError, choose, cpu_features, cpu_flags, native_precision
from .sentence_transformers import SentenceTransformerBackend
from .registry import DEFAULT_SPEC, load_backend
from .upstream import UpstreamBackend, UpstreamError, embeddings_url

__all__ = [
    "BUILTIN_MODEL_NAME",
    "DEFAULT_SPEC",
    "Backend",
    "BertBackend",
    "BertModel",
    "ENGINES",
    "GeluScratch",
    "HashBackend",
    "ModelIntegrityError",
    "ModelNotFoundError",
    "OnnxBertBackend",
    "OpenVinoBertBackend",
    "PRECISIONS",
    "PrecisionError",
    "SentenceTransformerBackend",
    "UpstreamBackend",
    "UpstreamError",
    "choose",
    "cpu_features",
    "cpu_flags",
    "default_model_path",
    "embeddings_url",
    "gelu",
    "limit_blas_threads",
    "load_backend",
    "native_precision",
    "resolve_hub_model",
]
