// Authoring a tool as a person does it: visual argument editor, one-click run,
// save, publish, edit, roll back. Real browser, real release server.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { BASE, launch, newPage, shot, unique, hydrated, setCode, joinByInvite, call } from './browser.mjs';

let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

async function signUp(page) {
  await joinByInvite(browser, page, { department: 'platform', displayName: 'Tool Author', password: 'write-one-function' });
}

// Creates a tool through the New tool form and waits for its editor; returns its name.
async function newTool(page, prefix, title, description = '') {
  await page.goto(`${BASE}/tools/new`);
  await hydrated(page);
  const name = unique(prefix);
  await page.fill('input[name=name]', name);
  await page.fill('input[name=title]', title);
  if (description) await page.fill('textarea[name=description]', description);
  await page.click('main button[type=submit]');
  await page.waitForURL(`**/tools/platform/${name}/edit`);
  await hydrated(page);
  return name;
}

test('write a tool with two arguments, run it, save, publish, edit and roll back', async () => {
  const page = await newPage(browser);
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  await signUp(page);
  const name = await newTool(page, 'greet_', 'Greeter', 'Greets someone, **several times**.');

  // Arguments: rename the starter row, add an integer with a default.
  const first = page.locator('.arg-row').first();
  await first.locator('.arg-name').fill('who');
  await page.click('.add-arg');
  const second = page.locator('.arg-row').nth(1);
  await second.locator('.arg-name').fill('times');
  await second.locator('.arg-type').selectOption('integer');
  await second.locator('.arg-default').fill('2');
  await second.locator('.arg-description').fill('How many greetings');
  await page.click('.schema-preview summary');
  await page.waitForFunction(() => document.querySelector('.schema-preview pre')?.textContent.includes('"times"'));
  const schema = JSON.parse(await page.textContent('.schema-preview pre'));
  assert.deepEqual(schema.required, ['who', 'times']);
  assert.equal(schema.properties.times.type, 'integer');

  await setCode(page, "console.log('greeting', $who);\nreturn Array($times).fill('Hi ' + $who).join(', ');\n");
  await page.waitForSelector('.save-state[data-state="saved"]', { timeout: 10_000 });

  // One click runs the draft with mock values: the example and the default.
  await page.waitForFunction(() => document.querySelector('.arg-fields')?.textContent.includes('times'));
  await page.click('.run-button');
  await page.waitForSelector('.run-result');
  assert.match(await page.textContent('.run-result .result'), /Hi world, Hi world/);
  assert.match(await page.textContent('.console'), /greeting world/);
  await shot(page, '10-editor-run');

  // Save v1 and publish it.
  await page.fill('input[placeholder^="What changed"]', 'first greeting');
  await page.click('button.save-version');
  await page.waitForSelector('tr[data-version="1"]');
  await page.click('tr[data-version="1"] button.publish');
  await page.waitForSelector('tr[data-version="1"].published');

  // Edit, save v2, publish: v1 then offers a roll back.
  await setCode(page, "return Array($times).fill('HELLO ' + $who.toUpperCase()).join(' ');\n");
  await page.fill('input[placeholder^="What changed"]', 'shout');
  await page.click('button.save-version');
  await page.waitForSelector('tr[data-version="2"]');
  await page.click('tr[data-version="2"] button.publish');
  await page.waitForSelector('tr[data-version="2"].published');
  assert.equal((await page.textContent('tr[data-version="1"] button.publish')).trim(), 'Roll back');
  await shot(page, '11-editor-versions');
  await page.click('tr[data-version="1"] button.publish');
  await page.waitForSelector('tr[data-version="1"].published');
  // It says what it did, and only that: not the "Saved version 2." of before.
  await page.waitForSelector('.alert.ok:has-text("Version 1 is published")');
  assert.doesNotMatch(await page.textContent('main'), /Saved version 2\./);

  // The listing runs the published (rolled back) version.
  await page.goto(`${BASE}/tools/platform/${name}`);
  await hydrated(page);
  assert.match(await page.textContent('.markdown'), /Greets someone, several times/);
  assert.equal(await page.inputValue('.connect-panel .endpoint'), `${BASE}/mcp/tools/platform/${name}`);
  await page.click('.connect-panel button:has-text("curl")');
  // The curl snippet is a working script: run it with a real token.
  const script = (await page.textContent('.connect-panel .snippet')).replace('<your token>', process.env.TOOLSHED_TOKEN);
  assert.match(execFileSync('bash', ['-c', script], { encoding: 'utf8' }), new RegExp(`"name":"${name}"`));
  // Each client its own configuration: VS Code's `servers` of type http with its
  // install link, Cursor's `mcpServers` with its deeplink (base64 JSON).
  const endpoint = `${BASE}/mcp/tools/platform/${name}`;
  await page.click('.connect-panel button[data-client="vscode"]');
  const vscode = JSON.parse(await page.textContent('.connect-panel .snippet'));
  assert.deepEqual(Object.values(vscode.servers).map((s) => [s.type, s.url]), [['http', endpoint]]);
  const vscodeLink = await page.getAttribute('.connect-panel .install-link', 'href');
  assert.equal(JSON.parse(decodeURIComponent(vscodeLink.replace('vscode:mcp/install?', ''))).url, endpoint);
  await page.click('.connect-panel button[data-client="cursor"]');
  assert.deepEqual(Object.values(JSON.parse(await page.textContent('.connect-panel .snippet')).mcpServers).map((s) => s.url), [endpoint]);
  const cursorLink = new URL(await page.getAttribute('.connect-panel .install-link', 'href'));
  assert.equal(JSON.parse(Buffer.from(cursorLink.searchParams.get('config'), 'base64').toString()).url, endpoint);
  // The configuration names the server with its department (a fork of it keeps an entry
  // of its own in the same file), and Copy puts exactly the snippet on the clipboard.
  assert.deepEqual(Object.keys(vscode.servers), [`platform-${name}`]);
  await page.context().grantPermissions(['clipboard-read', 'clipboard-write'], { origin: BASE });
  await page.click('.connect-panel .copy-snippet');
  await page.waitForSelector('.connect-panel .copy-snippet:has-text("Copied")');
  assert.equal(await page.evaluate(() => navigator.clipboard.readText()), await page.textContent('.connect-panel .snippet'));
  await page.click('.connect-panel button[data-client="claude-code"]');
  assert.match(await page.textContent('.connect-panel .snippet'), new RegExp(`^claude mcp add --transport http \\S+ ${endpoint}`));
  await shot(page, '12-connect-cursor');
  // Pinned: the endpoint and every snippet name version 1, which stays served whatever is published next.
  await page.click('.connect-panel .version-choice button:has-text("Pinned to v1")');
  assert.equal(await page.inputValue('.connect-panel .endpoint'), `${endpoint}@v1`);
  assert.match(await page.textContent('.connect-panel .snippet'), new RegExp(`^claude mcp add --transport http \\S+ ${endpoint}@v1`));
  await shot(page, '12-connect-pinned');
  await page.click('.connect-panel .version-choice button:has-text("Latest")');
  assert.equal(await page.inputValue('.connect-panel .endpoint'), endpoint);
  await page.waitForFunction(() => document.querySelector('.arg-fields')?.textContent.includes('who'));
  await page.click('.run-button');
  await page.waitForSelector('.run-result');
  assert.match(await page.textContent('.run-meta'), /v1/);
  assert.match(await page.textContent('.run-result .result'), /Hi world, Hi world/);
  await shot(page, '12-listing-run');

  // The API card: the code-mode TypeScript API (the same text as …/api.d.ts),
  // OpenAI function definitions, and both token costs.
  await page.click('.api-card summary');
  const typescript = await page.textContent('.api-card .api-code');
  assert.match(typescript, new RegExp(`declare const tools: \\{[\\s\\S]*${name}\\(input: \\w+Input\\): Promise<\\w+Output>;`));
  assert.match(typescript, /\* How many greetings\n\s*\* @default 2\n\s*\*\/\n\s*times: number;/);
  const served = await fetch(`${BASE}/mcp/tools/platform/${name}/api.d.ts`, { headers: { Authorization: `Bearer ${process.env.TOOLSHED_TOKEN}` } });
  assert.equal(served.headers.get('content-type'), 'application/typescript; charset=utf-8');
  assert.equal(await served.text(), typescript);
  assert.match(await page.textContent('.token-cost [data-form=tools-list]'), /^\d+tokens: MCP tools\/list JSON$/);
  assert.match(await page.textContent('.token-cost [data-form=code-mode]'), /^\d+tokens: code mode \(tools\/list with run_code\)$/);
  await page.click('.api-card button:has-text("OpenAI functions")');
  const functions = JSON.parse(await page.textContent('.api-card .api-code'));
  assert.equal(functions[0].function.name, name);
  assert.deepEqual(functions[0].function.parameters.required, ['who', 'times']);
  await shot(page, '13-listing-api');

  // The MCP debugger: initialize → tools/list → tools/call against the live endpoint.
  await page.click('.debugger-connect');
  await page.waitForSelector('.debugger-call');
  const log = () => page.textContent('.debugger-log');
  assert.match(await log(), /→ initialize[\s\S]*← HTTP 200 · result[\s\S]*→ notifications\/initialized[\s\S]*← HTTP 202[\s\S]*→ tools\/list[\s\S]*"inputSchema"/);
  await page.waitForFunction(() => document.querySelector('.debugger-args')?.value.includes('who'));
  await page.fill('.debugger-args', '{"who": "debugger", "times": 1}');
  await page.click('.debugger-call');
  await page.waitForFunction(() => document.querySelector('.debugger-log')?.textContent.includes('Hi debugger'));
  assert.match(await page.textContent('.mcp-debugger .mono.small'), /session [0-9a-f-]{16,}/);
  await shot(page, '14-mcp-debugger');
  assert.deepEqual(errors, []);
  await page.close();
});

test('before a publish the editor shows what changes for callers, and a breaking change needs a confirmation', async () => {
  const page = await newPage(browser);
  await signUp(page);
  const name = await newTool(page, 'changing_', 'Changing');
  const tool = await call(page, 'tools/detail', { department: 'platform', name });
  const save = (args) => call(page, 'tools/save_version', { tool: tool.id, code: "return 'ok';", args, changelog: 'x' }, true);
  const who = { name: 'who', type: { kind: 'string' }, required: true };
  const v1 = await save([who]);
  await call(page, 'tools/publish', { tool: String(tool.id), version: String(v1) });
  const v2 = await save([who, { name: 'loud', type: { kind: 'boolean' }, required: false }]);
  const v3 = await save([{ ...who, type: { kind: 'integer' } }]);
  await page.reload();
  await hydrated(page);

  // Compatible (an optional argument added): it says so and waits for the click.
  await page.click(`tr[data-version="${v2}"] button.publish`);
  await page.waitForSelector('.publish-check');
  assert.match(await page.textContent('.publish-check'), /compatible\s*loud\s*added, optional/);
  assert.equal(await page.locator('.publish-check.breaking').count(), 0);
  await page.click('.publish-check button.publish-confirm');
  await page.waitForSelector(`tr[data-version="${v2}"].published`);

  // Breaking (an argument retyped and one removed): Publish waits for the box.
  await page.click(`tr[data-version="${v3}"] button.publish`);
  await page.waitForSelector('.publish-check.breaking');
  const check = await page.textContent('.publish-check');
  assert.match(check, /breaking\s*who\s*type changed from string to integer/);
  assert.match(check, /breaking\s*loud\s*removed/);
  assert.match(check, /No bundle follows this tool; nobody called it in the last 30 days\./);
  assert.equal(await page.isDisabled('.publish-check button.publish-confirm'), true);
  await shot(page, '14-publish-breaking');
  await page.check('.publish-check input[name=confirm_breaking]');
  await page.click('.publish-check button.publish-confirm');
  await page.waitForSelector(`tr[data-version="${v3}"].published`);
  assert.equal(await page.locator('.publish-check').count(), 0);
  await page.close();
});

test('an error marks its line in the editor, and a reload keeps the draft', async () => {
  const page = await newPage(browser);
  await signUp(page);
  const name = await newTool(page, 'broken_', 'Broken');
  await setCode(page, "const a = 1;\nconst b = a + 1;\nthrow new RangeError('bad ' + b);\n");
  await page.click('.run-button');
  await page.waitForSelector('.run-error');
  assert.match((await page.textContent('.run-error')).trim(), /^RangeError: bad 2 \(line 3\)$/, 'one clean sentence');
  await page.waitForSelector('.cm-error-line');
  assert.equal(await page.locator('.cm-line').nth(2).getAttribute('class').then((c) => c.includes('cm-error-line')), true);
  await shot(page, '13-error-line');

  await page.waitForSelector('.save-state[data-state="saved"]', { timeout: 10_000 });
  await page.reload();
  await hydrated(page);
  await page.waitForSelector('.cm-editor');
  assert.match(await page.textContent('.cm-content'), /RangeError/);
  await page.close();
});

test('an outbound-only secret is set with its hosts, and the code sees only its placeholder', async () => {
  const page = await newPage(browser);
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  await signUp(page);
  await newTool(page, 'weather_', 'Weather');

  // The card says which secrets editors can read before anyone picks a kind.
  const card = page.locator('section.card:has(h2:has-text("Configuration"))');
  assert.match(await card.textContent(), /anyone who can edit this tool can read/);
  await card.locator('input[name=name]').fill('API_KEY');
  await card.locator('input[name=value]').fill('sk-live-e2e-0123456789');
  await card.locator('input[name=kind][value=outbound]').check();
  await card.locator('input[name=hosts]').fill('api.example.com');
  await card.locator('button[type=submit]').click();
  await page.waitForSelector('.env-vars li:has-text("outbound-only")');
  const listed = await page.textContent('.env-vars');
  assert.match(listed, /API_KEY = outbound-only •+ sent only to api\.example\.com/);
  assert.doesNotMatch(await page.content(), /sk-live-e2e/);
  assert.equal(await card.locator('input[name=value]').inputValue(), '', 'the form let go of the value');
  await card.scrollIntoViewIfNeeded();
  await shot(page, '15-editor-outbound-secret');

  await setCode(page, "return $env.API_KEY.split('').join(' ');\n");
  await page.click('.run-button');
  await page.waitForSelector('.run-result');
  assert.match(await page.textContent('.run-result .result'), /\{ \{ s e c r e t : A P I _ K E Y \} \}/);
  assert.deepEqual(errors, []);
  await page.close();
});
