#!/usr/bin/env python3
"""Writes the seed corpus of the Jazzer fuzz targets from the golden vectors (testdata/golden/*.json).

Each target reads the inputs under src/test/resources/dev/densewire/fuzz/<Target>Inputs/fuzz/, one file per golden
case (valid and invalid), named by the case id, in the form the target reads (see Fuzzing.java): a body, or a first
line (headers, a dtype and shape, a layout and Densewire-Columns) then the body. Files named finding-* are inputs
the fuzzers found (bench/fuzz/RESULTS-java.md), kept beside them as regression seeds.

    python3 seeds.py          # rewrite the corpus
    python3 seeds.py --check  # exit 1 when the committed corpus differs from the golden files
"""
import json
import pathlib
import sys
import urllib.parse

HERE = pathlib.Path(__file__).resolve().parent
GOLDEN = HERE.parent.parent / "testdata" / "golden"
OUT = HERE / "src" / "test" / "resources" / "dev" / "densewire" / "fuzz"


def body(case):
    for key in ("encoded_hex", "input_hex"):
        if key in case:
            return bytes.fromhex(case[key])
    for key in ("encoded_text", "input_text"):
        if key in case:
            return case[key].encode()
    return None


def columns_header(case):
    if "headers" in case and "Densewire-Columns" in case["headers"]:
        return case["headers"]["Densewire-Columns"]
    return ",".join(urllib.parse.quote(c["name"], safe="-._~") + "=" + c["type"] for c in case.get("columns", []))


def seeds():
    out = {}

    def put(target, case, data):
        out[(target, case["id"])] = data

    tables = json.loads((GOLDEN / "tables.json").read_text())["cases"]
    for c in tables:
        b = body(c)
        if b is None:
            continue
        f = c["format"]
        if f == "msgpack":
            put("TableMsgpackFuzzTest", c, b)
        elif f == "protobuf":
            put("TableProtobufFuzzTest", c, b)
        elif f == "arrow":
            put("TableArrowFuzzTest", c, b)
        elif f == "csv":
            put("TableCsvFuzzTest", c, columns_header(c).encode() + b"\n" + b)
        elif f == "json":
            put("TableJsonFuzzTest", c, ("json " + columns_header(c)).encode() + b"\n" + b)
        elif f in ("json-rows", "json-columns"):
            put("TableJsonFuzzTest", c, f.encode() + b"\n" + b)
    for name in ("tensors.json", "invalid.json", "interop.json"):
        for c in json.loads((GOLDEN / name).read_text())["cases"]:
            b = body(c)
            if b is None:
                continue
            f = c["format"]
            if f == "msgpack":
                put("TensorMsgpackFuzzTest", c, b)
            elif f == "protobuf":
                put("TensorProtobufFuzzTest", c, b)
            elif f == "arrow":
                put("TensorArrowFuzzTest", c, b)
            elif f == "json":
                put("JsonEnvelopeFuzzTest", c, b)
            elif f == "raw":
                headers = ";".join(f"{k}: {v}" for k, v in c.get("headers", {}).items())
                put("TensorRawFuzzTest", c, headers.encode() + b"\n" + b)
            elif f == "base64" and "shape" in c:
                line = f"{c['dtype']} {c['shape'][0]} {c['shape'][1]} {c['byteorder']}"
                put("TensorBase64FuzzTest", c, line.encode() + b"\n" + b)
    for c in json.loads((GOLDEN / "pgcopy.json").read_text())["cases"]:
        b = body(c)
        if b is None:
            continue
        cols = c["columns"]
        line = f"{cols[0]['type'] if len(cols) == 2 else '-'} {cols[-1]['type']}"
        put("PgCopyFuzzTest", c, line.encode() + b"\n" + b)
    for c in json.loads((GOLDEN / "kserve.json").read_text())["cases"]:
        if c["format"] != "kserve":
            continue
        length = next((v for k, v in c["headers"].items() if k.lower() == "inference-header-content-length"), "")
        put("KserveFuzzTest", c, length.encode() + b"\n" + body(c))
    for kind in ("ragged", "sparse"):
        for c in json.loads((GOLDEN / f"{kind}.json").read_text())["cases"]:
            line = f"{kind} {c['format']}" + (" response" if c.get("message", "").endswith("Response") else "")
            if "headers" in c:
                line += "\t" + ";".join(f"{k}: {v}" for k, v in c["headers"].items())
            put("RaggedFuzzTest", c, line.encode() + b"\n" + body(c))
    return out


def main():
    want = {OUT / f"{t}Inputs" / "fuzz" / cid: data for (t, cid), data in seeds().items()}
    # finding-* files are inputs the fuzzers found (kept as regression seeds), not golden cases
    have = {p: p.read_bytes() for p in OUT.glob("*Inputs/fuzz/*") if not p.name.startswith("finding-")} if OUT.exists() else {}
    if "--check" in sys.argv:
        stale = sorted(str(p.relative_to(HERE)) for p in set(want) | set(have) if want.get(p) != have.get(p))
        if stale:
            print(f"{len(stale)} seed files differ from the golden vectors (run python3 {HERE.name}/seeds.py):")
            print("\n".join(stale[:20]))
            sys.exit(1)
        print(f"fuzz seeds: {len(want)} files match the golden vectors")
        return
    for p in set(have) - set(want):
        p.unlink()
    for p, data in want.items():
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    print(f"wrote {len(want)} seed files under {OUT.relative_to(HERE)}")


if __name__ == "__main__":
    main()
