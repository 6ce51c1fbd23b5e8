"""The densewire command: inspect detects every format, convert round-trips, bench measures."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import densewire
from densewire import Embeddings, Tensor, Usage
from densewire._cli import main

VALUES = np.array([[0.5, -1.0, 2.0, np.nan], [3.0, 0.0, -0.25, 1.0]], dtype=np.float32)


def run(args: list[str], stdin: bytes = b"") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "densewire", *args], input=stdin, capture_output=True)


@pytest.mark.parametrize("fmt", ["json", "msgpack", "protobuf", "arrow"])
def test_inspect_detects_the_format(fmt: str, tmp_path: Path) -> None:
    body, _ = densewire.encode(Embeddings(Tensor.from_array(VALUES), "m1", Usage(4, 4)), fmt)
    path = tmp_path / "body"
    path.write_bytes(bytes(body))
    out = run(["inspect", str(path)])
    assert out.returncode == 0, out.stderr
    text = out.stdout.decode()
    assert f"format     {fmt}" in text and "shape      2 x 4" in text and "model      m1" in text
    assert "NaN        1" in text and "row 1      [3, 0, -0.25, 1]" in text


def test_inspect_raw_needs_and_uses_the_shape(tmp_path: Path) -> None:
    path = tmp_path / "raw.bin"
    path.write_bytes(VALUES.tobytes())
    assert run(["inspect", str(path), "--format", "raw"]).returncode != 0
    out = run(["inspect", str(path), "--format", "raw", "--shape", "2,4"])
    assert "shape      2 x 4" in out.stdout.decode()


def test_inspect_bad_base64_is_a_clear_error() -> None:
    out = run(["inspect", "--shape", "1,2"], b"AACA*wAAAEA=")
    assert out.returncode == 2
    assert "invalid Base64 character '*' at offset 4" in out.stderr.decode()


@pytest.mark.parametrize("to", ["json", "raw", "msgpack", "protobuf", "arrow", "base64"])
def test_convert_round_trips(to: str, tmp_path: Path) -> None:
    src = tmp_path / "in.msgpack"
    src.write_bytes(densewire.encode_msgpack(Embeddings(Tensor.from_array(VALUES))))
    dst = tmp_path / "out"
    out = run(["convert", str(src), "--to", to, "--to-dtype", "float16", "-o", str(dst)])
    assert out.returncode == 0, out.stderr
    data = dst.read_bytes()
    if to == "base64":
        back = densewire.decode_base64(data.strip(), "float16", (2, 4))
    elif to == "raw":
        assert "Densewire-Shape: 2,4" in out.stderr.decode()
        back = densewire.decode_raw(data, {"Densewire-Dtype": "float16", "Densewire-Shape": "2,4"}).tensor
    else:
        back = densewire.decode(data, to).tensor
    expected = densewire.convert(VALUES, "float16")
    assert back.dtype == "float16" and back.array.tobytes() == expected.array.tobytes()


def test_bench_json_output(tmp_path: Path, capsys) -> None:
    png = tmp_path / "chart.png"
    assert main(["bench", "--n", "20", "--d", "48", "--repeat", "1", "--min-time", "0", "--json", "--quiet",
                 "--plot", str(png)]) == 0
    report = json.loads(capsys.readouterr().out)
    codecs = {r["codec"]: r for r in report["results"]}
    assert set(codecs) == {"json-stdlib", "json-orjson", "json-base64", "raw", "msgpack", "protobuf", "arrow", "pybase64-only"}
    assert codecs["raw"]["size"] == 20 * 48 * 4
    assert all(codecs[c]["zero_copy"] for c in ("raw", "msgpack", "protobuf", "arrow"))
    assert codecs["json-base64"]["size"] < codecs["json-orjson"]["size"] < codecs["json-stdlib"]["size"]
    assert report["machine"]["numpy"] == np.__version__
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bench_shows_progress_on_stderr() -> None:
    out = run(["bench", "--n", "10", "--d", "8", "--repeat", "1", "--min-time", "0", "--codecs", "raw", "msgpack"])
    assert out.returncode == 0
    assert "[1/2] raw: encoding" in out.stderr.decode() and "msgpack" in out.stdout.decode()
