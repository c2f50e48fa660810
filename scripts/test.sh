#!/usr/bin/env bash
# Runs every test. Expects `scripts/build.sh` to have run (make test does).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/env.sh

echo "test: unit and integration (SQLite and PostgreSQL)" >&2
scripts/with-postgres.sh cargo test --release --no-fail-fast -p toolshed-domain -p toolshed

echo "test: browser (end2end/, Chromium, release server)" >&2
scripts/e2e.sh
