"""The ONNX engine (the default): a BERT-family sentence encoder on ONNX Runtime.

At first start the model's graph is built from its own files
(``onnx_graph.build_graph``, no torch) and saved in the user cache directory
(``$DENSEWIRE_CACHE_DIR``, else ``$XDG_CACHE_HOME/densewire``, else
``~/.cache/densewire``) as ``onnx/<key>.onnx``, where the key hashes the
weights' sha256, config.json, the builder's version and the quantization;
later starts load the cached file. The graph's linear layers see only real
tokens (the batch is packed, sequences back to back); attention alone works on
a padded view. A batch is sorted by length and cut into calls only where
attention's padded scores would cost more than a call's fixed overhead (a long
sequence among short ones); pooling and normalisation follow the model's
sentence-transformers config, exactly as in the numpy engine.

``threads`` is ONNX Runtime's ``intra_op_num_threads`` (what ``densewire serve
--blas-threads`` sets; ``None``: one per core). ``InferenceSession.run`` is
thread-safe, so several threads may call one backend (``--model-threads``).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading
from pathlib import Path

import numpy as np

from .._optional import require
from .bert_model import BertModel, SentenceEncoder
from .precision import cpu_flags, int8_reduce_range
from .onnx_graph import BUILDER_VERSION, DISABLED_FUSIONS, build_graph, packed_feeds

__all__ = ["OnnxBertBackend", "cache_dir", "import_onnxruntime", "QUANTIZE_CHOICES"]

QUANTIZE_CHOICES = ("none", "int8")
_F32 = np.float32


def cache_dir() -> Path:
    """densewire's user cache directory (created on first write, not here)."""
    explicit = os.environ.get("DENSEWIRE_CACHE_DIR")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "densewire"


def import_onnxruntime():  # noqa: ANN201 (the module)
    """The onnxruntime module, or ImportError naming the pip command and the fallback."""
    try:
        onnxruntime = require("onnxruntime", extra="serve", feature="the ONNX engine")
    except ImportError as exc:
        raise ImportError(
            "the ONNX engine needs onnxruntime and onnx, which are not installed: "
            "`pip install 'densewire[serve]'` (or `pip install onnx onnxruntime`); where onnxruntime "
            "has no wheel for this platform, use the numpy engine (--engine numpy)"
        ) from exc
    return onnxruntime


_hash_lock = threading.Lock()


def _weights_sha256(weights: Path, memo_dir: Path) -> str:
    """sha256 of the weights file, memoised on disk by (path, size, mtime)."""
    st = weights.stat()
    stamp = f"{weights.resolve()}\0{st.st_size}\0{st.st_mtime_ns}".encode()
    memo = memo_dir / (hashlib.sha256(stamp).hexdigest()[:32] + ".sha256")
    with _hash_lock:
        try:
            digest = memo.read_text("ascii").strip()
            if len(digest) == 64:
                return digest
        except OSError:
            pass
        h = hashlib.sha256()
        with open(weights, "rb") as f:
            while chunk := f.read(1 << 20):
                h.update(chunk)
        digest = h.hexdigest()
        try:
            _atomic_write(memo, digest.encode("ascii"))
        except OSError:
            pass  # a read-only cache only costs the hash next time
        return digest


def _atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


_PROTOBUF_LIMIT = 1 << 31  # one protobuf message: larger models keep their weights beside the graph


def _save_graph(proto: "onnx.ModelProto", path: Path) -> None:  # noqa: F821
    """Write the graph atomically (weights in ``<name>.data`` beside it past protobuf's 2 GiB)."""
    onnx = require("onnx", extra="serve", feature="the ONNX engine")

    size = sum(len(t.raw_data) for t in proto.graph.initializer)
    if size < _PROTOBUF_LIMIT - (64 << 20):
        _atomic_write(path, proto.SerializeToString())
    else:
        data = path.name + ".data"
        tmp = path.with_name(path.name + ".tmp")
        onnx.save_model(proto, str(tmp), save_as_external_data=True, all_tensors_to_one_file=True, location=data)
        os.replace(tmp, path)  # the graph last: its presence means the data file is complete
    onnx.checker.check_model(str(path))


def _quantize_int8(src: Path, dst: Path, reduce_range: bool = True) -> None:
    """Dynamic int8 quantization of the linear layers (every MatMul by a weight); ``reduce_range``:
    7-bit weights, needed without VNNI (``precision.int8_reduce_range``)."""
    TensorProto = require("onnx", extra="serve", feature="--quantize int8").TensorProto
    quantization = require("onnxruntime.quantization", extra="serve", feature="--quantize int8")
    QuantType, quantize_dynamic = quantization.QuantType, quantization.quantize_dynamic

    fd, tmp = tempfile.mkstemp(dir=dst.parent, prefix=dst.name + ".", suffix=".tmp")
    os.close(fd)
    try:
        quantize_dynamic(str(src), tmp, weight_type=QuantType.QInt8,
                         op_types_to_quantize=["MatMul"], per_channel=True,
                         reduce_range=reduce_range,  # 7-bit weights: no int16 saturation on AVX2 without VNNI
                         use_external_data_format=src.with_name(src.name + ".data").is_file(),
                         extra_options={"DefaultTensorType": TensorProto.FLOAT})
        os.replace(tmp, dst)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def plan_chunks(lengths: np.ndarray, batch_size: int, max_batch_tokens: int, overhead: float,
                attention_weight: float = 0.0) -> list[int]:
    """Cut points of sorted (longest first) ``lengths`` into model calls.

    A call costs ``overhead`` token-equivalents, plus its real tokens, plus
    ``attention_weight`` per (query, key) pair of its padded attention
    (rows x the call's longest^2); at most ``batch_size`` rows and
    ``max_batch_tokens`` padded tokens per call. Dynamic programming over the
    sorted lengths finds the cheapest cut; returns the calls' ends.
    """
    n = len(lengths)
    ls = lengths.tolist()
    prefix = [0]
    for v in ls:
        prefix.append(prefix[-1] + v)
    best = [0.0] + [float("inf")] * n
    cut = [0] * (n + 1)
    for i in range(1, n + 1):
        for j in range(max(0, i - batch_size), i):
            rows, width = i - j, ls[j]
            if rows > 1 and rows * width > max_batch_tokens:
                continue
            cost = best[j] + overhead + (prefix[i] - prefix[j]) + attention_weight * rows * width * width
            if cost < best[i]:
                best[i], cut[i] = cost, j
    ends = []
    i = n
    while i > 0:
        ends.append(i)
        i = cut[i]
    return ends[::-1]


class OnnxBertBackend(SentenceEncoder):
    """Sentence embeddings from a BERT-family model on ONNX Runtime.

    Args:
        path: the sentence-transformers (or Hugging Face BERT) model folder.
        name: model id to serve (default: derived from the folder).
        max_tokens: truncation length in tokens including [CLS]/[SEP].
        threads: ONNX Runtime intra-op threads (default: one per core).
        quantize: ``"none"`` (float32, default) or ``"int8"`` (dynamic int8
            quantization of the linear layers: faster, slightly less exact).
        reduce_range: int8 weights in 7 bits (None: only where the CPU has no VNNI,
            :func:`~.precision.int8_reduce_range`; AVX2's int8 products saturate with 8 bits).
        batch_size: most sequences in one ONNX Runtime call.
        max_batch_tokens: most padded tokens in one call.
        bucket_overhead: a call's fixed cost in token-equivalents, weighed
            against attention's padded scores when a batch mixes long and
            short sequences (:func:`plan_chunks`).
        providers: ONNX Runtime execution providers (default: CPU).
        cache: folder for built graphs (default: :func:`cache_dir` / "onnx").
        spinning: whether idle intra-op threads spin-wait (ONNX Runtime's own
            default) instead of sleeping. Off by default: on cores shared with
            other busy processes spinning threads fight them for the cores
            (bench/model/RESULTS.md: 4-5x slower at batch 1 on this project's
            shared machine); ``True`` may win a little on an idle, dedicated machine.
    """

    engine = "onnx"

    def __init__(
        self,
        path: str | Path,
        *,
        name: str | None = None,
        max_tokens: int | None = None,
        threads: int | None = None,
        quantize: str | None = None,
        reduce_range: bool | None = None,
        batch_size: int = 32,
        max_batch_tokens: int = 8192,
        bucket_overhead: int = 24,
        providers: list[str] | None = None,
        cache: str | Path | None = None,
        spinning: bool = False,
    ) -> None:
        ort = import_onnxruntime()
        quantize = (quantize or "none").lower()
        if quantize not in QUANTIZE_CHOICES:
            raise ValueError(f"quantize must be one of {', '.join(QUANTIZE_CHOICES)}, not {quantize!r}")
        if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 0):
            raise ValueError(f"threads must be a non-negative integer, not {threads!r}")
        if batch_size < 1 or max_batch_tokens < 1 or bucket_overhead < 0:
            raise ValueError("batch_size and max_batch_tokens must be positive, bucket_overhead non-negative")
        self.model = BertModel(path, max_tokens)
        self.quantize = quantize
        self.precision = "int8" if quantize == "int8" else "fp32"
        self.reduce_range = int8_reduce_range(cpu_flags()) if reduce_range is None else bool(reduce_range)
        self._batch_size, self._max_batch_tokens = int(batch_size), int(max_batch_tokens)
        self._overhead = int(bucket_overhead)
        # one (query, key) pair of attention (4 x hidden FLOPs a layer) against one token's linear
        # layers, x3: the attention kernel runs at about a third of the matrix products' rate
        m = self.model
        self._attention_weight = 3 * 4 * m.hidden / (2 * (4 * m.hidden ** 2 + 2 * m.hidden * m.intermediate))
        self.graph_path = self._graph(Path(cache) if cache is not None else cache_dir() / "onnx")
        opts = ort.SessionOptions()
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        opts.inter_op_num_threads = 1
        if threads:
            opts.intra_op_num_threads = threads
        opts.add_session_config_entry("session.intra_op.allow_spinning", "1" if spinning else "0")
        self._session = ort.InferenceSession(str(self.graph_path), opts,
                                             providers=providers or ["CPUExecutionProvider"],
                                             disabled_optimizers=list(DISABLED_FUSIONS))
        self.execution_provider = self._session.get_providers()[0]
        self.threads = threads or None
        self._init_tokenizers(name)

    def _graph(self, folder: Path) -> Path:
        """The cached graph file for this model and quantization, built if missing."""
        m = self.model
        config = json.dumps(m.config, sort_keys=True)
        digest = _weights_sha256(m.weights_file, folder / "weights-sha256")
        key = hashlib.sha256(f"{BUILDER_VERSION}\0{digest}\0{config}".encode()).hexdigest()[:24]
        fp32 = folder / f"{key}.onnx"
        if not fp32.is_file():
            _save_graph(build_graph(m), fp32)
        if self.quantize == "none":
            return fp32
        onnxruntime = require("onnxruntime", extra="serve", feature="the ONNX engine")

        vnni = "" if self.reduce_range else "-8bit"  # 7-bit weights keep the name they always had
        int8 = folder / f"{key}-int8{vnni}-ort{onnxruntime.__version__}.onnx"
        if not int8.is_file():
            _quantize_int8(fp32, int8, self.reduce_range)
        return int8

    def _hidden_chunks(self, seqs: list[list[int]], lengths: np.ndarray, key_lengths: np.ndarray | None = None):
        start = 0
        for end in plan_chunks(lengths, self._batch_size, self._max_batch_tokens, self._overhead,
                               self._attention_weight):
            keys = None if key_lengths is None else key_lengths[start:end]
            (hidden,) = self._session.run(["last_hidden_state"], packed_feeds(seqs[start:end], lengths[start:end], keys))
            yield start, end, hidden
            start = end

    def __repr__(self) -> str:
        return (f"OnnxBertBackend(name={self.name!r}, max_tokens={self.max_tokens}, "
                f"precision={self.precision!r}, provider={self.execution_provider!r})")
