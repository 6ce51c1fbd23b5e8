"""A throw-away PostgreSQL cluster with pgvector 0.8.6 for the pgvector and ingest tests.

The cluster is the one test_server_tables_sources.py starts (initdb + pg_ctl on a free loopback port);
pgvector is built and installed by scripts/services.sh from the vendored source when missing (as root),
and the test fails if that is not possible: nothing is skipped.
"""

from __future__ import annotations

import subprocess

from server_support import REPO
from test_server_tables_sources import PostgresProcess

__all__ = ["ensure_pgvector", "start_pgvector", "PostgresProcess"]


def ensure_pgvector() -> None:
    check = subprocess.run(["bash", str(REPO / "scripts" / "services.sh"), "check"], capture_output=True, text=True)
    if check.returncode == 0:
        return
    proc = subprocess.run(["bash", str(REPO / "scripts" / "services.sh"), "install"], capture_output=True, text=True,
                          timeout=900)
    if proc.returncode != 0:
        raise RuntimeError("PostgreSQL with pgvector is needed and scripts/services.sh could not install it:\n"
                           + check.stderr + proc.stdout + proc.stderr)


def start_pgvector() -> PostgresProcess:
    """A started cluster whose database has the vector extension (stop it with .stop())."""
    ensure_pgvector()
    pg = PostgresProcess().start()
    try:
        pg.execute("CREATE EXTENSION vector")
    except BaseException:
        pg.stop()
        raise
    return pg


def recreate_table(conn, name: str, ddl: str) -> str:
    """``name`` dropped if there and created with the column list ``ddl``; returns ``name``."""
    conn.execute(f"DROP TABLE IF EXISTS {name}")
    conn.execute(f"CREATE TABLE {name} ({ddl})")
    return name
