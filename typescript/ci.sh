#!/usr/bin/env bash
# CI for the TypeScript library: exact dependencies (package-lock.json), build, all tests.
# Called from the repo root (any cwd works). Needs Node >= 20 with npm; installs them from Debian
# only when missing (Debian's own nodejs may be too old: then this fails with a clear message).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "ci.sh: node/npm missing, installing from Debian" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
fi
major=$(node -p 'process.versions.node.split(".")[0]')
if [ "$major" -lt 20 ]; then
  echo "ci.sh: Node >= 20 is required, found $(node --version)" >&2
  exit 1
fi

npm ci --no-audit --no-fund --loglevel=error
npx tsc -p tsconfig.json
npx tsc -p tsconfig.test.json
# the spec reporter prints the summary (ℹ tests N / ℹ pass N / ℹ fail N); exit status is non-zero on any failure
node --test --test-reporter=spec build/test/*.test.js
