// A tool that asks, run from its listing page: each question is a form in the
// Run panel, and the tool runs again with the answers; content results show
// their images inline. Real browser, real release server, the demo data's
// `demo/conformance` fixtures.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { BASE, launch, newPage, shot, hydrated, joinByInvite } from './browser.mjs';

let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

test('the Run panel asks the person each question in turn and runs the tool again with the answers', async () => {
  const page = await newPage(browser);
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  await joinByInvite(browser, page, { department: 'platform', displayName: 'Asked Person', password: 'answer-the-tool' });
  await page.goto(`${BASE}/tools/demo/test_input_required_result_multi_round`);
  await hydrated(page);
  await page.click('.run-button');

  const first = page.locator('form.question[data-key="step1"]');
  await first.waitFor();
  assert.match(await first.textContent(), /Step 1: What is your name\?/);
  await first.locator('input').fill('Ada');
  await shot(page, '90-run-panel-question');
  await first.locator('button[type=submit]').click();

  const second = page.locator('form.question[data-key="step2"]');
  await second.waitFor();
  await second.locator('input').fill('green');
  await second.locator('button[type=submit]').click();
  await page.waitForSelector('.run-result');
  assert.match(await page.textContent('.run-result .result'), /Ada likes green/);

  // Declining is an answer too: the tool decides what that means.
  await page.goto(`${BASE}/tools/demo/test_input_required_result_request_state`);
  await hydrated(page);
  await page.click('.run-button');
  await page.locator('form.question[data-key="confirm"] button.secondary').click();
  await page.waitForSelector('.run-result');
  assert.match(await page.textContent('.run-result .result'), /state-ok: decline/);
  assert.deepEqual(errors, []);
});

test('choices, multi-selects and check boxes answer with the values the question lists', async () => {
  const page = await newPage(browser);
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  await joinByInvite(browser, page, { department: 'platform', displayName: 'Choosy Person', password: 'pick-the-options' });
  await page.goto(`${BASE}/tools/demo/test_elicitation_sep1330_enums`);
  await hydrated(page);
  await page.click('.run-button');
  const form = page.locator('form.question[data-key="ask1"]');
  await form.waitFor();
  // Each choice shows its title and answers with its value.
  await form.locator('label.arg-field', { hasText: /^untitledSingle/ }).locator('select').selectOption({ label: 'option3' });
  await form.locator('label.arg-field', { hasText: /^titledSingle/ }).locator('select').selectOption({ label: 'Second Option' });
  await form.locator('label.arg-field', { hasText: /^legacyEnum/ }).locator('select').selectOption({ label: 'Option Three' });
  await form.locator('label.choice:has-text("option1")').first().locator('input').check();
  await form.locator('label.choice:has-text("option2")').first().locator('input').check();
  await form.locator('label.choice:has-text("Third Choice") input').check();
  await shot(page, '92-run-panel-choices');
  await form.locator('button[type=submit]').click();
  await page.waitForSelector('.run-result');
  const text = await page.textContent('.run-result .result');
  const content = JSON.parse(text.slice(text.indexOf('content=') + 'content='.length).trim());
  assert.deepEqual(content, {
    untitledSingle: 'option3', titledSingle: 'value2', legacyEnum: 'opt3',
    untitledMulti: ['option1', 'option2'], titledMulti: ['value3'],
  });

  // Defaults fill the form; an unticked box answers false, not nothing.
  await page.goto(`${BASE}/tools/demo/test_elicitation_sep1034_defaults`);
  await hydrated(page);
  await page.click('.run-button');
  const defaults = page.locator('form.question[data-key="ask1"]');
  await defaults.waitFor();
  await defaults.locator('label.arg-field', { hasText: /^verified/ }).locator('input[type=checkbox]').uncheck();
  await defaults.locator('button[type=submit]').click();
  await page.waitForSelector('.run-result');
  assert.match(await page.textContent('.run-result .result'),
    /content=\{"name":"John Doe","age":30,"score":95.5,"status":"active","verified":false\}/);
  assert.deepEqual(errors, []);
});

test('a content result shows its text, image and resource in the Run panel', async () => {
  const page = await newPage(browser);
  await joinByInvite(browser, page, { department: 'platform', displayName: 'Content Reader', password: 'look-at-the-result' });
  await page.goto(`${BASE}/tools/demo/test_multiple_content_types`);
  await hydrated(page);
  await page.click('.run-button');
  await page.waitForSelector('.run-result img.result-image');
  const image = page.locator('.run-result img.result-image');
  assert.equal(await image.evaluate((img) => img.naturalWidth), 1, 'the PNG decoded under the page policy');
  assert.match(await page.textContent('.run-result .result'), /Multiple content types test:/);
  assert.match(await page.textContent('.result-resource'), /test:\/\/mixed-content-resource/);
  await shot(page, '91-run-panel-content');
});
