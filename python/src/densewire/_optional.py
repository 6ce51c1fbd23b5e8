"""Optional dependencies: the one door through which densewire imports a module late.

densewire needs numpy, pybase64, orjson and msgspec; everything else belongs to an extra of
``pyproject.toml`` (``arrow``: pyarrow; ``plot``: matplotlib; ``serve``: starlette, uvicorn, redis,
httpx, tokenizers, psycopg, ...) and is imported where a feature first needs it, through
:func:`require`, so that a missing one fails with the command that installs it:

>>> require("json", extra="serve").dumps([1])
'[1]'
>>> require("no_such_module_xyz", extra="arrow", feature="the Arrow format")
Traceback (most recent call last):
...
ModuleNotFoundError: the Arrow format needs no_such_module_xyz: pip install 'densewire[arrow]'
"""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

__all__ = ["require", "missing", "install_hint"]


def install_hint(extra: str) -> str:
    """The command that installs an extra: ``pip install 'densewire[serve]'``."""
    return f"pip install 'densewire[{extra}]'"


def require(module: str, *, extra: str | None = None, package: str | None = None, feature: str | None = None,
            alternative: str | None = None) -> ModuleType:
    """``module`` (dotted names too: ``pyarrow.csv``), imported. When it (or a module it needs) is not
    installed: a ModuleNotFoundError saying which ``feature`` needs it and how to install it, the
    densewire ``extra`` holding it or else the pip ``package``, then ``alternative`` if given.
    ``builtins.__import__`` is used, so that a test can hide a module the usual way."""
    try:
        __import__(module)
    except ImportError as exc:
        missing_name = getattr(exc, "name", None) or module.split(".")[0]
        if missing_name.split(".")[0] == __name__.split(".")[0]:
            raise  # a densewire module failing to import is a bug, not a missing extra
        how = install_hint(extra) if extra else f"pip install {package or missing_name.split('.')[0]}"
        raise ModuleNotFoundError(f"{feature or module} needs {missing_name.split('.')[0]}: {how}"
                                  + (f"; or {alternative}" if alternative else ""), name=missing_name) from exc
    return sys.modules[module]


def missing(*modules: str) -> list[str]:
    """The ``modules`` not installed (found without importing them)."""
    return [m for m in modules if importlib.util.find_spec(m) is None]
