"""Reads densewire-TS Arrow streams back with pyarrow (see arrow-pyarrow-check.mjs)."""
import json, sys
import pyarrow as pa, pyarrow.ipc as ipc
cases = json.load(open(sys.argv[1] + "/cases.json"))
ok = 0
for c in cases:
    with open(f"{sys.argv[1]}/{c['id']}.arrows", "rb") as f:
        t = ipc.open_stream(f).read_all()
    col = t.column("embedding").combine_chunks()
    f = t.schema.field("embedding")
    meta = {k.decode(): v.decode() for k, v in (t.schema.metadata or {}).items()}
    fmeta = {k.decode(): v.decode() for k, v in (f.metadata or {}).items()}
    assert meta["densewire.dtype"] == c["dtype"] and fmeta["densewire.dtype"] == c["dtype"], (meta, fmeta)
    assert meta["densewire.version"] == "1" and int(meta["densewire.dimensions"]) == c["shape"][1]
    if c.get("model"): assert meta["densewire.model"] == c["model"] and int(meta["densewire.total_tokens"]) == c["usage"]["total_tokens"]
    assert t.num_rows == c["shape"][0] and not f.nullable
    if c["dtype"] == "binary":
        assert pa.types.is_fixed_size_binary(f.type)
        raw = b"".join(col.to_pylist()) if len(col) else b""
        got = [raw[i:i+1].hex() for i in range(len(raw))]
    else:
        inner = {"float32": pa.float32(), "float16": pa.float16(), "bfloat16": pa.uint16(), "float64": pa.float64(), "int8": pa.int8(), "uint8": pa.uint8()}[c["dtype"]]
        assert f.type == pa.list_(pa.field("item", inner, nullable=False), c["shape"][1]), f.type
        vals = col.flatten()
        buf = vals.buffers()[1]
        w = inner.bit_width // 8
        raw = buf.to_pybytes()[vals.offset * w:(vals.offset + len(vals)) * w]
        got = [raw[i:i+w][::-1].hex() for i in range(0, len(raw), w)]
    assert got == c["items"], (c["id"], got, c["items"])
    ok += 1
print(f"pyarrow {pa.__version__} read {ok}/{len(cases)} densewire-TS Arrow streams back to the golden items")
