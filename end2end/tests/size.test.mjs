// What a first visit costs: the home page with an empty cache, every byte the
// browser received (headers and compressed bodies, as DevTools counts them),
// and the wasm as a gzip-only client gets it. Figures in BENCHMARKS.md.
// The budgets are today's figures plus a little, so that growth is a decision;
// issue 14's goals (500 KiB and 600 KiB) are not met yet (BENCHMARKS.md says why).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { get } from 'node:http';
import { BASE, launch, settled } from './browser.mjs';

const FIRST_VISIT_MAX = 600 * 1024;
const WASM_GZIP_MAX = 890 * 1024;

let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

test(`a first visit to the home page transfers at most ${FIRST_VISIT_MAX / 1024} KiB`, async (t) => {
  const context = await browser.newContext();
  const page = await context.newPage();
  const cdp = await context.newCDPSession(page);
  await cdp.send('Network.enable');
  await cdp.send('Network.setCacheDisabled', { cacheDisabled: true });
  const urls = new Map();
  const received = [];
  cdp.on('Network.responseReceived', (e) => urls.set(e.requestId, e.response.url.replace(BASE, '')));
  cdp.on('Network.loadingFinished', (e) => received.push({ url: urls.get(e.requestId), bytes: e.encodedDataLength }));
  await page.goto(`${BASE}/`);
  await settled(page);
  await context.close();
  const total = received.reduce((sum, r) => sum + r.bytes, 0);
  t.diagnostic(`first visit: ${(total / 1024).toFixed(1)} KiB in ${received.length} responses`);
  for (const r of received) t.diagnostic(`  ${(r.bytes / 1024).toFixed(1).padStart(7)} KiB  ${r.url}`);
  assert.ok(total <= FIRST_VISIT_MAX, `${total} bytes`);
});

test('a second visit takes the app from the browser cache without asking the server', async (t) => {
  const context = await browser.newContext();
  const page = await context.newPage();
  await page.goto(`${BASE}/`);
  await settled(page);
  const cdp = await context.newCDPSession(page);
  await cdp.send('Network.enable');
  const asked = [];
  const cached = new Set();
  cdp.on('Network.requestServedFromCache', (e) => cached.add(e.requestId));
  cdp.on('Network.responseReceived', (e) => {
    if (!e.response.url.includes('/pkg/toolshed.')) return;
    if (!(cached.has(e.requestId) || e.response.fromDiskCache)) asked.push(`${e.response.url} (${e.response.status})`);
    else t.diagnostic(`from the cache: ${e.response.url.replace(BASE, '')}`);
  });
  await page.goto(`${BASE}/browse`);
  await settled(page);
  await context.close();
  assert.deepEqual(asked, []);
});

test(`the wasm is at most ${WASM_GZIP_MAX / 1024} KiB to a client that takes gzip only`, async (t) => {
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
