#!/usr/bin/env bash
# A throw-away PostgreSQL cluster with the pgvector extension, for the tests of the languages whose
# drivers load vectors by binary COPY (Go pgx, Rust tokio-postgres, Java PgJDBC). Python's tests start
# their own (python/tests/pgvector_support.py).
#
#   scripts/postgres.sh start DIR   initdb in DIR, start on a free loopback port, CREATE EXTENSION vector,
#                                   print the URL (postgresql://dw@127.0.0.1:PORT/postgres)
#   scripts/postgres.sh stop DIR    stop it and remove DIR
#
# The binaries and pgvector come from scripts/services.sh install. As root the server runs as the
# 'postgres' user (PostgreSQL refuses to run as root).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/service-lib.sh"
cmd=${1:?usage: $0 start|stop DIR}
dir=${2:?usage: $0 start|stop DIR}
bin=$(compgen -G '/usr/lib/postgresql/*/bin/initdb' | sort -V | tail -1 | xargs -r dirname)
[ -n "$bin" ] || { echo "PostgreSQL is not installed: run scripts/services.sh install" >&2; exit 1; }
as=()
[ "$(id -u)" -eq 0 ] && as=(runuser -u postgres --)
case "$cmd" in
  start)
    port=$(free_port)
    mkdir -p "$dir"
    [ "$(id -u)" -eq 0 ] && chown postgres "$dir"
    "${as[@]}" "$bin/initdb" -D "$dir/data" -U dw --auth=trust -E UTF8 --no-locale >"$dir/initdb.log" 2>&1 \
      || { cat "$dir/initdb.log" >&2; exit 1; }
    "${as[@]}" "$bin/pg_ctl" -D "$dir/data" -l "$dir/log" -w -t 60 \
      -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c fsync=off" start >/dev/null \
      || { cat "$dir/log" >&2; exit 1; }
    "$bin/psql" -q -h 127.0.0.1 -p "$port" -U dw -d postgres -c 'CREATE EXTENSION vector' >/dev/null
    echo "postgresql://dw@127.0.0.1:$port/postgres"
    ;;
  stop)
    [ -d "$dir/data" ] && "${as[@]}" "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
    rm -rf "$dir"
    ;;
  *) echo "usage: $0 start|stop DIR" >&2; exit 2 ;;
esac
