"""python/README.md (the package's page on the package index): its Python examples run as written,
the client examples against a real densewire serve, and its `densewire serve` command lines start a
server that answers /health. The `pip install` lines are tested by test_client_install.py."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from server_support import ServerProcess

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()
BLOCKS = re.findall(r"```python\n(.*?)```", README, re.S)
SERVER_BLOCKS = re.findall(r"```python server\n(.*?)```", README, re.S)
SH = "\n".join(re.findall(r"```sh\n(.*?)```", README, re.S))
SERVE_LINES = [line.split("#", 1)[0].strip() for line in SH.splitlines() if line.startswith("densewire serve")]


def test_readme_has_every_kind_of_example() -> None:
    assert len(BLOCKS) >= 4 and len(SERVER_BLOCKS) >= 4 and len(SERVE_LINES) >= 2
    assert "CLIENT_FIGURES" not in README
    for line in filter(None, SH.splitlines()):  # every command is one this file tests, or test_client_install.py
        assert line.startswith(("densewire serve", "pip install")), line


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_python_example_runs(index: int) -> None:
    exec(compile(BLOCKS[index], f"python/README.md python block {index + 1}", "exec"), {})


@pytest.fixture(scope="module")
def server():
    with ServerProcess("--model", "hash:384", "--served-model-name", "sentence-transformers/all-MiniLM-L6-v2",
                       "--no-demo-tables", "--table", "points=demo:rows=1000", "--table-compression", "fast") as s:
        yield s


@pytest.mark.parametrize("index", range(len(SERVER_BLOCKS)))
def test_client_example_runs_against_a_real_server(server, index: int) -> None:
    code = SERVER_BLOCKS[index].replace("http://127.0.0.1:8000", server.url)
    exec(compile(code, f"python/README.md server block {index + 1}", "exec"), {})


@pytest.mark.parametrize("line", SERVE_LINES)
def test_serve_command_lines_start_a_server(line: str) -> None:
    args = shlex.split(line)[2:]
    with ServerProcess(*args, demo_tables="--no-demo-tables" not in args) as s:  # waits for /health 200
        assert s.proc is not None and s.proc.poll() is None
