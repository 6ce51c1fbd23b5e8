"""``densewire bench``: payload size and encode/decode time of every format on the same tensor.

Every codec runs in one process on one array, so the ratios against JSON are measured side by
side. Times are the median of repeated runs (at least ``min_repeat``, more until ``min_time``).
"""

from __future__ import annotations

import gzip
import importlib.metadata as md
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import numpy as np
import pybase64

from . import _formats
from ._convert import convert
from ._json import decode_json, encode_json
from ._optional import require
from ._tensor import Embeddings, Tensor, Usage

__all__ = ["BenchResult", "run_bench", "machine_info", "format_table", "interleaved", "decoder_table"]


@dataclass
class BenchResult:
    codec: str
    size: int
    gzip_size: int
    encode_ms: float
    decode_ms: float
    zero_copy: bool | None = None
    notes: str = ""
    ratios: dict[str, float] = field(default_factory=dict)


def _median_ms(fn: Callable[[], object], min_repeat: int, min_time: float) -> float:
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < min_repeat or (time.perf_counter() - start < min_time and len(times) < 200):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000


def _shares(array: np.ndarray, body) -> bool:
    """True when the decoded array lies inside the received body's memory (no copy)."""
    buf = np.frombuffer(body, dtype=np.uint8)
    if not array.size or not buf.size:
        return False
    lo, hi = buf.ctypes.data, buf.ctypes.data + buf.nbytes
    return lo <= array.ctypes.data and array.ctypes.data + array.nbytes <= hi


def _stdlib_json_encode(emb: Embeddings) -> bytes:
    rows = emb.tensor.array.tolist()
    doc = {"object": "list", "data": [{"object": "embedding", "index": i, "embedding": r} for i, r in enumerate(rows)],
           "model": emb.model, "usage": {"prompt_tokens": 0, "total_tokens": 0}}
    return json.dumps(doc).encode()


def _stdlib_json_decode(body: bytes) -> np.ndarray:
    doc = json.loads(body)
    return np.array([item["embedding"] for item in doc["data"]], dtype=np.float32)


def run_bench(n: int = 1000, d: int = 1536, dtype: str = "float32", *, min_repeat: int = 5, min_time: float = 0.5,
              codecs: list[str] | None = None, progress: Callable[[str], None] | None = None) -> list[BenchResult]:
    """Measure every codec on the same random unit vectors of shape (n, d)."""
    rng = np.random.default_rng(0)
    values = rng.standard_normal((n, d), dtype=np.float32)
    values /= np.linalg.norm(values, axis=1, keepdims=True) + np.float32(1e-12)
    tensor = convert(values, dtype) if dtype != "float32" else Tensor.from_array(values)
    emb = Embeddings(tensor, "bench", Usage(n, n))
    plan: list[tuple[str, Callable[[], object], Callable[[object], object], str]] = []
    if dtype == "float32":
        plan.append(("json-stdlib", lambda: _stdlib_json_encode(emb), _stdlib_json_decode, "json.dumps(.tolist()) / json.loads + np.array"))
    plan += [
        ("json-orjson", lambda: encode_json(emb, "float"), decode_json, "orjson float arrays (OPT_SERIALIZE_NUMPY) / orjson.loads + np.array"),
        ("json-base64", lambda: encode_json(emb, "base64"), decode_json, "densewire JSON envelope, Base64 rows"),
        ("raw", lambda: _formats.encode(emb, "raw"), None, "bare little-endian bytes + headers"),
        ("msgpack", lambda: _formats.encode(emb, "msgpack")[0], lambda b: _formats.decode(b, "msgpack"), ""),
        ("protobuf", lambda: _formats.encode(emb, "protobuf")[0], lambda b: _formats.decode(b, "protobuf"), ""),
        ("arrow", lambda: _formats.encode(emb, "arrow")[0], lambda b: _formats.decode(b, "arrow"), "pyarrow IPC stream"),
    ]
    if codecs:
        plan = [p for p in plan if p[0] in codecs]
    results: list[BenchResult] = []
    for k, (name, enc, dec, notes) in enumerate(plan, 1):
        if progress:
            progress(f"[{k}/{len(plan)}] {name}: encoding")
        out = enc()
        if name == "raw":
            body, headers = out  # type: ignore[misc]
            body = bytes(body)
            dec = lambda b, h=headers: _formats.decode(b, "raw", h)  # noqa: E731
        else:
            body = bytes(out)  # type: ignore[arg-type]
        encode_ms = _median_ms(enc, min_repeat, min_time)
        if progress:
            progress(f"[{k}/{len(plan)}] {name}: decoding")
        decode_ms = _median_ms(lambda: dec(body), min_repeat, min_time)
        decoded = dec(body)
        array = decoded.tensor.array if isinstance(decoded, Embeddings) else decoded
        assert array.shape[0] == n
        results.append(BenchResult(name, len(body), len(gzip.compress(body, 6)), encode_ms, decode_ms,
                                   _shares(np.asarray(array), body), notes))
    if progress:
        progress("pybase64 alone: decoding the same Base64 bytes")
    b64 = pybase64.b64encode(tensor.to_bytes())
    ref = _median_ms(lambda: pybase64.b64decode(b64, validate=True), min_repeat, min_time)
    results.append(BenchResult("pybase64-only", len(b64), len(gzip.compress(b64, 6)), _median_ms(
        lambda: pybase64.b64encode(tensor.to_bytes()), min_repeat, min_time), ref, None,
        "reference: the Base64 codec alone on the same bytes"))
    base = next((r for r in results if r.codec == "json-stdlib"), results[0])
    orj = next((r for r in results if r.codec == "json-orjson"), None)
    for r in results:
        r.ratios = {f"encode_vs_{base.codec}": base.encode_ms / r.encode_ms, f"decode_vs_{base.codec}": base.decode_ms / r.decode_ms,
                    f"size_vs_{base.codec}": r.size / base.size}
        if orj is not None:
            r.ratios.update({"encode_vs_json-orjson": orj.encode_ms / r.encode_ms, "decode_vs_json-orjson": orj.decode_ms / r.decode_ms})
        r.ratios["decode_vs_pybase64-only"] = r.decode_ms / ref
    return results


def interleaved(contenders: dict[str, Callable[[], object]], rounds: int, *,
                warmup: bool = False) -> dict[str, list[float]]:
    """Seconds of each contender per round, rounds interleaved (every contender once a round, in order);
    ``warmup``: one untimed call of each first (imports, first allocations)."""
    if warmup:
        for fn in contenders.values():
            fn()
    times: dict[str, list[float]] = {k: [] for k in contenders}
    for _ in range(rounds):
        for name, fn in contenders.items():
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    return times


def decoder_table(times: dict[str, list[float]], sizes: dict[str, int], base: str, *, digits: int = 2,
                  base_bytes: str = "TEI JSON", base_decoder: str = "json.loads") -> str:
    """A Markdown table of decoders: bytes (and against ``base``'s, named ``base_bytes``), best and median
    ms, and the median speed-up against ``base`` (named ``base_decoder``)."""
    ref, ref_size = statistics.median(times[base]), sizes[base]
    lines = [f"| decoder | bytes | bytes vs {base_bytes} | best ms | median ms | median speed-up vs {base_decoder} |",
             "|---|---:|---:|---:|---:|---:|"]
    for name, ts in times.items():
        lines.append(f"| {name} | {sizes[name]} | {sizes[name] / ref_size:.3f} | {min(ts) * 1e3:.{digits}f} | "
                     f"{statistics.median(ts) * 1e3:.{digits}f} | {ref / statistics.median(ts):.1f}x |")
    return "\n".join(lines)


def machine_info(packages: tuple[str, ...] = ("densewire", "numpy", "pybase64", "orjson", "pyarrow")) -> dict[str, str]:
    """The CPU model and cores, Python, the platform, and the versions of ``packages``."""
    cpu = platform.processor() or ""
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), cpu)
    except OSError:
        pass
    info = {"cpu": cpu, "cores": str(os.cpu_count()), "python": sys.version.split()[0], "platform": platform.platform()}
    for pkg in packages:
        try:
            info[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            info[pkg] = "not installed"
    info["pybase64_simd"] = pybase64.get_version()
    return info


def format_table(results: list[BenchResult], n: int, d: int, dtype: str) -> str:
    base = results[0].codec
    lines = [f"densewire bench: {n} x {d} {dtype}; median times; ratios are {base} time / codec time",
             f"{'codec':<15}{'bytes':>12}{'gzipped':>12}{'size':>8}{'encode ms':>12}{'speed-up':>11}"
             f"{'decode ms':>12}{'speed-up':>11}  zero-copy"]
    for r in results:
        lines.append(f"{r.codec:<15}{r.size:>12,}{r.gzip_size:>12,}{100 * r.ratios[f'size_vs_{base}']:>7.1f}%"
                     f"{r.encode_ms:>12.3f}{r.ratios[f'encode_vs_{base}']:>10,.0f}x{r.decode_ms:>12.3f}"
                     f"{r.ratios[f'decode_vs_{base}']:>10,.0f}x  {'-' if r.zero_copy is None else 'yes' if r.zero_copy else 'no'}")
    return "\n".join(lines)


def plot(results: list[BenchResult], path: str, title: str) -> None:
    matplotlib = require("matplotlib", extra="plot", feature="--plot")
    matplotlib.use("Agg")
    plt = require("matplotlib.pyplot", extra="plot", feature="--plot")
    names = [r.codec for r in results]
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.5))
    for ax, values, label in ((axes[0], [r.size / 1e6 for r in results], "payload MB"),
                              (axes[1], [r.encode_ms for r in results], "encode ms (log)"),
                              (axes[2], [r.decode_ms for r in results], "decode ms (log)")):
        ax.barh(names, values, color="#3b6ea5")
        ax.set_title(label)
        ax.invert_yaxis()
        if "log" in label:
            ax.set_xscale("log")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def to_json(results: list[BenchResult], n: int, d: int, dtype: str) -> str:
    return json.dumps({"n": n, "d": d, "dtype": dtype, "machine": machine_info(),
                       "results": [asdict(r) for r in results]}, indent=1)
