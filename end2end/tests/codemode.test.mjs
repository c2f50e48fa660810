// Code mode, as a person and a model meet it: the administrator turns it on in
// the demo bundle's editor, the bundle page says what the endpoint serves, and
// the official TypeScript SDK client lists `run_code` and runs code that calls
// two of the bundle's tools, and code that never ends. Code mode is switched
// off again at the end: later tests (the Python SDK's) expect the plain list.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { BASE, launch, newPage, shot, hydrated, signInAsAdmin } from './browser.mjs';

let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

/** Picks a code mode in the bundle editor and saves it. */
async function setCodeMode(page, mode) {
  await page.goto(`${BASE}/bundles/demo/text_kit/edit`);
  await hydrated(page);
  await page.check(`.code-mode input[name=mode][value=${mode}]`);
  const answer = page.waitForResponse((r) => r.url().includes('/api/bundles/code_mode'));
  await page.click('.code-mode button.save-code-mode');
  assert.equal((await answer).status(), 200);
  await page.waitForSelector('.code-mode .alert.ok');
}

async function connect() {
  const client = new Client({ name: 'toolshed-e2e', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${BASE}/mcp/bundles/demo/text_kit`), {
    requestInit: { headers: { Authorization: `Bearer ${process.env.TOOLSHED_TOKEN}` } },
  }));
  return client;
}

test('code mode set in the bundle editor serves run_code to the TypeScript SDK', async () => {
  const page = await newPage(browser);
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  await signInAsAdmin(page);
  try {
    await setCodeMode(page, 'beside');
    assert.match(await page.textContent('.code-mode .alert.ok'), /run_code \(code mode\) and every tool/);
    // Checking the radio scrolled the page; at the top the sticky header stays in its place in the shot.
    await page.evaluate(() => window.scrollTo(0, 0));
    await shot(page, '50-code-mode');

    await page.goto(`${BASE}/bundles/demo/text_kit`);
    await hydrated(page);
    assert.equal(await page.getAttribute('.code-mode-status', 'data-code-mode'), 'beside');
    assert.match(await page.textContent('.code-mode-status'), /serves run_code \(code mode\) and every tool/);
    assert.match(await page.textContent('.token-cost [data-form=code-mode]'), /^\d+tokens: code mode/);
    await shot(page, '51-code-mode-bundle-page');

    const client = await connect();
    const { tools } = await client.listTools();
    assert.deepEqual(tools.map((t) => t.name), ['echo', 'table', 'word_stats', 'run_code']);
    const runCode = tools.find((t) => t.name === 'run_code');
    assert.deepEqual(runCode.inputSchema.required, ['code']);
    assert.match(runCode.description, /await tools\.name\(input\)/);
    assert.match(runCode.description, /word_stats\(input: WordStatsInput\): Promise<WordStatsOutput>;/);

    const code = [
      "const said = await tools.echo({ text: 'code mode works' });",
      "const stats = await tools.word_stats({ text: said });",
      'console.log(said);',
      "console.log('words:', stats.words);",
      'return stats.top.map((t) => t.word);',
    ].join('\n');
    const result = await client.callTool({ name: 'run_code', arguments: { code } });
    assert.equal(result.isError ?? false, false, JSON.stringify(result));
    assert.deepEqual(result.content, [{ type: 'text', text: 'code mode works\nwords: 3\n["code","mode","works"]' }]);

    const forever = await client.callTool({ name: 'run_code', arguments: { code: 'while (true) {}' } });
    assert.equal(forever.isError, true);
    assert.match(forever.content[0].text, /^Timed out after \d+ ms$/);

    const thrown = await client.callTool({ name: 'run_code', arguments: { code: "console.log('first');\nawait tools.echo({});" } });
    assert.equal(thrown.isError, true);
    assert.match(thrown.content[0].text, /^first\nError: echo: Invalid arguments: .*\(line 2\)$/s);
    await client.close();
  } finally {
    await setCodeMode(page, 'off');
  }
  const client = await connect();
  assert.deepEqual((await client.listTools()).tools.map((t) => t.name), ['echo', 'table', 'word_stats']);
  await client.close();
  assert.deepEqual(errors, []);
});
