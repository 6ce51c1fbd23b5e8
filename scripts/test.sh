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
suite grpc-generated .venv/bin/python proto/generate.py --check
if [ -x scripts/services.sh ]; then suite services bash scripts/services.sh install; fi
# Elasticsearch 9.5.3 (Maven Central's integ-test zip, cached in ~/.m2): the Python tests start one node
suite elasticsearch bash scripts/elasticsearch.sh install
# OpenSearch 3.5 + k-NN (Maven Central's zips, unpacked once); Chroma and Milvus Lite come from the dev venv
suite opensearch bash scripts/opensearch.sh install
suite python .venv/bin/python -m pytest python/tests -q -p no:cacheprovider

# The other languages' clients are also tested against the real server: one densewire serve
# (hash vectors, so no model load; the demo tables with fast pre-built compressions, so that the
# 2 cores of CI do not spend a minute on brotli 11) for all of them, found through DENSEWIRE_SERVER_URL.
free_port() { .venv/bin/python -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
port=$(free_port)
.venv/bin/densewire serve --model hash:384 --table-compression fast --port "$port" > .ci-logs/serve.log 2>&1 &
server_pid=$!
# A second server that is easy to overload, for the clients' retry tests (DENSEWIRE_OVERLOAD_URL): the
# built-in model (a request of 64 texts keeps it busy for a noticeable time), one request admitted at
# a time (--max-concurrent-requests 1: the others get 429 with Retry-After), no vector cache (repeated
# texts would not reach the model), no demo tables (nothing to pre-build).
overload_port=$(free_port)
.venv/bin/densewire serve --max-concurrent-requests 1 --cache-bytes 0 --no-demo-tables --blas-threads 1 \
  --port "$overload_port" > .ci-logs/serve-overload.log 2>&1 &
overload_pid=$!
# One PostgreSQL with pgvector for the Go, Rust and Java binary COPY tests (DENSEWIRE_PG_URL).
pgdir=$(mktemp -d /tmp/densewire-pg.XXXXXX)
trap 'kill $server_pid $overload_pid 2>/dev/null; wait $server_pid $overload_pid 2>/dev/null; bash scripts/postgres.sh stop "$pgdir"' EXIT
export DENSEWIRE_PG_URL=$(bash scripts/postgres.sh start "$pgdir")
export DENSEWIRE_SERVER_URL="http://127.0.0.1:$port"
export DENSEWIRE_OVERLOAD_URL="http://127.0.0.1:$overload_port"
wait_healthy() {  # url pid: until /health answers 200 (the model loaded), the process died, or 120 s
  for _ in $(seq 1 1200); do
    curl -fsS "$1/health" >/dev/null 2>&1 && return 0
    kill -0 "$2" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}
wait_healthy "$DENSEWIRE_SERVER_URL" $server_pid
wait_healthy "$DENSEWIRE_OVERLOAD_URL" $overload_pid
suite server-for-clients curl -fsS "$DENSEWIRE_SERVER_URL/health"
suite overload-server-for-clients curl -fsS "$DENSEWIRE_OVERLOAD_URL/ready"
suite postgres-for-clients test -n "$DENSEWIRE_PG_URL"

for lang in typescript go rust java ruby; do
  if [ -f "$lang/ci.sh" ]; then suite "$lang" bash "$lang/ci.sh"; fi
done
echo
echo "passed suites: ${passed[*]:-none}"
echo "failed suites: ${failed[*]:-none}"
echo "suites: ${#passed[@]} passed, ${#failed[@]} failed"
[ ${#failed[@]} -eq 0 ]
