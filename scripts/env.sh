# Shared settings for the scripts: sourced, not run.
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
