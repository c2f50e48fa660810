// Single sign-on against a real OpenID provider (panva's oidc-provider, started
// by scripts/e2e.sh from end2end/fixtures/oidc-provider.mjs, whose fixed group
// map these tests rely on: "ada…" is in research-team and staff, "root…" in
// toolshed-admins and research-team, anyone else in staff only).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { BASE, launch, newPage, shot, hydrated, signInAsAdmin, call, unique } from './browser.mjs';

let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

/** Signs in at the provider's own pages (any password), then consents. */
async function atProvider(page, login) {
  await page.waitForSelector('input[name=login]');
  await page.fill('input[name=login]', login);
  await page.fill('input[name=password]', 'any password');
  await page.click('button[type=submit]');
  await page.click('button:has-text("Continue")');
}

test('an admin links a provider group to a department; a new employee signs in with SSO and lands there', async () => {
  const errors = [];
  const admin = await newPage(browser);
  admin.on('pageerror', (e) => errors.push(e.message));
  await signInAsAdmin(admin);
  const department = unique('research');
  await call(admin, 'admin/departments/create', { name: department, title: 'Research' });
  await admin.goto(`${BASE}/admin`);
  await hydrated(admin);
  const card = admin.locator('.sso-groups');
  await card.locator('input[name=group]').fill('research-team');
  await card.locator('select[name=department]').selectOption(department);
  await card.locator('select[name=role]').selectOption('author');
  await card.locator('button[type=submit]:has-text("Link group")').click();
  await card.locator('.alert.ok:has-text("Group linked")').waitFor();
  await card.locator('tr[data-group="research-team"]:has-text("Research")').waitFor();
  await card.screenshot({ path: 'output/sso-admin-groups.png' });

  // Signed out, a deep link goes to sign-in, through the provider, and back to it.
  const ada = await newPage(browser);
  ada.on('pageerror', (e) => errors.push(e.message));
  await ada.goto(`${BASE}/tools/mine`);
  await ada.waitForURL(/\/login\?next=/);
  await hydrated(ada);
  await shot(ada, 'sso-sign-in-page');
  await ada.click('a.sso-button:has-text("Sign in with Example ID")');
  await atProvider(ada, 'ada');
  await ada.waitForURL(`${BASE}/tools/mine`);
  await ada.waitForSelector('.user-button');
  const me = await call(ada, 'me', {});
  assert.equal(me.username, 'ada');
  assert.equal(me.display_name, 'Ada');
  assert.equal(me.department, department);
  assert.equal(me.role, 'author');
  assert.equal(me.is_admin, false);
  await shot(ada, 'sso-signed-in');
  // An account the provider made has no password here to change.
  await ada.goto(`${BASE}/account`);
  await hydrated(ada);
  await ada.waitForSelector('h2:has-text("API tokens")');
  assert.equal(await ada.locator('h2:has-text("Change password")').count(), 0);

  // The audit log names the new account and the group link.
  const log = await call(admin, 'admin/audit', { action: 'sso.', target: '', actor: '', from: '', to: '', page: '1' });
  assert.ok(log.entries.some((e) => e.action === 'sso.group_mapped' && e.target === 'group:research-team'), JSON.stringify(log.entries));
  assert.deepEqual(errors, []);
});

test('someone in no linked group gets no account and is told why on the sign-in page', async () => {
  const page = await newPage(browser);
  await page.goto(`${BASE}/login`);
  await hydrated(page);
  await page.click('a.sso-button');
  await atProvider(page, 'bob');
  await page.waitForURL(/\/login\?sso=failed/);
  const alert = page.locator('main .alert.error');
  await alert.waitFor();
  assert.match(await alert.textContent(), /None of your groups at the identity provider is linked to a department here \(your groups: staff\)/);
  await shot(page, 'sso-no-linked-group');
  assert.equal(await call(page, 'me', {}), null);
  // Said once: a reload shows the plain page.
  await page.reload();
  await hydrated(page);
  assert.equal(await page.locator('main .alert.error').count(), 0);
});

test('members of the admin group become admins at sign-in', async () => {
  const page = await newPage(browser);
  await page.goto(`${BASE}/login`);
  await page.click('a.sso-button');
  await atProvider(page, 'root.e2e');
  await page.waitForSelector('.user-button');
  const me = await call(page, 'me', {});
  assert.equal(me.is_admin, true);
  assert.equal(me.username, 'root-e2e');
});
