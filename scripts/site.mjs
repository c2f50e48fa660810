// Finishes the site's pkg folder after wasm-split, wasm-bindgen and wasm-opt
// (scripts/build.sh): usage `node scripts/site.mjs DIR`.
//
// DIR holds the main module (toolshed.js, toolshed_bg.wasm), the page chunks
// wasm-split cut out of it (chunk_N.wasm, split_*.wasm), their loader
// (__wasm_split.js) and toolshed.css. This script
//  1. drops the chunks' name sections (binaryen re-emits them without; -Oz
//     made them larger once compressed, and took minutes),
//  2. lists each page's chunks, for the server to name in its head (app/src/chunks.rs),
//  3. names every file after one hash of the whole build, since the files
//     import each other by name (toolshed.H.js, chunk_7.H.wasm, ...), and the
//     CSS after its own; hash.txt tells the server these names,
//  4. compresses each file once, at the best levels (brotli 11 is too slow per
//     request): the server sends the .br or .gz beside it as it is.
import fs from 'node:fs';
import zlib from 'node:zlib';
import crypto from 'node:crypto';
import binaryen from 'binaryen';

const dir = process.argv[2];
const path = (name) => `${dir}/${name}`;
const read = (name) => fs.readFileSync(path(name));
const isChunk = (name) => /^(chunk_\d+|split_\w+)\.wasm$/.test(name);
// The app: the main module, its chunks and their loader (not editor.js, a name of its own).
const isApp = (name) => isChunk(name) || /^(toolshed\.js|toolshed_bg\.wasm|__wasm_split\.js|__wasm_split_chunks\.json)$/.test(name);

// 1. The features rustc's wasm32 target uses; binaryen refuses code outside them.
const F = binaryen.Features;
const features = F.MVP | F.MutableGlobals | F.SignExt | F.BulkMemory | F.BulkMemoryOpt
    | F.NontrappingFPToInt | F.Multivalue | F.ReferenceTypes;
for (const name of fs.readdirSync(dir).filter(isChunk)) {
    const module = binaryen.readBinary(read(name));
    module.setFeatures(features);
    fs.writeFileSync(path(name), module.emitBinary());
    module.dispose();
}

// 2. Which files each split needs, its shared chunks first: the loader says it.
//    `const __chunk_3 = makeLoad(() => { ... "./chunk_3.wasm" ...`
//    `export const __wasm_split_load_NAME = wrapAsyncCb(makeLoad(() => { ... "./FILE.wasm" ... }, [__chunk_3, ...]))`
const loader = read('__wasm_split.js').toString();
const chunkFiles = new Map();
for (const [, variable, file] of loader.matchAll(/const (__chunk_\d+) = makeLoad\(\(\) => \{[^}]*?"\.\/([\w.]+)\.wasm"/g)) {
    chunkFiles.set(variable, file);
}
const pages = {};
for (const [, split, file, deps] of loader.matchAll(
    /export const __wasm_split_load_(\w+) = wrapAsyncCb\(makeLoad\(\(\) => \{[^}]*?"\.\/([\w.]+)\.wasm"[^]*?\}\s*,\s*\[([^\]]*)\]\)\)/g)) {
    const needs = deps.split(',').map((d) => d.trim()).filter(Boolean).map((d) => {
        if (!chunkFiles.has(d)) throw new Error(`the split loader names an unknown chunk ${d}`);
        return chunkFiles.get(d);
    });
    pages[split] = [...needs, file];
}
if (Object.keys(pages).length === 0) throw new Error('no lazy routes found in __wasm_split.js');
fs.writeFileSync(path('__wasm_split_chunks.json'), JSON.stringify(pages));

// 3. One hash for the app (its files refer to each other), one for the CSS.
const sha = (...parts) => {
    const h = crypto.createHash('sha256');
    for (const p of parts) h.update(p);
    return h.digest('hex').slice(0, 16);
};
const appFiles = fs.readdirSync(dir).filter(isApp).sort();
const app = sha(...appFiles.flatMap((n) => [n, read(n)]));
const css = sha(read('toolshed.css'));
const renamed = (name) => name === 'toolshed_bg.wasm' ? `toolshed.${app}.wasm`
    : name === 'toolshed.css' ? `toolshed.${css}.css`
    : name.replace(/\.(wasm|js|json)$/, `.${app}.$1`);
// Only where a file is fetched: the wasm's own import names stay as they are.
const rewrite = (text) => text
    .replaceAll('from "./__wasm_split.js"', `from "./__wasm_split.${app}.js"`)
    .replaceAll('from "./toolshed.js"', `from "./toolshed.${app}.js"`)
    .replace(/new URL\("\.\/((?:chunk_\d+|split_\w+))\.wasm"/g, `new URL("./$1.${app}.wasm"`);
for (const name of [...appFiles, 'toolshed.css']) {
    if (name.endsWith('.js')) fs.writeFileSync(path(name), rewrite(read(name).toString()));
    if (name === '__wasm_split_chunks.json') {
        const named = Object.fromEntries(Object.entries(pages).map(([k, files]) => [k, files.map((f) => `${f}.${app}`)]));
        fs.writeFileSync(path(name), JSON.stringify(named));
    }
    fs.renameSync(path(name), path(renamed(name)));
}
// No `manifest:` line: the server names chunks itself (app/src/chunks.rs), not Leptos.
fs.writeFileSync(path('hash.txt'), `js: ${app}\nwasm: ${app}\ncss: ${css}\nsplit: ${app}\n`);

// 4. Precompressed copies of what browsers download.
for (const name of fs.readdirSync(dir).filter((n) => /\.(wasm|js|css)$/.test(n))) {
    const data = read(name);
    const params = { [zlib.constants.BROTLI_PARAM_QUALITY]: 11, [zlib.constants.BROTLI_PARAM_SIZE_HINT]: data.length };
    fs.writeFileSync(path(`${name}.br`), zlib.brotliCompressSync(data, { params }));
    fs.writeFileSync(path(`${name}.gz`), zlib.gzipSync(data, { level: 9 }));
}
