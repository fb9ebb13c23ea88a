// The browser's single sign-on in headless Chromium (Debian's /usr/bin/chromium, driven by
// playwright-core from tests/ui/node_modules): the dashboard's own UI through the gateway
// sends the browser to the provider's login form; after it, the browser lands on the
// dashboard's landing page (16.2: the cluster's health; 20.2: its details); the UI's Sign out
// sends it to the provider's end_session_endpoint. Run by tests/it/oidc_browser.rs with:
//   CG_SSO_URL (the gateway), CG_SSO_ISSUER (the provider), CG_SSO_ACCOUNT,
//   CG_SSO_OUT (a folder for screenshots), CG_UI_CHROMIUM (default /usr/bin/chromium)
// Exits 0 when every step passed.
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';

const require = createRequire(new URL('../ui/package.json', import.meta.url));
const { chromium } = require('playwright-core');

const BASE = process.env.CG_SSO_URL.replace(/\/+$/, '');
const ISSUER = process.env.CG_SSO_ISSUER;
const ACCOUNT = process.env.CG_SSO_ACCOUNT;
const OUT = process.env.CG_SSO_OUT;
const WAIT = 45_000;
const HEALTH = /HEALTH_(OK|WARN|ERR)/;
// 20.2's overview shows the cluster's id (from /api/health/get_cluster_fsid) in its details.
const FSID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

const browser = await chromium.launch({
  executablePath: process.env.CG_UI_CHROMIUM || '/usr/bin/chromium',
  headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run'],
});
/** Polls the page's address until `done` holds, at most WAIT. */
async function urlComesTo(done, what) {
  const deadline = Date.now() + WAIT;
  while (!done(page.url())) {
    if (Date.now() > deadline) throw new Error(`never reached ${what}: at ${page.url()}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

let failed = false;
let page;
try {
  page = await (await browser.newContext()).newPage();
  page.setDefaultTimeout(WAIT);
  console.log(`step: open ${BASE}/`);
  await page.goto(`${BASE}/`);
  // The UI's login page asked the token check, which named the gateway's login.
  await page.waitForURL((url) => url.href.startsWith(`${ISSUER}/interaction/`));
  await page.screenshot({ path: `${OUT}/1-provider-login.png` });
  console.log(`step: log in at the provider as ${ACCOUNT}`);
  await page.fill('input[name="login"]', ACCOUNT);
  await page.fill('input[name="password"]', 'anything');
  await page.locator('button[type="submit"]').click();
  // 16.2 and 18.2 land on #/dashboard, 20.2 on #/overview.
  await page.waitForURL(/#\/(dashboard|overview)/);
  // 16.2's landing page shows the cluster's health; 20.2's its details (the cluster id).
  const shown = page.getByText(HEALTH).or(page.getByText(FSID)).first();
  await shown.waitFor({ state: 'visible' });
  console.log(`step: the landing page shows "${(await shown.innerText()).trim().slice(0, 60)}"`);
  assert.ok(page.url().startsWith(`${BASE}/`), `landed on ${page.url()}`);
  await page.screenshot({ path: `${OUT}/2-landing-page.png` });
  console.log('step: landed on the dashboard');
  const cookies = await page.context().cookies(BASE);
  assert.ok(cookies.some((c) => c.name === 'token' && c.httpOnly), 'the token cookie');
  console.log('step: sign out through the UI');
  // 16.2's menu is a Bootstrap dropdown ("Sign out"), 20.2's a Carbon overflow menu ("Log out").
  await page
    .locator('cd-identity [ngbdropdowntoggle], cd-identity .dropdown-toggle, cd-identity button')
    .first()
    .click();
  const [logout] = await Promise.all([
    page.waitForResponse((r) => new URL(r.url()).pathname === '/api/auth/logout'),
    page.getByText(/^\s*(Sign out|Log out)\s*$/).first().click(),
  ]);
  assert.equal(logout.status(), 200);
  // Two navigations may race there (the UI follows redirect_url, and its login page, after
  // the polls' 401s, goes through the gateway's login to the same logout): the one that
  // loses is aborted, so the page's address is polled rather than one navigation awaited.
  await urlComesTo((url) => url.startsWith(`${ISSUER}/session/end`), 'the provider\'s logout');
  await page.screenshot({ path: `${OUT}/3-provider-logout.png` });
  console.log('step: at the provider\'s end_session_endpoint');
} catch (e) {
  failed = true;
  console.log(`FAILED: ${e.stack}`);
} finally {
  await browser.close();
}
process.exit(failed ? 1 : 0);
