"""Seed 003 on a real Elasticsearch 9.5.3 node (scripts/elasticsearch.sh): the same vectors indexed as
packed Base64 vs JSON float arrays, and the client's CPU per row against the official client's way.

    .venv/bin/python bench/stores/es.py --rows 20000 --d 768 --rounds 2 --json bench/stores/es-results.json

Server side (S): for each index type, the bulk bodies of the same ``rows x d`` float32 vectors (seeded) are
built before timing, once with the vectors as big-endian Base64 and once as float arrays (the shortest
float32 decimals); a round creates a fresh index of that type (``l2_norm``), posts the bodies one after
the other, then refreshes; the time from the first POST to the end of the refresh is the figure, in
docs/s. One untimed warm-up load of each format first (the node's JIT). Rounds are interleaved (every
(type, format, workers) once a round, the order rotated each round). The index is made as a bulk loader
makes it (``number_of_replicas: 0``, ``refresh_interval: -1`` until the one ``_refresh`` at the end);
``--workers 1,2`` posts with that many bulk requests in flight (ES indexes one bulk request on one write
thread, so one request at a time leaves the other cores to merges only), ``--body-mb`` sizes the bodies. A type
the node refuses (``bbq_disk`` needs a license the zip does not carry) is recorded with the node's reason.

Client side (C): the client CPU (``time.process_time`` of this process; the node is another process) per
row of writing the same table into the node: ``densewire.batch.EsBulkSink`` (packed Base64) vs
``elasticsearch.helpers.bulk`` with ``pack_dense_vector`` per row, and with float lists (``tolist()``),
each into its own ``flat`` index, rounds interleaved.

``--url`` uses a running node; otherwise one is started (``ES_HEAP``, default 2g here) and stopped.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "python" / "tests"))

import httpx  # noqa: E402
import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
from elasticsearch import Elasticsearch, helpers  # noqa: E402

from densewire._bench import machine_info  # noqa: E402
from densewire._stores._esbulk import bulk_lines  # noqa: E402
from densewire.batch import EsBulkSink  # noqa: E402

INDEX_TYPES = ("flat", "hnsw", "int8_hnsw", "int4_hnsw", "bbq_hnsw", "bbq_flat", "bbq_disk")
FORMATS = ("base64", "floats")
CLIENTS = ("densewire EsBulkSink (packed Base64)", "helpers.bulk + pack_dense_vector", "helpers.bulk + float lists")


def _bodies(vectors: np.ndarray, fmt: str, index: str, rows_per_body: int) -> list[bytes]:
    ids = np.arange(len(vectors))
    return [chunk for chunk in bulk_lines(vectors, index=index, field="v", ids=ids, vector_format=fmt,
                                          rows_per_chunk=rows_per_body)]


#: extra index settings of the server-side loads (``--translog-async``), the same for both formats
LOAD_SETTINGS: dict = {}


def _fresh(c: httpx.Client, index: str, index_type: str, d: int) -> str | None:
    c.delete(f"/{index}?ignore_unavailable=true")
    r = c.put(f"/{index}", json={"settings": {"number_of_replicas": 0, "refresh_interval": "-1", **LOAD_SETTINGS},
                                  "mappings": {"properties": {"v": {"type": "dense_vector", "dims": d,
                                                                     "similarity": "l2_norm",
                                                                     "index_options": {"type": index_type}}}}})
    if r.status_code != 200:
        return r.json()["error"]["reason"]
    return None


def _post(c: httpx.Client, body: bytes) -> str | None:
    r = c.post("/_bulk", content=body, headers={"Content-Type": "application/x-ndjson"})
    answer = r.json()
    if r.status_code != 200 or answer.get("errors"):
        item = next((i for i in answer.get("items", []) if "error" in next(iter(i.values()))), answer)
        return json.dumps(item)[:300]
    return None


def _load(c: httpx.Client, index: str, bodies: list[bytes], workers: int = 1) -> tuple[float, str | None]:
    """Post ``bodies`` (``workers`` bulk requests in flight, each worker its own connection, as a
    production bulk loader does: ES indexes one bulk request on one write thread), then refresh."""
    start = time.perf_counter()
    if workers == 1:
        errors = [_post(c, body) for body in bodies]
    else:
        clients = [httpx.Client(base_url=str(c.base_url), timeout=c.timeout) for _ in range(workers)]
        try:
            with ThreadPoolExecutor(workers) as pool:
                errors = list(pool.map(lambda k: _post(clients[k % workers], bodies[k]), range(len(bodies))))
        finally:
            for w in clients:
                w.close()
    err = next((e for e in errors if e), None)
    if err:
        return 0.0, err
    c.post(f"/{index}/_refresh").raise_for_status()
    return time.perf_counter() - start, None


def server_side(url: str, vectors: np.ndarray, rounds: int, types: tuple[str, ...], workers: tuple[int, ...] = (1,),
                body_mb: float = 8) -> dict:
    n, d = vectors.shape
    rows_per_body = max(1, int((body_mb * (1 << 20)) // (d * 18)))  # bodies of ~body_mb as float arrays (fewer bytes as Base64)
    bodies = {f: _bodies(vectors, f, "bench", rows_per_body) for f in FORMATS}
    sizes = {f: sum(map(len, b)) for f, b in bodies.items()}
    times: dict[tuple[str, str, int], list[float]] = {}
    refused: dict[str, str] = {}
    runs = [(t, f, w) for t in types for f in FORMATS for w in workers]
    with httpx.Client(base_url=url, timeout=3600) as c:
        for f in FORMATS:  # warm-up, untimed: the node's JIT and caches for both parsers
            _fresh(c, "bench", "flat", d)
            _load(c, "bench", bodies[f])
        for r in range(rounds):
            order = runs[r % len(runs):] + runs[:r % len(runs)]
            for t, f, w in order:
                if t in refused:
                    continue
                why = _fresh(c, "bench", t, d)
                took, err = (0.0, why) if why else _load(c, "bench", bodies[f], w)
                if err:
                    refused[t] = err
                    continue
                assert c.get("/bench/_count").json()["count"] == n
                times.setdefault((t, f, w), []).append(took)
                print(f"round {r + 1}: {t:<10} {f:<7} {w} in flight {n / took:>10,.0f} docs/s  load "
                      f"{os.getloadavg()[0]:.1f}", file=sys.stderr, flush=True)
        c.delete("/bench?ignore_unavailable=true")
    out = {"rows": n, "d": d, "body_bytes": sizes, "rows_per_body": rows_per_body, "bulk_requests_in_flight": workers,
           "refused": refused, "types": {}}
    for t, w in ((t, w) for t in types for w in workers):
        if t in refused:
            continue
        b64, fl = times[(t, "base64", w)], times[(t, "floats", w)]
        out["types"][t if workers == (1,) else f"{t} ({w} in flight)"] = {
            "base64_docs_s": {"best": n / min(b64), "median": n / statistics.median(b64)},
            "floats_docs_s": {"best": n / min(fl), "median": n / statistics.median(fl)},
            "ratio": {"best": min(fl) / min(b64), "median": statistics.median(fl) / statistics.median(b64)},
            "seconds": {"base64": b64, "floats": fl}}
    return out


def client_side(url: str, vectors: np.ndarray, rounds: int) -> dict:
    n, d = vectors.shape
    table = pa.table({"id": pa.array(np.arange(n)),
                      "v": pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1)), d)})
    es = Elasticsearch(url, request_timeout=600)

    def dw(index: str) -> None:
        EsBulkSink(url, index=index, field="v", id_column="id").write(table, block="b0")

    def packed(index: str) -> None:
        ids = table.column("id").to_pylist()
        helpers.bulk(es, ({"_index": index, "_id": str(i), "v": helpers.pack_dense_vector(vectors[k])}
                          for k, i in enumerate(ids)), chunk_size=500)

    def floats(index: str) -> None:
        ids = table.column("id").to_pylist()
        helpers.bulk(es, ({"_index": index, "_id": str(i), "v": vectors[k].tolist()} for k, i in enumerate(ids)),
                     chunk_size=500)

    ways = dict(zip(CLIENTS, (dw, packed, floats)))
    cpu: dict[str, list[float]] = {k: [] for k in ways}
    with httpx.Client(base_url=url, timeout=600) as c:
        for r in range(rounds):
            names = list(ways)[r % 3:] + list(ways)[:r % 3]
            for name in names:
                _fresh(c, "client", "flat", d)
                start = time.process_time()
                ways[name]("client")
                cpu[name].append(time.process_time() - start)
                c.post("/client/_refresh")
                assert c.get("/client/_count").json()["count"] == n
                print(f"round {r + 1}: {name:<40} {1e6 * cpu[name][-1] / n:>8.1f} us CPU/row", file=sys.stderr,
                      flush=True)
        c.delete("/client?ignore_unavailable=true")
    base = CLIENTS[1]
    return {"rows": n, "d": d, "cpu_us_per_row": {k: {"best": 1e6 * min(v) / n, "median": 1e6 * statistics.median(v) / n}
                                                  for k, v in cpu.items()},
            "vs_pack_dense_vector": {k: {"best": min(v) / min(cpu[base]),
                                         "median": statistics.median(v) / statistics.median(cpu[base])}
                                     for k, v in cpu.items()}}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=100_000)
    p.add_argument("--d", type=int, default=768)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--types", default=",".join(INDEX_TYPES))
    p.add_argument("--only", default="S,C", help="S (server side), C (client side), or both")
    p.add_argument("--workers", default="1", help="server side: bulk requests in flight, one figure per value "
                                                  "(e.g. 1,2; each on its own connection, both formats alike)")
    p.add_argument("--translog-async", action="store_true", help="index.translog.durability: async (fsync "
                   "every 5 s, not every bulk request), as ES's 'tune for indexing speed' allows for a reloadable load")
    p.add_argument("--body-mb", type=float, default=8, help="server side: MB a bulk body as float arrays (the "
                                                            "same rows a body as Base64)")
    p.add_argument("--url", help="a running node (security off); default: start one")
    p.add_argument("--json")
    args = p.parse_args()
    if args.translog_async:
        LOAD_SETTINGS["translog"] = {"durability": "async"}
    vectors = np.random.default_rng(3).standard_normal((args.rows, args.d)).astype(np.float32)
    node_dir = None
    url = args.url
    if url is None:
        node_dir = tempfile.mkdtemp(prefix="densewire-es-bench.")
        env = dict(os.environ, ES_HEAP=os.environ.get("ES_HEAP", "2g"))
        url = subprocess.run(["bash", str(REPO / "scripts/elasticsearch.sh"), "start", node_dir], env=env,
                             capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]
    try:
        with httpx.Client(base_url=url, timeout=60) as c:
            jvm = next(iter(c.get("/_nodes/_local/jvm").json()["nodes"].values()))["jvm"]
        result = {"machine": machine_info(("densewire", "numpy", "pybase64", "orjson", "elasticsearch")),
                  "node": {"version": "9.5.3", "jvm": f"{jvm['vm_name']} {jvm['version']}",
                           "heap_max_bytes": jvm["mem"]["heap_max_in_bytes"]},
                  "load_average_before": os.getloadavg(), "rounds": args.rounds,
                  "index_settings": {"number_of_replicas": 0, "refresh_interval": "-1", **LOAD_SETTINGS}}
        if "S" in args.only:
            result["server"] = server_side(url, vectors, args.rounds, tuple(args.types.split(",")),
                                           tuple(int(w) for w in args.workers.split(",")), args.body_mb)
        if "C" in args.only:
            result["client"] = client_side(url, vectors, args.rounds)
        result["load_average_after"] = os.getloadavg()
    finally:
        if node_dir:
            subprocess.run(["bash", str(REPO / "scripts/elasticsearch.sh"), "stop", node_dir], capture_output=True)
    text = json.dumps(result, indent=1)
    if args.json:
        Path(args.json).write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
