"""densewire._optional: the one door for late imports names the extra (or package) to install."""

from __future__ import annotations

import builtins
import doctest

import pytest

from densewire import _optional
from densewire._optional import install_hint, missing, require


def test_docstring_examples_run() -> None:
    result = doctest.testmod(_optional)
    assert result.attempted >= 2 and result.failed == 0


def test_require_returns_the_module_dotted_names_too() -> None:
    import json.decoder

    assert require("json.decoder", extra="serve") is json.decoder


def test_a_missing_module_names_the_extra_and_the_feature() -> None:
    with pytest.raises(ModuleNotFoundError, match=r"^CSV tables needs no_such_mod_q: pip install 'densewire\[arrow\]'$"):
        require("no_such_mod_q.csv", extra="arrow", feature="CSV tables")
    with pytest.raises(ModuleNotFoundError, match=r"pip install some-dist; or use X$"):
        require("no_such_mod_q", package="some-dist", alternative="use X")


def test_a_module_hidden_through_import_is_missing_too(monkeypatch: pytest.MonkeyPatch) -> None:
    real = builtins.__import__

    def hide(name, *args, **kwargs):
        if name.split(".")[0] == "json":
            raise ImportError(f"No module named {name!r}")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", hide)
    with pytest.raises(ModuleNotFoundError, match=r"densewire\[serve\]"):
        require("json", extra="serve")


def test_a_broken_densewire_module_is_not_reported_as_a_missing_extra() -> None:
    with pytest.raises(ImportError) as info:
        require("densewire._no_such_module", extra="serve")
    assert "pip install" not in str(info.value)


def test_missing_and_install_hint() -> None:
    assert missing("json", "no_such_mod_q") == ["no_such_mod_q"]
    assert install_hint("plot") == "pip install 'densewire[plot]'"
