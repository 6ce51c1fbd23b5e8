"""The README's Python examples run, in order, as written; and its two commands are the real ones."""

from __future__ import annotations

import re
import subprocess
import sys
import time
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


# the blocks that need more than this process (a server, a cluster) are tagged, and run by these tests
TAGGED_RUNNERS = {"server": "test_readme.py", "ray": "test_ray.py", "spark": "test_spark.py", "ray-store": "test_ray.py",
                 "ray-multi": "test_ray_multi.py", "colbert": "test_colbert_server.py"}


def test_every_tagged_python_block_is_run_by_a_test() -> None:
    tags = set(re.findall(r"^```python (\S+)$", README, re.M))
    assert tags, "no tagged blocks found: the pattern is wrong"
    assert tags <= set(TAGGED_RUNNERS), f"README python blocks tagged {sorted(tags - set(TAGGED_RUNNERS))} are run by no test"
    for tag, runner in TAGGED_RUNNERS.items():
        assert f"```python {tag}" in (Path(__file__).parent / runner).read_text(), f"{runner} does not run the {tag} blocks"


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


@pytest.fixture
def tiktoken_cache(tmp_path, monkeypatch) -> None:
    """LangChain's tiktoken reads cl100k_base from a cache filled with densewire's copy (tests run without
    the network); the variable reaches the blocks run in this process and in child interpreters."""
    import hashlib
    import shutil

    from densewire._server.tokenids import CL100K_PATH

    url = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"
    shutil.copy(CL100K_PATH, tmp_path / hashlib.sha1(url.encode()).hexdigest())
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))


def test_server_examples_run_against_a_real_server(tiktoken_cache) -> None:
    """The README's server examples, against densewire serve (hash vectors under the MiniLM name)."""
    from server_support import ServerProcess

    assert SERVER_BLOCKS
    with ServerProcess("--model", "hash:384", "--served-model-name", "sentence-transformers/all-MiniLM-L6-v2") as server:
        for block in SERVER_BLOCKS:
            scope: dict = {}
            exec(compile(block.replace("http://127.0.0.1:8000", server.url), "README.md server block", "exec"), scope)
            if "embed_sparse" in block:  # the sparse block: the hash model answers sparse vectors too
                assert scope["sparse"].vocab_size == 30522
            else:
                assert len(scope["vector"]) == 384
            if "embed_many" in block:  # the densewire client's block; the other servers' clients' asserts run in theirs
                assert scope["array"].shape == (10_000, 384)


def test_server_examples_print_nothing_but_their_output(tiktoken_cache) -> None:
    """Each server block run as a user runs it (a fresh interpreter, clients not closed): nothing on stderr
    (no "Unclosed client session", no warning) and exit code 0. A block with densewire's client runs with
    ResourceWarning shown too (an unclosed socket of ours would print); the other servers' clients
    (cohere, ollama, huggingface_hub leave sockets to the collector) with Python's default filters."""
    from server_support import ServerProcess

    with ServerProcess("--model", "hash:384", "--served-model-name", "sentence-transformers/all-MiniLM-L6-v2") as server:
        for block in SERVER_BLOCKS:
            code = block.replace("http://127.0.0.1:8000", server.url)
            flags = ["-W", "default::ResourceWarning"] if "import densewire" in block else []
            run = subprocess.run([sys.executable, *flags, "-c", code], capture_output=True, text=True, timeout=300)
            assert run.returncode == 0 and run.stderr == "", f"exit {run.returncode}, stderr:\n{run.stderr}"
            assert run.stdout == ""  # the blocks print nothing themselves


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_python_example_prints_nothing_on_stderr(index: int) -> None:
    run = subprocess.run([sys.executable, "-W", "default::ResourceWarning", "-c", BLOCKS[index]], capture_output=True,
                         text=True, timeout=300, cwd=REPO)
    assert run.returncode == 0 and run.stderr == "", f"exit {run.returncode}, stderr:\n{run.stderr}"


SH_BLOCKS = re.findall(r"```sh\n(.*?)```", README.split("## Quick start", 1)[1].split("```sh", 1)[1].split("```", 1)[1], re.S)


def _commands(block: str) -> list[str]:
    """The command lines of a block (a trailing backslash continues a line)."""
    return [c for c in block.replace("\\\n", " ").splitlines() if c.strip() and not c.lstrip().startswith("#")]


COMMANDS = [c for block in SH_BLOCKS for c in _commands(block)]


def _new_shell_env() -> dict[str, str]:
    """A new shell's environment: no virtualenv on the PATH (`densewire` alone is not found)."""
    import os

    path = os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep)
                           if p and not Path(p, "densewire").exists())
    return {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH") and not k.startswith("DENSEWIRE_")} | {
        "PATH": path}


def _clone(tmp: Path) -> Path:
    """The repository root as the README's reader has it after the quick start: .venv and examples/."""
    root = tmp / "clone"
    root.mkdir()
    (root / ".venv").symlink_to(Path(sys.prefix))
    (root / "examples").symlink_to(REPO / "examples")
    return root


def test_readme_shell_lines_are_found() -> None:
    assert len(COMMANDS) >= 8
    assert all(c.startswith((".venv/bin/densewire ", "curl ", "echo ")) for c in COMMANDS), COMMANDS


def _tables_named(command: str, root: Path) -> set[str]:
    import tomllib

    names = set(re.findall(r"--table '?(\w+)=", command))
    config = re.search(r"--tables-config (\S+)", command)
    if config:
        names |= set(tomllib.loads((root / config.group(1)).read_text())["tables"])
    if "--no-demo-tables" not in command:
        names |= {"points", "points_f32"}
    return names


def _run_server_line(command: str, root: Path, env: dict[str, str]) -> None:
    """A `densewire serve` line: it comes up on its own port and serves the tables it names."""
    import httpx

    from server_support import free_port

    port = free_port()
    line = re.sub(r"--port \d+", f"--port {port}", command)
    assert line != command, f"a serve line names its --port (8000 is the quick start's server): {command}"
    log = root / f"serve-{port}.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(["bash", "-c", "exec " + line], cwd=root, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 180
        while True:
            assert proc.poll() is None, f"{command}\nexited:\n{log.read_text()[-3000:]}"
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code in (200,):
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, f"{command}\nnot healthy:\n{log.read_text()[-3000:]}"
            time.sleep(0.2)
        while True:  # every table loaded (its compressions may still be building), none failed
            listing = httpx.get(f"http://127.0.0.1:{port}/v1/tables", timeout=60).json()["data"]
            served = {t["name"]: t for t in listing}
            assert set(served) == _tables_named(command, root), command
            if all(t["status"] != "loading" for t in served.values()) or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        for t in served.values():
            assert t["status"] in ("warming", "ready") and t["rows"] > 0, (command, t)
    finally:
        proc.terminate()
        proc.wait(30)


def test_every_shell_line_runs_as_written_in_a_new_shell(tmp_path: Path) -> None:
    """Each shell line of the README, after the quick start, from the repository root in a new shell:
    `make serve`'s server is on port 8000 (here: a real densewire serve on a free port), the other
    `densewire serve` lines start their own. A line whose comment says "exits N" must exit N."""
    import shutil

    from server_support import ServerProcess

    assert shutil.which("curl")
    root = _clone(tmp_path)
    env = _new_shell_env()
    assert subprocess.run(["bash", "-c", "command -v densewire"], env=env, capture_output=True).returncode != 0
    outputs: dict[str, str] = {}
    with ServerProcess("--model", "hash:384", "--served-model-name", "sentence-transformers/all-MiniLM-L6-v2",
                       demo_tables=True) as server:
        for command in COMMANDS:
            if " serve " in command:
                _run_server_line(command, root, env)
                continue
            line = command.replace("localhost:8000", f"127.0.0.1:{server.port}")
            out = subprocess.run(["bash", "-c", line], cwd=root, env=env, capture_output=True,
                                 text=True, timeout=600)
            expected = re.search(r"#.*\bexits (\d+)", command)
            assert out.returncode == (int(expected.group(1)) if expected else 0), \
                f"{command}\nexit {out.returncode}\n{out.stdout[-2000:]}{out.stderr[-2000:]}"
            outputs[command] = out.stdout + out.stderr
    said = "\n".join(outputs.values())
    assert "shape      1 x 384" in said  # curl | densewire inspect
    assert "densewire-dtype: float16" in said.lower() and "content-type: application/octet-stream" in said.lower()
    assert "HTTP 415 unsupported_media_type" in said  # the error line, through inspect
    assert "uuid,status,longitude,latitude" in said  # the demo table as CSV
    assert "row 0      [1, -2.5, 0.1]" in said
    assert (root / "response.msgpack").stat().st_size > 0
    msg = densewire_decode((root / "response.msgpack").read_bytes())
    assert msg.tensor.dtype == "float16" and msg.tensor.shape == (2, 384)


def densewire_decode(body: bytes):
    import densewire

    return densewire.decode(body, "msgpack")


def test_make_serve_args_example_reaches_the_command() -> None:
    example = re.search(r"`make serve ARGS='([^']*)'`", README)
    assert example, "the README documents make serve ARGS='...'"
    out = subprocess.run(["make", "-n", "serve", f"ARGS={example.group(1)}"], cwd=REPO, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert f".venv/bin/densewire serve {example.group(1)}" in out.stdout
    assert "setup-python.sh serve" in out.stdout  # the serving set only
