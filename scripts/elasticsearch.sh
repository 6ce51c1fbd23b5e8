#!/usr/bin/env bash
# A throw-away single-node Elasticsearch 9.5.3 for the tests of the ES destination and for users' local
# runs (beside scripts/postgres.sh).
#
#   scripts/elasticsearch.sh start DIR [--secure]
#       start a node with its config, data and logs in DIR, on 127.0.0.1 on a free port (the same port
#       again when DIR already holds a node that was stopped or killed: its data is kept), single node,
#       security off, a 512 MB heap (ES_HEAP to change); wait until every primary shard is started
#       (status yellow and none initializing: a single node never assigns replicas, so an index with the
#       default number_of_replicas 1 keeps it yellow; a fresh node is green); print the URL.
#       --secure: security on, HTTPS with a CA made for this node (DIR/ca.crt), the 'elastic' user's
#       password ES_PASSWORD (default densewire-test); prints https://127.0.0.1:PORT
#   scripts/elasticsearch.sh stop DIR     stop it (SIGTERM, then SIGKILL) and remove DIR
#   scripts/elasticsearch.sh install      fetch and unpack the distribution; print its home
#   scripts/elasticsearch.sh java         print the JDK >= 21 it runs on, or say what is missing
#
# The distribution is Maven Central's org.elasticsearch.distribution.integ-test-zip:elasticsearch:9.5.3:zip
# (server, transport-netty4, x-pack-core, x-pack-security; no bundled JDK), fetched with mvn into ~/.m2
# and unpacked into ${XDG_CACHE_HOME:-~/.cache}/densewire (as root: /var/cache/densewire, readable by
# the node's user). ES needs a JDK >= 21 with jdk.incubator.vector: ES_JAVA_HOME, JAVA_HOME, or the
# newest under /usr/lib/jvm. ES refuses to run as root: as root the node runs as the system user
# 'densewire-es' (created when missing), so DIR must be reachable by that user (e.g. under /tmp).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/service-lib.sh"
ES_VERSION=9.5.3
ES_ARTIFACT="org.elasticsearch.distribution.integ-test-zip:elasticsearch:$ES_VERSION:zip"
JAVA_MIN=21
ES_USER=densewire-es
root() { [ "$(id -u)" -eq 0 ]; }
if root; then cache=/var/cache/densewire; else cache="${XDG_CACHE_HOME:-$HOME/.cache}/densewire"; fi
home="$cache/elasticsearch-$ES_VERSION"

find_java() { find_jdk "$JAVA_MIN" "${ES_JAVA_HOME:-}" "${JAVA_HOME:-}" $(compgen -G '/usr/lib/jvm/*' | sort -rV); }
need_java() {
  find_java || { echo "elasticsearch: no JDK >= $JAVA_MIN (looked at ES_JAVA_HOME, JAVA_HOME, /usr/lib/jvm/*):" \
    "install one (e.g. Temurin 25, or Debian trixie's openjdk-21-jdk-headless) and set ES_JAVA_HOME" >&2; exit 1; }
}

install() {
  [ -x "$home/bin/elasticsearch" ] && { echo "$home"; return 0; }
  command -v mvn >/dev/null 2>&1 || { echo "elasticsearch: Maven (mvn) is needed to fetch $ES_ARTIFACT" >&2; exit 1; }
  local repo zip
  repo="${MAVEN_REPO_LOCAL:-$HOME/.m2/repository}"
  zip="$repo/org/elasticsearch/distribution/integ-test-zip/elasticsearch/$ES_VERSION/elasticsearch-$ES_VERSION.zip"
  if [ ! -f "$zip" ]; then
    mvn -q -B dependency:get -Dartifact="$ES_ARTIFACT" -Dtransitive=false -Dmaven.repo.local="$repo" >&2 \
      || { echo "elasticsearch: mvn could not fetch $ES_ARTIFACT" >&2; exit 1; }
  fi
  [ -f "$zip" ] || { echo "elasticsearch: $zip is missing after mvn dependency:get" >&2; exit 1; }
  mkdir -p "$cache"
  local tmp; tmp=$(mktemp -d "$cache/.unpack.XXXXXX")
  python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' "$zip" "$tmp"
  chmod -R a+rX "$tmp" && chmod a+x "$tmp/elasticsearch-$ES_VERSION"/bin/*
  rm -rf "$home" && mv "$tmp/elasticsearch-$ES_VERSION" "$home" && rm -rf "$tmp"
  chmod a+rx "$cache"
  echo "$home"
}

as=()
if root; then as=(runuser -u "$ES_USER" --); fi

ensure_user() {
  root || return 0
  id "$ES_USER" >/dev/null 2>&1 && return 0
  useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin "$ES_USER"
}

# make_tls DIR: a CA and a certificate for 127.0.0.1/localhost signed by it, in DIR/config
make_tls() {
  local d=$1 c=$1/config
  openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj "/CN=densewire test CA" \
    -keyout "$d/ca.key" -out "$d/ca.crt" >/dev/null 2>&1
  openssl req -newkey rsa:2048 -nodes -subj "/CN=localhost" -keyout "$c/node.key" -out "$d/node.csr" >/dev/null 2>&1
  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' > "$d/node.ext"
  openssl x509 -req -in "$d/node.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -CAcreateserial -days 30 \
    -extfile "$d/node.ext" -out "$c/node.crt" >/dev/null 2>&1
  cp "$d/ca.crt" "$c/ca.crt"
  rm -f "$d/node.csr" "$d/node.ext" "$d/ca.srl"
}

start() {
  local dir=$1 secure=${2:-}
  local java; java=$(need_java)
  install >/dev/null
  ensure_user
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  local scheme=http
  if [ ! -f "$dir/port" ]; then  # a new node: its own config, ports and (secure) password and certificates
    cp -r "$home/config" "$dir/config"
    mkdir -p "$dir/data" "$dir/logs" "$dir/tmp"
    echo "$(free_port) $(free_port)" > "$dir/port"
    if [ "$secure" = --secure ]; then
      make_tls "$dir"
      printf '%s' "${ES_PASSWORD:-densewire-test}" | ES_JAVA_HOME=$java ES_PATH_CONF="$dir/config" \
        "$home/bin/elasticsearch-keystore" create >/dev/null
      printf '%s' "${ES_PASSWORD:-densewire-test}" | ES_JAVA_HOME=$java ES_PATH_CONF="$dir/config" \
        "$home/bin/elasticsearch-keystore" add -x bootstrap.password >/dev/null
      echo secure > "$dir/mode"
    fi
    root && chown -R "$ES_USER" "$dir"
  fi
  [ -f "$dir/mode" ] && scheme=https
  read -r port tport < "$dir/port"
  if ! "${as[@]}" test -w "$dir/data"; then
    echo "elasticsearch: $dir is not writable by ${ES_USER} (a parent directory is private?): use a DIR under /tmp" >&2
    exit 1
  fi
  local settings=(-Ediscovery.type=single-node -Enetwork.host=127.0.0.1 -Ehttp.port="$port"
    -Etransport.port="$tport" -Epath.data="$dir/data" -Epath.logs="$dir/logs" -Ecluster.name=densewire
    -Ecluster.routing.allocation.disk.threshold_enabled=false)
  if [ "$scheme" = https ]; then
    settings+=(-Expack.security.enabled=true -Expack.security.http.ssl.enabled=true
      -Expack.security.http.ssl.key=node.key -Expack.security.http.ssl.certificate=node.crt
      -Expack.security.http.ssl.certificate_authorities=ca.crt -Expack.security.authc.api_key.enabled=true)
  else
    settings+=(-Expack.security.enabled=false)
  fi
  rm -f "$dir/pid"
  # -d: the CLI returns once the node has started (or failed to); -p: its pid, for stop and for tests
  if ! "${as[@]}" env ES_JAVA_HOME="$java" ES_PATH_CONF="$dir/config" ES_TMPDIR="$dir/tmp" \
      ES_JAVA_OPTS="-Xms${ES_HEAP:-512m} -Xmx${ES_HEAP:-512m}" \
      "$home/bin/elasticsearch" -d -p "$dir/pid" "${settings[@]}" >"$dir/start.log" 2>&1; then
    grep -E "^(ERROR|[a-z.]+Exception|java\.)" "$dir/start.log" | head -5 >&2; echo "elasticsearch: see $dir/start.log" >&2; exit 1
  fi
  local url="$scheme://127.0.0.1:$port" auth=() i
  [ "$scheme" = https ] && auth=(--cacert "$dir/ca.crt" -u "elastic:${ES_PASSWORD:-densewire-test}")
  for i in $(seq 1 600); do
    if curl -fsS "${auth[@]}" "$url/_cluster/health?wait_for_status=yellow&wait_for_no_initializing_shards=true&timeout=1s" >/dev/null 2>&1; then
      echo "$url"; return 0
    fi
    [ -f "$dir/pid" ] && ! kill -0 "$(cat "$dir/pid")" 2>/dev/null && break
    sleep 0.1
  done
  echo "elasticsearch: the node at $url did not start its shards; its log:" >&2
  tail -n 40 "$dir/logs/densewire.log" >&2 2>/dev/null
  exit 1
}

stop() {
  local dir=$1
  stop_pidfile "$dir" 30
  rm -rf "$dir"
}

cmd=${1:?usage: $0 start DIR [--secure] | stop DIR | install | java}
case "$cmd" in
  start) start "${2:?usage: $0 start DIR [--secure]}" "${3:-}" ;;
  stop) stop "${2:?usage: $0 stop DIR}" ;;
  install) need_java >/dev/null; install ;;
  java) need_java ;;
  *) echo "usage: $0 start DIR [--secure] | stop DIR | install | java" >&2; exit 2 ;;
esac
