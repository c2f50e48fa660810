// Reuse as a person does it: find someone else's tool, fork it, change it and
// publish the fork; then put tools in a bundle (one pinned, one following)
// and call both through the bundle's MCP endpoint with the official TS SDK.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { BASE, launch, newPage, shot, unique, hydrated, setCode, signUp, call } from './browser.mjs';

let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

/** A tool in `department` with one published version per body in `codes` (the last is published). */
async function publishTool(page, department, name, title, description, codes) {
  await page.request.post(`${BASE}/api/tools/create`, {
    form: { name, title, description, tags: 'reuse', visibility: 'everyone' },
    headers: { Origin: BASE, Accept: 'application/json' },
  });
  const tool = await call(page, 'tools/detail', { department, name });
  let version;
  for (const code of codes) {
    version = await call(page, 'tools/save_version', { tool: tool.id, code, args: [{ name: 'who', type: { kind: 'string' }, required: true }], changelog: code }, true);
  }
  await call(page, 'tools/publish', { tool: String(tool.id), version: String(version) });
  return tool.id;
}

/** Clicks the bundle editor's Save and returns the answer to the request it sent. */
async function saveBundle(page) {
  const [res] = await Promise.all([
    page.waitForResponse((r) => r.url().includes('/api/bundles/save_version')),
    page.click('button.save-version'),
  ]);
  return res;
}

test('search, open a listing, fork it into my department, edit and publish the fork', async () => {
  const word = unique('zf');
  const source = await newPage(browser);
  const sourceDept = unique('origin');
  await signUp(source, sourceDept, 'Original Author');
  await publishTool(source, sourceDept, 'greet', 'Greeter', `Says hello, the ${word} way.`, ['return `Hello ${$who}`;']);

  const page = await newPage(browser);
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  const myDept = unique('fork');
  await signUp(page, myDept, 'Fork Author');
  await page.goto(`${BASE}/browse?q=${word}`);
  await hydrated(page);
  await page.click(`.listing-card:has-text("Greeter")`);
  await page.waitForURL(new RegExp(`/tools/${sourceDept}/greet$`));
  await hydrated(page);
  await page.fill('.fork-form input[name=name]', 'my_greet');
  await page.click('.fork-form button[type=submit]');
  await page.waitForURL(new RegExp(`/tools/${myDept}/my_greet/edit$`));
  await hydrated(page);
  // Version 1 is the copy; change it, save v2 and publish it.
  await page.waitForSelector('tr[data-version="1"]');
  assert.match(await page.textContent('tr[data-version="1"]'), new RegExp(`Forked from ${sourceDept}/greet@v1`));
  await setCode(page, 'return `Hi there, ${$who}!`;\n');
  await page.fill('input[placeholder^="What changed"]', 'friendlier');
  await page.click('button.save-version');
  await page.waitForSelector('tr[data-version="2"]');
  await page.click('tr[data-version="2"] button.publish');
  await page.waitForSelector('tr[data-version="2"].published');

  // The source moves on: the fork's page says so and shows what changed.
  const sourceTool = await call(source, 'tools/detail', { department: sourceDept, name: 'greet' });
  const v = await call(source, 'tools/save_version', { tool: sourceTool.id, code: 'return `Good day, ${$who}`;', args: [{ name: 'who', type: { kind: 'string' }, required: true }], changelog: 'formal' }, true);
  await call(source, 'tools/publish', { tool: String(sourceTool.id), version: String(v) });
  await page.goto(`${BASE}/tools/${myDept}/my_greet`);
  await hydrated(page);
  assert.match(await page.textContent('.forked-from'), new RegExp(`Forked from ${sourceDept}/greet@v1`));
  assert.match(await page.textContent('.upstream-newer'), new RegExp(`has published v${v} since this was forked from v1`));
  await page.click('.upstream-newer summary');
  assert.match(await page.textContent('.upstream-newer .diff'), /Good day/);
  assert.match(await page.textContent('.page-head'), /v2 published/);
  await shot(page, '40-fork-listing');

  await source.goto(`${BASE}/tools/${sourceDept}/greet`);
  assert.match(await source.textContent('.fork-list'), new RegExp(`${myDept}/my_greet`));
  assert.deepEqual(errors, []);
});

test('a bundle with a pinned and a following tool serves both names over MCP', async () => {
  const page = await newPage(browser);
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  const dept = unique('kit');
  await signUp(page, dept, 'Bundle Author');
  await publishTool(page, dept, 'hello', 'Hello', 'Says hello.', ['return `v1 hello ${$who}`;', 'return `v2 hello ${$who}`;']);
  await publishTool(page, dept, 'bye', 'Bye', 'Says goodbye.', ['return `v1 bye ${$who}`;', 'return `bye ${$who}`;']);

  await page.goto(`${BASE}/tools/mine`);
  await hydrated(page);
  await page.click('a:has-text("New bundle")');
  await page.waitForURL(/\/bundles\/new$/);
  await hydrated(page);
  await page.fill('input[name=name]', 'greetings');
  await page.fill('input[name=title]', 'Greetings kit');
  await page.fill('textarea[name=description]', 'Everything for **greeting** people.');
  await page.click('main button[type=submit]');
  await page.waitForURL(new RegExp(`/bundles/${dept}/greetings/edit$`));
  await hydrated(page);

  // Find the tools and add them; a tool in the bundle says so and cannot be added again.
  const add = async (words, name) => {
    await page.fill('.candidate-search', words);
    await page.click('.bundle-search button[type=submit]');
    // Until the answer is in, the list is the previous one, about to be replaced under the pointer.
    await page.locator('.bundle-search :text("Searching…")').waitFor({ state: 'detached' });
    const button = page.locator(`.candidates li[data-tool="${dept}/${name}"] .add-tool`);
    assert.equal(await button.textContent(), 'Add');
    await button.click();
    assert.equal(await button.textContent(), 'Added');
    assert.ok(await button.isDisabled());
  };
  await add('says hello', 'hello');
  await add('goodbye', 'bye');
  const rows = page.locator('.member-table.editing tbody tr');
  assert.equal(await rows.count(), 2);
  const rename = async (row, name) => {
    await row.locator('.exposed-name').fill(name);
    await row.locator('.exposed-name').dispatchEvent('change');
  };
  // Two members under one name: saving says so and suggests a way out.
  await rename(rows.nth(1), 'hello');
  assert.equal((await saveBundle(page)).status(), 422);
  await page.waitForSelector('.bundle-members .alert.error');
  assert.match(await page.textContent('.bundle-members .alert.error'), /would both be called “hello”/);
  // Removed, a tool can be added again (under its own name).
  await rows.nth(1).locator('button.remove').click();
  assert.equal(await rows.count(), 1);
  await add('goodbye', 'bye');
  await rows.nth(0).locator('.member-version').selectOption('1');
  await rename(rows.nth(0), 'hello_v1');
  await page.fill('input[placeholder^="What changed"]', 'hello pinned, bye following');
  assert.equal((await saveBundle(page)).status(), 200);
  await page.waitForSelector('tr[data-version="1"]');
  await page.click('tr[data-version="1"] button.publish');
  await page.waitForSelector('tr[data-version="1"].published');
  await shot(page, '41-bundle-editor');

  await page.goto(`${BASE}/bundles/${dept}/greetings`);
  await hydrated(page);
  const table = await page.textContent('.member-table');
  assert.match(table, /hello_v1[\s\S]*v1 \(pinned\)[\s\S]*bye[\s\S]*follows published: v2/);
  assert.equal(await page.inputValue('.connect-panel .endpoint'), `${BASE}/mcp/bundles/${dept}/greetings`);
  // The page's debugger lists both and can call either.
  await page.click('.debugger-connect');
  await page.waitForSelector('.debugger-call');
  await page.selectOption('.debugger-tool', { label: 'bye' });
  await page.fill('.debugger-args', '{"who": "page"}');
  await page.click('.debugger-call');
  await page.waitForFunction(() => document.querySelector('.debugger-log')?.textContent.includes('bye page'));
  await shot(page, '42-bundle-listing');

  const client = new Client({ name: 'toolshed-e2e', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${BASE}/mcp/bundles/${dept}/greetings`), {
    requestInit: { headers: { Authorization: `Bearer ${process.env.TOOLSHED_TOKEN}` } },
  }));
  assert.equal(client.getServerVersion().name, `${dept}/greetings`);
  const { tools } = await client.listTools();
  assert.deepEqual(tools.map((t) => t.name), ['hello_v1', 'bye']);
  const text = async (name) => (await client.callTool({ name, arguments: { who: 'sdk' } })).content[0].text;
  assert.equal(await text('hello_v1'), 'v1 hello sdk');
  assert.equal(await text('bye'), 'bye sdk');
  await client.close();
  assert.deepEqual(errors, []);
});
