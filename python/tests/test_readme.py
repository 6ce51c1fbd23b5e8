"""The README's Python examples run, in order, as written; and its two commands are the real ones."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text()
BLOCKS = re.findall(r"```python\n(.*?)```", README, re.S)


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_python_example_runs(index: int) -> None:
    exec(compile(BLOCKS[index], f"README.md python block {index + 1}", "exec"), {})


def test_readme_has_examples() -> None:
    assert len(BLOCKS) >= 2


def test_quick_start_is_two_make_targets_that_exist() -> None:
    quick = README.split("## Quick start", 1)[1].split("##", 1)[0]
    commands = re.findall(r"^make (\w+)", quick, re.M)
    assert commands == ["serve", "test"]
    makefile = (REPO / "Makefile").read_text()
    for target in commands:
        assert re.search(rf"^{target}:", makefile, re.M), target
    assert "make test" in (REPO / ".ci/run").read_text()


def test_cli_inspect_example() -> None:
    out = subprocess.run([sys.executable, "-m", "densewire", "inspect", "--byteorder", "big"], input=b"P4AAAMAgAAA9zMzN",
                         capture_output=True, check=True).stdout.decode()
    assert "shape      1 x 3" in out and "row 0      [1, -2.5, 0.1]" in out


SERVER_BLOCKS = re.findall(r"```python server\n(.*?)```", README, re.S)


def test_server_examples_run_against_a_real_server() -> None:
    """The README's server examples, against densewire serve (hash vectors under the MiniLM name)."""
    from server_support import ServerProcess

    assert SERVER_BLOCKS
    with ServerProcess("--model", "hash:384", "--served-model-name", "sentence-transformers/all-MiniLM-L6-v2") as server:
        for block in SERVER_BLOCKS:
            scope: dict = {}
            exec(compile(block.replace("http://127.0.0.1:8000", server.url), "README.md server block", "exec"), scope)
            assert len(scope["vector"]) == 384
            assert scope["array"].shape == (10_000, 384)


def test_server_curl_examples_work() -> None:
    """The README's curl lines, run by bash against densewire serve."""
    import os
    import shutil

    from server_support import ServerProcess

    section = README.split("## The server", 1)[1].split("\n## ", 1)[0]
    script = re.search(r"```sh\n(.*?)```", section, re.S).group(1)
    assert script.count("curl ") == 2
    bin_dir = str(Path(sys.executable).parent)  # `densewire` of this environment
    with ServerProcess("--model", "hash:384", "--served-model-name", "sentence-transformers/all-MiniLM-L6-v2") as server:
        out = subprocess.run(["bash", "-o", "pipefail", "-ec", script.replace("localhost:8000", f"127.0.0.1:{server.port}")],
                             capture_output=True, text=True, env={**os.environ, "PATH": bin_dir + os.pathsep + os.environ["PATH"]})
    assert shutil.which("curl")
    assert out.returncode == 0, out.stderr + out.stdout
    assert "shape      1 x 384" in out.stdout  # the first line, through densewire inspect
    assert "content-type: application/octet-stream" in out.stdout.lower()
    assert "densewire-dtype: float16" in out.stdout.lower()
