#!/usr/bin/env bash
# Runs the benchmarks in bench/ and prints their figures (copy them, with the
# machine and date, into BENCHMARKS.md). Loopback only, bounded in count.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/env.sh

echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -sr), $(date -u +%Y-%m-%d)"
echo "sandbox: fresh runtime + context + args + trivial tool + result"
cargo run -q --release -p toolshed-bench --bin sandbox
