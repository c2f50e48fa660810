// Every page, loaded directly again and again and reached by navigation: the
// wasm must hydrate each one without a panic or a console error. Hydration
// mismatches come and go with timing (which server-side task renders first),
// so one load proves little: each page is loaded LOADS times.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { BASE, launch, hydrated, shot, signInAsAdmin, VISITOR_PAGES, ADMIN_PAGES } from './browser.mjs';

const LOADS = 30;
/** Pages loaded at once: enough to keep the machine busy, few enough to stay fair. */
const AT_ONCE = 5;

let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

/** Opens a page in `context` that records every uncaught error and console error. */
async function watchedPage(context) {
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(`uncaught: ${e.message}`));
  page.on('console', (m) => { if (m.type() === 'error') errors.push(`console: ${m.text().split('\n')[0]}`); });
  return { page, errors };
}

/** Loads `path` LOADS times, AT_ONCE at any moment; returns "path (load n): error" lines. */
async function loadRepeatedly(context, path) {
  const failures = [];
  // Each tab loads the page afresh again and again (a new document each time;
  // a new tab each time would cost a new renderer process).
  let started = 0;
  const tab = async () => {
    const { page, errors } = await watchedPage(context);
    while (started < LOADS) {
      const n = ++started;
      errors.length = 0;
      await page.goto(`${BASE}${path}`);
      await hydrated(page).catch(() => errors.push('never hydrated'));
      // Content hydrated after the first pass (its tasks queued by then) has
      // run, or panicked, by the second frame after.
      await page.evaluate(() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done))));
      failures.push(...errors.map((e) => `${path} (load ${n}): ${e}`));
    }
    await page.close();
  };
  await Promise.all(Array.from({ length: AT_ONCE }, tab));
  return failures;
}

test(`every page a visitor can open hydrates cleanly, ${LOADS} loads each`, async () => {
  const context = await browser.newContext();
  const failures = [];
  for (const path of VISITOR_PAGES) failures.push(...await loadRepeatedly(context, path));
  await context.close();
  assert.deepEqual(failures, []);
});

test(`every page the administrator can open hydrates cleanly, ${LOADS} loads each`, async () => {
  const context = await browser.newContext();
  const { page } = await watchedPage(context);
  await signInAsAdmin(page);
  const failures = [];
  for (const path of ADMIN_PAGES) failures.push(...await loadRepeatedly(context, path));
  await context.close();
  assert.deepEqual(failures, []);
});

test('navigating between pages without reloads keeps the app alive', async () => {
  const context = await browser.newContext();
  const { page, errors } = await watchedPage(context);
  await signInAsAdmin(page);
  // Editor → Browse → search → a listing → its editor → My tools → a bundle's editor → Browse, all client-side.
  await page.goto(`${BASE}/tools/demo/echo/edit`);
  await hydrated(page);
  for (let round = 0; round < 3; round++) {
    await page.click('nav a[href="/browse"]');
    await page.waitForURL(/\/browse$/);
    await page.fill('main input[name=q]', 'echo');
    await page.press('main input[name=q]', 'Enter');
    await page.waitForURL(/q=echo/);
    await page.click('a[href="/tools/demo/echo"]');
    await page.waitForSelector('.connect-panel');
    await page.click('a[href="/tools/demo/echo/edit"]');
    await page.waitForSelector('.cm-editor');
    await page.click('nav a[href="/tools/mine"]');
    await page.waitForURL(/\/tools\/mine$/);
    await page.goto(`${BASE}/bundles/demo/text_kit/edit`);
    await hydrated(page);
    await page.waitForSelector('.bundle-search');
  }
  // The app still answers clicks after all that.
  await page.click('.user-button');
  await page.waitForSelector('.menu.open');
  assert.deepEqual(errors, []);
  await context.close();
});

test('before a page is live its buttons look disabled and take no click, then they work', async () => {
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const { page, errors } = await watchedPage(context);
  await signInAsAdmin(page);
  // Hold the wasm back: the page is the server's HTML alone until the test lets it through.
  let release;
  const held = new Promise((resolve) => { release = resolve; });
  await page.route(/\.wasm$/, async (route) => { await held; await route.continue(); });
  await page.goto(`${BASE}/tools/demo/echo`, { waitUntil: 'domcontentloaded' });
  const run = page.locator('.run-button');
  await run.waitFor();
  const look = () => run.evaluate((b) => [getComputedStyle(b).pointerEvents, getComputedStyle(b).opacity]);
  assert.deepEqual(await look(), ['none', '0.6'], 'Run looks disabled and ignores clicks');
  await shot(page, '90-before-live-listing');
  release();
  await hydrated(page);
  assert.deepEqual(await look(), ['auto', '1'], 'once live, Run looks and acts like a button');
  await run.click();
  await page.waitForSelector('.run-result, .run-error');
  assert.deepEqual(errors, []);
  await context.close();
});
