#!/usr/bin/env python3
"""Generate densewire's golden vectors from the hand-written cases in testdata/cases/.

    python testdata/generate.py           # (re)write testdata/golden/*.json and README.md's capabilities table
    python testdata/generate.py --check   # exit 1 if the committed files differ from a fresh run

This script is the naive reference for SPEC.md: it encodes with the standard library only (struct,
base64, hand-rolled MessagePack and Protobuf writers, exact rounding with fractions), except for
Arrow IPC streams, which come from pyarrow (pinned in python/requirements-dev.txt, because Arrow
bytes are not byte-exact across writers: SPEC.md section 10). It also checks the hand-written
conversion expectations against its own exact rounding, so a wrong expectation fails here.

It also turns testdata/capabilities.toml (which language implements which part of the spec) into
testdata/golden/capabilities.json, which every golden runner reads, and into the table of README.md;
and it reads the spec version from SPEC.md's header, failing when any place the matrix lists
(package manifests, READMEs, constants) states another.
"""

from __future__ import annotations

import argparse
import base64
import difflib
import json
import math
import struct
import sys
import tomllib
from fractions import Fraction
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
ROOT = HERE.parent
CASES = HERE / "cases"
GOLDEN = HERE / "golden"
README = ROOT / "README.md"

import capabilities  # noqa: E402 (found through the sys.path entry above)

SPEC_VERSION = capabilities.spec_version((ROOT / "SPEC.md").read_text())

# name -> (tag used in case ids, bytes per item, Protobuf enum value); binary packs 8 items a byte
DTYPES = {
    "float32": ("f32", 4, 1),
    "float16": ("f16", 2, 2),
    "bfloat16": ("bf16", 2, 3),
    "float64": ("f64", 8, 4),
    "int8": ("i8", 1, 5),
    "uint8": ("u8", 1, 6),
    "binary": ("bin", 1, 7),
}
FLOAT_FORMATS = {"float16": (5, 10), "bfloat16": (8, 7), "float32": (8, 23), "float64": (11, 52)}


def row_bytes(dtype: str, d: int) -> int:
    return (d + 7) // 8 if dtype == "binary" else d * DTYPES[dtype][1]


def item_width(dtype: str) -> int:
    return 1 if dtype == "binary" else DTYPES[dtype][1]


def items_to_bytes(dtype: str, items: list[str], byteorder: str = "little") -> bytes:
    """Items are hex in natural (big-endian) notation; lay them out in the given byte order."""
    out = bytearray()
    for h in items:
        b = bytes.fromhex(h)
        assert len(b) == item_width(dtype), (dtype, h)
        out += b if byteorder == "big" else b[::-1]
    return bytes(out)


# ---------------------------------------------------------------------------- exact float rounding
def bits_to_value(bits: int, ebits: int, mbits: int) -> float | None:
    """The exact value of an IEEE binary format's bit pattern (None for NaN)."""
    sign = -1.0 if bits >> (ebits + mbits) else 1.0
    exp = (bits >> mbits) & ((1 << ebits) - 1)
    man = bits & ((1 << mbits) - 1)
    bias = (1 << (ebits - 1)) - 1
    if exp == (1 << ebits) - 1:
        return None if man else sign * math.inf
    if exp == 0:
        return sign * math.ldexp(man, 1 - bias - mbits)
    return sign * math.ldexp(man | (1 << mbits), exp - bias - mbits)


def round_to_format(value: float, ebits: int, mbits: int) -> int:
    """Round a finite or infinite float64 to an IEEE binary format, ties to even (NaN not handled)."""
    sign = 1 if math.copysign(1.0, value) < 0 else 0
    top = sign << (ebits + mbits)
    if math.isinf(value):
        return top | (((1 << ebits) - 1) << mbits)
    x = Fraction(abs(value))
    bias = (1 << (ebits - 1)) - 1
    if x == 0:
        return top
    e = max(math.floor(math.log2(x)) if x else 0, 1 - bias)
    while Fraction(2) ** e > x and e > 1 - bias:  # log2 of a Fraction can be off by one
        e -= 1
    while Fraction(2) ** (e + 1) <= x:
        e += 1
    scaled = x / Fraction(2) ** (e - mbits)  # in [2^mbits, 2^(mbits+1)) for normals
    q, r = divmod(scaled.numerator, scaled.denominator)
    twice = 2 * r
    if twice > scaled.denominator or (twice == scaled.denominator and q & 1):
        q += 1
    if q >= 1 << (mbits + 1):  # rounding carried into the next binade
        q >>= 1
        e += 1
    if q < 1 << mbits:  # subnormal (or zero)
        return top | q
    biased = e + bias
    if biased >= (1 << ebits) - 1:
        return top | (((1 << ebits) - 1) << mbits)
    return top | (biased << mbits) | (q - (1 << mbits))


def convert_bits(bits: int, src: str, dst: str) -> int:
    """SPEC.md section 3: float conversions. NaN becomes the canonical quiet NaN with the sign kept."""
    se, sm = FLOAT_FORMATS[src]
    de, dm = FLOAT_FORMATS[dst]
    value = bits_to_value(bits, se, sm)
    if value is None:
        sign = bits >> (se + sm)
        return (sign << (de + dm)) | (((1 << de) - 1) << dm) | (1 << (dm - 1))
    return round_to_format(value, de, dm)


def to_binary_rows(dtype: str, items: list[str], shape: list[int]) -> list[str]:
    n, d = shape
    ebits, mbits = FLOAT_FORMATS[dtype]
    out = []
    for r in range(n):
        bits = [0] * (((d + 7) // 8) * 8)
        for c in range(d):
            v = bits_to_value(int(items[r * d + c], 16), ebits, mbits)
            bits[c] = 1 if v is not None and v > 0 else 0
        for k in range(0, len(bits), 8):
            out.append(f"{int(''.join(map(str, bits[k:k + 8])), 2):02x}")
    return out


# ---------------------------------------------------------------------------- decimal renderings
def shortest_decimal(bits: int, dtype: str) -> str:
    """The shortest decimal that rounds back to these bits in dtype (JSON number form)."""
    ebits, mbits = FLOAT_FORMATS[dtype]
    value = bits_to_value(bits, ebits, mbits)
    assert value is not None and math.isfinite(value)
    if value == 0:
        return "-0.0" if bits >> (ebits + mbits) else "0.0"
    for p in range(1, 18):
        s = f"{value:.{p}g}"
        if dtype == "float64":
            ok = float(s) == value
        else:
            ok = round_to_format(float(s), ebits, mbits) == bits
        if ok:
            break
    if not any(ch in s for ch in ".en"):
        s += ".0"
    return s


def decimal_of(dtype: str, h: str) -> str:
    if dtype == "binary":
        return f"{int(h, 16):08b}"
    if dtype in ("int8", "uint8"):
        v = int(h, 16)
        return str(v - 256 if dtype == "int8" and v > 127 else v)
    ebits, mbits = FLOAT_FORMATS[dtype]
    v = bits_to_value(int(h, 16), ebits, mbits)
    if v is None:
        return "NaN"
    if math.isinf(v):
        return "Infinity" if v > 0 else "-Infinity"
    return shortest_decimal(int(h, 16), dtype)


def json_number(dtype: str, h: str) -> str | None:
    """An item as a JSON number, or None when it has none (NaN, infinities)."""
    if dtype == "binary":
        return str(int(h, 16))
    s = decimal_of(dtype, h)
    return None if s in ("NaN", "Infinity", "-Infinity") else s


# ---------------------------------------------------------------------------- reference encoders
def varint(v: int) -> bytes:
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def pb_field(number: int, kind: str, value) -> bytes:
    if kind == "varint":
        return varint(number << 3) + varint(value)
    if kind == "packed":
        payload = b"".join(varint(v) for v in value)
        return varint(number << 3 | 2) + varint(len(payload)) + payload
    if kind == "bytes":
        payload = bytes.fromhex(value) if isinstance(value, str) else value
        return varint(number << 3 | 2) + varint(len(payload)) + payload
    raise ValueError(kind)


def pb_tensor(dtype: str, shape: list[int], data: bytes) -> bytes:
    # proto3: fields in number order, defaults (zero enum, empty bytes) omitted, shape packed
    out = pb_field(1, "varint", DTYPES[dtype][2]) + pb_field(2, "packed", shape)
    return out + (pb_field(3, "bytes", data) if data else b"")


def pb_response(model: str, tensor: bytes, prompt_tokens: int, total_tokens: int, quantization: str = "") -> bytes:
    usage = (pb_field(1, "varint", prompt_tokens) if prompt_tokens else b"") + (
        pb_field(2, "varint", total_tokens) if total_tokens else b"")
    out = pb_field(1, "bytes", model.encode()) if model else b""
    out += pb_field(2, "bytes", tensor) + pb_field(3, "bytes", usage)
    return out + (pb_field(4, "bytes", quantization.encode()) if quantization else b"")


def mp_uint(v: int) -> bytes:
    if v < 0x80:
        return bytes([v])
    for marker, fmt, limit in ((0xCC, ">B", 1 << 8), (0xCD, ">H", 1 << 16), (0xCE, ">I", 1 << 32)):
        if v < limit:
            return bytes([marker]) + struct.pack(fmt, v)
    return b"\xcf" + struct.pack(">Q", v)


def mp_str(s: str) -> bytes:
    b = s.encode()
    if len(b) < 32:
        return bytes([0xA0 | len(b)]) + b
    for marker, fmt, limit in ((0xD9, ">B", 1 << 8), (0xDA, ">H", 1 << 16)):
        if len(b) < limit:
            return bytes([marker]) + struct.pack(fmt, len(b)) + b
    return b"\xdb" + struct.pack(">I", len(b)) + b


def mp_bin(b: bytes) -> bytes:
    for marker, fmt, limit in ((0xC4, ">B", 1 << 8), (0xC5, ">H", 1 << 16)):
        if len(b) < limit:
            return bytes([marker]) + struct.pack(fmt, len(b)) + b
    return b"\xc6" + struct.pack(">I", len(b)) + b


def mp_header(count: int, fix: int, m16: int) -> bytes:
    return bytes([fix | count]) if count < 16 else bytes([m16]) + struct.pack(">H", count)


def mp_value(kind: str, value) -> bytes:
    if kind == "str":
        return mp_str(value)
    if kind == "bin":
        return mp_bin(bytes.fromhex(value) if isinstance(value, str) else value)
    if kind == "uint":
        return mp_uint(value)
    if kind == "array":
        return mp_header(len(value), 0x90, 0xDC) + b"".join(mp_uint(v) for v in value)
    if kind == "map":  # a list of (key, kind, value)
        return mp_map(value)
    if kind == "int":  # any integer, in its smallest encoding (negative fixint, int8 ... int64)
        if value >= 0:
            return mp_uint(value)
        if value >= -32:
            return struct.pack(">b", value)
        for marker, fmt, limit in ((0xD0, ">b", 1 << 7), (0xD1, ">h", 1 << 15), (0xD2, ">i", 1 << 31)):
            if value >= -limit:
                return bytes([marker]) + struct.pack(fmt, value)
        return b"\xd3" + struct.pack(">q", value)
    if kind == "float64":
        return b"\xcb" + struct.pack(">d", value)
    if kind == "bool":
        return b"\xc3" if value else b"\xc2"
    if kind == "nil":
        return b"\xc0"
    raise ValueError(kind)


def mp_map(fields: list) -> bytes:
    return mp_header(len(fields), 0x80, 0xDE) + b"".join(mp_str(k) + mp_value(t, v) for k, t, v in fields)


def mp_tensor(dtype, shape, data, model=None, prompt_tokens=None, total_tokens=None, quantization=None) -> bytes:
    fields = [] if model is None else [("model", "str", model)]
    fields += [("dtype", "str", dtype), ("shape", "array", shape), ("data", "bin", data)]
    if prompt_tokens is not None:
        fields.append(("usage", "map", [("prompt_tokens", "uint", prompt_tokens), ("total_tokens", "uint", total_tokens)]))
    if quantization is not None:
        fields.append(("quantization", "str", quantization))
    return mp_map(fields)


def arrow_stream(dtype: str, shape: list[int], data: bytes, model=None, prompt_tokens=None, total_tokens=None,
                 quantization=None, metadata: dict[str, str] | None = None) -> bytes:
    """The Arrow IPC stream of a tensor (SPEC.md section 10); ``metadata`` replaces schema metadata values
    (invalid cases)."""
    import pyarrow as pa

    n, d = shape
    meta = {"densewire.version": "1", "densewire.dtype": dtype, "densewire.dimensions": str(d)}
    if model is not None:
        meta["densewire.model"] = model
    if prompt_tokens is not None:
        meta["densewire.prompt_tokens"] = str(prompt_tokens)
        meta["densewire.total_tokens"] = str(total_tokens)
    if quantization is not None:
        meta["densewire.quantization"] = quantization
    meta.update(metadata or {})
    field_meta = {"densewire.dtype": dtype}
    if dtype == "binary":
        typ = pa.binary(row_bytes(dtype, d))
        arr = pa.FixedSizeBinaryArray.from_buffers(typ, n, [None, pa.py_buffer(data)])
    else:
        inner = {"float32": pa.float32(), "float16": pa.float16(), "bfloat16": pa.uint16(), "float64": pa.float64(),
                 "int8": pa.int8(), "uint8": pa.uint8()}[dtype]
        values = pa.Array.from_buffers(inner, n * d, [None, pa.py_buffer(data)])
        typ = pa.list_(pa.field("item", inner, nullable=False), d)
        arr = pa.FixedSizeListArray.from_arrays(values, type=typ)
    schema = pa.schema([pa.field("embedding", typ, nullable=False, metadata=field_meta)], metadata=meta)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, schema) as writer:
        writer.write_batch(pa.record_batch([arr], schema=schema))
    return sink.getvalue().to_pybytes()


def json_response(dtype, shape, items, encoding_format, byteorder, model="", prompt_tokens=0, total_tokens=0,
                  quantization=None) -> str:
    """The canonical JSON embeddings response (SPEC.md section 6): compact, keys in spec order."""
    n, d = shape
    w = row_bytes(dtype, d) // item_width(dtype)  # items per row (packed bytes for binary)
    rows = []
    for r in range(n):
        row = items[r * w:(r + 1) * w]
        if encoding_format == "base64":
            emb = json.dumps(base64.b64encode(items_to_bytes(dtype, row, byteorder)).decode())
        else:
            nums = [json_number(dtype, h) for h in row]
            if any(x is None for x in nums):
                return None
            emb = "[" + ",".join(nums) + "]"
        rows.append('{"object":"embedding","index":%d,"embedding":%s}' % (r, emb))
    text = ('{"object":"list","data":[%s],"model":%s,"usage":{"prompt_tokens":%d,"total_tokens":%d},'
            '"dtype":"%s","byteorder":"%s","dimensions":%d') % (
        ",".join(rows), json.dumps(model), prompt_tokens, total_tokens, dtype,
        byteorder if encoding_format == "base64" else "little", d)
    return text + (',"quantization":%s}' % json.dumps(quantization) if quantization is not None else "}")


# ---------------------------------------------------------------------------- case expansion
def tensor_cases(spec: dict) -> list[dict]:
    out = []
    for kind in ("tensor", "envelope"):
        for t in spec.get(kind, []):
            out += expand_tensor(t, envelope=(kind == "envelope"))
    return out


def expand_tensor(t: dict, envelope: bool) -> list[dict]:
    dtype, shape, items = t["dtype"], t["shape"], t["items"]
    n, d = shape
    expected_items = n * row_bytes(dtype, d) // item_width(dtype)
    assert len(items) == expected_items, f"{dtype}.{t['name']}: {len(items)} items for shape {shape}"
    tag = DTYPES[dtype][0]
    name = t["name"]
    model = t.get("model")
    pt, tt = t.get("prompt_tokens"), t.get("total_tokens")
    q = t.get("quantization")  # SPEC 17.5: the quantization id of an int8/uint8 response
    base = {"dtype": dtype, "shape": shape, "items": items, "decimal": [decimal_of(dtype, h) for h in items]}
    if envelope:
        base.update(model=model, usage={"prompt_tokens": pt, "total_tokens": tt})
    if q is not None:
        base["quantization"] = q
    le = items_to_bytes(dtype, items, "little")
    orders = ["little", "big"] if item_width(dtype) > 1 else ["little"]
    cases = []

    def add(case_id: str, fmt: str, **kw):
        cases.append({"id": case_id, "format": fmt, **base, **kw})

    if not envelope:
        for order in orders:
            otag = tag + ({"little": "le", "big": "be"}[order] if len(orders) > 1 else "")
            add(f"base64.{otag}.{name}", "base64", byteorder=order, byte_exact=True,
                encoded_text=base64.b64encode(items_to_bytes(dtype, items, order)).decode())
    headers = {"Densewire-Version": "1", "Densewire-Dtype": dtype, "Densewire-Shape": f"{n},{d}",
               "Densewire-Byteorder": "little"}
    if envelope:
        headers.update({"Densewire-Model": model, "Densewire-Prompt-Tokens": str(pt), "Densewire-Total-Tokens": str(tt)})
    if q is not None:
        headers["Densewire-Quantization"] = q
    add(f"raw.{tag}.{name}", "raw", byteorder="little", byte_exact=True, headers=headers, encoded_hex=le.hex())
    add(f"msgpack.{tag}.{name}", "msgpack", byteorder="little", byte_exact=True,
        encoded_hex=mp_tensor(dtype, shape, le, model, pt, tt, q).hex())
    tensor_pb = pb_tensor(dtype, shape, le)
    if envelope:
        add(f"protobuf.{tag}.{name}", "protobuf", byteorder="little", byte_exact=True, message="EmbeddingsResponse",
            encoded_hex=pb_response(model, tensor_pb, pt, tt, q or "").hex())
    else:
        add(f"protobuf.{tag}.{name}", "protobuf", byteorder="little", byte_exact=True, message="Tensor",
            encoded_hex=tensor_pb.hex())
    add(f"arrow.{tag}.{name}", "arrow", byteorder="little", byte_exact=False,
        encoded_hex=arrow_stream(dtype, shape, le, model, pt, tt, q).hex())
    jkw = {"model": model or "", "prompt_tokens": pt or 0, "total_tokens": tt or 0, "quantization": q}
    for order in orders:
        otag = tag + ({"little": "le", "big": "be"}[order] if len(orders) > 1 else "")
        add(f"json.base64.{otag}.{name}", "json", byteorder=order, encoding_format="base64", byte_exact=False,
            encoded_text=json_response(dtype, shape, items, "base64", order, **jkw))
    text = json_response(dtype, shape, items, "float", "little", **jkw)
    if text is not None:
        add(f"json.float.{tag}.{name}", "json", byteorder="little", encoding_format="float", byte_exact=False,
            encoded_text=text)
    return cases


def conversion_cases(spec: dict) -> list[dict]:
    out = []
    for c in spec["convert"]:
        src, dst = c["from"], c["to"]
        if dst == "binary":
            expected = to_binary_rows(src, c["input"], c["shape"])
        else:
            expected = [f"{convert_bits(int(h, 16), src, dst):0{2 * DTYPES[dst][1]}x}" for h in c["input"]]
        if expected != c["output"]:
            raise SystemExit(f"convert.{src}_to_{dst}.{c['name']}: hand-written output {c['output']} "
                             f"but the exact reference gives {expected}")
        case = {"id": f"convert.{DTYPES[src][0]}_to_{DTYPES[dst][0]}.{c['name']}", "from": src, "to": dst,
                "input": c["input"], "input_decimal": [decimal_of(src, h) for h in c["input"]],
                "output": c["output"], "output_decimal": [decimal_of(dst, h) for h in c["output"]]}
        if "shape" in c:
            case["shape"] = c["shape"]
        out.append(case)
    return out


def invalid_cases(spec: dict, valid: dict[str, dict]) -> list[dict]:
    out = []
    for c in spec["invalid"]:
        case = {"id": f"invalid.{c['format']}.{c['name']}", "direction": "decode", "format": c["format"]}
        for key in ("dtype", "byteorder", "shape", "headers"):
            if key in c:
                case[key] = c[key]
        if "text" in c:
            case["input_text"] = c["text"]
        else:
            if "body_hex" in c:
                body = bytes.fromhex(c["body_hex"])
            elif "truncate" in c:
                src, length = c["truncate"]
                body = bytes.fromhex(valid[src]["encoded_hex"])[:length]
                assert length < len(bytes.fromhex(valid[src]["encoded_hex"]))
            elif "msgpack" in c:
                body = mp_map([tuple(f) for f in c["msgpack"]])
            elif "protobuf" in c:
                body = b"".join(pb_field(*f) for f in c["protobuf"])
            elif "arrow" in c and "kind" in c["arrow"]:  # a ragged or sparse stream (SPEC.md 20.7)
                import ragged  # noqa: PLC0415 (imports this module's encoders)
                a = c["arrow"]
                body = ragged.arrow_body(a["kind"], a["dtype"], a["shape"], a["offsets"], bytes.fromhex(a["data"]),
                                         a.get("indices"))
            elif "arrow" in c:  # a well-formed stream by the reference writer, with the metadata given
                a = c["arrow"]
                body = arrow_stream(a["dtype"], a["shape"], bytes.fromhex(a["data"]), a.get("model"),
                                    metadata=a.get("metadata"))
            else:
                raise SystemExit(f"{case['id']}: no input")
            body += bytes.fromhex(c.get("append_hex", ""))
            if c["format"] == "protobuf":
                case["message"] = c.get("message", "Tensor")
            case["input_hex"] = body.hex()
        case["error"] = c["error"]
        for key in ("offset", "field"):
            if key in c:
                case[key] = c[key]
        out.append(case)
    for c in spec.get("invalid_encode", []):
        out.append({"id": f"invalid.{c['format']}_encode.{c['name']}", "direction": "encode", "format": c["format"],
                    "encoding_format": c["encoding_format"], "dtype": c["dtype"], "shape": c["shape"],
                    "items": c["items"], "decimal": [decimal_of(c["dtype"], h) for h in c["items"]],
                    "error": c["error"], "field": c["field"]})
    return out


def interop_cases(spec: dict) -> list[dict]:
    out = []
    for c in spec["interop"]:
        assert len(c["items"]) == c["shape"][0] * row_bytes(c["dtype"], c["shape"][1]) // item_width(c["dtype"])
        if c["byte_exact"] and c["format"] == "base64":
            ours = base64.b64encode(items_to_bytes(c["dtype"], c["items"], c["byteorder"])).decode()
            if ours != c["text"]:
                raise SystemExit(f"interop.{c['name']}: the reference encoder gives {ours}, the peer gave {c['text']}")
        out.append({"id": f"interop.{c['name']}", "source": c["source"], "format": c["format"], "dtype": c["dtype"],
                    "byteorder": c["byteorder"], "shape": c["shape"], "items": c["items"],
                    "decimal": [decimal_of(c["dtype"], h) for h in c["items"]], "byte_exact": c["byte_exact"],
                    "encoded_text": c["text"]})
    return out


def generate() -> dict[str, str]:
    def load(name):
        with open(CASES / f"{name}.toml", "rb") as f:
            return tomllib.load(f)

    valid = tensor_cases(load("tensors"))
    by_id = {c["id"]: c for c in valid}
    assert len(by_id) == len(valid), "duplicate case ids"
    files = {
        "tensors.json": valid,
        "conversions.json": conversion_cases(load("conversions")),
        "invalid.json": invalid_cases(load("invalid"), by_id),
        "interop.json": interop_cases(load("interop")),
    }
    from tables import invalid_table_cases, table_cases  # noqa: PLC0415 (imports this module's encoders)

    tables_spec = load("tables")
    table_valid, table_by_id = table_cases(tables_spec)
    files["tables.json"] = table_valid + invalid_table_cases(tables_spec, table_by_id)
    files["pgcopy.json"] = pgcopy_golden(load("pgcopy"))
    from quantization import quantization_cases  # noqa: PLC0415 (imports this module's encoders)

    files["quantization.json"] = quantization_cases(load("quantization"))
    from retry import retry_cases  # noqa: PLC0415

    files["retry.json"] = retry_cases(load("retry"))
    from kserve import kserve_cases  # noqa: PLC0415 (imports this module's encoders)

    files["kserve.json"] = kserve_cases(load("kserve"))
    import ragged  # noqa: PLC0415 (imports this module's encoders)

    files["ragged.json"] = ragged.golden("ragged", load("ragged"))
    files["sparse.json"] = ragged.golden("sparse", load("sparse"))
    header = {"spec_version": SPEC_VERSION, "generated_by": "testdata/generate.py from testdata/cases/*.toml; do not edit"}
    out = {name: json.dumps({**header, "cases": cases}, indent=1, ensure_ascii=False) + "\n"
           for name, cases in files.items()}
    caps = capabilities.golden_json(capabilities.load(HERE / "capabilities.toml"), SPEC_VERSION, files)
    out["capabilities.json"] = json.dumps(caps, indent=1, ensure_ascii=False) + "\n"
    return out


# ---------------------------------------------------------------------------- PostgreSQL binary COPY (SPEC 16)
def pgcopy_golden(spec: dict) -> list[dict]:
    """pgcopy.json: the cases of testdata/cases/pgcopy.toml, by the reference encoder of testdata/pgcopy.py."""
    from pgcopy import invalid_pgcopy_cases, pgcopy_cases  # noqa: PLC0415 (imports this module's rounding)

    valid = pgcopy_cases(spec)
    by_id = {c["id"]: c for c in valid}
    assert len(by_id) == len(valid), "duplicate pgcopy case ids"
    return valid + invalid_pgcopy_cases(spec, by_id)


def readme_text(outputs: dict[str, str]) -> str:
    """README.md with its capabilities table rendered from capabilities.json."""
    table = capabilities.readme_table(json.loads(outputs["capabilities.json"]))
    return capabilities.with_readme_table(README.read_text(), table)


def diff(current: str, fresh: str, name: str) -> list[str]:
    return list(difflib.unified_diff(current.splitlines(True), fresh.splitlines(True), f"committed/{name}",
                                     f"generated/{name}"))[:40]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if the committed golden files are stale")
    args = parser.parse_args()
    outputs = generate()
    readme = readme_text(outputs)
    versions = capabilities.version_mismatches(ROOT, capabilities.load(HERE / "capabilities.toml"), SPEC_VERSION)
    for problem in versions:
        print(problem)
    if versions:
        print(f"spec version: {len(versions)} place(s) disagree with SPEC.md's version {SPEC_VERSION}; "
              "fix them (the places are listed in testdata/capabilities.toml [[version]])")
    if args.check:
        stale = []
        for name, text in outputs.items():
            path = GOLDEN / name
            current = path.read_text() if path.exists() else ""
            if current != text:
                stale.append(f"testdata/golden/{name}")
                sys.stdout.writelines(diff(current, text, name))
        if README.read_text() != readme:
            stale.append("README.md (capabilities table)")
            sys.stdout.writelines(diff(README.read_text(), readme, "README.md"))
        if stale:
            print(f"out of date: {', '.join(stale)}; run python testdata/generate.py and commit")
            return 1
        if versions:
            return 1
        cases = sum(len(json.loads(outputs[name])["cases"]) for name in outputs if name != "capabilities.json")
        print(f"golden files and the capabilities table up to date ({cases} cases); spec version {SPEC_VERSION} "
              "everywhere")
        return 0
    GOLDEN.mkdir(exist_ok=True)
    for name, text in outputs.items():
        (GOLDEN / name).write_text(text)
        print(f"wrote testdata/golden/{name}: {len(json.loads(text)['cases'])} " + (
            "files of cases" if name == "capabilities.json" else "cases"))
    README.write_text(readme)
    print("wrote the capabilities table of README.md")
    return 1 if versions else 0


if __name__ == "__main__":
    sys.exit(main())
