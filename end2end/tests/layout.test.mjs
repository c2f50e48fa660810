// Every page on a phone (390 px wide) and on a laptop (1280 px), signed out and
// as the administrator: nothing is wider than the screen (no sideways
// scrolling), the phone's header keeps the user's name and every link in view,
// and a screenshot of each lands in end2end/output/ for a person to look at.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { BASE, launch, settled, shot, signInAsAdmin, furnish, VISITOR_PAGES, ADMIN_PAGES } from './browser.mjs';

const PHONE = { width: 390, height: 844 };
const LAPTOP = { width: 1280, height: 800 };

let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

/** `layout-390-admin-tools-demo-echo-edit` */
const shotName = (viewport, who, path) => `layout-${viewport.width}-${who}-${path.replace(/[^a-z0-9]+/gi, '-').replace(/^-|-$/g, '') || 'home'}`;

/** The page's width, and the innermost elements reaching past the viewport's right edge (to say what to fix). */
function measure() {
  const width = document.documentElement.clientWidth;
  const past = [...document.body.querySelectorAll('*')].filter((e) => e.getBoundingClientRect().right > width + 0.5);
  const innermost = past.filter((e) => !past.some((other) => other !== e && e.contains(other)));
  const name = (e) => `${e.tagName.toLowerCase()}${e.className && typeof e.className === 'string' ? `.${e.className.trim().split(/\s+/).join('.')}` : ''}`;
  return {
    scrollWidth: document.scrollingElement.scrollWidth,
    culprits: innermost.slice(0, 4).map((e) => `${name(e)} to ${Math.round(e.getBoundingClientRect().right)} px`),
  };
}

/** Buttons and fields wholly past the screen's right edge (in a box that scrolls sideways): a person would not find them. */
function hiddenControls() {
  const width = document.documentElement.clientWidth;
  const name = (e) => `${e.tagName.toLowerCase()}${e.className && typeof e.className === 'string' ? `.${e.className.trim().split(/\s+/).join('.')}` : ''}`;
  return [...document.querySelectorAll('main button, main select, main input:not([type=hidden]), main textarea')]
    .filter((e) => e.checkVisibility({ visibilityProperty: true }) && e.getBoundingClientRect().left >= width)
    .slice(0, 4)
    .map((e) => `${name(e)} "${(e.textContent || e.getAttribute('aria-label') || e.name || '').trim()}" at ${Math.round(e.getBoundingClientRect().left)} px`);
}

/** Where the header's parts are on a phone. */
function headerBoxes() {
  const box = (e) => { const r = e.getBoundingClientRect(); return { top: r.top, bottom: r.bottom, left: r.left, right: r.right }; };
  const name = document.querySelector('.topbar .user-name');
  return {
    brand: box(document.querySelector('.topbar .brand')),
    user: box(document.querySelector('.topbar-user')),
    name: name && { ...box(name), text: name.textContent, clipped: name.scrollWidth > name.clientWidth },
    links: [...document.querySelectorAll('.topbar .nav a')].map((a) => ({ text: a.textContent, ...box(a) })),
  };
}

/** Opens every path at `viewport`, screenshots it, and returns what does not fit. */
async function checkPages(context, who, paths, viewport) {
  const page = await context.newPage();
  await page.setViewportSize(viewport);
  const failures = [];
  for (const path of paths) {
    await page.goto(`${BASE}${path}`);
    await settled(page);
    await shot(page, shotName(viewport, who, path));
    const { scrollWidth, culprits } = await page.evaluate(measure);
    if (scrollWidth > viewport.width) failures.push(`${path} at ${viewport.width} px is ${scrollWidth} px wide: ${culprits.join(', ')}`);
    const hidden = await page.evaluate(hiddenControls);
    if (hidden.length) failures.push(`${path} at ${viewport.width} px hides ${hidden.join(', ')} past the right edge`);
  }
  await page.close();
  return failures;
}

test('every page a visitor can open fits a phone and a laptop', async () => {
  const context = await browser.newContext();
  const failures = [];
  for (const viewport of [PHONE, LAPTOP]) failures.push(...await checkPages(context, 'visitor', VISITOR_PAGES, viewport));
  await context.close();
  assert.deepEqual(failures, []);
});

test('every page the administrator can open fits a phone and a laptop', async () => {
  const context = await browser.newContext();
  const page = await context.newPage();
  await signInAsAdmin(page);
  const paths = [...ADMIN_PAGES, await furnish(page)];
  const failures = [];
  for (const viewport of [PHONE, LAPTOP]) failures.push(...await checkPages(context, 'admin', paths, viewport));
  await context.close();
  assert.deepEqual(failures, []);
});

test("a phone's header shows the brand and the user's name on one line, and every link below", async () => {
  const context = await browser.newContext({ viewport: PHONE });
  const page = await context.newPage();
  await signInAsAdmin(page);
  await page.goto(`${BASE}/browse`);
  await settled(page);
  const { brand, user, name, links } = await page.evaluate(headerBoxes);
  assert.ok(user.top < brand.bottom && brand.top < user.bottom, 'the brand and the user share a line');
  assert.ok(name && name.right <= PHONE.width && name.right - name.left > 20 && !name.clipped, `the whole name shows: ${JSON.stringify(name)}`);
  assert.deepEqual(links.map((l) => l.text), ['Browse', 'My tools', 'New tool', 'Playground', 'Admin']);
  for (const link of links) {
    assert.ok(link.left >= 0 && link.right <= PHONE.width, `${link.text} is in view`);
    assert.equal(link.top, links[0].top, `${link.text} is on the links' line`);
    assert.ok(link.top >= brand.bottom, `${link.text} is below the brand`);
  }
  // The menu opens inside the screen.
  await page.click('.user-button');
  const menu = await page.locator('.menu.open').boundingBox();
  assert.ok(menu.x >= 0 && menu.x + menu.width <= PHONE.width, 'the menu is in view');
  await context.close();
});

test("on a phone a listing's Run and Connect come right after its description and arguments, whose descriptions show whole", async () => {
  const context = await browser.newContext({ viewport: PHONE });
  const page = await context.newPage();
  await signInAsAdmin(page);
  await page.goto(`${BASE}/tools/demo/echo`);
  await settled(page);
  const top = (locator) => locator.first().evaluate((e) => e.getBoundingClientRect().top + window.scrollY);
  const heading = (text) => page.locator('main h2', { hasText: text });
  const [args, connect, run, usage, versions] = [
    await top(page.locator('.arg-table')), await top(page.locator('.connect-panel')), await top(page.locator('.run-button')),
    await top(heading('Usage')), await top(heading('Versions')),
  ];
  assert.ok(args < connect && args < run, `arguments (${args}) before Connect (${connect}) and Run (${run})`);
  assert.ok(run < usage && connect < usage && usage < versions, `Run (${run}) and Connect (${connect}) before usage (${usage}) and versions (${versions})`);
  // The description's column, found by its heading: a column added or moved does not point this at another.
  const column = await page.locator('.arg-table thead th').evaluateAll((cells) => cells.findIndex((th) => th.textContent.trim() === 'Description') + 1);
  assert.ok(column > 0, 'the arguments table has a Description column');
  const description = await page.locator(`.arg-table tbody td:nth-child(${column})`).first().evaluate((e) => {
    const r = e.getBoundingClientRect();
    return { right: r.right, clipped: e.scrollWidth > e.clientWidth + 1 };
  });
  assert.ok(description.right <= PHONE.width && !description.clipped, JSON.stringify(description));
  await shot(page, 'layout-390-listing-order');
  await context.close();
});
