#!/usr/bin/env bash
# Install the services that the server tests start themselves: redis-server, nginx and PostgreSQL
# (Debian; PostgreSQL's binaries land in /usr/lib/postgresql/VERSION/bin), and the pgvector extension
# for that PostgreSQL, which Debian 12 does not package: built from the release source vendored in
# scripts/vendor/pgvector-$PGVECTOR_VERSION.tar.gz (checked against its .sha256).
#
#   scripts/services.sh install   # apt-get install redis-server nginx-light postgresql where missing, then
#                                 # build and install pgvector where missing (as root)
#   scripts/services.sh check     # exit 1 and say what is missing
#
# The tests never use system-wide instances: each test starts its own redis-server, nginx and
# PostgreSQL cluster (initdb + pg_ctl, as the 'postgres' user when run as root) on free loopback
# ports with its own files, and stops them afterwards. This script only makes the
# binaries present, and stops the instances that Debian's packages may start on install.
set -euo pipefail
cd "$(dirname "$0")"

PGVECTOR_VERSION=0.8.6
PGVECTOR_TARBALL="vendor/pgvector-$PGVECTOR_VERSION.tar.gz"
PGVECTOR_SOURCE="https://github.com/pgvector/pgvector/archive/refs/tags/v$PGVECTOR_VERSION.tar.gz"

pg_bindir() { compgen -G '/usr/lib/postgresql/*/bin/initdb' | sort -V | tail -1 | xargs -r dirname; }

# pgvector is installed for the newest PostgreSQL (the one the tests start) at the vendored version
pgvector_installed() {
  local bin; bin="$(pg_bindir)"
  [ -n "$bin" ] || return 1
  local share; share="$("$bin/pg_config" --sharedir 2>/dev/null)" || return 1
  [ -f "$share/extension/vector--$PGVECTOR_VERSION.sql" ] && [ -f "$("$bin/pg_config" --pkglibdir)/vector.so" ]
}

install_pgvector() {
  local bin major; bin="$(pg_bindir)"; major="$(basename "$(dirname "$bin")")"
  if [ ! -f "$PGVECTOR_TARBALL" ]; then
    echo "scripts/$PGVECTOR_TARBALL is missing: download the pgvector $PGVECTOR_VERSION release source from" >&2
    echo "  $PGVECTOR_SOURCE" >&2
    echo "save it as scripts/$PGVECTOR_TARBALL and run this again (its sha256 is checked)" >&2
    exit 1
  fi
  (cd vendor && sha256sum --quiet -c "pgvector-$PGVECTOR_VERSION.tar.gz.sha256") || {
    echo "scripts/$PGVECTOR_TARBALL does not match its sha256: get it again from $PGVECTOR_SOURCE" >&2; exit 1; }
  # the headers of the server it is built for, and a compiler (clang too: Debian's PostgreSQL has JIT bitcode)
  [ -f "$("$bin/pg_config" --includedir-server)/postgres.h" ] || apt-get install -y -qq --no-install-recommends \
    "postgresql-server-dev-$major" build-essential >/dev/null
  local build; build="$(mktemp -d)"
  tar xzf "$PGVECTOR_TARBALL" -C "$build"
  make -s -C "$build/pgvector-$PGVECTOR_VERSION" PG_CONFIG="$bin/pg_config" OPTFLAGS="" >/dev/null
  make -s -C "$build/pgvector-$PGVECTOR_VERSION" PG_CONFIG="$bin/pg_config" install >/dev/null
  rm -rf "$build"
  pgvector_installed || { echo "pgvector $PGVECTOR_VERSION did not install into $bin/pg_config's directories" >&2; exit 1; }
  echo "installed: pgvector $PGVECTOR_VERSION for PostgreSQL $major"
}

missing() {
  local out=()
  command -v redis-server >/dev/null 2>&1 || [ -x /usr/bin/redis-server ] || out+=(redis-server)
  command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || out+=(nginx-light)
  compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || out+=(postgresql)
  echo "${out[@]:-}"
}

need_pgvector() { pgvector_installed && return 1; return 0; }

case "${1:-install}" in
  check)
    m="$(missing)"
    need_pgvector && m="${m:+$m }pgvector-$PGVECTOR_VERSION"
    if [ -n "$m" ]; then echo "missing: $m (run scripts/services.sh install)" >&2; exit 1; fi
    echo "redis-server, nginx, postgresql and pgvector $PGVECTOR_VERSION are installed"
    ;;
  install)
    m="$(missing)"
    if [ -z "$m" ] && ! need_pgvector; then
      echo "redis-server, nginx, postgresql and pgvector $PGVECTOR_VERSION are installed"; exit 0
    fi
    if [ "$(id -u)" -ne 0 ]; then
      echo "need root to install: ${m:+$m }$(need_pgvector && echo "pgvector-$PGVECTOR_VERSION")" >&2; exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    # policy-rc.d 101: do not start the packages' own services during install
    had_policy=0; [ -e /usr/sbin/policy-rc.d ] && had_policy=1
    if [ "$had_policy" -eq 0 ]; then printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d; chmod +x /usr/sbin/policy-rc.d; fi
    trap '[ "$had_policy" -eq 0 ] && rm -f /usr/sbin/policy-rc.d' EXIT
    apt-get update -qq
    if [ -n "$m" ]; then
      # shellcheck disable=SC2086
      apt-get install -y -qq --no-install-recommends $m >/dev/null
      echo "installed: $m"
    fi
    need_pgvector && install_pgvector
    true
    ;;
  *)
    echo "usage: $0 [install|check]" >&2; exit 2
    ;;
esac
