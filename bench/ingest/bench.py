"""Loading pgvector columns, side by side against one PostgreSQL: text COPY of pgvector literals,
pgvector-python with psycopg 3's binary COPY write_row, densewire's binary COPY (each chunk handed to libpq, the default;
and its CopyData messages written on the socket itself, direct=True), and the server-side
limit (COPY FROM a pre-written binary file the server reads itself); then reading the vectors back
into one numpy array with densewire and with pgvector-python's adapter.

    .venv/bin/pip install -r bench/ingest/requirements.txt
    .venv/bin/python bench/ingest/bench.py --n 100000 --d 1536 --rounds 3 --json bench/ingest/results.json

Rounds are interleaved (every method once per round, in a rotated order); each figure is the best and
the median of its rounds. Client CPU is this process's CPU time (getrusage, user and system) during the load;
server CPU is the backend's (utime + stime from /proc/PID/stat, as root or as its user). The PostgreSQL
cluster is a throw-away one (initdb + pg_ctl, fsync off) with pgvector from scripts/services.sh.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import psycopg
from pgvector import HalfVector
from pgvector.psycopg import register_vector

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "python" / "tests"))

from pgvector_support import start_pgvector  # noqa: E402

from densewire import pgvector as dwpg  # noqa: E402

CLK_TCK = os.sysconf("SC_CLK_TCK")


def backend_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


class Meter:
    """Wall time, this process's CPU and the backend's CPU over a block."""

    def __init__(self, pid: int) -> None:
        self.pid = pid

    def __enter__(self) -> "Meter":
        self.w, self.t, self.s = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF), backend_cpu(self.pid)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.wall = time.perf_counter() - self.w
        t = resource.getrusage(resource.RUSAGE_SELF)  # microseconds (os.times counts 10 ms ticks)
        self.client_user = t.ru_utime - self.t.ru_utime  # the client's own work
        self.client = self.client_user + t.ru_stime - self.t.ru_stime  # and the kernel's (socket sends) on its behalf
        self.server = backend_cpu(self.pid) - self.s


# ----------------------------------------------------------------------------------------- loaders
def load_text(conn, table: str, vectors: np.ndarray, ids: np.ndarray, pg_type: str) -> None:
    """Text COPY: one line per row, the pgvector literal '[x,y,...]' (the shortest float32 decimals, which
    orjson prints from the numpy row in C: the fastest text a Python client can make)."""
    with conn.cursor() as cur, cur.copy(f"COPY {table} (id, embedding) FROM STDIN") as copy:
        for lo in range(0, len(vectors), 1000):
            copy.write(b"".join(b"%d\t%s\n" % (i, orjson.dumps(row, option=orjson.OPT_SERIALIZE_NUMPY))
                                for i, row in zip(ids[lo:lo + 1000].tolist(), vectors[lo:lo + 1000])))


def load_pgvector_python(conn, table: str, vectors: np.ndarray, ids: np.ndarray, pg_type: str) -> None:
    """pgvector-python's documented bulk load: binary COPY, write_row with its dumpers."""
    with conn.cursor() as cur, cur.copy(f"COPY {table} (id, embedding) FROM STDIN WITH (FORMAT BINARY)") as copy:
        copy.set_types(["int8", pg_type])
        if pg_type == "halfvec":
            for i, v in zip(ids.tolist(), vectors):
                copy.write_row((i, HalfVector(v)))
        else:
            for i, v in zip(ids.tolist(), vectors):
                copy.write_row((i, v))


def load_densewire(conn, table: str, vectors: np.ndarray, ids: np.ndarray, pg_type: str) -> None:
    """``copy_vectors`` as it is called by default: each chunk handed to libpq in one blocking
    ``PQputCopyData`` (copied into its output buffer, then sent)."""
    dwpg.copy_vectors(conn, table, ("id", "embedding"), vectors, ids, pg_type=pg_type, id_type="int8",
                      progress=False)


def load_densewire_direct(conn, table: str, vectors: np.ndarray, ids: np.ndarray, pg_type: str) -> None:
    """``copy_vectors(direct=True)``: each chunk's CopyData message written on the socket itself,
    gathered from the tuples' parts by ``sendmsg``, without libpq's copy."""
    dwpg.copy_vectors(conn, table, ("id", "embedding"), vectors, ids, pg_type=pg_type, id_type="int8",
                      progress=False, direct=True)


def load_densewire_copy_write(conn, table: str, vectors: np.ndarray, ids: np.ndarray, pg_type: str) -> None:
    """The same stream as densewire's, handed to psycopg's ``copy.write`` 512 rows at a time (how
    ``copy_vectors`` sent it before): what the sending path costs, apart from the encoder."""
    cols = dwpg.CopyColumns(pg_type, "embedding", "int8")
    with conn.cursor() as cur, cur.copy(f"COPY {table} (id, embedding) FROM STDIN (FORMAT BINARY)") as copy:
        for piece in dwpg.iter_copy(vectors, cols, ids, rows_per_chunk=512, reuse_buffer=True):
            copy.write(piece)


def load_server_file(path: str):
    def load(conn, table: str, vectors: np.ndarray, ids: np.ndarray, pg_type: str) -> None:
        conn.execute(f"COPY {table} (id, embedding) FROM '{path}' WITH (FORMAT BINARY)")
    return load


# ----------------------------------------------------------------------------------------- readers
def read_densewire(conn, table: str) -> np.ndarray:
    return dwpg.read_vectors(conn, table, "embedding").tensor.array


def read_pgvector_python(binary: bool):
    def read(conn, table: str) -> np.ndarray:
        with conn.cursor(binary=binary) as cur:
            cur.execute(f"SELECT embedding FROM {table}")
            return np.stack([row[0].to_numpy() for row in cur.fetchall()])
    return read


# ----------------------------------------------------------------------------------------- run
def machine() -> dict[str, Any]:
    lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    model = next((line.split(":", 1)[1].strip() for line in lscpu.splitlines() if line.startswith("Model name")), "?")
    import pgvector as pgvector_python

    return {"cpu": model, "cores": os.cpu_count(), "python": platform.python_version(), "numpy": np.__version__,
            "psycopg": psycopg.__version__, "libpq": psycopg.pq.version(), "pgvector-python": pgvector_python.__version__
            if hasattr(pgvector_python, "__version__") else _dist_version("pgvector"),
            "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE"), "OPENBLAS_L2_SIZE": os.environ.get("OPENBLAS_L2_SIZE")}


def _dist_version(name: str) -> str:
    from importlib.metadata import version

    return version(name)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--d", type=int, default=1536)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--types", nargs="+", default=["vector", "halfvec"])
    ap.add_argument("--json", help="write the measurements here")
    args = ap.parse_args()
    # stopped from the background (kill PID): unwind, so that the cluster is stopped and its files removed
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    info = machine() | {"load_average_start": os.getloadavg(), "n": args.n, "d": args.d, "rounds": args.rounds}
    vectors = np.random.default_rng(0).standard_normal((args.n, args.d)).astype(np.float32)
    ids = np.arange(args.n, dtype=np.int64)
    pg = start_pgvector()
    results: dict[str, list[dict[str, float]]] = {}
    try:
        # the Unix socket in the cluster's folder, as a client on the database host would connect
        conn = psycopg.connect(host=str(pg.tmp), port=pg.port, user="dw", dbname="postgres", autocommit=True)
        register_vector(conn)
        info["postgresql"] = conn.execute("SHOW server_version").fetchone()[0]
        info["pgvector"] = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()[0]
        pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
        files = {}
        for pg_type in args.types:
            conn.execute(f"CREATE TABLE items_{pg_type} (id int8, embedding {pg_type}({args.d}))")
            path = pg.tmp / f"items_{pg_type}.copy"  # in the cluster's folder: readable by the server
            with open(path, "wb") as f:
                for piece in dwpg.iter_copy(vectors, dwpg.CopyColumns(pg_type, "embedding", "int8"), ids):
                    f.write(piece)
            os.chmod(path, 0o644)
            if os.geteuid() == 0:
                os.chown(path, *_postgres_ids())
            files[pg_type] = str(path)
        loaders = {"text COPY (pgvector literals)": load_text, "pgvector-python binary COPY write_row": load_pgvector_python,
                   "densewire binary COPY": load_densewire,
                   "densewire binary COPY on the socket (direct=True)": load_densewire_direct,
                   "densewire stream via psycopg copy.write": load_densewire_copy_write,
                   "server-side COPY FROM file": None}
        readers = {"densewire read_vectors": read_densewire,
                   "pgvector-python adapter (binary)": read_pgvector_python(True),
                   "pgvector-python adapter (text)": read_pgvector_python(False)}
        names = list(loaders)
        for r in range(args.rounds):
            for pg_type in args.types:
                table = f"items_{pg_type}"
                order = names[r % len(names):] + names[:r % len(names)]
                for name in order:
                    load = loaders[name] or load_server_file(files[pg_type])
                    conn.execute(f"TRUNCATE {table}")
                    conn.execute("CHECKPOINT")
                    with Meter(pid) as m:
                        load(conn, table, vectors, ids, pg_type)
                    count = conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
                    assert count == args.n, (name, count)
                    key = f"{pg_type} | {name}"
                    results.setdefault(key, []).append({"wall": m.wall, "client_cpu": m.client, "client_user_cpu": m.client_user,
                                                        "server_cpu": m.server})
                    save(args.json, info, results)
                    print(f"round {r + 1} {key}: {args.n / m.wall:,.0f} rows/s, client CPU {m.client:.2f} s, "
                          f"server CPU {m.server:.2f} s", file=sys.stderr, flush=True)
                if pg_type == "vector":  # the table now holds the last loader's rows: read them back
                    rorder = list(readers)[r % len(readers):] + list(readers)[:r % len(readers)]
                    for name in rorder:
                        with Meter(pid) as m:
                            got = readers[name](conn, table)
                        assert got.shape == (args.n, args.d) and np.array_equal(np.sort(got[:, 0]), np.sort(vectors[:, 0])), name
                        results.setdefault(f"read | {name}", []).append(
                            {"wall": m.wall, "client_cpu": m.client, "client_user_cpu": m.client_user,
                             "server_cpu": m.server})
                        save(args.json, info, results)
                        print(f"round {r + 1} read | {name}: {args.n / m.wall:,.0f} rows/s, client CPU {m.client:.2f} s",
                              file=sys.stderr, flush=True)
        conn.close()
    finally:
        pg.stop()
    info["load_average_end"] = os.getloadavg()
    summary = save(args.json, info, results)
    print(json.dumps({"machine": info, "summary": summary}, indent=1))
    print(table_md(summary, args.n))
    print(ratios_md(summary))
    return 0


def save(path: str | None, info: dict, results: dict) -> dict:
    """The summary (best and median of each figure over the rounds so far), written with every round to
    ``path`` so that an interrupted run keeps what it measured."""
    summary = {k: {f: {"best": min(x[f] for x in v), "median": statistics.median(x[f] for x in v), "rounds": len(v)}
                   for f in ("wall", "client_cpu", "client_user_cpu", "server_cpu")} for k, v in results.items()}
    if path:
        Path(path).write_text(json.dumps({"machine": info, "rounds": results, "summary": summary}, indent=1) + "\n")
    return summary


def _postgres_ids() -> tuple[int, int]:
    import pwd

    p = pwd.getpwnam("postgres")
    return p.pw_uid, p.pw_gid


def table_md(summary: dict, n: int) -> str:
    lines = ["| target | rows/s best | rows/s median | client CPU µs/row: user (median) | user + system (median) | "
             "server CPU µs/row (median) |", "|---|---:|---:|---:|---:|---:|"]
    for key, s in summary.items():
        lines.append(f"| {key} | {n / s['wall']['best']:,.0f} | {n / s['wall']['median']:,.0f} | "
                     f"{1e6 * s['client_user_cpu']['median'] / n:,.1f} | {1e6 * s['client_cpu']['median'] / n:,.1f} | "
                     f"{1e6 * s['server_cpu']['median'] / n:,.1f} |")
    return "\n".join(lines)


def ratios_md(summary: dict) -> str:
    """The issue's targets as ratios of medians (and of bests), per vector type."""
    lines = ["| ratio | median | best |", "|---|---:|---:|"]

    def row(label: str, num: str, den: str, field: str, invert: bool = False) -> None:
        if num in summary and den in summary:
            a, b = summary[num][field], summary[den][field]
            med, best = (b["median"] / a["median"], b["best"] / a["best"]) if invert else \
                (a["median"] / b["median"], a["best"] / b["best"])
            lines.append(f"| {label} | {med:.3f} | {best:.3f} |")

    for t in ("vector", "halfvec"):
        dw = f"{t} | densewire binary COPY"
        row(f"{t}: densewire client CPU / pgvector-python's (user + system)", dw,
            f"{t} | pgvector-python binary COPY write_row", "client_cpu")
        row(f"{t}: densewire client CPU / pgvector-python's (user)", dw,
            f"{t} | pgvector-python binary COPY write_row", "client_user_cpu")
        row(f"{t}: densewire rows/s / server-side COPY FROM file", dw, f"{t} | server-side COPY FROM file", "wall",
            invert=True)
        row(f"{t}: densewire rows/s / text COPY", dw, f"{t} | text COPY (pgvector literals)", "wall", invert=True)
    for other in ("binary", "text"):
        row(f"read: densewire rows/s / pgvector-python adapter ({other} cursor)", "read | densewire read_vectors",
            f"read | pgvector-python adapter ({other})", "wall", invert=True)
        row(f"read: densewire client CPU / pgvector-python adapter's ({other} cursor)", "read | densewire read_vectors",
            f"read | pgvector-python adapter ({other})", "client_cpu")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
