"""Reference encoders for ragged and sparse tensors (SPEC.md section 20), used by generate.py to expand
testdata/cases/ragged.toml and sparse.toml into testdata/golden/ragged.json and sparse.json.

Naive on purpose, like generate.py: lists of hex items laid out with struct, hand-rolled MessagePack and
Protobuf writers (generate.py's), Arrow streams from pyarrow (decode-only, SPEC.md 20.7). Each
hand-written case's offsets are checked against its items (and, for sparse, its indices against the
rules of 20.2), so that a wrong valid case fails here rather than in six runners.
"""

from __future__ import annotations

import base64
import json
import struct

from generate import (DTYPES, decimal_of, item_width, items_to_bytes, json_number, mp_map, pb_field, row_bytes)

SPARSE_DTYPES = ("float32", "float16", "bfloat16", "float64")


def u32s(values: list[int], byteorder: str = "little") -> bytes:
    return struct.pack(("<" if byteorder == "little" else ">") + "%dI" % len(values), *values)


def pad8(b: bytes) -> bytes:
    return b + b"\0" * (-len(b) % 8)


def row_items(dtype: str, d: int) -> int:
    """Hex items per row (packed bytes for binary)."""
    return row_bytes(dtype, d) // item_width(dtype)


# ------------------------------------------------------------------------------ bodies
def raw_body(kind: str, offsets: bytes, data: bytes, indices: bytes | None = None) -> bytes:
    """20.4: the parts back to back, each but the last padded to 8 bytes."""
    return pad8(offsets) + (pad8(indices) if kind == "sparse" else b"") + data


def raw_headers(kind: str, dtype: str, shape: list[int], model=None, pt=None, tt=None) -> dict:
    h = {"Densewire-Version": "1", "Densewire-Kind": kind, "Densewire-Dtype": dtype,
         "Densewire-Shape": f"{shape[0]},{shape[1]}", "Densewire-Byteorder": "little"}
    if model is not None:
        h.update({"Densewire-Model": model, "Densewire-Prompt-Tokens": str(pt), "Densewire-Total-Tokens": str(tt)})
    return h


def mp_body(kind: str, dtype: str, shape: list[int], offsets: bytes, data: bytes, indices: bytes | None = None,
            model=None, pt=None, tt=None) -> bytes:
    """20.5: model?, kind, dtype, shape, offsets, indices (sparse), data, usage?"""
    fields = [] if model is None else [("model", "str", model)]
    fields += [("kind", "str", kind), ("dtype", "str", dtype), ("shape", "array", shape), ("offsets", "bin", offsets)]
    if kind == "sparse":
        fields.append(("indices", "bin", indices))
    fields.append(("data", "bin", data))
    if pt is not None:
        fields.append(("usage", "map", [("prompt_tokens", "uint", pt), ("total_tokens", "uint", tt)]))
    return mp_map(fields)


def pb_body(kind: str, dtype: str, shape: list[int], offsets: bytes, data: bytes, indices: bytes | None = None,
            model=None, pt=None, tt=None) -> tuple[str, bytes]:
    """20.6: (message name, bytes) by the proto3 serializer rules: number order, defaults omitted."""
    t = pb_field(1, "varint", DTYPES[dtype][2]) + pb_field(2, "packed", shape)
    t += pb_field(3, "bytes", offsets) if offsets else b""
    if kind == "sparse":
        t += pb_field(4, "bytes", indices) if indices else b""
    t += pb_field(5 if kind == "sparse" else 4, "bytes", data) if data else b""
    prefix = "Sparse" if kind == "sparse" else "Ragged"
    if model is None:
        return f"{prefix}Tensor", t
    usage = (pb_field(1, "varint", pt) if pt else b"") + (pb_field(2, "varint", tt) if tt else b"")
    out = pb_field(1, "bytes", model.encode()) if model else b""
    return f"{prefix}EmbeddingsResponse", out + pb_field(2, "bytes", t) + pb_field(3, "bytes", usage)


def _arrow_item_type(pa, dtype: str, d: int):
    if dtype == "binary":
        return pa.binary(row_bytes(dtype, d))
    inner = {"float32": pa.float32(), "float16": pa.float16(), "bfloat16": pa.uint16(), "float64": pa.float64(),
             "int8": pa.int8(), "uint8": pa.uint8()}[dtype]
    return pa.list_(pa.field("item", inner, nullable=False), d)


def _arrow_values(pa, dtype: str, count: int, data: bytes):
    """``count`` values of a float dtype (bfloat16 as UInt16 bits) over ``data``."""
    inner = {"float32": pa.float32(), "float16": pa.float16(), "bfloat16": pa.uint16(), "float64": pa.float64(),
             "int8": pa.int8(), "uint8": pa.uint8()}[dtype]
    return pa.Array.from_buffers(inner, count, [None, pa.py_buffer(data)])


def arrow_body(kind: str, dtype: str, shape: list[int], offsets: list[int], data: bytes, indices: list[int] | None = None,
               model=None, pt=None, tt=None, metadata: dict | None = None, field_metadata: dict | None = None,
               value_offsets: list[int] | None = None) -> bytes:
    """20.7 by pyarrow; ``metadata``/``field_metadata`` replace values (invalid cases), ``value_offsets`` gives
    the sparse values list other offsets than the indices list (invalid cases)."""
    import pyarrow as pa

    n, d = shape
    meta = {"densewire.version": "1", "densewire.kind": kind, "densewire.dtype": dtype, "densewire.dimensions": str(d)}
    if model is not None:
        meta["densewire.model"] = model
        meta["densewire.prompt_tokens"] = str(pt)
        meta["densewire.total_tokens"] = str(tt)
    meta.update(metadata or {})
    fmeta = {"densewire.dtype": dtype}
    if kind == "ragged":
        item = _arrow_item_type(pa, dtype, d)
        rows = offsets[-1]
        if dtype == "binary":
            values = pa.FixedSizeBinaryArray.from_buffers(item, rows, [None, pa.py_buffer(data)])
        else:
            values = pa.FixedSizeListArray.from_arrays(_arrow_values(pa, dtype, rows * d, data), type=item)
        typ = pa.list_(pa.field("item", item, nullable=False))
        arr = pa.ListArray.from_buffers(typ, n, [None, pa.py_buffer(struct.pack("<%di" % len(offsets), *offsets))],
                                        children=[values])
    else:
        fmeta["densewire.vocabulary_size"] = str(d)
        k = len(indices)
        idx_type = pa.list_(pa.field("item", pa.uint32(), nullable=False))
        val_inner = _arrow_values(pa, dtype, len(data) // DTYPES[dtype][1], data)
        val_type = pa.list_(pa.field("item", val_inner.type, nullable=False))
        idx = pa.ListArray.from_buffers(idx_type, n, [None, pa.py_buffer(struct.pack("<%di" % len(offsets), *offsets))],
                                        children=[pa.array(indices, pa.uint32()) if k else pa.array([], pa.uint32())])
        vo = value_offsets or offsets
        val = pa.ListArray.from_buffers(val_type, n, [None, pa.py_buffer(struct.pack("<%di" % len(vo), *vo))],
                                        children=[val_inner])
        typ = pa.struct([pa.field("indices", idx_type, nullable=False), pa.field("values", val_type, nullable=False)])
        arr = pa.StructArray.from_arrays([idx, val], fields=list(typ))
    fmeta.update(field_metadata or {})
    schema = pa.schema([pa.field("embedding", typ, nullable=False, metadata=fmeta)], metadata=meta)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, schema) as writer:
        writer.write_batch(pa.record_batch([arr], schema=schema))
    return sink.getvalue().to_pybytes()


def json_body(kind: str, dtype: str, shape: list[int], offsets: list[int], items: list[str], encoding_format: str,
              byteorder: str, indices: list[int] | None = None, model=None, pt=None, tt=None) -> str | None:
    """20.3: the canonical text (compact, keys in spec order), or None when a value has no JSON number."""
    n, d = shape
    out = []
    for i in range(n):
        a, b = offsets[i], offsets[i + 1]
        if kind == "ragged":
            w = row_items(dtype, d)
            part = items[a * w:b * w]
            if encoding_format == "base64":
                emb = json.dumps(base64.b64encode(items_to_bytes(dtype, part, byteorder)).decode())
            else:
                rows = []
                for r in range(b - a):
                    nums = [json_number(dtype, h) for h in part[r * w:(r + 1) * w]]
                    if any(x is None for x in nums):
                        return None
                    rows.append("[" + ",".join(nums) + "]")
                emb = "[" + ",".join(rows) + "]"
            out.append('{"object":"embedding","index":%d,"embedding":%s,"shape":[%d,%d]}' % (i, emb, b - a, d))
        else:
            part, idx = items[a:b], indices[a:b]
            if encoding_format == "base64":
                ix = json.dumps(base64.b64encode(u32s(idx, byteorder)).decode())
                vals = json.dumps(base64.b64encode(items_to_bytes(dtype, part, byteorder)).decode())
            else:
                nums = [json_number(dtype, h) for h in part]
                if any(x is None for x in nums):
                    return None
                ix, vals = "[" + ",".join(map(str, idx)) + "]", "[" + ",".join(nums) + "]"
            out.append('{"object":"sparse_embedding","index":%d,"indices":%s,"values":%s,"nnz":%d}' % (
                i, ix, vals, b - a))
    return ('{"object":"list","data":[%s],"model":%s,"usage":{"prompt_tokens":%d,"total_tokens":%d},'
            '"kind":"%s","dtype":"%s","byteorder":"%s","dimensions":%d}') % (
        ",".join(out), json.dumps(model or ""), pt or 0, tt or 0, kind, dtype,
        byteorder if encoding_format == "base64" else "little", d)


# ------------------------------------------------------------------------------ valid cases
def _check(kind: str, c: dict) -> None:
    dtype, (n, d), offsets, items = c["dtype"], c["shape"], c["offsets"], c["items"]
    where = f"{kind}.{c['name']}"
    assert len(offsets) == n + 1 and offsets[0] == 0, where
    assert all(b >= a for a, b in zip(offsets, offsets[1:])), where
    if kind == "ragged":
        assert len(items) == offsets[-1] * row_items(dtype, d), f"{where}: {len(items)} items"
    else:
        assert dtype in SPARSE_DTYPES and 1 <= d <= 1 << 32, where
        idx = c["indices"]
        assert len(idx) == len(items) == offsets[-1], where
        for i in range(n):
            seg = idx[offsets[i]:offsets[i + 1]]
            assert all(0 <= j < d for j in seg) and all(b > a for a, b in zip(seg, seg[1:])), f"{where}: indices"


def expand(kind: str, c: dict) -> list[dict]:
    """The golden cases of one hand-written ragged or sparse tensor, in every format."""
    _check(kind, c)
    dtype, shape, offsets, items = c["dtype"], c["shape"], c["offsets"], c["items"]
    indices = c.get("indices")
    model, pt, tt = c.get("model"), c.get("prompt_tokens"), c.get("total_tokens")
    tag, name = DTYPES[dtype][0], c["name"]
    base = {"kind": kind, "dtype": dtype, "shape": shape, "offsets": offsets}
    if kind == "sparse":
        base["indices"] = indices
    base.update(items=items, decimal=[decimal_of(dtype, h) for h in items])
    if model is not None:
        base.update(model=model, usage={"prompt_tokens": pt, "total_tokens": tt})
    off_b, data = u32s(offsets), items_to_bytes(dtype, items)
    idx_b = u32s(indices) if kind == "sparse" else None
    env = {"model": model, "pt": pt, "tt": tt}
    cases = []

    def add(case_id: str, fmt: str, **kw):
        cases.append({"id": f"{kind}.{case_id}", "format": fmt, **base, **kw})

    add(f"raw.{tag}.{name}", "raw", byteorder="little", byte_exact=True,
        headers=raw_headers(kind, dtype, shape, model, pt, tt), encoded_hex=raw_body(kind, off_b, data, idx_b).hex())
    add(f"msgpack.{tag}.{name}", "msgpack", byteorder="little", byte_exact=True,
        encoded_hex=mp_body(kind, dtype, shape, off_b, data, idx_b, **env).hex())
    message, pb = pb_body(kind, dtype, shape, off_b, data, idx_b, **env)
    add(f"protobuf.{tag}.{name}", "protobuf", byteorder="little", byte_exact=True, message=message, encoded_hex=pb.hex())
    add(f"arrow.{tag}.{name}", "arrow", byteorder="little", byte_exact=False,
        encoded_hex=arrow_body(kind, dtype, shape, offsets, data, indices, **env).hex())
    orders = ["little", "big"] if item_width(dtype) > 1 or kind == "sparse" else ["little"]
    for order in orders:
        otag = tag + ({"little": "le", "big": "be"}[order] if len(orders) > 1 else "")
        add(f"json.base64.{otag}.{name}", "json", byteorder=order, encoding_format="base64", byte_exact=False,
            encoded_text=json_body(kind, dtype, shape, offsets, items, "base64", order, indices, **env))
    text = json_body(kind, dtype, shape, offsets, items, "float", "little", indices, **env)
    if text is not None:
        add(f"json.float.{tag}.{name}", "json", byteorder="little", encoding_format="float", byte_exact=False,
            encoded_text=text)
    return cases


# ------------------------------------------------------------------------------ invalid cases
def _offsets_bytes(c: dict) -> bytes:
    return bytes.fromhex(c["offsets_hex"]) if "offsets_hex" in c else u32s(c.get("offsets", []))


def _indices_bytes(c: dict) -> bytes:
    return bytes.fromhex(c["indices_hex"]) if "indices_hex" in c else u32s(c.get("indices", []))


def invalid(kind: str, c: dict, valid: dict[str, dict]) -> dict:
    """One invalid case: an input built from its parts by the reference encoders, or given whole."""
    fmt = c["format"]
    case = {"id": f"invalid.{kind}.{fmt}.{c['name']}", "direction": "decode", "kind": kind, "format": fmt}
    dtype, shape = c.get("dtype", "float32"), c.get("shape")
    data = bytes.fromhex(c.get("data", ""))
    parts = (_offsets_bytes(c), data, _indices_bytes(c) if kind == "sparse" else None)
    if "text" in c:
        case["input_text"] = c["text"]
    else:
        if "truncate" in c:
            src, length = c["truncate"]
            full = bytes.fromhex(valid[src]["encoded_hex"])
            assert length < len(full), case["id"]
            body = full[:length]
            if fmt == "protobuf":
                case["message"] = valid[src]["message"]
        elif fmt == "raw":
            body = bytes.fromhex(c["body_hex"]) if "body_hex" in c else raw_body(kind, parts[0], data, parts[2])
            case["headers"] = c.get("headers") or raw_headers(kind, dtype, shape)
        elif fmt == "msgpack":
            body = mp_map([tuple(f) for f in c["msgpack"]]) if "msgpack" in c else mp_body(
                kind, dtype, shape, parts[0], data, parts[2])
        elif fmt == "protobuf":
            message, body = pb_body(kind, dtype, shape, parts[0], data, parts[2])
            case["message"] = message
        elif fmt == "arrow" and c.get("tensor_stream"):  # a plain tensor's stream (SPEC.md 10): no kind
            from generate import arrow_stream  # noqa: PLC0415
            body = arrow_stream(dtype, shape, data)
        elif fmt == "arrow":
            body = arrow_body(kind, dtype, shape, c["offsets"], data, c.get("indices"), metadata=c.get("metadata"),
                              field_metadata=c.get("field_metadata"), value_offsets=c.get("value_offsets"))
        else:
            raise SystemExit(f"{case['id']}: no input")
        case["input_hex"] = body.hex()
    case["error"] = c["error"]
    for key in ("offset", "field"):
        if key in c:
            case[key] = c[key]
    return case


def golden(kind: str, spec: dict) -> list[dict]:
    """ragged.json or sparse.json: the valid cases, then the invalid ones."""
    valid = [case for c in spec[kind] for case in expand(kind, c)]
    by_id = {c["id"]: c for c in valid}
    assert len(by_id) == len(valid), f"duplicate {kind} case ids"
    out = valid + [invalid(kind, c, by_id) for c in spec.get("invalid", [])]
    assert len({c["id"] for c in out}) == len(out), f"duplicate invalid {kind} case ids"
    return out
