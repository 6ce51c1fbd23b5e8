#!/usr/bin/env bash
# The toolchains that `make test` needs besides Python, checked in the first seconds of the run.
#
#   scripts/toolchains.sh          check; install what the package registries can give (as root);
#                                  then exit 1 with one line per tool that is still missing
#   scripts/toolchains.sh --check  only check and report, install nothing
#
# What is installed where missing (Debian, as root):
#   Go >= 1.26     Debian's golang-go (1.19 on bookworm) fetches the Go toolchain module
#                  golang.org/toolchain from the Go module proxy, as GOTOOLCHAIN does; it is
#                  unpacked into ~/.cache/densewire/go and used from there (GO is exported by test.sh)
#   Node.js >= 20  Debian's nodejs (the suite also needs npm)
#   JDK 17, Maven  Debian's openjdk-17-jdk-headless, maven
#   Ruby           Debian's ruby (ruby/ci.sh adds ruby-msgpack, ruby-google-protobuf)
# What cannot be installed from here, and stops the run:
#   Rust >= 1.85 (edition 2024) with cargo: Debian bookworm's rustc is 1.63; install rustup
#   (https://rustup.rs), then `rustup toolchain install stable`.
#   A JDK >= 21 for Elasticsearch (scripts/elasticsearch.sh; ES_JAVA_HOME, JAVA_HOME or /usr/lib/jvm/*):
#   Debian bookworm has only 17; install e.g. Temurin 21+ and set ES_JAVA_HOME.
set -uo pipefail

mode=${1:-install}
GO_MIN=1.26 GO_VERSION=1.26.8 NODE_MIN=20 RUST_MIN=1.85 JAVA_MIN=17
gocache="${XDG_CACHE_HOME:-$HOME/.cache}/densewire/go"

# version_ge HAVE WANT: true when dotted version HAVE >= WANT
version_ge() { [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n1)" = "$2" ]; }
root() { [ "$(id -u)" -eq 0 ]; }
apt_install() {
  root || return 1
  if [ -z "${apt_updated:-}" ]; then apt-get update -qq >/dev/null 2>&1; apt_updated=1; fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null 2>&1
}

[ -x "$HOME/.cargo/bin/cargo" ] && PATH="$HOME/.cargo/bin:$PATH"
[ -x /usr/local/go/bin/go ] && PATH="/usr/local/go/bin:$PATH"
[ -x "$gocache/bin/go" ] && PATH="$gocache/bin:$PATH"

go_version() { command -v go >/dev/null 2>&1 && go env GOVERSION 2>/dev/null | sed 's/^go//'; }
node_version() { command -v node >/dev/null 2>&1 && node -p 'process.versions.node' 2>/dev/null; }
rust_version() { command -v rustc >/dev/null 2>&1 && rustc --version 2>/dev/null | awk '{print $2}'; }
java_version() { command -v javac >/dev/null 2>&1 && javac -version 2>&1 | awk '{print $2}'; }

install_go() {
  # an older Go from Debian downloads the toolchain module through the module proxy
  command -v go >/dev/null 2>&1 || apt_install golang-go || return 1
  local mod="golang.org/toolchain@v0.0.1-go${GO_VERSION}.linux-$(dpkg --print-architecture)"
  local dir
  dir=$(GOFLAGS=-mod=mod GO111MODULE=on go mod download -json "$mod" 2>/dev/null \
        | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p') || return 1
  [ -n "$dir" ] && [ -d "$dir" ] || return 1
  rm -rf "$gocache" && mkdir -p "$(dirname "$gocache")" && cp -r "$dir" "$gocache" || return 1
  chmod -R u+w "$gocache" && chmod +x "$gocache"/bin/* "$gocache"/pkg/tool/*/* || return 1
  PATH="$gocache/bin:$PATH"
}

missing=()
have=$(go_version)
if ! { [ -n "$have" ] && version_ge "$have" "$GO_MIN"; }; then
  if [ "$mode" = install ] && install_go && version_ge "$(go_version)" "$GO_MIN"; then
    echo "toolchains: installed Go $(go_version) in $gocache"
  else
    missing+=("Go >= $GO_MIN (found ${have:-none}): as root this script fetches it through Debian's golang-go; or install Go $GO_VERSION and put it on PATH")
  fi
fi

have=$(node_version)
if ! { [ -n "$have" ] && version_ge "$have" "$NODE_MIN" && command -v npm >/dev/null 2>&1; }; then
  if [ "$mode" = install ] && apt_install nodejs npm && version_ge "$(node_version)" "$NODE_MIN"; then
    echo "toolchains: installed Node.js $(node_version) from Debian"
  else
    missing+=("Node.js >= $NODE_MIN with npm (found ${have:-none}): apt-get install nodejs npm (Debian's nodejs must be >= $NODE_MIN, e.g. from the NodeSource repository)")
  fi
fi

have=$(rust_version)
if ! { [ -n "$have" ] && version_ge "$have" "$RUST_MIN" && command -v cargo >/dev/null 2>&1; }; then
  missing+=("Rust >= $RUST_MIN with cargo (found ${have:-none}): Debian's rustc is too old; install rustup (https://rustup.rs) then 'rustup toolchain install stable'")
fi

es_java=$(bash "$(dirname "$0")/elasticsearch.sh" java 2>/dev/null)
if [ -z "$es_java" ]; then
  missing+=("JDK >= 21 for Elasticsearch (found none in ES_JAVA_HOME, JAVA_HOME, /usr/lib/jvm/*): Debian bookworm's is 17; install e.g. Temurin 21+ (https://adoptium.net) and set ES_JAVA_HOME")
fi

have=$(java_version)
if ! { [ -n "$have" ] && version_ge "$have" "$JAVA_MIN" && command -v mvn >/dev/null 2>&1; }; then
  if [ "$mode" = install ] && apt_install openjdk-17-jdk-headless maven && version_ge "$(java_version)" "$JAVA_MIN"; then
    echo "toolchains: installed JDK $(java_version) and Maven from Debian"
  else
    missing+=("JDK >= $JAVA_MIN with Maven (found ${have:-none}): apt-get install openjdk-17-jdk-headless maven")
  fi
fi

if ! command -v ruby >/dev/null 2>&1; then
  if [ "$mode" = install ] && apt_install ruby; then
    echo "toolchains: installed $(ruby --version | awk '{print $1, $2}') from Debian"
  else
    missing+=("Ruby: apt-get install ruby")
  fi
fi

if [ ${#missing[@]} -gt 0 ]; then
  root || [ "$mode" != install ] || echo "toolchains: not root, so nothing could be installed with apt-get" >&2
  for m in "${missing[@]}"; do echo "toolchains: missing $m" >&2; done
  exit 1
fi
echo "toolchains: go $(go_version), node $(node_version), rust $(rust_version), javac $(java_version), $(ruby --version | awk '{print $1, $2}'), Elasticsearch's JDK $es_java"
