#!/usr/bin/env bash
# CI for the densewire Go module: go vet, every test (golden vectors, examples, fuzz seed corpora,
# client/handler tests over httptest), the benchmarks' build, then a short fuzz run per target.
#   FUZZTIME=0 ./ci.sh     skips the fuzz runs (default 50000x: 50,000 inputs per target, 2-5 s here)
# The fuzz runs are bounded by a count of inputs, not a duration: with a duration, Go 1.26's fuzz
# coordinator can report "context deadline exceeded" when the time is up, failing a target that found
# nothing (golang/go#75804, fixed in Go 1.27). A real finding always writes its input under
# testdata/fuzz/<target>/; the whole log is printed then.
set -euo pipefail
cd "$(dirname "$0")"

if ! command -v go >/dev/null 2>&1; then
  echo "ci.sh: go (>= 1.26) is required and not on PATH" >&2
  exit 1
fi
go version
export GOFLAGS="${GOFLAGS:-} -buildvcs=false"
FUZZTIME="${FUZZTIME:-50000x}"

go mod download
go vet ./...
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
# -v for the per-test lines counted below; the package summary lines (ok/FAIL) are shown as usual
go test -count=1 -v ./... > "$log" 2>&1 || { grep -E '^(\s*--- FAIL|FAIL|panic|ok )' "$log" || true; tail -n 50 "$log"; exit 1; }
grep -E '^(ok |FAIL|\?)' "$log"
# the golden cases of features Go does not claim, and claimed features no case exercises (capabilities_test.go)
grep -E '(capabilities of go|not claimed by go|claimed by go but)' "$log" | sed -E 's/^\s*[a-z_]+\.go:[0-9]+: //' || true
passed=$(grep -cE '^\s*--- PASS' "$log" || true)
failed=$(grep -cE '^\s*--- FAIL' "$log" || true)
skipped=$(grep -cE '^\s*--- SKIP' "$log" || true)
# a skip is never silent: name it and say why
grep -E -B1 '^\s*--- SKIP' "$log" || true

# the benchmarks (a module of their own in bench/go) must at least build and pass their checks
(cd ../bench/go && go vet ./... && go test -count=1 -run . -bench '^$' ./...)

fuzz() { # fuzz PACKAGE TARGET
  if go test -run '^$' -fuzz "^$2\$" -fuzztime "$FUZZTIME" -parallel 2 "$1" > "$log" 2>&1; then
    echo "fuzz $2: ok ($(grep -oE 'execs: [0-9]+' "$log" | tail -n 1))"
  else
    echo "fuzz $2: FAILED"; grep -vE '^fuzz: elapsed' "$log"; exit 1
  fi
}
if [ "$FUZZTIME" != "0" ]; then
  for target in FuzzDecodeBase64 FuzzDecodeRaw FuzzDecodeMsgpack FuzzDecodeProtobuf FuzzDecodeJSON \
      FuzzDecodeTableProtobuf FuzzDecodeTableMsgpack FuzzDecodeTableJSON FuzzDecodeTableCSV FuzzDecodeCopy FuzzDecodeKServe FuzzDecodeKinds; do
    fuzz . "$target"
  done
  for target in FuzzDecodeArrow FuzzDecodeArrowTable; do
    fuzz ./arrowipc "$target"
  done
fi
echo "go: ${passed} passed, ${failed} failed, ${skipped} skipped"
