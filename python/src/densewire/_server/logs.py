"""Logging of ``densewire serve``: the server's logger, and the set-up both the command line
(``cli.run_server``) and the ``--workers`` factory (``app.app_from_env``) call."""

from __future__ import annotations

import logging
import sys

__all__ = ["log", "configure_logging"]

#: The logger every server module writes to.
log = logging.getLogger("densewire.server")


def configure_logging(level: str) -> None:
    """One stderr handler on the ``densewire`` logger (added once), at ``level`` (``trace`` is DEBUG)."""
    lvl = logging.DEBUG if level.lower() == "trace" else getattr(logging, level.upper(), logging.INFO)
    logger = logging.getLogger("densewire")
    if not logger.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        logger.addHandler(handler)
        logger.propagate = False
    logger.setLevel(lvl)
