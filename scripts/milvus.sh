#!/usr/bin/env bash
# A throw-away Milvus Lite 2.5.1 server, standalone on TCP (the engine binary the PyPI milvus-lite wheel
# ships, as pymilvus' MilvusClient("x.db") would start it on a Unix socket), for the tests of densewire's
# Milvus sink (python/tests/conftest.py starts one a test session) and for users' local runs.
#
#   scripts/milvus.sh start DIR   start it on a free loopback port with its database DIR/milvus.db, wait
#                                 until pymilvus can list collections, print its URI (http://127.0.0.1:PORT);
#                                 when DIR holds a server that was stopped or killed: that one again, on
#                                 its port and database
#   scripts/milvus.sh stop DIR    stop it and remove DIR
#
# The binary is found through the Python $MILVUS_PYTHON, or the repository's .venv (scripts/setup-python.sh
# dev pins milvus-lite==2.5.1: the last release whose wheel carries the engine), or python3.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/service-lib.sh"
cmd=${1:?usage: $0 start|stop DIR}
dir=${2:?usage: $0 start|stop DIR}
root=$(cd "$(dirname "$0")/.." && pwd)
py=${MILVUS_PYTHON:-}
[ -n "$py" ] || { [ -x "$root/.venv/bin/python" ] && py=$root/.venv/bin/python; } || py=python3
case "$cmd" in
  start)
    lib=$("$py" -c 'import importlib.util as u, os  # not imported: its __init__ needs pkg_resources
print(os.path.join(u.find_spec("milvus_lite").submodule_search_locations[0], "lib"))' 2>/dev/null) || { echo "no milvus-lite in $py: run scripts/setup-python.sh dev (pip install milvus-lite==2.5.1)" >&2; exit 1; }
    [ -x "$lib/milvus" ] || { echo "$lib/milvus is missing: milvus-lite 2.5.1 ships it, later releases do not" >&2; exit 1; }
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    [ -f "$dir/port" ] || free_port >"$dir/port"  # kept for a restart on the same database
    port=$(cat "$dir/port")
    (cd "$dir" && LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec setsid "$lib/milvus" \
      "$dir/milvus.db" "127.0.0.1:$port" "${MILVUS_LOG_LEVEL:-ERROR}" >>"$dir/log" 2>&1 </dev/null) &
    echo $! >"$dir/pid"
    uri="http://127.0.0.1:$port"
    for _ in $(seq 1 240); do
      if "$py" -c "from pymilvus import MilvusClient; MilvusClient('$uri', timeout=2).list_collections()" \
          >/dev/null 2>&1; then
        echo "$uri"; exit 0
      fi
      kill -0 "$(cat "$dir/pid")" 2>/dev/null || break
      sleep 0.5
    done
    echo "Milvus Lite did not start:" >&2
    tail -30 "$dir/log" >&2 || true
    exit 1
    ;;
  stop)
    stop_pidfile "$dir" 10 session
    rm -rf "$dir"
    ;;
  *) echo "usage: $0 start|stop DIR" >&2; exit 2 ;;
esac
