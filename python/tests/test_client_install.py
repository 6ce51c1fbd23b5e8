"""`pip install densewire` without extras gives a working client: the package is installed from this
source tree into a fresh virtual environment (dependencies from the package index, through pip's
cache), then its sync, async and tables clients call a real densewire serve, and none of the
server's packages is there."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import venv
from pathlib import Path

from server_support import REPO, ServerProcess

PROBE = textwrap.dedent("""
    import asyncio, importlib.util, sys
    import densewire

    missing = [m for m in ("starlette", "uvicorn", "httpx", "redis", "zstandard", "brotli") if importlib.util.find_spec(m)]
    assert not missing, f"server extras installed without being asked for: {missing}"
    url = sys.argv[1]
    with densewire.Client(url) as client:
        vectors = client.embed(["installed", "client"])
    assert vectors.shape == (2, 24), vectors.shape

    async def go():
        async with densewire.AsyncClient(url) as client:
            return await client.embed_many(["a", "b", "c"], batch_size=2)
    assert asyncio.run(go()).shape == (3, 24)
    with densewire.TablesClient(url) as tables:
        fetched = tables.table("t")  # gzip only: this install has no zstd or brotli
    assert fetched.table.rows == 5 and fetched.format == "protobuf", fetched
    print("client ok", densewire.__file__)
""")


def test_pip_install_without_extras_gives_a_working_client(tmp_path: Path) -> None:
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = env_dir / "bin" / "python"
    install = subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                              str(REPO / "python")], capture_output=True, text=True, timeout=540)
    assert install.returncode == 0, install.stdout + install.stderr
    with ServerProcess("--model", "hash:24", "--no-demo-tables", "--table", "t=demo:rows=5",
                       "--table-compression", "fast") as server:
        probe = subprocess.run([str(python), "-c", PROBE, server.url], capture_output=True, text=True, timeout=120,
                               cwd=tmp_path)
    assert probe.returncode == 0, probe.stdout + probe.stderr
    assert "client ok" in probe.stdout and str(env_dir) in probe.stdout  # the installed copy, not this tree
    assert sys.prefix not in probe.stdout
