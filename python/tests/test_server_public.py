"""densewire.server: the public names of the server, ``python -m densewire.server``, its examples."""

from __future__ import annotations

import doctest
import subprocess
import sys

import densewire._server.cli
import densewire.server as server


def test_docstring_examples_run() -> None:
    result = doctest.testmod(server)
    assert result.attempted >= 4 and result.failed == 0


def test_every_public_name_resolves() -> None:
    assert server.main is densewire._server.cli.main
    assert set(server.__all__) == set(dir(server))
    for name in server.__all__:
        assert getattr(server, name) is not None, name
    assert server.create_app.__module__ == "densewire._server.app"


def test_python_m_densewire_server() -> None:
    proc = subprocess.run([sys.executable, "-m", "densewire.server", "--help"], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage: densewire serve") and "--tables-config" in proc.stdout


def test_an_unknown_name_is_an_attribute_error() -> None:
    try:
        server.no_such_name  # noqa: B018
    except AttributeError as exc:
        assert "no_such_name" in str(exc)
    else:
        raise AssertionError("no AttributeError")
