// What a first visit costs: the home page with an empty cache, every byte the
// browser received (headers and compressed bodies, as DevTools counts them),
// and the wasm as a gzip-only client gets it. Figures in BENCHMARKS.md.
// The budgets are today's figures plus a little, so that growth is a decision;
// issue 14's goals (500 KiB and 600 KiB) are not met yet (BENCHMARKS.md says why).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { get } from 'node:http';
import { BASE, launch, settled } from './browser.mjs';

const FIRST_VISIT_MAX = 525 * 1024;
const WASM_GZIP_MAX = 770 * 1024;

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

test(`the wasm is at most ${WASM_GZIP_MAX / 1024} KiB to a client that takes gzip only`, async (t) => {
  const bytes = await new Promise((resolve, reject) => {
    get(`${BASE}/pkg/toolshed_bg.wasm`, { headers: { 'Accept-Encoding': 'gzip' } }, (res) => {
      assert.equal(res.statusCode, 200);
      assert.equal(res.headers['content-encoding'], 'gzip');
      let n = 0;
      res.on('data', (chunk) => { n += chunk.length; });
      res.on('end', () => resolve(n));
    }).on('error', reject);
  });
  t.diagnostic(`wasm, gzip: ${(bytes / 1024).toFixed(1)} KiB`);
  assert.ok(bytes <= WASM_GZIP_MAX, `${bytes} bytes`);
});
