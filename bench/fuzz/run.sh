#!/usr/bin/env bash
# The long fuzz runs of bench/fuzz/RESULTS.md: every decoder target of the TypeScript (fast-check),
# Python (hypothesis) and Ruby (seeded property tests) suites with many more inputs than CI's short
# run, and a seed of their own (FUZZ_SEED, default 7). Logs go to bench/fuzz/logs/ (not committed).
#   bench/fuzz/run.sh [RUNS]      RUNS inputs per target (default 50000; Python a twentieth of it:
#                                 hypothesis costs 15-25 ms an input of its own here)
set -uo pipefail
cd "$(dirname "$0")/../.."
RUNS=${1:-50000}
SEED=${FUZZ_SEED:-7}
mkdir -p bench/fuzz/logs
status=0
run() { # NAME COMMAND...
  local name=$1; shift
  local start=$SECONDS
  if "$@" > "bench/fuzz/logs/$name.log" 2>&1; then echo "$name: ok in $((SECONDS - start)) s"; else echo "$name: FAILED in $((SECONDS - start)) s (bench/fuzz/logs/$name.log)"; status=1; fi
}
(cd typescript && npx tsc -p tsconfig.json && npx tsc -p tsconfig.test.json)
run typescript env FUZZ_RUNS="$RUNS" FUZZ_SEED="$SEED" node --max-old-space-size=2048 --test --test-reporter=spec typescript/build/test/fuzz.test.js
run python env FUZZ_RUNS=$((RUNS / 20)) FUZZ_SEED="$SEED" .venv/bin/python -m pytest python/tests/test_fuzz_decoders.py -q -p no:cacheprovider --durations=0
run ruby env FUZZ_RUNS="$RUNS" FUZZ_SEED="$SEED" ruby -W:no-experimental -Iruby/lib -Iruby/test ruby/test/fuzz_test.rb -v
exit $status
