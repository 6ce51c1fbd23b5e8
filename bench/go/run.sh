#!/usr/bin/env bash
# Runs the Go benchmarks in ROUNDS interleaved rounds (each round runs every benchmark once, so a
# load spike on the shared machine hits all formats alike), then prints benchstat's summary and
# the per-round ratios to the JSON baseline (ratios.py).
#   ROUNDS=6 BENCHTIME=1s ./run.sh
#   BENCH='^BenchmarkTable_' OUT=results_tables.txt ./run.sh     (the table benchmarks only)
set -euo pipefail
cd "$(dirname "$0")"
ROUNDS="${ROUNDS:-6}"
BENCHTIME="${BENCHTIME:-1s}"
BENCH="${BENCH:-.}"
out="${OUT:-results.txt}"
: > "$out"
go test -c -o /tmp/densewire-bench.test .
for i in $(seq "$ROUNDS"); do
  /tmp/densewire-bench.test -test.run '^$' -test.bench "$BENCH" -test.benchtime "$BENCHTIME" -test.count 1 >> "$out"
done
if command -v benchstat >/dev/null 2>&1; then benchstat "$out"; fi
python3 ratios.py "$out"
