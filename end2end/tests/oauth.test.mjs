// An MCP client connects with nothing but the endpoint's URL: the official
// TypeScript SDK discovers Toolshed's authorization server from the 401,
// registers itself, and sends the person to the consent page (in Chromium,
// signing in first); then it calls tools with the token it got. The grant is
// on the Account page, and revoking it there ends the client's access. A
// client may also name itself by the https URL of its metadata document
// instead of registering.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';
import { BASE, launch, newPage, hydrated, shot, signInAsAdmin } from './browser.mjs';
import { consent } from '../fixtures/consent.mjs';
import { serveClientDocuments } from '../fixtures/client-documents.mjs';

/** Where the client wants its answer: a loopback port, as VS Code and Claude Code use; nothing listens there. */
const REDIRECT = 'http://127.0.0.1:33418/callback';

/** What a desktop client keeps between runs, in memory. */
class ClientState {
  constructor(name, clientMetadataUrl) {
    this.name = name;
    this.authorizationUrl = undefined;
    this.clientMetadataUrl = clientMetadataUrl;
  }
  get redirectUrl() { return REDIRECT; }
  get clientMetadata() {
    return { client_name: this.name, redirect_uris: [REDIRECT], grant_types: ['authorization_code', 'refresh_token'], response_types: ['code'], token_endpoint_auth_method: 'none' };
  }
  clientInformation() { return this.client; }
  saveClientInformation(info) { this.client = info; }
  tokens() { return this.saved; }
  saveTokens(tokens) { this.saved = tokens; }
  redirectToAuthorization(url) { this.authorizationUrl = url; }
  saveCodeVerifier(verifier) { this.verifier = verifier; }
  codeVerifier() { return this.verifier; }
}

const transport = (path, state) => new StreamableHTTPClientTransport(new URL(`${BASE}${path}`), { authProvider: state });

/** Connects as a fresh client would: the first attempt ends at the consent page, which `answer` handles. */
async function connectWithOAuth(path, state, answer) {
  const first = transport(path, state);
  await assert.rejects(new Client({ name: state.name, version: '1' }).connect(first), UnauthorizedError);
  assert.ok(state.authorizationUrl, 'the SDK asked to open the authorization URL');
  const code = new URL(await answer(state.authorizationUrl.href)).searchParams.get('code');
  assert.ok(code, 'the consent page answered with a code');
  await first.finishAuth(code);
  const client = new Client({ name: state.name, version: '1' });
  await client.connect(transport(path, state));
  return client;
}

let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

test('the TypeScript SDK connects by URL alone: OAuth in the browser, then calls; revoked on the Account page, it stops', async () => {
  const page = await newPage(browser);
  const state = new ClientState('Visual Studio Code');
  const client = await connectWithOAuth('/mcp/tools/demo/echo', state, (url) => consent(page, url, REDIRECT, { screenshot: '70-oauth-consent' }));
  assert.match(state.saved.access_token, /^tsa_/);
  assert.equal(state.saved.scope, 'tools:read tools:call');
  const result = await client.callTool({ name: 'echo', arguments: { text: 'signed in with OAuth' } });
  assert.deepEqual(result.content, [{ type: 'text', text: 'signed in with OAuth' }]);

  // The person (signed in during the flow) sees the grant and revokes it.
  await page.goto(`${BASE}/account`);
  await hydrated(page);
  const grants = page.locator('.grants');
  await grants.locator('tr:has-text("Visual Studio Code")').waitFor();
  assert.equal(await page.locator('h2:has-text("Change password")').count(), 1, 'a password account may change it');
  assert.match(await grants.textContent(), /demo\/echo · list and run/);
  await shot(page, '71-account-grants');
  await grants.locator('tr:has-text("Visual Studio Code") button:has-text("Revoke")').first().click();
  await page.waitForFunction(() => !document.querySelector('.grants')?.textContent.includes('Visual Studio Code'));
  await assert.rejects(client.callTool({ name: 'echo', arguments: { text: 'again' } }));
  const res = await fetch(`${BASE}/mcp/tools/demo/echo`, { method: 'POST', headers: { Authorization: `Bearer ${state.saved.access_token}` } });
  assert.equal(res.status, 401);
  assert.match(res.headers.get('www-authenticate'), /error="invalid_token"/);
  await client.close();
  await page.context().close();
});

test('a client allowed only to list the tools cannot run them', async () => {
  const page = await newPage(browser);
  await signInAsAdmin(page);
  const state = new ClientState('Read-only agent');
  const client = await connectWithOAuth('/mcp/tools/demo/echo', state, (url) => consent(page, url, REDIRECT, { runTools: false }));
  assert.equal(state.saved.scope, 'tools:read');
  const { tools } = await client.listTools();
  assert.deepEqual(tools.map((t) => t.name), ['echo']);
  await assert.rejects(client.callTool({ name: 'echo', arguments: { text: 'x' } }));
  await client.close();
  await page.context().close();
});

test('Deny on the consent page tells the client access_denied, and nothing is granted', async () => {
  const page = await newPage(browser);
  await signInAsAdmin(page);
  const state = new ClientState('Unwanted client');
  await assert.rejects(new Client({ name: 'x', version: '1' }).connect(transport('/mcp/tools/demo/echo', state)), UnauthorizedError);
  const answer = new URL(await consent(page, state.authorizationUrl.href, REDIRECT, { decision: 'deny' }));
  assert.equal(answer.searchParams.get('error'), 'access_denied');
  assert.equal(answer.searchParams.get('iss'), BASE);
  await page.goto(`${BASE}/account`);
  await hydrated(page);
  assert.doesNotMatch(await page.locator('.grants').textContent(), /Unwanted client/);
  await page.context().close();
});

test('a client named by its metadata document connects without registering; the consent page names its site', async () => {
  const site = await serveClientDocuments((base) => ({
    '/oauth/client.json': { client_id: `${base}/oauth/client.json`, client_name: 'Documented Client', redirect_uris: [REDIRECT], token_endpoint_auth_method: 'none' },
    // Claims to be another client: whoever serves a document speaks only for its own URL.
    '/impostor.json': { client_id: 'https://vscode.dev/oauth/client.json', client_name: 'Visual Studio Code', redirect_uris: [REDIRECT] },
  }));
  const page = await newPage(browser);
  try {
    await signInAsAdmin(page);
    const state = new ClientState('Documented Client', `${site.base}/oauth/client.json`);
    const client = await connectWithOAuth('/mcp/tools/demo/echo', state, async (url) => {
      assert.equal(new URL(url).searchParams.get('client_id'), `${site.base}/oauth/client.json`, 'the URL is the client id');
      return consent(page, url, REDIRECT, { screenshot: '72-oauth-consent-documented-client' });
    });
    assert.equal(state.client.client_id, `${site.base}/oauth/client.json`, 'no registration happened');
    const result = await client.callTool({ name: 'echo', arguments: { text: 'documented' } });
    assert.deepEqual(result.content, [{ type: 'text', text: 'documented' }]);
    await client.close();
    // Fetched once for the authorization request, the consent page and the answer.
    assert.deepEqual(site.requests, ['/oauth/client.json']);
    await page.goto(`${BASE}/account`);
    await hydrated(page);
    await page.locator('.grants tr:has-text("Documented Client")').waitFor();

    const impostor = new URL(`${BASE}/oauth/authorize`);
    for (const [k, v] of Object.entries({ response_type: 'code', client_id: `${site.base}/impostor.json`, redirect_uri: REDIRECT,
      code_challenge: 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGjSwFwcM0', code_challenge_method: 'S256', resource: `${BASE}/mcp/tools/demo/echo`, state: 's' })) {
      impostor.searchParams.set(k, v);
    }
    await page.goto(impostor.href);
    await page.locator('.consent .alert').waitFor();
    assert.match(await page.locator('.consent .alert').textContent(), /names another client_id/);
    assert.equal(await page.locator('button[value=allow]').count(), 0);
  } finally {
    await page.context().close();
    await site.close();
  }
});

/** A loopback port nothing listens on yet. */
async function freePort() {
  const server = createServer();
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address();
  await new Promise((resolve) => server.close(resolve));
  return port;
}

test('the MCP Inspector (its CLI) connects by URL: it registers, the person allows it in the browser, and its call runs', async () => {
  const callback = `http://127.0.0.1:${await freePort()}/oauth/callback`;
  const home = await mkdtemp(join(tmpdir(), 'inspector-'));
  const inspector = spawn(process.execPath, [
    'node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js', '--cli', `${BASE}/mcp/tools/demo/echo`,
    '--transport', 'http', '--method', 'tools/call', '--tool-name', 'echo', '--tool-arg', 'text=from the Inspector', '--callback-url', callback,
  ], {
    // Its own home (catalog, state); secrets in memory; it prints the authorization URL instead of opening a browser.
    env: { ...process.env, HOME: home, MCP_INSPECTOR_SECRET_STORE: 'memory', MCP_AUTO_OPEN_ENABLED: 'true', BROWSER: 'true' },
  });
  let stdout = '';
  let stderr = '';
  inspector.stdout.on('data', (d) => { stdout += d; });
  const exited = once(inspector, 'exit');
  const page = await newPage(browser);
  try {
    const authorizationUrl = await new Promise((resolve, reject) => {
      inspector.stderr.on('data', (d) => {
        stderr += d;
        const url = /Please navigate to: (\S+)/.exec(stderr)?.[1];
        if (url) resolve(url);
      });
      exited.then(() => reject(new Error(`the Inspector ended before asking to authorize: ${stderr}`)));
    });
    const params = new URL(authorizationUrl).searchParams;
    assert.match(params.get('client_id'), /^tsc_/, 'it registered itself');
    assert.equal(params.get('resource'), `${BASE}/mcp/tools/demo/echo`);
    // Allowed, the browser takes the code to the Inspector's callback listener.
    const answer = new URL(await consent(page, authorizationUrl, callback, { deliver: true, screenshot: '73-oauth-consent-inspector' }));
    assert.ok(answer.searchParams.get('code'));
    await shot(page, '74-inspector-callback');
    const [code] = await exited;
    assert.equal(code, 0, `${stdout}\n${stderr}`);
    assert.deepEqual(JSON.parse(stdout).content, [{ type: 'text', text: 'from the Inspector' }]);
  } finally {
    inspector.kill();
    await page.context().close();
    await rm(home, { recursive: true, force: true });
  }
});
