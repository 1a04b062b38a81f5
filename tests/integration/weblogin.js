// SPDX-License-Identifier: MIT
// The web page of a collector whose reads need a token (--read-token-file),
// in Debian's chromium through playwright-core: the page asks for the token
// once, keeps it in a cookie, and then draws. Prints what happened as JSON.
//   node weblogin.js BASE_URL TOKEN
'use strict';
const { chromium } = require('playwright-core');
const [base, token] = process.argv.slice(2);
(async () => {
  const browser = await chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking',
           '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
  const page = await browser.newPage();
  const out = {};
  await page.goto(base + '/');
  await page.waitForFunction(() => document.body.dataset.ready, null, { timeout: 20000 });
  out.askedBefore = await page.isVisible('#login');
  out.statusBefore = await page.textContent('#status');
  await page.fill('#token', token);
  await Promise.all([page.waitForNavigation(), page.click('#login button')]);
  await page.waitForFunction(() => document.body.dataset.ready, null, { timeout: 20000 });
  out.askedAfter = await page.isVisible('#login');
  out.total = await page.evaluate(() => document.body.dataset.total);
  out.cookie = (await page.context().cookies()).map((c) => `${c.name} ${c.sameSite} ${c.httpOnly}`);
  await browser.close();
  console.log(JSON.stringify(out));
})().catch((e) => { console.error(e); process.exit(1); });
