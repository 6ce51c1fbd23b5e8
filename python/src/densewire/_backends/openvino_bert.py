"""The OpenVINO engine: a BERT-family sentence encoder on OpenVINO's CPU plugin, in fp32 or bf16 (issue 26).

The graph is densewire's own packed graph in standard ONNX operators (``onnx_graph.build_plain_graph``:
linear layers on the real tokens only, attention on a padded view), the same inputs as the ONNX
engine's, so a batch is cut into calls by the same planner (``onnx_bert.plan_chunks``) and pooled and
normalised by the same code (``bert_model.pool``). At first start the graph is converted to OpenVINO's
IR and saved in the user cache directory as ``openvino/<key>.xml`` + ``.bin``, where the key hashes the
weights' sha256, config.json, the builder's version and OpenVINO's version; OpenVINO keeps the compiled
model of each precision under ``openvino/compiled`` (its ``CACHE_DIR``), so later starts load both.

``precision``: ``"fp32"`` or ``"bf16"`` (OpenVINO's ``INFERENCE_PRECISION_HINT``: matrix products and
most activations in bf16, accumulation in f32). bf16 needs a CPU that multiplies it natively (AMX or
AVX512_BF16): elsewhere OpenVINO would run f32 instead, so it is refused here, naming what OpenVINO
reports (``precision.choose`` refuses it earlier from the CPU's flags).

``threads`` is ``INFERENCE_NUM_THREADS`` (None: OpenVINO's default, one per core). Each calling thread
gets its own infer request, so several threads may call one backend (``--model-threads``).
"""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path

import numpy as np

from .._optional import require
from .bert_model import BertModel, SentenceEncoder
from .onnx_bert import _save_graph, _weights_sha256, cache_dir, plan_chunks
from .onnx_graph import BUILDER_VERSION, build_plain_graph, packed_feeds

__all__ = ["OpenVinoBertBackend", "import_openvino", "OPENVINO_PRECISIONS"]

OPENVINO_PRECISIONS = {"fp32": "f32", "bf16": "bf16"}
#: version of the plain graph for OpenVINO (part of the cache key with BUILDER_VERSION)
PLAIN_VERSION = "1"
_F32 = np.float32


def import_openvino():  # noqa: ANN201 (the module)
    """The openvino module, or ImportError naming the pip command."""
    try:
        return require("openvino", extra="serve", feature="the OpenVINO engine")
    except ImportError as exc:
        raise ImportError("the OpenVINO engine needs openvino and onnx, which are not installed: "
                          "`pip install 'densewire[serve]'` (or `pip install openvino onnx`); "
                          "--engine onnx runs fp32 and int8 without it") from exc


class OpenVinoBertBackend(SentenceEncoder):
    """Sentence embeddings from a BERT-family model on OpenVINO's CPU plugin.

    Args:
        path: the sentence-transformers (or Hugging Face BERT) model folder.
        name: model id to serve (default: derived from the folder).
        max_tokens: truncation length in tokens including [CLS]/[SEP].
        threads: OpenVINO's ``INFERENCE_NUM_THREADS`` (default: one per core).
        precision: ``"fp32"`` (default) or ``"bf16"`` (needs AMX or AVX512_BF16).
        batch_size, max_batch_tokens, bucket_overhead: how a batch is cut into calls, as for the
            ONNX engine (:class:`~.onnx_bert.OnnxBertBackend`).
        cache: folder for the IR and OpenVINO's compiled models (default: :func:`cache_dir` / "openvino").
    """

    engine = "openvino"

    def __init__(
        self,
        path: str | Path,
        *,
        name: str | None = None,
        max_tokens: int | None = None,
        threads: int | None = None,
        precision: str = "fp32",
        batch_size: int = 32,
        max_batch_tokens: int = 8192,
        bucket_overhead: int = 24,
        cache: str | Path | None = None,
    ) -> None:
        ov = import_openvino()
        if precision not in OPENVINO_PRECISIONS:
            raise ValueError(f"precision must be one of {', '.join(OPENVINO_PRECISIONS)} on the OpenVINO engine, "
                             f"not {precision!r}")
        if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 0):
            raise ValueError(f"threads must be a non-negative integer, not {threads!r}")
        if batch_size < 1 or max_batch_tokens < 1 or bucket_overhead < 0:
            raise ValueError("batch_size and max_batch_tokens must be positive, bucket_overhead non-negative")
        core = ov.Core()
        if precision == "bf16":
            capabilities = core.get_property("CPU", "OPTIMIZATION_CAPABILITIES")
            if "BF16" not in capabilities:
                raise ValueError(f"precision bf16: OpenVINO finds no bf16 unit on this CPU (its capabilities: "
                                 f"{', '.join(capabilities)}); it would run f32. Use precision fp32")
        self.model = BertModel(path, max_tokens)
        self.precision = precision
        self.threads = threads or None
        self._batch_size, self._max_batch_tokens = int(batch_size), int(max_batch_tokens)
        self._overhead = int(bucket_overhead)
        m = self.model
        # as the ONNX engine weighs a padded (query, key) pair against a token's linear layers
        self._attention_weight = 3 * 4 * m.hidden / (2 * (4 * m.hidden ** 2 + 2 * m.hidden * m.intermediate))
        folder = Path(cache) if cache is not None else cache_dir() / "openvino"
        self.ir_path = self._ir(ov, folder)
        # no pinning: OpenVINO pins the threads running an inference to cores by default, so two engines
        # in two processes of one machine (Ray actors, Spark Python workers, replicas) ran on the same
        # core while the others idled (each at half speed; unpinned, the same speed alone)
        config = {"PERFORMANCE_HINT": "LATENCY", "INFERENCE_PRECISION_HINT": OPENVINO_PRECISIONS[precision],
                  "CACHE_DIR": str(folder / "compiled"), "ENABLE_CPU_PINNING": False}
        if threads:
            config["INFERENCE_NUM_THREADS"] = int(threads)
        self._compiled = core.compile_model(str(self.ir_path), "CPU", config)
        hint = self._compiled.get_property("INFERENCE_PRECISION_HINT")  # an openvino.Type: f32, bf16
        #: what OpenVINO compiled the model in ("f32", "bf16")
        self.runtime_precision = hint.get_type_name() if hasattr(hint, "get_type_name") else str(hint)
        self.execution_provider = f"CPU ({core.get_property('CPU', 'FULL_DEVICE_NAME')})"
        self.openvino_version = ov.__version__
        # One inference now, in this thread. OpenVINO's Python binding sets up pybind11's numpy API on its
        # first array input, and two threads making that first call at once (a server's model threads,
        # --blas-threads 1) deadlocked on it for ever, each holding what the other waited for (the GIL,
        # the set-up's once-lock): 4 runs in 8 of two threads' first infer() hung (test_backends_openvino.py).
        self._compiled.create_infer_request().infer(packed_feeds([[0, 0]], np.array([2])))
        self._local = threading.local()
        self._init_tokenizers(name)

    def _ir(self, ov, folder: Path) -> Path:  # noqa: ANN001
        """The cached IR of this model, converted from the plain ONNX graph if missing."""
        m = self.model
        config = json.dumps(m.config, sort_keys=True)
        digest = _weights_sha256(m.weights_file, folder / "weights-sha256")
        key = hashlib.sha256(f"{BUILDER_VERSION}\0{PLAIN_VERSION}\0{digest}\0{config}\0{ov.__version__}"
                             .encode()).hexdigest()[:24]
        xml = folder / f"{key}.xml"
        if xml.is_file() and xml.with_suffix(".bin").is_file():
            return xml
        folder.mkdir(parents=True, exist_ok=True)
        onnx_file = folder / f"{key}.onnx"
        _save_graph(build_plain_graph(m), onnx_file)
        tmp = folder / f"{key}.tmp.xml"
        ov.save_model(ov.Core().read_model(str(onnx_file)), str(tmp), compress_to_fp16=False)
        tmp.with_suffix(".bin").replace(xml.with_suffix(".bin"))
        tmp.replace(xml)  # the .xml last: its presence means the .bin is complete
        onnx_file.unlink(missing_ok=True)
        return xml

    def _request(self):  # noqa: ANN202
        request = getattr(self._local, "request", None)
        if request is None:
            request = self._local.request = self._compiled.create_infer_request()
        return request

    def _hidden_chunks(self, seqs: list[list[int]], lengths: np.ndarray, key_lengths: np.ndarray | None = None):
        request = self._request()
        start = 0
        for end in plan_chunks(lengths, self._batch_size, self._max_batch_tokens, self._overhead,
                               self._attention_weight):
            keys = None if key_lengths is None else key_lengths[start:end]
            hidden = request.infer(packed_feeds(seqs[start:end], lengths[start:end], keys))[0]
            yield start, end, np.array(hidden, dtype=_F32)  # a copy: the request reuses its output tensor
            start = end

    def __repr__(self) -> str:
        return (f"OpenVinoBertBackend(name={self.name!r}, max_tokens={self.max_tokens}, "
                f"precision={self.precision!r}, openvino={self.openvino_version!r})")
