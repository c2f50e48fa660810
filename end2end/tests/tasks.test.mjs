// Long calls as tasks, as their caller sees them on the Account page: a task
// an MCP client started shows as working with a spinner, turns to its result
// without a reload, and a running one is cancelled from the page. Real
// browser, real release server, the demo data's `demo/conformance` fixtures.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { BASE, launch, newPage, shot, hydrated, joinByInvite, call, mcpCall } from './browser.mjs';

let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

/** Calls `name` on the conformance bundle as an MCP 2026-07-28 client that takes tasks; the task's id. */
async function startTask(token, name, args) {
  const result = await mcpCall(token, '/mcp/bundles/demo/conformance', name, args, { extensions: { 'io.modelcontextprotocol/tasks': {} } });
  assert.equal(result?.resultType, 'task', JSON.stringify(result));
  return result.taskId;
}

test('the Account page lists the tasks a person started, follows them to their end and cancels one', async () => {
  const page = await newPage(browser);
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  await joinByInvite(browser, page, { department: 'platform', displayName: 'Patient Person', password: 'wait-for-the-task' });
  const token = await call(page, 'tokens/create', { name: 'tasks', expires_in_days: '1', scope: '' });

  const long = await startTask(token, 'slow_compute', { seconds: 120, label: 'the quarter' });
  const short = await startTask(token, 'slow_compute', { seconds: 2, label: 'the week' });
  await page.goto(`${BASE}/account`);
  await hydrated(page);
  const longRow = page.locator(`tr[data-task="${long}"]`);
  const shortRow = page.locator(`tr[data-task="${short}"]`);
  assert.match(await longRow.textContent(), /slow_compute.*demo\/conformance.*Working/s);
  assert.equal(await longRow.locator('.spinner').count(), 1);
  await shot(page, '95-account-tasks-working');

  // The short one finishes while the page is open: its result appears without a reload.
  await shortRow.locator('.task-completed').waitFor();
  assert.match(await shortRow.textContent(), /Done.*Computed the week in 2 s\./s);

  await longRow.locator('button', { hasText: 'Cancel' }).click();
  await longRow.locator('.task-cancelled').waitFor();
  assert.equal(await longRow.locator('button', { hasText: 'Cancel' }).count(), 0);
  await shot(page, '96-account-tasks-ended');
  assert.deepEqual(errors, []);
});
