#!/usr/bin/env bash
# A throw-away Chroma server (PyPI chromadb's `chroma run`), for the tests of densewire's Chroma sink
# (python/tests/conftest.py starts one a test session) and for users' local runs.
#
#   scripts/chroma.sh start DIR   start `chroma run --path DIR/data` on a free loopback port, wait until
#                                 /api/v2/heartbeat answers, print its URL (http://127.0.0.1:PORT); when
#                                 DIR holds a server that was stopped or killed: that one again, on its
#                                 port and data
#   scripts/chroma.sh stop DIR    stop it and remove DIR
#
# The server is the `chroma` of $CHROMA, or of the repository's .venv (scripts/setup-python.sh dev pins
# chromadb), or the first on PATH.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/service-lib.sh"
cmd=${1:?usage: $0 start|stop DIR}
dir=${2:?usage: $0 start|stop DIR}
root=$(cd "$(dirname "$0")/.." && pwd)
chroma=${CHROMA:-}
[ -n "$chroma" ] || { [ -x "$root/.venv/bin/chroma" ] && chroma=$root/.venv/bin/chroma; } || true
[ -n "$chroma" ] || chroma=$(command -v chroma || true)
case "$cmd" in
  start)
    [ -n "$chroma" ] || { echo "no chroma server: run scripts/setup-python.sh dev (or pip install chromadb)" >&2; exit 1; }
    mkdir -p "$dir/data"
    [ -f "$dir/port" ] || free_port >"$dir/port"  # kept for a restart on the same data
    port=$(cat "$dir/port")
    ANONYMIZED_TELEMETRY=False setsid "$chroma" run --path "$dir/data" --host 127.0.0.1 --port "$port" \
      >>"$dir/log" 2>&1 </dev/null &
    echo $! >"$dir/pid"
    url="http://127.0.0.1:$port"
    for _ in $(seq 1 240); do
      if curl -fsS "$url/api/v2/heartbeat" >/dev/null 2>&1; then echo "$url"; exit 0; fi
      kill -0 "$(cat "$dir/pid")" 2>/dev/null || break
      sleep 0.5
    done
    echo "Chroma did not start:" >&2
    tail -30 "$dir/log" >&2 || true
    exit 1
    ;;
  stop)
    stop_pidfile "$dir" 10 group
    rm -rf "$dir"
    ;;
  *) echo "usage: $0 start|stop DIR" >&2; exit 2 ;;
esac
