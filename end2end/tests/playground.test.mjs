// The playground as people use it: an admin adds a chat endpoint (here a
// scripted OpenAI-compatible server this test starts with node:http), then a
// member-like session picks the demo text_kit bundle and chats; the model's
// streamed tool call runs through Toolshed, its result goes back to the model,
// and the answer and the call (arguments, console, result) show on the page.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { BASE, launch, newPage, shot, unique, hydrated, signInAsAdmin } from './browser.mjs';

let browser;
let llm;
const seen = [];

const chunk = (delta) => `data: ${JSON.stringify({ choices: [{ index: 0, delta }] })}\n\n`;

/** Sends SSE chunks a little apart, as a model streams. */
async function stream(res, chunks) {
  res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache' });
  for (const c of chunks) {
    res.write(c);
    await new Promise((r) => setTimeout(r, 40));
  }
  res.end('data: [DONE]\n\n');
}

/** The script: a table tool call (arguments split in two chunks); with its result, an answer; "thanks" gets a plain reply. */
async function completions(req, res) {
  let raw = '';
  for await (const part of req) raw += part;
  const body = JSON.parse(raw);
  seen.push({ body, auth: req.headers.authorization });
  const last = body.messages.at(-1);
  if (last.role === 'tool') {
    return stream(res, [chunk({ content: 'Here is your table:\n' }), chunk({ content: last.content })]);
  }
  if (/thanks/i.test(last.content)) return stream(res, [chunk({ content: "You're welcome!" })]);
  return stream(res, [
    chunk({ role: 'assistant', content: 'Let me lay that out.' }),
    chunk({ tool_calls: [{ index: 0, id: 'call_e2e', type: 'function', function: { name: 'text_kit__table', arguments: '{"rows":[{"name":"apples","va' } }] }),
    chunk({ tool_calls: [{ index: 0, function: { arguments: 'lue":3},{"name":"pears","value":5}]}' } }] }),
  ]);
}

before(async () => {
  browser = await launch();
  llm = createServer((req, res) => {
    if (req.method === 'POST' && req.url === '/v1/chat/completions') return completions(req, res).catch((e) => { res.destroy(e); });
    res.writeHead(404).end();
  });
  await new Promise((r) => llm.listen(0, '127.0.0.1', r));
});
after(async () => {
  await browser?.close();
  llm?.close();
});

test('an admin adds a chat endpoint, then a chat streams a tool call on demo/text_kit and answers with its result', async () => {
  const errors = [];
  const page = await newPage(browser);
  page.on('pageerror', (e) => errors.push(e.message));
  await signInAsAdmin(page);

  // The admin configures the scripted server; the key is never shown back.
  const name = unique('Scripted ');
  await page.goto(`${BASE}/admin`);
  await hydrated(page);
  const form = page.locator('form.create-endpoint');
  await form.locator('input[name=name]').fill(name);
  await form.locator('input[name=base_url]').fill(`http://127.0.0.1:${llm.address().port}/v1`);
  await form.locator('input[name=model]').fill('scripted-model');
  await form.locator('input[name=api_key]').fill('sk-e2e-secret');
  await form.locator('input[name=timeout_secs]').fill('20');
  await form.locator('button[type=submit]').click();
  const row = page.locator(`.endpoint[data-endpoint="${name}"]`);
  await row.waitFor();
  assert.equal(await row.locator('.key-state').textContent(), 'set');
  assert.equal(await row.locator('input[name=api_key]').inputValue(), '');
  assert.equal(await form.locator('input[name=api_key]').inputValue(), '', 'the add form is emptied');
  assert.ok(!(await page.content()).includes('sk-e2e-secret'), 'the key is not in the page');
  await page.evaluate(() => window.scrollTo(0, 0)); // the sticky header stays at the top of the full-page shot
  await shot(page, '71-playground-config');

  // The playground, on the demo bundle, with that endpoint.
  await page.click('nav >> text=Playground');
  await page.waitForURL(/\/playground/);
  await hydrated(page);
  await page.selectOption('select[name=listing]', 'bundle:demo/text_kit');
  await page.selectOption('select[name=endpoint]', { label: `${name} · scripted-model` });
  await page.fill('textarea[name=message]', 'Make a table: 3 apples, 5 pears.');
  await page.click('form.chat-input button[type=submit]');

  const call = page.locator('.tool-call[data-tool="text_kit__table"]');
  await call.locator('.pill.good').waitFor({ timeout: 30_000 });
  assert.match(await call.locator('pre.json').textContent(), /"name": "apples"[\s\S]*"value": 5/);
  assert.match(await call.locator('.console').textContent(), /formatting 2 rows/);
  assert.match(await call.locator('.tool-output').textContent(), /\| apples \| 3 \|/);
  const answer = page.locator('.bubble.assistant').last();
  await page.waitForFunction(() => [...document.querySelectorAll('.bubble.assistant')].some((b) => b.textContent.includes('Here is your table')));
  assert.match(await answer.textContent(), /Here is your table:[\s\S]*\| pears \| 5 \|/);
  await page.waitForSelector('.thinking', { state: 'detached' });
  await shot(page, '70-playground');

  // What the model got: the bundle's functions, the key, then the tool's result.
  assert.equal(seen.length, 2);
  assert.equal(seen[0].auth, 'Bearer sk-e2e-secret');
  assert.deepEqual(seen[0].body.tools.map((t) => t.function.name), ['text_kit__echo', 'text_kit__table', 'text_kit__word_stats']);
  const toolMessage = seen[1].body.messages.at(-1);
  assert.equal(toolMessage.role, 'tool');
  assert.equal(toolMessage.tool_call_id, 'call_e2e');
  assert.match(toolMessage.content, /\| apples \| 3 \|/);

  // The conversation goes on: the next turn carries everything so far.
  await page.fill('textarea[name=message]', 'Thanks!');
  await page.keyboard.press('Enter');
  await page.waitForFunction(() => [...document.querySelectorAll('.bubble.assistant')].some((b) => b.textContent.includes("You're welcome!")));
  assert.deepEqual(seen[2].body.messages.map((m) => m.role), ['user', 'assistant', 'tool', 'assistant', 'user']);
  assert.deepEqual(errors, []);
});
