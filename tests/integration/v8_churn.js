// SPDX-License-Identifier: MIT
//
// A Node.js program whose garbage collector moves and frees what its
// frames point at while it is sampled (tests/integration/test-v8.sh): a
// closure made anew for each call of hot() (a JSFunction allocated and
// dropped each time), a new function compiled from a string every 50
// rounds (a new SharedFunctionInfo and code, the old ones left to die),
// and garbage enough to run the young generation's collector many times a
// second and the old one now and then. Runs for argv[2] seconds.
'use strict';
const secs = Number(process.argv[2] || 4);

function makeAdder(k) {
  return function adder(x) {
    return (x * k) % 7;
  };
}

function hot(f, n) {
  let s = 0;
  for (let i = 0; i < n; i++) s += f(i);
  return s;
}

function garbage(n) {
  const a = [];
  for (let i = 0; i < n; i++) a.push({ i, s: 'x' + i });
  return a.length;
}

let made = 0;
function fresh() {
  made++;
  return new Function('n', 'let s = 0; for (let i = 0; i < n; i++) s = (s * 31 + i) % 1000003; return s; // ' + made);
}

function main() {
  const end = Date.now() + secs * 1000;
  let x = 0;
  let keep = [];
  for (let r = 0; Date.now() < end; r++) {
    x += hot(makeAdder(r % 5 + 1), 20000);
    x += garbage(3000);
    if (r % 50 === 0) {
      const g = fresh();
      x += g(200000);
      keep.push(g);
      if (keep.length > 20) keep = [];
    }
  }
  return x;
}

console.log(main() > 0);
