// The permissions label in the catalog: the badge row on a listing page and
// the browse filter, both computed by Toolshed and enforced (see
// server/tests/it/permissions.rs for the $fetch side and the MCP annotations).
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { BASE, launch, newPage, shot, signInAsAdmin } from './browser.mjs';

let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

test('a listing page shows what its tool can do, and browse filters on it', async () => {
  const page = await newPage(browser);
  await signInAsAdmin(page);
  await page.goto(`${BASE}/tools/demo/word_stats`);
  const badges = await page.locator('ul.permissions li').allTextContents();
  assert.deepEqual(badges, ['Read-only', 'No network']);
  await shot(page, '18-listing-permissions');

  // A plain GET form: the filter works from the URL alone.
  await page.goto(`${BASE}/browse?can=offline`);
  assert.equal(await page.inputValue('select[name=can]'), 'offline');
  const cards = await page.locator('.listing-card').count();
  assert.ok(cards >= 5, `the demo tools are read-only and offline (${cards} cards)`);
  assert.equal(await page.locator('.listing-card:has-text("Text kit")').count(), 0, 'a bundle has no permissions of its own');
  await shot(page, '19-browse-read-only-offline');
  await page.close();
});
