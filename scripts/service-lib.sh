# Sourced by the scripts that start a throw-away server for tests and local runs (chroma.sh, milvus.sh,
# elasticsearch.sh, opensearch.sh, postgres.sh): what they share.

# free_port: a TCP port free on 127.0.0.1 now
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# find_jdk MIN DIR...: the first DIR whose bin/java is a JDK of feature version >= MIN (a trailing / dropped)
find_jdk() {
  local min=$1 c v
  shift
  for c in "$@"; do
    [ -n "$c" ] && [ -x "$c/bin/java" ] || continue
    v=$("$c/bin/java" -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java\.specification\.version = //p' | head -1)
    if [ -n "$v" ] && [ "${v%%.*}" -ge "$min" ] 2>/dev/null; then echo "${c%/}"; return 0; fi
  done
  return 1
}

# stop_pidfile DIR SECONDS [pid|group|session]: SIGTERM the server whose pid DIR/pid holds (that process,
# its process group, or every process of its session), wait up to SECONDS for it to end, then SIGKILL
stop_pidfile() {
  local dir=$1 seconds=$2 how=${3:-pid} pid i
  [ -f "$dir/pid" ] || return 0
  pid=$(cat "$dir/pid")
  case "$how" in
    group) kill -- "-$pid" 2>/dev/null || kill "$pid" 2>/dev/null || true ;;
    session) pkill -TERM -s "$pid" 2>/dev/null || kill "$pid" 2>/dev/null || true ;;
    *) kill "$pid" 2>/dev/null || true ;;
  esac
  for i in $(seq 1 $((seconds * 4))); do
    if [ "$how" = session ]; then pgrep -s "$pid" >/dev/null 2>&1 || break; else kill -0 "$pid" 2>/dev/null || break; fi
    sleep 0.25
  done
  case "$how" in
    group) kill -9 -- "-$pid" 2>/dev/null || true ;;
    session) pkill -KILL -s "$pid" 2>/dev/null || true ;;
    *) kill -9 "$pid" 2>/dev/null || true ;;
  esac
}
