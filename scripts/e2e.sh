#!/usr/bin/env bash
# Starts the release server on a free port with a fresh SQLite database, runs the
# browser tests in end2end/ (and the MCP SDK clients, Node then Python) against it,
# and stops it. `scripts/e2e.sh bundles tools` runs only those end2end/tests/*.test.mjs
# (and `E2E_ONLY='some words'` only the tests of theirs whose names match).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/env.sh

data=$(mktemp -d "${TMPDIR:-/tmp}/toolshed-e2e.XXXXXX")
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
base="http://127.0.0.1:$port"
# The company's identity provider: a real OpenID provider (end2end/fixtures/oidc-provider.mjs).
sso_secret=$(python3 -c 'import secrets; print(secrets.token_hex(16))')
# The same provider is also an upstream app people connect their accounts at
# (connected accounts); every token it issues is listed in tokens.txt, which
# the tests look for in the database and the server's log.
app_secret=$(python3 -c 'import secrets; print(secrets.token_hex(16))')
CLIENT_ID=toolshed CLIENT_SECRET="$sso_secret" REDIRECT_URI="$base/auth/sso/callback" \
    APP_CLIENT_ID=people-app APP_CLIENT_SECRET="$app_secret" APP_REDIRECT_URI="$base/connect/callback" TOKENS_FILE="$data/tokens.txt" \
    node end2end/fixtures/oidc-provider.mjs >"$data/oidc.log" 2>"$data/oidc-stderr.log" &
provider=$!
# A certificate authority of the tests' own and a certificate for 127.0.0.1 from it:
# MCP clients' metadata documents are served on https (end2end/fixtures/client-documents.mjs),
# and the server trusts that authority alone (SSL_CERT_FILE).
tls="$data/tls"; mkdir -p "$tls"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 -subj "/CN=Toolshed tests CA" \
    -keyout "$tls/ca.key" -out "$tls/ca.pem" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "/CN=127.0.0.1" \
    -keyout "$tls/server.key" -out "$tls/server.csr" 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n' >"$tls/ext.cnf"
openssl x509 -req -in "$tls/server.csr" -CA "$tls/ca.pem" -CAkey "$tls/ca.key" -CAcreateserial -days 2 \
    -extfile "$tls/ext.cnf" -out "$tls/server.pem" 2>/dev/null
issuer=$(wait_for_line "$data/oidc.log" ready "$provider")
TOOLSHED_ADDR="127.0.0.1:$port" TOOLSHED_DATA_DIR="$data" TOOLSHED_SITE_ROOT="$SITE_DIR" \
    DATABASE_URL="sqlite://$data/toolshed.db" RUST_LOG=warn TOOLSHED_INTERNAL_HOSTS=127.0.0.1 \
    TOOLSHED_OIDC_CLIENT_ID=toolshed TOOLSHED_OIDC_CLIENT_SECRET="$sso_secret" TOOLSHED_OIDC_NAME="Example ID" \
    TOOLSHED_SSO_ADMIN_GROUP=toolshed-admins SSL_CERT_FILE="$tls/ca.pem" TOOLSHED_OIDC_ISSUER="$issuer" \
    target/toolshed serve >"$data/stdout.log" 2>"$data/stderr.log" &
server=$!
cleanup() {
    status=$?
    kill "$server" "$provider" 2>/dev/null || true; wait "$server" "$provider" 2>/dev/null || true
    # A failure's server side: what the server logged (warnings and errors).
    if [ "$status" -ne 0 ] && [ -s "$data/stderr.log" ]; then
        echo "e2e: the server's log (last 60 lines):" >&2
        tail -n 60 "$data/stderr.log" >&2
    fi
    rm -rf "$data"
}
trap cleanup EXIT

for _ in $(seq 1 200); do
    curl -fsS "$base/healthz" >/dev/null 2>&1 && break
    kill -0 "$server" 2>/dev/null || { cat "$data/stderr.log" >&2; exit 1; }
    sleep 0.1
done
admin_password=$(sed -n 's/^ *password: //p' "$data/stdout.log")
# A token for the MCP client tests, made the way an operator would.
token=$(DATABASE_URL="sqlite://$data/toolshed.db" TOOLSHED_DATA_DIR="$data" \
    target/toolshed admin create-token --username admin --name e2e --expires-in-days 1 | tail -n 1)
# And one that may publish, for the SDK tests that publish the tools they call.
publish_token=$(DATABASE_URL="sqlite://$data/toolshed.db" TOOLSHED_DATA_DIR="$data" \
    target/toolshed admin create-token --username admin --name e2e-publish --expires-in-days 1 --publish | tail -n 1)

cd end2end
mkdir -p output
files=(tests/)
[ $# -eq 0 ] || { files=("$@"); files=("${files[@]/#/tests/}"); files=("${files[@]/%/.test.mjs}"); }
# E2E_ONLY='words': only the tests whose names match (node's --test-name-pattern);
# PY_ONLY='expr': only the Python tests pytest's -k picks.
only=()
[ -z "${E2E_ONLY:-}" ] || only=("--test-name-pattern=$E2E_ONLY")
TOOLSHED_URL="$base" TOOLSHED_ADMIN_PASSWORD="$admin_password" TOOLSHED_TOKEN="$token" TOOLSHED_PUBLISH_TOKEN="$publish_token" \
    TOOLSHED_TEST_TLS="$tls" TOOLSHED_TEST_DATA="$data" TOOLSHED_TEST_ISSUER="$issuer" TOOLSHED_TEST_APP_SECRET="$app_secret" node --test --test-concurrency=1 "${only[@]}" "${files[@]}"
cd ..
[ $# -eq 0 ] || exit 0

echo "e2e: the official MCP Python SDK (end2end/python)" >&2
# No .pytest_cache or __pycache__ in the tree.
TOOLSHED_URL="$base" TOOLSHED_TOKEN="$token" TOOLSHED_PUBLISH_TOKEN="$publish_token" TOOLSHED_ADMIN_PASSWORD="$admin_password" \
    TOOLSHED_TEST_ISSUER="$issuer" TOOLSHED_TEST_APP_SECRET="$app_secret" PYTHONDONTWRITEBYTECODE=1 \
    "$TOOLS/venv/bin/python" -m pytest -q -p no:cacheprovider ${PY_ONLY:+-k "$PY_ONLY"} end2end/python

echo "e2e: the official MCP Python SDK, two replicas on PostgreSQL (tasks, approvals, connected accounts)" >&2
scripts/with-postgres.sh scripts/e2e-replicas.sh
