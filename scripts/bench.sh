#!/usr/bin/env bash
# Runs the benchmarks in bench/ and prints their figures (copy them, with the
# machine and date, into BENCHMARKS.md). Loopback only, bounded in count.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/env.sh

echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -sr), $(date -u +%Y-%m-%d)"
echo "sandbox: fresh runtime + context + args + trivial tool + result"
cargo run -q --release -p toolshed-bench --bin sandbox

# --- browse/search with 10,000 listings (issue #5) ------------------------------
echo "browse: Toolshed::browse + JSON, 10,000 listings, temp SQLite"
cargo build -q --release -p toolshed-bench --bin browse
cargo build -q --release -p toolshed
"$CARGO_TARGET_DIR/release/browse"
echo "browse: GET /browse against the release server (target/toolshed), same data, loopback"
bench_dir=$(mktemp -d "${TMPDIR:-/tmp}/toolshed-bench.XXXXXX")
"$CARGO_TARGET_DIR/release/browse" --seed "$bench_dir/toolshed.db"
bench_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
TOOLSHED_ADDR="127.0.0.1:$bench_port" TOOLSHED_DATA_DIR="$bench_dir" DATABASE_URL="sqlite://$bench_dir/toolshed.db" \
    RUST_LOG=warn "$CARGO_TARGET_DIR/release/toolshed" serve --no-demo >"$bench_dir/stdout.log" 2>&1 &
bench_server=$!
trap 'kill "$bench_server" 2>/dev/null || true; wait "$bench_server" 2>/dev/null || true; rm -rf "$bench_dir"' EXIT
for _ in $(seq 1 200); do curl -fsS "http://127.0.0.1:$bench_port/healthz" >/dev/null 2>&1 && break; sleep 0.1; done
"$CARGO_TARGET_DIR/release/browse" --http "http://127.0.0.1:$bench_port"
