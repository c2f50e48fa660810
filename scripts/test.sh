#!/usr/bin/env bash
# Runs every check and test. Expects `scripts/build.sh` to have run (make test does).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/env.sh

started=$SECONDS
echo "test: formatting and lints (cargo fmt --check, cargo clippy -D warnings)" >&2
cargo fmt --all --check
# Release profile: clippy then shares the build's dependency graph settings.
# Clippy records the workspace Cargo.toml by its absolute path, so a clone at a
# new path (as CI makes them) would re-lint every crate: lint through a link
# kept at one path instead, held by a lock while it points here.
link="$TOOLSHED_CACHE/workspace"
(
  flock 9
  ln -sfn "$PWD" "$link"
  cargo clippy -q --release --all-targets --manifest-path "$link/Cargo.toml" \
    -p toolshed -p toolshed-domain -p toolshed-sandbox -p toolshed-encoder -p toolshed-types -p app -p toolshed-bench -p toolshed-load -- -D warnings
) 9>"$TOOLSHED_CACHE/workspace.lock"

echo "test: unit and integration (SQLite and PostgreSQL)" >&2
status=0
# Four at once on two cores: the server's tests mostly wait (on sockets,
# processes, the database), and four take three quarters of the time two do.
scripts/with-postgres.sh cargo test --release --no-fail-fast -p toolshed-types -p toolshed-sandbox -p toolshed-encoder -p toolshed-domain -p toolshed -p app --features app/ssr \
    -- --test-threads=4 || status=$?
# The test binaries are built now, passing or not: the next fresh clone reuses them.
scripts/mtimes.py record
[ "$status" -eq 0 ] || exit "$status"

echo "test: browser (end2end/, Chromium, release server)" >&2
scripts/e2e.sh
echo "test: everything passed in $(( (SECONDS - started) / 60 )) min $(( (SECONDS - started) % 60 )) s" >&2
