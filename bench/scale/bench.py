"""Issue 25's measurements T1, T2, T4, T5 in one run, on one two-node Ray cluster on this machine
(``ray.cluster_utils.Cluster``), side by side, rounds interleaved (every contender once a round, in a
rotated order); each figure is the best and the median of its rounds, in absolute rows/s.

    .venv/bin/python bench/scale/bench.py --rows 20000 --rounds 3 --json bench/scale/results.json

T1  densewire.ray.embed(url=...) (raw answers into the Arrow column) vs the same actor pool calling the
    OpenAI SDK with encoding_format="float" (a Python list per row, np.array per row), against two
    ``densewire serve --model hash:1536`` replicas; and the bytes per row each moves on the wire.
T2  densewire.ray.embed(model="minilm") with one actor on one node vs one actor on each of two nodes
    (each actor 1 ONNX thread; see RESULTS.md for what a 2-core machine can show).
T4  densewire.ray.write_pgvector vs a Datasink doing executemany with text vectors, and one doing a
    text COPY of pgvector literals, each into its own table of a real PostgreSQL with pgvector.
T5  the bulk bodies of one table: densewire.batch.EsBulkSink's packed vectors vs to_pylist + JSON lists
    (what Ray's OpenSearch datasink does), bytes and build rate.
(T3, Spark, is bench/scale/spark.py.)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "python" / "tests"))
os.environ.update({"RAY_USAGE_STATS_ENABLED": "0", "RAY_memory_monitor_refresh_ms": "0",
                   "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parent), str(REPO / "python" / "src"),
                                                  os.environ.get("PYTHONPATH", "")])})

import httpx  # noqa: E402
import numpy as np  # noqa: E402
import openai  # noqa: E402
import psycopg  # noqa: E402
import pyarrow as pa  # noqa: E402
import ray  # noqa: E402
from ray.cluster_utils import Cluster  # noqa: E402

import densewire  # noqa: E402
import densewire.ray as dwray  # noqa: E402
from densewire.batch import EsBulkSink  # noqa: E402
from pgvector_support import start_pgvector  # noqa: E402
from server_support import ServerProcess  # noqa: E402

from common import D, machine, rounds, texts  # noqa: E402


# ------------------------------------------------------------------------------------ contenders
class OpenAIFloatEmbed:
    """The hand-written actor a user writes today: the OpenAI SDK, encoding_format="float", a Python list
    per row turned into an np.array per row; requests of ``batch_size`` texts, ``in_flight`` at a time."""

    def __init__(self, urls: list[str], batch_size: int, in_flight: int) -> None:
        self.clients = [openai.OpenAI(base_url=u + "/v1", api_key="none", max_retries=2) for u in urls]
        self.batch_size, self.pool = batch_size, ThreadPoolExecutor(in_flight)
        self.turn = 0

    def _one(self, k: int, texts: list[str]) -> list[np.ndarray]:
        client = self.clients[k % len(self.clients)]
        resp = client.embeddings.create(input=texts, model=f"hash-{D}", encoding_format="float")
        return [np.array(d.embedding, dtype=np.float32) for d in resp.data]

    def __call__(self, batch: pa.Table) -> pa.Table:
        texts = batch.column("text").to_pylist()
        spans = range(0, len(texts), self.batch_size)
        parts = self.pool.map(lambda lo: self._one(lo // self.batch_size, texts[lo:lo + self.batch_size]), spans)
        rows = [v for part in parts for v in part]
        return batch.append_column("embedding", pa.array(rows, type=pa.list_(pa.float32())))


class _TextVectorSink(ray.data.Datasink):
    """A Datasink writing each block's (id, vector) rows with pgvector text literals, as a user writes one."""

    def __init__(self, url: str, table: str) -> None:
        self.url, self.table = url, table

    def write_rows(self, cur: psycopg.Cursor, rows: list[tuple[int, str]]) -> None:
        raise NotImplementedError

    def write(self, blocks, ctx) -> int:
        n = 0
        with psycopg.connect(self.url) as conn, conn.cursor() as cur:
            for block in blocks:
                rows = block.select(["id", "embedding"]).to_pylist()
                self.write_rows(cur, [(r["id"], "[" + ",".join(map(str, r["embedding"])) + "]") for r in rows])
                n += len(rows)
        return n


class ExecutemanySink(_TextVectorSink):
    """INSERT ... VALUES (%s, %s::vector) with executemany."""

    def write_rows(self, cur, rows) -> None:
        cur.executemany(f"INSERT INTO {self.table} (id, embedding) VALUES (%s, %s::vector)", rows)


class TextCopySink(_TextVectorSink):
    """COPY ... FROM STDIN (text), a row at a time."""

    def write_rows(self, cur, rows) -> None:
        with cur.copy(f"COPY {self.table} (id, embedding) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)


def pylist_json_bodies(table: pa.Table, index: str, field: str) -> list[bytes]:
    """What Ray's OpenSearch datasink does: to_pylist, then an action and a source line per row."""
    out = []
    for row in table.select(["id", field]).to_pylist():
        out.append(json.dumps({"index": {"_index": index, "_id": str(row["id"])}}))
        out.append(json.dumps({field: row[field]}))
    return ["\n".join(out).encode() + b"\n"]


# ------------------------------------------------------------------------------------------ runs
def corpus(n: int, rows_per_block: int) -> "ray.data.Dataset":
    t = pa.table({"id": pa.array(np.arange(n)), "text": texts(n)})
    return ray.data.from_arrow([t.slice(i, rows_per_block) for i in range(0, n, rows_per_block)])


def wire_bytes(url: str, n: int = 256) -> dict[str, float]:
    """Response bytes per row for one request of n texts: densewire's default Accept (raw) vs JSON floats."""
    body = {"input": texts(n), "model": f"hash-{D}"}
    raw = httpx.post(url + "/v1/embeddings", json=body, headers={"Accept": densewire.DEFAULT_ACCEPT}, timeout=60)
    flt = httpx.post(url + "/v1/embeddings", json={**body, "encoding_format": "float"}, timeout=60)
    return {"densewire_bytes_per_row": len(raw.content) / n, "densewire_content_type": raw.headers["content-type"],
            "openai_float_bytes_per_row": len(flt.content) / n}


def t1(urls: list[str], rows: int, n_rounds: int, actors: int) -> dict[str, Any]:
    bs, inflight = 256, 4
    def ds_dw():
        return dwray.embed(corpus(rows, 2048), url=urls, batch_size=bs, max_in_flight=inflight,
                           concurrency=actors).materialize()

    def ds_oa():
        return corpus(rows, 2048).map_batches(
            OpenAIFloatEmbed, fn_constructor_kwargs={"urls": urls, "batch_size": bs, "in_flight": inflight},
            batch_size=bs * inflight, batch_format="pyarrow", compute=ray.data.ActorPoolStrategy(size=actors),
            num_cpus=1).materialize()

    runs = {"densewire embed(url=) raw": ds_dw, "OpenAI SDK encoding_format=float": ds_oa}
    measured = rounds("T1", rows, runs, n_rounds)
    return {"rows": rows, "d": D, "actors": actors, "batch_size": bs, "in_flight": inflight,
            **measured, **wire_bytes(urls[0])}


def t2(rows: int, n_rounds: int) -> dict[str, Any]:
    def run(actors: int):
        return lambda: dwray.embed(corpus(rows, 256), model="minilm", concurrency=actors, num_cpus=2, threads=1,
                                   batch_size=64).materialize()

    runs = {"1 node (1 actor)": run(1), "2 nodes (1 actor each)": run(2)}
    measured = rounds("T2", rows, runs, n_rounds)
    return {"rows": rows, **measured}


def t4(pg_url: str, rows: int, n_rounds: int) -> dict[str, Any]:
    rng = np.random.default_rng(4)
    vectors = rng.standard_normal((rows, D)).astype(np.float32)
    column = pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), D)
    table = pa.table({"id": pa.array(np.arange(rows)), "embedding": column})
    ds = ray.data.from_arrow([table.slice(i, 1000) for i in range(0, rows, 1000)]).materialize()

    def fresh(name: str) -> str:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(f"DROP TABLE IF EXISTS {name}")
            conn.execute(f"CREATE TABLE {name} (id bigint PRIMARY KEY, embedding vector({D}))")
        return name

    runs = {
        "densewire write_pgvector (binary COPY, staged, ON CONFLICT)":
            lambda: dwray.write_pgvector(ds, pg_url, table=fresh("t4_dw"), column="embedding", id_column="id"),
        "executemany, text vectors": lambda: ds.write_datasink(ExecutemanySink(pg_url, fresh("t4_em"))),
        "text COPY of pgvector literals": lambda: ds.write_datasink(TextCopySink(pg_url, fresh("t4_tc"))),
    }
    measured = rounds("T4", rows, runs, n_rounds)
    return {"rows": rows, "d": D, **measured}


def t5(rows: int, n_rounds: int) -> dict[str, Any]:
    rng = np.random.default_rng(5)
    vectors = rng.standard_normal((rows, D)).astype(np.float32)
    table = pa.table({"id": pa.array(np.arange(rows)),
                      "embedding": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), D)})
    sink = EsBulkSink("/tmp/unused", index="docs", field="embedding", id_column="id")
    runs = {"densewire packed (EsBulkSink)": lambda: sink.bodies(table, block="b"),
            "to_pylist + JSON lists": lambda: pylist_json_bodies(table, "docs", "embedding")}
    sizes = {k: sum(map(len, fn())) for k, fn in runs.items()}
    measured = rounds("T5", rows, runs, n_rounds, quiet=True)
    return {"rows": rows, "d": D, **{k: {**v, "bytes_per_row": sizes[k] / rows} for k, v in measured.items()}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=100_000, help="rows of T1, T4 and T5")
    ap.add_argument("--t5-rows", type=int, default=20_000, help="rows of T5 (its JSON contender is slow)")
    ap.add_argument("--minilm-rows", type=int, default=2000, help="rows of T2")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", default="T1,T2,T4,T5")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    only = set(args.only.split(","))
    result: dict[str, Any] = {"machine": machine(("ray", "pyarrow", "numpy", "psycopg", "openai", "onnxruntime")),
                              "command": " ".join([Path(sys.executable).name, *sys.argv])}
    print(result["machine"], flush=True)
    if "T5" in only:
        result["T5"] = t5(args.t5_rows, args.rounds)
        print("T5", result["T5"], flush=True)
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 2, "object_store_memory": 1 << 30,
                                                            "include_dashboard": False})
    cluster.add_node(num_cpus=2, object_store_memory=1 << 30)
    servers = [ServerProcess("--model", f"hash:{D}") for _ in range(2)]
    pg = start_pgvector() if "T4" in only else None
    try:
        ray.init(address=cluster.address, logging_level="WARNING", log_to_driver=False)
        ray.data.DataContext.get_current().enable_progress_bars = False
        if "T1" in only:
            for s in servers:
                s.start()
            result["T1"] = t1([s.url for s in servers], args.rows, args.rounds, actors=2)
            print("T1", result["T1"], flush=True)
            for s in servers:
                s.stop()
        if "T2" in only:
            result["T2"] = t2(args.minilm_rows, args.rounds)
            print("T2", result["T2"], flush=True)
        if "T4" in only and pg is not None:
            result["T4"] = t4(pg.url, args.rows, args.rounds)
            print("T4", result["T4"], flush=True)
    finally:
        for s in servers:
            s.stop()
        if pg is not None:
            pg.stop()
        ray.shutdown()
        cluster.shutdown()
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
