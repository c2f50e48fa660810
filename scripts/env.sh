# Shared settings and helpers for the scripts: sourced, not run.
# Build output and installed tools live outside the clone, so a fresh clone on
# a machine that built before starts warm.
export TOOLSHED_CACHE="${TOOLSHED_CACHE:-$HOME/.cache/toolshed}"
export TOOLS="$TOOLSHED_CACHE/tools"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$TOOLSHED_CACHE/target}"
export WASM_TARGET_DIR="${WASM_TARGET_DIR:-$TOOLSHED_CACHE/wasm-target}"
export SITE_DIR="${TOOLSHED_SITE_ROOT:-$PWD/target/site}"
export PATH="$TOOLS/bin:$HOME/.cargo/bin:$PATH"
# The sentence model for tool search by meaning (scripts/bootstrap.sh installs it).
export TOOLSHED_EMBEDDING_MODEL="${TOOLSHED_EMBEDDING_MODEL:-$TOOLS/models/multilingual-e5-small}"

# The rest of the first line of FILE that starts with WORD, once the process
# PID writes it: 60 s at most (a busy machine once took over 10 s to start the
# OpenID provider), or until PID exits; then its FILE-stderr.log is shown.
wait_for_line() {
    local file=$1 word=$2 pid=$3 line
    for _ in $(seq 1 600); do
        line=$(sed -n "s/^$word //p" "$file" | head -n 1)
        [ -n "$line" ] && { echo "$line"; return; }
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    line=$(sed -n "s/^$word //p" "$file" | head -n 1)
    [ -n "$line" ] && { echo "$line"; return; }
    echo "no '$word' line in $file" >&2; cat "${file%.log}-stderr.log" >&2 || true
    return 1
}
