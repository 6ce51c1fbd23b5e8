"""``python -m densewire._server [flags]`` runs ``densewire serve [flags]``."""

from .cli import main

raise SystemExit(main())
