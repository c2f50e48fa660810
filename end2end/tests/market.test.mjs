// The marketplace as a person uses it: search, filter, open a listing and read
// its usage chart; then the same search with JavaScript off.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { BASE, launch, newPage, shot, unique, hydrated, call, joinByInvite } from './browser.mjs';

let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

const PASSWORD = 'browse-the-shed';
// A word no other test's listing has, so the search finds only ours.
const WORD = unique('zq');
const DEPARTMENT = unique('market');

/** A published tool in the page user's department (`department`); returns its id. */
async function publishTool(page, name, title, description, tags, department = DEPARTMENT) {
  await page.request.post(`${BASE}/api/tools/create`, {
    form: { name, title, description, tags, visibility: 'everyone' },
    headers: { Origin: BASE, Accept: 'application/json' },
  });
  const tool = await call(page, 'tools/detail', { department, name });
  const version = await call(page, 'tools/save_version', { tool: tool.id, code: 'return `rate for ${$text}`;', args: [{ name: 'text', type: { kind: 'string' }, required: true }], changelog: 'first' }, true);
  await call(page, 'tools/publish', { tool: String(tool.id), version: String(version) });
  return tool.id;
}

test('search, filter by department and tag, sort, and open a listing with its usage chart', async () => {
  const page = await newPage(browser);
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  const username = unique('seller');
  await joinByInvite(browser, page, { department: DEPARTMENT, username, displayName: 'Market Seller', password: PASSWORD });

  const fx = await publishTool(page, 'fx_rate', 'Currency converter', `Converts amounts with the daily **${WORD}** rate.`, 'finance fx');
  await publishTool(page, 'vat', 'VAT calculator', `Adds VAT; mentions ${WORD} once.`, 'finance tax');
  await publishTool(page, 'glossary', 'Glossary', `Explains ${WORD} jargon.`, 'docs');
  for (let i = 0; i < 5; i++) {
    await call(page, 'tools/run', { tool: fx, target: 'Published', input: JSON.stringify({ text: `call ${i}` }) }, true);
  }

  await page.goto(`${BASE}/browse`);
  await hydrated(page);
  await page.fill('input[name=q]', WORD);
  await page.selectOption('select[name=department]', DEPARTMENT);
  await page.click('.browse-form button[type=submit]');
  await page.waitForURL(/\/browse\?q=/);
  await page.waitForSelector('.listing-card');
  assert.match(await page.textContent('.result-count'), /^3 listings$/);
  assert.equal(await page.inputValue('input[name=q]'), WORD, 'the form shows the search it ran');
  const fxCard = page.locator('.listing-card:has-text("Currency converter")');
  // Usage is written in batches off the request path (every 250 ms): reload until it is in.
  for (let i = 0; i < 20 && !/5 calls/.test(await fxCard.textContent()); i++) {
    await page.waitForTimeout(250);
    await page.reload();
    await page.waitForSelector('.listing-card');
  }
  assert.match(await fxCard.textContent(), /Market Seller[\s\S]*5 calls \/ 30 days[\s\S]*0 forks/);
  await shot(page, '20-browse-search');

  await page.fill('input[name=tag]', 'finance');
  await page.selectOption('select[name=sort]', 'newest');
  await page.click('.browse-form button[type=submit]');
  await page.waitForURL(/tag=finance/);
  await page.waitForFunction(() => document.querySelector('.result-count')?.textContent === '2 listings');
  const titles = await page.locator('.listing-card h3').allTextContents();
  assert.deepEqual(titles, ['VAT calculator', 'Currency converter']);
  await shot(page, '21-browse-filtered');

  await page.click('.listing-card:has-text("Currency converter")');
  await page.waitForURL(`**/tools/${DEPARTMENT}/fx_rate`);
  await page.waitForSelector('.usage-chart');
  assert.equal((await page.textContent('.usage-calls')).trim(), '5');
  assert.equal((await page.textContent('.usage-error-rate')).trim(), '0.0 %');
  assert.equal(await page.locator('.usage-chart rect.bar').count(), 30);
  await shot(page, '22-listing-usage');
  assert.deepEqual(errors, []);
  await page.close();
});

test('browsing works as a plain GET form without JavaScript, and bad input says what is wrong', async () => {
  const page = await newPage(browser, { javaScriptEnabled: false });
  await joinByInvite(browser, page, { department: 'general', role: 'member', displayName: 'No Script Reader', password: PASSWORD, script: false });

  await page.goto(`${BASE}/browse`);
  await page.fill('input[name=q]', `${WORD} jargon`);
  await page.selectOption('select[name=department]', DEPARTMENT);
  await page.click('.browse-form button[type=submit]');
  await page.waitForURL(/\/browse\?q=/);
  // Any word may match, best first: the one listing with both words leads.
  assert.match(await page.textContent('.result-count'), /^3 listings$/);
  assert.match(await page.locator('.listing-card').first().textContent(), /Glossary/);
  await shot(page, '23-nojs-browse');

  await page.goto(`${BASE}/browse?q=${'x'.repeat(10_000)}`);
  assert.equal((await page.textContent('.alert.error')).trim(), 'Search: must be at most 1000 characters');
  await shot(page, '24-nojs-search-too-long');
  await page.close();
});

test('a search in Chinese finds the English tool it means', async () => {
  const page = await newPage(browser);
  const department = unique('people');
  await joinByInvite(browser, page, { department, username: unique('hr'), displayName: 'People Team', password: PASSWORD });
  await publishTool(page, 'sick_leave', 'Report sick leave', 'Tells your manager and HR that you are ill and records the absence.', 'hr', department);
  await publishTool(page, 'room_booking', 'Book a meeting room', 'Reserves a meeting room for a time slot.', 'facilities', department);
  await publishTool(page, 'laptop_order', 'Order a laptop', 'Orders a laptop or a monitor from the hardware catalogue.', 'it', department);

  // No word in common: 病假 is read as "sick leave" too (CC-CEDICT), by words and by meaning.
  await page.goto(`${BASE}/browse?q=${encodeURIComponent('我明天发烧了，想请病假')}&department=${department}`);
  await page.waitForSelector('.listing-card');
  assert.match(await page.locator('.listing-card').first().textContent(), /Report sick leave/);
  assert.equal(await page.inputValue('input[name=q]'), '我明天发烧了，想请病假', 'the form shows the search as typed');
  await shot(page, '25-browse-chinese');
  await page.close();
});
