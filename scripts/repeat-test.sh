#!/usr/bin/env bash
# Flake hunting: `scripts/repeat-test.sh [N]` clones main afresh N times (10 by
# default) and runs `make test` in each clone, as CI does, with no retries; it
# stops at the first failure. Logs and a one-line-per-run summary go to
# $TMPDIR/toolshed-repeat/ (summary.txt).
set -uo pipefail
runs=${1:-10}
repo=$(cd "$(dirname "$0")/.." && pwd)
out="${TMPDIR:-/tmp}/toolshed-repeat"
mkdir -p "$out"
: >"$out/summary.txt"
for i in $(seq 1 "$runs"); do
    # A new path each run, the last one removed: CI clones somewhere new each
    # time while the target directory stays, and cargo reuses what was built.
    rm -rf "$out"/clone-*
    clone="$out/clone-$i"
    git clone -q "$repo" "$clone"
    commit=$(git -C "$clone" rev-parse --short HEAD)
    started=$SECONDS
    (cd "$clone" && make test) >"$out/run-$i.log" 2>&1
    status=$?
    line="run $i: $commit, exit $status, $((SECONDS - started)) s, $(date -u +%H:%M:%S)"
    echo "$line" | tee -a "$out/summary.txt"
    [ "$status" -eq 0 ] || { echo "failed: see $out/run-$i.log" >&2; exit "$status"; }
done
echo "all $runs runs passed" | tee -a "$out/summary.txt"
