#!/usr/bin/env bash
# Runs every check and test. Expects `scripts/build.sh` to have run (make test does).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/env.sh

started=$SECONDS
echo "test: formatting (cargo fmt --check)" >&2
cargo fmt --all --check

# Lints (cargo clippy -D warnings) run beside the tests, at the lowest
# priority, in a target directory of their own. A lint build is a check build:
# it shares no compiled dependency with the release build and compiles every
# one again as metadata (3 minutes on a cold machine), so run first it adds its
# whole length, while beside the tests it fills the time they leave the cores idle.
# Clippy records the workspace Cargo.toml by its absolute path, so a clone at a
# new path (as CI makes them) would re-lint every crate: lint through a link
# kept at one path instead, held by a lock while it points here.
echo "test: lints (cargo clippy -D warnings), beside the tests" >&2
link="$TOOLSHED_CACHE/workspace"
lints_log=$(mktemp "${TMPDIR:-/tmp}/toolshed-lints.XXXXXX")
(
  flock 9
  ln -sfn "$PWD" "$link"
  CARGO_TARGET_DIR="$TOOLSHED_CACHE/lint-target" nice -n 19 \
    cargo clippy -q --release --all-targets --manifest-path "$link/Cargo.toml" \
    -p toolshed -p toolshed-domain -p toolshed-sandbox -p toolshed-encoder -p toolshed-types -p app -p toolshed-bench -p toolshed-load -- -D warnings
) 9>"$TOOLSHED_CACHE/workspace.lock" >"$lints_log" 2>&1 &
lints=$!
# Whatever else failed, the lints' verdict is waited for and shown too.
lints_verdict() {
  status=$?
  if wait "$lints"; then
    [ "$status" -ne 0 ] || echo "test: everything passed in $(( (SECONDS - started) / 60 )) min $(( (SECONDS - started) % 60 )) s" >&2
  else
    echo "test: lints failed:" >&2; cat "$lints_log" >&2
    [ "$status" -ne 0 ] || status=1
  fi
  rm -f "$lints_log"
  exit "$status"
}
trap lints_verdict EXIT

echo "test: unit and integration (SQLite and PostgreSQL)" >&2
status=0
scripts/with-postgres.sh cargo test --release --no-fail-fast -p toolshed-types -p toolshed-sandbox -p toolshed-encoder -p toolshed-domain -p toolshed -p app --features app/ssr || status=$?
# The test binaries are built now, passing or not: the next fresh clone reuses them.
scripts/mtimes.py record
[ "$status" -eq 0 ] || exit "$status"

echo "test: browser (end2end/, Chromium, release server)" >&2
scripts/e2e.sh
echo "test: tests passed; waiting for the lints" >&2
