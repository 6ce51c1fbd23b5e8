"""Reference for quantized embeddings (SPEC.md section 17), used by generate.py to expand
testdata/cases/quantization.toml into testdata/golden/quantization.json.

Naive on purpose, like generate.py: one value at a time in Python floats (IEEE binary64, no fused
multiply-add), float32 results by generate.py's exact rounding, written from the spec text so that the
vectorized implementations are checked against something simple. The hand-written expectations of
the cases (codes, dequantized bits, ids) are checked against it: a wrong expectation fails here.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import struct

from generate import DTYPES, bits_to_value, decimal_of, expand_tensor, mp_map, pb_field, round_to_format, to_binary_rows

METHOD = "minmax-per-dimension"


class RangeError(Exception):
    def __init__(self, category: str, field: str) -> None:
        super().__init__(f"{category} on {field}")
        self.category, self.field = category, field


def f32(h: str) -> float | None:
    """The value of float32 bits given as hex (None for NaN)."""
    return bits_to_value(int(h, 16), 8, 23)


def check_ranges(lower: list[str], upper: list[str], d: int) -> None:
    """SPEC 17.2/17.3: d finite items each, lower[j] <= upper[j]; the first bad dimension is the error."""
    if len(lower) != d:
        raise RangeError("shape_mismatch", "lower")
    if len(upper) != d:
        raise RangeError("shape_mismatch", "upper")
    for j in range(d):
        lo, hi = f32(lower[j]), f32(upper[j])
        if lo is None or math.isinf(lo):
            raise RangeError("invalid_field", f"lower[{j}]")
        if hi is None or math.isinf(hi) or hi < lo:
            raise RangeError("invalid_field", f"upper[{j}]")


def code(x: float | None, lo: float, hi: float) -> int:
    """SPEC 17.3: the uint8 code of one value."""
    step = (hi - lo) / 255
    if x is None:
        return 0
    if step == 0:
        return 255 if x > lo else 0
    q = (x - lo) / step
    if q >= 255:
        return 255
    if q < 0:
        return 0
    return math.floor(q)


def dequantized_bits(u: int, lo: float, hi: float) -> int:
    """SPEC 17.3: the float32 bits of a code dequantized (binary64, then rounded to float32)."""
    step = (hi - lo) / 255
    value = lo if step == 0 else lo + (u + 0.5) * step
    return round_to_format(value, 8, 23)


def quantization_id(lower: list[str], upper: list[str]) -> str:
    """SPEC 17.4: sha256(lower LE float32 || upper LE float32 || decimal d), first 16 hex digits."""
    le = b"".join(struct.pack("<I", int(h, 16)) for h in lower + upper)
    return hashlib.sha256(le + str(len(lower)).encode()).hexdigest()[:16]


def b64_f32(items: list[str]) -> str:
    return base64.b64encode(b"".join(struct.pack("<I", int(h, 16)) for h in items)).decode()


def published_object(c: dict, qid: str) -> dict:
    """SPEC 17.6: the object of GET /v1/models and GET /v1/quantization/{id}, keys in spec order."""
    return {"object": "quantization", "id": qid, "model": c["model"], "method": METHOD,
            "calibration": {"name": c["calibration"], "texts": c["texts"], "sha256": c["calibration_sha256"]},
            "dimensions": len(c["lower"]), "lower": b64_f32(c["lower"]), "upper": b64_f32(c["upper"])}


def _ranges_fields(c: dict) -> dict:
    return {"lower": c["lower"], "lower_decimal": [decimal_of("float32", h) for h in c["lower"]],
            "upper": c["upper"], "upper_decimal": [decimal_of("float32", h) for h in c["upper"]]}


def _hex8(v: int) -> str:
    return f"{v & 0xFF:02x}"


def _fail(case_id: str, what: str, written, computed) -> None:
    raise SystemExit(f"{case_id}: hand-written {what} {written} but the reference gives {computed}")


def quantize_case(c: dict) -> dict:
    n, d = c["shape"]
    case_id = f"quantization.quantize.{c['name']}"
    assert len(c["input"]) == n * d, case_id
    check_ranges(c["lower"], c["upper"], d)
    codes = [code(f32(h), f32(c["lower"][k % d]), f32(c["upper"][k % d])) for k, h in enumerate(c["input"])]
    if codes != c["uint8"]:
        _fail(case_id, "uint8", c["uint8"], codes)
    return {"id": case_id, "operation": "quantize", "shape": c["shape"], "input": c["input"],
            "input_decimal": [decimal_of("float32", h) for h in c["input"]], **_ranges_fields(c),
            "uint8": [_hex8(u) for u in codes], "uint8_decimal": [str(u) for u in codes],
            "int8": [_hex8(u - 128) for u in codes], "int8_decimal": [str(u - 128) for u in codes]}


def dequantize_case(c: dict) -> dict:
    n, d = c["shape"]
    dtype = c["dtype"]
    case_id = f"quantization.dequantize.{c['name']}"
    assert len(c["codes"]) == n * d and dtype in ("int8", "uint8"), case_id
    check_ranges(c["lower"], c["upper"], d)
    lo_ = -128 if dtype == "int8" else 0
    assert all(lo_ <= v <= lo_ + 255 for v in c["codes"]), case_id
    out = [f"{dequantized_bits(v - lo_, f32(c['lower'][k % d]), f32(c['upper'][k % d])):08x}"
           for k, v in enumerate(c["codes"])]
    if out != c["output"]:
        _fail(case_id, "output", c["output"], out)
    return {"id": case_id, "operation": "dequantize", "dtype": dtype, "shape": c["shape"],
            "codes": [_hex8(v) for v in c["codes"]], "codes_decimal": [str(v) for v in c["codes"]],
            **_ranges_fields(c), "output": out, "output_decimal": [decimal_of("float32", h) for h in out]}


def id_case(c: dict) -> dict:
    case_id = f"quantization.id.{c['name']}"
    d = len(c["lower"])
    check_ranges(c["lower"], c["upper"], d)
    qid = quantization_id(c["lower"], c["upper"])
    if qid != c["expect_id"]:
        _fail(case_id, "id", c["expect_id"], qid)
    text = json.dumps(published_object(c, qid), separators=(",", ":"))
    return {"id": case_id, "operation": "id", "dimensions": d, **_ranges_fields(c), "quantization": qid,
            "encoded_text": text}


def binary_case(c: dict) -> dict:
    case_id = f"quantization.binary.{c['name']}"
    packed = to_binary_rows("float32", c["input"], c["shape"])
    if packed != c["binary"]:
        _fail(case_id, "binary", c["binary"], packed)
    return {"id": case_id, "operation": "binary", "shape": c["shape"], "input": c["input"],
            "input_decimal": [decimal_of("float32", h) for h in c["input"]], "binary": packed,
            "cohere_binary": [str(int(h, 16) - 128) for h in packed]}


def envelope_cases(c: dict) -> list[dict]:
    out = []
    for case in expand_tensor(c, envelope=True):
        out.append({"id": f"quantization.envelope.{case['id']}", "operation": "envelope",
                    **{k: v for k, v in case.items() if k != "id"}})
    return out


def invalid_cases(spec: dict) -> list[dict]:
    out = []
    for c in spec.get("invalid", []):
        case = {"id": f"invalid.quantization.{c['name']}", "direction": "decode", "operation": c["operation"]}
        if c["operation"] in ("quantize", "dequantize"):
            n, d = c["shape"]
            try:
                check_ranges(c["lower"], c["upper"], d)
            except RangeError as exc:
                if (exc.category, exc.field) != (c["error"], c["field"]):
                    _fail(case["id"], "error", (c["error"], c["field"]), (exc.category, exc.field))
            else:
                raise SystemExit(f"{case['id']}: the reference accepts these ranges")
            key = "input" if c["operation"] == "quantize" else "codes"
            case.update(shape=c["shape"], lower=c["lower"], upper=c["upper"])
            if c["operation"] == "dequantize":
                case["dtype"] = c["dtype"]
                case[key] = [_hex8(v) for v in c[key]]
            else:
                case[key] = c[key]
        elif c["operation"] == "id":
            case["input_text"] = c["text"]
        else:  # an envelope: JSON text, or a binary body built here
            case["format"] = c["format"]
            if "text" in c:
                case["input_text"] = c["text"]
            elif "msgpack" in c:
                case["input_hex"] = mp_map([tuple(f) for f in c["msgpack"]]).hex()
            elif "protobuf" in c:
                case["message"] = "EmbeddingsResponse"
                case["input_hex"] = b"".join(
                    pb_field(f[0], f[1], bytes.fromhex(f[2]) if f[1] == "bytes" else f[2]) for f in c["protobuf"]).hex()
        case["error"] = c["error"]
        for key in ("offset", "field"):
            if key in c:
                case[key] = c[key]
        out.append(case)
    return out


def quantization_cases(spec: dict) -> list[dict]:
    cases = [quantize_case(c) for c in spec["quantize"]]
    cases += [dequantize_case(c) for c in spec["dequantize"]]
    cases += [id_case(c) for c in spec["id"]]
    cases += [binary_case(c) for c in spec["binary"]]
    for c in spec["envelope"]:
        assert c["dtype"] in ("int8", "uint8") and DTYPES[c["dtype"]]
        cases += envelope_cases(c)
    cases += invalid_cases(spec)
    ids = [c["id"] for c in cases]
    assert len(ids) == len(set(ids)), "duplicate quantization case ids"
    return cases
