#!/usr/bin/env bash
# CI for the densewire Go module: go vet, every test (golden vectors, examples, fuzz seed corpora,
# client/handler tests over httptest), the benchmarks' build, then a short fuzz run per target.
#   FUZZTIME=0 ./ci.sh     skips the fuzz runs (default 5s per target)
set -euo pipefail
cd "$(dirname "$0")"

if ! command -v go >/dev/null 2>&1; then
  echo "ci.sh: go (>= 1.26) is required and not on PATH" >&2
  exit 1
fi
go version
export GOFLAGS="${GOFLAGS:-} -buildvcs=false"
FUZZTIME="${FUZZTIME:-5s}"

go mod download
go vet ./...
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
# -v for the per-test lines counted below; the package summary lines (ok/FAIL) are shown as usual
go test -count=1 -v ./... > "$log" 2>&1 || { grep -E '^(\s*--- FAIL|FAIL|panic|ok )' "$log" || true; tail -n 50 "$log"; exit 1; }
grep -E '^(ok |FAIL|\?)' "$log"
passed=$(grep -cE '^\s*--- PASS' "$log" || true)
failed=$(grep -cE '^\s*--- FAIL' "$log" || true)
skipped=$(grep -cE '^\s*--- SKIP' "$log" || true)
# a skip is never silent: name it and say why
grep -E -B1 '^\s*--- SKIP' "$log" || true

# the benchmarks (a module of their own in bench/go) must at least build and pass their checks
(cd ../bench/go && go vet ./... && go test -count=1 -run . -bench '^$' ./...)

if [ "$FUZZTIME" != "0" ]; then
  for target in FuzzDecodeBase64 FuzzDecodeRaw FuzzDecodeMsgpack FuzzDecodeProtobuf FuzzDecodeJSON \
      FuzzDecodeTableProtobuf FuzzDecodeTableMsgpack FuzzDecodeTableJSON FuzzDecodeTableCSV; do
    go test -run '^$' -fuzz "^${target}\$" -fuzztime "$FUZZTIME" -parallel 2 . 2>&1 | tail -n 3
  done
  for target in FuzzDecodeArrow FuzzDecodeArrowTable; do
    go test -run '^$' -fuzz "^${target}\$" -fuzztime "$FUZZTIME" -parallel 2 ./arrowipc 2>&1 | tail -n 3
  done
fi
echo "go: ${passed} passed, ${failed} failed, ${skipped} skipped"
