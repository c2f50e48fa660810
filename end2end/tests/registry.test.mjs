// The registry API as VS Code's private-registry setting uses it (a base URL
// with the token in its path: `chat.mcp.gallery.serviceUrl`): the probe, the
// list, one server's latest version, and every entry valid against the
// official MCP Registry's published server.json schema (2025-12-11, kept in
// fixtures/registry). The listed endpoint then serves MCP with the same token.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import Ajv from 'ajv';
import addFormats from 'ajv-formats';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { BASE } from './browser.mjs';

const TOKEN = process.env.TOOLSHED_TOKEN;
const OFFICIAL = 'io.modelcontextprotocol.registry/official';

async function validator() {
  const schema = JSON.parse(await readFile(new URL('../fixtures/registry/server.schema.json', import.meta.url)));
  const ajv = new Ajv({ allErrors: true, strict: false });
  addFormats(ajv);
  return ajv.compile(schema);
}

test('VS Code reads the registry from a base URL: every entry is a valid server.json whose remote serves MCP', async () => {
  const serviceUrl = `${BASE}/registry/${TOKEN}`;
  const valid = await validator();
  // VS Code's probe, then its list request.
  const probe = await fetch(`${serviceUrl}/v0.1/servers?limit=1`);
  assert.equal(probe.status, 200);
  assert.equal(probe.headers.get('access-control-allow-origin'), '*');
  const list = await (await fetch(`${serviceUrl}/v0.1/servers?limit=50&version=latest`)).json();
  assert.ok(list.servers.length >= 2, JSON.stringify(list));
  for (const { server, _meta } of list.servers) {
    assert.ok(valid(server), `${server.name}: ${JSON.stringify(valid.errors)}`);
    assert.match(server.name, /^[a-zA-Z0-9.-]+\/[a-zA-Z0-9._-]+$/);
    assert.equal(_meta[OFFICIAL].status, 'active');
    assert.equal(_meta[OFFICIAL].isLatest, true);
    assert.ok(!Number.isNaN(Date.parse(_meta[OFFICIAL].publishedAt)));
  }
  const echo = list.servers.find((s) => s.server.remotes[0].url === `${BASE}/mcp/tools/demo/echo`);
  assert.ok(echo, 'demo/echo is listed');
  // One server by name, encoded as VS Code encodes it.
  const one = await fetch(`${serviceUrl}/v0.1/servers/${encodeURIComponent(echo.server.name)}/versions/latest`);
  assert.equal(one.status, 200);
  assert.deepEqual((await one.json()).server, echo.server);
  const missing = await fetch(`${serviceUrl}/v0.1/servers/${encodeURIComponent('nobody/nothing')}/versions/latest`);
  assert.equal(missing.status, 404);
  assert.equal(missing.headers.get('content-type'), 'application/problem+json');

  // The remote is a live MCP endpoint.
  const client = new Client({ name: 'registry-test', version: '1' });
  await client.connect(new StreamableHTTPClientTransport(new URL(echo.server.remotes[0].url), {
    requestInit: { headers: { Authorization: `Bearer ${TOKEN}` } },
  }));
  const { tools } = await client.listTools();
  assert.deepEqual(tools.map((t) => t.name), ['echo']);
  await client.close();
});
