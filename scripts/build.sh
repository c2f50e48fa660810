#!/usr/bin/env bash
# Builds the release site (wasm + JS + CSS) and the release server.
# cargo-leptos would do this, but it takes ~30 minutes to install here; this
# pipeline does the same steps with the tools bootstrap.sh installed. Every step
# is skipped when its inputs did not change, so a second build starts in seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/env.sh

step() { echo "build: $*" >&2; }

# A fresh clone's unchanged files get the times of the cached build back, so
# cargo rebuilds only what changed (scripts/mtimes.py says why that is safe).
scripts/mtimes.py restore "$CARGO_TARGET_DIR" "$WASM_TARGET_DIR"

# The server needs nothing but rustup's cargo: it compiles while bootstrap.sh
# downloads and installs the rest, which is mostly waiting on the network.
step "server (release), in the background"
cargo build -q --release -p toolshed &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
scripts/bootstrap.sh

step "wasm (frontend, release)"
# Debian's rustc-web has the std sources to build std for wasm32 (-Zbuild-std);
# RUSTC must point at it, or cargo picks rustup's rustc and std fails to build.
# For size: a panic aborts at once (no messages, no formatting machinery), Debug
# formatting and panic locations are left out, and std picks its smaller code.
# The linker keeps its relocations for wasm-split (below).
# These flags replace .cargo/config.toml's, so it is repeated.
env RUSTC=/usr/bin/rustc RUSTC_BOOTSTRAP=1 /usr/bin/cargo build -q -p frontend --lib \
    --profile wasm-release --target wasm32-unknown-unknown -Zbuild-std=std,panic_abort \
    -Zbuild-std-features=optimize_for_size \
    --config 'target.wasm32-unknown-unknown.rustflags = ["--cfg", "erase_components", "-Zunstable-options", "-Cpanic=immediate-abort", "-Zfmt-debug=none", "-Zlocation-detail=none", "-Clink-args=--emit-relocs"]' \
    --target-dir "$WASM_TARGET_DIR"

# The site is made from the wasm, the CSS, the editor's JS and the public assets:
# the same inputs (and the same tool versions) give the same site.
wasm="$WASM_TARGET_DIR/wasm32-unknown-unknown/wasm-release/frontend.wasm"
pkg="$SITE_DIR/pkg"
stamp=$( { sha256sum "$wasm" style/*.css frontend/js/* public/* scripts/package-lock.json scripts/build.sh scripts/site.mjs
           wasm-bindgen --version; sha256sum "$(command -v wasm-split-cli)"; } | sha256sum | cut -d' ' -f1)
cached="$TOOLSHED_CACHE/site/$stamp"
if [ -f "$pkg/.inputs" ] && [ "$(cat "$pkg/.inputs")" = "$stamp" ]; then
    step "site unchanged"
elif [ -d "$cached" ]; then
    # A fresh clone of the same sources: the site built last time, as it was.
    step "site unchanged (from $cached)"
    rm -rf "$pkg" && mkdir -p "$SITE_DIR" && cp -r "$cached" "$pkg"
else
    step "wasm-split + wasm-bindgen + wasm-opt"
    rm -rf "$pkg.tmp" && mkdir -p "$pkg.tmp/split"
    # Every page but the home page is a lazy route (app/src/lib.rs): wasm-split
    # cuts their code out of the main module into chunks, fetched when a page
    # first needs them. It reads the linker's relocations (--emit-relocs above).
    wasm-split-cli "$wasm" "$pkg.tmp/split" --out-name toolshed
    wasm-bindgen --target web --no-typescript --keep-lld-exports --no-demangle \
        --out-dir "$pkg.tmp" --out-name toolshed "$pkg.tmp/split/toolshed.wasm"
    rm "$pkg.tmp/split/toolshed.wasm" && mv "$pkg.tmp"/split/* "$pkg.tmp/" && rmdir "$pkg.tmp/split"
    scripts/node_modules/.bin/wasm-opt -Oz --enable-bulk-memory --enable-nontrapping-float-to-int \
        "$pkg.tmp/toolshed_bg.wasm" -o "$pkg.tmp/toolshed_bg.wasm"
    cat style/*.css > "$pkg.tmp/toolshed.css"
    # The code editor (CodeMirror, from npm) is plain JS, loaded by the editor page only.
    NODE_PATH="$PWD/scripts/node_modules" scripts/node_modules/.bin/esbuild frontend/js/editor.js \
        --bundle --minify --format=esm --log-level=warning --outfile="$pkg.tmp/editor.js"
    # Content names, the chunk manifest, precompressed copies (scripts/site.mjs says how).
    # (binaryen warns of each chunk's name subsection it drops: expected, filtered.)
    node scripts/site.mjs "$pkg.tmp" 2> >(grep -v 'unknown name subsection' >&2)
    echo "$stamp" > "$pkg.tmp/.inputs"
    rm -rf "$pkg" && mv "$pkg.tmp" "$pkg"
    # Kept for the next clone of the same sources; only the newest site.
    rm -rf "$TOOLSHED_CACHE/site" && mkdir -p "$TOOLSHED_CACHE/site" && cp -r "$pkg" "$cached"
fi
cp -r public/. "$SITE_DIR/"

step "server (release)"
wait $server || { echo "build: the server did not build" >&2; exit 1; }
trap - EXIT
ln -sf "$CARGO_TARGET_DIR/release/toolshed" target/toolshed
scripts/mtimes.py record
wasm_out=$(ls "$pkg"/toolshed.*.wasm)
step "done: $(du -h "$wasm_out" | cut -f1) main wasm ($(du -h "$wasm_out.gz" | cut -f1) gzip, $(du -h "$wasm_out.br" | cut -f1) brotli) and $(ls "$pkg" | grep -c -E '^(chunk|split)_.*\.wasm$') chunks, server at target/toolshed"
