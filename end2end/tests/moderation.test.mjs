// Moderation as people do it: a reader reports a listing, an admin hides it
// from the queue with a note, its endpoint refuses the reader, the author reads
// the note, and the admin restores it.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { BASE, launch, newPage, shot, unique, hydrated, signInAsAdmin, call, joinByInvite } from './browser.mjs';

let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

const PASSWORD = 'moderate-the-shed';
const DEPARTMENT = unique('mod');
const NAME = 'quote_of_the_day';
const SLUG = `${DEPARTMENT}/${NAME}`;
const NOTE = 'Quotes copyrighted text; please link to the source instead.';

async function register(page, username, displayName, department = 'general') {
  await joinByInvite(browser, page, { department, username, displayName, password: PASSWORD });
}

/** The listing's MCP endpoint, called as the page's signed-in user (like the MCP debugger). */
async function initialize(page) {
  const res = await page.request.post(`${BASE}/mcp/tools/${SLUG}`, {
    data: { jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'e2e', version: '1' } } },
    headers: { Origin: BASE, Accept: 'application/json, text/event-stream' },
  });
  return res.status();
}

test('report → admin hides → endpoint refuses → restore', async () => {
  const author = await newPage(browser);
  const errors = [];
  author.on('pageerror', (e) => errors.push(e.message));
  await register(author, unique('author'), 'Quote Author', DEPARTMENT);
  await author.request.post(`${BASE}/api/tools/create`, {
    form: { name: NAME, title: 'Quote of the day', description: 'A famous quote, every day.', tags: 'fun', visibility: 'everyone' },
    headers: { Origin: BASE, Accept: 'application/json' },
  });
  const tool = await call(author, 'tools/detail', { department: DEPARTMENT, name: NAME });
  const version = await call(author, 'tools/save_version', { tool: tool.id, code: 'return "To be or not to be";', args: [], changelog: 'first' }, true);
  await call(author, 'tools/publish', { tool: String(tool.id), version: String(version) });

  // A reader reports it from the listing page.
  const reader = await newPage(browser);
  reader.on('pageerror', (e) => errors.push(e.message));
  await register(reader, unique('reader'), 'Careful Reader');
  assert.equal(await initialize(reader), 200);
  await reader.goto(`${BASE}/tools/${SLUG}`);
  await hydrated(reader);
  await reader.click('details.report summary');
  await reader.fill('details.report textarea[name=reason]', 'This reproduces a copyrighted book.');
  await reader.click('details.report button[type=submit]');
  await reader.waitForSelector('details.report .alert.ok');

  // The admin sees it in the queue and hides it with a note.
  const admin = await newPage(browser);
  admin.on('pageerror', (e) => errors.push(e.message));
  await signInAsAdmin(admin);
  await admin.goto(`${BASE}/admin`);
  await hydrated(admin);
  const item = admin.locator(`.queue-item[data-listing="${SLUG}"]`);
  await item.waitFor();
  assert.match(await item.textContent(), /This reproduces a copyrighted book\.[\s\S]*@reader/);
  await item.scrollIntoViewIfNeeded();
  await shot(admin, '30-moderation-queue');
  await item.locator('select[name=action]').selectOption('hide');
  await item.locator('textarea[name=note]').fill(NOTE);
  await item.locator('button[type=submit]').click();
  await item.waitFor({ state: 'detached' });

  // The endpoint and the page now refuse the reader; the author reads the note.
  assert.equal(await initialize(reader), 404);
  await reader.goto(`${BASE}/tools/${SLUG}`);
  await reader.waitForSelector('text=Page not found');
  await author.goto(`${BASE}/tools/${SLUG}`);
  await hydrated(author);
  const notice = author.locator('.moderation-notice');
  assert.match(await notice.textContent(), /Hidden by an administrator/);
  assert.match(await notice.textContent(), new RegExp(NOTE.replace(/[.;]/g, '\\$&')));
  await shot(author, '31-author-hidden-listing');
  assert.equal(await initialize(author), 200, 'its author still reaches the endpoint');

  // The admin restores it from the listing page.
  await admin.goto(`${BASE}/tools/${SLUG}`);
  await hydrated(admin);
  await admin.locator('.moderate-form select[name=action]').selectOption('restore');
  await admin.locator('.moderate-form textarea[name=note]').fill('Now links to the source.');
  await Promise.all([admin.waitForEvent('load'), admin.locator('.moderate-form button[type=submit]').click()]);
  await admin.waitForSelector('.moderate-form');
  assert.equal(await admin.locator('.moderation-notice').count(), 0);
  assert.equal(await initialize(reader), 200, 'restored: the reader reaches it again');
  assert.deepEqual(errors, []);
  for (const p of [author, reader, admin]) await p.close();
});
