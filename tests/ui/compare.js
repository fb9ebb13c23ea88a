// The dashboard's web UI directly and through the gateway, in headless Chromium, side by
// side: the same login, the same landing page for the same time, every API call recorded.
// Any Ceph release's UI (16.2's, 18.2's Angular, 20.2's Carbon): it needs only the login
// form's #username and #password, and waits on the network rather than on page elements.
//
// Environment:
//   CG_UI_DIRECT_URL, CG_UI_DIRECT_USER, CG_UI_DIRECT_PASSWORD     the dashboard itself
//   CG_UI_GATEWAY_URL, CG_UI_GATEWAY_USER, CG_UI_GATEWAY_PASSWORD  the gateway before it
//   CG_UI_DWELL_MS   how long each side stays on the landing page (its polling included)
//   CG_UI_OUT        where the two screenshots go (direct.png, gateway.png)
//   CG_UI_CHROMIUM   the browser (Debian's /usr/bin/chromium)
//
// Prints one JSON line: {"direct": SIDE, "gateway": SIDE}, each SIDE {landing: URL after
// login, calls: [{method, path, status}], errors: [page errors]}. Exits 1 when a side
// cannot log in.
'use strict';

const path = require('path');
const { chromium } = require('playwright-core');

const WAIT = 60_000;

function env(name) {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set`);
  return value;
}

function pathOf(url) {
  const u = new URL(url);
  return u.pathname;
}

async function side(browser, base, user, password, shotFile) {
  const context = await browser.newContext({ viewport: { width: 1440, height: 900 }, locale: 'en-US' });
  context.setDefaultTimeout(WAIT);
  const page = await context.newPage();
  const calls = [];
  const errors = [];
  page.on('response', (r) => {
    const p = pathOf(r.url());
    if (r.url().startsWith(base) && (p.startsWith('/api/') || p.startsWith('/ui-api/'))) {
      calls.push({ method: r.request().method(), path: p, status: r.status() });
    }
  });
  page.on('requestfailed', (request) => {
    const p = pathOf(request.url());
    if (request.url().startsWith(base) && (p.startsWith('/api/') || p.startsWith('/ui-api/'))) {
      calls.push({ method: request.method(), path: p, status: 0 });
    }
  });
  page.on('pageerror', (e) => errors.push(String(e).slice(0, 200)));
  await page.goto(base + '/');
  await page.locator('#username').waitFor({ state: 'visible' });
  await page.locator('#username').fill(user);
  await page.locator('#password').fill(password);
  await page.locator('#password').press('Enter');
  await page.waitForURL((url) => !String(url).includes('#/login'), { timeout: WAIT });
  await page.waitForTimeout(Number(env('CG_UI_DWELL_MS')));
  await page.screenshot({ path: shotFile });
  const landing = page.url().replace(base, '');
  await context.close();
  return { landing, calls, errors };
}

async function main() {
  const browser = await chromium.launch({
    executablePath: env('CG_UI_CHROMIUM'),
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  try {
    const out = env('CG_UI_OUT');
    const direct = await side(browser, env('CG_UI_DIRECT_URL'), env('CG_UI_DIRECT_USER'),
      env('CG_UI_DIRECT_PASSWORD'), path.join(out, 'direct.png'));
    const gateway = await side(browser, env('CG_UI_GATEWAY_URL'), env('CG_UI_GATEWAY_USER'),
      env('CG_UI_GATEWAY_PASSWORD'), path.join(out, 'gateway.png'));
    process.stdout.write(JSON.stringify({ direct, gateway }) + '\n');
  } finally {
    await browser.close();
  }
}

main().catch((e) => {
  process.stderr.write(`compare.js: ${e.stack || e}\n`);
  process.exit(1);
});
