// SPDX-License-Identifier: MIT
// Opens one view of the collector's web page in Debian's chromium
// (headless, through playwright-core) and prints, as one JSON object,
// the boxes its flame graph drew ({x, y, w, name, total}) and any error
// the page met: what a person looking at the page would see.
//
//   node webview.js BASE_URL QUERY
'use strict';
const { chromium } = require('playwright-core');

const [base, query] = process.argv.slice(2);

(async () => {
  const out = { errors: [], drawn: [] };
  const browser = await chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking',
           '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
  try {
    const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
    page.on('pageerror', (e) => out.errors.push(String(e)));
    page.on('console', (m) => { if (m.type() === 'error') out.errors.push(m.text()); });
    await page.route('**/*', (r) => (r.request().url().startsWith(base) ? r.continue() : r.abort()));
    await page.goto(`${base}/?${query}`);
    await page.waitForFunction(() => document.body.dataset.ready, null, { timeout: 20000 });
    out.drawn = await page.evaluate(() => window.fleetprof.drawn());
  } catch (e) {
    out.errors.push(String(e));
  } finally {
    await browser.close();
  }
  console.log(JSON.stringify(out));
})();
