// Approvals, as people see them: a maintainer turns them on for their
// department on the Approvals page; a call of the department's tool that
// writes, made by an MCP client, waits in the maintainer's inbox with its
// exact arguments; the maintainer approves it there; the caller's next call
// runs, and their own list says so. Real browser, real release server.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { BASE, launch, newPage, shot, hydrated, joinByInvite, call, unique, mcpCall } from './browser.mjs';

let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

test('a maintainer approves a held call in the inbox, seeing its exact arguments, and the caller\'s call then runs', async () => {
  const department = unique('ops');
  const mona = await newPage(browser);
  const errors = [];
  mona.on('pageerror', (e) => errors.push(e.message));
  await joinByInvite(browser, mona, { department, role: 'maintainer', displayName: 'Mona Maintainer' });
  // A tool that writes (not held to reading): its calls are what approvals hold.
  await mona.request.post(`${BASE}/api/tools/create`, {
    form: { name: 'restart', title: 'Restart a service', description: 'Restarts a service.', tags: '', visibility: 'everyone' },
    headers: { Origin: BASE, Accept: 'application/json' },
  });
  const tool = await call(mona, 'tools/detail', { department, name: 'restart' });
  const args = [
    { name: 'service', type: { kind: 'string' }, description: 'Which service', required: true },
    { name: 'force', type: { kind: 'boolean' }, description: 'Even if busy', required: false },
  ];
  const version = await call(mona, 'tools/save_version', { tool: tool.id, code: 'return `Restarted ${$service}.`;', args, changelog: 'v1' }, true);
  await call(mona, 'tools/publish', { tool: String(tool.id), version: String(version) });

  // Approvals on, from the page.
  await mona.goto(`${BASE}/approvals`);
  await hydrated(mona);
  const settings = mona.locator('section.approval-settings');
  await settings.locator('select[name=required]').selectOption('writes');
  await settings.locator('button[type=submit]').click();
  await settings.locator('.alert.ok').waitFor();

  // Someone from another department calls it from their MCP client: held.
  const cal = await newPage(browser);
  await joinByInvite(browser, cal, { department: 'platform', displayName: 'Cal Caller' });
  const token = await call(cal, 'tokens/create', { name: 'approvals', expires_in_days: '1', scope: '' });
  const path = `/mcp/tools/${department}/restart`;
  const held = await mcpCall(token, path, 'restart', { service: 'billing-api', force: true });
  assert.equal(held.isError, true, JSON.stringify(held));
  const id = held.content[0].text.match(/Request (\w+) is waiting/)[1];

  // The header tells Mona, on any page, that a call waits for her.
  await mona.goto(`${BASE}/browse`);
  await hydrated(mona);
  const badge = mona.locator('header a.nav-waiting');
  assert.equal(await badge.locator('.count').textContent(), '1');
  assert.equal(await badge.getAttribute('aria-label'), '1 call waits for your approval');
  await shot(mona, '96-approvals-badge');
  // On a phone the navigation scrolls sideways; the count comes first, in sight.
  await mona.setViewportSize({ width: 390, height: 800 });
  const box = await badge.boundingBox();
  assert.ok(box && box.x >= 0 && box.x + box.width <= 390, JSON.stringify(box));
  await shot(mona, '96-approvals-badge-390');
  await mona.setViewportSize({ width: 1280, height: 800 });
  await badge.click();
  await mona.waitForURL(`${BASE}/approvals`);

  // The inbox shows it with the exact arguments it will run with.
  const card = mona.locator(`article[data-approval="${id}"]`);
  assert.match(await card.textContent(), /Cal Caller.*@user/s);
  assert.deepEqual(JSON.parse(await card.locator('pre.approval-arguments').textContent()), { service: 'billing-api', force: true });
  await shot(mona, '97-approvals-inbox');
  await card.locator('input[name=note]').fill('Fine, after the backup.');
  await card.locator('button[value=approve]').click();
  const decided = mona.locator(`.approvals-decided tr[data-approval="${id}"]`);
  await decided.waitFor();
  assert.match(await decided.textContent(), /Approved.*by @.*Fine, after the backup\./s);
  // Decided: nothing waits for her any more, and the header says so.
  await mona.locator('header a.nav-waiting').waitFor({ state: 'detached' });

  // The same call now runs, once; the caller's list says so.
  const ran = await mcpCall(token, path, 'restart', { force: true, service: 'billing-api' });
  assert.equal(ran.content[0].text, 'Restarted billing-api.', JSON.stringify(ran));
  await cal.goto(`${BASE}/approvals`);
  await hydrated(cal);
  const mine = cal.locator(`.approvals-mine tr[data-approval="${id}"]`);
  assert.match(await mine.textContent(), /Approved, ran/);
  await shot(cal, '98-approvals-mine');
  assert.deepEqual(errors, []);
});

test('a visitor who is not signed in is never asked about approvals: the header sends no count request as they move between pages', async () => {
  // How often the header asks, while moving from the home page to Browse
  // within the app (the count is fetched together with Browse's listings).
  const countRequests = async (page) => {
    const asked = [];
    page.on('request', (r) => { if (r.url().includes('/api/approvals/waiting')) asked.push(r.url()); });
    await page.goto(`${BASE}/`);
    await hydrated(page);
    const listings = page.waitForResponse((r) => r.url().includes('/api/market/browse'));
    await page.locator('header nav a[href="/browse"]').click();
    await listings;
    return asked.length;
  };
  const visitor = await newPage(browser);
  assert.equal(await countRequests(visitor), 0);
  assert.equal(await visitor.locator('header a.nav-waiting').count(), 0);
  await shot(visitor, '99-approvals-visitor-header');
  // Someone signed in is asked on the same move: what the visitor is spared.
  const member = await newPage(browser);
  await joinByInvite(browser, member, { department: unique('visitors'), displayName: 'Vera Member' });
  assert.ok(await countRequests(member) >= 1);
});
