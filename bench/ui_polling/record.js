#!/usr/bin/env node
// Records which API calls the dashboard's own web UI makes while it sits open, and how
// often: headless Chromium (Debian's /usr/bin/chromium through playwright-core, the same
// pair tests/ui uses) logs in, then stays on each page for a while; every request the
// page sends is logged with its time. Measurement only (bench/), nothing is asserted.
//
//   CG_REC_URL        the dashboard (or the gateway), e.g. http://127.0.0.1:PORT
//   CG_REC_USER, CG_REC_PASSWORD   an administrator
//   CG_REC_PAGES      optional: "landing:120,pool:40" (page route : seconds; "landing" is
//                     where the login lands: #/dashboard on 16.2, #/overview on 20.2)
//   CG_REC_OUT        where to write the JSON of every request (and the table, .md)
//   NODE_PATH         a folder holding playwright-core (tests/ui/node_modules)
'use strict';

const fs = require('node:fs');
const { chromium } = require('playwright-core');

function env(name, fallback) {
  const value = process.env[name] ?? fallback;
  if (value === undefined || value === '') throw new Error(`${name} is not set`);
  return value;
}

const BASE = env('CG_REC_URL').replace(/\/+$/, '');
const OUT = env('CG_REC_OUT');
const PAGES = env('CG_REC_PAGES', 'landing:120,pool:40')
  .split(',')
  .map((p) => p.split(':'))
  .map(([route, seconds]) => ({ route, seconds: Number(seconds) }));

/** A path with its ids collapsed, so that polls of one operation count together. */
function template(path) {
  return path
    .replace(/\?.*$/, '')
    .replace(/\/[0-9]+(?=\/|$)/g, '/{id}');
}

function median(values) {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

/** Per page and API path: calls, calls per minute, median interval between calls. */
function table(requests) {
  const rows = new Map();
  for (const r of requests) {
    if (!/^\/(api|ui-api)\//.test(r.path) || r.page === 'login') continue;
    const key = `${r.page} ${r.method} ${template(r.path)}`;
    const row = rows.get(key) ?? { page: r.page, method: r.method, path: template(r.path), at: [] };
    row.at.push(r.at);
    rows.set(key, row);
  }
  const seconds = Object.fromEntries(PAGES.map((p) => [p.route, p.seconds]));
  const lines = [
    '| page | call | calls | per minute | median interval (s) |',
    '| --- | --- | ---: | ---: | ---: |',
  ];
  for (const row of [...rows.values()].sort((a, b) => a.page.localeCompare(b.page) || b.at.length - a.at.length)) {
    const gaps = row.at.slice(1).map((t, i) => (t - row.at[i]) / 1000);
    const interval = median(gaps);
    const perMinute = (row.at.length * 60) / seconds[row.page];
    lines.push(
      `| ${row.page} | ${row.method} ${row.path} | ${row.at.length} | ${perMinute.toFixed(1)} | ${interval === null ? 'once' : interval.toFixed(1)} |`,
    );
  }
  return lines.join('\n') + '\n';
}

async function main() {
  const browser = await chromium.launch({
    executablePath: process.env.CG_REC_CHROMIUM ?? '/usr/bin/chromium',
    args: ['--no-sandbox'],
  });
  const context = await browser.newContext({ ignoreHTTPSErrors: true, viewport: { width: 1400, height: 900 } });
  const page = await context.newPage();
  const started = Date.now();
  const requests = [];
  let current = 'login';
  context.on('request', (request) => {
    const url = new URL(request.url());
    requests.push({ page: current, at: Date.now() - started, method: request.method(), path: url.pathname + url.search });
  });
  await page.goto(BASE + '/');
  await page.locator('#username').waitFor({ state: 'visible', timeout: 60_000 });
  await page.locator('#username').fill(env('CG_REC_USER'));
  await page.locator('#password').fill(env('CG_REC_PASSWORD'));
  await page.locator('#password').press('Enter');
  await page.waitForURL(/#\/(dashboard|overview)/, { timeout: 60_000 });
  for (const { route, seconds } of PAGES) {
    current = route;
    if (route !== 'landing' && !page.url().includes(`#/${route}`)) await page.goto(`${BASE}/#/${route}`);
    process.stdout.write(`page ${route}: ${seconds} s\n`);
    await page.waitForTimeout(seconds * 1000);
  }
  await browser.close();
  fs.writeFileSync(OUT, JSON.stringify({ base: BASE, pages: PAGES, requests }, null, 1));
  const md = table(requests);
  fs.writeFileSync(OUT.replace(/\.json$/, '') + '.md', md);
  process.stdout.write(md);
}

main().catch((error) => {
  process.stderr.write(`${error.stack ?? error}\n`);
  process.exit(1);
});
