// SPDX-License-Identifier: MIT
// Time to the first flame graph in Debian's chromium (headless, through
// playwright-core), for tests/bench/webui-cost.sh: for each query, the
// time from navigation to the page's "ready" mark (series list, time line
// and flame graph fetched and drawn), best of three; prints JSON.
//   node webui-cost.js BASE_URL QUERY...
'use strict';
const { chromium } = require('playwright-core');
const [base, ...queries] = process.argv.slice(2);
(async () => {
  const browser = await chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking',
           '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
  const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
  const out = {};
  for (const q of queries) {
    let best = null;
    for (let i = 0; i < 3; i++) {
      const t0 = Date.now();
      await page.goto(`${base}/?${q}&r=${i}`.replace('&r=', '&_=')).catch(() => {});
      await page.waitForFunction(() => document.body.dataset.ready, null, { timeout: 120000 });
      const ms = Date.now() - t0;
      const d = await page.evaluate(() => ({ ...document.body.dataset }));
      if (!best || ms < best.ms) best = { ms, nodes: +d.nodes, renderMs: +d.renderMs };
    }
    out[q] = best;
  }
  await browser.close();
  console.log(JSON.stringify(out));
})().catch((e) => { console.error(e); process.exit(1); });
