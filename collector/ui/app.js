// SPDX-License-Identifier: MIT
// The collector's web page: series, time line, flame graph, top table, diff,
// callers and callees. Everything it draws comes from the collector's JSON
// (/api/v1/series, /api/v1/timeline, /api/v1/flamegraph, /api/v1/diff); the
// state of the page lives in its URL, so a link shows the same view.
'use strict';

const $ = (id) => document.getElementById(id);
const form = $('sel');
const FILTERS = ['service', 'container', 'host', 'process', 'pid', 'thread', 'event', 'from', 'to'];
const ROW = 17; // pixels per flame graph row

// ---- state (mirrors location.search) ----
const state = {};
function readState() {
  const q = new URLSearchParams(location.search);
  for (const k of [...FILTERS, 'value', 'diff', 'base_from', 'base_to', 'base_host', 'search',
                   'focus', 'fn', 'sort']) state[k] = q.get(k) || '';
}
function writeState(push) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(state)) if (v) q.set(k, v);
  const url = location.pathname + (q.toString() ? '?' + q : '');
  if (push) history.pushState(null, '', url); else history.replaceState(null, '', url);
}
function filterQuery(extra) {
  const q = new URLSearchParams();
  for (const k of FILTERS) if (state[k]) q.set(k, state[k]);
  for (const [k, v] of Object.entries(extra || {})) if (v) q.set(k, v);
  return q.toString();
}

// ---- formatting ----
let unit = 'count', total = 0, baseTotal = 0;
function fmt(v) {
  if (!v) return '0';
  if (unit === 'nanoseconds') {
    if (v >= 1e9) return (v / 1e9).toFixed(2) + ' s';
    if (v >= 1e6) return (v / 1e6).toFixed(2) + ' ms';
    return (v / 1e3).toFixed(1) + ' µs';
  }
  return String(v);
}
const pct = (v, t) => (t ? (100 * v / t).toFixed(2) : '0.00') + '%';
const pct1 = (v, t) => (t ? (100 * v / t).toFixed(1) : '0.0') + '%';

// ---- fetching ----
async function getJSON(path) {
  const r = await fetch(path, { credentials: 'same-origin' });
  const body = await r.json().catch(() => ({ error: 'not JSON' }));
  if (r.status === 401) $('login').hidden = false; // --read-token-file: ask once
  if (!r.ok) throw new Error(body.error || r.statusText);
  return body;
}
// The read token goes into a cookie of this collector only, sent with every read.
$('login').addEventListener('submit', (e) => {
  e.preventDefault();
  const secure = location.protocol === 'https:' ? '; Secure' : '';
  document.cookie = `fleetprof_read=${encodeURIComponent($('token').value)}; Path=/; SameSite=Strict${secure}`;
  location.reload();
});

// ---- the selectors, filled from the series list ----
let series = [];
function fillSelectors() {
  const opts = { service: new Set(), container: new Set(), host: new Set(), process: new Set(),
                 event: new Set() };
  for (const s of series) {
    if (s.service) opts.service.add(s.service);
    if (s.container) opts.container.add(s.container);
    opts.host.add(s.host); opts.process.add(s.process); opts.event.add(s.event);
  }
  // Off-CPU time beside CPU time: the wall profile of both (each thread's whole time).
  if (opts.event.has('off-cpu')) opts.event.add('wall');
  for (const [k, set] of Object.entries(opts)) {
    const el = form.elements[k];
    el.replaceChildren(new Option('(any)', ''));
    for (const v of [...set].sort()) el.add(new Option(v, v));
    if (state[k] && !set.has(state[k])) el.add(new Option(state[k], state[k]));
    el.value = state[k];
  }
  form.elements.pid.value = state.pid;
  form.elements.thread.value = state.thread;
  form.elements.value.value = state.value || 'value';
  form.elements.diff.checked = !!state.diff;
  for (const k of ['base_from', 'base_to', 'base_host']) form.elements[k].value = state[k];
  $('basebox').classList.toggle('on', !!state.diff);
  $('search').value = state.search;
}

// ---- the series list, with search: a click selects one series ----
function drawSeries() {
  const words = $('seriessearch').value.toLowerCase().split(/\s+/).filter(Boolean);
  const body = $('series').tBodies[0];
  body.replaceChildren();
  let shown = 0;
  for (const s of series) {
    const text = `${s.host} ${s.service} ${s.container} ${s.process} ${s.pid} ${s.event}`.toLowerCase();
    if (!words.every((w) => text.includes(w))) continue;
    if (++shown > 500) break;
    const tr = body.insertRow();
    const dropped = Object.values(s.drops || {}).reduce((a, n) => a + n, 0);
    for (const v of [s.host, s.service, s.container, s.process, s.pid, s.event, s.last, s.samples,
                     dropped]) {
      tr.insertCell().textContent = String(v);
    }
    tr.addEventListener('click', () => {
      Object.assign(state, { host: s.host, service: s.service, container: s.container,
                             process: s.process,
                             pid: String(s.pid), event: s.event, focus: '' });
      writeState(true); load();
    });
  }
  $('serieslist').querySelector('summary').textContent =
    `series (${series.length}${words.length ? `, ${Math.min(shown, 500)} shown` : ''})`;
}
$('seriessearch').addEventListener('input', drawSeries);

// ---- the time line ----
let line = null;
const tl = $('timeline');
function drawTimeline() {
  const ctx = tl.getContext('2d');
  tl.width = tl.clientWidth * devicePixelRatio; tl.height = 70 * devicePixelRatio;
  ctx.scale(devicePixelRatio, devicePixelRatio);
  const w = tl.clientWidth, h = 70;
  ctx.clearRect(0, 0, w, h);
  if (!line || !line.points.length) return;
  const max = Math.max(1, ...line.points.map((p) => p[1]));
  const bw = w / line.points.length;
  ctx.fillStyle = '#4a7fb5';
  line.points.forEach((p, i) => {
    const bh = (h - 4) * p[1] / max;
    ctx.fillRect(i * bw, h - bh, Math.max(1, bw - 1), bh);
  });
  if (drag) {
    ctx.fillStyle = 'rgba(255,200,0,0.35)';
    ctx.fillRect(Math.min(drag.x0, drag.x1), 0, Math.abs(drag.x1 - drag.x0), h);
  }
  const d = (ns) => new Date(ns / 1e6).toISOString().replace('.000Z', 'Z');
  $('rangetext').textContent = `${d(line.from_ns)} … ${d(line.to_ns)}, ${line.event}, ` +
    `${line.points.reduce((a, p) => a + p[1], 0)} samples (drag to choose a range)`;
}
let drag = null;
tl.addEventListener('mousedown', (e) => { drag = { x0: e.offsetX, x1: e.offsetX }; });
tl.addEventListener('mousemove', (e) => { if (drag) { drag.x1 = e.offsetX; drawTimeline(); } });
window.addEventListener('mouseup', () => {
  if (!drag || !line) { drag = null; return; }
  const a = Math.min(drag.x0, drag.x1), b = Math.max(drag.x0, drag.x1);
  drag = null;
  if (b - a < 3) { drawTimeline(); return; }
  const span = line.to_ns - line.from_ns, w = tl.clientWidth;
  state.from = String(Math.floor((line.from_ns + span * a / w) / 1e9));
  state.to = String(Math.ceil((line.from_ns + span * b / w) / 1e9));
  writeState(true); load();
});

// ---- the flame graph ----
let tree = null;     // the JSON tree, with parent links added
let focus = null;    // the node drawn full width
const flame = $('flame'), tip = $('tip');
let boxes = [];      // drawn nodes: [x, y, w, node]

function link(n, parent) {
  n.parent = parent;
  for (const c of n.children) link(c, n);
}
function pathOf(n) { const p = []; for (; n && n.parent; n = n.parent) p.unshift(n.name); return p; }
function nodeAt(path) {
  let n = tree;
  for (const name of path) { n = n.children.find((c) => c.name === name); if (!n) return tree; }
  return n;
}
function depthOf(n) { let d = 0; for (const c of n.children) d = Math.max(d, depthOf(c)); return d + 1; }

let searchRe = null;
function hue(name) { let h = 0; for (let i = 0; i < name.length; i++) h = (h * 31 + name.charCodeAt(i)) >>> 0; return h; }
function color(n) {
  if (searchRe && searchRe.test(n.name)) return '#e040fb';
  if (state.diff) {
    // Red: a larger share of the comparison than of the baseline; blue: smaller.
    const a = total ? n.total / total : 0, b = baseTotal ? n.base_total / baseTotal : 0;
    const d = Math.max(-1, Math.min(1, (a - b) * 20));
    if (d > 0) return `rgb(255,${Math.round(235 - 175 * d)},${Math.round(235 - 175 * d)})`;
    return `rgb(${Math.round(235 + 175 * d)},${Math.round(235 + 175 * d)},255)`;
  }
  const h = hue(n.name);
  return `hsl(${10 + h % 40},${70 + h % 20}%,${55 + (h >> 8) % 15}%)`;
}

function drawFlame() {
  if (!tree) return;
  const ancestors = [];
  for (let n = focus.parent; n; n = n.parent) ancestors.unshift(n);
  const rows = ancestors.length + depthOf(focus);
  const w = flame.clientWidth;
  flame.width = w * devicePixelRatio; flame.height = rows * ROW * devicePixelRatio;
  flame.style.height = rows * ROW + 'px';
  const ctx = flame.getContext('2d');
  ctx.scale(devicePixelRatio, devicePixelRatio);
  ctx.font = '11px sans-serif';
  ctx.textBaseline = 'middle';
  boxes = [];
  const box = (n, x, y, bw, faded) => {
    ctx.fillStyle = faded ? '#ddd' : color(n);
    ctx.fillRect(x, y, Math.max(bw - 0.5, 0.5), ROW - 1);
    boxes.push([x, y, bw, n]);
    if (bw > 30) {
      ctx.fillStyle = '#000';
      let label = n.name;
      const room = Math.floor((bw - 6) / 6.2);
      if (label.length > room) label = label.slice(0, Math.max(room - 1, 0)) + '…';
      ctx.fillText(label, x + 3, y + ROW / 2);
    }
  };
  ancestors.forEach((a, i) => box(a, 0, i * ROW, w, true));
  // Iterative: stacks can be very deep.
  const scale = focus.total ? w / focus.total : 0;
  const todo = [[focus, 0, ancestors.length]];
  while (todo.length) {
    const [n, x, d] = todo.pop();
    const bw = n.total * scale;
    if (bw < 0.3) continue;
    box(n, x, d * ROW, bw, false);
    let cx = x;
    for (const c of n.children) { todo.push([c, cx, d + 1]); cx += c.total * scale; }
  }
}

function hit(x, y) {
  for (let i = boxes.length - 1; i >= 0; i--) {
    const [bx, by, bw, n] = boxes[i];
    if (x >= bx && x < bx + bw && y >= by && y < by + ROW) return n;
  }
  return null;
}
flame.addEventListener('mousemove', (e) => {
  const n = hit(e.offsetX, e.offsetY);
  if (!n) { tip.style.display = 'none'; return; }
  let t = `${n.name}\ntotal ${fmt(n.total)} (${pct(n.total, total)})\nself  ${fmt(n.self)} (${pct(n.self, total)})`;
  if (state.diff) {
    t += `\nbaseline total ${fmt(n.base_total)} (${pct(n.base_total, baseTotal)})` +
         `\nbaseline self  ${fmt(n.base_self)} (${pct(n.base_self, baseTotal)})`;
  }
  tip.textContent = t;
  tip.style.display = 'block';
  tip.style.left = Math.min(e.offsetX + 12, flame.clientWidth - 260) + 'px';
  tip.style.top = e.offsetY + 14 + 'px';
});
flame.addEventListener('mouseleave', () => { tip.style.display = 'none'; });
flame.addEventListener('click', (e) => {
  const n = hit(e.offsetX, e.offsetY);
  if (!n) return;
  if (e.shiftKey) { showCalls(n.name); return; }
  focus = n;
  state.focus = pathOf(n).join(';');
  writeState(true); drawFlame(); drawTop(); updateFocusInfo();
});
$('reset').addEventListener('click', () => {
  focus = tree; state.focus = ''; writeState(true); drawFlame(); drawTop(); updateFocusInfo();
});
function updateFocusInfo() {
  $('focusinfo').textContent = focus && focus !== tree ? `zoomed on ${focus.name} (${pct(focus.total, total)})` : '';
}

// ---- search ----
function applySearch() {
  searchRe = null;
  $('searchinfo').textContent = '';
  if (state.search) {
    try { searchRe = new RegExp(state.search); } catch (err) {
      $('searchinfo').textContent = 'not a regular expression'; return;
    }
    // The share of the matches: a node counts unless a matching ancestor counted it.
    let matched = 0;
    const walk = (n, inside) => {
      const m = !inside && n !== tree && searchRe.test(n.name);
      if (m) matched += n.total;
      for (const c of n.children) walk(c, inside || m);
    };
    if (tree) walk(tree, false);
    $('searchinfo').textContent = `matched: ${fmt(matched)} (${pct(matched, total)})`;
  }
}
let searchTimer = null;
$('search').addEventListener('input', () => {
  clearTimeout(searchTimer);
  searchTimer = setTimeout(() => {
    state.search = $('search').value; writeState(false); applySearch(); drawFlame(); drawTop();
  }, 150);
});

// ---- the top table, in step with the flame graph ----
function topRows() {
  const by = new Map();
  const walk = (n, seen) => {
    if (n !== tree) {
      let r = by.get(n.name);
      if (!r) by.set(n.name, (r = { name: n.name, self: 0, total: 0 }));
      r.self += n.self;
      if (!seen.has(n.name)) r.total += n.total; // recursion counts once
    }
    const s2 = n === tree ? seen : new Set(seen).add(n.name);
    for (const c of n.children) walk(c, s2);
  };
  walk(focus || tree, new Set());
  return [...by.values()];
}
function drawTop() {
  if (!tree) return;
  const k = state.sort || 'self';
  const rows = topRows().sort((a, b) => (k === 'name' ? a.name.localeCompare(b.name) : b[k] - a[k]));
  const body = $('top').tBodies[0];
  body.replaceChildren();
  for (const r of rows.slice(0, 300)) {
    const tr = body.insertRow();
    tr.insertCell().textContent = r.name;
    const s = tr.insertCell(); s.className = 'n'; s.textContent = `${fmt(r.self)} ${pct1(r.self, total)}`;
    const t = tr.insertCell(); t.className = 'n'; t.textContent = `${fmt(r.total)} ${pct1(r.total, total)}`;
    if (searchRe && searchRe.test(r.name)) tr.className = 'hit';
    tr.dataset.name = r.name;
  }
}
$('top').tHead.addEventListener('click', (e) => {
  const k = e.target.dataset.k;
  if (k) { state.sort = k; writeState(false); drawTop(); }
});
$('top').tBodies[0].addEventListener('click', (e) => {
  const tr = e.target.closest('tr');
  if (!tr) return;
  if (e.shiftKey) { showCalls(tr.dataset.name); return; }
  state.search = '^' + tr.dataset.name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&') + '$';
  $('search').value = state.search;
  writeState(false); applySearch(); drawFlame(); drawTop();
});

// ---- callers and callees of one function ----
function mergeInto(dst, n) {
  dst.total += n.total; dst.self += n.self;
  for (const c of n.children) {
    let d = dst.children.find((x) => x.name === c.name);
    if (!d) dst.children.push((d = { name: c.name, self: 0, total: 0, children: [] }));
    mergeInto(d, c);
  }
}
function showCalls(fn) {
  state.fn = fn; writeState(false);
  const callees = { name: fn, self: 0, total: 0, children: [] };
  const callers = { name: fn, self: 0, total: 0, children: [] };
  const walk = (n, inside) => {
    const m = n.name === fn && n !== tree;
    if (m && !inside) {
      mergeInto(callees, n);
      // The path into it, innermost caller first.
      let d = callers;
      callers.total += n.total;
      for (let p = n.parent; p && p !== tree; p = p.parent) {
        let c = d.children.find((x) => x.name === p.name);
        if (!c) d.children.push((c = { name: p.name, self: 0, total: 0, children: [] }));
        c.total += n.total;
        d = c;
      }
    }
    for (const c of n.children) walk(c, inside || m);
  };
  walk(tree, false);
  $('callfn').textContent = `${fn}: ${fmt(callees.total)} (${pct(callees.total, total)})`;
  $('callbox').hidden = false;
  drawSmall($('callers'), callers);
  drawSmall($('callees'), callees);
}
function drawSmall(cv, root) {
  const sortKids = (n) => { n.children.sort((a, b) => b.total - a.total); n.children.forEach(sortKids); };
  sortKids(root);
  const rows = depthOf(root), w = cv.clientWidth;
  cv.width = w * devicePixelRatio; cv.height = rows * ROW * devicePixelRatio;
  cv.style.height = rows * ROW + 'px';
  const ctx = cv.getContext('2d');
  ctx.scale(devicePixelRatio, devicePixelRatio);
  ctx.font = '11px sans-serif'; ctx.textBaseline = 'middle';
  const scale = root.total ? w / root.total : 0;
  const todo = [[root, 0, 0]];
  while (todo.length) {
    const [n, x, d] = todo.pop();
    const bw = n.total * scale;
    if (bw < 0.3) continue;
    ctx.fillStyle = color(n); ctx.fillRect(x, d * ROW, Math.max(bw - 0.5, 0.5), ROW - 1);
    if (bw > 30) { ctx.fillStyle = '#000'; ctx.fillText(n.name.slice(0, Math.floor(bw / 6.2)), x + 3, d * ROW + ROW / 2); }
    let cx = x;
    for (const c of n.children) { todo.push([c, cx, d + 1]); cx += c.total * scale; }
  }
}
$('callclose').addEventListener('click', () => { $('callbox').hidden = true; state.fn = ''; writeState(false); });

// ---- loading ----
async function load() {
  $('status').textContent = '';
  fillSelectors();
  const extra = { value: state.value === 'samples' ? 'samples' : '' };
  let path = '/api/v1/flamegraph?' + filterQuery(extra);
  if (state.diff) {
    path = '/api/v1/diff?' + filterQuery({ ...extra, base_from: state.base_from,
      base_to: state.base_to, base_host: state.base_host });
  }
  const pq = filterQuery();
  $('download').href = '/api/v1/profile' + (pq ? '?' + pq : '');
  $('gocmd').textContent = `go tool pprof -http=: '${location.origin}/api/v1/profile${pq ? '?' + pq : ''}'`;
  try {
    const t0 = performance.now();
    const [fg, tln] = await Promise.all([getJSON(path),
      getJSON('/api/v1/timeline?' + filterQuery()).catch(() => null)]);
    line = tln;
    drawTimeline();
    tree = fg.tree; unit = fg.unit; total = fg.total; baseTotal = fg.base_total || 0;
    link(tree, null);
    focus = state.focus ? nodeAt(state.focus.split(';')) : tree;
    applySearch(); drawFlame(); drawTop(); updateFocusInfo();
    const cost = (fg.profiler || []).map((c) =>
      `${c.host}: ${(100 * c.cpu_share).toFixed(3)}% of its CPU, ${(c.agent_rss_bytes / 1048576).toFixed(0)} MB`);
    $('cost').textContent = cost.length ? 'profiling cost ' + cost.join('; ') : '';
    const drops = Object.entries(fg.drops || {});
    $('drops').textContent = drops.length ? 'lost: ' + drops.map(([r, n]) => `${r} ${n}`).join(', ') : '';
    const names = fg.names || [];
    $('names').textContent = names.length ? `${names.length} build${names.length === 1 ? '' : 's'} named by the collector` : '';
    $('names').title = names.join('\n');
    document.body.dataset.total = String(total);
    document.body.dataset.baseTotal = String(baseTotal);
    document.body.dataset.nodes = String(fg.nodes);
    document.body.dataset.renderMs = String(Math.round(performance.now() - t0));
    if (state.fn) showCalls(state.fn);
  } catch (err) {
    tree = null; boxes = [];
    flame.getContext('2d').clearRect(0, 0, flame.width, flame.height);
    $('top').tBodies[0].replaceChildren();
    $('status').textContent = err.message;
    document.body.dataset.total = '0';
  }
  document.body.dataset.ready = String(Date.now());
}

form.addEventListener('change', (e) => {
  const el = e.target;
  if (el.name === 'diff') state.diff = el.checked ? '1' : '';
  else if (el.name) state[el.name] = el.value;
  state.focus = '';
  writeState(true); load();
});
for (const b of document.querySelectorAll('.presets button')) {
  b.addEventListener('click', () => {
    state.from = b.dataset.range; state.to = ''; state.focus = '';
    writeState(true); load();
  });
}
window.addEventListener('popstate', () => { readState(); load(); });
window.addEventListener('resize', () => { drawTimeline(); drawFlame(); });

// What is drawn, for the browser tests (tests/integration/webui.js).
window.fleetprof = {
  state,
  drawn: () => boxes.map(([x, y, w, n]) => ({ x, y, w, name: n.name, total: n.total })),
  focus: () => (focus ? { name: focus.name, total: focus.total } : null),
};

(async () => {
  readState();
  try { series = (await getJSON('/api/v1/series')).series; } catch (err) { series = []; }
  drawSeries();
  load();
})();
