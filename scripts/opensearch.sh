#!/usr/bin/env bash
# A throw-away single-node OpenSearch 3.5 with the k-NN plugin, for the tests of densewire's OpenSearch
# sink (python/tests/conftest.py starts one a test session) and for users' local runs.
#
#   scripts/opensearch.sh start DIR   start a node with its config, data and logs in DIR on a free loopback
#                                     port, wait for it to answer green, print its URL (http://127.0.0.1:PORT);
#                                     when DIR holds a node that was stopped or killed: that node again, on
#                                     its port and data (green once its shards are recovered)
#   scripts/opensearch.sh stop DIR    stop it and remove DIR
#   scripts/opensearch.sh install     fetch and unpack the distribution and the plugin only (scripts/test.sh)
#
# The distribution (Maven org.opensearch.distribution.integ-test-zip:opensearch:3.5.0:zip, no bundled JDK)
# and the k-NN plugin (org.opensearch.plugin:opensearch-knn:3.5.0.0:zip) come through Maven (cached in
# ~/.m2) and are unpacked once into $OPENSEARCH_INSTALL (default /var/tmp/densewire-opensearch-3.5.0).
# The k-NN zip carries no native libraries: only the lucene engine works (a faiss or nmslib index stops
# the node). The JDK (>= 21): $OPENSEARCH_JAVA_HOME, $ES_JAVA_HOME, $JAVA_HOME or the newest under /usr/lib/jvm.
# OpenSearch refuses to run as root: as root the node runs as 'nobody'. No security plugin (a test node);
# the heap is $OPENSEARCH_HEAP (default 512m).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/service-lib.sh"
cmd=${1:?usage: $0 start|stop DIR, or install}
dir=${2:-}
[ "$cmd" = install ] || [ -n "$dir" ] || { echo "usage: $0 start|stop DIR, or install" >&2; exit 2; }
version=3.5.0
install=${OPENSEARCH_INSTALL:-/var/tmp/densewire-opensearch-$version}
as=()
[ "$(id -u)" -eq 0 ] && as=(runuser -u nobody --)

java_home() {  # the first JDK >= 21 among the candidates
  find_jdk 21 "${OPENSEARCH_JAVA_HOME:-}" "${ES_JAVA_HOME:-}" "${JAVA_HOME:-}" \
    $(ls -d /usr/lib/jvm/*/ 2>/dev/null | sort -rV) && return
  echo "OpenSearch $version needs a JDK >= 21 (none in OPENSEARCH_JAVA_HOME, JAVA_HOME or /usr/lib/jvm):" \
    "see scripts/toolchains.sh" >&2
  return 1
}

ensure_install() {
  [ -f "$install/.complete" ] && return
  command -v mvn >/dev/null || { echo "mvn is needed to fetch OpenSearch (apt-get install maven)" >&2; exit 1; }
  local tmp; tmp=$(mktemp -d)
  mvn -q dependency:copy -Dartifact=org.opensearch.distribution.integ-test-zip:opensearch:$version:zip \
    -DoutputDirectory="$tmp" >&2
  mvn -q dependency:copy -Dartifact=org.opensearch.plugin:opensearch-knn:$version.0:zip -DoutputDirectory="$tmp" >&2
  rm -rf "$install.part" && mkdir -p "$install.part"
  (cd "$install.part" && unzip -q "$tmp/opensearch-$version.zip")
  mv "$install.part/opensearch-$version"/* "$install.part/" && rmdir "$install.part/opensearch-$version"
  OPENSEARCH_JAVA_HOME=$1 "$install.part/bin/opensearch-plugin" install --batch \
    "file://$tmp/opensearch-knn-$version.0.zip" >/dev/null
  chmod -R a+rX "$install.part"
  rm -rf "$tmp" "$install" && mv "$install.part" "$install" && touch "$install/.complete"
}

case "$cmd" in
  install)
    ensure_install "$(java_home)"
    echo "OpenSearch $version with k-NN in $install"
    ;;
  start)
    jdk=$(java_home)
    ensure_install "$jdk"
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    if [ ! -f "$dir/port" ]; then  # a new node: its config, data folder and port (kept for a restart)
      port=$(free_port)
      mkdir -p "$dir/data" "$dir/logs"
      cp -r "$install/config" "$dir/config"
      cat >>"$dir/config/opensearch.yml" <<EOF
cluster.name: densewire-test
node.name: node-1
path.data: $dir/data
path.logs: $dir/logs
network.host: 127.0.0.1
http.port: $port
transport.port: 0
discovery.type: single-node
cluster.routing.allocation.disk.threshold_enabled: false
EOF
      heap=${OPENSEARCH_HEAP:-512m}
      sed -i "s/^-Xms.*/-Xms$heap/; s/^-Xmx.*/-Xmx$heap/; s#logs/#$dir/logs/#g; s#=data\$#=$dir/data#" \
        "$dir/config/jvm.options"
      echo "$port" >"$dir/port"
    fi
    port=$(cat "$dir/port")
    rm -f "$dir/pid"
    if [ "$(id -u)" -eq 0 ]; then
      chown -R nobody "$dir"
      "${as[@]}" test -r "$dir/config/jvm.options" \
        || { echo "$dir is not reachable by the user nobody (a parent folder of mode 700?)" >&2; exit 1; }
    fi
    "${as[@]}" env OPENSEARCH_JAVA_HOME="$jdk" OPENSEARCH_PATH_CONF="$dir/config" \
      "$install/bin/opensearch" -d -p "$dir/pid" >"$dir/stdout.log" 2>&1 \
      || { cat "$dir/stdout.log" "$dir/logs/"*.log >&2 2>/dev/null; exit 1; }
    url="http://127.0.0.1:$port"
    for _ in $(seq 1 240); do
      if curl -fsS "$url/_cluster/health?wait_for_status=green&timeout=1s" >/dev/null 2>&1; then
        echo "$url"
        exit 0
      fi
      if [ -f "$dir/pid" ] && ! kill -0 "$(cat "$dir/pid")" 2>/dev/null; then break; fi
      grep -q "uncaught exception" "$dir/stdout.log" 2>/dev/null && break
      sleep 0.5
    done
    echo "OpenSearch did not start (log: $dir/logs/densewire-test.log):" >&2
    tail -40 "$dir/logs/densewire-test.log" "$dir/stdout.log" >&2 2>/dev/null || true
    exit 1
    ;;
  stop)
    stop_pidfile "$dir" 30
    rm -rf "$dir"
    ;;
  *) echo "usage: $0 start|stop DIR" >&2; exit 2 ;;
esac
