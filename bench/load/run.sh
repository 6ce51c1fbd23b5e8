#!/usr/bin/env bash
# Every figure of bench/load/RESULTS.md, before and after, interleaved scenario by scenario:
#   bash bench/load/run.sh BEFORE_SRC [AFTER_SRC]
# BEFORE_SRC: python/src of a worktree at the commit before the reliability work, e.g.
#   git worktree add --detach /tmp/dw-before afab66a && bash bench/load/run.sh /tmp/dw-before/python/src
set -uo pipefail
cd "$(dirname "$0")/../.."
before=${1:?python/src of the commit before}
after=${2:-python/src}
out=bench/load/results.jsonl
: > "$out"
{ lscpu | grep -E '^(Model name|CPU\(s\))'; uptime; echo "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset} OPENBLAS_L2_SIZE=${OPENBLAS_L2_SIZE:-unset}"; .venv/bin/python --version; } > bench/load/machine.txt
for scenario in ${SCENARIOS:-steady overload redis sigterm bombs bigtexts slowloris}; do
  for side in after before; do
    src=$after; flags=(--admission)
    if [ "$side" = before ]; then src=$before; flags=(); fi
    line=$(timeout 1200 .venv/bin/python bench/load/load.py --src "$src" "${flags[@]}" --scenarios "$scenario" 2>/dev/null | tail -1)
    [ -n "$line" ] || line="{\"scenario\": \"$scenario\", \"error\": \"did not finish within 1200 s\"}"
    echo "{\"side\": \"$side\", ${line#\{}" | tee -a "$out"
  done
done
