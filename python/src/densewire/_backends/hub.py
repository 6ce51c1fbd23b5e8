"""Hugging Face Hub model ids (``BAAI/bge-small-en-v1.5``) to local model folders.

The id is looked up in the local Hugging Face cache first (``$HF_HUB_CACHE``,
else ``$HF_HOME/hub``, else ``~/.cache/huggingface/hub``); when it is not
there and the machine may go online (``HF_HUB_OFFLINE`` unset), the files the
engines read are downloaded with ``huggingface_hub``. Offline and not cached,
the error names the cache folder and how to fill it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from .._optional import require
from .bert_model import ModelNotFoundError

__all__ = ["HUB_FILES", "is_hub_id", "resolve_hub_model", "hub_cache_dir"]

#: the files of a model repository the BERT engines read (weights as safetensors only); a ColBERT
#: checkpoint's too: PyLate's Dense projections, colbert-ai's artifact.metadata (colbert.py)
HUB_FILES = [
    "config.json", "model.safetensors", "tokenizer.json", "modules.json",
    "sentence_bert_config.json", "*_Pooling/config.json", "config_sentence_transformers.json",
    "vocab.txt", "tokenizer_config.json", "*_SpladePooling/config.json",  # older BERT repos; SparseEncoders
    "*_Dense/config.json", "*_Dense/model.safetensors", "artifact.metadata",
]
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}(@[A-Za-z0-9._/-]+)?$")


def is_hub_id(spec: str) -> bool:
    """Whether ``spec`` has the form of a Hub id, ``org/name`` (optionally ``@revision``)."""
    return bool(_ID.match(spec)) and ".." not in spec


def hub_cache_dir() -> Path:
    """The Hugging Face Hub cache folder, as huggingface_hub resolves it now."""
    explicit = os.environ.get("HF_HUB_CACHE") or os.environ.get("HUGGINGFACE_HUB_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    home = os.environ.get("HF_HOME") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "huggingface")
    return Path(home).expanduser() / "hub"


def _offline_env() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def resolve_hub_model(spec: str, *, offline: bool | None = None, cache_dir: str | Path | None = None) -> Path:
    """The local folder of Hub model ``spec`` (``org/name`` or ``org/name@revision``).

    Raises:
        ModelNotFoundError: not cached and offline, or the download failed;
            the message names the cache folder and the command that fills it.
        ImportError: huggingface_hub is not installed.
    """
    try:
        snapshot_download = require("huggingface_hub", extra="serve", feature="Hugging Face model ids").snapshot_download
    except ImportError as exc:
        raise ImportError(
            f"serving the Hugging Face model {spec!r} needs huggingface_hub: "
            "`pip install huggingface_hub` (or pass a local model folder instead)"
        ) from exc
    repo_id, _, revision = spec.partition("@")
    cache = Path(cache_dir).expanduser() if cache_dir is not None else hub_cache_dir()
    offline = _offline_env() if offline is None else offline
    common = dict(repo_id=repo_id, revision=revision or None, cache_dir=str(cache), allow_patterns=HUB_FILES)
    try:
        folder = Path(snapshot_download(local_files_only=True, **common))
    except Exception as cached_exc:  # noqa: BLE001 (any lookup failure: try the network, then explain)
        fill = (f"fill it on a machine that is online with `hf download {repo_id}` (or "
                f"`huggingface-cli download {repo_id}`) and copy the cache folder over, set HF_HUB_CACHE "
                f"to a cache that has it, or pass the model's local folder instead")
        if offline:
            raise ModelNotFoundError(
                f"the Hugging Face model {spec!r} is not in the local cache {cache} and the machine is "
                f"offline (HF_HUB_OFFLINE is set); {fill}") from cached_exc
        try:
            folder = Path(snapshot_download(**common))
        except Exception as exc:  # noqa: BLE001
            raise ModelNotFoundError(
                f"the Hugging Face model {spec!r} is not in the local cache {cache} and downloading it "
                f"failed ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}); {fill}"
            ) from exc
    if not (folder / "model.safetensors").is_file():
        raise ModelNotFoundError(
            f"the Hugging Face model {spec!r} (cached at {folder}) has no model.safetensors: the "
            f"built-in engines read safetensors weights only; serve it with 'st:{repo_id}' instead")
    return folder
