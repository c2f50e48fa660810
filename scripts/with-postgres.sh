#!/usr/bin/env bash
# Runs a command with a throwaway PostgreSQL cluster: initdb in a temp dir, a free
# loopback port, TOOLSHED_TEST_POSTGRES_URL exported, everything removed on exit.
set -euo pipefail

bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
[ -x "$bin/initdb" ] || { echo "PostgreSQL server binaries not found: run scripts/bootstrap.sh" >&2; exit 1; }

dir=$(mktemp -d "${TMPDIR:-/tmp}/toolshed-pg.XXXXXX")
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')

# initdb refuses to run as root: use the postgres system account then.
as_pg=()
if [ "$(id -u)" = 0 ]; then
    chown postgres "$dir"
    as_pg=(runuser -u postgres --)
fi

cleanup() {
    "${as_pg[@]}" "$bin/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true
    rm -rf "$dir"
}
trap cleanup EXIT INT TERM

"${as_pg[@]}" "$bin/initdb" -D "$dir/data" -U postgres --auth=trust -E UTF8 --no-sync >"$dir/initdb.log" 2>&1 \
    || { cat "$dir/initdb.log" >&2; exit 1; }
# Durability is pointless for a cluster that lives for one test run.
"${as_pg[@]}" "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
    -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300" \
    start >/dev/null || { cat "$dir/server.log" >&2; exit 1; }

export TOOLSHED_TEST_POSTGRES_URL="postgres://postgres@127.0.0.1:$port/postgres"
echo "PostgreSQL test cluster on 127.0.0.1:$port ($dir)" >&2
"$@"
