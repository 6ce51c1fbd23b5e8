#!/usr/bin/env bash
# CI for the Rust crate: the default-feature build and tests, every test with all features (golden
# vectors, property tests, HTTP tests, fuzz bodies over their corpus, doc and README examples), and
# a short bounded cargo-fuzz run of every fuzz target when nightly and cargo-fuzz are available.
#
#     bash rust/ci.sh          (from anywhere; CI calls it from the repository root)
#
# Environment: DENSEWIRE_FUZZ_SECONDS (default 10) per fuzz target; DENSEWIRE_SKIP_CARGO_FUZZ=1
# leaves out the cargo-fuzz run (the fuzz bodies still run over their corpus as ordinary tests).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")"
export CARGO_TERM_COLOR=never
export CARGO_INCREMENTAL=0
start=$(date +%s)

if ! command -v cargo >/dev/null 2>&1; then
    # rustup puts cargo in ~/.cargo/bin; a login shell may not have it on PATH.
    [ -x "$HOME/.cargo/bin/cargo" ] && export PATH="$HOME/.cargo/bin:$PATH"
fi
if ! command -v cargo >/dev/null 2>&1; then
    echo "ci.sh: cargo (Rust >= 1.85, edition 2024) is required and not installed" >&2
    exit 1
fi
if ! command -v cc >/dev/null 2>&1; then
    apt-get update -qq && apt-get install -y -qq gcc >/dev/null
fi
cargo --version
rustc --version

echo "== default features: build, unit and doc tests"
cargo test --locked

if [ -n "${DENSEWIRE_SERVER_URL:-}" ]; then
    echo "live-server test: against densewire serve at $DENSEWIRE_SERVER_URL"
else
    echo "live-server test: DENSEWIRE_SERVER_URL is not set, so tests/live_server.rs checks nothing (scripts/test.sh sets it)"
fi
if [ -n "${DENSEWIRE_PG_URL:-}" ]; then
    echo "PostgreSQL test: binary COPY through tokio-postgres against $DENSEWIRE_PG_URL"
else
    echo "PostgreSQL test: DENSEWIRE_PG_URL is not set, so tests/pgcopy_postgres.rs is skipped (it fails when CI=true; scripts/test.sh sets it)"
fi
echo "== all features: unit, golden, property, HTTP, live-server, fuzz-corpus, doc and README tests; examples and the bench build"
cargo test --locked --all-features
cargo build --locked --all-features --benches

echo "== our Arrow encodings read by pyarrow"
PY=../.venv/bin/python
if [ -x "$PY" ] && "$PY" -c 'import pyarrow' 2>/dev/null; then
    arrow_out=$(mktemp -d)
    DENSEWIRE_ARROW_OUT="$arrow_out" cargo test --locked --all-features -q --test golden -- arrow. >/dev/null
    "$PY" tests/pyarrow_check.py "$arrow_out"
    rm -rf "$arrow_out"
else
    echo "no pyarrow in ../.venv (scripts/setup-python.sh installs it): our Arrow encodings are checked by our own decoder only"
fi

echo "== fuzz targets"
fuzz_seconds=${DENSEWIRE_FUZZ_SECONDS:-10}
have_nightly=false
if rustup toolchain list 2>/dev/null | grep -q '^nightly'; then have_nightly=true; fi
if [ "${DENSEWIRE_SKIP_CARGO_FUZZ:-0}" = "1" ]; then
    echo "cargo-fuzz run left out (DENSEWIRE_SKIP_CARGO_FUZZ=1); the fuzz bodies ran over their corpus in tests/fuzz_corpus.rs above"
elif ! $have_nightly; then
    echo "no nightly toolchain: cargo-fuzz cannot run; the fuzz bodies ran over their corpus in tests/fuzz_corpus.rs above"
else
    if ! cargo fuzz --version >/dev/null 2>&1; then
        echo "installing cargo-fuzz from crates.io"
        cargo install cargo-fuzz --locked -q || echo "cargo-fuzz could not be installed"
    fi
    if cargo fuzz --version >/dev/null 2>&1; then
        work=$(mktemp -d)
        trap 'rm -rf "$work"' EXIT
        cargo +nightly fuzz build -O
        failed=0
        for target in $(cargo +nightly fuzz list); do
            mkdir -p "$work/$target"
            # New inputs go to the scratch directory; the committed seed corpus is read only.
            if cargo +nightly fuzz run -O "$target" "$work/$target" "fuzz/corpus/$target" -- \
                -max_total_time="$fuzz_seconds" -timeout=10 -rss_limit_mb=4096 >"$work/$target.log" 2>&1; then
                echo "fuzz $target: ok ($(sed -n 's/^Done \([0-9]*\) runs.*/\1/p' "$work/$target.log" | tail -1) runs in ${fuzz_seconds}s)"
            else
                echo "fuzz $target: FAILED"; tail -40 "$work/$target.log"; failed=1
            fi
        done
        [ "$failed" = 0 ] || { echo "a fuzz target failed"; exit 1; }
    else
        echo "cargo-fuzz unavailable: the fuzz bodies ran over their corpus in tests/fuzz_corpus.rs above"
    fi
fi

echo "rust/ci.sh: all passed in $(( $(date +%s) - start ))s"
