"""Writes the densewire bodies of the demo tables for bench/tables (run.sh calls this).

    .venv/bin/python bench/tables/bodies.py OUTDIR

For each table (``points``: float64 coordinates, ``points_f32``: the same rows with float32
coordinates) and each of the 7 formats, OUTDIR/densewire/TABLE.FORMAT is the body that
``densewire serve`` sends (``encode_table`` with its defaults: byte-stream-split Protobuf), and
OUTDIR/densewire/TABLE.columns the ``Densewire-Columns`` header value. The row-oriented baselines
(JSON objects, compact JSON, MessagePack rows, protobufjs rows) are built in Node from the decoded
columns of these bodies (baselines.ts), so every body holds the same data.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import densewire
from densewire import TABLE_FORMATS, demo_table, encode_table


def main() -> None:
    out = Path(sys.argv[1]) / "densewire"
    out.mkdir(parents=True, exist_ok=True)
    manifest = {"densewire": getattr(densewire, "__version__", "?"), "tables": {}}
    for coordinates, name in (("float64", "points"), ("float32", "points_f32")):
        table = demo_table(coordinates=coordinates, name=name)
        header = ",".join(f"{c.name}={c.type}" for c in table.columns)
        (out / f"{name}.columns").write_text(header)
        entry = {"rows": table.rows, "columns": header, "formats": {}}
        for fmt in TABLE_FORMATS:
            t0 = time.perf_counter()
            body = encode_table(table, fmt)
            ms = (time.perf_counter() - t0) * 1e3
            (out / f"{name}.{fmt}").write_bytes(body)
            entry["formats"][fmt] = {"bytes": len(body), "encode_ms": round(ms, 2)}
        manifest["tables"][name] = entry
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2))
    print(json.dumps(manifest))


if __name__ == "__main__":
    main()
