#!/usr/bin/env bash
# The loopback comparison: the published workload (256 texts x 1024 float32 a request, 500 requests,
# 10 in flight, same texts every request) from the Rust example client (reqwest, buffer_unordered)
# and from aiohttp, against the axum example server, `densewire serve` (Python) and FastAPI's raw
# bytes endpoint, all started here on 127.0.0.1 and stopped at the end.
#
#     bash bench/rust/loopback.sh [ROUNDS]        (from anywhere; ROUNDS default 3, REQUESTS=500)
# 500 requests rather than the published 100: 100 take ~50 ms here, too short to time on a shared machine.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
ROUNDS=${1:-3}
REQUESTS=${REQUESTS:-500}
PY="$ROOT/.venv/bin/python"
cd "$ROOT/rust"
cargo build --release --locked --features full --examples -q
SERVER=target/release/examples/server
CLIENT=target/release/examples/client
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_up() { for _ in $(seq 1 300); do curl -sf -o /dev/null "$1" && return 0; sleep 0.2; done; echo "not up: $1" >&2; return 1; }
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

AXUM=$(port)
$SERVER --port "$AXUM" --dims 1024 2>/dev/null & pids+=($!)
wait_up "http://127.0.0.1:$AXUM/health"
targets=("axum-example http://127.0.0.1:$AXUM")
if [ -x "$PY" ] && "$PY" -c 'import fastapi, uvicorn, aiohttp' 2>/dev/null; then
    DW=$(port); FA=$(port)
    PYTHONPATH="$ROOT/python/src" "$PY" -m densewire._server --host 127.0.0.1 --port "$DW" --model hash:1024 \
        --log-level warning --timeout-keep-alive 120 >/dev/null 2>&1 & pids+=($!)
    BENCH_N=256 BENCH_D=1024 "$PY" -m uvicorn --app-dir "$ROOT/bench/serve" baseline_app:app --host 127.0.0.1 \
        --port "$FA" --log-level warning --no-access-log --timeout-keep-alive 120 >/dev/null 2>&1 & pids+=($!)
    wait_up "http://127.0.0.1:$DW/health"; wait_up "http://127.0.0.1:$FA/docs"
    targets+=("densewire-serve-python http://127.0.0.1:$DW")
else
    echo "no .venv with fastapi/uvicorn/aiohttp: only the axum example is measured" >&2
fi
echo "# $(date -u +%F) $(lscpu | sed -n 's/^Model name: *//p') nproc=$(nproc) load=$(cut -d' ' -f1-3 /proc/loadavg)"
for t in "${targets[@]}"; do
    set -- $t
    for fmt in raw msgpack protobuf arrow json; do
        $CLIENT --url "$2" --label "$1" --format "$fmt" --rounds "$ROUNDS" --mode both --requests "$REQUESTS"
    done
done
if [ -n "${FA:-}" ]; then
    $CLIENT --url "http://127.0.0.1:$FA/raw" --label fastapi-raw-bytes --format headerless-raw --rounds "$ROUNDS" --mode both --requests "$REQUESTS"
    # The client comparison, interleaved (Rust zero-copy, aiohttp + numpy.frombuffer, Rust copy),
    # ROUNDS times per server, raw bodies; compare the best of each client per server.
    echo "# client comparison, interleaved"
    for t in "axum-example http://127.0.0.1:$AXUM raw" "densewire-serve-python http://127.0.0.1:$DW raw" "fastapi-raw-bytes http://127.0.0.1:$FA/raw headerless-raw"; do
        set -- $t
        for _ in $(seq 1 "$ROUNDS"); do
            $CLIENT --url "$2" --label "$1" --format "$3" --mode zero-copy --requests "$REQUESTS"
            "$PY" "$ROOT/bench/rust/aiohttp_client.py" --url "$2" --label "$1" --requests "$REQUESTS"
            $CLIENT --url "$2" --label "$1" --format "$3" --mode copy --requests "$REQUESTS"
        done
    done
fi
echo "# load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
