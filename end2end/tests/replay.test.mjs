// A failed call can be replayed: a call over MCP fails, its tool's editor
// finds it with its arguments (the sensitive one redacted), console and
// $fetch answers, replays it against the draft without the network, fixes
// the code, and keeps the fix as a test case in one click.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { BASE, launch, newPage, shot, unique, hydrated, joinByInvite, call, setCode, signInAsAdmin, shotOf } from './browser.mjs';

let browser;
let api;
let served = 0;
before(async () => {
  browser = await launch();
  // A rates API on loopback whose fee service is down.
  api = http.createServer((req, res) => {
    served += 1;
    if (req.url.startsWith('/rates')) {
      res.writeHead(200, { 'Content-Type': 'application/json' }).end('{"EUR":2}');
    } else {
      res.writeHead(503).end('maintenance');
    }
  });
  await new Promise((resolve) => api.listen(0, '127.0.0.1', resolve));
});
after(async () => {
  await browser?.close();
  api?.close();
});

test('a failed MCP call is replayed in the editor against its recorded $fetch answers and becomes a test case', async () => {
  const base = `http://127.0.0.1:${api.address().port}`;
  const department = unique('replay');
  const author = await newPage(browser);
  const errors = [];
  author.on('pageerror', (e) => errors.push(e.message));
  await joinByInvite(browser, author, { department });

  const name = unique('convert_');
  await author.request.post(`${BASE}/api/tools/create`, {
    form: { name, title: 'Convert', description: 'Converts an amount to euros.', tags: '', visibility: 'everyone' },
    headers: { Origin: BASE, Accept: 'application/json' },
  });
  const tool = await call(author, 'tools/detail', { department, name });
  await call(author, 'tools/settings', {
    tool: String(tool.id), title: 'Convert', description: 'Converts an amount to euros.', tags: '', visibility: 'everyone',
    timeout_ms: '2000', memory_mib: '32', fetch_allow: `127.0.0.1:${api.address().port}`, read_only_hint: 'true',
  });
  const args = [
    { name: 'amount', type: { kind: 'number' }, required: true },
    { name: 'api_key', type: { kind: 'string' }, required: true, sensitive: true },
  ];
  const broken = `console.log('converting with key ' + $api_key);
const rates = await (await $fetch(\`${base}/rates?key=\${$api_key}\`)).json();
const fees = await $fetch('${base}/fees');
return { total: $amount * rates.EUR + (await fees.json()).fee };`;
  const v1 = await call(author, 'tools/save_version', { tool: tool.id, code: broken, args, changelog: 'first' }, true);
  await call(author, 'tools/publish', { tool: String(tool.id), version: String(v1) });

  // Someone's agent calls it over MCP, with the official SDK, and it fails.
  const client = new Client({ name: 'toolshed-e2e', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${BASE}/mcp/tools/${department}/${name}`), {
    requestInit: { headers: { Authorization: `Bearer ${process.env.TOOLSHED_TOKEN}` } },
  }));
  const failed = await client.callTool({ name, arguments: { amount: 10, api_key: 'k-12345678' } });
  await client.close();
  assert.equal(failed.isError, true);
  assert.match(failed.content[0].text, /SyntaxError/);
  assert.equal(served, 2);

  // Kept by the usage writer, which writes every quarter of a second.
  for (let i = 0; i < 40 && (await call(author, 'tools/failed_calls', { tool: String(tool.id) })).length === 0; i++) {
    await new Promise((resolve) => setTimeout(resolve, 100));
  }

  // The listing page tells its editor; the editor lists the failure; Replay shows what the call sent and got back.
  await author.goto(`${BASE}/tools/${department}/${name}`);
  assert.match(await author.textContent('.kept-failures'), /1 failed call of the last 14 days can be replayed in the editor/);
  // Its health: the day's calls of v1, all failed, and the error they share.
  const health = author.locator('section.health');
  assert.match(await health.locator('.health-versions tbody tr').first().textContent(), /^v11100\.0 %/);
  assert.match(await health.locator('.common-errors').textContent(), /1×\s*SyntaxError/);
  await shotOf(health, '84-listing-health');

  // Admins see it among the listings that failed most (the ten with the most failed calls).
  const admin = await newPage(browser);
  await signInAsAdmin(admin);
  const ranking = await call(admin, 'admin/health', {});
  const counts = ranking.failing.map((l) => l.errors);
  assert.deepEqual(counts, [...counts].sort((a, b) => b - a), 'the most failed calls first');
  const ranked = ranking.failing.some((l) => l.href === `/tools/${department}/${name}`);
  assert.ok(ranked || counts.length === 10, 'ranked, unless ten listings failed more');
  await admin.goto(`${BASE}/admin/health`);
  await admin.locator('.rank.failing tbody tr').first().waitFor();
  assert.equal(await admin.locator('.rank.failing tbody tr').count(), ranking.failing.length);
  assert.equal(await admin.locator('.rank.slowest .rank-bar').count(), ranking.slowest.length);
  await shot(admin, '84-admin-health');
  await admin.close();

  await hydrated(author);
  await author.click('.kept-failures a');
  await author.waitForURL(`${BASE}/tools/${department}/${name}/edit`);
  await hydrated(author);
  const item = author.locator('ul.failed-calls li').first();
  await item.waitFor();
  assert.match(await item.textContent(), /SyntaxError.*admin · mcp-http · v1/s);
  await item.locator('button:has-text("Replay")').click();
  const replay = author.locator('.replay');
  await replay.waitFor();
  assert.match(await replay.locator('h3').textContent(), /v1 for admin over mcp-http/);
  assert.match(await replay.locator('.fetches').textContent(), /GET .*\/rates\?key=\[redacted\].*200.*GET .*\/fees.*503/s);
  const recordedArgs = JSON.parse(await replay.locator('textarea[aria-label="Replay arguments"]').inputValue());
  assert.deepEqual(recordedArgs, { amount: 10, api_key: '[redacted]' }, 'the sensitive argument is not kept');
  assert.doesNotMatch(await replay.textContent(), /k-12345678/);
  await shot(author, '85-failed-call-replay');

  // The draft is still the broken code: the replay reproduces the failure.
  await replay.locator('button:has-text("Replay with the draft")').click();
  await replay.locator('.run-result .run-meta .pill.bad').waitFor();
  assert.match(await replay.locator('.run-error').textContent(), /SyntaxError/);

  // The fix: a fee service that is down costs nothing. Replayed, it passes.
  await setCode(author, broken.replace('(await fees.json()).fee', '(fees.ok ? (await fees.json()).fee : 0)'));
  await replay.locator('button:has-text("Replay with the draft")').click();
  await replay.locator('.run-result .run-meta .pill.good').waitFor();
  assert.deepEqual(JSON.parse(await replay.locator('.run-result pre.result').textContent()), { total: 20 });
  assert.equal(served, 2, 'replays never reached the network');
  await shot(author, '86-failed-call-fixed');

  // One click keeps it as a test case that answers $fetch from the recording.
  await replay.locator('button:has-text("Save as a test case")').click();
  await replay.locator('.alert.ok:has-text("Saved as the test case")').waitFor();
  const saved = author.locator('.test-cases li:has-text("fixed")');
  await saved.waitFor();
  assert.match(await saved.textContent(), /recorded \$fetch/);
  await author.click('button:has-text("Run all test cases")');
  await author.waitForSelector('.alert.ok:has-text("1 of 1 passed")');
  assert.equal(served, 2);
  await shot(author, '87-replay-saved-as-test');

  // A link to the call opens it straight away; someone who cannot edit the tool sees nothing of it.
  const calls = await call(author, 'tools/failed_calls', { tool: String(tool.id) });
  await author.goto(`${BASE}/tools/${department}/${name}/edit?replay=${calls[0].id}`);
  await hydrated(author);
  await author.locator(`.replay[data-call="${calls[0].id}"]`).waitFor();
  const stranger = await newPage(browser);
  await joinByInvite(browser, stranger, { department: unique('other') });
  await stranger.goto(`${BASE}/tools/${department}/${name}`);
  assert.equal(await stranger.locator('.kept-failures').count(), 0);
  const refused = await stranger.request.post(`${BASE}/api/tools/failed_call`, {
    form: { tool: String(tool.id), call: String(calls[0].id) }, headers: { Origin: BASE, Accept: 'application/json' },
  });
  assert.equal(refused.status(), 403);
  assert.deepEqual(errors, []);
});
