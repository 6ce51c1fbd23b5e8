#!/usr/bin/env bash
# bench/tables in one command: densewire bodies (Python encoders), row baselines (Node, from the same
# decoded data), sizes (raw, gzip -6/-9, brotli 11, zstd 19), decode times in Node and in headless
# Chromium (Debian's, via playwright-core). Prints the machine, versions and load, then the report.
#
#   bash bench/tables/run.sh [--rounds N] [--iterations N] [--warmup N]
#
# Needs: the repo's .venv (scripts/setup-python.sh), typescript/node_modules (npm ci in typescript/),
# /usr/bin/chromium (apt-get install -y chromium). Bodies and results go to a temporary folder,
# kept and named at the end (OUTDIR=... to choose it).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
out=${OUTDIR:-$(mktemp -d /tmp/densewire-bench-tables.XXXXXX)}
mkdir -p "$out"
[ -d typescript/node_modules/esbuild ] || (cd typescript && npm ci --no-audit --no-fund --loglevel=error)
[ -x "${CHROMIUM_PATH:-/usr/bin/chromium}" ] || { echo "run.sh: install chromium (apt-get install -y chromium)" >&2; exit 1; }

echo "## machine"
echo "cpu: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores; $(uname -sr)"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "node $(node --version); $(${CHROMIUM_PATH:-/usr/bin/chromium} --version 2>/dev/null | head -1)"
echo "python $(.venv/bin/python -c 'import sys, numpy, densewire; print(sys.version.split()[0], "numpy", numpy.__version__, "densewire", getattr(densewire, "__version__", "?"))')"
(cd typescript && node -p '["protobufjs","@msgpack/msgpack","apache-arrow","esbuild","playwright-core"].map(p => p + " " + JSON.parse(require("fs").readFileSync("node_modules/" + p + "/package.json")).version).join(", ")')
echo "command: bash bench/tables/run.sh $*"
echo

(cd typescript && npx tsc -p ../bench/tables/tsconfig.json)  # type-check the bench (esbuild does not)
.venv/bin/python bench/tables/bodies.py "$out" >/dev/null
node --expose-gc bench/tables/bench.mjs "$out" "$@"
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "bodies and results.json in $out"
