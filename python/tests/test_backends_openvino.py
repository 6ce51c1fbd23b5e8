"""The OpenVINO engine on the default model: sentence-transformers' vectors, the ONNX engine's vectors, its
plain graph, the IR and compiled-model cache, threads, and bf16 (refused on a CPU without bf16 units)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import onnx
import openvino
import pytest

from densewire._backends import (
    BUILTIN_MODEL_NAME, OnnxBertBackend, OpenVinoBertBackend, cpu_features, cpu_flags, default_model_path,
    load_backend, native_precision)
from densewire._backends.bert_model import BertModel
from densewire._backends.onnx_graph import build_plain_graph

REFERENCE = json.loads((Path(__file__).parent / "data" / "minilm-reference.json").read_text("utf-8"))
TEXTS = [item["text"] for item in REFERENCE["items"]]
EXPECTED = np.stack([np.frombuffer(bytes.fromhex(i["embedding_f32le_hex"]), dtype="<f4")
                     for i in REFERENCE["items"]])
BF16_CPU = native_precision(cpu_flags()) == "bf16"


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a, b = a.astype(np.float64), b.astype(np.float64)
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("openvino-cache")


@pytest.fixture(scope="module")
def model(cache: Path) -> OpenVinoBertBackend:
    return OpenVinoBertBackend(default_model_path(), name=BUILTIN_MODEL_NAME, cache=cache, threads=1)


@pytest.fixture(scope="module")
def vectors(model: OpenVinoBertBackend) -> np.ndarray:
    return model.embed(TEXTS)


def test_matches_sentence_transformers(model: OpenVinoBertBackend, vectors: np.ndarray) -> None:
    assert (model.engine, model.precision, model.runtime_precision) == ("openvino", "fp32", "f32")
    assert cosines(vectors, EXPECTED).min() >= 0.99999
    assert np.abs(vectors - EXPECTED).max() <= 1e-5
    assert vectors.dtype == np.float32 and vectors.flags.c_contiguous and vectors.shape == (len(TEXTS), 384)


def test_matches_the_onnx_engine(vectors: np.ndarray, tmp_path: Path) -> None:
    onnx_vectors = OnnxBertBackend(default_model_path(), cache=tmp_path, threads=1).embed(TEXTS)
    np.testing.assert_allclose(vectors, onnx_vectors, atol=1e-5, rtol=0)


def test_batch_equals_single_order_and_tokens(model: OpenVinoBertBackend, vectors: np.ndarray) -> None:
    singles = np.concatenate([model.embed([t]) for t in TEXTS])
    np.testing.assert_allclose(singles, vectors, atol=1e-5, rtol=0)
    picks = [3, 0, 3, 7, 1]
    np.testing.assert_allclose(model.embed([TEXTS[i] for i in picks]), vectors[picks], atol=1e-5, rtol=0)
    ids = model.split_tokens(TEXTS[:3])
    np.testing.assert_allclose(model.embed_tokens(ids), vectors[:3], atol=1e-5, rtol=0)
    assert model.embed([]).shape == (0, 384)
    long = " ".join(TEXTS) * 4  # truncated at 256 tokens, mixed with short ones in one call
    mixed = model.embed([TEXTS[0], long, TEXTS[1]])
    np.testing.assert_allclose(mixed[[0, 2]], vectors[[0, 1]], atol=1e-5, rtol=0)


def test_threads_call_one_backend_at_once(model: OpenVinoBertBackend, vectors: np.ndarray) -> None:
    results: dict[int, np.ndarray] = {}

    def work(k: int) -> None:
        results[k] = model.embed(TEXTS[k:] + TEXTS[:k])

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k, got in results.items():
        np.testing.assert_allclose(got, np.roll(vectors, -k, axis=0), atol=1e-5, rtol=0)


def test_plain_graph_uses_standard_operators_only() -> None:
    proto = build_plain_graph(BertModel(default_model_path()))
    assert {n.domain for n in proto.graph.node} == {""}
    ops = {n.op_type for n in proto.graph.node}
    assert {"Erf", "Softmax", "Gather", "LayerNormalization", "MatMul"} <= ops
    assert not ops & {"MultiHeadAttention", "Gelu", "Attention"}
    onnx.checker.check_model(proto)


def test_ir_and_compiled_model_are_cached(model: OpenVinoBertBackend, cache: Path) -> None:
    assert model.ir_path.parent == cache and model.ir_path.suffix == ".xml"
    assert model.ir_path.with_suffix(".bin").stat().st_size > 80e6  # the weights, float32
    assert list((cache / "compiled").iterdir()), "OpenVINO's CACHE_DIR holds the compiled model"
    assert not list(cache.glob("*.onnx")) and not list(cache.glob("*.tmp*"))
    stamp = model.ir_path.stat().st_mtime_ns
    again = OpenVinoBertBackend(default_model_path(), cache=cache, threads=1)
    assert again.ir_path == model.ir_path and again.ir_path.stat().st_mtime_ns == stamp  # not rebuilt
    assert openvino.__version__.split("-")[0] == "2026.4.1"


def test_load_backend_openvino(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DENSEWIRE_CACHE_DIR", str(tmp_path))
    b = load_backend("minilm", engine="openvino", threads=1)
    assert isinstance(b, OpenVinoBertBackend) and b.ir_path.parent == tmp_path / "openvino"
    assert b.precision == ("bf16" if BF16_CPU else "fp32")
    assert b.cpu_features == cpu_features(cpu_flags())
    assert b.execution_provider.startswith("CPU (")
    with pytest.raises(ValueError, match="precision must be one of fp32, bf16 on the OpenVINO engine"):
        OpenVinoBertBackend(default_model_path(), cache=tmp_path, precision="int8")


def test_bf16(cache: Path, vectors: np.ndarray) -> None:
    """bf16 where the CPU has the units (cosine >= 0.9999 to sentence-transformers); refused elsewhere, by the
    engine itself (from what OpenVINO reports) as well as by precision.choose (from the CPU's flags)."""
    if BF16_CPU:
        b = OpenVinoBertBackend(default_model_path(), cache=cache, threads=1, precision="bf16")
        assert b.runtime_precision == "bf16"
        got = b.embed(TEXTS)
        assert cosines(got, EXPECTED).min() >= 0.9999
        assert np.abs(got - vectors).max() > 1e-5  # really bf16
    else:
        with pytest.raises(ValueError, match="precision bf16: OpenVINO finds no bf16 unit on this CPU"):
            OpenVinoBertBackend(default_model_path(), cache=cache, threads=1, precision="bf16")
        with pytest.raises(ValueError, match="neither amx_bf16 nor avx512_bf16"):
            load_backend("minilm", engine="openvino", precision="bf16")


PINNING_PROBE = """
import json, os, sys, threading, time
from pathlib import Path
from densewire._backends import OpenVinoBertBackend, default_model_path, native_precision, cpu_flags
before = sorted(os.sched_getaffinity(0))
engine = OpenVinoBertBackend(default_model_path(), cache=Path(sys.argv[1]), threads=1,
                             precision=native_precision(cpu_flags()))
calls, done = [0], threading.Event()
def work():
    while not done.is_set():
        engine.embed(["a sentence about cores and threads"] * 16)
        calls[0] += 1
worker = threading.Thread(target=work)
worker.start()
seen = {}
deadline = time.monotonic() + 3
while time.monotonic() < deadline or calls[0] < 3:  # the masks while calls run, sampled every millisecond
    for t in os.listdir("/proc/self/task"):
        try:
            cpus = sorted(os.sched_getaffinity(int(t)))
        except OSError:
            continue
        if cpus != before:
            seen[t] = cpus
    time.sleep(0.001)
done.set()
worker.join()
print(json.dumps({"before": before, "pinned": seen, "calls": calls[0]}))
"""


def test_leaves_every_thread_on_the_cpus_it_had(cache: Path) -> None:
    """OpenVINO pins its threads to cores unless told not to: two engines of one thread in two processes on
    one machine (two Ray actors, two Spark Python workers, two replicas) then share CPU 0 and each runs at
    half speed while the other cores idle. In a fresh process (the test session's own threads may carry
    masks from earlier tests), while calls run, every thread keeps the process's CPUs."""
    out = subprocess.run([sys.executable, "-c", PINNING_PROBE, str(cache)], capture_output=True, text=True, check=True)
    seen = json.loads(out.stdout.splitlines()[-1])
    assert seen["calls"] >= 3
    assert not seen["pinned"], f"threads pinned to fewer CPUs than the process's {seen['before']}: {seen['pinned']}"


FIRST_CALLS_PROBE = """
import sys, threading
from pathlib import Path
import numpy as np
from densewire._backends import OpenVinoBertBackend, default_model_path
from densewire._backends.onnx_graph import packed_feeds
engine = OpenVinoBertBackend(default_model_path(), cache=Path(sys.argv[1]), threads=1)
requests = [engine._compiled.create_infer_request() for _ in range(2)]
feeds = [packed_feeds([[101, 2000 + i, 102]], np.array([3])) for i in range(2)]
start, stop = threading.Barrier(3), threading.Event()
def infer(i):
    start.wait()
    requests[i].infer(feeds[i])
def hold_the_gil():  # as the event loop does while the model threads start
    start.wait()
    while not stop.is_set():
        pass
threads = [threading.Thread(target=infer, args=(i,)) for i in range(2)]
spinner = threading.Thread(target=hold_the_gil)
for t in [*threads, spinner]:
    t.start()
for t in threads:
    t.join()
stop.set()
spinner.join()
print("both answered")
"""


def test_a_new_engines_first_calls_from_two_threads_answer(cache: Path) -> None:
    """A server's model threads (--blas-threads 1: two of them) may make an engine's first inferences at the
    same moment. OpenVINO's binding sets up pybind11's numpy API on its first array input, and two threads
    doing that at once deadlocked (4 runs in 8 hung for ever before the engine made one call at start-up).
    Each run a fresh process, where that set-up has not happened yet."""
    for run in range(5):
        try:
            out = subprocess.run([sys.executable, "-c", FIRST_CALLS_PROBE, str(cache)], capture_output=True,
                                 text=True, timeout=120)
        except subprocess.TimeoutExpired:
            pytest.fail(f"run {run + 1}: two threads' first inferences on a new engine never returned (deadlock)")
        assert out.returncode == 0, out.stderr[-2000:]
        assert out.stdout.strip().endswith("both answered")
