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

# The /demo page's test drives Debian's Chromium (playwright-core, no browser download).
chromium_path=${CHROMIUM_PATH:-/usr/bin/chromium}
if [ ! -x "$chromium_path" ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "ci.sh: $chromium_path missing and not root: install Debian's chromium (apt-get install -y chromium) or set CHROMIUM_PATH" >&2
    exit 1
  fi
  echo "ci.sh: chromium missing, installing from Debian" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi

npm ci --no-audit --no-fund --loglevel=error
npx tsc -p tsconfig.json
npx tsc -p tsconfig.test.json
npx tsc -p demo/tsconfig.json
npx tsc -p ../bench/tables/tsconfig.json
# the per-token/sparse decode bench: every body it times decodes to TEI's JSON, bit for bit (a small batch)
node ../bench/typescript/tokens.mjs --check

# The /demo bundle served by densewire serve is a committed build output: rebuild it and fail if the
# committed files differ (run `npm run build:demo` in typescript/ and commit the result).
demo_tmp=$(mktemp -d)
trap 'rm -rf "$demo_tmp"' EXIT
node demo/build.mjs "$demo_tmp/demo" >/dev/null
if ! diff -r "$demo_tmp/demo" ../python/src/densewire/_server/static/demo >/dev/null; then
  echo "ci.sh: python/src/densewire/_server/static/demo is stale: run 'npm run build:demo' in typescript/ and commit it" >&2
  diff -rq "$demo_tmp/demo" ../python/src/densewire/_server/static/demo >&2 || true
  exit 1
fi
echo "ci.sh: the /demo bundle is fresh"
# The same for /docs: Swagger UI from swagger-ui-dist (package-lock.json) and typescript/docs/.
docs_tmp="$demo_tmp/docs"
node docs/build.mjs "$docs_tmp" >/dev/null
if ! diff -r "$docs_tmp" ../python/src/densewire/_server/static/docs >/dev/null; then
  echo "ci.sh: python/src/densewire/_server/static/docs is stale: run 'npm run build:docs' in typescript/ and commit it" >&2
  diff -rq "$docs_tmp" ../python/src/densewire/_server/static/docs >&2 || true
  exit 1
fi
echo "ci.sh: the /docs assets are fresh"

# the spec reporter prints the summary (ℹ tests N / ℹ pass N / ℹ fail N); exit status is non-zero on any failure
node --test --test-reporter=spec build/test/*.test.js
