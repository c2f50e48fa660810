// MCP endpoints driven by the official TypeScript SDK client over loopback.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { BASE } from './browser.mjs';

const TOKEN = process.env.TOOLSHED_TOKEN;

async function connect(path, token = TOKEN) {
  const client = new Client({ name: 'toolshed-e2e', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(`${BASE}${path}`), {
    requestInit: { headers: token ? { Authorization: `Bearer ${token}` } : {} },
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
  const result = await client.callTool({ name: 'echo', arguments: { text: 'hello over MCP' } });
  assert.equal(result.isError ?? false, false);
  assert.deepEqual(result.content, [{ type: 'text', text: 'hello over MCP' }]);
  await client.close();
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
