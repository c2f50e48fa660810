// Shared set-up for the browser tests: Debian's Chromium, a fresh profile, and
// screenshots under end2end/output/ for a person to look at.
import { chromium } from 'playwright-core';
import { mkdirSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

export const BASE = process.env.TOOLSHED_URL ?? 'http://127.0.0.1:3000';
export const ADMIN_PASSWORD = process.env.TOOLSHED_ADMIN_PASSWORD ?? '';
const OUTPUT = join(dirname(fileURLToPath(import.meta.url)), '..', 'output');
mkdirSync(OUTPUT, { recursive: true });

/** Debian's Chromium; playwright gives each launch a fresh, empty profile. */
export async function launch() {
  return chromium.launch({
    executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
    headless: true,
    args: [
      '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync',
    ],
  });
}

export async function shot(page, name) {
  await page.screenshot({ path: join(OUTPUT, `${name}.png`), fullPage: true });
}

export const unique = (prefix) => `${prefix}${Date.now().toString(36)}${Math.floor(Math.random() * 1e4)}`;

/** Waits until the wasm has hydrated the page (the app marks <body> when it has). */
export async function hydrated(page) {
  await page.waitForSelector('body[data-hydrated="true"]', { timeout: 30_000 });
}

export async function newPage(browser, options = {}) {
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 }, ...options });
  return context.newPage();
}

/** Replaces the code in the CodeMirror editor, as typing would. */
export async function setCode(page, code) {
  await page.waitForSelector('.cm-editor');
  await page.evaluate((text) => {
    const view = window.toolshedEditors.get('code');
    view.dispatch({ changes: { from: 0, to: view.state.doc.length, insert: text } });
  }, code);
}

/** Signs `page` in as the first-start admin with the sign-in form. */
export async function signInAsAdmin(page) {
  await page.goto(`${BASE}/login`);
  await hydrated(page);
  await page.fill('input[name=username]', 'admin');
  await page.fill('input[name=password]', ADMIN_PASSWORD);
  await page.click('main button[type=submit]');
  await page.waitForSelector('.user-button');
}

/** Registers a new account in a new `department` with the register form; returns its username. */
export async function signUp(page, department, displayName) {
  const username = unique('user');
  await page.goto(`${BASE}/register`);
  await hydrated(page);
  await page.fill('input[name=username]', username);
  await page.fill('input[name=display_name]', displayName);
  await page.fill('input[name=new_department]', department);
  await page.fill('input[name=password]', 'a-long-enough-password');
  await page.fill('input[name=password_confirm]', 'a-long-enough-password');
  await page.click('main button[type=submit]');
  await page.waitForSelector('.user-button');
  return username;
}
