// SPDX-License-Identifier: MIT
// Drives the collector's web page in Debian's chromium (headless, through
// playwright-core) for test-webui.sh: loads a view, acts on it like a user
// and prints what the page drew, as one JSON object, for the shell test to
// check against the collector's API. Screenshots go to OUTDIR.
//
//   node webui.js BASE_URL OUTDIR
'use strict';
const { chromium } = require('playwright-core');

const [base, outdir] = process.argv.slice(2);

async function ready(page) {
  await page.waitForFunction(() => document.body.dataset.ready, null, { timeout: 20000 });
}
async function open(page, query) {
  await page.evaluate(() => { delete document.body.dataset.ready; }).catch(() => {});
  await page.goto(`${base}/${query ? '?' + query : ''}`);
  await ready(page);
}
// The centre of the widest drawn box named name, in page coordinates.
async function boxOf(page, canvasId, name) {
  const drawn = await page.evaluate(() => window.fleetprof.drawn());
  const b = drawn.filter((d) => d.name === name).sort((x, y) => y.w - x.w)[0];
  if (!b) return null;
  const r = await page.locator('#' + canvasId).boundingBox();
  return { x: r.x + b.x + Math.min(b.w / 2, 40), y: r.y + b.y + 8 };
}

(async () => {
  const out = { errors: [] };
  const browser = await chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking',
           '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
  const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
  page.on('pageerror', (e) => out.errors.push(String(e)));
  page.on('console', (m) => { if (m.type() === 'error') out.errors.push(m.text()); });
  // Nothing may be fetched from anywhere but the collector.
  const foreign = [];
  page.on('request', (r) => { if (!r.url().startsWith(base) && !r.url().startsWith('data:')) foreign.push(r.url()); });

  // 1. The whole store of truth's profile.
  await open(page, 'process=truth');
  out.first = await page.evaluate(() => ({ ...document.body.dataset }));
  out.drawn = await page.evaluate(() => window.fleetprof.drawn().length);
  out.cost = await page.locator('#cost').textContent();
  out.top = await page.$$eval('#top tbody tr', (rows) => rows.slice(0, 6).map((r) =>
    [...r.cells].map((c) => c.textContent)));
  await page.screenshot({ path: `${outdir}/flamegraph.png`, fullPage: true });

  // 2. Hover: the tooltip names the frame with its self and total.
  const hov = await boxOf(page, 'flame', 'mid_two');
  await page.mouse.move(hov.x, hov.y);
  out.tooltip = await page.locator('#tip').textContent();

  // 3. Click to zoom into mid_two: it becomes the drawn root; the URL keeps it; reset undoes it.
  await page.mouse.click(hov.x, hov.y);
  out.zoom = await page.evaluate(() => ({ focus: window.fleetprof.focus(), url: location.search,
                                          top: [...document.querySelectorAll('#top tbody tr')].map((r) => r.cells[0].textContent) }));
  await page.screenshot({ path: `${outdir}/zoomed.png`, fullPage: true });
  await page.reload();
  await ready(page);
  out.zoomAfterReload = await page.evaluate(() => window.fleetprof.focus());
  await page.click('#reset');
  out.reset = await page.evaluate(() => window.fleetprof.focus());

  // 4. Search: the matching frames' share.
  await page.fill('#search', '^leaf_');
  await page.waitForFunction(() => document.getElementById('searchinfo').textContent.includes('matched'));
  out.search = await page.locator('#searchinfo').textContent();
  out.searchRows = await page.$$eval('#top tbody tr.hit', (rows) => rows.map((r) => r.cells[0].textContent));
  await page.screenshot({ path: `${outdir}/search.png`, fullPage: true });

  // 5. Sort the top table by total; click a row: the search follows it.
  await page.click('#top th[data-k="total"]');
  out.sortedByTotal = await page.$$eval('#top tbody tr', (rows) => rows.slice(0, 3).map((r) => r.cells[0].textContent));
  await page.click('#top tbody tr:has-text("leaf_sqrt")');
  out.rowSearch = await page.inputValue('#search');

  // 6. Callers and callees of leaf_hash (shift-click its row).
  await page.click('#top tbody tr:has-text("leaf_hash")', { modifiers: ['Shift'] });
  out.calls = await page.locator('#callfn').textContent();
  out.callsVisible = await page.locator('#callbox').isVisible();

  // 7. The time line: dragging over it selects a range.
  const tl = await page.locator('#timeline').boundingBox();
  await page.mouse.move(tl.x + 5, tl.y + 30);
  await page.mouse.down();
  await page.mouse.move(tl.x + tl.width - 5, tl.y + 30, { steps: 5 });
  await page.mouse.up();
  await ready(page);
  out.afterDrag = await page.evaluate(() => ({ url: location.search, total: document.body.dataset.total }));

  // 8. Diff: the second run against the first.
  await open(page, process.env.DIFF_QUERY);
  out.diff = await page.evaluate(() => ({ ...document.body.dataset }));
  const d = await boxOf(page, 'flame', 'leaf_hash');
  await page.mouse.move(d.x, d.y);
  out.diffTooltip = await page.locator('#tip').textContent();
  await page.screenshot({ path: `${outdir}/diff.png`, fullPage: true });

  // 9. Many stacks: time to the first drawn flame graph.
  const t0 = Date.now();
  await open(page, 'process=manystacks');
  out.many = { ms: Date.now() - t0, ...(await page.evaluate(() => ({ ...document.body.dataset }))),
               drawn: await page.evaluate(() => window.fleetprof.drawn().length) };
  await page.screenshot({ path: `${outdir}/manystacks.png` });

  // 9a. One thread's samples.
  await open(page, 'process=truth&thread=w-alpha');
  out.thread = await page.evaluate(() => ({ ...document.body.dataset }));

  // 9b. The series list: a search narrows it, a click selects that series.
  await open(page, '');
  await page.click('#serieslist summary');
  await page.fill('#seriessearch', 'manystacks');
  out.seriesRows = await page.$$eval('#series tbody tr', (rows) => rows.map((r) => [...r.cells].map((c) => c.textContent)));
  await page.evaluate(() => { delete document.body.dataset.ready; });
  await page.click('#series tbody tr');
  await ready(page);
  out.seriesPick = await page.evaluate(() => ({ url: location.search, total: document.body.dataset.total }));

  // 9c. Off-CPU time beside CPU time: the event selector offers both and wall; wall is drawn.
  await open(page, 'process=waits');
  out.events = await page.$$eval('select[name=event] option', (o) => o.map((x) => x.value));
  await page.evaluate(() => { delete document.body.dataset.ready; });
  await page.selectOption('select[name=event]', 'wall');
  await ready(page);
  out.wall = await page.evaluate(() => ({ url: location.search, ...document.body.dataset }));
  await page.screenshot({ path: `${outdir}/wall.png`, fullPage: true });

  // 10. A selection with nothing in it says so (the API's 404s are expected there).
  out.errorsBefore404 = out.errors.slice();
  await open(page, 'process=no-such-process');
  out.empty = await page.locator('#status').textContent();

  out.foreign = foreign;
  await browser.close();
  console.log(JSON.stringify(out));
})().catch((e) => { console.error(e); process.exit(1); });
