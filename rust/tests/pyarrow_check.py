#!/usr/bin/env python3
"""Reads every Arrow stream that the Rust golden test wrote (DENSEWIRE_ARROW_OUT) with pyarrow and
checks it against its golden case: same dtype metadata, shape and bytes (SPEC.md section 10: an
implementation's own Arrow encoding must decode, by pyarrow, to the same tensor).

    python rust/tests/pyarrow_check.py DIR
"""
import json
import pathlib
import sys

import pyarrow as pa

ROOT = pathlib.Path(__file__).resolve().parents[2]
cases = {c["id"]: c for name in ("tensors.json", "quantization.json")  # quantization: the envelope cases
         for c in json.loads((ROOT / "testdata/golden" / name).read_text())["cases"]}
passed = failed = 0
files = sorted(pathlib.Path(sys.argv[1]).glob("*.arrow"))
for f in files:
    case = cases[f.stem]
    try:
        table = pa.ipc.open_stream(f.read_bytes()).read_all()
        field = table.schema.field("embedding")
        assert not field.nullable, "the embedding column must be non-nullable"
        assert field.metadata[b"densewire.dtype"].decode() == case["dtype"]
        meta = table.schema.metadata
        assert meta[b"densewire.dimensions"].decode() == str(case["shape"][1])
        assert table.num_rows == case["shape"][0], (table.num_rows, case["shape"])
        col = table.column("embedding").combine_chunks()
        if case["dtype"] == "binary":
            width = (case["shape"][1] + 7) // 8
            data = col.buffers()[1].to_pybytes()[col.offset * width:(col.offset + len(col)) * width]
        else:
            values = col.flatten()
            w = values.type.bit_width // 8
            data = values.buffers()[1].to_pybytes()[values.offset * w:(values.offset + len(values)) * w]
        want = b"".join(bytes.fromhex(h)[::-1] for h in case["items"])
        assert data == want, (data.hex(), want.hex())
        if case.get("model") is not None:
            assert meta[b"densewire.model"].decode() == case["model"]
        if case.get("quantization") is not None:
            assert meta[b"densewire.quantization"].decode() == case["quantization"]
        passed += 1
    except Exception as e:  # noqa: BLE001 - report every case
        failed += 1
        print(f"{f.stem}: FAILED: {e!r}")
if not files:
    print("no Arrow files to check")
    failed += 1
print(f"pyarrow reads our Arrow encodings: {passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
