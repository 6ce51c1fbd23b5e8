"""Issue 25's T3: ``densewire.spark.embed(url=...)`` vs the ``pandas_udf`` s users write today, on a
Spark standalone cluster started on this machine (a master and two 1-core workers from pyspark's own
jars, as python/tests starts it), against two ``densewire serve --model hash:1536`` replicas, side by
side, rounds interleaved (every contender once a round, in a rotated order); best and median rows/s.

    .venv/bin/python bench/scale/spark.py --rows 20000 --rounds 3 --json bench/scale/results-spark.json

Contenders, each adding a 1,536-d vector column to the same cached DataFrame of texts and written to
Spark's ``noop`` sink (every row computed and handed to the JVM, nothing stored):

- ``densewire.spark.embed(url=[...])``: ``mapInArrow``, raw float32 answers read into the Arrow column,
  the ``array<float>`` built from offsets over that buffer;
- a ``pandas_udf`` calling the OpenAI SDK with ``encoding_format="float"`` (JSON floats, a Python list
  per row): what a user writes today;
- a ``pandas_udf`` calling densewire's own client (the same raw wire) and building the Series with
  ``.tolist()`` per row: isolates what the lists per row cost.

All three send 256 texts a request, 4 requests in flight a task, over both replicas. Before the rounds,
each contender's vectors for the first rows are checked equal to ``densewire.Client.embed_many``'s.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path[:0] = [str(REPO / "python" / "tests"), str(HERE)]

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402

import densewire  # noqa: E402
import densewire.spark as dwspark  # noqa: E402
from common import D, machine, rounds, texts  # noqa: E402
from server_support import SRC, ServerProcess  # noqa: E402
from spark_contenders import client_tolist_udf, openai_float_udf  # noqa: E402
from spark_support import TESTS, SparkCluster, java_or_fail, spark_session, wait_for_executors  # noqa: E402

BATCH, IN_FLIGHT = 256, 4


def contenders(df: Any, urls: list[str]) -> dict[str, Any]:
    """Each contender's DataFrame: ``df`` with an ``embedding`` column."""
    return {
        "densewire embed(url=) (mapInArrow, raw)":
            dwspark.embed(df, url=urls, batch_size=BATCH, max_in_flight=IN_FLIGHT, dimensions=D),
        "pandas_udf, OpenAI SDK encoding_format=float":
            df.withColumn("embedding", openai_float_udf(urls, f"hash-{D}", BATCH, IN_FLIGHT)("text")),
        "pandas_udf, densewire client raw + .tolist() per row":
            df.withColumn("embedding", client_tolist_udf(urls, BATCH, IN_FLIGHT)("text")),
    }


def check_equal(frames: dict[str, Any], url: str, n: int) -> None:
    """The first ``n`` rows of every contender equal the client's vectors bit for bit."""
    sample = texts(n)
    with densewire.Client(url) as client:
        want = client.embed_many(sample)
    for name, frame in frames.items():
        got = frame.where(f"id < {n}").orderBy("id").toArrow()
        vectors = got.column("embedding").combine_chunks().flatten().to_numpy().reshape(len(got), -1)
        if got.column("text").to_pylist() != sample or not np.array_equal(vectors, want):
            raise AssertionError(f"{name}: its vectors differ from Client.embed_many's")


def java_version() -> str:
    out = subprocess.run([java_or_fail(), "-version"], capture_output=True, text=True).stderr
    return out.splitlines()[0] if out else "?"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=20_000)
    ap.add_argument("--partitions", type=int, default=4, help="of the corpus (2 executors of 1 core run them)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    result: dict[str, Any] = {"machine": {**machine(("pyspark", "pyarrow", "pandas", "numpy", "openai")),
                                          "java": java_version()},
                              "command": " ".join([Path(sys.executable).name, *sys.argv])}
    print(result["machine"], flush=True)
    cluster = SparkCluster(workers=2, worker_memory="2g").start()
    servers = [ServerProcess("--model", f"hash:{D}") for _ in range(2)]
    spark = None
    try:
        for s in servers:
            s.start()
        cluster.wait_ready()
        spark = spark_session(cluster, "densewire-bench-t3", conf={
            "spark.executor.memory": "1g",
            "spark.executorEnv.PYTHONPATH": os.pathsep.join([str(SRC), str(TESTS), str(HERE)])})
        wait_for_executors(spark, 2)
        urls = [s.url for s in servers]
        corpus = pa.table({"id": pa.array(np.arange(args.rows)), "text": texts(args.rows)})
        df = spark.createDataFrame(corpus).repartition(args.partitions, "id").cache()
        assert df.count() == args.rows
        frames = contenders(df, urls)
        check_equal(frames, urls[0], 300)  # also the warm-up: workers started, clients made, caches warm
        runs = {name: (lambda f=frame: f.write.format("noop").mode("overwrite").save()) for name, frame in frames.items()}
        result["T3"] = {"rows": args.rows, "d": D, "partitions": args.partitions, "executors": 2,
                        "batch_size": BATCH, "in_flight": IN_FLIGHT, **rounds("T3", args.rows, runs, args.rounds)}
        result["load_average_at_end"] = os.getloadavg()
        print(json.dumps(result["T3"], indent=1), flush=True)
    finally:
        if spark is not None:
            spark.stop()
        for s in servers:
            s.stop()
        cluster.stop()
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
