#!/usr/bin/env node
// Drives the Ceph 16.2 dashboard's own web UI through clustergate in headless Chromium
// (Debian's /usr/bin/chromium, driven by playwright-core; no browser download).
// Run by tests/it/ui_browser.rs, which starts a real dashboard and the gateway and passes:
//
//   CG_UI_URL                 the gateway, e.g. https://127.0.0.1:PORT
//   CG_UI_CERT_FILE           the gateway's certificate (PEM, leaf first): Chromium is told to
//                             accept exactly this key (--ignore-certificate-errors-spki-list);
//                             without it, certificate errors are ignored (ignoreHTTPSErrors)
//   CG_UI_DASHBOARD_URLS      the managers' own dashboards, space-separated (never to be seen
//                             by the browser; the active one answers the caching comparison)
//   CG_UI_ADMIN_USER/_PASSWORD, CG_UI_VIEWER_USER/_PASSWORD, CG_UI_LOCK_USER/_PASSWORD
//                             gateway users: administrator, read-only, administrator (locked out)
//   CG_UI_LOCKOUT_ATTEMPTS, CG_UI_LOCKOUT_SECONDS   the gateway's auth.lockout_* settings
//   CG_UI_FAILOVER            JSON argv that fails the active manager over (scenario 4)
//   CG_UI_OUT                 folder for the screenshots of every step
//   CG_UI_README_SCREENSHOT   optional: where to copy the landing page screenshot
//   CG_UI_SCENARIOS           optional: which scenarios, e.g. "1,2" (default: 1,2,3,5,6,4)
//   CG_UI_CHROMIUM            optional: the browser (default /usr/bin/chromium)
//
// Exits 0 when every scenario passed, 1 otherwise; prints each step, and every request the
// browser saw refused or failed (expected ones marked as such).
'use strict';

const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');
const { spawn } = require('node:child_process');
const { chromium } = require('playwright-core');

const V1 = 'application/vnd.ceph.api.v1.0+json';
const HEALTH = /HEALTH_(OK|WARN|ERR)/;
const WAIT = 45_000;
/** The headers that decide how browsers cache the UI's files. */
const CACHING = ['cache-control', 'last-modified', 'etag', 'expires'];

function env(name, fallback) {
  const value = process.env[name];
  if (value === undefined || value === '') {
    if (fallback !== undefined) return fallback;
    throw new Error(`${name} is not set`);
  }
  return value;
}

const BASE = env('CG_UI_URL').replace(/\/+$/, '');
const ORIGIN = new URL(BASE).origin;
const OUT = env('CG_UI_OUT');
const MANAGERS = env('CG_UI_DASHBOARD_URLS', '').split(/\s+/).filter(Boolean);
const MANAGER_HOSTS = MANAGERS.map((u) => new URL(u).host);
const USERS = {
  admin: { name: env('CG_UI_ADMIN_USER'), password: env('CG_UI_ADMIN_PASSWORD') },
  viewer: { name: env('CG_UI_VIEWER_USER'), password: env('CG_UI_VIEWER_PASSWORD') },
  locked: { name: env('CG_UI_LOCK_USER', ''), password: env('CG_UI_LOCK_PASSWORD', '') },
};
const LOCKOUT_ATTEMPTS = Number(env('CG_UI_LOCKOUT_ATTEMPTS', '3'));
const LOCKOUT_SECONDS = Number(env('CG_UI_LOCKOUT_SECONDS', '3'));
const SCENARIOS = env('CG_UI_SCENARIOS', '1,2,3,5,6,4').split(',').map((s) => s.trim()).filter(Boolean);

fs.mkdirSync(OUT, { recursive: true });

// ---------------------------------------------------------------------------------------
// What the browser saw, over all scenarios.

/** Every response (and failed request) of every context: {scenario, step, method, url, status, ...}. */
const seen = [];
/** Every navigation of every frame: {scenario, step, url}. */
const navigations = [];
/** Requests and navigations that named a manager's own address or left the gateway's origin. */
const violations = [];
let current = { scenario: '-', step: '-' };
/** Refusals a step expects: {method, path (RegExp), status, scenario}. */
let expected = [];
/** [start, end] ms of the failover, during which 502/503 from the gateway are tolerated. */
const failoverWindows = [];

function pathOf(url) {
  try {
    const u = new URL(url);
    return u.pathname + u.search;
  } catch {
    return url;
  }
}

function namesManager(text) {
  return MANAGER_HOSTS.some((host) => text.includes(host));
}

function checkUrl(kind, url) {
  if (!/^https?:/.test(url)) return;
  if (namesManager(url) || new URL(url).origin !== ORIGIN) {
    violations.push(`${current.scenario}/${current.step}: ${kind} ${url}`);
  }
}

function watch(context, page) {
  context.on('request', (request) => checkUrl('request to', request.url()));
  context.on('response', async (response) => {
    const where = { ...current, at: Date.now() };
    const request = response.request();
    const headers = await response.allHeaders().catch(() => response.headers());
    const location = headers.location;
    if (location && namesManager(location)) {
      violations.push(`${where.scenario}/${where.step}: redirect ${response.status()} to ${location}`);
    }
    const entry = {
      scenario: where.scenario,
      step: where.step,
      at: where.at,
      method: request.method(),
      url: response.url(),
      path: pathOf(response.url()),
      status: response.status(),
      accept: request.headers().accept,
      requestId: headers['x-request-id'],
      location,
      caching: Object.fromEntries(CACHING.map((n) => [n, headers[n]])),
    };
    seen.push(entry);
    if (entry.status >= 400) {
      entry.body = await response.text().then((t) => t.slice(0, 300)).catch(() => '');
    }
  });
  context.on('requestfailed', (request) => {
    seen.push({
      scenario: current.scenario,
      step: current.step,
      at: Date.now(),
      method: request.method(),
      url: request.url(),
      path: pathOf(request.url()),
      status: 0,
      failure: request.failure()?.errorText,
    });
  });
  page.on('framenavigated', (frame) => {
    navigations.push({ scenario: current.scenario, step: current.step, url: frame.url() });
    checkUrl('navigation to', frame.url());
  });
}

function expect(method, pathRe, status) {
  expected.push({ scenario: current.scenario, method, path: pathRe, status });
}

function classify(entry) {
  if (entry.status === 0) {
    // The UI cancels requests it no longer needs when it navigates.
    return entry.failure === 'net::ERR_ABORTED' ? 'aborted' : 'unexpected';
  }
  if (entry.status < 400) return 'ok';
  const wanted = expected.some(
    (e) =>
      e.scenario === entry.scenario &&
      e.method === entry.method &&
      e.path.test(entry.path) &&
      e.status === entry.status,
  );
  if (wanted) return 'expected';
  const inFailover = failoverWindows.some(([a, b]) => entry.at >= a && entry.at <= b);
  if (inFailover && (entry.status === 502 || entry.status === 503)) return 'during failover';
  return 'unexpected';
}

// ---------------------------------------------------------------------------------------
// Browser, sessions, steps.

function spkiHash(certFile) {
  const pem = fs.readFileSync(certFile, 'utf8');
  const leaf = pem.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/)[0];
  const cert = new crypto.X509Certificate(leaf);
  const spki = cert.publicKey.export({ type: 'spki', format: 'der' });
  return crypto.createHash('sha256').update(spki).digest('base64');
}

const certFile = process.env.CG_UI_CERT_FILE;
const trust = certFile
  ? `the gateway's certificate key only (--ignore-certificate-errors-spki-list=${spkiHash(certFile)})`
  : 'any certificate (ignoreHTTPSErrors)';

async function launch() {
  const args = [
    '--no-sandbox',
    '--disable-gpu',
    '--disable-background-networking',
    '--disable-component-update',
    '--disable-sync',
    '--no-first-run',
    '--disable-dev-shm-usage',
    '--disable-quic',
  ];
  if (certFile) args.push(`--ignore-certificate-errors-spki-list=${spkiHash(certFile)}`);
  return chromium.launch({
    executablePath: env('CG_UI_CHROMIUM', '/usr/bin/chromium'),
    headless: true,
    args,
  });
}

/** Counts the UI's toasts (its notifications) as they appear, whatever their lifetime. */
function recordToasts() {
  window.__cgToasts = [];
  const observer = new MutationObserver((mutations) => {
    for (const m of mutations) {
      for (const node of m.addedNodes) {
        if (node.nodeType === 1 && node.matches && node.matches('.ngx-toastr, .toast')) {
          window.__cgToasts.push({ at: Date.now(), cls: node.className, text: '' });
          const entry = window.__cgToasts[window.__cgToasts.length - 1];
          // The text is rendered right after the node is added.
          setTimeout(() => (entry.text = node.innerText), 300);
        }
      }
    }
  });
  const start = () => observer.observe(document.documentElement, { childList: true, subtree: true });
  if (document.documentElement) start();
  else document.addEventListener('DOMContentLoaded', start);
}

let browser;
let shotIndex = 0;

async function session() {
  const context = await browser.newContext({
    ignoreHTTPSErrors: !certFile,
    viewport: { width: 1280, height: 800 },
    locale: 'en-US',
  });
  context.setDefaultTimeout(WAIT);
  context.setDefaultNavigationTimeout(WAIT);
  await context.addInitScript(recordToasts);
  const page = await context.newPage();
  watch(context, page);
  page.on('pageerror', (error) => log(`    page error: ${String(error).slice(0, 200)}`));
  return { context, page };
}

function log(line) {
  process.stdout.write(line + '\n');
}

async function shot(page, name, file) {
  shotIndex += 1;
  const target =
    file ?? path.join(OUT, `${String(shotIndex).padStart(2, '0')}-s${current.scenario}-${name}.png`);
  await page.screenshot({ path: target });
  return target;
}

/** One step: named, timed, screenshot afterwards. */
async function step(page, name, body) {
  current.step = name;
  const started = Date.now();
  try {
    await body();
  } finally {
    const file = await shot(page, name).catch((e) => `(no screenshot: ${e.message})`);
    log(`  ${name} (${((Date.now() - started) / 1000).toFixed(1)} s) -> ${path.basename(file)}`);
  }
}

// ---------------------------------------------------------------------------------------
// The UI, as a person uses it.

async function openLoginPage(page) {
  const response = await page.goto(BASE + '/');
  assert.equal(response.status(), 200, 'GET / through the gateway');
  await page.locator('#username').waitFor({ state: 'visible' });
  await page.waitForURL(/#\/login/);
  return response;
}

/** Fills the login form and submits it; returns the gateway's answer to POST /api/auth. */
async function submitLogin(page, user, password) {
  await page.locator('#username').fill(user);
  await page.locator('#password').fill(password);
  const [response] = await Promise.all([
    page.waitForResponse((r) => pathOf(r.url()) === '/api/auth' && r.request().method() === 'POST'),
    page.locator('input[type="submit"]').click(),
  ]);
  return response;
}

/** The landing page: the dashboard route with the cluster's health in its Status card. */
async function landingPage(page) {
  await page.waitForURL(/#\/dashboard/);
  const health = page.locator('cd-health').getByText(HEALTH).first();
  await health.waitFor({ state: 'visible' });
  const text = (await health.innerText()).trim();
  assert.match(text, HEALTH);
  const card = page.locator('cd-info-card', { hasText: 'Cluster Status' });
  await card.first().waitFor({ state: 'visible' });
  assert.ok(!/#\/(403|error|login)/.test(page.url()), `still on the landing page: ${page.url()}`);
  return text;
}

async function login(page, who) {
  await openLoginPage(page);
  const response = await submitLogin(page, who.name, who.password);
  assert.equal(response.status(), 201, `login ${who.name}: ${await response.text()}`);
  return landingPage(page);
}

async function openPools(page) {
  await page.locator('a[href="#/pool"]').first().click();
  await page.waitForURL(/#\/pool/);
  await page.locator('cd-pool-list cd-table .datatable-body, cd-pool-list cd-table datatable-body').first().waitFor({ state: 'visible' });
  // The table's rows come from GET /api/pool.
  await page.waitForResponse((r) => /^\/api\/pool(\?|$)/.test(pathOf(r.url())), { timeout: 15_000 }).catch(() => {});
  await page.waitForTimeout(500);
}

function createButton(page) {
  return page.locator('cd-pool-list cd-table-actions').getByRole('button', { name: /Create/ });
}

async function logoutThroughMenu(page) {
  await page.locator('cd-identity [ngbdropdowntoggle], cd-identity .dropdown-toggle').first().click();
  const [response] = await Promise.all([
    page.waitForResponse((r) => pathOf(r.url()) === '/api/auth/logout'),
    page.locator('cd-identity').getByText('Sign out').click(),
  ]);
  assert.equal(response.status(), 200, 'POST /api/auth/logout');
  await page.locator('#username').waitFor({ state: 'visible' });
  await page.waitForURL(/#\/login/);
}

/** fetch() from the page's own context: same origin, the cookie goes along. */
function pageFetch(page, url, init = {}) {
  return page.evaluate(
    async ([url, init]) => {
      const r = await fetch(url, { credentials: 'same-origin', ...init });
      const headers = {};
      r.headers.forEach((v, k) => (headers[k] = v));
      return { status: r.status, headers, body: await r.text() };
    },
    [url, init],
  );
}

async function tokenCookie(context) {
  return (await context.cookies(ORIGIN)).find((c) => c.name === 'token');
}

async function toasts(page) {
  return page.evaluate(() => window.__cgToasts || []);
}

/** Waits for a new error toast after `before` of them, with `text`; returns its text. */
async function newToast(page, before, text) {
  await page.waitForFunction(
    ([before, text]) =>
      (window.__cgToasts || []).slice(before).some((t) => t.text.includes(text)),
    [before, text],
    { timeout: 15_000 },
  );
  const all = await toasts(page);
  return all.slice(before).find((t) => t.text.includes(text)).text.replace(/\s+/g, ' ').trim();
}

/** Waits until the browser has seen a response matching `pred` (in this scenario). */
async function waitSeen(pred, what, ms = 15_000) {
  const deadline = Date.now() + ms;
  for (;;) {
    const found = seen.find((e) => e.scenario === current.scenario && pred(e));
    if (found) return found;
    assert.ok(Date.now() < deadline, `the browser never saw ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

async function activeManager() {
  for (const url of MANAGERS) {
    const r = await fetch(url + '/', { redirect: 'manual' }).catch(() => null);
    if (r && r.status === 200) return url;
  }
  return null;
}

function run(argv) {
  return new Promise((resolve, reject) => {
    const child = spawn(argv[0], argv.slice(1), { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
    child.on('error', reject);
    child.on('close', (code) =>
      code === 0 ? resolve(out) : reject(new Error(`${argv.join(' ')} exited ${code}:\n${out}`)),
    );
  });
}

// ---------------------------------------------------------------------------------------
// Scenarios.

const scenarios = {
  1: {
    title: 'administrator: login page, landing page with health, Pools, logout through the user menu',
    async run() {
      const { context, page } = await session();
      await step(page, 'login-page', () => openLoginPage(page));
      let health;
      await step(page, 'landing-page', async () => {
        const response = await submitLogin(page, USERS.admin.name, USERS.admin.password);
        assert.equal(response.status(), 201, 'POST /api/auth');
        health = await landingPage(page);
        log(`    cluster health shown: ${health}`);
        // The landing page asks for another API version than 1.0 here: passed through as asked.
        const settings = await waitSeen(
          (e) => e.path === '/api/osd/settings' && /v0\.1\+json/.test(e.accept || ''),
          'GET /api/osd/settings with Accept v0.1',
        );
        assert.equal(settings.status, 200, `GET /api/osd/settings (v0.1): ${settings.body}`);
      });
      const before = await tokenCookie(context);
      assert.ok(before, 'the login set the token cookie');
      await step(page, 'pools-page', async () => {
        await openPools(page);
        await createButton(page).waitFor({ state: 'visible' });
        const summary = await pageFetch(page, '/api/summary', { headers: { Accept: V1 } });
        assert.equal(summary.status, 200, `GET /api/summary while logged in: ${summary.body}`);
      });
      await step(page, 'logged-out', async () => {
        await logoutThroughMenu(page);
        assert.equal(await tokenCookie(context), undefined, 'the logout removed the token cookie');
        expect('GET', /^\/api\/summary$/, 401);
        const after = await pageFetch(page, '/api/summary', { headers: { Accept: V1 } });
        assert.equal(after.status, 401, `GET /api/summary after logout: ${after.body}`);
        // The old token itself is revoked, not merely forgotten by the browser.
        await context.addCookies([{ ...before }]);
        const old = await pageFetch(page, '/api/summary', { headers: { Accept: V1 } });
        assert.equal(old.status, 401, `GET /api/summary with the old token: ${old.body}`);
        await context.clearCookies();
        await page.waitForTimeout(1000);
        assert.match(page.url(), /#\/login/, 'still on the login page');
      });
      await context.close();
    },
  },

  2: {
    title: 'read-only user: no Create action on Pools, a forced write gets 403 from the gateway',
    async run() {
      const { context, page } = await session();
      await step(page, 'landing-page', async () => {
        const health = await login(page, USERS.viewer);
        log(`    cluster health shown: ${health}`);
      });
      await step(page, 'pools-page-no-create', async () => {
        await openPools(page);
        assert.equal(await createButton(page).count(), 0, 'a Create button on the Pools page');
        const actions = await page.locator('cd-pool-list cd-table-actions button').count();
        assert.equal(actions, 0, 'table actions offered to a read-only user');
        const permissions = await page.evaluate(() => JSON.parse(localStorage.getItem('dashboard_permissions') || 'null'));
        log(`    pool permissions the UI got: ${JSON.stringify(permissions && permissions.pool)}`);
      });
      await step(page, 'forced-write-403', async () => {
        expect('POST', /^\/api\/pool$/, 403);
        const r = await pageFetch(page, '/api/pool', {
          method: 'POST',
          headers: { Accept: V1, 'Content-Type': 'application/json' },
          body: '{}',
        });
        assert.equal(r.status, 403, `POST /api/pool as read-only: ${r.body}`);
        const body = JSON.parse(r.body);
        assert.equal(typeof body.request_id, 'string', `request_id in ${r.body}`);
        assert.ok(r.headers['x-request-id'], 'X-Request-Id on the 403');
        assert.equal(body.request_id, r.headers['x-request-id'], 'the body names the request');
        log(`    403 ${r.body}`);
      });
      await step(page, 'logged-out', () => logoutThroughMenu(page));
      await context.close();
    },
  },

  3: {
    title: `wrong password: the UI's error message; lockout after ${LOCKOUT_ATTEMPTS} attempts for ${LOCKOUT_SECONDS} s`,
    async run() {
      const who = USERS.locked;
      assert.ok(who.name && who.password, 'CG_UI_LOCK_USER and CG_UI_LOCK_PASSWORD');
      const { context, page } = await session();
      await step(page, 'login-page', () => openLoginPage(page));
      expect('POST', /^\/api\/auth$/, 400);
      let lockedAt = 0;
      for (let i = 1; i <= LOCKOUT_ATTEMPTS; i += 1) {
        await step(page, `wrong-password-${i}`, async () => {
          // The UI drops a toast identical to one still shown, and its text carries the
          // time to the second: attempts in one second would show one toast.
          await page.waitForTimeout(Math.max(0, lockedAt + 1100 - Date.now()));
          const before = (await toasts(page)).length;
          const r = await submitLogin(page, who.name, `wrong-${i}-${who.password}`);
          lockedAt = Date.now();
          assert.equal(r.status(), 400, 'a wrong password');
          const toast = await newToast(page, before, 'Invalid credentials');
          log(`    the UI says: ${toast}`);
          assert.match(page.url(), /#\/login/);
        });
      }
      await step(page, 'locked-right-password-refused', async () => {
        await page.waitForTimeout(Math.max(0, lockedAt + 1100 - Date.now()));
        const before = (await toasts(page)).length;
        const r = await submitLogin(page, who.name, who.password);
        const answeredAfter = (Date.now() - lockedAt) / 1000;
        assert.ok(
          answeredAfter < LOCKOUT_SECONDS,
          `inconclusive: the locked attempt was answered ${answeredAfter} s after the lock began`,
        );
        assert.equal(r.status(), 400, `the right password while locked out: ${await r.text()}`);
        const toast = await newToast(page, before, 'Invalid credentials');
        log(`    the UI says: ${toast} (${answeredAfter.toFixed(1)} s into the lockout)`);
        await page.waitForTimeout(500);
        assert.match(page.url(), /#\/login/, 'still on the login page');
      });
      await step(page, 'after-lockout-landing-page', async () => {
        const wait = lockedAt + LOCKOUT_SECONDS * 1000 + 500 - Date.now();
        if (wait > 0) await page.waitForTimeout(wait);
        const r = await submitLogin(page, who.name, who.password);
        assert.equal(r.status(), 201, `the right password after the lockout: ${await r.text()}`);
        await landingPage(page);
      });
      await step(page, 'logged-out', () => logoutThroughMenu(page));
      await context.close();
    },
  },

  4: {
    title: 'failover of the active manager while the UI is open: it keeps working after a reload',
    async run() {
      const failover = JSON.parse(env('CG_UI_FAILOVER'));
      const { context, page } = await session();
      const before = await activeManager();
      assert.ok(before, 'an active manager before the failover');
      await step(page, 'landing-page', async () => {
        await login(page, USERS.admin);
      });
      await step(page, 'failover', async () => {
        const window = [Date.now(), Infinity];
        failoverWindows.push(window);
        const out = await run(failover);
        log(`    ${failover.map((a) => path.basename(a)).join(' ')}: ${out.trim().split('\n').pop()}`);
        // The open page keeps polling the whole time; give it a refresh period.
        await page.waitForTimeout(6000);
        window[1] = Date.now();
        const after = await activeManager();
        assert.ok(after && after !== before, `the active manager changed (before ${before}, after ${after})`);
        log(`    active manager: ${new URL(before).port} -> ${new URL(after).port}`);
      });
      await step(page, 'reloaded-landing-page', async () => {
        await page.reload();
        await landingPage(page);
      });
      await step(page, 'pools-page-after-failover', async () => {
        await openPools(page);
        await createButton(page).waitFor({ state: 'visible' });
      });
      const mine = seen.filter((e) => e.scenario === '4');
      const [from, to] = failoverWindows[failoverWindows.length - 1];
      const during = mine.filter((e) => e.at >= from && e.at <= to);
      const statuses = {};
      for (const e of during) statuses[e.status || e.failure] = (statuses[e.status || e.failure] || 0) + 1;
      log(`    during the failover the open page got ${during.length} responses: ${JSON.stringify(statuses)}`);
      const shown = (await toasts(page)).filter((t) => t.at >= from && t.at <= to);
      for (const t of shown) log(`    the UI showed: ${t.text.replace(/\s+/g, ' ').trim()}`);
      // 304 Not Modified answers a reload's conditional request (scenario 5 checks it works);
      // every other 3xx would be a standby's redirect reaching the browser.
      const redirects = mine.filter((e) => e.status >= 300 && e.status < 400 && e.status !== 304);
      assert.deepEqual(redirects.map((e) => `${e.status} ${e.path} -> ${e.location}`), [], 'redirects seen by the browser');
      assert.deepEqual(violations.filter((v) => v.startsWith('4/')), [], 'requests, navigations or redirects naming a manager');
      const navs = [...new Set(navigations.filter((n) => n.scenario === '4').map((n) => n.url.replace(ORIGIN, '')))];
      log(`    ${mine.length} responses and navigations to ${navs.join(' ')}: all on ${ORIGIN}`);
      await step(page, 'logged-out', () => logoutThroughMenu(page));
      await context.close();
    },
  },

  5: {
    title: 'security headers, the cookie, the UI files\' caching headers',
    async run() {
      const { context, page } = await session();
      const security = (headers, what) => {
        assert.match(headers['strict-transport-security'] || '', /max-age=\d+/, `HSTS on ${what}`);
        assert.equal(headers['x-content-type-options'], 'nosniff', `nosniff on ${what}`);
        assert.match(headers['content-security-policy'] || '', /frame-ancestors 'self'/, `CSP on ${what}`);
      };
      let doc;
      await step(page, 'document-headers', async () => {
        doc = await openLoginPage(page);
        security(await doc.allHeaders(), 'GET /');
      });
      await step(page, 'api-headers-and-cookie', async () => {
        const [api] = await Promise.all([
          page.waitForResponse((r) => pathOf(r.url()).startsWith('/api/health/minimal') && r.status() === 200),
          (async () => {
            const r = await submitLogin(page, USERS.admin.name, USERS.admin.password);
            assert.equal(r.status(), 201);
            const setCookie = (await r.allHeaders())['set-cookie'] || '';
            log(`    Set-Cookie: ${setCookie.replace(/token=[^;]+/, 'token=...')}`);
            security(await r.allHeaders(), 'POST /api/auth');
          })(),
        ]);
        security(await api.allHeaders(), 'GET /api/health/minimal');
        await landingPage(page);
        const cookie = await tokenCookie(context);
        assert.ok(cookie, 'token cookie');
        assert.equal(cookie.httpOnly, true, 'HttpOnly');
        assert.equal(cookie.secure, true, 'Secure');
        assert.equal(cookie.sameSite, 'Strict', 'SameSite=Strict');
        assert.equal(cookie.path, '/', 'Path=/');
        const cdp = await context.newCDPSession(page);
        const { cookies } = await cdp.send('Network.getAllCookies');
        const raw = cookies.find((c) => c.name === 'token');
        assert.ok(raw && raw.httpOnly && raw.secure && raw.sameSite === 'Strict', `CDP cookie ${JSON.stringify(raw && { ...raw, value: '...' })}`);
        assert.ok(!(await page.evaluate(() => document.cookie)).includes('token='), 'the token is not readable by scripts');
        const stored = await page.evaluate(() => Object.keys(localStorage));
        log(`    cookie token: HttpOnly Secure SameSite=Strict Path=/; local storage keys: ${stored.join(', ')}`);
      });
      await step(page, 'caching-headers', async () => {
        const active = await activeManager();
        assert.ok(active, 'an active manager to compare with');
        const main = seen.find((e) => e.scenario === '5' && e.status === 200 && /^\/main\.[0-9a-f]+\.js$/.test(e.path));
        assert.ok(main, 'the UI loaded main.<hash>.js');
        const index = await page.goto(BASE + '/index.html');
        assert.equal(index.status(), 200);
        // Each file as the gateway keeps it (the first fetch of a file may be the one that
        // asks the dashboard), past the browser's own cache.
        const viaGateway = {};
        for (const file of ['/index.html', main.path]) {
          await pageFetch(page, file, { cache: 'no-store' });
          viaGateway[file] = (await pageFetch(page, file, { cache: 'no-store' })).headers;
        }
        // The gateway keeps the UI's files (README: Protecting the manager): the dashboard's
        // dates, its own validator, and a hashed name the browser may keep for good.
        const policy = {
          '/index.html': 'no-cache',
          [main.path]: 'public, max-age=31536000, immutable',
        };
        for (const [file, got] of Object.entries(viaGateway)) {
          const direct = await fetch(active + file, { redirect: 'manual' });
          assert.equal(direct.status, 200, `${file} from the dashboard`);
          for (const name of ['last-modified', 'expires']) {
            const want = direct.headers.get(name) ?? undefined;
            assert.equal(got[name], want, `${name} of ${file}: gateway vs dashboard`);
          }
          assert.equal(got['cache-control'], policy[file], `cache-control of ${file}`);
          assert.match(got.etag ?? '', /^"[0-9a-f]{16}(-gzip)?"$/, `etag of ${file}`);
          log(`    ${file}: cache-control ${got['cache-control']}, last-modified ${got['last-modified']}, etag ${got.etag} (dashboard: cache-control ${direct.headers.get('cache-control')})`);
          const byTag = await pageFetch(page, file, { cache: 'no-store', headers: { 'If-None-Match': got.etag } });
          assert.equal(byTag.status, 304, `revalidation of ${file} by its ETag`);
          // Revalidation, as a browser does with a cached copy.
          const lastModified = got['last-modified'];
          if (lastModified) {
            const again = await pageFetch(page, file, { cache: 'no-store', headers: { 'If-Modified-Since': lastModified } });
            const directAgain = await fetch(active + file, { headers: { 'If-Modified-Since': lastModified } });
            assert.equal(again.status, directAgain.status, `revalidation of ${file}: gateway vs dashboard`);
            log(`    ${file} revalidated with If-Modified-Since: ${again.status} (dashboard: ${directAgain.status})`);
          }
        }
      });
      await context.close();
    },
  },

  6: {
    title: 'the landing page through the gateway, for the README',
    async run() {
      const { context, page } = await session();
      await step(page, 'landing-page', async () => {
        await login(page, USERS.admin);
        await page.waitForLoadState('networkidle').catch(() => {});
        await page.waitForTimeout(1500);
      });
      const file = await shot(page, 'readme', path.join(OUT, 'landing-page.png'));
      const size = fs.statSync(file).size;
      assert.ok(size < 300 * 1024, `landing-page.png is ${size} bytes`);
      const readme = process.env.CG_UI_README_SCREENSHOT;
      if (readme) {
        fs.mkdirSync(path.dirname(readme), { recursive: true });
        fs.copyFileSync(file, readme);
        log(`    copied to ${readme} (${size} bytes)`);
      } else {
        log(`    ${file} (${size} bytes)`);
      }
      await logoutThroughMenu(page);
      await context.close();
    },
  },
};

// ---------------------------------------------------------------------------------------

async function main() {
  const started = Date.now();
  log(`gateway ${BASE}; managers ${MANAGERS.join(' ') || '(none given)'}; trusting ${trust}`);
  log(`screenshots in ${OUT}`);
  browser = await launch();
  log(`browser: Chromium ${browser.version()}`);
  const results = [];
  for (const id of SCENARIOS) {
    const scenario = scenarios[id];
    if (!scenario) throw new Error(`no scenario ${id}`);
    current = { scenario: id, step: 'start' };
    log(`scenario ${id}: ${scenario.title}`);
    const t = Date.now();
    try {
      await scenario.run();
      results.push([id, null]);
      log(`scenario ${id}: ok (${((Date.now() - t) / 1000).toFixed(1)} s)`);
    } catch (error) {
      results.push([id, error]);
      log(`scenario ${id}: FAILED at step "${current.step}" (${((Date.now() - t) / 1000).toFixed(1)} s)`);
      log(String(error.stack || error).split('\n').map((l) => '    ' + l).join('\n'));
    }
  }
  await browser.close();

  // Every refusal or failure the browser saw.
  const notable = seen
    .map((e) => ({ ...e, kind: classify(e) }))
    .filter((e) => e.kind !== 'ok');
  log(`requests refused or failed (${notable.length}):`);
  for (const e of notable) {
    const what = e.status === 0 ? e.failure : e.status;
    const body = e.body ? ` ${e.body.replace(/\s+/g, ' ')}` : '';
    log(`  [${e.kind}] s${e.scenario}/${e.step}: ${e.method} ${e.path} (Accept: ${e.accept || '-'}) -> ${what}${body}`);
  }
  // The API versions the UI asked for (they pass through the gateway as asked).
  const versions = new Map();
  for (const e of seen) {
    if (e.status === 0 || !/^\/(ui-)?api\//.test(e.path)) continue;
    const version = (e.accept || '').match(/vnd\.ceph\.api\.v(\d+\.\d+)/)?.[1] || 'none';
    const v = versions.get(version) || { count: 0, paths: new Set(), statuses: new Set() };
    v.count += 1;
    v.paths.add(`${e.method} ${e.path.replace(/\?.*/, '')}`);
    v.statuses.add(e.status);
    versions.set(version, v);
  }
  for (const [version, v] of versions) {
    const paths = [...v.paths];
    const shown = version === '1.0' ? `${paths.length} operations` : paths.join(', ');
    log(`API requests with version ${version}: ${v.count} (${shown}; statuses ${[...v.statuses].sort().join(' ')})`);
  }
  // The login page's public UI endpoints (served without a token).
  const open = new Map();
  for (const e of seen) {
    if (!/^\/ui-api\/(langs|login\/custom_banner|logging\/js-error)/.test(e.path)) continue;
    const key = `${e.method} ${e.path} -> ${e.status || e.failure}`;
    open.set(key, (open.get(key) || 0) + 1);
  }
  log(`public UI endpoints seen: ${[...open].map(([k, n]) => `${k} (x${n})`).join(', ') || 'none'}`);
  const unexpected = notable.filter((e) => e.kind === 'unexpected');
  // A refusal in a scenario makes that scenario fail.
  for (const e of unexpected) {
    const result = results.find(([id]) => id === e.scenario);
    if (result && !result[1]) result[1] = new Error(`unexpected: ${e.method} ${e.path} -> ${e.status || e.failure}`);
  }
  log(`browser never saw a manager's own address: ${violations.length === 0 ? 'yes' : 'NO'}`);
  for (const v of violations) log(`  ${v}`);
  const failed = results.filter(([, error]) => error);
  for (const [id, error] of failed) log(`failed: scenario ${id}: ${String(error.message || error).split('\n')[0]}`);
  const total = ((Date.now() - started) / 1000).toFixed(1);
  log(`ui scenarios: ${results.length - failed.length} ok, ${failed.length} failed, ${violations.length} address violations (${total} s)`);
  process.exitCode = failed.length === 0 && violations.length === 0 ? 0 : 1;
}

main().catch((error) => {
  log(`driver error: ${error.stack || error}`);
  process.exitCode = 2;
  if (browser) browser.close().catch(() => {});
});
