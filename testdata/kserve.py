"""The Open Inference Protocol (KServe v2) golden cases of SPEC.md section 19 (imported by generate.py).

Bodies are built here with the standard library: the JSON header written compactly, numbers by the
shortest decimal of generate.py (SPEC.md 3.5), then the blobs of the binary outputs, little-endian, and
BYTES elements as a 4-byte little-endian length and the bytes. Request cases are checked against the
binary_data_size their headers declare, so a miscounted hand-written blob fails here.
"""

from __future__ import annotations

import json
import struct

from generate import decimal_of, items_to_bytes, json_number

DTYPE = {"FP32": "float32", "FP16": "float16", "BF16": "bfloat16", "FP64": "float64", "INT8": "int8", "UINT8": "uint8"}
HEADER = "Inference-Header-Content-Length"


def _dumps(value) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _elements(o: dict) -> list[bytes]:
    if "elements_text" in o:
        return [t.encode() for t in o["elements_text"]]
    return [bytes.fromhex(h) for h in o["elements_hex"]]


def _count(shape: list[int]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def _json_data(o: dict) -> str:
    if o["datatype"] == "BYTES":
        return _dumps([e.decode() for e in _elements(o)])
    dtype = DTYPE[o["datatype"]]
    numbers = [json_number(dtype, h) for h in o["items"]]
    assert None not in numbers, f"{o['name']}: a non-finite item has no JSON form"
    if o.get("nested"):
        d = o["shape"][-1]
        return "[" + ",".join("[" + ",".join(numbers[r:r + d]) + "]" for r in range(0, len(numbers), d)) + "]"
    return "[" + ",".join(numbers) + "]"


def _response_body(c: dict) -> tuple[bytes, dict[str, str]]:
    parts, blobs = [], []
    for o in c["outputs"]:
        n = len(_elements(o)) if o["datatype"] == "BYTES" else len(o["items"])
        assert n == _count(o["shape"]), f"{c['name']}.{o['name']}: {n} items for the shape {o['shape']}"
        head = '{"name":%s,"datatype":%s,"shape":%s' % (_dumps(o["name"]), _dumps(o["datatype"]), _dumps(o["shape"]))
        params = dict(o.get("parameters", {}))
        if o["binary"]:
            if o["datatype"] == "BYTES":
                blob = b"".join(struct.pack("<I", len(e)) + e for e in _elements(o))
            else:
                blob = items_to_bytes(DTYPE[o["datatype"]], o["items"])
            params["binary_data_size"] = len(blob)
            blobs.append(blob)
            parts.append(head + ',"parameters":' + _dumps(params) + "}")
        else:
            parts.append(head + (',"parameters":' + _dumps(params) if params else "") + ',"data":' + _json_data(o) + "}")
    top = "".join(f"{_dumps(k)}:{_dumps(c[k])}," for k in ("model_name", "model_version", "id") if k in c)
    header = ("{" + top + '"outputs":[' + ",".join(parts) + "]}").encode()
    with_length = c.get("header_length", bool(blobs))
    headers = {"Content-Type": "application/octet-stream" if blobs else "application/json"}
    if with_length:
        headers[HEADER] = str(len(header))
    return header + b"".join(blobs), headers


def _expected_output(o: dict) -> dict:
    out = {"name": o["name"], "datatype": o["datatype"], "shape": o["shape"], "binary": o["binary"],
           "parameters": dict(o.get("parameters", {}))}
    if o["datatype"] == "BYTES":
        out["elements_hex"] = [e.hex() for e in _elements(o)]
        if "elements_text" in o:
            out["elements_text"] = o["elements_text"]
    else:
        dtype = DTYPE[o["datatype"]]
        out["dtype"] = dtype
        out["items"] = o["items"]
        out["decimal"] = [decimal_of(dtype, h) for h in o["items"]]
    return out


def _offset(value, header_len: int, body_len: int) -> int:
    if isinstance(value, int):
        return value
    if value == "end":
        return body_len
    assert value.startswith("H+"), value
    return header_len + int(value[2:])


def _declared_sizes(header: bytes, key: str) -> list[int]:
    doc = json.loads(header)
    return [t["parameters"]["binary_data_size"] for t in doc.get(key, [])
            if isinstance(t.get("parameters"), dict) and "binary_data_size" in t["parameters"]]


def _invalid(c: dict, kind: str) -> dict:
    header = bytes.fromhex(c["header_hex"]) if "header_hex" in c else c["header"].encode()
    body = header + bytes.fromhex(c.get("blob_hex", ""))
    length = c.get("header_length", str(len(header)))
    headers = {"Content-Type": "application/octet-stream" if length != "none" else "application/json"}
    if length != "none":
        headers[HEADER] = length
    case = {"id": f"invalid.{kind}.{c['name']}", "direction": "decode", "format": kind, "headers": headers,
            "input_hex": body.hex(), "error": c["error"]}
    if "offset" in c:
        case["offset"] = _offset(c["offset"], len(header), len(body))
    if "field" in c:
        case["field"] = c["field"]
    return case


def kserve_cases(spec: dict) -> list[dict]:
    """kserve.json: responses, requests and invalid bodies of testdata/cases/kserve.toml."""
    out = []
    for c in spec["response"]:
        body, headers = _response_body(c)
        case = {"id": f"kserve.response.{c['name']}", "format": "kserve", "headers": headers,
                "byte_exact": False, "encoded_hex": body.hex(),
                "outputs": [_expected_output(o) for o in c["outputs"]]}
        for key in ("model_name", "model_version"):
            if key in c:
                case[key] = c[key]
        if "id" in c:  # the response's id ("id" is the case's)
            case["response_id"] = c["id"]
        out.append(case)
    for c in spec["request"]:
        if "raw_hex" in c:
            body, headers = bytes.fromhex(c["raw_hex"]), {"Content-Type": "application/octet-stream", HEADER: "0"}
        else:
            header = c["header"].encode()
            blobs = [bytes.fromhex(b) for b in c.get("blobs_hex", [])]
            sizes = _declared_sizes(header, "inputs")
            assert sizes == [len(b) for b in blobs], f"kserve.request.{c['name']}: blobs {[len(b) for b in blobs]}, declared {sizes}"
            body = header + b"".join(blobs)
            headers = ({"Content-Type": "application/octet-stream", HEADER: str(len(header))} if blobs
                       else {"Content-Type": "application/json"})
        case = {"id": f"kserve.request.{c['name']}", "format": "kserve_request", "headers": headers,
                "input_hex": body.hex(), "texts": c["texts"], "binary_output": c["binary_output"],
                "datatype": c["datatype"]}
        if "id" in c:
            case["request_id"] = c["id"]
        out.append(case)
    out += [_invalid(c, "kserve") for c in spec["invalid"]]
    out += [_invalid(c, "kserve_request") for c in spec["invalid_request"]]
    ids = [c["id"] for c in out]
    assert len(ids) == len(set(ids)), "duplicate kserve case ids"
    return out
