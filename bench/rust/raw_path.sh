#!/usr/bin/env bash
# densewire's axum integration against a plain axum handler answering the same bytes (issue 16,
# step 6): bench/rust/raw_path.rs serves both routes from one process (the same stored matrix; the
# plain route parses the request with serde's derive and answers stored header values, the
# densewire route is Negotiated + the EmbeddingsRequest extractor + DenseResponse). wrk (C, epoll:
# cheap enough per request that the server, not the load generator, is the bottleneck) drives each
# route in turn for DURATION seconds, 10 connections, interleaved round by round (ABBA order), the
# same request as rust/examples/client.rs sends, for two sizes:
#     small   8 x 384 float32    (12 KiB raw bodies)
#     large   256 x 1024 float32 (1 MiB raw bodies, the published workload)
# The server is pinned to SERVER_CPU and wrk to CLIENT_CPU. Each line is one run: requests/s and
# server CPU per request (/proc/PID/stat ticks).
# Then (CALLGRIND=1, the default) the server runs under valgrind --tool=callgrind twice per route
# and size, serving N1 and N2 requests of the Rust example client; (I(N2) - I(N1)) / (N2 - N1) is
# the server's instructions per request, which the load of a shared machine does not move.
#
#     bash bench/rust/raw_path.sh [ROUNDS]    (ROUNDS default 7; DURATION=3 seconds a run)
#
# Needs wrk (Debian: apt-get install wrk) and valgrind. Raw lines go to bench/rust/raw_path.txt
# (LOG=...); the summary (best and median of the rounds, the densewire / plain ratios) is printed
# at the end by raw_path_summary.py.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
ROUNDS=${1:-7}
DURATION=${DURATION:-3}
CALLGRIND=${CALLGRIND:-1}
CONC=10
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
LOG=${LOG:-$ROOT/bench/rust/raw_path.txt}
cd "$ROOT/rust"
cargo build --release --locked --features full --example client -q
SERVER=$(cargo build --release --locked --features full --bench raw_path --message-format=json -q |
    sed -n 's/.*"executable":"\([^"]*raw_path[^"]*\)".*/\1/p' | tail -1)
CLIENT=target/release/examples/client
[ -x "$SERVER" ] || { echo "raw_path server not built" >&2; exit 1; }
if [ "$(nproc)" -ge 2 ]; then onserver="taskset -c $SERVER_CPU"; onclient="taskset -c $CLIENT_CPU"; else onserver=""; onclient=""; fi
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_up() { for _ in $(seq 1 600); do curl -sf -o /dev/null "$1" && return 0; sleep 0.2; done; echo "not up: $1" >&2; return 1; }
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap 'cleanup; rm -rf "$work"' EXIT
command -v wrk >/dev/null || { echo "raw_path.sh needs wrk (apt-get install wrk)" >&2; exit 1; }
declare -A PORT PID ROWS DIMS
ROWS[small]=8; DIMS[small]=384
ROWS[large]=256; DIMS[large]=1024
work=$(mktemp -d)
# The request of rust/examples/client.rs (same texts, Base64 asked for JSON, Accept raw first).
for size in small large; do
    texts=$(seq 0 $((ROWS[$size] - 1)) | sed 's/.*/"benchmark sentence number & about moving embeddings"/' | paste -sd,)
    cat >"$work/$size.lua" <<EOF
wrk.method = "POST"
wrk.body = '{"input":[$texts],"encoding_format":"base64"}'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "application/octet-stream, application/json;q=0.1"
EOF
done

for size in small large; do
    PORT[$size]=$(port)
    $onserver "$SERVER" --port "${PORT[$size]}" --rows "${ROWS[$size]}" --dims "${DIMS[$size]}" >/dev/null 2>&1 &
    pids+=($!); PID[$size]=$!
    wait_up "http://127.0.0.1:${PORT[$size]}/health"
done

# The two routes answer the same bytes: body and headers (but Date).
for size in small large; do
    body='{"input":['$(seq -s, -f '"text %g"' 1 "${ROWS[$size]}")'],"encoding_format":"base64"}'
    for route in plain densewire; do
        curl -s -D "/tmp/raw_path.$route.h" -o "/tmp/raw_path.$route.b" -H 'Content-Type: application/json' \
            -H 'Accept: application/octet-stream, application/json;q=0.1' -d "$body" \
            "http://127.0.0.1:${PORT[$size]}/$route/v1/embeddings"
        grep -iv '^date:' "/tmp/raw_path.$route.h" | tr -d '\r' | sort >"/tmp/raw_path.$route.hs"
    done
    cmp /tmp/raw_path.plain.b /tmp/raw_path.densewire.b
    diff /tmp/raw_path.plain.hs /tmp/raw_path.densewire.hs
done
rm -f /tmp/raw_path.*
echo "# check: plain and densewire answer the same body and headers, both sizes"

ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
HZ=$(getconf CLK_TCK)
run() { # size route
    local size=$1 route=$2 t0 t1 out n rate
    t0=$(ticks "${PID[$size]}")
    out=$($onclient wrk -t1 -c$CONC -d"${DURATION}s" -s "$work/$size.lua" "http://127.0.0.1:${PORT[$size]}/$route/v1/embeddings")
    t1=$(ticks "${PID[$size]}")
    if grep -q "Non-2xx\|Socket errors" <<<"$out"; then echo "$out" >&2; echo "wrk saw errors" >&2; exit 1; fi
    n=$(sed -n 's/^ *\([0-9]*\) requests in.*/\1/p' <<<"$out")
    rate=$(sed -n 's/^Requests\/sec: *//p' <<<"$out")
    echo "run size=$size route=$route requests=$n req_per_s=$rate server_cpu_us_per_req=$(( (t1 - t0) * 1000000 / HZ / n ))" | tee -a "$LOG"
}

: >"$LOG"
{
    echo "# $(date -u '+%F %T') UTC; $(lscpu | sed -n 's/^Model name: *//p'); nproc=$(nproc); $(rustc --version)"
    echo "# axum $(sed -n '/^name = "axum"$/{n;p}' Cargo.lock | cut -d'"' -f2), hyper $(sed -n '/^name = "hyper"$/{n;p}' Cargo.lock | cut -d'"' -f2), tokio $(sed -n '/^name = "tokio"$/{n;p}' Cargo.lock | cut -d'"' -f2), reqwest $(sed -n '/^name = "reqwest"$/{n;p}' Cargo.lock | cut -d'"' -f2); OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset} OPENBLAS_L2_SIZE=${OPENBLAS_L2_SIZE:-unset}"
    echo "# $(wrk --version 2>&1 | head -1 | cut -d' ' -f1-2); rounds=$ROUNDS duration=${DURATION}s connections=$CONC small=${ROWS[small]}x${DIMS[small]} large=${ROWS[large]}x${DIMS[large]} server_cpu=$SERVER_CPU client_cpu=$CLIENT_CPU"
    echo "# load at the start: $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee -a "$LOG"
for r in $(seq 1 "$ROUNDS"); do
    echo "# round $r" | tee -a "$LOG"
    if [ $((r % 2)) = 1 ]; then order="plain densewire"; else order="densewire plain"; fi
    for size in small large; do
        for route in $order; do run "$size" "$route"; done
    done
done
echo "# load at the end: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$LOG"
cleanup; pids=()

if [ "$CALLGRIND" = 1 ] && command -v valgrind >/dev/null; then
    cg=$(mktemp -d)
    for size in small large; do
        if [ "$size" = small ]; then n1=200; n2=1200; else n1=50; n2=250; fi
        for route in plain densewire; do
            for n in $n1 $n2; do
                p=$(port)
                $onserver valgrind --tool=callgrind --callgrind-out-file="$cg/$size.$route.$n" \
                    "$SERVER" --port "$p" --rows "${ROWS[$size]}" --dims "${DIMS[$size]}" --exit-after $((n + CONC)) \
                    >/dev/null 2>&1 &
                vg=$!; pids+=($vg)
                wait_up "http://127.0.0.1:$p/health"
                $onclient $CLIENT --url "http://127.0.0.1:$p/$route" --format raw --mode zero-copy --requests "$n" \
                    --concurrency $CONC --batch "${ROWS[$size]}" >/dev/null
                wait "$vg"
            done
            i1=$(sed -n 's/^totals: *//p' "$cg/$size.$route.$n1"); i2=$(sed -n 's/^totals: *//p' "$cg/$size.$route.$n2")
            echo "callgrind size=$size route=$route n1=$n1 n2=$n2 instructions_n1=$i1 instructions_n2=$i2 instructions_per_req=$(( (i2 - i1) / (n2 - n1) ))" | tee -a "$LOG"
        done
    done
    rm -rf "$cg"
fi
python3 "$ROOT/bench/rust/raw_path_summary.py" "$LOG"
