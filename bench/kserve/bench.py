#!/usr/bin/env python3
"""KServe v2 (SPEC.md 19) against densewire's own raw body: 1,000 x 1,536 float32 from one ``densewire
serve --model hash:1536``, side by side in one run, rounds interleaved (issue 33, item 6).

    .venv/bin/python bench/kserve/bench.py                 # writes bench/kserve/results.json
    .venv/bin/python bench/kserve/bench.py --rounds 5      # a smoke run

Contenders (HTTP/1.1 on loopback, one request at a time, the same 1,000 texts each request):

* ``kserve_json``: ``tritonclient.http`` with ``binary_data=False`` for the input and the output (JSON
  tensors both ways), ``result.as_numpy("embedding")``;
* ``kserve_binary``: ``tritonclient.http`` with the binary tensor extension both ways, ``as_numpy``;
* ``kserve_binary_densewire``: the same binary-extension request by httpx, read by
  ``densewire.decode_kserve`` (a zero-copy view);
* ``v1_raw``: ``POST /v1/embeddings`` with ``Accept: application/octet-stream`` by httpx, read by
  ``densewire.decode_raw``; ``v1_raw_gevent``: the same by geventhttpclient, the HTTP client under
  ``tritonclient.http`` (so that the client library's share of end-to-end time shows).
* gRPC raw contents (``tritonclient.grpc``, ``raw_output_contents``): ``grpc_bench.py`` beside this
  file (the ``grpc`` branch), RESULTS-grpc.md.

Two figures: **client decode rate** (rows/s of turning one captured response body into a numpy array,
exactly what each client does after the bytes arrived: tritonclient's ``InferResult`` +
``as_numpy``, or densewire's decoder), and **end-to-end rows/s** (request to numpy array, the server's
encoding and the transfer included). The server caches the vectors after the first request, so the
model's time is out of both figures: they compare the protocols.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np
import tritonclient.http as triton
from geventhttpclient import HTTPClient

import densewire

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO / "bench" / "scale"))
from common import D, machine, rounds, texts  # noqa: E402  (bench/scale/common.py: corpus, rounds, machine)

N = 1000
MODEL = "hash-1536"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(port: int) -> subprocess.Popen:
    log = open(Path(tempfile.gettempdir()) / f"dw-kserve-bench-{port}.log", "wb")
    env = {**os.environ, "PYTHONPATH": str(REPO / "python" / "src"), "DENSEWIRE_DEMO_TABLES": "false"}
    proc = subprocess.Popen([sys.executable, "-m", "densewire.server", "--host", "127.0.0.1", "--port", str(port),
                             "--model", f"hash:{D}", "--max-body-bytes", "256M", "--request-timeout", "600"],
                            stdout=log, stderr=subprocess.STDOUT, env=env)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.2)
    proc.kill()
    raise SystemExit("the server did not start")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--decode-rounds", type=int, default=30)
    ap.add_argument("--out", default=str(HERE / "results.json"))
    args = ap.parse_args()
    described = machine(("densewire", "numpy", "orjson", "tritonclient", "geventhttpclient", "httpx",
                         "python-rapidjson", "uvicorn", "starlette"))  # the load when the run began
    port = free_port()
    server = start_server(port)
    url = f"http://127.0.0.1:{port}"
    corpus = texts(N)
    try:
        triton_client = triton.InferenceServerClient(f"127.0.0.1:{port}", connection_timeout=600, network_timeout=600)
        http = httpx.Client(timeout=600)

        def tc_infer(binary: bool):
            inp = triton.InferInput("text", [N], "BYTES")
            inp.set_data_from_numpy(np.array(corpus, dtype=object), binary_data=binary)
            return triton_client.infer(MODEL, [inp], outputs=[triton.InferRequestedOutput("embedding", binary_data=binary)])

        binary_header = json.dumps({"inputs": [{"name": "text", "shape": [N], "datatype": "BYTES", "data": corpus}],
                                    "outputs": [{"name": "embedding", "parameters": {"binary_data": True}}]}).encode()

        def kserve_binary_densewire() -> np.ndarray:
            r = http.post(url + f"/v2/models/{MODEL}/infer", content=binary_header,
                          headers={"Content-Type": "application/json"})
            r.raise_for_status()
            return densewire.decode_kserve(r.content, r.headers).outputs["embedding"].tensor.array

        def v1_raw() -> np.ndarray:
            r = http.post(url + "/v1/embeddings", json={"input": corpus, "model": MODEL},
                          headers={"Accept": "application/octet-stream"})
            r.raise_for_status()
            return densewire.decode_raw(r.content, r.headers).tensor.array

        gevent = HTTPClient("127.0.0.1", port, connection_timeout=600, network_timeout=600)
        v1_body = json.dumps({"input": corpus, "model": MODEL}).encode()

        def v1_raw_gevent() -> np.ndarray:
            r = gevent.post("/v1/embeddings", body=v1_body,
                            headers={"Content-Type": "application/json", "Accept": "application/octet-stream"})
            body = r.read()
            assert r.status_code == 200, body[:200]
            return densewire.decode_raw(body, {k: v for k, v in r.items()}).tensor.array

        contenders = {
            "kserve_json": lambda: tc_infer(False).as_numpy("embedding"),
            "kserve_binary": lambda: tc_infer(True).as_numpy("embedding"),
            "kserve_binary_densewire": kserve_binary_densewire,
            "v1_raw": v1_raw,
            "v1_raw_gevent": v1_raw_gevent,
        }
        reference = v1_raw()  # also fills the server's cache
        for name, run in contenders.items():
            got = run()
            assert got.shape == (N, D) and got.tobytes() == reference.tobytes(), f"{name} differs from /v1/embeddings"

        # the captured bodies each client decodes
        def capture(binary: bool) -> tuple[bytes, dict[str, str]]:
            doc = {"inputs": [{"name": "text", "shape": [N], "datatype": "BYTES", "data": corpus}],
                   "outputs": [{"name": "embedding", "parameters": {"binary_data": binary}}]}
            r = http.post(url + f"/v2/models/{MODEL}/infer", json=doc)
            r.raise_for_status()
            return r.content, dict(r.headers)
        json_body, _ = capture(False)
        bin_body, bin_headers = capture(True)
        raw = http.post(url + "/v1/embeddings", json={"input": corpus}, headers={"Accept": "application/octet-stream"})
        length = int(bin_headers["inference-header-content-length"])
        decoders = {
            "kserve_json": lambda: triton.InferResult.from_response_body(json_body).as_numpy("embedding"),
            "kserve_binary": lambda: triton.InferResult.from_response_body(bin_body, header_length=length)
            .as_numpy("embedding"),
            "kserve_binary_densewire": lambda: densewire.decode_kserve(bin_body, bin_headers)
            .outputs["embedding"].tensor.array,
            "v1_raw": lambda: densewire.decode_raw(raw.content, raw.headers).tensor.array,
        }
        for name, run in decoders.items():
            assert run().tobytes() == reference.tobytes(), f"{name} decodes to other vectors"
        sizes = {"kserve_json": len(json_body), "kserve_binary": len(bin_body),
                 "kserve_binary_densewire": len(bin_body), "v1_raw": len(raw.content),
                 "v1_raw_gevent": len(raw.content)}
        decode = rounds("decode", N, decoders, args.decode_rounds, quiet=True)
        end_to_end = rounds("end-to-end", N, contenders, args.rounds)
        base = decode["kserve_json"]
        out = {
            "command": " ".join([".venv/bin/python", "bench/kserve/bench.py", *sys.argv[1:]]),
            "rows": N, "dimensions": D, "dtype": "float32", "server": f"densewire serve --model hash:{D}",
            "response_bytes": sizes,
            "client_decode": decode,
            "client_decode_vs_kserve_json": {
                k: {"best": v["best_rows_per_s"] / base["best_rows_per_s"],
                    "median": v["median_rows_per_s"] / base["median_rows_per_s"]} for k, v in decode.items()},
            "end_to_end": end_to_end,
            "machine": {**described, "load_average_at_end": os.getloadavg()},
        }
        Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
        for k in contenders:
            d = k if k in decode else "v1_raw"  # the same body and decoder
            print(f"{k:<26} {sizes[k]:>11,} B  decode {decode[d]['median_rows_per_s']:>12,.0f} rows/s "
                  f"({out['client_decode_vs_kserve_json'][d]['median']:>7.1f}x JSON)  end-to-end "
                  f"{end_to_end[k]['median_rows_per_s']:>9,.0f} rows/s median, {end_to_end[k]['best_rows_per_s']:>9,.0f} best")
        triton_client.close()
        http.close()
        gevent.close()
    finally:
        server.terminate()
        server.wait(30)


if __name__ == "__main__":
    main()
