#!/usr/bin/env bash
# Install the services that the server tests start themselves: redis-server, nginx and PostgreSQL
# (Debian; PostgreSQL's binaries land in /usr/lib/postgresql/VERSION/bin).
#
#   scripts/services.sh install   # apt-get install redis-server nginx-light postgresql where missing (as root)
#   scripts/services.sh check     # exit 1 and say what is missing
#
# The tests never use system-wide instances: each test starts its own redis-server, nginx and
# PostgreSQL cluster (initdb + pg_ctl, as the 'postgres' user when run as root) on free loopback
# ports with its own files, and stops them afterwards. This script only makes the
# binaries present, and stops the instances that Debian's packages may start on install.
set -euo pipefail

missing() {
  local out=()
  command -v redis-server >/dev/null 2>&1 || [ -x /usr/bin/redis-server ] || out+=(redis-server)
  command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || out+=(nginx-light)
  compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || out+=(postgresql)
  echo "${out[@]:-}"
}

case "${1:-install}" in
  check)
    m="$(missing)"
    if [ -n "$m" ]; then echo "missing: $m (run scripts/services.sh install)" >&2; exit 1; fi
    echo "redis-server, nginx and postgresql are installed"
    ;;
  install)
    m="$(missing)"
    if [ -z "$m" ]; then echo "redis-server, nginx and postgresql are installed"; exit 0; fi
    if [ "$(id -u)" -ne 0 ]; then
      echo "need root to apt-get install: $m" >&2; exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    # policy-rc.d 101: do not start the packages' own services during install
    had_policy=0; [ -e /usr/sbin/policy-rc.d ] && had_policy=1
    if [ "$had_policy" -eq 0 ]; then printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d; chmod +x /usr/sbin/policy-rc.d; fi
    trap '[ "$had_policy" -eq 0 ] && rm -f /usr/sbin/policy-rc.d' EXIT
    apt-get update -qq
    # shellcheck disable=SC2086
    apt-get install -y -qq --no-install-recommends $m >/dev/null
    echo "installed: $m"
    ;;
  *)
    echo "usage: $0 [install|check]" >&2; exit 2
    ;;
esac
