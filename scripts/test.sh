#!/usr/bin/env bash
# Every test of every language, from a fresh clone: installs what each needs, runs it, and fails if
# anything failed. Each suite's own runner prints its summary; the last line counts suites.
set -uo pipefail
cd "$(dirname "$0")/.."
mkdir -p .ci-logs
passed=() failed=()
suite() {
  local name=$1; shift
  echo "=== $name: $*"
  local start=$SECONDS
  if "$@"; then passed+=("$name"); status=ok; else failed+=("$name"); status=FAILED; fi
  echo "=== $name: $status in $((SECONDS - start)) s"
}
suite setup-python bash scripts/setup-python.sh || true
if [ ${#failed[@]} -ne 0 ]; then echo "Python setup failed; nothing else can run"; exit 1; fi
suite golden-vectors .venv/bin/python testdata/generate.py --check
if [ -x scripts/services.sh ]; then suite services bash scripts/services.sh install; fi
suite python .venv/bin/python -m pytest python/tests -q -p no:cacheprovider
for lang in typescript go rust java ruby; do
  if [ -f "$lang/ci.sh" ]; then suite "$lang" bash "$lang/ci.sh"; fi
done
echo
echo "passed suites: ${passed[*]:-none}"
echo "failed suites: ${failed[*]:-none}"
echo "suites: ${#passed[@]} passed, ${#failed[@]} failed"
[ ${#failed[@]} -eq 0 ]
