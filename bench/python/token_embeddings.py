"""Per-token output (SPEC.md 20) in densewire's ragged formats against TEI's ``/embed_all`` JSON shape,
side by side in one run: bytes and Python decode time.

    .venv/bin/python bench/python/token_embeddings.py [--docs 100] [--tokens 256] [--rounds 7]

The matrices are MiniLM's real token states (the ONNX engine, fp32) of ``--docs`` texts of ``--tokens``
tokens each. TEI's answer is ``[[[f32]]]`` as orjson writes it (shortest float32 decimals, as TEI's
serde does); its client decodes with ``json.loads`` then ``np.array`` (the usual code), or orjson. densewire's
bodies are encoded by ``densewire.encode`` and decoded by ``densewire.decode(kind="ragged")``; the float16
rows are the body ``densewire serve`` answers with ``embed_dtype: float16`` (vLLM's name; ``Accept`` as above),
decoded and widened to float32 (``astype``), with their largest error against the float32 states. Rounds are
interleaved (each round times every contender once); best and median are reported with the machine, the
package versions and the load average.
"""

from __future__ import annotations

import argparse
import json
import os

import numpy as np
import orjson

import densewire
from densewire._backends import BUILTIN_MODEL_NAME, OnnxBertBackend, default_model_path
from densewire._bench import decoder_table, interleaved, machine_info


def texts_of(docs: int, tokens: int) -> list[str]:
    words = "late interaction keeps one vector for every token of a document so that a query can match".split()
    return [" ".join(words[(i + k) % len(words)] for k in range(tokens)) for i in range(docs)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=100)
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    model = OnnxBertBackend(default_model_path(), name=BUILTIN_MODEL_NAME, threads=1)
    rows, lengths = model.embed_token_states(texts_of(args.docs, args.tokens))
    ragged = densewire.RaggedTensor.from_lengths(rows, lengths)
    emb = densewire.Embeddings(ragged, BUILTIN_MODEL_NAME, densewire.Usage(int(lengths.sum()), int(lengths.sum())))
    tei = b"[" + b",".join(orjson.dumps(m, option=orjson.OPT_SERIALIZE_NUMPY) for m in ragged) + b"]"
    bodies = {fmt: densewire.encode(emb, fmt) for fmt in ("raw", "msgpack", "protobuf", "arrow")}
    half = densewire.RaggedTensor.from_lengths(rows.astype(np.float16), lengths)
    half_emb = densewire.Embeddings(half, BUILTIN_MODEL_NAME, emb.usage)
    half_bodies = {fmt: densewire.encode(half_emb, fmt) for fmt in ("raw", "arrow")}

    def tei_stdlib():
        doc = json.loads(tei)
        return [np.array(m, np.float32) for m in doc]

    def tei_orjson():
        return [np.array(m, np.float32) for m in orjson.loads(tei)]

    contenders = {"TEI JSON, json.loads + np.array": tei_stdlib, "TEI JSON, orjson.loads + np.array": tei_orjson}
    for fmt, (body, headers) in bodies.items():
        contenders[f"densewire {fmt}"] = (lambda b=body, h=headers, f=fmt: densewire.decode(b, f, h, kind="ragged"))
    for fmt, (body, headers) in half_bodies.items():
        contenders[f"densewire {fmt} float16, widened to float32"] = (
            lambda b=body, h=headers, f=fmt: densewire.decode(b, f, h, kind="ragged").tensor.rows.to_float32())
    widened = contenders["densewire raw float16, widened to float32"]()
    error = float(np.max(np.abs(widened - rows)))
    times = interleaved(contenders, args.rounds, warmup=True)
    sizes = {"TEI JSON, json.loads + np.array": len(tei), "TEI JSON, orjson.loads + np.array": len(tei),
             **{f"densewire {f}": len(b) for f, (b, _) in bodies.items()},
             **{f"densewire {f} float16, widened to float32": len(b) for f, (b, _) in half_bodies.items()}}
    print(f"{args.docs} documents x {args.tokens} tokens ({int(lengths.sum())} rows) x {ragged.d} float32, "
          f"{args.rounds} interleaved rounds; load average {os.getloadavg()}")
    print(decoder_table(times, sizes, "TEI JSON, json.loads + np.array", digits=2))
    print(f"float16: largest absolute error against the float32 states {error:.2e} "
          f"(largest state {float(np.max(np.abs(rows))):.2f})")
    print(json.dumps(machine_info(), indent=1))


if __name__ == "__main__":
    main()
