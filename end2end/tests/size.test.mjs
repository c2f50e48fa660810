// What a first visit costs: the home page with an empty cache, every byte the
// browser received (headers and compressed bodies, as DevTools counts them),
// and the main wasm as a gzip-only client gets it; then what the other pages add
// (their code is split into chunks, fetched when a page is first shown).
// Figures in BENCHMARKS.md. The budgets are today's figures plus a little, so
// that growth is a decision; issue 14's goals were 500 KiB and 600 KiB.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { get } from 'node:http';
import { BASE, launch, settled, signInAsAdmin } from './browser.mjs';

const FIRST_VISIT_MAX = 240 * 1024;
const WASM_GZIP_MAX = 270 * 1024;
/** The heaviest page, opened directly with an empty cache: the tool editor (CodeMirror too). */
const EDITOR_VISIT_MAX = 850 * 1024;
/** Its wasm and JS files: pages are split by group, so a page needs a handful of chunks, not ~200. */
const EDITOR_CODE_FILES_MAX = 30;

/** Opens `path` in `context` with the cache off; returns [total bytes, responses]. */
async function transferred(context, page, path) {
  const cdp = await context.newCDPSession(page);
  await cdp.send('Network.enable');
  await cdp.send('Network.setCacheDisabled', { cacheDisabled: true });
  const urls = new Map();
  const received = [];
  cdp.on('Network.responseReceived', (e) => urls.set(e.requestId, e.response.url.replace(BASE, '')));
  cdp.on('Network.loadingFinished', (e) => received.push({ url: urls.get(e.requestId), bytes: e.encodedDataLength }));
  await page.goto(`${BASE}${path}`);
  await settled(page);
  await cdp.detach();
  return [received.reduce((sum, r) => sum + r.bytes, 0), received];
}

let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

test(`a first visit to the home page transfers at most ${FIRST_VISIT_MAX / 1024} KiB`, async (t) => {
  const context = await browser.newContext();
  const page = await context.newPage();
  const [total, received] = await transferred(context, page, '/');
  await context.close();
  t.diagnostic(`first visit: ${(total / 1024).toFixed(1)} KiB in ${received.length} responses`);
  for (const r of received) t.diagnostic(`  ${(r.bytes / 1024).toFixed(1).padStart(7)} KiB  ${r.url}`);
  assert.ok(total <= FIRST_VISIT_MAX, `${total} bytes`);
  assert.ok(!received.some((r) => /\/pkg\/(chunk|split)_/.test(r.url)), 'the home page needs no chunk');
});

test(`the tool editor, opened directly with an empty cache, transfers at most ${EDITOR_VISIT_MAX / 1024} KiB in at most ${EDITOR_CODE_FILES_MAX} code files`, async (t) => {
  const context = await browser.newContext();
  const page = await context.newPage();
  await signInAsAdmin(page);
  const [total, received] = await transferred(context, page, '/tools/demo/echo/edit');
  await page.waitForSelector('.cm-editor');
  await context.close();
  const chunks = received.filter((r) => /\/pkg\/(chunk|split)_/.test(r.url));
  const sum = (list) => (list.reduce((n, r) => n + r.bytes, 0) / 1024).toFixed(1);
  t.diagnostic(`editor: ${(total / 1024).toFixed(1)} KiB in ${received.length} responses, ${chunks.length} chunks (${sum(chunks)} KiB)`);
  for (const r of received.filter((r) => !chunks.includes(r))) t.diagnostic(`  ${(r.bytes / 1024).toFixed(1).padStart(7)} KiB  ${r.url}`);
  assert.ok(chunks.length > 0, 'the editor is a lazy route');
  assert.ok(total <= EDITOR_VISIT_MAX, `${total} bytes`);
  const code = received.filter((r) => /^\/pkg\/.*\.(wasm|js)$/.test(r.url));
  assert.ok(code.length <= EDITOR_CODE_FILES_MAX, `${code.length} wasm and JS files`);
});

test("a lazy page names its chunks in its head, so they download beside the main wasm", async () => {
  const html = await (await fetch(`${BASE}/browse`)).text();
  const head = html.slice(0, html.indexOf('<body'));
  const chunks = [...head.matchAll(/<link[^>]*href="(\/pkg\/(?:chunk|split)_\w+\.[0-9a-f]{16}\.wasm)"/g)].map((m) => m[1]);
  assert.ok(chunks.some((c) => c.includes('catalog_pages')), `the browse page's group's own chunk among ${chunks.length}`);
  const links = [...head.matchAll(/<link [^>]*>/g)].map((m) => m[0]);
  assert.ok(links.some((l) => l.includes('rel="modulepreload"') && /href="\/pkg\/__wasm_split\.[0-9a-f]{16}\.js"/.test(l)),
    'the chunks\' loader is preloaded too');
  for (const chunk of chunks.slice(0, 3)) {
    const res = await fetch(`${BASE}${chunk}`);
    assert.equal(res.status, 200, chunk);
    assert.equal(res.headers.get('cache-control'), 'public, max-age=31536000, immutable');
  }
});

test('a second visit takes the app and the pages seen before from the browser cache without asking the server', async (t) => {
  const context = await browser.newContext();
  const first = await context.newPage();
  await first.goto(`${BASE}/`);
  await settled(first);
  await first.goto(`${BASE}/browse`);
  await settled(first);
  await first.close();
  const page = await context.newPage();
  const cdp = await context.newCDPSession(page);
  await cdp.send('Network.enable');
  const asked = [];
  const cached = new Set();
  let fromCache = 0;
  cdp.on('Network.requestServedFromCache', (e) => cached.add(e.requestId));
  cdp.on('Network.responseReceived', (e) => {
    if (!/\/pkg\/(toolshed|__wasm_split|chunk_|split_)/.test(e.response.url)) return;
    if (!(cached.has(e.requestId) || e.response.fromDiskCache)) asked.push(`${e.response.url} (${e.response.status})`);
    else fromCache++;
  });
  await page.goto(`${BASE}/browse`);
  await settled(page);
  await context.close();
  t.diagnostic(`from the cache: ${fromCache} files`);
  assert.ok(fromCache > 3);
  assert.deepEqual(asked, []);
});

test(`the main wasm is at most ${WASM_GZIP_MAX / 1024} KiB to a client that takes gzip only`, async (t) => {
  // Its name changes with its contents: the page says which it is.
  const html = await (await fetch(`${BASE}/`)).text();
  const wasm = html.match(/href="(\/pkg\/toolshed\.[0-9a-f]{16}\.wasm)"/)?.[1];
  assert.ok(wasm, 'the page preloads a content-named wasm');
  const bytes = await new Promise((resolve, reject) => {
    get(`${BASE}${wasm}`, { headers: { 'Accept-Encoding': 'gzip' } }, (res) => {
      assert.equal(res.statusCode, 200);
      assert.equal(res.headers['content-encoding'], 'gzip');
      assert.equal(res.headers['cache-control'], 'public, max-age=31536000, immutable');
      let n = 0;
      res.on('data', (chunk) => { n += chunk.length; });
      res.on('end', () => resolve(n));
    }).on('error', reject);
  });
  t.diagnostic(`wasm, gzip: ${(bytes / 1024).toFixed(1)} KiB`);
  assert.ok(bytes <= WASM_GZIP_MAX, `${bytes} bytes`);
});
