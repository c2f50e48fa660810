// MCP endpoints driven by the official TypeScript SDK client over loopback.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { SSEClientTransport } from '@modelcontextprotocol/sdk/client/sse.js';
import { ElicitRequestSchema, LoggingMessageNotificationSchema, ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { BASE, watchingEventStream } from './browser.mjs';

const TOKEN = process.env.TOOLSHED_TOKEN;

/** Publishes a tool file through the publish API (POST /api/v1/tools); returns its `department/name`. */
async function push(tool) {
  const res = await fetch(`${BASE}/api/v1/tools`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${process.env.TOOLSHED_PUBLISH_TOKEN}`, 'Content-Type': 'application/json' },
    body: JSON.stringify({ visibility: 'everyone', ...tool }),
  });
  const body = await res.text();
  assert.equal(res.status, 200, body);
  return JSON.parse(body).tool;
}

async function connect(path, token = TOKEN, fetch = undefined) {
  const client = new Client({ name: 'toolshed-e2e', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(`${BASE}${path}`), {
    requestInit: { headers: token ? { Authorization: `Bearer ${token}` } : {} }, fetch,
  });
  await client.connect(transport);
  return client;
}

test('the TypeScript SDK lists and calls a published tool', async () => {
  const client = await connect('/mcp/tools/demo/echo');
  const info = client.getServerVersion();
  assert.equal(info.name, 'demo/echo');
  assert.equal(info.version, 'v1');
  const { tools } = await client.listTools();
  assert.equal(tools.length, 1);
  assert.equal(tools[0].name, 'echo');
  assert.equal(tools[0].title, 'Echo');
  assert.deepEqual(tools[0].inputSchema.required, ['text']);
  // What Toolshed vouches for (issue 17): the hints derived from the permissions label, and the label.
  assert.deepEqual(tools[0].annotations, { readOnlyHint: true, destructiveHint: false, openWorldHint: false });
  assert.deepEqual(tools[0]._meta['toolshed/permissions'], { hosts: [], secrets: [], writes: false });
  const result = await client.callTool({ name: 'echo', arguments: { text: 'hello over MCP' } });
  assert.equal(result.isError ?? false, false);
  assert.deepEqual(result.content, [{ type: 'text', text: 'hello over MCP' }]);
  await client.close();
});

test('a tool that asks puts its question to a 2025 session on its own stream and gets the answer', async () => {
  // The TypeScript SDK speaks 2025-11-25: no input-required results, so the call waits while the client is asked.
  const client = new Client({ name: 'toolshed-e2e', version: '1.0.0' }, { capabilities: { elicitation: {} } });
  const asked = [];
  client.setRequestHandler(ElicitRequestSchema, async (request) => {
    asked.push(request.params.message);
    return { action: 'accept', content: { username: 'ada', email: 'ada@example.com' } };
  });
  const transport = new StreamableHTTPClientTransport(new URL(`${BASE}/mcp/bundles/demo/conformance`), {
    requestInit: { headers: { Authorization: `Bearer ${TOKEN}` } },
  });
  await client.connect(transport);
  const result = await client.callTool({ name: 'test_elicitation', arguments: { message: 'Who is calling?' } });
  assert.equal(result.isError ?? false, false, JSON.stringify(result));
  assert.deepEqual(asked, ['Who is calling?']);
  assert.equal(result.content[0].text, 'User response: action=accept, content={"username":"ada","email":"ada@example.com"}');
  await client.close();
});

test('results of every JSON shape reach the SDK, and a declared output schema holds', async () => {
  const name = `shapes_${process.pid}`;
  const slug = await push({
    name,
    code: "return {list: [1, 2], number: 42, object: {ok: true}}[$shape];",
    arguments: [{ name: 'shape', type: { kind: 'string' }, description: 'Which result', required: true }],
  });
  const client = await connect(`/mcp/tools/${slug}`);
  // Structured content is an object: an array or a number goes as text only, or the SDK would reject the result.
  for (const [shape, value] of [['list', [1, 2]], ['number', 42]]) {
    const result = await client.callTool({ name, arguments: { shape } });
    assert.ok(!result.isError, JSON.stringify(result));
    assert.deepEqual(JSON.parse(result.content[0].text), value);
    assert.equal(result.structuredContent, undefined);
  }
  const object = await client.callTool({ name, arguments: { shape: 'object' } });
  assert.deepEqual(object.structuredContent, { ok: true });
  await client.close();

  // The SDK checks structuredContent against the listed outputSchema; the server checks first.
  const typed = `typed_${process.pid}`;
  const outputSchema = { type: 'object', properties: { count: { type: 'integer' } }, required: ['count'] };
  const typedSlug = await push({ name: typed, code: 'return {count: 3};', output_schema: outputSchema });
  const typedClient = await connect(`/mcp/tools/${typedSlug}`);
  const { tools } = await typedClient.listTools();
  assert.deepEqual(tools[0].outputSchema, outputSchema);
  assert.deepEqual((await typedClient.callTool({ name: typed, arguments: {} })).structuredContent, { count: 3 });
  await push({ name: typed, code: "return 'three';", output_schema: outputSchema });
  const wrong = await typedClient.callTool({ name: typed, arguments: {} });
  assert.equal(wrong.isError, true);
  assert.match(wrong.content[0].text, /does not match the tool's output schema: "three" is not of type "object"/);
  await typedClient.close();
});

test('JSON results come back as text and structuredContent', async () => {
  const client = await connect('/mcp/tools/demo/word_stats');
  const result = await client.callTool({ name: 'word_stats', arguments: { text: 'a b a' } });
  assert.deepEqual(result.structuredContent, { words: 3, characters: 5, top: [{ word: 'a', count: 2 }, { word: 'b', count: 1 }] });
  assert.deepEqual(JSON.parse(result.content[0].text), result.structuredContent);
  await client.close();
});

test('bad arguments are a tool error the model can read; an unknown tool is a protocol error', async () => {
  const client = await connect('/mcp/tools/demo/echo');
  const bad = await client.callTool({ name: 'echo', arguments: { text: 42 } });
  assert.equal(bad.isError, true);
  assert.match(bad.content[0].text, /Invalid arguments: `text`/);
  await assert.rejects(client.callTool({ name: 'nope', arguments: {} }), /Unknown tool: nope/);
  await client.close();
});

test('no token, a wrong token, or an unknown listing are refused', async () => {
  // The SDK's error carries the HTTP status as `code`, and our message.
  const status = (code, text) => (e) => e.code === code && text.test(e.message);
  await assert.rejects(connect('/mcp/tools/demo/echo', null), status(401, /Missing API token/));
  await assert.rejects(connect('/mcp/tools/demo/echo', 'tsk_not-a-real-token'), status(401, /Invalid, expired or revoked/));
  await assert.rejects(connect('/mcp/tools/demo/no_such_tool'), status(404, /No such listing/));
  const res = await fetch(`${BASE}/mcp/tools/demo/echo`, { method: 'POST', body: '{}' });
  assert.equal(res.status, 401);
  assert.match(res.headers.get('www-authenticate'), /Bearer/);
});

test('legacy SSE clients (the SDK\'s SSEClientTransport) list and call tools', async () => {
  const client = new Client({ name: 'toolshed-e2e-sse', version: '1.0.0' });
  const headers = { Authorization: `Bearer ${TOKEN}` };
  const transport = new SSEClientTransport(new URL(`${BASE}/mcp/tools/demo/echo/sse`), {
    requestInit: { headers },
    eventSourceInit: { fetch: (url, init) => fetch(url, { ...init, headers: { ...init?.headers, ...headers } }) },
  });
  await client.connect(transport);
  assert.equal(client.getServerVersion().name, 'demo/echo');
  const { tools } = await client.listTools();
  assert.deepEqual(tools.map((t) => t.name), ['echo']);
  const result = await client.callTool({ name: 'echo', arguments: { text: 'over the legacy transport' } });
  assert.deepEqual(result.content, [{ type: 'text', text: 'over the legacy transport' }]);
  await client.close();
});

test('console output arrives as log messages and $progress as progress notifications', async () => {
  const client = await connect('/mcp/tools/demo/countdown');
  const logs = [];
  client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => { logs.push(n.params); });
  await client.setLoggingLevel('info');
  const progress = [];
  const result = await client.callTool({ name: 'countdown', arguments: { from: 3 } }, undefined, {
    onprogress: (p) => progress.push([p.progress, p.total, p.message]),
  });
  assert.equal(result.content[0].text, 'Counted down from 3.');
  assert.deepEqual(progress, [[1, 3, '3 to go'], [2, 3, '2 to go'], [3, 3, '1 to go']]);
  // Log messages travel on the session's own event stream: give it a moment.
  for (let i = 0; i < 50 && logs.length < 4; i++) await new Promise((r) => setTimeout(r, 100));
  assert.deepEqual(logs.map((l) => [l.level, l.data]), [['info', '3…'], ['info', '2…'], ['info', '1…'], ['warning', 'liftoff']]);
  assert.equal(logs[0].logger, 'demo/countdown');
  await client.close();
});

test('publishing tells connected clients that the tool list changed', async () => {
  const events = watchingEventStream();
  const client = await connect('/mcp/tools/demo/echo', TOKEN, events.fetch);
  let changed = 0;
  client.setNotificationHandler(ToolListChangedNotificationSchema, () => { changed += 1; });
  await events.opened;
  await publishAsAdmin('demo', 'echo', 1);
  for (let i = 0; i < 50 && changed === 0; i++) await new Promise((r) => setTimeout(r, 100));
  assert.equal(changed, 1);
  await client.close();
});

/** Signs in as the administrator with plain form posts, and publishes a version. */
async function publishAsAdmin(department, name, version) {
  const form = (fields) => ({
    method: 'POST',
    redirect: 'manual',
    headers: { 'Content-Type': 'application/x-www-form-urlencoded', Origin: BASE, Accept: 'application/json', ...(fields.cookie ? { Cookie: fields.cookie } : {}) },
    body: new URLSearchParams(fields.body).toString(),
  });
  const login = await fetch(`${BASE}/api/login`, form({ body: { username: 'admin', password: process.env.TOOLSHED_ADMIN_PASSWORD } }));
  const cookie = login.headers.getSetCookie().map((c) => c.split(';')[0]).join('; ');
  assert.ok(cookie.includes('toolshed_session'), `signed in (${login.status})`);
  const detail = await fetch(`${BASE}/api/tools/detail`, form({ cookie, body: { department, name } }));
  const { id } = await detail.json();
  const published = await fetch(`${BASE}/api/tools/publish`, form({ cookie, body: { tool: String(id), version: String(version) } }));
  assert.equal(published.status, 200, await published.text());
}
