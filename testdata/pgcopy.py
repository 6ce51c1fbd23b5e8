"""Reference encoder for PostgreSQL binary COPY streams of pgvector columns (SPEC.md section 16), used by
generate.py to expand testdata/cases/pgcopy.toml into testdata/golden/pgcopy.json.

Naive on purpose, like generate.py: struct over one item at a time, conversions by the exact rounding of
generate.py (section 3), written from the spec text so that the vectorized writers are checked against
something simple.
"""

from __future__ import annotations

import math
import struct
import uuid as uuidlib

from generate import FLOAT_FORMATS, bits_to_value, convert_bits, decimal_of, round_to_format, to_binary_rows

SIGNATURE = b"PGCOPY\n\xff\r\n\x00"
VECTOR_TYPES = {"vector": "float32", "halfvec": "float16", "bit": "binary", "sparsevec": "float32"}
ID_TYPES = ("int8", "int4", "text", "uuid")
MAX_DIMS = {"vector": 16000, "halfvec": 16000, "bit": None, "sparsevec": 1_000_000_000}


class EncodeError(Exception):
    def __init__(self, category: str, field: str) -> None:
        super().__init__(f"{category} on {field}")
        self.category, self.field = category, field


# ------------------------------------------------------------------------------ conversions
def to_float32(dtype: str, h: str) -> str:
    bits = int(h, 16)
    if dtype == "float32":
        return h
    if dtype == "bfloat16":
        return f"{bits << 16:08x}"
    if dtype == "float16":  # exact widening
        value = bits_to_value(bits, *FLOAT_FORMATS["float16"])
        if value is None:
            return f"{(bits >> 15) << 31 | 0x7FC00000:08x}"
        return f"{round_to_format(value, 8, 23):08x}"
    return f"{convert_bits(bits, dtype, 'float32'):08x}"


def to_float16(dtype: str, h: str) -> str:
    if dtype == "float16":
        return h
    if dtype == "bfloat16":
        h, dtype = to_float32(dtype, h), "float32"
    return f"{convert_bits(int(h, 16), dtype, 'float16'):04x}"


def finite(dtype: str, h: str) -> bool:
    value = bits_to_value(int(h, 16), *FLOAT_FORMATS[dtype])
    return value is not None and math.isfinite(value)


def column_rows(pg_type: str, dtype: str, shape: list[int], items: list[str], column: str) -> list[list[str]]:
    """The rows of the vector column as hex items of its dtype (packed bytes for bit), or EncodeError."""
    n, d = shape
    top = MAX_DIMS[pg_type]
    if d < 1 or (top is not None and d > top):
        raise EncodeError("invalid_field", column)
    if pg_type == "bit":
        width = (d + 7) // 8
        if dtype == "binary":
            packed = list(items)
            if d % 8:  # the writer clears the pad bits of each row's last byte
                mask = (0xFF << (8 - d % 8)) & 0xFF
                for r in range(n):
                    k = r * width + width - 1
                    packed[k] = f"{int(packed[k], 16) & mask:02x}"
        else:
            packed = to_binary_rows(dtype, items, shape) if n else []
        return [packed[r * width:(r + 1) * width] for r in range(n)]
    target = VECTOR_TYPES[pg_type]
    convert = to_float16 if target == "float16" else to_float32
    rows = []
    for r in range(n):
        row = [convert(dtype, h) for h in items[r * d:(r + 1) * d]]
        for c, h in enumerate(row):
            if not finite(target, h):
                raise EncodeError("non_finite", f"{column}[{r}][{c}]")
        rows.append(row)
    return rows


# ------------------------------------------------------------------------------ stream
def id_bytes(id_type: str, value: str | None, field: str) -> bytes | None:
    if value is None:
        return None
    if id_type in ("int8", "int4"):
        bits = 64 if id_type == "int8" else 32
        v = int(value)
        if not -(1 << (bits - 1)) <= v < 1 << (bits - 1):
            raise EncodeError("invalid_field", field)
        return v.to_bytes(bits // 8, "big", signed=True)
    if id_type == "uuid":
        return uuidlib.UUID(value).bytes
    return value.encode("utf-8")


def vector_bytes(pg_type: str, d: int, row: list[str]) -> bytes:
    if pg_type == "bit":
        return struct.pack(">i", d) + bytes.fromhex("".join(row))
    if pg_type == "sparsevec":
        nz = [(i, h) for i, h in enumerate(row) if int(h, 16) & 0x7FFFFFFF]  # +0.0 and -0.0 are left out
        return (struct.pack(">iii", d, len(nz), 0) + b"".join(struct.pack(">i", i) for i, _ in nz)
                + b"".join(bytes.fromhex(h) for _, h in nz))
    return struct.pack(">hh", d, 0) + bytes.fromhex("".join(row))


def field(value: bytes | None) -> bytes:
    return struct.pack(">i", -1) if value is None else struct.pack(">i", len(value)) + value


def stream(columns: list[list[str]], shape: list[int], rows: list[list[str]], ids: list[str | None] | None) -> bytes:
    n, d = shape
    (vname, pg_type) = columns[-1]
    out = bytearray(SIGNATURE + struct.pack(">ii", 0, 0))
    for r in range(n):
        out += struct.pack(">h", len(columns))
        if len(columns) == 2:
            out += field(id_bytes(columns[0][1], ids[r], f"{columns[0][0]}[{r}]"))
        out += field(vector_bytes(pg_type, d, rows[r]))
    return bytes(out + struct.pack(">h", -1))


def read_values(pg_type: str, rows: list[list[str]], d: int) -> list[str]:
    """What a reader returns: the rows in the column's dtype, a sparsevec dense with +0.0 between."""
    if pg_type == "sparsevec":
        return [h if int(h, 16) & 0x7FFFFFFF else "00000000" for row in rows for h in row]
    return [h for row in rows for h in row]


# ------------------------------------------------------------------------------ cases
def _ids(c: dict) -> list[str | None] | None:
    if len(c["columns"]) == 1:
        return None
    ids = [str(v) for v in c["ids"]]
    return [None if r in c.get("null_ids", []) else v for r, v in enumerate(ids)]


def _columns(c: dict) -> list[dict]:
    cols = c["columns"]
    assert 1 <= len(cols) <= 2 and cols[-1][1] in VECTOR_TYPES, c["name"]
    assert len(cols) == 1 or cols[0][1] in ID_TYPES, c["name"]
    return [{"name": name, "type": t} for name, t in cols]


def pgcopy_cases(spec: dict) -> list[dict]:
    out = []
    for c in spec["pgcopy"]:
        (vname, pg_type), dtype, shape, items = c["columns"][-1], c["dtype"], c["shape"], c["items"]
        width = (shape[1] + 7) // 8 if dtype == "binary" else shape[1]
        assert len(items) == shape[0] * width, c["name"]
        ids = _ids(c)
        rows = column_rows(pg_type, dtype, shape, items, vname)
        value_dtype = VECTOR_TYPES[pg_type]
        values = read_values(pg_type, rows, shape[1])
        case = {"id": f"pgcopy.{pg_type}.{c['name']}", "format": "pgcopy", "pg_type": pg_type,
                "columns": _columns(c), "dtype": dtype, "shape": shape, "items": items,
                "decimal": [decimal_of(dtype, h) for h in items]}
        if ids is not None:
            case["ids"] = ids
        case.update(value_dtype=value_dtype, values=values, values_decimal=[decimal_of(value_dtype, h) for h in values],
                    byte_exact=True, encoded_hex=stream(c["columns"], shape, rows, ids).hex())
        out.append(case)
    return out


def invalid_pgcopy_cases(spec: dict, valid: dict[str, dict]) -> list[dict]:
    out = []
    for c in spec.get("invalid", []):
        src = valid[c["from"]] if "from" in c else None
        columns = _columns(c) if "columns" in c else src["columns"]
        case = {"id": f"invalid.pgcopy.{c['name']}", "direction": "decode", "format": "pgcopy",
                "pg_type": columns[-1]["type"], "columns": columns}
        body = bytearray(bytes.fromhex(c["body_hex"]) if "body_hex" in c else bytes.fromhex(src["encoded_hex"]))
        for offset, h in c.get("patch", []):
            patch = bytes.fromhex(h)
            assert offset + len(patch) <= len(body), c["name"]
            body[offset:offset + len(patch)] = patch
        if "truncate" in c:
            assert c["truncate"] < len(body), c["name"]
            del body[c["truncate"]:]
        body += bytes.fromhex(c.get("append_hex", ""))
        case.update(input_hex=body.hex(), error=c["error"])
        for key in ("offset", "field"):
            if key in c:
                case[key] = c[key]
        out.append(case)
    for c in spec.get("invalid_encode", []):
        (vname, pg_type), dtype, shape, items = c["columns"][-1], c["dtype"], c["shape"], c["items"]
        ids = _ids(c)
        try:
            rows = column_rows(pg_type, dtype, shape, items, vname)
            stream(c["columns"], shape, rows, ids)
        except EncodeError as err:
            if (err.category, err.field) != (c["error"], c["field"]):
                raise SystemExit(f"invalid.pgcopy_encode.{c['name']}: hand-written {c['error']} on {c['field']} "
                                 f"but the reference encoder fails with {err.category} on {err.field}") from None
        else:
            raise SystemExit(f"invalid.pgcopy_encode.{c['name']}: the reference encoder does not fail")
        case = {"id": f"invalid.pgcopy_encode.{c['name']}", "direction": "encode", "format": "pgcopy",
                "pg_type": pg_type, "columns": _columns(c), "dtype": dtype, "shape": shape, "items": items,
                "decimal": [decimal_of(dtype, h) for h in items]}
        if ids is not None:
            case["ids"] = ids
        case.update(error=c["error"], field=c["field"])
        out.append(case)
    return out
