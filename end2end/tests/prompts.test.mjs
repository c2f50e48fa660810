// Prompts and resources, as an author makes them: a tool whose editor
// setting serves it as a prompt, then as a resource at a URI template, each
// reached by an MCP client at once. Real browser, real release server.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { BASE, launch, newPage, shot, hydrated, joinByInvite, call, mcpRequest, unique } from './browser.mjs';

let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

/** Chooses what the editor's settings serve the tool as, and saves them. */
async function serveAs(page, editor, kind, uri = '', mime = '') {
  await page.goto(editor);
  await hydrated(page);
  const form = page.locator('form:has(select[name=serves])');
  await form.locator('select[name=serves]').selectOption(kind);
  await form.locator('input[name=resource_uri]').fill(uri);
  await form.locator('input[name=resource_mime]').fill(mime);
  await form.locator('button', { hasText: 'Save settings' }).click();
  await form.locator('.alert.ok').waitFor();
}

test('an author serves a tool as a prompt and then as a resource, and an MCP client gets each', async () => {
  const department = unique('docs');
  const page = await newPage(browser);
  const errors = [];
  page.on('pageerror', (e) => errors.push(`${page.url()}: ${e.message}`));
  await joinByInvite(browser, page, { department, displayName: 'Dana Docs' });
  await page.request.post(`${BASE}/api/tools/create`, {
    form: { name: 'brief', title: 'Write a brief', description: 'A brief on a topic.', tags: '', visibility: 'everyone' },
    headers: { Origin: BASE, Accept: 'application/json' },
  });
  const tool = await call(page, 'tools/detail', { department, name: 'brief' });
  const args = [{ name: 'topic', type: { kind: 'string' }, description: 'What the brief is about', required: true }];
  const code = 'return `Write a three-line brief on ${$topic}.`;';
  const version = await call(page, 'tools/save_version', { tool: tool.id, code, args, changelog: 'v1' }, true);
  await call(page, 'tools/publish', { tool: String(tool.id), version: String(version) });
  const token = await call(page, 'tokens/create', { name: 'prompts', expires_in_days: '1', scope: '' });
  const endpoint = `/mcp/tools/${department}/brief`;
  const editor = `${BASE}/tools/${department}/brief/edit`;

  await serveAs(page, editor, 'prompt');
  await shot(page, '99-served-as-prompt');
  const listed = await mcpRequest(token, endpoint, 'prompts/list', {});
  assert.deepEqual(listed.result.prompts.map((p) => [p.name, p.arguments]),
    [['brief', [{ name: 'topic', description: 'What the brief is about', required: true }]]], JSON.stringify(listed));
  const got = await mcpRequest(token, endpoint, 'prompts/get', { name: 'brief', arguments: { topic: 'the launch' } });
  assert.equal(got.result.messages[0].content.text, 'Write a three-line brief on the launch.', JSON.stringify(got));
  assert.deepEqual((await mcpRequest(token, endpoint, 'tools/list', {})).result.tools, []);

  await page.goto(`${BASE}/tools/${department}/brief`);
  await hydrated(page);
  assert.equal(await page.locator('h1 .badge', { hasText: 'prompt' }).count(), 1);

  // An unusable URI is refused with the field's own words, and nothing changes.
  await page.goto(editor);
  await hydrated(page);
  const form = page.locator('form:has(select[name=serves])');
  await form.locator('select[name=serves]').selectOption('resource');
  await form.locator('input[name=resource_uri]').fill('no scheme here');
  await form.locator('button', { hasText: 'Save settings' }).click();
  assert.match(await form.locator('.alert.error').textContent(), /Resource URI: must start with a scheme/);

  await serveAs(page, editor, 'resource', 'briefs://{topic}', 'text/markdown');
  const templates = await mcpRequest(token, endpoint, 'resources/templates/list', {});
  assert.deepEqual(templates.result.resourceTemplates.map((t) => [t.uriTemplate, t.mimeType]), [['briefs://{topic}', 'text/markdown']]);
  const read = await mcpRequest(token, endpoint, 'resources/read', { uri: 'briefs://pricing' });
  assert.deepEqual(read.result.contents, [{ uri: 'briefs://pricing', mimeType: 'text/markdown', text: 'Write a three-line brief on pricing.' }]);
  await page.goto(`${BASE}/tools/${department}/brief`);
  await hydrated(page);
  assert.match(await page.locator('.page-head').textContent(), /resource.*briefs:\/\/\{topic\}.*text\/markdown/s);
  // The page's MCP debugger speaks resources to a resource: its template, then a read at the URI the arguments fill.
  await page.click('.debugger-connect');
  await page.waitForSelector('.debugger-call');
  assert.match(await page.textContent('.debugger-log'), /resources\/templates\/list/);
  assert.equal(await page.textContent('.debugger-call'), 'Read resource');
  await page.fill('.debugger-args', '{"topic": "the road map"}');
  await page.click('.debugger-call');
  await page.waitForFunction(() => document.querySelector('.debugger-log')?.textContent.includes('Write a three-line brief on the road map.'));
  assert.match(await page.textContent('.debugger-log'), /briefs:\/\/the%20road%20map/);
  await shot(page, '99-resource-listing');
  assert.deepEqual(errors, []);
});
