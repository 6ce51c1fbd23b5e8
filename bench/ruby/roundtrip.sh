#!/usr/bin/env bash
# Starts `densewire serve --model hash:1536` on a free port, and bench/ruby/python_service.py (the
# published case's Python service: json.dumps of ndarray.tolist(), same hash:1536 vectors) on
# another, runs bench/ruby/roundtrip.rb against them and stops both. With two or more cores, the
# servers are pinned to core 0 and the Ruby client to core 1 (taskset), so the client does not take
# turns with a server on one core.
#
#   bash bench/ruby/roundtrip.sh [N_INPUTS] [ROUNDS]     (defaults: 1000 7)
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
densewire="${DENSEWIRE_BIN:-$root/.venv/bin/densewire}"
[[ -x "$densewire" ]] || { echo "roundtrip.sh: $densewire not found (set DENSEWIRE_BIN)" >&2; exit 1; }

python="$(dirname "$densewire")/python"
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
port="$(free_port)"
py_port="$(free_port)"
server_pin=() client_pin=()
if command -v taskset >/dev/null 2>&1 && (( $(nproc) >= 2 )); then
  server_pin=(taskset -c 0) client_pin=(taskset -c 1)
fi
log="$(mktemp)"
# Cache off, so every request runs the model as a real one would; one BLAS thread (shared machine).
"${server_pin[@]}" "$densewire" serve --model hash:1536 --port "$port" --cache-bytes 0 --blas-threads 1 --no-demo-tables \
  --log-level warning --no-access-log >"$log" 2>&1 &
server=$!
"${server_pin[@]}" "$python" "$root/bench/ruby/python_service.py" "$py_port" 1536 >>"$log" 2>&1 &
py_server=$!
stop() {
  kill "$server" "$py_server" 2>/dev/null || true
  wait "$server" "$py_server" 2>/dev/null || true
  rm -f "$log"
}
trap stop EXIT

wait_for() { # URL PID
  for _ in $(seq 1 150); do
    curl -fs "$1" >/dev/null 2>&1 && return 0
    kill -0 "$2" 2>/dev/null || { echo "roundtrip.sh: a server exited:" >&2; cat "$log" >&2; exit 1; }
    sleep 0.2
  done
  echo "roundtrip.sh: no answer from $1" >&2; cat "$log" >&2; exit 1
}
wait_for "http://127.0.0.1:$port/health" "$server"
wait_for "http://127.0.0.1:$py_port/health" "$py_server"

version="$("$python" -c 'import densewire; print(densewire.__version__)')"
echo "server: densewire $version serve --model hash:1536 --cache-bytes 0 --blas-threads 1 on 127.0.0.1:$port;" \
     "Python service on 127.0.0.1:$py_port; ${server_pin[*]:-unpinned}; client ${client_pin[*]:-unpinned}"
PYTHON_SERVICE_URL="http://127.0.0.1:$py_port" \
  "${client_pin[@]}" ruby "$root/bench/ruby/roundtrip.rb" "http://127.0.0.1:$port" "${1:-1000}" "${2:-7}"
