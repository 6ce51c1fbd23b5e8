"""Reference encoders for densewire tables (SPEC.md section 15), used by generate.py.

Like generate.py, these are naive on purpose: plain Python over lists, written from the spec text,
so that the fast encoders of each implementation are checked against something simple. Arrow
streams come from pyarrow (decode-only golden vectors, SPEC.md section 15.7).
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
import struct
import uuid as uuidlib
from urllib.parse import quote

from generate import (FLOAT_FORMATS, bits_to_value, decimal_of, mp_bin, mp_header, mp_str, mp_uint, pb_field,
                      varint)

FIXED_WIDTH = {"bool": 1, "int32": 4, "int64": 8, "float32": 4, "float64": 8, "uuid": 16}
PB_TYPE = {"bool": 1, "int32": 2, "int64": 3, "float32": 4, "float64": 5, "string": 6, "uuid": 7, "vector": 8}
VECTOR = re.compile(r"float32\[([1-9][0-9]*)\]")
FORMATS = ["json", "json-rows", "json-columns", "csv", "msgpack", "protobuf", "arrow"]


def vector_dims(type_: str) -> int | None:
    m = VECTOR.fullmatch(type_)
    return int(m.group(1)) if m else None


def check_type(type_: str) -> None:
    assert type_ in FIXED_WIDTH or type_ == "string" or vector_dims(type_), type_


# ------------------------------------------------------------------------------ values
def value_bytes(type_: str, v) -> bytes:
    """One value's fixed-width little-endian bytes."""
    if type_ == "bool":
        return b"\x01" if v else b"\x00"
    if type_ == "int32":
        return struct.pack("<i", int(v))
    if type_ == "int64":
        return struct.pack("<q", int(v))
    if type_ in ("float32", "float64"):
        return bytes.fromhex(v)[::-1]
    if type_ == "uuid":
        return uuidlib.UUID(v).bytes
    if vector_dims(type_):
        return b"".join(bytes.fromhex(h)[::-1] for h in v)
    raise ValueError(type_)


def item_width(type_: str) -> int:
    return 4 if vector_dims(type_) else FIXED_WIDTH[type_]


def column_bytes(col: dict, split: bool = False) -> bytes:
    data = b"".join(value_bytes(col["type"], v) for v in col["values"])
    if not split:
        return data
    w = item_width(col["type"])
    m = len(data) // w
    return bytes(data[i * w + k] for k in range(w) for i in range(m))


def float_decimal(type_: str, h: str) -> str:
    return decimal_of(type_, h)


def is_finite(type_: str, h: str) -> bool:
    ebits, mbits = FLOAT_FORMATS[type_]
    v = bits_to_value(int(h, 16), ebits, mbits)
    return v is not None and math.isfinite(v)


def text_value(type_: str, v, fmt: str) -> str:
    """A value as JSON text (fmt json) or as a CSV field before quoting (fmt csv)."""
    if type_ == "bool":
        return "true" if v else "false"
    if type_ in ("int32", "int64"):
        return str(int(v))
    if type_ in ("float32", "float64"):
        if fmt == "json" and not is_finite(type_, v):
            raise ValueError("non_finite")
        return float_decimal(type_, v)
    if type_ == "uuid":
        s = str(uuidlib.UUID(v))
        return json.dumps(s) if fmt == "json" else s
    if type_ == "string":
        return json.dumps(v, ensure_ascii=False) if fmt == "json" else v
    return "[" + ",".join(text_value("float32", h, fmt) for h in v) + "]"


# ------------------------------------------------------------------------------ formats
def columns_header(columns: list[dict]) -> str:
    return ",".join(f"{quote(c['name'], safe='-._~')}={c['type']}" for c in columns)


def json_objects(columns: list[dict], n: int) -> str:
    rows = []
    for i in range(n):
        rows.append("{" + ",".join(f"{json.dumps(c['name'], ensure_ascii=False)}:{text_value(c['type'], c['values'][i], 'json')}"
                                   for c in columns) + "}")
    return "[" + ",".join(rows) + "]"


def json_schema(columns: list[dict]) -> str:
    return "[" + ",".join(f'{{"name":{json.dumps(c["name"], ensure_ascii=False)},"type":"{c["type"]}"}}'
                          for c in columns) + "]"


def json_rows(name: str, columns: list[dict], n: int) -> str:
    rows = ["[" + ",".join(text_value(c["type"], c["values"][i], "json") for c in columns) + "]" for i in range(n)]
    return f'{{"name":{json.dumps(name, ensure_ascii=False)},"columns":{json_schema(columns)},"rows":[{",".join(rows)}]}}'


def json_columns(name: str, columns: list[dict], n: int) -> str:
    cols = [f'{{"name":{json.dumps(c["name"], ensure_ascii=False)},"type":"{c["type"]}","values":['
            + ",".join(text_value(c["type"], v, "json") for v in c["values"]) + "]}" for c in columns]
    return f'{{"name":{json.dumps(name, ensure_ascii=False)},"rows":{n},"columns":[{",".join(cols)}]}}'


def csv_field(s: str) -> str:
    if s == "" or any(ch in s for ch in ',"\r\n') or s[0] in " \ufeff" or s[-1] == " ":
        return '"' + s.replace('"', '""') + '"'
    return s


def csv_text(columns: list[dict], n: int) -> str:
    lines = [",".join(csv_field(c["name"]) for c in columns)]
    lines += [",".join(csv_field(text_value(c["type"], c["values"][i], "csv")) for c in columns) for i in range(n)]
    text = "".join(line + "\r\n" for line in lines)
    # cross-check the quoting against Python's csv reader
    parsed = list(csv.reader(io.StringIO(text, newline="")))
    assert parsed[0] == [c["name"] for c in columns] and len(parsed) == n + 1, parsed
    return text


def msgpack_table(name: str, columns: list[dict], n: int) -> bytes:
    out = mp_header(3, 0x80, 0xDE) + mp_str("name") + mp_str(name) + mp_str("rows") + mp_uint(n)
    out += mp_str("columns") + mp_header(len(columns), 0x90, 0xDC)
    for c in columns:
        out += mp_header(3, 0x80, 0xDE) + mp_str("name") + mp_str(c["name"]) + mp_str("type") + mp_str(c["type"])
        out += mp_str("data")
        if c["type"] == "string":
            out += mp_header(len(c["values"]), 0x90, 0xDC) + b"".join(mp_str(v) for v in c["values"])
        else:
            out += mp_bin(column_bytes(c))
    return out


def pb_column(name: str = "", type: int = 0, dimensions: int = 0, encoding: int = 0, data: bytes | str = b"",
              lengths: list[int] | None = None) -> bytes:
    data = bytes.fromhex(data) if isinstance(data, str) else data
    out = pb_field(1, "bytes", name.encode()) if name else b""
    out += pb_field(2, "varint", type) if type else b""
    out += pb_field(3, "varint", dimensions) if dimensions else b""
    out += pb_field(4, "varint", encoding) if encoding else b""
    out += pb_field(5, "bytes", data) if data else b""
    out += pb_field(6, "packed", lengths) if lengths else b""
    return out


def protobuf_table(name: str, columns: list[dict], n: int, split: bool) -> bytes:
    out = pb_field(1, "bytes", name.encode()) if name else b""
    out += pb_field(2, "varint", n) if n else b""
    for c in columns:
        t = c["type"]
        d = vector_dims(t)
        if t == "string":
            data = b"".join(v.encode() for v in c["values"])
            col = pb_column(c["name"], PB_TYPE[t], data=data, lengths=[len(v.encode()) for v in c["values"]])
        else:
            use_split = split and item_width(t) >= 2
            col = pb_column(c["name"], PB_TYPE["vector" if d else t], d or 0, 1 if use_split else 0,
                            column_bytes(c, use_split))
        out += pb_field(3, "bytes", col)
    return out


def pb_invalid(fields: list) -> bytes:
    out = b""
    for kind, value in fields:
        if kind == "rows":
            out += pb_field(2, "varint", value)
        elif kind == "column":
            out += pb_field(3, "bytes", pb_column(**value))
        else:
            raise ValueError(kind)
    return out


def mp_invalid(fields: list) -> bytes:
    out = mp_header(len(fields), 0x80, 0xDE)
    for key, kind, value in fields:
        out += mp_str(key)
        if kind == "str":
            out += mp_str(value)
        elif kind == "uint":
            out += mp_uint(value)
        elif kind == "columns":
            out += mp_header(len(value), 0x90, 0xDC)
            for cname, ctype, dkind, data in value:
                out += mp_header(3, 0x80, 0xDE) + mp_str("name") + mp_str(cname) + mp_str("type") + mp_str(ctype)
                out += mp_str("data")
                if dkind == "bin":
                    out += mp_bin(bytes.fromhex(data))
                else:
                    out += mp_header(len(data), 0x90, 0xDC) + b"".join(mp_str(s) for s in data)
        else:
            raise ValueError(kind)
    return out


def arrow_table(name: str, columns: list[dict], n: int) -> bytes:
    import pyarrow as pa

    fields, arrays = [], []
    for c in columns:
        t, vals = c["type"], c["values"]
        meta = {"densewire.type": t}
        if t == "bool":
            arr = pa.array(vals, pa.bool_())
        elif t in ("int32", "int64"):
            arr = pa.array([int(v) for v in vals], getattr(pa, t)())
        elif t in ("float32", "float64"):
            arr = pa.Array.from_buffers(getattr(pa, t)(), n, [None, pa.py_buffer(column_bytes(c))])
        elif t == "string":
            arr = pa.array(vals, pa.string())
        elif t == "uuid":
            storage = pa.Array.from_buffers(pa.binary(16), n, [None, pa.py_buffer(column_bytes(c))])
            arr = pa.ExtensionArray.from_storage(pa.uuid(), storage)
        else:
            d = vector_dims(t)
            items = pa.Array.from_buffers(pa.float32(), n * d, [None, pa.py_buffer(column_bytes(c))])
            arr = pa.FixedSizeListArray.from_arrays(items, type=pa.list_(pa.field("item", pa.float32(), nullable=False), d))
        fields.append(pa.field(c["name"], arr.type, nullable=False, metadata=meta))
        arrays.append(arr)
    schema = pa.schema(fields, metadata={"densewire.version": "1", "densewire.table": name})
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, schema) as writer:
        writer.write_batch(pa.record_batch(arrays, schema=schema))
    return sink.getvalue().to_pybytes()


# ------------------------------------------------------------------------------ cases
def golden_column(c: dict) -> dict:
    out = {"name": c["name"], "type": c["type"], "values": c["values"]}
    if c["type"] in ("float32", "float64"):
        out["decimal"] = [float_decimal(c["type"], h) for h in c["values"]]
    elif vector_dims(c["type"]):
        out["decimal"] = [[float_decimal("float32", h) for h in v] for v in c["values"]]
    return out


def table_cases(spec: dict) -> tuple[list[dict], dict[str, dict]]:
    out: list[dict] = []
    for t in spec["table"]:
        columns = t["columns"]
        for c in columns:
            check_type(c["type"])
        lengths = {len(c["values"]) for c in columns}
        assert len(lengths) == 1, t["name"]
        n = lengths.pop()
        base = {"table": t["table"], "rows": n, "columns": [golden_column(c) for c in columns],
                "headers": {"Densewire-Table": t["table"], "Densewire-Rows": str(n),
                            "Densewire-Columns": columns_header(columns)}}
        for fmt in t.get("formats", FORMATS):
            if fmt == "protobuf":
                for split, tag in ((False, "plain"), (True, "bss")):
                    body = protobuf_table(t["table"], columns, n, split)
                    out.append({"id": f"table.protobuf.{tag}.{t['name']}", "format": "protobuf",
                                "column_encoding": "byte_stream_split" if split else "plain", **base,
                                "byte_exact": True, "encoded_hex": body.hex()})
                continue
            case = {"id": f"table.{fmt}.{t['name']}", "format": fmt, **base}
            if fmt == "json":
                case.update(byte_exact=False, encoded_text=json_objects(columns, n))
            elif fmt == "json-rows":
                case.update(byte_exact=False, encoded_text=json_rows(t["table"], columns, n))
            elif fmt == "json-columns":
                case.update(byte_exact=False, encoded_text=json_columns(t["table"], columns, n))
            elif fmt == "csv":
                case.update(byte_exact=False, encoded_text=csv_text(columns, n))
            elif fmt == "msgpack":
                case.update(byte_exact=True, encoded_hex=msgpack_table(t["table"], columns, n).hex())
            elif fmt == "arrow":
                case.update(byte_exact=False, encoded_hex=arrow_table(t["table"], columns, n).hex())
            out.append(case)
    by_id = {c["id"]: c for c in out}
    assert len(by_id) == len(out), "duplicate table case ids"
    return out, by_id


def invalid_table_cases(spec: dict, valid: dict[str, dict]) -> list[dict]:
    out = []
    for c in spec.get("invalid", []):
        case = {"id": f"invalid.table.{c['format']}.{c['name']}", "direction": "decode", "format": c["format"]}
        if "columns" in c:
            case["columns"] = c["columns"]
        if "text" in c:
            case["input_text"] = c["text"]
        elif "body_hex" in c:
            case["input_hex"] = bytes.fromhex(c["body_hex"]).hex()
        elif "arrow" in c:  # a well-formed stream by the reference writer (pyarrow), of the columns given
            a = c["arrow"]
            case["input_hex"] = arrow_table(a["table"], a["columns"], len(a["columns"][0]["values"])).hex()
        elif "truncate" in c:
            src, length = c["truncate"]
            body = bytes.fromhex(valid[src]["encoded_hex"])
            assert length < len(body)
            case["input_hex"] = body[:length].hex()
        elif "msgpack" in c:
            case["input_hex"] = mp_invalid(c["msgpack"]).hex()
        elif "protobuf" in c:
            case["input_hex"] = pb_invalid(c["protobuf"]).hex()
        else:
            raise SystemExit(f"{case['id']}: no input")
        case["error"] = c["error"]
        for key in ("offset", "field"):
            if key in c:
                case[key] = c[key]
        out.append(case)
    for c in spec.get("invalid_encode", []):
        n = len(c["columns"][0]["values"])
        out.append({"id": f"invalid.table.{c['format']}_encode.{c['name']}", "direction": "encode",
                    "format": c["format"], "table": c["table"], "rows": n,
                    "columns": [golden_column(col) for col in c["columns"]], "error": c["error"], "field": c["field"]})
    return out
