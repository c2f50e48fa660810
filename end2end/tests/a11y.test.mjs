// Accessibility: axe-core (from npm) on every page, signed out and as the
// administrator, finds nothing serious or critical. Then what axe cannot
// judge: the skip link, the argument editor's labels once its fields are
// filled, a boolean's true/false choice, and labels that tell a form's
// fields apart.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { BASE, launch, settled, signInAsAdmin, furnish, VISITOR_PAGES, ADMIN_PAGES } from './browser.mjs';

const AXE = createRequire(import.meta.url).resolve('axe-core/axe.min.js');

let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

/** A context whose pages accept axe: it is injected as an inline script, which the pages' CSP refuses. */
const axeContext = () => browser.newContext({ bypassCSP: true });

/** axe's serious and critical violations on `path`, one line each, naming a few of the elements. */
async function violations(page, path) {
  await page.goto(`${BASE}${path}`);
  await settled(page);
  await page.addScriptTag({ path: AXE });
  const { violations } = await page.evaluate(() => window.axe.run(document, { resultTypes: ['violations'] }));
  return violations
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => `${path}: ${v.id} (${v.impact}) ${v.help}: ${v.nodes.slice(0, 3).map((n) => n.target.join(' ')).join(' | ')}`);
}

test('axe finds nothing serious on any page a visitor can open', async () => {
  const context = await axeContext();
  const page = await context.newPage();
  const found = [];
  for (const path of VISITOR_PAGES) found.push(...await violations(page, path));
  await context.close();
  assert.deepEqual(found, []);
});

test('axe finds nothing serious on any page the administrator can open', async () => {
  const context = await axeContext();
  const page = await context.newPage();
  await signInAsAdmin(page);
  const found = [];
  for (const path of [...ADMIN_PAGES, await furnish(page)]) found.push(...await violations(page, path));
  await context.close();
  assert.deepEqual(found, []);
});

test('the first Tab reaches "Skip to content", which takes the keyboard past the header', async () => {
  const context = await browser.newContext();
  const page = await context.newPage();
  await signInAsAdmin(page);
  await page.goto(`${BASE}/browse`);
  await settled(page);
  await page.keyboard.press('Tab');
  const skip = page.locator(':focus');
  assert.equal(await skip.textContent(), 'Skip to content');
  const box = await skip.boundingBox();
  assert.ok(box.y >= 0, 'it shows once focused');
  await page.keyboard.press('Enter');
  await page.waitForFunction(() => document.activeElement?.id === 'content');
  await page.keyboard.press('Tab');
  assert.ok(await page.evaluate(() => document.activeElement.closest('main') !== null), 'the next Tab lands in the page');
  await context.close();
});

test("the argument editor's fields keep their names once filled, and a boolean's values are true or false", async () => {
  const context = await browser.newContext();
  const page = await context.newPage();
  await signInAsAdmin(page);
  await page.goto(`${BASE}${await furnish(page)}`);
  await settled(page);
  const row = page.locator('.arg-row', { has: page.locator('.arg-name[value="loud"]') }).first();
  const label = (selector) => row.locator(selector).first().getAttribute('aria-label');
  assert.equal(await label('.arg-default'), 'Default of loud');
  assert.equal(await label('.arg-example'), 'Example of loud');
  assert.equal(await label('.arg-description'), 'Description of loud');
  assert.equal(await label('.arg-type'), 'Type of loud');
  assert.equal(await row.locator('.row-actions button').first().getAttribute('aria-label'), 'Move loud up');
  // Renamed, the row's fields follow.
  await row.locator('.arg-name').fill('shout');
  assert.equal(await label('.arg-default'), 'Default of shout');

  // A boolean's default is chosen, not typed: the schema gets a real true.
  const options = await row.locator('select.arg-default option').allTextContents();
  assert.deepEqual(options, ['no default', 'true', 'false']);
  assert.equal(await row.locator('select.arg-default').inputValue(), 'false');
  await row.locator('select.arg-default').selectOption('true');
  await page.click('.schema-preview summary');
  await page.waitForFunction(() => JSON.parse(document.querySelector('.schema-preview pre')?.textContent || '{}').properties?.shout?.default === true);
  // Another type gets a text field again, holding what was chosen.
  await row.locator('.arg-type').selectOption('string');
  assert.equal(await row.locator('input.arg-default').inputValue(), 'true');

  // The CodeMirror editor and the diff's version pickers are named too.
  assert.equal(await page.getAttribute('.cm-content', 'aria-label'), 'Code');
  assert.deepEqual(await page.locator('.diff-form select').evaluateAll((s) => s.map((e) => e.getAttribute('aria-label'))), ['Diff from version', 'Diff to version']);
  await context.close();
});

test('no form has two fields with the same label (the external servers page had two "Name"s)', async () => {
  const context = await browser.newContext();
  const page = await context.newPage();
  await signInAsAdmin(page);
  await furnish(page);
  const repeated = [];
  for (const path of ADMIN_PAGES) {
    await page.goto(`${BASE}${path}`);
    await settled(page);
    const found = await page.locator('form').evaluateAll((forms) => forms.flatMap((form) => {
      const name = (field) => (field.getAttribute('aria-label') ?? [...field.labels].map((l) => l.textContent).join(' ')).trim();
      const names = [...form.querySelectorAll('input:not([type=hidden]), select, textarea')].map(name);
      return names.filter((n, i) => n && names.indexOf(n) !== i);
    }));
    repeated.push(...found.map((n) => `${path}: "${n}"`));
  }
  assert.deepEqual(repeated, []);
  // The register form names both of its names for what they are.
  const form = page.locator('.register-server form');
  await page.goto(`${BASE}/admin/servers`);
  await settled(page);
  assert.match(await form.locator('label', { has: page.locator('input[name=name]') }).textContent(), /^Server name/);
  assert.match(await form.locator('label', { has: page.locator('input[name=credential_name]') }).textContent(), /^Credential's header or parameter name/);
  await context.close();
});
