"""Another runtime's kernels on the same model: OpenVINO's CPU plugin (oneDNN) running the plain graph.

    .venv/bin/python bench/model/openvino_check.py export DIR        # project venv: plain.onnx + token ids
    python3 -m venv /tmp/ov && /tmp/ov/bin/pip install openvino==2026.4.1 numpy
    /tmp/ov/bin/python bench/model/openvino_check.py run DIR         # OpenVINO, 2 threads, f32
    .venv/bin/python bench/model/openvino_check.py reference          # densewire's onnx and numpy engines

The plain graph is plain_graph.py's (standard ONNX operators, as transformers' torch export writes
them); OpenVINO compiles it with its own fusions. Each batch is right-padded to its longest sentence
(bench.py's sentences in order, calls of 1, 8 and 32, 5 rounds); `reference` runs densewire's ONNX
engine and its numpy engine on the same calls. Sentences/s, median and best of the rounds. Run the
modes one after the other on an idle machine: they are separate processes, so compare them within
one sitting only.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path
from typing import Callable

import numpy as np

HERE = Path(__file__).resolve().parent
BATCHES = (1, 8, 32)


def _rounds(embed: Callable[[int, int], None], label: str) -> None:
    rates: dict[int, list[float]] = {b: [] for b in BATCHES}
    for r in range(5):
        for b in BATCHES:
            n, off = (48 if b == 1 else 128), (r * 37) % 180
            t = time.perf_counter()
            for i in range(off, off + n, b):
                embed(i, i + b)
            rates[b].append(n / (time.perf_counter() - t))
    for b, v in rates.items():
        print(f"{label} calls of {b}: {statistics.median(v):6.1f} sentences/s (best {max(v):.1f})")


def main() -> None:
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    if mode in ("export", "reference"):
        sys.path.insert(0, str(HERE))
        from bench import sentences

        from densewire._backends import BertBackend, OnnxBertBackend, default_model_path

        texts = sentences()
        onnx_engine = OnnxBertBackend(default_model_path(), threads=2)
        if mode == "export":
            import onnx
            from plain_graph import build_plain

            out = Path(sys.argv[2])
            out.mkdir(parents=True, exist_ok=True)
            onnx.save(build_plain(onnx_engine.model), str(out / "plain.onnx"))
            ids = onnx_engine.tokenize(texts)
            np.savez(out / "ids.npz", *[np.asarray(s, dtype=np.int32) for s in ids])
            print(f"wrote {out / 'plain.onnx'} and the token ids of {len(ids)} sentences")
            return
        numpy_engine = BertBackend(default_model_path(), blas_threads=2)
        _rounds(lambda i, j: onnx_engine.embed(texts[i:j]), "densewire onnx")
        _rounds(lambda i, j: numpy_engine.embed(texts[i:j]), "densewire numpy")
        return
    if mode != "run":
        raise SystemExit(__doc__)
    import openvino as ov

    folder = Path(sys.argv[2])
    stored = np.load(folder / "ids.npz")
    ids = [stored[f"arr_{k}"] for k in range(len(stored.files))]
    core = ov.Core()
    compiled = core.compile_model(core.read_model(str(folder / "plain.onnx")), "CPU",
                                  {"INFERENCE_NUM_THREADS": 2, "PERFORMANCE_HINT": "LATENCY",
                                   "INFERENCE_PRECISION_HINT": "f32"})
    request = compiled.create_infer_request()

    def embed(i: int, j: int) -> None:
        batch = ids[i:j]
        width = max(len(s) for s in batch)
        tokens = np.zeros((len(batch), width), np.int32)
        mask = np.zeros_like(tokens)
        for row, s in enumerate(batch):
            tokens[row, :len(s)], mask[row, :len(s)] = s, 1
        request.infer({"input_ids": tokens, "attention_mask": mask})

    print(f"OpenVINO {ov.__version__}")
    _rounds(embed, "openvino")


if __name__ == "__main__":
    main()
