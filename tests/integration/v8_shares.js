// SPDX-License-Identifier: MIT
//
// A Node.js program with known shares and a known caller split, for the
// V8 tests (test-v8.sh): three leaf functions (alpha, beta, gamma) whose
// time the program measures itself, alpha called from two callers,
// outerA three times for each call of outerB's. Each of those functions'
// bodies is long enough that no tier inlines it into its caller, so that
// it keeps a frame of its own (inlined frames are not read yet). The program waits for the file
// argv[3] (when given) before it starts, so that its functions compile
// after the agent attached, and at the end writes its measurements as
// JSON to argv[4]: ns in each leaf, and in alpha by caller.
'use strict';
const fs = require('fs');
const secs = Number(process.argv[2] || 5);
const go = process.argv[3];
const out = process.argv[4];
const truth = { alpha: 0n, beta: 0n, gamma: 0n };
const callers = { 'outerA;alpha': 0n, 'outerB;alpha': 0n };

function alpha(n) {
  let s = 1;
  for (let i = 0; i < n; i++) {
    s = (s * 31 + i + 0) % 1000003;
    s = (s * 31 + i + 1) % 1000003;
    s = (s * 31 + i + 2) % 1000003;
    s = (s * 31 + i + 3) % 1000003;
    s = (s * 31 + i + 4) % 1000003;
    s = (s * 31 + i + 5) % 1000003;
    s = (s * 31 + i + 6) % 1000003;
    s = (s * 31 + i + 7) % 1000003;
    s = (s * 31 + i + 8) % 1000003;
    s = (s * 31 + i + 9) % 1000003;
    s = (s * 31 + i + 10) % 1000003;
    s = (s * 31 + i + 11) % 1000003;
    s = (s * 31 + i + 12) % 1000003;
    s = (s * 31 + i + 13) % 1000003;
    s = (s * 31 + i + 14) % 1000003;
    s = (s * 31 + i + 15) % 1000003;
    s = (s * 31 + i + 16) % 1000003;
    s = (s * 31 + i + 17) % 1000003;
    s = (s * 31 + i + 18) % 1000003;
    s = (s * 31 + i + 19) % 1000003;
    s = (s * 31 + i + 20) % 1000003;
    s = (s * 31 + i + 21) % 1000003;
    s = (s * 31 + i + 22) % 1000003;
    s = (s * 31 + i + 23) % 1000003;
    s = (s * 31 + i + 24) % 1000003;
    s = (s * 31 + i + 25) % 1000003;
    s = (s * 31 + i + 26) % 1000003;
    s = (s * 31 + i + 27) % 1000003;
    s = (s * 31 + i + 28) % 1000003;
    s = (s * 31 + i + 29) % 1000003;
    s = (s * 31 + i + 30) % 1000003;
    s = (s * 31 + i + 31) % 1000003;
    s = (s * 31 + i + 32) % 1000003;
    s = (s * 31 + i + 33) % 1000003;
    s = (s * 31 + i + 34) % 1000003;
    s = (s * 31 + i + 35) % 1000003;
    s = (s * 31 + i + 36) % 1000003;
    s = (s * 31 + i + 37) % 1000003;
    s = (s * 31 + i + 38) % 1000003;
    s = (s * 31 + i + 39) % 1000003;
  }
  return s;
}

function beta(n) {
  let t = 2;
  for (let i = 0; i < n; i++) {
    t = (t * 31 + i + 0) % 1000003;
    t = (t * 31 + i + 1) % 1000003;
    t = (t * 31 + i + 2) % 1000003;
    t = (t * 31 + i + 3) % 1000003;
    t = (t * 31 + i + 4) % 1000003;
    t = (t * 31 + i + 5) % 1000003;
    t = (t * 31 + i + 6) % 1000003;
    t = (t * 31 + i + 7) % 1000003;
    t = (t * 31 + i + 8) % 1000003;
    t = (t * 31 + i + 9) % 1000003;
    t = (t * 31 + i + 10) % 1000003;
    t = (t * 31 + i + 11) % 1000003;
    t = (t * 31 + i + 12) % 1000003;
    t = (t * 31 + i + 13) % 1000003;
    t = (t * 31 + i + 14) % 1000003;
    t = (t * 31 + i + 15) % 1000003;
    t = (t * 31 + i + 16) % 1000003;
    t = (t * 31 + i + 17) % 1000003;
    t = (t * 31 + i + 18) % 1000003;
    t = (t * 31 + i + 19) % 1000003;
    t = (t * 31 + i + 20) % 1000003;
    t = (t * 31 + i + 21) % 1000003;
    t = (t * 31 + i + 22) % 1000003;
    t = (t * 31 + i + 23) % 1000003;
    t = (t * 31 + i + 24) % 1000003;
    t = (t * 31 + i + 25) % 1000003;
    t = (t * 31 + i + 26) % 1000003;
    t = (t * 31 + i + 27) % 1000003;
    t = (t * 31 + i + 28) % 1000003;
    t = (t * 31 + i + 29) % 1000003;
    t = (t * 31 + i + 30) % 1000003;
    t = (t * 31 + i + 31) % 1000003;
    t = (t * 31 + i + 32) % 1000003;
    t = (t * 31 + i + 33) % 1000003;
    t = (t * 31 + i + 34) % 1000003;
    t = (t * 31 + i + 35) % 1000003;
    t = (t * 31 + i + 36) % 1000003;
    t = (t * 31 + i + 37) % 1000003;
    t = (t * 31 + i + 38) % 1000003;
    t = (t * 31 + i + 39) % 1000003;
  }
  return t;
}

const gamma = (n) => {
  let u = 3;
  for (let i = 0; i < n; i++) {
    u = (u * 31 + i + 0) % 1000003;
    u = (u * 31 + i + 1) % 1000003;
    u = (u * 31 + i + 2) % 1000003;
    u = (u * 31 + i + 3) % 1000003;
    u = (u * 31 + i + 4) % 1000003;
    u = (u * 31 + i + 5) % 1000003;
    u = (u * 31 + i + 6) % 1000003;
    u = (u * 31 + i + 7) % 1000003;
    u = (u * 31 + i + 8) % 1000003;
    u = (u * 31 + i + 9) % 1000003;
    u = (u * 31 + i + 10) % 1000003;
    u = (u * 31 + i + 11) % 1000003;
    u = (u * 31 + i + 12) % 1000003;
    u = (u * 31 + i + 13) % 1000003;
    u = (u * 31 + i + 14) % 1000003;
    u = (u * 31 + i + 15) % 1000003;
    u = (u * 31 + i + 16) % 1000003;
    u = (u * 31 + i + 17) % 1000003;
    u = (u * 31 + i + 18) % 1000003;
    u = (u * 31 + i + 19) % 1000003;
    u = (u * 31 + i + 20) % 1000003;
    u = (u * 31 + i + 21) % 1000003;
    u = (u * 31 + i + 22) % 1000003;
    u = (u * 31 + i + 23) % 1000003;
    u = (u * 31 + i + 24) % 1000003;
    u = (u * 31 + i + 25) % 1000003;
    u = (u * 31 + i + 26) % 1000003;
    u = (u * 31 + i + 27) % 1000003;
    u = (u * 31 + i + 28) % 1000003;
    u = (u * 31 + i + 29) % 1000003;
    u = (u * 31 + i + 30) % 1000003;
    u = (u * 31 + i + 31) % 1000003;
    u = (u * 31 + i + 32) % 1000003;
    u = (u * 31 + i + 33) % 1000003;
    u = (u * 31 + i + 34) % 1000003;
    u = (u * 31 + i + 35) % 1000003;
    u = (u * 31 + i + 36) % 1000003;
    u = (u * 31 + i + 37) % 1000003;
    u = (u * 31 + i + 38) % 1000003;
    u = (u * 31 + i + 39) % 1000003;
  }
  return u;
};

function timed(name, fn, n, caller) {
  const t0 = process.hrtime.bigint();
  const r = fn(n);
  const d = process.hrtime.bigint() - t0;
  truth[name] += d;
  if (caller) callers[caller + ';' + name] += d;
  return r;
}

function outerA() {
  let i = 0, v = 5;
    v = (v * 31 + i + 0) % 1000003;
    v = (v * 31 + i + 1) % 1000003;
    v = (v * 31 + i + 2) % 1000003;
    v = (v * 31 + i + 3) % 1000003;
    v = (v * 31 + i + 4) % 1000003;
    v = (v * 31 + i + 5) % 1000003;
    v = (v * 31 + i + 6) % 1000003;
    v = (v * 31 + i + 7) % 1000003;
    v = (v * 31 + i + 8) % 1000003;
    v = (v * 31 + i + 9) % 1000003;
    v = (v * 31 + i + 10) % 1000003;
    v = (v * 31 + i + 11) % 1000003;
    v = (v * 31 + i + 12) % 1000003;
    v = (v * 31 + i + 13) % 1000003;
    v = (v * 31 + i + 14) % 1000003;
    v = (v * 31 + i + 15) % 1000003;
    v = (v * 31 + i + 16) % 1000003;
    v = (v * 31 + i + 17) % 1000003;
    v = (v * 31 + i + 18) % 1000003;
    v = (v * 31 + i + 19) % 1000003;
    v = (v * 31 + i + 20) % 1000003;
    v = (v * 31 + i + 21) % 1000003;
    v = (v * 31 + i + 22) % 1000003;
    v = (v * 31 + i + 23) % 1000003;
    v = (v * 31 + i + 24) % 1000003;
    v = (v * 31 + i + 25) % 1000003;
    v = (v * 31 + i + 26) % 1000003;
    v = (v * 31 + i + 27) % 1000003;
    v = (v * 31 + i + 28) % 1000003;
    v = (v * 31 + i + 29) % 1000003;
    v = (v * 31 + i + 30) % 1000003;
    v = (v * 31 + i + 31) % 1000003;
    v = (v * 31 + i + 32) % 1000003;
    v = (v * 31 + i + 33) % 1000003;
    v = (v * 31 + i + 34) % 1000003;
    v = (v * 31 + i + 35) % 1000003;
    v = (v * 31 + i + 36) % 1000003;
    v = (v * 31 + i + 37) % 1000003;
    v = (v * 31 + i + 38) % 1000003;
    v = (v * 31 + i + 39) % 1000003;
  return timed('alpha', alpha, 3000, 'outerA') + timed('beta', beta, 1500) + (v & 1);
}

function outerB() {
  let i = 0, v = 7;
    v = (v * 31 + i + 0) % 1000003;
    v = (v * 31 + i + 1) % 1000003;
    v = (v * 31 + i + 2) % 1000003;
    v = (v * 31 + i + 3) % 1000003;
    v = (v * 31 + i + 4) % 1000003;
    v = (v * 31 + i + 5) % 1000003;
    v = (v * 31 + i + 6) % 1000003;
    v = (v * 31 + i + 7) % 1000003;
    v = (v * 31 + i + 8) % 1000003;
    v = (v * 31 + i + 9) % 1000003;
    v = (v * 31 + i + 10) % 1000003;
    v = (v * 31 + i + 11) % 1000003;
    v = (v * 31 + i + 12) % 1000003;
    v = (v * 31 + i + 13) % 1000003;
    v = (v * 31 + i + 14) % 1000003;
    v = (v * 31 + i + 15) % 1000003;
    v = (v * 31 + i + 16) % 1000003;
    v = (v * 31 + i + 17) % 1000003;
    v = (v * 31 + i + 18) % 1000003;
    v = (v * 31 + i + 19) % 1000003;
    v = (v * 31 + i + 20) % 1000003;
    v = (v * 31 + i + 21) % 1000003;
    v = (v * 31 + i + 22) % 1000003;
    v = (v * 31 + i + 23) % 1000003;
    v = (v * 31 + i + 24) % 1000003;
    v = (v * 31 + i + 25) % 1000003;
    v = (v * 31 + i + 26) % 1000003;
    v = (v * 31 + i + 27) % 1000003;
    v = (v * 31 + i + 28) % 1000003;
    v = (v * 31 + i + 29) % 1000003;
    v = (v * 31 + i + 30) % 1000003;
    v = (v * 31 + i + 31) % 1000003;
    v = (v * 31 + i + 32) % 1000003;
    v = (v * 31 + i + 33) % 1000003;
    v = (v * 31 + i + 34) % 1000003;
    v = (v * 31 + i + 35) % 1000003;
    v = (v * 31 + i + 36) % 1000003;
    v = (v * 31 + i + 37) % 1000003;
    v = (v * 31 + i + 38) % 1000003;
    v = (v * 31 + i + 39) % 1000003;
  return timed('alpha', alpha, 3000, 'outerB') + timed('gamma', gamma, 4500) + (v & 1);
}

function main() {
  const end = Date.now() + secs * 1000;
  let x = 0;
  while (Date.now() < end) {
    x += outerA();
    x += outerA();
    x += outerA();
    x += outerB();
  }
  return x;
}

function start() {
  const x = main();
  if (out) {
    const j = { result: x % 7, functions: {}, callers: {} };
    for (const k in truth) j.functions[k] = Number(truth[k]);
    for (const k in callers) j.callers[k] = Number(callers[k]);
    fs.writeFileSync(out + '.tmp', JSON.stringify(j));
    fs.renameSync(out + '.tmp', out);
  }
}

// While it waits it runs a little (2 ms in 5), so that the agent samples it
// and recognises its V8 before the measured part begins.
function waiting() {
  const t = Date.now();
  while (Date.now() - t < 2);
}
(function wait() {
  if (go && !fs.existsSync(go)) {
    waiting();
    return setTimeout(wait, 3);
  }
  start();
})();
