// Accounts as a person uses them, in a real browser against the release server.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { BASE, ADMIN_PASSWORD, launch, newPage, shot, unique, hydrated, inviteLink, joinByInvite } from './browser.mjs';

let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

test('register, sign out, fail and then succeed to sign in; the hydrated menu responds', async () => {
  const page = await newPage(browser);
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  const username = unique('ada');

  await page.goto(await inviteLink(browser, 'analytics'));
  await hydrated(page);
  assert.match(await page.textContent('main h1'), /Join Analytics/);
  assert.equal(await page.locator('select[name=department]').count(), 0, 'the invitation names the department');
  await shot(page, '01-register');
  await page.fill('input[name=username]', username);
  await page.fill('input[name=display_name]', 'Ada Lovelace');
  await page.fill('input[name=password]', 'analytical-engine-1843');
  await page.fill('input[name=password_confirm]', 'analytical-engine-1843');
  await page.click('button[type=submit]');
  await page.waitForSelector('.user-button', { timeout: 15_000 });
  assert.match(await page.textContent('.topbar'), /Ada Lovelace/);
  await shot(page, '02-registered-home');

  // The user menu only opens with the wasm running: this proves hydration.
  await page.click('.user-button');
  await page.waitForSelector('.menu.open');
  assert.match(await page.textContent('.menu.open'), /Analytics/);
  await shot(page, '03-user-menu');
  // It closes on Escape and on a click anywhere else, as menus do.
  await page.keyboard.press('Escape');
  await page.waitForSelector('.menu.open', { state: 'detached' });
  await page.click('.user-button');
  await page.waitForSelector('.menu.open');
  await page.mouse.click(5, 400);
  await page.waitForSelector('.menu.open', { state: 'detached' });
  await page.click('.user-button');
  await page.waitForSelector('.menu.open');
  await page.click('.menu.open button:has-text("Sign out")');
  await page.waitForSelector('a[href^="/login"]');

  await page.goto(`${BASE}/login`);
  await hydrated(page);
  await page.fill('input[name=username]', username);
  await page.fill('input[name=password]', 'not-the-password');
  await page.click('button[type=submit]');
  await page.waitForSelector('.alert.error');
  assert.equal((await page.textContent('.alert.error')).trim(), 'Invalid username or password.');
  await shot(page, '04-wrong-password');

  // The show-password toggle is another control that needs the wasm.
  await page.fill('input[name=password]', 'analytical-engine-1843');
  await page.click('button.addon');
  assert.equal(await page.getAttribute('input[name=password]', 'type'), 'text');
  await page.click('button[type=submit]');
  await page.waitForSelector('.user-button', { timeout: 15_000 });
  assert.match(await page.textContent('.topbar'), /Ada Lovelace/);
  await shot(page, '05-signed-in');
  assert.deepEqual(errors, [], 'no script errors on the page');
  await page.close();
});

test('sign-in, asking to join and joining by invitation work as plain forms without JavaScript', async () => {
  const page = await newPage(browser, { javaScriptEnabled: false });
  const username = unique('noscript');

  await page.goto(`${BASE}/login`);
  await page.fill('input[name=username]', username);
  await page.fill('input[name=password]', 'whatever-it-is');
  await page.click('button[type=submit]');
  await page.waitForSelector('.alert.error');
  assert.equal((await page.textContent('.alert.error')).trim(), 'Invalid username or password.');
  await shot(page, '06-nojs-wrong-password');

  // Without an invitation, registering asks to join an existing department.
  await page.goto(`${BASE}/register`);
  assert.match(await page.textContent('main h1'), /Ask to join/);
  assert.equal(await page.locator('input[name=new_department]').count(), 0, 'nobody creates a department on their own');
  await page.fill('input[name=username]', username);
  await page.fill('input[name=display_name]', 'No Script');
  await page.selectOption('select[name=department]', 'general');
  await page.fill('input[name=password]', 'plain-html-forms-rock');
  await page.fill('input[name=password_confirm]', 'plain-html-forms-rock');
  await page.click('button[type=submit]');
  await page.waitForSelector('.notice');
  assert.match(await page.textContent('.notice'), /request to join General was sent/);
  await shot(page, '07-nojs-asked-to-join');

  await joinByInvite(browser, page, { department: 'general', displayName: 'No Script Invited', script: false });
  assert.match(await page.textContent('.topbar'), /No Script Invited/);
  await shot(page, '07-nojs-registered');
  await page.close();
});

test('a newcomer asks to join; a maintainer approves on the People page; the newcomer signs in', async () => {
  const department = unique('team').toLowerCase();
  const maintainer = await newPage(browser);
  await joinByInvite(browser, maintainer, { department, role: 'maintainer', displayName: 'Mae Maintainer' });

  const newcomer = await newPage(browser);
  const username = unique('newbie');
  await newcomer.goto(`${BASE}/register`);
  await hydrated(newcomer);
  await newcomer.fill('input[name=username]', username);
  await newcomer.fill('input[name=display_name]', 'New Comer');
  await newcomer.selectOption('select[name=department]', department);
  await newcomer.fill('input[name=password]', 'a-long-enough-password');
  await newcomer.fill('input[name=password_confirm]', 'a-long-enough-password');
  await newcomer.click('main button[type=submit]');
  await newcomer.waitForSelector('.notice');

  await maintainer.click('.user-button');
  await maintainer.click('.menu.open a[href="/people"]');
  await maintainer.waitForSelector(`.requests li[data-request="${username}"]`);
  await hydrated(maintainer);
  await shot(maintainer, '09-people');
  await maintainer.selectOption(`.requests li[data-request="${username}"] select[name=decision]`, 'author');
  await maintainer.click(`.requests li[data-request="${username}"] button:has-text("Approve")`);
  await maintainer.waitForSelector('.alert.ok:has-text("Request decided")');
  await maintainer.waitForSelector(`.members tr[data-person="${username}"]`);
  // An invitation link, shown once, for the department only.
  await maintainer.click('.invite button[type=submit]');
  await maintainer.waitForSelector('.new-invite input');
  assert.match(await maintainer.inputValue('.new-invite input'), /\/register\?invite=inv_/);
  assert.deepEqual(await maintainer.locator('.invite select[name=department] option').allTextContents(), [department]);

  await newcomer.goto(`${BASE}/login`);
  await hydrated(newcomer);
  await newcomer.fill('input[name=username]', username);
  await newcomer.fill('input[name=password]', 'a-long-enough-password');
  await newcomer.click('main button[type=submit]');
  await newcomer.waitForSelector('.user-button');
  await newcomer.click('.user-button');
  assert.match(await newcomer.textContent('.menu.open'), /author/);
  await maintainer.close();
  await newcomer.close();
});

test('the administrator sees the Admin page with users, and the audit log page', async () => {
  const page = await newPage(browser);
  await page.goto(`${BASE}/login`);
  await hydrated(page);
  await page.fill('input[name=username]', 'admin');
  await page.fill('input[name=password]', process.env.TOOLSHED_ADMIN_PASSWORD);
  await page.click('main button[type=submit]');
  await page.waitForSelector('.user-button');
  await page.click('nav a[href="/admin"]');
  await page.waitForSelector('.users .admin-table');
  assert.match(await page.textContent('.users .admin-table'), /Administrator/);
  await shot(page, '08-admin');
  // Creating a department says so, lists it and empties the form.
  await hydrated(page);
  const dept = unique('ops').toLowerCase().replace(/[^a-z0-9-]/g, '-');
  await page.fill('.create-department input[name=name]', dept);
  await page.fill('.create-department input[name=title]', 'Operations');
  await page.click('.create-department button[type=submit]');
  await page.waitForSelector('.departments .alert.ok:has-text("Department created")');
  await page.waitForSelector(`.departments tr[data-department="${dept}"]`);
  assert.equal(await page.inputValue('.create-department input[name=name]'), '');
  await page.click('a[href="/admin/audit"]');
  await page.waitForSelector('.admin-table.audit');
  assert.match(await page.textContent('.admin-table.audit'), /user\.registered/);
  await shot(page, '08-admin-audit');
  await page.close();
});

test('members get no Admin link, and the admin page refuses them', async () => {
  const page = await newPage(browser);
  await joinByInvite(browser, page, { department: 'general', role: 'member', displayName: 'Just Member' });
  assert.equal(await page.locator('nav a[href="/admin"]').count(), 0);
  await page.goto(`${BASE}/admin`);
  await page.waitForSelector('.alert.error');
  assert.match(await page.textContent('.alert.error'), /not allowed/);
  await page.close();
});

test('a signed-out visitor sent to sign in from a listing comes back to it', async () => {
  const page = await newPage(browser);
  await page.goto(`${BASE}/tools/demo/echo`);
  await page.waitForURL(/\/login\?next=%2Ftools%2Fdemo%2Fecho|\/login\?next=\/tools\/demo\/echo/);
  await hydrated(page);
  await page.fill('input[name=username]', 'admin');
  await page.fill('input[name=password]', ADMIN_PASSWORD);
  await page.click('button[type=submit]');
  await page.waitForURL(`${BASE}/tools/demo/echo`);
  // The listing is a lazy page: the sign-in page stays until its chunks are in.
  await page.waitForSelector('h1:has-text("Echo")');
  await page.close();
});
