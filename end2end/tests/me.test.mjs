// The personal endpoint /mcp/me with the official TypeScript SDK: one
// connection reaches every tool a person may use (search, describe, call, run
// code), and a star on a listing page puts the tool in its list at once.
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { SSEClientTransport } from '@modelcontextprotocol/sdk/client/sse.js';
import { ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { BASE, launch, newPage, shot, signInAsAdmin, hydrated, watchingEventStream } from './browser.mjs';

const TOKEN = process.env.TOOLSHED_TOKEN;
const headers = { Authorization: `Bearer ${TOKEN}` };
const FOUR = ['search_tools', 'describe_tool', 'call_tool', 'run_code'];

let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

async function connect(Transport = StreamableHTTPClientTransport, path = '/mcp/me', streamableFetch = undefined) {
  const client = new Client({ name: 'toolshed-e2e', version: '1.0.0' });
  const options = Transport === SSEClientTransport
    ? { requestInit: { headers }, eventSourceInit: { fetch: (url, init) => fetch(url, { ...init, headers: { ...init?.headers, ...headers } }) } }
    : { requestInit: { headers }, fetch: streamableFetch };
  await client.connect(new Transport(new URL(`${BASE}${path}`), options));
  return client;
}

const until = async (done, what) => {
  for (let i = 0; i < 100 && !done(); i++) await new Promise((r) => setTimeout(r, 100));
  assert.ok(done(), what);
};

test('one connection finds, describes and calls any tool, and combines them in code', async () => {
  const client = await connect();
  assert.equal(client.getServerVersion().name, 'toolshed-admin');
  assert.match(client.getInstructions(), /search_tools/);
  const { tools } = await client.listTools();
  assert.deepEqual(tools.map((t) => t.name), FOUR);

  const search = await client.callTool({ name: 'search_tools', arguments: { query: 'how many words are in my essay' } });
  const hits = search.structuredContent.tools;
  assert.equal(hits[0].name, 'demo/word_stats', JSON.stringify(hits));
  assert.ok(hits[0].tokens > 0 && hits[0].summary.length > 0);

  const described = await client.callTool({ name: 'describe_tool', arguments: { name: 'demo/word_stats' } });
  assert.deepEqual(described.structuredContent.inputSchema.required, ['text']);

  const called = await client.callTool({ name: 'call_tool', arguments: { name: 'demo/word_stats', arguments: { text: 'a b a' } } });
  assert.equal(called.structuredContent.words, 3);
  const missing = await client.callTool({ name: 'call_tool', arguments: { name: 'demo/no_such_tool' } });
  assert.equal(missing.isError, true);
  assert.match(missing.content[0].text, /There is no tool named/);

  const code = "const s = await tools['demo/word_stats']({ text: 'x y' });\nconst e = await tools['demo/echo']({ text: 'done' });\nconsole.log(s.words, e);";
  const ran = await client.callTool({ name: 'run_code', arguments: { code } });
  assert.equal(ran.isError ?? false, false, ran.content[0].text);
  assert.equal(ran.content[0].text, '2 done');
  await client.close();
});

test('the personal endpoint speaks the legacy SSE transport too', async () => {
  const client = await connect(SSEClientTransport, '/mcp/me/sse');
  assert.deepEqual((await client.listTools()).tools.map((t) => t.name), FOUR);
  const echoed = await client.callTool({ name: 'call_tool', arguments: { name: 'demo/echo', arguments: { text: 'over SSE' } } });
  assert.equal(echoed.content[0].text, 'over SSE');
  await client.close();
});

test('a star on a listing page lists the tool on the personal endpoint at once', async () => {
  const events = watchingEventStream();
  const client = await connect(StreamableHTTPClientTransport, '/mcp/me', events.fetch);
  let changed = 0;
  client.setNotificationHandler(ToolListChangedNotificationSchema, () => { changed += 1; });
  await events.opened;

  const page = await newPage(browser);
  await signInAsAdmin(page);
  await page.goto(`${BASE}/tools/demo/word_stats`);
  await hydrated(page);
  assert.equal(await page.textContent('button.favourite'), '☆ Star');
  await page.click('button.favourite');
  await page.waitForSelector('button.favourite[aria-pressed="true"]');
  assert.equal(await page.textContent('button.favourite'), '★ Starred');
  await shot(page, '16-listing-starred');

  await until(() => changed > 0, 'the session hears that its list changed');
  const { tools } = await client.listTools();
  assert.deepEqual(tools.map((t) => t.name), [...FOUR, 'demo__word_stats']);
  const direct = await client.callTool({ name: 'demo__word_stats', arguments: { text: 'one two' } });
  assert.equal(direct.structuredContent.words, 2);

  // The Account page shows the endpoint and how each client connects to it.
  await page.goto(`${BASE}/account`);
  await hydrated(page);
  await page.waitForSelector('.personal-endpoint input.endpoint');
  assert.equal(await page.inputValue('.personal-endpoint input.endpoint'), `${BASE}/mcp/me`);
  await shot(page, '17-account-personal-endpoint');

  // Without JavaScript the star is a plain form, and it takes the star away again.
  const plain = await newPage(browser, { javaScriptEnabled: false, storageState: await page.context().storageState() });
  await plain.goto(`${BASE}/tools/demo/word_stats`);
  assert.equal(await plain.textContent('button.favourite'), '★ Starred');
  // The form's answer sends the browser back where it came from.
  await Promise.all([plain.waitForURL(/\/tools\/demo\/word_stats\?$/), plain.click('button.favourite')]);
  assert.equal(await plain.textContent('button.favourite'), '☆ Star');
  await until(() => changed > 1, 'and hears that too');
  assert.deepEqual((await client.listTools()).tools.map((t) => t.name), FOUR);
  await plain.close();
  await page.close();
  await client.close();
});
