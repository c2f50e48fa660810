// Connected accounts, as people meet them: an admin registers an upstream app
// (the tests' real OpenID provider, end2end/fixtures/oidc-provider.mjs, whose
// userinfo endpoint answers each person with their own data); an author's tool
// calls it with `$fetch(url, {account})`; two employees call the tool through
// MCP with the official TypeScript SDK and each gets their own data; someone
// who never connected gets a link, connects in the browser, and the retry
// works (a client that opens URLs is sent there within the call, which then
// completes); an expired token is refreshed; a disconnect and a deactivation stop
// the next call; no token the provider issued is anywhere in the database
// files or the server's log. Real browser, real release server.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { BASE, launch, newPage, shot, hydrated, joinByInvite, signInAsAdmin, call, unique } from './browser.mjs';

const ISSUER = process.env.TOOLSHED_TEST_ISSUER;
const DATA = process.env.TOOLSHED_TEST_DATA;
const APP_SECRET = process.env.TOOLSHED_TEST_APP_SECRET;

let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

/**
 * One `tools/call` through the official SDK with `token`; its result. With
 * `openUrl`, the client declares URL-mode elicitation and hands each URL it
 * is sent to `openUrl` before it accepts.
 */
async function sdkCall(token, path, name, args = {}, openUrl = null) {
  const capabilities = openUrl ? { elicitation: { form: {}, url: {} } } : {};
  const client = new Client({ name: 'toolshed-e2e-accounts', version: '1.0.0' }, { capabilities });
  if (openUrl) {
    client.setRequestHandler(ElicitRequestSchema, async (request) => {
      assert.equal(request.params.mode, 'url', JSON.stringify(request.params));
      await openUrl(request.params.url, request.params.message);
      return { action: 'accept' };
    });
  }
  await client.connect(new StreamableHTTPClientTransport(new URL(`${BASE}${path}`), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }));
  try {
    return await client.callTool({ name, arguments: args });
  } finally {
    await client.close();
  }
}

/** Follows a connect link in `page`, signing in and consenting at the provider as `login` where it asks. */
async function connectAt(page, link, login) {
  await page.goto(link);
  for (let step = 0; step < 3 && page.url().startsWith(ISSUER); step++) {
    if (await page.locator('input[name=login]').count()) {
      await page.fill('input[name=login]', login);
      await page.fill('input[name=password]', 'any password');
    }
    await Promise.all([page.waitForNavigation(), page.click('button[type=submit]')]);
  }
  await page.waitForURL(/\/account\?connected=/);
  await hydrated(page);
}

/** Runs SQL on the server's SQLite database (Python's sqlite3, as an operator would). */
function sql(statement, ...params) {
  const script = 'import json,sqlite3,sys; c=sqlite3.connect(sys.argv[1]); r=c.execute(sys.argv[2], json.loads(sys.argv[3])).fetchall(); c.commit(); print(json.dumps(r))';
  return JSON.parse(execFileSync('python3', ['-c', script, `${DATA}/toolshed.db`, statement, JSON.stringify(params)]).toString());
}

/** Every token the provider issued so far. */
function issuedTokens() {
  return readFileSync(`${DATA}/tokens.txt`, 'utf8').split('\n').filter(Boolean);
}

/** Who the provider says `token` belongs to, or its HTTP status. */
async function whoseToken(token) {
  const res = await fetch(`${ISSUER}/me`, { headers: { Authorization: `Bearer ${token}` } });
  return res.ok ? (await res.json()).sub : res.status;
}

test('each caller acts as themselves: connect from the link, refresh, disconnect, deactivate, and no token is stored in clear', async () => {
  assert.ok(ISSUER && DATA && APP_SECRET, 'scripts/e2e.sh sets the provider and the data folder');
  const app = unique('people_');
  const host = new URL(ISSUER).host;

  // The admin registers the provider as an app, from the Admin page.
  const admin = await newPage(browser);
  await signInAsAdmin(admin);
  await admin.goto(`${BASE}/admin#apps`);
  await hydrated(admin);
  const form = admin.locator('form.register-app');
  await form.locator('input[name=name]').fill(app);
  await form.locator('input[name=issuer]').fill(ISSUER);
  await form.locator('input[name=client_id]').fill('people-app');
  await form.locator('input[name=client_secret]').fill(APP_SECRET);
  await form.locator('input[name=scopes]').fill('openid profile');
  await form.locator('input[name=hosts]').fill(host);
  await form.locator('button[type=submit]').click();
  const row = admin.locator(`tr[data-app="${app}"]`);
  await row.waitFor();
  assert.match(await row.textContent(), /token\/revocation/, 'the revocation endpoint was discovered');
  assert.match(await row.textContent(), /secret set/);
  await row.scrollIntoViewIfNeeded();
  await shot(admin, '98-connected-accounts-app');

  // An author's tool that asks the app who its caller is.
  const department = unique('people');
  const author = await newPage(browser);
  await joinByInvite(browser, author, { department, displayName: 'Ann Author' });
  const name = 'who_am_i';
  await author.request.post(`${BASE}/api/tools/create`, {
    form: { name, title: 'Who am I', description: 'Says who you are at the people directory.', tags: '', visibility: 'everyone' },
    headers: { Origin: BASE, Accept: 'application/json' },
  });
  const tool = await call(author, 'tools/detail', { department, name });
  await call(author, 'tools/settings', {
    tool: String(tool.id), title: 'Who am I', description: 'Says who you are at the people directory.', tags: '', visibility: 'everyone',
    timeout_ms: '5000', memory_mib: '32', fetch_allow: host, read_only_hint: 'true',
  });
  assert.deepEqual(await call(author, 'tools/accounts', { id: String(tool.id), accounts: app }), [app]);
  const code = `const r = await $fetch('${ISSUER}/me', {account: '${app}'});\n`
    + "if (!r.ok) throw new Error('the directory said ' + r.status);\nconst me = await r.json();\nreturn `You are ${me.sub} (${me.name}).`;";
  const version = await call(author, 'tools/save_version', { tool: tool.id, code, args: [], changelog: 'v1' }, true);
  await call(author, 'tools/publish', { tool: String(tool.id), version: String(version) });
  // The listing says so, with the scopes.
  await author.goto(`${BASE}/tools/${department}/${name}`);
  await hydrated(author);
  assert.match(await author.locator('.permissions .acts-as').textContent(), new RegExp(`Acts as you at ${app} \\(openid profile\\)`));
  // Ann has not connected either: her Run panel answers with the link to follow.
  await author.locator('.run-button').click();
  const connectLink = author.locator('.alert.error a.connect-link');
  await connectLink.waitFor();
  assert.equal(await connectLink.getAttribute('href'), `/connect/${app}`);
  assert.equal(await connectLink.textContent(), `${BASE}/connect/${app}`);
  await author.locator('.alert.error').scrollIntoViewIfNeeded();
  await shot(author, '99-connected-accounts-run-panel');

  // Ada has never connected: the call answers with the link and what to do.
  const path = `/mcp/tools/${department}/${name}`;
  const adaToken = process.env.TOOLSHED_TOKEN;
  const first = await sdkCall(adaToken, path, name);
  assert.equal(first.isError, true, JSON.stringify(first));
  const link = first.content[0].text.match(/Open (\S+) to connect/)[1];
  assert.equal(link, `${BASE}/connect/${app}`);
  // She opens it in the browser, signs in at the provider as "ada", and comes back.
  await connectAt(admin, link, 'ada');
  const card = admin.locator(`#connected-accounts tr[data-account="${app}"]`);
  assert.match(await card.locator('.status').textContent(), /connected/);
  assert.match(await admin.locator('#connected-accounts .alert.ok').textContent(), /connected: call the tool again/);
  await admin.locator('#connected-accounts').scrollIntoViewIfNeeded();
  await shot(admin, '99-connected-accounts-card');
  // The same call now works, as her.
  const again = await sdkCall(adaToken, path, name);
  assert.notEqual(again.isError, true, JSON.stringify(again));
  assert.equal(again.content[0].text, 'You are ada (Ada).');

  // Bob, from another department, connects as "bob" and gets his own answer.
  const bob = await newPage(browser);
  const bobName = await joinByInvite(browser, bob, { department: unique('sales'), displayName: 'Bob Buyer', role: 'member' });
  const bobToken = await call(bob, 'tokens/create', { name: 'accounts', expires_in_days: '1', scope: '' });
  assert.match((await sdkCall(bobToken, path, name)).content[0].text, /Open .* to connect it/);
  await bob.goto(`${BASE}/account`);
  await hydrated(bob);
  await connectAt(bob, await bob.locator(`#connected-accounts tr[data-account="${app}"] a.connect`).getAttribute('href').then((h) => `${BASE}${h}`), 'bob');
  assert.equal((await sdkCall(bobToken, path, name)).content[0].text, 'You are bob (Bob).');
  assert.equal((await sdkCall(adaToken, path, name)).content[0].text, 'You are ada (Ada).');

  // Ada's access token expires: the next call refreshes it, once.
  const [[adaId]] = sql('SELECT id FROM users WHERE username = ?', 'admin');
  sql('UPDATE connected_accounts SET expires_at = 1 WHERE user_id = ?', adaId);
  const before = issuedTokens().length;
  assert.equal((await sdkCall(adaToken, path, name)).content[0].text, 'You are ada (Ada).');
  assert.equal(issuedTokens().length, before + 1, 'one new access token');
  assert.deepEqual(sql('SELECT generation, status FROM connected_accounts WHERE user_id = ?', adaId), [[1, 'ok']]);

  // Bob disconnects on his Account page: revoked at the provider, and his next call asks him to connect.
  const bobTokens = [];
  for (const t of issuedTokens()) if ((await whoseToken(t)) === 'bob') bobTokens.push(t);
  assert.ok(bobTokens.length >= 1);
  await bob.goto(`${BASE}/account`);
  await hydrated(bob);
  await bob.locator(`#connected-accounts tr[data-account="${app}"] button.disconnect`).click();
  await bob.locator(`#connected-accounts tr[data-account="${app}"] a.connect`).waitFor();
  for (const t of bobTokens) assert.equal(await whoseToken(t), 401, 'revoked upstream');
  assert.match((await sdkCall(bobToken, path, name)).content[0].text, /Open .* to connect it/);

  // He connects again; then an admin deactivates him: his accounts are revoked upstream and forgotten.
  await connectAt(bob, `${BASE}/connect/${app}`, 'bob');
  assert.equal((await sdkCall(bobToken, path, name)).content[0].text, 'You are bob (Bob).');
  const live = [];
  for (const t of issuedTokens()) if ((await whoseToken(t)) === 'bob') live.push(t);
  assert.ok(live.length >= 1);
  await call(admin, 'admin/users/status', { username: bobName, status: 'deactivated' });
  for (const t of live) assert.equal(await whoseToken(t), 401, 'revoked upstream at deactivation');
  const [[bobId]] = sql('SELECT id FROM users WHERE username = ?', bobName);
  assert.deepEqual(sql('SELECT COUNT(*) FROM connected_accounts WHERE user_id = ?', bobId), [[0]]);

  // A client that opens URLs sends its person to connect in the middle of the call, which then completes.
  const cleo = await newPage(browser);
  await joinByInvite(browser, cleo, { department: unique('legal'), displayName: 'Cleo Counsel', role: 'member' });
  const cleoToken = await call(cleo, 'tokens/create', { name: 'accounts', expires_in_days: '1', scope: '' });
  const opened = [];
  let connecting;
  const answer = await sdkCall(cleoToken, path, name, {}, async (url, message) => {
    opened.push(message);
    // As a client does: it opens the page and answers at once; the person goes on in the browser.
    connecting = connectAt(cleo, url, 'cleo');
  });
  await connecting;
  assert.equal(answer.content[0].text, 'You are cleo (Cleo).', JSON.stringify(answer));
  assert.equal(opened.length, 1);
  assert.match(opened[0], new RegExp(`Connect your account at “${app}”`));

  // No token the provider issued is in the database's files or the server's log in clear.
  const tokens = issuedTokens();
  assert.ok(tokens.length >= 5);
  const files = readdirSync(DATA).filter((f) => f.startsWith('toolshed.db') || f === 'stdout.log' || f === 'stderr.log').map((f) => `${DATA}/${f}`);
  assert.ok(files.some((f) => f.endsWith('toolshed.db')) && files.some((f) => f.endsWith('stderr.log')));
  for (const file of files) {
    const bytes = readFileSync(file).toString('latin1');
    for (const t of tokens) assert.ok(!bytes.includes(t), `a token in clear in ${file}`);
  }
});

test('a maintainer registers their department’s app once an admin allows it, and it is changed in place', async () => {
  const department = unique('ops');
  const maintainer = await newPage(browser);
  await joinByInvite(browser, maintainer, { department, displayName: 'Mo Maintainer', role: 'maintainer' });
  await maintainer.goto(`${BASE}/people`);
  await hydrated(maintainer);
  await maintainer.locator('section.members').waitFor();
  assert.equal(await maintainer.locator('#apps').count(), 0, 'not until an admin allows it');

  // The admin allows it on the Departments card.
  const admin = await newPage(browser);
  await signInAsAdmin(admin);
  await admin.goto(`${BASE}/admin`);
  await hydrated(admin);
  const setting = admin.locator(`tr[data-department="${department}"] td[data-label="Maintainers register apps"]`);
  await setting.locator('select').selectOption('yes');
  await setting.locator('button').click();
  await admin.getByText('App registration setting saved.').waitFor();

  // Now the maintainer's People page has the card, for their department only.
  await maintainer.reload();
  await hydrated(maintainer);
  const card = maintainer.locator('#apps');
  assert.match(await card.locator('h2').textContent(), new RegExp(`Apps of ${department}`));
  assert.equal(await card.locator('input[name=department]').getAttribute('type'), 'hidden');
  const app = unique('ops_');
  const form = card.locator('form.register-app');
  await form.locator('input[name=name]').fill(app);
  await form.locator('input[name=issuer]').fill(ISSUER);
  await form.locator('input[name=client_id]').fill('people-app');
  await form.locator('input[name=client_secret]').fill(APP_SECRET);
  await form.locator('input[name=scopes]').fill('openid profile');
  await form.locator('input[name=hosts]').fill(new URL(ISSUER).host);
  await form.locator('button[type=submit]').click();
  const row = card.locator(`tr[data-app="${app}"]`);
  await row.waitFor();
  assert.match(await row.textContent(), new RegExp(department));

  // Changed without removing it: the scopes narrowed, the secret kept.
  const edit = card.locator(`tr[data-edit-app="${app}"]`);
  await edit.locator('summary').click();
  assert.equal(await edit.locator('input[name=client_secret]').inputValue(), '', 'a secret is never sent back to the page');
  await edit.locator('input[name=scopes]').fill('openid');
  await edit.locator('form.update-app').scrollIntoViewIfNeeded();
  await shot(maintainer, '99-connected-accounts-maintainer-edits');
  await edit.locator('button[type=submit]').click();
  await card.getByText(`Saved “${app}”.`).waitFor();
  // The list is read again after the save, a moment after its message: wait for the row.
  await row.locator('td[data-label="Scopes"]').filter({ hasText: /^openid\s*to/ }).waitFor();
  assert.match(await row.locator('td[data-label="Scopes"]').textContent(), /^openid\s*to/);
  assert.match(await row.textContent(), /secret set/);
  // Two tabs connecting at once (a link followed twice): each comes back to its own flow.
  const first = await maintainer.context().newPage();
  await first.goto(`${BASE}/connect/${app}`);
  await first.locator('input[name=login]').waitFor();
  const second = await maintainer.context().newPage();
  await connectAt(second, `${BASE}/connect/${app}`, 'mo');
  await connectAt(first, first.url(), 'mo');
  assert.match(await first.locator(`#connected-accounts tr[data-account="${app}"] .status`).textContent(), /connected/);
  await Promise.all([first.close(), second.close()]);

  // The audit log names who changed it, and that the secret was kept.
  const audit = JSON.stringify(await call(admin, 'admin/audit', { action: 'oauth_app.changed', actor: '', target: `oauth_app:${app}`, from: '', to: '', page: '1' }));
  assert.ok(audit.includes('oauth_app.changed') && audit.includes('kept'), audit);
});
