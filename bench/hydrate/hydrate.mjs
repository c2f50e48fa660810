// How long a page opened directly takes until it is live, with an empty cache:
// from the navigation's start to `<body data-hydrated>` (the page's own mark,
// set once its wasm chunks are in and it has hydrated), and what it fetched.
// Each load is a fresh browser context (no cache, no warm code), signed in as
// the administrator so that every page opens. Run by `scripts/bench.sh hydrate`.
//
//   node bench/hydrate/hydrate.mjs   (TOOLSHED_URL, TOOLSHED_ADMIN_PASSWORD set)
import { BASE, launch, signInAsAdmin } from '../../end2end/tests/browser.mjs';

const LOADS = Number(process.env.BENCH_LOADS ?? 10);
const PAGES = ['/tools/demo/echo/edit', '/tools/demo/echo', '/browse', '/admin', '/account', '/'];
/** The goals for the editor: live within 1 s (median), at most 30 files. */
const EDITOR = '/tools/demo/echo/edit';
const GOAL_MS = 1000;
const GOAL_FILES = 30;

// Runs in the page before anything else: notes when <body> gets its mark.
const watchHydrated = () => {
  new MutationObserver((_, observer) => {
    if (document.body?.dataset.hydrated === 'true') {
      window.__hydratedAt = performance.now();
      observer.disconnect();
    }
  }).observe(document, { attributes: true, subtree: true, attributeFilter: ['data-hydrated'] });
};

const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor((s.length - 1) / 2)]; };
const max = (xs) => Math.max(...xs);

const browser = await launch();
const signIn = await browser.newContext();
await signInAsAdmin(await signIn.newPage());
const storageState = await signIn.storageState();
await signIn.close();

const rows = [];
for (const path of PAGES) {
  const times = [];
  const files = [];
  const kib = [];
  for (let i = 0; i < LOADS; i++) {
    const context = await browser.newContext({ storageState });
    await context.addInitScript(watchHydrated);
    const page = await context.newPage();
    const fetched = [];
    page.on('requestfinished', async (req) => {
      const sizes = await req.sizes().catch(() => null);
      fetched.push({ url: req.url(), bytes: sizes ? sizes.responseBodySize + sizes.responseHeadersSize : 0 });
    });
    await page.goto(`${BASE}${path}`);
    await page.waitForFunction(() => window.__hydratedAt !== undefined, null, { timeout: 30_000 });
    times.push(await page.evaluate(() => window.__hydratedAt));
    await page.waitForLoadState('networkidle');
    const code = fetched.filter((f) => /\/pkg\/.*\.(wasm|js)$/.test(new URL(f.url).pathname));
    files.push(code.length);
    kib.push(fetched.reduce((n, f) => n + f.bytes, 0) / 1024);
    await context.close();
  }
  rows.push({ path, median: median(times), max: max(times), files: median(files), kib: median(kib) });
}
await browser.close();

console.log(`hydrate: ${LOADS} direct loads per page, each in a fresh context (empty cache), signed in as the administrator`);
console.log('');
console.log('| page | live after, median | slowest | wasm and JS files | transferred, median |');
console.log('| --- | ---: | ---: | ---: | ---: |');
for (const r of rows) {
  console.log(`| \`${r.path}\` | ${r.median.toFixed(0)} ms | ${r.max.toFixed(0)} ms | ${r.files} | ${r.kib.toFixed(0)} KiB |`);
}
const editor = rows.find((r) => r.path === EDITOR);
const met = editor.median <= GOAL_MS && editor.files <= GOAL_FILES;
console.log('');
console.log(`goal editor: live after ${editor.median.toFixed(0)} ms (median, goal ≤ ${GOAL_MS} ms), ${editor.files} wasm and JS files (goal ≤ ${GOAL_FILES}): ${met ? 'met' : 'missed'}`);
