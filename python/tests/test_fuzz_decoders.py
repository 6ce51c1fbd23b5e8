"""Fuzzing of every decoder with hypothesis, seeded from the golden corpus (testdata/golden).

Each target (every format, tables, KServe v2 bodies) mutates the golden bodies of its format (cut short, bits flipped, interesting bytes set,
bytes and JSON/CSV tokens inserted, runs duplicated, two bodies spliced) and checks that the decoder
returns a result or raises a ``DensewireError`` (never another exception, never a hang: 10 s per
input), that the result is bounded by the input (64 bytes per input byte and 64 KiB) and the process
grew by less than 1 GiB over the whole target (no allocation blow-up), and that what decodes encodes
and decodes again to the same bits. ``FUZZ_RUNS`` inputs per target (500 here, derandomized so CI
sees the same inputs: hypothesis spends about 10 ms of its own on each input on a loaded 2-core
machine; the long run of bench/fuzz/RESULTS.md sets more, and ``FUZZ_SEED``).
"""

from __future__ import annotations

import json
import os
import signal
import resource
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

import densewire
from densewire import DensewireError

GOLDEN = Path(__file__).resolve().parents[2] / "testdata" / "golden"
TENSORS = json.loads((GOLDEN / "tensors.json").read_text())["cases"]
TABLES = json.loads((GOLDEN / "tables.json").read_text())["cases"]
RUNS = int(os.environ.get("FUZZ_RUNS", "500"))
SEED = os.environ.get("FUZZ_SEED")

FUZZ = settings(max_examples=RUNS, deadline=None, database=None, derandomize=SEED is None,
                suppress_health_check=list(HealthCheck))


def seeded(test):
    """FUZZ_SEED replays (or varies) a run; without it the inputs are derandomized."""
    return seed(int(SEED))(test) if SEED is not None else test


INTERESTING = [0x00, 0x01, 0x7F, 0x80, 0xFF, 0xFE, 0xC0, 0xC1, 0xD9, 0xDC, 0xDD, 0xDE, 0xDF, 0xCF, 0xD3]
TOKENS = [t.encode() for t in ['"', ",", "[", "]", "{", "}", ":", "-", "0", "1e308", "-0", "1e-400", "null", "true",
                              "NaN", "\\u0000", "\r\n", "\n", "\ufeff", "\\", "9999999999999999999999", "[[[[", "=", "%"]]
POS = st.integers(0, 1 << 20)
MUTATION = st.one_of(
    st.tuples(st.just("truncate"), POS),
    st.tuples(st.just("flip"), POS, st.integers(0, 7)),
    st.tuples(st.just("set"), POS, st.one_of(st.sampled_from(INTERESTING), st.integers(0, 255))),
    st.tuples(st.just("insert"), POS, st.binary(min_size=1, max_size=8)),
    st.tuples(st.just("token"), POS, st.sampled_from(TOKENS)),
    st.tuples(st.just("duplicate"), POS, st.integers(1, 64), POS),
    st.tuples(st.just("splice"), st.integers(0, 1 << 16), POS, POS),
)


def apply(body: bytes, m: tuple, corpus: list[bytes]) -> bytes:
    n = len(body)
    kind, at = m[0], m[1] % (n + 1)
    if kind == "truncate":
        return body[:at]
    if kind in ("flip", "set"):
        if n == 0:
            return body
        out = bytearray(body)
        i = m[1] % n
        out[i] = out[i] ^ (1 << m[2]) if kind == "flip" else m[2]
        return bytes(out)
    if kind in ("insert", "token"):
        return body[:at] + m[2] + body[at:]
    if kind == "duplicate":
        to = m[3] % (n + 1)
        return body[:to] + body[at:at + m[2]] + body[to:]
    other = corpus[m[1] % len(corpus)]
    at = m[2] % (n + 1)
    return body[:at] + other[m[3] % (len(other) + 1):]


def mutated(corpus: list[bytes]):
    """(seed index, mutated bytes): a golden body, mutated 0 to 4 times."""
    def build(args):
        i, ms = args
        body = corpus[i]
        for m in ms:
            body = apply(body, m, corpus)
        return i, body
    return st.tuples(st.integers(0, len(corpus) - 1), st.lists(MUTATION, max_size=4)).map(build)


def body_of(case: dict) -> bytes:
    for key in ("encoded_hex", "input_hex"):
        if key in case:
            return bytes.fromhex(case[key])
    return case.get("encoded_text", case.get("input_text", "")).encode()


def _timeout(signum, frame):
    raise TimeoutError("the decoder ran for more than 10 s")


def _peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


@pytest.fixture(autouse=True)
def _bounded():
    old = signal.signal(signal.SIGALRM, _timeout)
    before = _peak_rss()
    yield
    signal.signal(signal.SIGALRM, old)
    assert _peak_rss() - before < 1 << 30, f"the process grew by {(_peak_rss() - before) >> 20} MiB during the target"


def result_bytes(result) -> int:
    """What a decoded value holds: its arrays' bytes, strings at 16 bytes plus 2 a character."""
    if isinstance(result, densewire.Embeddings):
        t = result.tensor
        if isinstance(t, densewire.SparseVectors):
            return t.values.nbytes + t.indices.nbytes + t.offsets.nbytes
        if isinstance(t, densewire.RaggedTensor):
            return t.values.nbytes + t.offsets.nbytes
        return t.array.nbytes
    if isinstance(result, densewire.KServeResponse):
        return sum(o.tensor.array.nbytes if o.tensor is not None else sum(16 + len(e) for e in o.elements or [])
                   for o in result.outputs.values())
    if isinstance(result, densewire.Table):
        return sum(sum(16 + 2 * len(s) for s in c.values) if c.type == "string" else c.values.nbytes
                   for c in result.columns)
    return 0


def decode_or_typed(data: bytes, decode):
    """The decoder's result, or None when it raised a DensewireError; anything else, a hang or a
    result beyond 64 bytes per input byte plus 64 KiB fails with the input in hex."""
    signal.setitimer(signal.ITIMER_REAL, 10)
    try:
        result = decode()
    except DensewireError:
        return None
    except Exception as e:  # noqa: BLE001 - the finding
        raise AssertionError(f"{type(e).__name__}: {e} on input {data.hex()}") from e
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    size = result_bytes(result)
    assert size <= 64 * len(data) + 65536, f"{len(data)} bytes decoded to {size}: {data.hex()}"
    return result


def same_tensor(a: densewire.Tensor, b: densewire.Tensor, data: bytes) -> None:
    assert (b.dtype, b.shape, bytes(b.to_bytes())) == (a.dtype, a.shape, bytes(a.to_bytes())), \
        f"re-encoded tensor differs, input {data.hex()}"


def _of(fmt: str) -> list[dict]:
    return [c for c in TENSORS if c["format"] == fmt]


def _tensor_target(fmt, decode, encode):
    cases = _of(fmt)
    corpus = [body_of(c) for c in cases]

    @seeded
    @FUZZ
    @given(mutated(corpus))
    def test(inp):
        i, data = inp
        result = decode_or_typed(data, lambda: decode(data, cases[i]))
        if result is not None:
            try:
                again = encode(result, cases[i])
            except Exception as e:  # noqa: BLE001
                raise AssertionError(f"the decoded value does not encode and decode again: {e!r}, input {data.hex()}") from e
            same_tensor(result.tensor, again.tensor, data)
    return test


def _b64_args(c):
    return {"dtype": c["dtype"], "shape": tuple(c["shape"]), "byteorder": c["byteorder"]}


test_fuzz_json = _tensor_target(
    "json", lambda b, c: densewire.decode_json(b),
    lambda e, c: densewire.decode_json(densewire.encode_json(e, encoding_format="base64")))
test_fuzz_base64 = _tensor_target(
    "base64", lambda b, c: densewire.Embeddings(densewire.decode_base64(b, **_b64_args(c))),
    lambda e, c: densewire.Embeddings(densewire.decode_base64(
        densewire.encode_base64(e.tensor, c["byteorder"]), **_b64_args(c))))
test_fuzz_raw = _tensor_target(
    "raw", lambda b, c: densewire.decode_raw(b, c["headers"]),
    lambda e, c: densewire.decode_raw(*densewire.encode_raw(e)))
test_fuzz_msgpack = _tensor_target(
    "msgpack", lambda b, c: densewire.decode_msgpack(b),
    lambda e, c: densewire.decode_msgpack(densewire.encode_msgpack(e)))
test_fuzz_protobuf = _tensor_target(
    "protobuf", lambda b, c: densewire.decode_protobuf(b, c.get("message", "EmbeddingsResponse")),
    lambda e, c: densewire.decode_protobuf(
        densewire.encode_protobuf(e if c.get("message", "EmbeddingsResponse") == "EmbeddingsResponse" else e.tensor),
        c.get("message", "EmbeddingsResponse")))
test_fuzz_arrow = _tensor_target(
    "arrow", lambda b, c: densewire.decode_arrow(b),
    lambda e, c: densewire.decode_arrow(densewire.encode_arrow(e)))


# KServe v2 (SPEC.md 19): the response reader on whole bodies (the case's Inference-Header-Content-Length
# kept) and on mutated JSON headers before the case's blobs (the length recomputed, so that the mutations
# reach the outputs' fields and blob layout); what decodes re-encodes with every output as binary data and
# decodes again to the same tensors and elements. The server's request parser on its golden requests.
_KSERVE = json.loads((GOLDEN / "kserve.json").read_text())["cases"]
_KS_RESPONSES = [c for c in _KSERVE if c["id"].startswith(("kserve.response.", "invalid.kserve."))]
_KS_REQUESTS = [c for c in _KSERVE if c["id"].startswith(("kserve.request.", "invalid.kserve_request."))]
_KS_LENGTH = "Inference-Header-Content-Length"


def _ks_split(c: dict) -> tuple[bytes, bytes]:
    body = body_of(c)
    n = int(c["headers"].get(_KS_LENGTH, len(body))) if c["headers"].get(_KS_LENGTH, "").isdigit() else len(body)
    return body[:n], body[n:]


def _ks_roundtrip(result, data: bytes) -> None:
    outs = [densewire.KServeOutput(o.name, o.datatype, o.shape, o.tensor, o.elements, o.parameters, binary=True)
            for o in result.outputs.values()]
    try:
        again = densewire.decode_kserve(*densewire.encode_kserve(outs, model_name=result.model_name, id=result.id))
    except Exception as e:  # noqa: BLE001
        raise AssertionError(f"the decoded response does not encode and decode again: {e!r}, input {data.hex()}") from e
    assert list(again.outputs) == list(result.outputs), data.hex()
    for name, o in result.outputs.items():
        a = again.outputs[name]
        assert (a.datatype, a.shape, a.elements) == (o.datatype, o.shape, o.elements), data.hex()
        if o.tensor is not None:
            same_tensor(o.tensor, a.tensor, data)


@seeded
@FUZZ
@given(mutated([body_of(c) for c in _KS_RESPONSES]))
def test_fuzz_kserve_response(inp):
    i, data = inp
    result = decode_or_typed(data, lambda: densewire.decode_kserve(data, _KS_RESPONSES[i]["headers"]))
    if result is not None:
        _ks_roundtrip(result, data)


@seeded
@FUZZ
@given(mutated([_ks_split(c)[0] for c in _KS_RESPONSES]))
def test_fuzz_kserve_response_header(inp):
    i, header = inp
    data = header + _ks_split(_KS_RESPONSES[i])[1]
    result = decode_or_typed(data, lambda: densewire.decode_kserve(data, {_KS_LENGTH: str(len(header))}))
    if result is not None:
        _ks_roundtrip(result, data)


@seeded
@FUZZ
@given(mutated([body_of(c) for c in _KS_REQUESTS]))
def test_fuzz_kserve_request(inp):
    from densewire._server.kserve import parse_http_infer

    i, data = inp
    req = decode_or_typed(data, lambda: parse_http_infer(data, _KS_REQUESTS[i]["headers"], max_inputs=64,
                                                         native_dimensions=8))
    if req is not None:
        assert 1 <= len(req.texts) <= 64 and all(req.texts), data.hex()


# the raw headers (Densewire-Dtype, -Shape, -Byteorder, -Version): each value mutated, the body the case's
_RAW = _of("raw")
_RAW_SLOTS = [(i, name) for i, c in enumerate(_RAW) for name in c["headers"]]


@seeded
@FUZZ
@given(mutated([_RAW[i]["headers"][name].encode() for i, name in _RAW_SLOTS]))
def test_fuzz_raw_headers(inp):
    k, value = inp
    i, name = _RAW_SLOTS[k]
    headers = {**_RAW[i]["headers"], name: value.decode("latin-1")}
    decode_or_typed(value, lambda: densewire.decode_raw(body_of(_RAW[i]), headers))


# ---------------------------------------------------------------------------------------- ragged and sparse (SPEC 19)
KINDS = {kind: json.loads((GOLDEN / f"{kind}.json").read_text())["cases"] for kind in ("ragged", "sparse")}


def _kind_cases(kind: str, fmt: str) -> list[dict]:
    """The golden bodies of one kind and format, valid and invalid (protobuf: one message each)."""
    return [c for c in KINDS[kind] if c["format"] == fmt and c.get("message", "").endswith(("Response", ""))]


def _decode_kind(body: bytes, kind: str, fmt: str, case: dict):
    if fmt == "protobuf":
        return densewire.decode_protobuf_kind(body, case.get("message") or f"{kind.capitalize()}EmbeddingsResponse")
    return densewire.decode(body, fmt, case.get("headers"), kind=kind)


def _parts(t) -> tuple:
    rows = (t.values, ) if isinstance(t, densewire.RaggedTensor) else (t.indices, t.values)
    return (type(t).__name__, t.dtype, t.shape, t.offsets.tobytes(), *(r.tobytes() for r in rows))


@pytest.mark.parametrize("kind, fmt", [(k, f) for k in ("ragged", "sparse")
                                       for f in ("json", "raw", "msgpack", "protobuf", "arrow")])
@seeded
@FUZZ
@given(data=st.data())
def test_fuzz_ragged_sparse(kind, fmt, data):
    """Mutated ragged and sparse bodies decode or fail typed; what decodes re-encodes to the same parts."""
    cases = _kind_cases(kind, fmt)
    i, body = data.draw(mutated([body_of(c) for c in cases]))
    result = decode_or_typed(body, lambda: _decode_kind(body, kind, fmt, cases[i]))
    if result is not None:
        if fmt == "protobuf" and not (cases[i].get("message") or "Response").endswith("Response"):
            again = densewire.decode_protobuf_kind(densewire.encode_protobuf_kind(result.tensor), cases[i]["message"])
        else:
            encoded, headers = densewire.encode(result, fmt)
            again = _decode_kind(encoded, kind, fmt, {"headers": headers, "message": cases[i].get("message")})
        assert _parts(again.tensor) == _parts(result.tensor), f"re-encoded {kind} differs, input {body.hex()}"


# ---------------------------------------------------------------------------------------- tables
def _table_cases(fmt: str) -> list[dict]:
    return [c for c in TABLES if c["format"] == fmt]


def _schema(c: dict) -> tuple[str | None, str | None]:
    h = c.get("headers") or {}
    return h.get("Densewire-Columns"), h.get("Densewire-Table")


def _decode_table(body, fmt: str, columns: str | None, name: str | None):
    if fmt in ("json", "csv"):
        return densewire.decode_table(body, fmt, columns=columns, name=name)
    return densewire.decode_table(body, fmt)


@pytest.mark.parametrize("fmt", ["json", "json-rows", "json-columns", "csv", "msgpack", "protobuf", "arrow"])
def test_fuzz_table(fmt):
    cases = _table_cases(fmt)
    corpus = [body_of(c) for c in cases]

    @seeded
    @FUZZ
    @given(mutated(corpus))
    def run(inp):
        i, data = inp
        columns, name = _schema(cases[i])
        table = decode_or_typed(data, lambda: _decode_table(data, fmt, columns, name))
        if table is None:
            return
        try:
            again = _decode_table(densewire.encode_table(table, fmt), fmt, densewire.columns_header(table), table.name)
        except Exception as e:  # noqa: BLE001
            raise AssertionError(f"the decoded table does not encode and decode again: {e!r}, input {data.hex()}") from e
        assert again == table, f"re-encoded table differs, input {data.hex()}"
    run()


# Densewire-Columns and -Table of the CSV and JSON objects layouts, mutated; the body the case's
_SCHEMA_CASES = [c for c in TABLES if c["format"] in ("csv", "json") and c.get("headers")]
_SCHEMA_SLOTS = [(i, h) for i in range(len(_SCHEMA_CASES)) for h in ("Densewire-Columns", "Densewire-Table")]


@seeded
@FUZZ
@given(mutated([_SCHEMA_CASES[i]["headers"][h].encode() for i, h in _SCHEMA_SLOTS]))
def test_fuzz_table_headers(inp):
    k, value = inp
    i, which = _SCHEMA_SLOTS[k]
    c = _SCHEMA_CASES[i]
    columns, name = _schema(c)
    if which == "Densewire-Columns":
        columns = value.decode("latin-1")
    else:
        name = value.decode("latin-1")
    decode_or_typed(value, lambda: _decode_table(body_of(c), c["format"], columns, name))


@seeded
@FUZZ
@given(mutated(sorted({c["headers"]["Densewire-Columns"].encode() for c in TABLES if c.get("headers")})))
def test_fuzz_parse_columns_header(inp):
    _, value = inp
    specs = decode_or_typed(value, lambda: densewire.parse_columns_header(value.decode("latin-1")))
    if specs is not None:
        assert len(specs) <= len(value)
        assert densewire.parse_columns_header(densewire.columns_header(specs)) == specs, value.hex()


# ------------------------------------------------------------------ what the fuzzing found (regressions)
ARROW_BAD_DTYPE_METADATA = bytes.fromhex(  # arrow.*, mutated: field metadata densewire.dtype = b"\x80..."
    "ffffffffa80100001000000000000a000e000600050008000a000000000104001000000000000a000c000000040008000a00"
    "0000a0000000040000000300000068000000380000000400000024ffffff1000000004000000010000003300000014000000"
    "64656e7365776972652e64696d656e73696f6e730000000054ffffff140000000400000007000000806c6f61743332000f00"
    "000064656e7365776972652e64747970650080ffffff100000000400000001000000310000001100000064656e7365776972"
    "652e76657273696f6e00000001000000180000000000120018000800000007000c0000001000140012000000000000101800"
    "000068000000080000001c000000010000007000000009000000656d62656464696e67000000010000000c00000008000c00"
    "0400080008000000140000000400000007000000666c6f61743332000f00000064656e7365776972652e6474797065000000"
    "0600080004000600000003000000100014000800000007000c00000010001000000000000003100000001c00000004000000"
    "00000000040000006974656d0000060008000600060000000000010000000000ffffffffa800000014000000000000000c00"
    "16000600050008000c000c0000000003040018000000180000000000000000000a0018000c00040008000a0000004c000000"
    "1000000002000000000000000000000003000000000000000000000000000000000000000000000000000000000000000000"
    "0000000000000000000018000000000000000000000002000000020000000000000000000000000000000600000000000000"
    "00000000000000000000803f000020c0cdcccc3d000040400000003f000080bfffffffff00000000")
ARROW_BAD_FIELD_NAME = bytes.fromhex(  # table.arrow.*, mutated: a field name starting with 0x80
    "fffffffff00200001000000000000a000e000600050008000a000000000104001000000000000a000c000000040008000a00"
    "00006c0000000400000002000000340000000400000094fdffff140000000400000006000000706f696e747300000f000000"
    "64656e7365776972652e7461626c6500c0fdffff100000000400000001000000310000001100000064656e7365776972652e"
    "76657273696f6e000000040000006c010000e40000007000000004000000b6feffff00000003140000005400000008000000"
    "1800000000000000080000006c6174697475646500000000010000000400000034feffff140000000400000007000000666c"
    "6f61743634000e00000064656e7365776972652e74797065000096ffffff000002001effffff00000003140000005c000000"
    "08000000180000000000000009000000806f6e67697475646500000001000000040000009cfeffff14000000040000000700"
    "0000666c6f61743634000e00000064656e7365776972652e747970650000000006000800060006000000000002008effffff"
    "000000021400000058000000080000001400000000000000060000007374617475730000010000000400000008ffffff1400"
    "00000400000005000000696e7433320000000e00000064656e7365776972652e74797065000008000e000800070008000000"
    "00000001200000000000120018000800000007000c00000010001400120000000000000f14000000d4000000080000001400"
    "0000000000000400000075756964000000000300000080000000400000000400000094ffffff18000000040000000a000000"
    "6172726f772e757569640000140000004152524f573a657874656e73696f6e3a6e616d6500000000ccffffff100000000400"
    "00000000000000000000180000004152524f573a657874656e73696f6e3a6d657461646174610000000008000c0004000800"
    "0800000014000000040000000400000075756964000000000e00000064656e7365776972652e747970650000000006000800"
    "04000600000010000000ffffffff1801000014000000000000000c0016000600050008000c000c0000000003040018000000"
    "700000000000000000000a0018000c00040008000a0000009c00000010000000030000000000000000000000080000000000"
    "0000000000000000000000000000000000000000000030000000000000003000000000000000000000000000000030000000"
    "000000000c000000000000004000000000000000000000000000000040000000000000001800000000000000580000000000"
    "0000000000000000000058000000000000001800000000000000000000000400000003000000000000000000000000000000"
    "0300000000000000000000000000000003000000000000000000000000000000030000000000000000000000000000007c9e"
    "6679742540de944be07fc1f90ae70f8fad5bd9cb469fa16570867728950ee4eaaaf2d14211e1b3e4080027620cdd01000000"
    "0000000001000000000000001c3b8f2d9a7e52c0105839b4c8f60c40b6f3fdd455776140b6d4f1a9b45f4440022b8716d95e"
    "1a40894160e5d0d64140ffffffff00000000")


@pytest.mark.parametrize("body, decode", [
    (b'{"\x80bject":"list","data":[]}', densewire.decode_json),  # msgspec raised UnicodeDecodeError
    (ARROW_BAD_DTYPE_METADATA, densewire.decode_arrow),  # UnicodeDecodeError from metadata .decode()
    (ARROW_BAD_FIELD_NAME, lambda b: densewire.decode_table(b, "arrow")),  # from pyarrow's Field.name
], ids=["json-key-not-utf8", "arrow-metadata-not-utf8", "arrow-table-field-name-not-utf8"])
def test_fuzz_finding_not_utf8_is_malformed(body, decode):
    with pytest.raises(densewire.MalformedError):
        decode(body)


def test_fuzz_finding_json_not_utf8_offset():
    with pytest.raises(densewire.MalformedError) as info:
        densewire.decode_json(b'{"\x80bject":"list","data":[]}')
    assert info.value.offset == 2


def test_fuzz_finding_arrow_counts_must_be_decimal():
    t = densewire.Tensor.from_array(__import__("numpy").zeros((1, 8), "uint8"), "binary", 64)
    import pyarrow as pa
    stream = pa.ipc.open_stream(densewire.encode_arrow(t)).read_all()
    for key, value in ((b"densewire.dimensions", b"6.4e1"), (b"densewire.prompt_tokens", b"many")):
        sink = pa.BufferOutputStream()
        table = stream.replace_schema_metadata({**stream.schema.metadata, key: value})
        with pa.ipc.new_stream(sink, table.schema) as w:
            w.write_table(table)
        with pytest.raises(densewire.InvalidFieldError) as info:
            densewire.decode_arrow(sink.getvalue().to_pybytes())
        assert info.value.field == key.decode()
