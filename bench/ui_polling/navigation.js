#!/usr/bin/env node
// Navigation timing of the web UI's landing page (the login page a new visitor gets, with
// the whole UI bundle) in headless Chromium, each load in a fresh context (nothing cached
// by the browser), alternating between the given sites; one warm-up load each first.
// Prints JSON: per site, every load's duration (navigation start to the load event, ms),
// the bytes transferred, and the median.
//
//   CG_NAV_SITES   space-separated base URLs, e.g. "https://127.0.0.1:A https://127.0.0.1:B"
//   CG_NAV_LOADS   optional: loads per site (default 10)
//   NODE_PATH      a folder holding playwright-core (tests/ui/node_modules)
'use strict';

const { chromium } = require('playwright-core');

const SITES = (process.env.CG_NAV_SITES ?? '').split(/\s+/).filter(Boolean);
const LOADS = Number(process.env.CG_NAV_LOADS ?? '10');

async function load(browser, base) {
  const context = await browser.newContext({ ignoreHTTPSErrors: true });
  const page = await context.newPage();
  await page.goto(base + '/', { waitUntil: 'load' });
  await page.locator('#username').waitFor({ state: 'visible', timeout: 60_000 });
  const timing = await page.evaluate(() => {
    const nav = performance.getEntriesByType('navigation')[0];
    const resources = performance.getEntriesByType('resource');
    const bytes = [nav, ...resources].reduce((sum, e) => sum + (e.transferSize ?? 0), 0);
    return { ms: nav.loadEventEnd - nav.startTime, bytes };
  });
  await context.close();
  return timing;
}

function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

async function main() {
  const browser = await chromium.launch({
    executablePath: process.env.CG_NAV_CHROMIUM ?? '/usr/bin/chromium',
    args: ['--no-sandbox'],
  });
  const results = Object.fromEntries(SITES.map((s) => [s, []]));
  for (const site of SITES) await load(browser, site);
  for (let i = 0; i < LOADS; i += 1) {
    for (const site of SITES) results[site].push(await load(browser, site));
  }
  await browser.close();
  const summary = SITES.map((site) => ({
    site,
    median_ms: Math.round(median(results[site].map((r) => r.ms))),
    median_bytes: median(results[site].map((r) => r.bytes)),
    loads_ms: results[site].map((r) => Math.round(r.ms)),
  }));
  process.stdout.write(JSON.stringify(summary) + '\n');
}

main().catch((error) => {
  process.stderr.write(`${error.stack ?? error}\n`);
  process.exit(1);
});
