// SPDX-License-Identifier: MIT
//
// late.js — JavaScript whose hot functions are compiled only after the
// agent attached (tests/integration/test-jit.sh). Run with
// `node --perf-basic-prof --no-turbo-inlining late.js GO SECONDS`: prints its pid, waits for
// the file GO, then defines hotAlpha and hotBeta (their code, and their
// lines in /tmp/perf-PID.map, come only now) and runs them for SECONDS of
// CPU time, then exits. The agent must name them from the map that grew meanwhile,
// in the process's last bucket too, which it stores after the exit.
'use strict';
const fs = require('fs');
const [go, seconds] = [process.argv[2], Number(process.argv[3] || 3)];
console.log(process.pid);
while (!fs.existsSync(go)) {
  const t = Date.now();
  while (Date.now() - t < 5);
}
// eval: the functions do not exist (not even as bytecode) before now.
const hotAlpha = eval('(function hotAlpha(n) { let x = 0; for (let i = 0; i < n; i++) x = (x * 31 + i) | 0; return x; })');
const hotBeta = eval('(function hotBeta(n) { let x = 1.5; for (let i = 0; i < n; i++) x = Math.sqrt(x + i); return x; })');
// SECONDS of its own CPU time, not of the clock: on a busy machine it runs
// longer, and is sampled as often.
const cpu = () => { const u = process.cpuUsage(); return (u.user + u.system) / 1e6; };
const end = cpu() + seconds;
let sink = 0;
while (cpu() < end) sink += hotAlpha(20000) + hotBeta(10000);
console.log(sink > 0 ? 'done' : 'done.');
