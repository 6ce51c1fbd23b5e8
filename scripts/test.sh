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
# Go, Node.js, Rust, the JDK and Ruby first: a missing one stops the run in its first seconds, one line
# per tool (scripts/toolchains.sh installs what Debian and the Go module proxy can give, as root).
suite toolchains bash scripts/toolchains.sh || true
if [ ${#failed[@]} -ne 0 ]; then echo "toolchains missing (above); nothing was run"; exit 1; fi
gocache="${XDG_CACHE_HOME:-$HOME/.cache}/densewire/go/bin"
[ -x "$gocache/go" ] && export PATH="$gocache:$PATH"
[ -x "$HOME/.cargo/bin/cargo" ] && export PATH="$HOME/.cargo/bin:$PATH"
suite setup-python bash scripts/setup-python.sh || true
if [ ${#failed[@]} -ne 0 ]; then echo "Python setup failed; nothing else can run"; exit 1; fi
suite golden-vectors .venv/bin/python testdata/generate.py --check
if [ -x scripts/services.sh ]; then suite services bash scripts/services.sh install; fi
suite python .venv/bin/python -m pytest python/tests -q -p no:cacheprovider

# The other languages' clients are also tested against the real server: one densewire serve
# (hash vectors, so no model load; the demo tables with fast pre-built compressions, so that the
# 2 cores of CI do not spend a minute on brotli 11) for all of them, found through DENSEWIRE_SERVER_URL.
port=$(.venv/bin/python -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
.venv/bin/densewire serve --model hash:384 --table-compression fast --port "$port" > .ci-logs/serve.log 2>&1 &
server_pid=$!
trap 'kill $server_pid 2>/dev/null; wait $server_pid 2>/dev/null' EXIT
export DENSEWIRE_SERVER_URL="http://127.0.0.1:$port"
for _ in $(seq 1 300); do
  curl -fsS "$DENSEWIRE_SERVER_URL/health" >/dev/null 2>&1 && break
  kill -0 $server_pid 2>/dev/null || break
  sleep 0.1
done
suite server-for-clients curl -fsS "$DENSEWIRE_SERVER_URL/health"

for lang in typescript go rust java ruby; do
  if [ -f "$lang/ci.sh" ]; then suite "$lang" bash "$lang/ci.sh"; fi
done
echo
echo "passed suites: ${passed[*]:-none}"
echo "failed suites: ${failed[*]:-none}"
echo "suites: ${#passed[@]} passed, ${#failed[@]} failed"
[ ${#failed[@]} -eq 0 ]
