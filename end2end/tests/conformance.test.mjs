// The official MCP conformance suite (@modelcontextprotocol/conformance, in
// end2end/conformance with the Node.js 22 it needs) against the demo data's
// `demo/conformance` bundle, for both revisions one endpoint serves.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BASE } from './browser.mjs';

const DIR = new URL('../conformance/', import.meta.url).pathname;
const NODE = join(DIR, 'node_modules/.bin/node');
const SUITE = join(DIR, 'node_modules/@modelcontextprotocol/conformance/dist/index.js');
const TOKEN = process.env.TOOLSHED_TOKEN;

/** The suite's output for `args` (which scenarios) against the conformance bundle. */
async function suite(args) {
  const out = await mkdtemp(join(tmpdir(), 'toolshed-conformance-'));
  const url = `${BASE}/mcp/bundles/demo/conformance?token=${TOKEN}`;
  const stdout = await new Promise((resolve) => {
    // It exits non-zero when any scenario fails: the summary is what is checked.
    execFile(NODE, [SUITE, 'server', '--url', url, ...args, '-o', out],
      { maxBuffer: 64 << 20, timeout: 300_000 }, (_error, stdout) => resolve(stdout));
  });
  await rm(out, { recursive: true, force: true });
  return stdout;
}

/** The suite's summary: every scenario run, failed or not, and those it does not score. */
async function runSuite(revision) {
  const stdout = await suite(['--requirements', revision]);
  const scenarios = [...stdout.matchAll(/^([✓✗]) ([\w-]+): (\d+) passed, (\d+) failed/gmu)]
    .map(([, mark, name]) => ({ name, passed: mark === '✓' }));
  const unscored = new Set([...stdout.matchAll(/^ {2}[✓✗] ([\w-]+) \(/gmu)].map(([, name]) => name));
  assert.ok(scenarios.length > 20, `the suite ran: ${stdout.slice(-2000)}`);
  return { scenarios, unscored, stdout };
}

for (const revision of ['2026-07-28', '2025-11-25']) {
  test(`the conformance suite passes every scored ${revision} scenario`, async () => {
    const { scenarios, unscored, stdout } = await runSuite(revision);
    const failing = scenarios.filter((s) => !s.passed && !unscored.has(s.name)).map((s) => s.name).sort();
    assert.deepEqual(failing, [], stdout.slice(-4000));
    const passed = new Set(scenarios.filter((s) => s.passed).map((s) => s.name));
    // The scenarios of issue 32 by name, so that a renamed one cannot pass unnoticed.
    const expected = revision === '2026-07-28'
      ? ['input-required-result-basic-elicitation', 'input-required-result-multi-round', 'input-required-result-tampered-state',
        'input-required-result-capability-check', 'tools-call-image', 'tools-call-audio', 'tools-call-embedded-resource',
        'tools-call-mixed-content', 'caching', 'server-stateless', 'prompts-get-simple', 'prompts-get-with-args',
        'prompts-get-embedded-resource', 'prompts-get-with-image', 'input-required-result-non-tool-request',
        'resources-read-text', 'resources-read-binary', 'resources-templates-read', 'sep-2164-resource-not-found']
      : ['tools-call-elicitation', 'tools-call-sampling', 'elicitation-sep1034-defaults', 'elicitation-sep1330-enums',
        'tools-call-with-logging', 'tools-call-with-progress', 'tools-call-image', 'tools-call-audio', 'server-sse-polling',
        'prompts-get-simple', 'prompts-get-with-args', 'prompts-get-embedded-resource', 'prompts-get-with-image',
        'resources-read-text', 'resources-read-binary', 'resources-templates-read', 'resources-subscribe', 'resources-unsubscribe'];
    for (const name of expected) assert.ok(passed.has(name), `${name} passes: ${stdout.slice(-4000)}`);
  });
}

// The tasks extension's scenarios are not part of a revision's requirements:
// each is run by name. (`tasks-status-notifications` checks nothing yet.)
const TASKS = ['tasks-capability-negotiation', 'tasks-dispatch-and-envelope', 'tasks-lifecycle', 'tasks-mrtr-composition',
  'tasks-mrtr-input', 'tasks-request-headers', 'tasks-request-state-removal', 'tasks-required-task-error', 'tasks-wire-fields'];

test('the conformance suite passes every scenario of the tasks extension', async () => {
  for (const scenario of TASKS) {
    const stdout = await suite(['--scenario', scenario]);
    const [, passed, total, failed, warnings] = stdout.match(/Passed: (\d+)\/(\d+), (\d+) failed, (\d+) warnings/) ?? [];
    assert.ok(Number(total) > 0, `${scenario} ran: ${stdout.slice(-3000)}`);
    assert.deepEqual([passed, failed, warnings], [total, '0', '0'], `${scenario}: ${stdout.slice(-3000)}`);
  }
});
