#!/usr/bin/env bash
# The official MCP Python SDK against two replicas of the release server on one
# PostgreSQL database (run under scripts/with-postgres.sh, which exports
# TOOLSHED_TEST_POSTGRES_URL): the tests of what lives in the database rather
# than in a process (tasks, approvals, connected accounts), with the second replica as
# TOOLSHED_REPLICA_URL. scripts/e2e.sh runs it after the SQLite suite.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/env.sh

data=$(mktemp -d "${TMPDIR:-/tmp}/toolshed-replicas.XXXXXX")
database="$TOOLSHED_TEST_POSTGRES_URL"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
pids=()
cleanup() {
    status=$?
    kill "${pids[@]}" 2>/dev/null || true; wait "${pids[@]}" 2>/dev/null || true
    if [ "$status" -ne 0 ]; then
        for log in "$data"/stderr-*.log; do echo "e2e: $log (last 40 lines):" >&2; tail -n 40 "$log" >&2; done
    fi
    rm -rf "$data"
}
trap cleanup EXIT

# Starts one replica on `port` (sharing the data directory, so the keys, and the
# database); waits until it answers.
replica() {
    local port=$1
    TOOLSHED_ADDR="127.0.0.1:$port" TOOLSHED_DATA_DIR="$data" TOOLSHED_SITE_ROOT="$SITE_DIR" DATABASE_URL="$database" \
        RUST_LOG=warn TOOLSHED_INTERNAL_HOSTS=127.0.0.1 \
        target/toolshed serve >"$data/stdout-$port.log" 2>"$data/stderr-$port.log" &
    pids+=($!)
    for _ in $(seq 1 300); do
        curl -fsS "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && return
        kill -0 "${pids[-1]}" 2>/dev/null || { cat "$data/stderr-$port.log" >&2; exit 1; }
        sleep 0.1
    done
    echo "e2e: the replica on $port never answered" >&2; exit 1
}
# One after the other: the first creates the schema, the keys and the demo data.
first=$(free_port); replica "$first"
second=$(free_port); replica "$second"
# A real OpenID provider as the upstream app of connected accounts, sending
# people back to the first replica (end2end/fixtures/oidc-provider.mjs).
app_secret=$(python3 -c 'import secrets; print(secrets.token_hex(16))')
APP_CLIENT_ID=people-app APP_CLIENT_SECRET="$app_secret" APP_REDIRECT_URI="http://127.0.0.1:$first/connect/callback" \
    node end2end/fixtures/oidc-provider.mjs >"$data/oidc.log" 2>"$data/oidc-stderr.log" &
pids+=($!)
issuer=$(wait_for_line "$data/oidc.log" ready "${pids[-1]}")

admin_password=$(sed -n 's/^ *password: //p' "$data/stdout-$first.log")
token=$(DATABASE_URL="$database" TOOLSHED_DATA_DIR="$data" \
    target/toolshed admin create-token --username admin --name e2e --expires-in-days 1 | tail -n 1)
TOOLSHED_URL="http://127.0.0.1:$first" TOOLSHED_REPLICA_URL="http://127.0.0.1:$second" TOOLSHED_TOKEN="$token" \
    TOOLSHED_ADMIN_PASSWORD="$admin_password" TOOLSHED_TEST_ISSUER="$issuer" TOOLSHED_TEST_APP_SECRET="$app_secret" \
    PYTHONDONTWRITEBYTECODE=1 \
    "$TOOLS/venv/bin/python" -m pytest -q -p no:cacheprovider end2end/python/test_mcp_sdk.py -k "task or approv or connected"
