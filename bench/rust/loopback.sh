#!/usr/bin/env bash
# The published workload over loopback HTTP, every (server, client) pair side by side in one run:
# requests of 256 texts x 1024 float32 (1 MiB raw bodies), 1,000 requests, 10 in flight, the same
# 256 texts in every request.
#
#   servers, raw bodies (all on 127.0.0.1, started and stopped here, pinned to SERVER_CPU):
#     fastapi-def / fastapi-async   FastAPI `def` / `async def` endpoint, a matrix made at start
#                                   (bench/rust/fastapi_app.py; uvicorn, 1 worker, uvloop + httptools)
#     axum                          the axum example (rust/examples/server.rs), its row cache on
#     densewire-serve               densewire serve --model hash:1024 (Python), its row cache on
#   clients (pinned to CLIENT_CPU):
#     rust-zero-copy / rust-copy    the Rust example client (reqwest, buffer_unordered(10)) reading
#                                   each body through a &[f32] view / copying it out into a Vec<f32>
#     aiohttp                       aiohttp + numpy.frombuffer (bench/rust/aiohttp_client.py)
#     densewire-py                  densewire.AsyncClient, Accept raw, 10 in flight
#   computed per request (no cache), Rust zero-copy client only:
#     axum-computed                 the axum example with --no-cache (FNV-1a + SplitMix64 hash model)
#     fastapi-computed(-async)      FastAPI `def` / `async def` computing the same vectors with numpy
#                                   (checked equal to axum's below)
#     densewire-serve-computed      densewire serve --cache-bytes 0 (Python hash backend: BLAKE2b +
#                                   PCG64 normals, a different and dearer algorithm)
#   FastAPI without uvloop/httptools (--loop asyncio --http h11): fastapi-h11-def, Rust zero-copy.
# The physical reference: bench/rust/socket_bandwidth.rs pushing 1 MiB buffers through 127.0.0.1
# TCP sockets (writer on SERVER_CPU, reader on CLIENT_CPU), 1 stream and 10 streams, before and
# after the HTTP runs; the reference is the best of those.
#
#     bash bench/rust/loopback.sh [ROUNDS]     (from anywhere; ROUNDS default 5; REQUESTS=1000)
#
# Each client invocation warms its connections up with 10 requests, then times REQUESTS; pairs are
# interleaved round by round. Raw lines go to bench/rust/loopback.txt (LOG=...), then
# bench/rust/summarize.py prints the tables (best and median of the rounds). CPU time per request
# is measured for the client (its own process clock) and for the server (/proc/PID/stat, 10 ms
# ticks, over the warm-up and timed requests).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
ROUNDS=${1:-5}
REQUESTS=${REQUESTS:-1000}
CONC=10
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
LOG=${LOG:-$ROOT/bench/rust/loopback.txt}
PY="$ROOT/.venv/bin/python"
"$PY" -c 'import fastapi, uvicorn, aiohttp, httpx, numpy' || { echo "loopback.sh needs $PY with fastapi, uvicorn, aiohttp, httpx, numpy" >&2; exit 1; }
cd "$ROOT/rust"
cargo build --release --locked --features full --examples -q
rustc --edition 2024 -O "$ROOT/bench/rust/socket_bandwidth.rs" -o target/release/socket_bandwidth
SERVER=target/release/examples/server
CLIENT=target/release/examples/client
SOCKBW=target/release/socket_bandwidth
if [ "$(nproc)" -ge 2 ]; then onserver="taskset -c $SERVER_CPU"; onclient="taskset -c $CLIENT_CPU"; else onserver=""; onclient=""; fi
port() { "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_up() { for _ in $(seq 1 300); do curl -sf -o /dev/null "$1" && return 0; sleep 0.2; done; echo "not up: $1" >&2; return 1; }
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
declare -A URL PID

start() { # label url health-url command...
    local label=$1 url=$2 health=$3; shift 3
    $onserver "$@" >/dev/null 2>&1 & pids+=($!); PID[$label]=$!; URL[$label]=$url
    wait_up "$health"
}
P_AXUM=$(port); P_AXNC=$(port); P_FA=$(port); P_FAH=$(port); P_DW=$(port); P_DWNC=$(port)
start axum "http://127.0.0.1:$P_AXUM" "http://127.0.0.1:$P_AXUM/health" $SERVER --port "$P_AXUM" --dims 1024
start axum-computed "http://127.0.0.1:$P_AXNC" "http://127.0.0.1:$P_AXNC/health" $SERVER --port "$P_AXNC" --dims 1024 --no-cache
UV=(-m uvicorn --app-dir "$ROOT/bench/rust" fastapi_app:app --host 127.0.0.1 --log-level warning --no-access-log --timeout-keep-alive 120)
start fastapi-def "http://127.0.0.1:$P_FA/cached" "http://127.0.0.1:$P_FA/health" "$PY" "${UV[@]}" --port "$P_FA"
URL[fastapi-async]="http://127.0.0.1:$P_FA/cached-async"; PID[fastapi-async]=${PID[fastapi-def]}
URL[fastapi-computed]="http://127.0.0.1:$P_FA/computed"; PID[fastapi-computed]=${PID[fastapi-def]}
URL[fastapi-computed-async]="http://127.0.0.1:$P_FA/computed-async"; PID[fastapi-computed-async]=${PID[fastapi-def]}
start fastapi-h11-def "http://127.0.0.1:$P_FAH/cached" "http://127.0.0.1:$P_FAH/health" "$PY" "${UV[@]}" --port "$P_FAH" --loop asyncio --http h11
DWS=(-m densewire.server --host 127.0.0.1 --model hash:1024 --no-demo-tables --log-level warning --timeout-keep-alive 120)
start densewire-serve "http://127.0.0.1:$P_DW" "http://127.0.0.1:$P_DW/health" env PYTHONPATH="$ROOT/python/src" "$PY" "${DWS[@]}" --port "$P_DW"
start densewire-serve-computed "http://127.0.0.1:$P_DWNC" "http://127.0.0.1:$P_DWNC/health" env PYTHONPATH="$ROOT/python/src" "$PY" "${DWS[@]}" --port "$P_DWNC" --cache-bytes 0

# The two "computed" servers compute the same vectors (FastAPI's numpy code vs the Rust example).
"$PY" - "${URL[axum-computed]}" "${URL[fastapi-computed]}" "${URL[axum]}" <<'EOF'
import json, sys, urllib.request
import numpy as np
texts = [f"benchmark sentence number {i} about moving embeddings" for i in range(256)] + ["héllo wörld ✓", "x" * 300]
def get(base):
    r = urllib.request.Request(base + "/v1/embeddings", data=json.dumps({"input": texts}).encode(),
                               headers={"Content-Type": "application/json", "Accept": "application/octet-stream"})
    return np.frombuffer(urllib.request.urlopen(r).read(), "<f4").reshape(len(texts), -1)
a, b, c = (get(u) for u in sys.argv[1:])
assert a.shape == (len(texts), 1024) and np.abs(a - b).max() < 1e-6 and np.array_equal(a, c), (np.abs(a - b).max(), np.abs(a - c).max())
print(f"# check: axum --no-cache, FastAPI /computed and axum (cache) answer the same vectors (max |diff| {np.abs(a - b).max():.1e})")
EOF

ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
HZ=$(getconf CLK_TCK)
pair() { # server client
    local s=$1 c=$2 t0 t1 line
    t0=$(ticks "${PID[$s]}")
    case $c in
        rust-zero-copy|rust-copy)
            line=$($onclient $CLIENT --url "${URL[$s]}" --label "$s" --format raw --mode "${c#rust-}" --requests "$REQUESTS" --concurrency $CONC) ;;
        aiohttp|densewire-py)
            local py=aiohttp; [ "$c" = densewire-py ] && py=densewire
            line=$($onclient "$PY" "$ROOT/bench/rust/aiohttp_client.py" --url "${URL[$s]}" --label "$s" --client $py --requests "$REQUESTS" --concurrency $CONC) ;;
    esac
    t1=$(ticks "${PID[$s]}")
    echo "pair server=$s client=$c $line server_cpu_us_per_req=$(( (t1 - t0) * 1000000 / HZ / (REQUESTS + CONC) ))" | tee -a "$LOG"
}
sockref() {
    for streams in 1 10; do
        echo "socket $($SOCKBW --streams $streams --mib 2000 --writer-cpu "$SERVER_CPU" --reader-cpu "$CLIENT_CPU")" | tee -a "$LOG"
    done
}

: >"$LOG"
{
    echo "# $(date -u '+%F %T') UTC; $(lscpu | sed -n 's/^Model name: *//p'); nproc=$(nproc); $(rustc --version)"
    echo "# python $("$PY" -c 'import sys, aiohttp, fastapi, uvicorn, httpx, numpy, starlette; print(sys.version.split()[0], "aiohttp", aiohttp.__version__, "fastapi", fastapi.__version__, "starlette", starlette.__version__, "uvicorn", uvicorn.__version__, "httpx", httpx.__version__, "numpy", numpy.__version__)')"
    echo "# requests=$REQUESTS concurrency=$CONC batch=256 dims=1024 rounds=$ROUNDS server_cpu=$SERVER_CPU client_cpu=$CLIENT_CPU"
    echo "# load at the start: $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee -a "$LOG"
sockref
for r in $(seq 1 "$ROUNDS"); do
    echo "# round $r" | tee -a "$LOG"
    for s in fastapi-def fastapi-async axum densewire-serve; do
        for c in rust-zero-copy rust-copy aiohttp densewire-py; do pair $s $c; done
    done
    for s in axum-computed fastapi-computed fastapi-computed-async densewire-serve-computed fastapi-h11-def; do
        pair $s rust-zero-copy
    done
done
sockref
$onclient "$PY" "$ROOT/bench/rust/fastapi_profile.py" | tee -a "$LOG"
echo "# load at the end: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$LOG"
"$PY" "$ROOT/bench/rust/summarize.py" "$LOG"
