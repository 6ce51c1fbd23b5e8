#!/usr/bin/env python3
"""Writes the seed corpus of every fuzz target from the golden vectors (run from anywhere):

    python3 rust/fuzz/make_corpus.py

corpus/<target>/<case id> holds one golden input (valid and invalid) in the form that target reads;
corpus/<target>/regression* are inputs that once made a target fail, kept as they are.
The table targets read the bodies of tables.json (decode cases; the encode-only case is left out):
table_json's first byte chooses the layout (0 objects, 1 rows, 2 columns), and JSON objects and
CSV carry their Densewire-Columns value and a newline before the body.
"""
import json
import pathlib
import urllib.parse

HERE = pathlib.Path(__file__).resolve().parent
GOLDEN = HERE.parents[1] / "testdata" / "golden"
DTYPES = ["float32", "float16", "bfloat16", "float64", "int8", "uint8", "binary"]


def cases(name):
    return json.loads((GOLDEN / f"{name}.json").read_text())["cases"]


def main():
    out = {t: {} for t in ["base64", "raw", "json", "request", "negotiate", "msgpack", "protobuf", "arrow",
                           "table_json", "table_csv", "table_msgpack", "table_protobuf", "table_arrow", "pgcopy", "kserve", "ragged", "sparse"]}
    for c in cases("tensors") + cases("invalid") + cases("interop"):
        fmt = c["format"]
        body = bytes.fromhex(c["encoded_hex"]) if "encoded_hex" in c else bytes.fromhex(c.get("input_hex", ""))
        text = c.get("encoded_text", c.get("input_text"))
        if fmt == "base64" and text is not None:
            out["base64"][c["id"]] = text.encode()
        elif fmt == "json" and text is not None:
            out["json"][c["id"]] = text.encode()
        elif fmt == "raw" and "headers" in c:
            h = {k.lower(): v for k, v in c["headers"].items()}
            dtype = DTYPES.index(h["densewire-dtype"]) if h.get("densewire-dtype") in DTYPES else 7
            shape = h.get("densewire-shape", "0,0").split(",")
            try:
                n, d = int(shape[0]) % 8, int(shape[1]) % 256
            except (ValueError, IndexError):
                n, d = 0, 0
            out["raw"][c["id"]] = bytes([dtype, n, d]) + body
        elif fmt in ("msgpack", "protobuf", "arrow") and body:
            out[fmt][c["id"]] = body
    requests = [
        '{"input":["a","b"],"model":"m"}', '{"input":"hello","encoding_format":"base64","dtype":"float16"}',
        '{"input":[1,2,3],"dimensions":8,"byteorder":"big","truncate":false}', '{"input":[[1,2],[3]],"user":"u"}',
        '{"input":"a","dimension":3}', '{"input":["a",""]}', '{"input":"a","dtype":"fp16"}',
    ]
    for i, r in enumerate(requests):
        out["request"][f"request{i}"] = r.encode()
    accepts = ["application/json", "*/*;q=0.5, application/json;q=0", "application/*;q=0.9, application/octet-stream",
               "text/html", "application/x-msgpack;q=0.3, */*;q=0.1", ""]
    for i, a in enumerate(accepts):
        out["negotiate"][f"accept{i}"] = a.encode()
    layouts = ["json", "json-rows", "json-columns"]
    for c in cases("tables"):
        if c.get("direction") == "encode":
            continue
        fmt = c["format"]
        text = c.get("encoded_text", c.get("input_text"))
        body = text.encode() if text is not None else bytes.fromhex(c.get("encoded_hex", c.get("input_hex", "")))
        if "headers" in c:
            columns = c["headers"]["Densewire-Columns"]
        else:
            columns = ",".join(urllib.parse.quote(col["name"], safe="-._~") + "=" + col["type"]
                               for col in c.get("columns", []))
        if fmt in layouts:
            prefix = bytes([layouts.index(fmt)]) + (columns.encode() + b"\n" if fmt == "json" else b"")
            out["table_json"][c["id"]] = prefix + body
        elif fmt == "csv":
            out["table_csv"][c["id"]] = columns.encode() + b"\n" + body
        else:
            out["table_" + fmt][c["id"]] = body
    vector_types = ["vector", "halfvec", "bit", "sparsevec"]
    id_types = [None, "int8", "int4", "text", "uuid"]
    for c in cases("pgcopy"):
        if c.get("direction") == "encode":
            continue
        cols = c["columns"]
        id_type = cols[0]["type"] if len(cols) == 2 else None
        first = vector_types.index(cols[-1]["type"]) + 4 * id_types.index(id_type)
        out["pgcopy"][c["id"]] = bytes([first]) + bytes.fromhex(c.get("encoded_hex", c.get("input_hex", "")))
    for c in cases("kserve"):  # responses and invalid bodies: "VALUE\nBODY", VALUE the header length
        if c["format"] != "kserve":
            continue
        length = next((v for k, v in c["headers"].items() if k.lower() == "inference-header-content-length"), "")
        out["kserve"][c["id"]] = length.encode() + b"\n" + bytes.fromhex(c.get("encoded_hex", c.get("input_hex", "")))
    kind_formats = ["json", "raw", "msgpack", "protobuf", "arrow"]
    for kind in ("ragged", "sparse"):  # first byte: the format (+5 for a Protobuf response); raw: dtype, n, d/V
        for c in cases(kind):
            fmt = c["format"]
            body = (c.get("encoded_text") or c.get("input_text") or "").encode() or bytes.fromhex(
                c.get("encoded_hex", c.get("input_hex", "")))
            first = kind_formats.index(fmt) + (5 if c.get("message", "").endswith("Response") else 0)
            prefix = bytes([first])
            if fmt == "raw":
                h = {k.lower(): v for k, v in c["headers"].items()}
                dtype = DTYPES.index(h["densewire-dtype"]) if h.get("densewire-dtype") in DTYPES else 7
                try:
                    n, d = (int(x) for x in h.get("densewire-shape", "0,0").split(","))
                except ValueError:
                    n, d = 0, 0
                prefix += bytes([dtype, n % 256]) + (d % (1 << 32)).to_bytes(4, "little")
            out[kind][c["id"]] = prefix + body
    for target, files in out.items():
        d = HERE / "corpus" / target
        d.mkdir(parents=True, exist_ok=True)
        for old in d.iterdir():  # inputs that once made a target fail (regression*) are kept
            if not old.name.startswith("regression"):
                old.unlink()
        for name, data in files.items():
            (d / name).write_bytes(data)
        print(f"corpus/{target}: {len(files)} seeds")


if __name__ == "__main__":
    main()
