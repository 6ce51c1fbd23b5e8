"""OpenSearch, Chroma, LanceDB and Milvus: densewire's sinks against each store's usual client path, side by
side in one run, rounds interleaved (every contender once a round, the order rotated), best and median.

Each contender starts from the same Arrow table (ids and a ``FixedSizeList<float32>[d]`` column: what a
Ray or Spark write task holds) and writes it into a fresh index / collection / table of the real store
(started here by the scripts the tests use); the usual way is what the store's docs and Ray's own
datasinks do, building Python lists per row (``to_pylist()`` / ``.tolist()``):

* OpenSearch: ``opensearch-py`` ``helpers.bulk`` of ``to_pylist()`` rows vs :class:`OpenSearchSink`, end to
  end into a lucene HNSW index; and the client side alone: the bulk bodies built (opensearch-py's own
  ``_chunk_actions`` with its serializer vs ``OpenSearchSink.bodies``), nothing sent.
* Chroma: ``chromadb.HttpClient().get_collection(...).upsert(ids, embeddings=lists)`` vs :class:`ChromaSink`
  (one request at a time, its default, and ``concurrency=2``); the ``chroma run`` process's CPU seconds
  per 1,000 rows beside each (the server's log and HNSW work, the same for any client).
* LanceDB: ``table.add()`` of rows with Python lists vs :class:`LanceDBSink` (``merge_insert`` by id of the
  Arrow table as it is).
* Milvus Lite 2.5.1: ``MilvusClient.upsert`` of rows with lists vs :class:`MilvusSink`.

    .venv/bin/python bench/stores/others.py --rows 10000 --dims 384 --rounds 3 --json bench/stores/others.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO / "bench" / "scale"), str(REPO / "python" / "tests")]

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402

import time  # noqa: E402

from common import machine  # noqa: E402
from common import rounds as _rounds  # noqa: E402
from densewire.batch import ChromaSink, LanceDBSink, MilvusSink, OpenSearchSink  # noqa: E402
from store_support import ScriptService  # noqa: E402

_count = itertools.count()


def rounds(label: str, rows: int, runs: dict, n: int) -> dict:
    """common.rounds (wall time, rows/s), with this process's CPU seconds per 1,000 rows beside it: the
    client's own cost, which is what densewire changes (the store's parse and index are the same work)."""
    cpu: dict[str, list[float]] = {k: [] for k in runs}

    def timed(name, fn):
        def run():
            began = time.process_time()
            fn()
            cpu[name].append(time.process_time() - began)
        return run

    measured = _rounds(label, rows, {k: timed(k, f) for k, f in runs.items()}, n)
    for k, v in cpu.items():
        measured[k]["client_cpu_s_per_1k_rows_median"] = sorted(v)[len(v) // 2] / rows * 1000
        measured[k]["client_cpu_s_per_1k_rows_best"] = min(v) / rows * 1000
    return measured


def fresh(prefix: str) -> str:
    return f"{prefix}{next(_count):04d}"


def corpus(rows: int, d: int) -> pa.Table:
    a = np.random.default_rng(7).standard_normal((rows, d)).astype(np.float32)
    return pa.table({"id": pa.array(np.arange(rows)), "emb": pa.FixedSizeListArray.from_arrays(pa.array(a.ravel()), d)})


def ratios(measured: dict, ours: str, theirs: str) -> dict[str, float]:
    """rows/s ours / theirs (best, median), and the client CPU per row ours / theirs (median)."""
    return {"best": measured[ours]["best_rows_per_s"] / measured[theirs]["best_rows_per_s"],
            "median": measured[ours]["median_rows_per_s"] / measured[theirs]["median_rows_per_s"],
            "client_cpu_ours_over_theirs": measured[ours]["client_cpu_s_per_1k_rows_median"]
            / measured[theirs]["client_cpu_s_per_1k_rows_median"]}


def bench_opensearch(table: pa.Table, d: int, n_rounds: int, client_rows: pa.Table) -> dict:
    from opensearchpy import OpenSearch, helpers
    from opensearchpy.helpers.actions import _chunk_actions, expand_action
    from densewire._stores.opensearch import knn_index_body

    node = ScriptService("opensearch.sh").start()
    try:
        client = OpenSearch(node.url, timeout=300)

        def theirs_end_to_end() -> None:
            index = fresh("os_theirs")
            client.indices.create(index=index, body=knn_index_body("emb", d))
            actions = ({"_index": index, "_id": str(r["id"]), "emb": r["emb"]} for r in table.to_pylist())
            helpers.bulk(client, actions, chunk_size=500, refresh=True)

        def ours_end_to_end() -> None:
            index = fresh("os_ours")
            OpenSearchSink(node.url, index=index, field="emb", id_column="id", create_index=True,
                           refresh=True).write(table, block="b0")

        serializer = client.transport.serializer

        def theirs_bodies() -> None:
            actions = ({"_index": "i", "_id": str(r["id"]), "emb": r["emb"]} for r in client_rows.to_pylist())
            for _chunk in _chunk_actions(map(expand_action, actions), 500, 100 * 1024 * 1024, serializer):
                pass

        sink = OpenSearchSink(node.url, index="i", field="emb", id_column="id")

        def ours_bodies() -> None:
            sink.bodies(client_rows, block="b0")

        end = rounds("opensearch", table.num_rows, {"densewire OpenSearchSink": ours_end_to_end,
                                                    "opensearch-py helpers.bulk, to_pylist()": theirs_end_to_end},
                     n_rounds)
        bodies = rounds("opensearch bodies", client_rows.num_rows,
                        {"densewire OpenSearchSink.bodies": ours_bodies,
                         "opensearch-py _chunk_actions, to_pylist()": theirs_bodies}, n_rounds)
        return {"end_to_end": end, "end_to_end_ratio": ratios(end, "densewire OpenSearchSink",
                                                              "opensearch-py helpers.bulk, to_pylist()"),
                "bodies_rows": client_rows.num_rows, "bodies": bodies,
                "bodies_ratio": ratios(bodies, "densewire OpenSearchSink.bodies",
                                       "opensearch-py _chunk_actions, to_pylist()"),
                "index": "lucene hnsw m=16 ef_construction=100, refresh at the end, 1 shard, heap 512m"}
    finally:
        node.stop()


def bench_chroma(table: pa.Table, n_rounds: int) -> dict:
    import chromadb

    server = ScriptService("chroma.sh").start()
    try:
        host, port = server.url.rsplit(":", 1)
        client = chromadb.HttpClient(host=host.split("//")[1], port=int(port))

        def theirs() -> None:
            col = client.create_collection(fresh("chroma-theirs-"))
            ids = [str(i) for i in table.column("id").to_pylist()]
            lists = table.column("emb").to_pylist()
            step = client.get_max_batch_size()
            for lo in range(0, len(ids), step):
                col.upsert(ids=ids[lo:lo + step], embeddings=lists[lo:lo + step])

        def ours(concurrency: int):
            def run() -> None:
                ChromaSink(server.url, collection=fresh("chroma-ours-"), column="emb", id_column="id",
                           create_collection=True, concurrency=concurrency).write(table, block="b0")
            return run

        def server_cpu() -> float:  # the chroma run process's CPU seconds (user + system)
            fields = (Path("/proc") / (server.dir / "pid").read_text().strip() / "stat").read_text().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

        cpu: dict[str, list[float]] = {}

        def with_server_cpu(name, fn):
            def run() -> None:
                began = server_cpu()
                fn()
                cpu.setdefault(name, []).append(server_cpu() - began)
            return run

        theirs_name = "chromadb HttpClient upsert(embeddings=lists)"
        ways = {"densewire ChromaSink": ours(1), "densewire ChromaSink concurrency=2": ours(2), theirs_name: theirs}
        m = rounds("chroma", table.num_rows, {k: with_server_cpu(k, f) for k, f in ways.items()}, n_rounds)
        for k, v in cpu.items():
            m[k]["server_cpu_s_per_1k_rows_median"] = sorted(v)[len(v) // 2] / table.num_rows * 1000
        return {"measured": m, "ratio": ratios(m, "densewire ChromaSink", theirs_name),
                "ratio_concurrency_2": ratios(m, "densewire ChromaSink concurrency=2", theirs_name)}
    finally:
        server.stop()


def bench_lancedb(table: pa.Table, n_rounds: int, folder: Path) -> dict:
    import lancedb

    db = lancedb.connect(str(folder))

    def theirs() -> None:
        t = db.create_table(fresh("theirs"), schema=table.schema)
        t.add([{"id": r["id"], "emb": r["emb"]} for r in table.to_pylist()])

    def ours() -> None:
        LanceDBSink(str(folder), table=fresh("ours"), column="emb", id_column="id", create_table=True).write(
            table, block="b0")

    m = rounds("lancedb", table.num_rows, {"densewire LanceDBSink (merge_insert by id)": ours,
                                           "lancedb table.add(rows of lists)": theirs}, n_rounds)
    return {"measured": m, "ratio": ratios(m, "densewire LanceDBSink (merge_insert by id)",
                                           "lancedb table.add(rows of lists)")}


def bench_milvus(table: pa.Table, d: int, n_rounds: int) -> dict:
    from pymilvus import MilvusClient

    server = ScriptService("milvus.sh").start()
    try:
        client = MilvusClient(server.url)

        def theirs() -> None:
            name = fresh("mv_theirs")
            client.create_collection(name, dimension=d, primary_field_name="id", vector_field_name="emb",
                                     id_type="int", metric_type="L2", auto_id=False)
            rows = [{"id": r["id"], "emb": r["emb"]} for r in table.to_pylist()]
            for lo in range(0, len(rows), 2_000):  # as many rows a request as MilvusSink's max_rows
                client.upsert(name, rows[lo:lo + 2_000])

        def ours() -> None:
            sink = MilvusSink(server.url, collection=fresh("mv_ours"), column="emb", id_column="id",
                              create_collection=True)
            sink.write(table, block="b0")
            sink.close()

        m = rounds("milvus", table.num_rows, {"densewire MilvusSink": ours,
                                              "pymilvus MilvusClient.upsert(rows of lists)": theirs}, n_rounds)
        return {"measured": m, "ratio": ratios(m, "densewire MilvusSink", "pymilvus MilvusClient.upsert(rows of lists)")}
    finally:
        server.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=10_000)
    ap.add_argument("--opensearch-rows", type=int, default=5_000, help="end to end into the HNSW index")
    ap.add_argument("--dims", type=int, default=384)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--stores", default="opensearch,chroma,lancedb,milvus")
    ap.add_argument("--json")
    args = ap.parse_args()
    table = corpus(args.rows, args.dims)
    result: dict = {"command": " ".join([Path(sys.executable).name, *sys.argv]), "rows": args.rows,
                    "dims": args.dims, "machine": machine(("densewire", "numpy", "pyarrow", "orjson", "pybase64",
                                                          "opensearch-py", "chromadb", "lancedb", "pymilvus",
                                                          "milvus-lite"))}
    stores = args.stores.split(",")
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        if "opensearch" in stores:
            result["opensearch"] = bench_opensearch(table.slice(0, args.opensearch_rows), args.dims, args.rounds, table)
        if "chroma" in stores:
            result["chroma"] = bench_chroma(table, args.rounds)
        if "lancedb" in stores:
            result["lancedb"] = bench_lancedb(table, args.rounds, Path(tmp) / "lance")
        if "milvus" in stores:
            result["milvus"] = bench_milvus(table, args.dims, args.rounds)
    result["load_average_at_end"] = os.getloadavg()
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n")


if __name__ == "__main__":
    main()
