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
