"""The ``densewire`` command: inspect, convert, bench, ingest, serve."""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence

import numpy as np

from . import _bench, _formats
from ._base64 import decode_base64, encode_base64
from ._convert import convert
from ._errors import DensewireError
from ._http_input import HttpErrorAnswer, answer_body
from ._ingest import add_ingest_command
from ._server.cli import add_serve_command
from ._tensor import DTYPES, Embeddings, row_bytes

INPUT_FORMATS = ("base64",) + _formats.FORMATS
_JSON_BYTEORDER = re.compile(rb'"byteorder"\s*:\s*"(little|big)"')


def _read(path: str) -> bytes:
    if path == "-":
        return sys.stdin.buffer.read()
    with open(path, "rb") as f:
        return f.read()


def _shape(text: str) -> tuple[int, int]:
    try:
        n, d = (int(x) for x in text.replace("x", ",").split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"shape must be N,D (e.g. 1000,1536), got {text!r}") from None
    return n, d


def _add_input_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("input", nargs="?", default="-", help="file to read, or - for standard input (default)")
    p.add_argument("--format", choices=INPUT_FORMATS, help="input format (detected when omitted; raw needs --dtype and --shape)")
    p.add_argument("--dtype", choices=DTYPES, help="dtype of Base64 or raw input (default float32)")
    p.add_argument("--byteorder", choices=("little", "big"), default="little", help="byte order of Base64 input")
    p.add_argument("--shape", type=_shape, help="N,D of Base64 or raw input (Base64 default: one row, D from the length)")


def detect_input(data: bytes) -> str:
    text = data.strip()
    if not text:
        raise SystemExit("densewire: the input is empty")
    if text[:1] in (b"{", b"["):
        return "json"
    if all(0x20 <= c < 0x7F for c in text):  # printable text that is not JSON: Base64 (the decoder says what is wrong)
        return "base64"
    fmt = _formats.detect_format(data)
    if fmt is None:
        raise SystemExit("densewire: cannot tell the input's format; pass --format (raw bodies also need --dtype and --shape)")
    return fmt


def load_input(args: argparse.Namespace) -> tuple[Embeddings, str, str, str]:
    """(embeddings, format, byte order, note) from the input options; the input is read once. An HTTP
    answer (``curl -i``) is read past its headers; an error answer raises :class:`HttpErrorAnswer`."""
    data, headers = answer_body(_read(args.input))
    if args.format is None and "densewire-dtype" in headers and "densewire-shape" in headers:
        raw_headers = {"Densewire-Dtype": headers["densewire-dtype"], "Densewire-Shape": headers["densewire-shape"]}
        if "densewire-quantization" in headers:
            raw_headers["Densewire-Quantization"] = headers["densewire-quantization"]
        return _formats.decode(data, "raw", raw_headers), "raw", "little", "(dtype and shape from the headers)"
    fmt = args.format or detect_input(data)
    dtype = args.dtype or "float32"
    note = ""
    if fmt == "base64":
        text = data.strip()
        shape = args.shape
        if shape is None:
            nbytes = len(text) // 4 * 3 - text.count(b"=") + {0: 0, 2: 1, 3: 2}.get(len(text) % 4, 0)
            per = row_bytes(dtype, 1) if dtype != "binary" else 1
            d = nbytes // per * (8 if dtype == "binary" else 1)
            shape = (1, d)
            note = f"(one row assumed; d={d} from the length: pass --shape N,D to state it)"
        return Embeddings(decode_base64(text, dtype, shape, args.byteorder)), fmt, args.byteorder, note
    if fmt == "raw":
        if args.shape is None:
            raise SystemExit("densewire: raw input needs --shape N,D (and --dtype, default float32)")
        headers = {"Densewire-Dtype": dtype, "Densewire-Shape": f"{args.shape[0]},{args.shape[1]}"}
        return _formats.decode(data, "raw", headers), fmt, "little", note
    found = _JSON_BYTEORDER.search(data) if fmt == "json" else None  # the byte order of JSON's Base64 rows
    byteorder = found.group(1).decode() if found else "little"
    return _formats.decode(data, fmt), fmt, byteorder, note


def describe(emb: Embeddings, fmt: str, byteorder: str, note: str = "", first: int = 8) -> str:
    t = emb.tensor
    values = t.to_float32()
    lines = [f"format     {fmt}", f"dtype      {t.dtype}", f"byteorder  {byteorder}",
             f"shape      {t.n} x {t.d} {note}".rstrip(), f"bytes      {t.nbytes:,} ({row_bytes(t.dtype, t.d):,} per row)"]
    if emb.model is not None:
        lines.append(f"model      {emb.model}")
    if emb.usage is not None:
        lines.append(f"usage      prompt_tokens={emb.usage.prompt_tokens} total_tokens={emb.usage.total_tokens}")
    if t.dtype in ("int8", "uint8"):
        code = "the int8 item + 128" if t.dtype == "int8" else "the item"
        if emb.quantization is not None:
            lines.append(f"quantized  id {emb.quantization}: codes 0..255 ({code}) of the ranges at "
                         f"GET /v1/quantization/{emb.quantization} (SPEC.md 17)")
        else:
            lines.append("quantized  no quantization id: the ranges of these codes are not named")
    elif t.dtype == "binary":
        lines.append("bits       packed sign bits, MSB first (Cohere/sentence-transformers 'ubinary'; their "
                     "'binary' is each byte - 128)")
    if values.size:
        finite = values[np.isfinite(values)]
        lines.append(f"NaN        {int(np.isnan(values).sum())}    +-Inf {int(np.isinf(values).sum())}")
        if finite.size:
            lines.append(f"values     min {finite.min():.6g}  max {finite.max():.6g}  mean {finite.mean():.6g}")
        norms = np.linalg.norm(np.where(np.isfinite(values), values, 0), axis=1)
        lines.append(f"row norms  min {norms.min():.6g}  mean {norms.mean():.6g}  max {norms.max():.6g}")
        for i in range(min(t.n, 3)):
            row = ", ".join(f"{v:.6g}" for v in values[i, :first])
            lines.append(f"row {i:<6} [{row}{', ...' if t.d > first else ''}]")
        if t.n > 3:
            lines.append(f"           ... {t.n - 3} more rows")
    return "\n".join(lines)


def cmd_inspect(args: argparse.Namespace) -> int:
    emb, fmt, byteorder, note = load_input(args)
    print(describe(emb, fmt, byteorder, note, args.first))
    return 0


def cmd_convert(args: argparse.Namespace) -> int:
    emb, _, _, _ = load_input(args)
    if args.to_dtype:
        emb = Embeddings(convert(emb.tensor, args.to_dtype), emb.model, emb.usage)  # float values: no quantization id
    if args.to == "base64":
        body = encode_base64(emb.tensor, args.to_byteorder).encode() + b"\n"
        headers: dict[str, str] = {}
    else:
        out, headers = _formats.encode(emb, args.to, encoding_format=args.encoding_format, byteorder=args.to_byteorder)
        body = bytes(out)
    if args.output == "-":
        sys.stdout.buffer.write(body)
        sys.stdout.buffer.flush()
    else:
        with open(args.output, "wb") as f:
            f.write(body)
    if args.to == "raw":
        print("\n".join(f"{k}: {v}" for k, v in headers.items() if k.startswith("Densewire-")), file=sys.stderr)
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    show = (lambda msg: print(msg, file=sys.stderr, flush=True)) if not args.quiet else None
    results = _bench.run_bench(args.n, args.d, args.dtype, min_repeat=args.repeat, min_time=args.min_time,
                               codecs=args.codecs, progress=show)
    if args.json:
        print(_bench.to_json(results, args.n, args.d, args.dtype))
    else:
        print(_bench.format_table(results, args.n, args.d, args.dtype))
    if args.plot:
        _bench.plot(results, args.plot, f"densewire bench: {args.n} x {args.d} {args.dtype}")
        print(f"chart written to {args.plot}", file=sys.stderr)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="densewire", description="Embeddings and numeric data at memory speed.")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("inspect", help="show dtype, shape, norms and first values of a Base64 string or a body")
    _add_input_options(p)
    p.add_argument("--first", type=int, default=8, help="values shown per row (default 8)")
    p.set_defaults(func=cmd_inspect)

    p = sub.add_parser("convert", help="convert between formats and dtypes")
    _add_input_options(p)
    p.add_argument("--to", required=True, choices=INPUT_FORMATS, help="output format")
    p.add_argument("--to-dtype", choices=("float32", "float16", "bfloat16", "binary", "float64"), help="convert values first")
    p.add_argument("--encoding-format", choices=("base64", "float"), default="base64", help="JSON output: Base64 rows or numbers")
    p.add_argument("--to-byteorder", choices=("little", "big"), default="little", help="Base64 and JSON output byte order")
    p.add_argument("-o", "--output", default="-", help="output file (default standard output)")
    p.set_defaults(func=cmd_convert)

    p = sub.add_parser("bench", help="size and speed of JSON floats, JSON+Base64, raw, MessagePack, Protobuf and Arrow")
    p.add_argument("--n", type=int, default=1000, help="rows (default 1000)")
    p.add_argument("--d", type=int, default=1536, help="dimensions (default 1536)")
    p.add_argument("--dtype", choices=("float32", "float16", "bfloat16", "binary"), default="float32")
    p.add_argument("--codecs", nargs="+", help="only these codecs")
    p.add_argument("--repeat", type=int, default=5, help="minimum runs per measurement (default 5)")
    p.add_argument("--min-time", type=float, default=0.5, help="minimum seconds per measurement (default 0.5)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--plot", metavar="FILE.png", help="also draw a chart")
    p.add_argument("--quiet", action="store_true", help="no progress on standard error")
    p.set_defaults(func=cmd_bench)

    add_ingest_command(sub, _add_input_options, load_input)
    add_serve_command(sub)  # its handler checks the server extra before anything starts
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args) or 0
    except HttpErrorAnswer as exc:  # the input is a server's error: say it, and fail
        print(f"densewire: {exc}", file=sys.stderr)
        return 1
    except DensewireError as exc:
        print(f"densewire: {exc}", file=sys.stderr)
        return 2
    except (OSError, ImportError) as exc:
        print(f"densewire: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
