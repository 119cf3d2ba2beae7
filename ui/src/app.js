// tenbin's dashboard: hash-routed pages over tenbind's REST API.
//
// Job names, commands and logs are written by whoever submits a job, so
// nothing the API returns is ever parsed as markup: every node is made
// with createElement and every string goes in as text (el() below).  The
// page's Content-Security-Policy forbids inline script besides.
'use strict';

const TOKEN_KEY = 'tenbin.token';
const POLL_MS = 2000;
const LOG_MAX = 1 << 20; // characters of log kept on the page
const FINAL = ['succeeded', 'failed', 'cancelled', 'lost'];
const STATES = ['queued', 'placed', 'staging', 'submitted', 'running',
  'succeeded', 'failed', 'cancelled', 'lost'];

const $ = (id) => document.getElementById(id);

// el('td', {className: 'num'}, 'text', child, ...): an element whose
// strings are text nodes.  Attributes are set as properties, except
// data-* ones; on* handlers are functions, never strings.
function el(tag, props, ...kids) {
  const n = document.createElement(tag);
  for (const [k, v] of Object.entries(props || {})) {
    if (v === undefined || v === null) continue;
    if (k.startsWith('data-')) n.setAttribute(k, String(v));
    else n[k] = v;
  }
  for (const k of kids.flat()) {
    if (k === undefined || k === null || k === false) continue;
    n.append(k instanceof Node ? k : document.createTextNode(String(k)));
  }
  return n;
}

function table(head, rows, id) {
  return el('table', {id},
    el('thead', {}, el('tr', {}, head.map((h) => el('th', {}, h)))),
    el('tbody', {}, rows.map((r) => el('tr', {}, r.map((c) =>
      c instanceof Node && c.tagName === 'TD' ? c : el('td', {}, c))))));
}
const num = (v) => el('td', {className: 'num'}, v);
const stateTag = (s) => el('span', {className: 'state state-' + s}, s || '');

// Exact money: integer micro-dollars as dollars with six decimals, the way
// the API's CSV and /metrics write them.
function dollars6(micro) {
  const neg = micro < 0, m = Math.abs(micro);
  return (neg ? '-' : '') + '$' + Math.floor(m / 1e6) + '.' +
    String(m % 1e6).padStart(6, '0');
}
const dollars = (micro) => micro === undefined || micro === null || micro < 0
  ? '-' : '$' + (micro / 1e6).toFixed(2);
// "in 30m" or "3s ago"; when() adds the time itself.
function ago(iso) {
  if (!iso) return '';
  const s = Math.round((new Date(iso) - Date.now()) / 1000), a = Math.abs(s);
  const rel = a < 90 ? a + 's' : a < 5400 ? Math.round(a / 60) + 'm'
    : a < 172800 ? Math.round(a / 3600) + 'h' : Math.round(a / 86400) + 'd';
  return s > 0 ? 'in ' + rel : rel + ' ago';
}
const when = (iso) => iso
  ? iso.replace('T', ' ').replace(/\.\d+Z$/, 'Z') + ' (' + ago(iso) + ')' : '';
function bytes(n) {
  if (n === undefined || n === null) return '';
  const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(1) : n) + ' ' + u[i];
}
const ms = (v) => v === undefined || v === null || v < 0 ? '-'
  : v < 60000 ? Math.round(v / 1000) + 's'
    : Math.floor(v / 3600000) + 'h' + String(Math.round(v / 60000) % 60).padStart(2, '0') + 'm';

// ---- talking to tenbind ----

class ApiError extends Error {
  constructor(status, message) { super(message); this.status = status; }
}

function showMsg(text, info) {
  const m = $('msg');
  m.textContent = text || '';
  m.className = info ? 'info' : '';
  m.hidden = !text;
}

function showLogin(why) {
  $('login-why').textContent = why;
  $('login').hidden = false;
  $('token').focus();
}

// fetch path with the token; the Response on 2xx, else an ApiError with
// the API's own message (401 also brings the token form back).
async function call(path, opts) {
  const o = Object.assign({headers: {}}, opts || {});
  const tok = sessionStorage.getItem(TOKEN_KEY);
  if (tok) o.headers.Authorization = 'Bearer ' + tok;
  const r = await fetch(path, o);
  if (r.ok) return r;
  let msg = r.status + ' ' + r.statusText;
  try {
    const j = await r.json();
    if (j && j.error) msg = j.error.code + ': ' + j.error.message;
  } catch (e) { /* not JSON: keep the status line */ }
  if (r.status === 401) showLogin(tok ? 'tenbind refused the token (' + msg + ').'
    : 'tenbind asks for a token.');
  throw new ApiError(r.status, msg);
}
const get = async (path) => (await call(path)).json();
const q = (params) => {
  const s = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v) s.set(k, v);
  const t = s.toString();
  return t ? '?' + t : '';
};

// ---- routing: one view at a time; its pollers stop when it changes ----

let gen = 0;
const live = () => { const g = gen; return () => g === gen; };
function every(ms_, fn) {
  const alive = live();
  const tick = async () => {
    if (!alive()) return;
    try { await fn(); } catch (e) { if (alive()) fail(e); }
    if (alive()) setTimeout(tick, ms_);
  };
  return tick();
}
function fail(e) {
  if (e instanceof ApiError && e.status === 401) return;
  showMsg(e.message || String(e));
}

const routes = [
  [/^#\/jobs\/(\d+)$/, (m) => jobPage(Number(m[1]))],
  [/^#\/jobs$/, () => jobsPage()],
  [/^#\/sites$/, () => sitesPage()],
  [/^#\/datasets$/, () => datasetsPage()],
  [/^#\/cost$/, () => costPage()],
];

async function render() {
  gen++;
  const h = location.hash || '#/jobs';
  showMsg('');
  $('login').hidden = true;
  for (const a of document.querySelectorAll('nav a'))
    a.classList.toggle('current', h.startsWith(a.getAttribute('href')));
  const main = $('main');
  main.replaceChildren();
  for (const [re, page] of routes) {
    const m = re.exec(h);
    if (m) {
      try { await page(m); } catch (e) { fail(e); }
      return;
    }
  }
  location.hash = '#/jobs';
}

function view(title, ...kids) {
  $('main').replaceChildren(el('h1', {id: 'title'}, title), ...kids);
}

// ---- Jobs ----

async function jobsPage() {
  const f = {state: el('select', {id: 'f-state'}, el('option', {value: ''}, 'any'),
    STATES.map((s) => el('option', {value: s}, s))),
  project: el('input', {id: 'f-project', size: 12}),
  site: el('input', {id: 'f-site', size: 12})};
  const saved = JSON.parse(sessionStorage.getItem('tenbin.filters') || '{}');
  for (const k in f) f[k].value = saved[k] || '';
  const body = el('div', {id: 'jobs'});
  const stamp = el('span', {className: 'hint', id: 'jobs-updated'});
  let refresh;
  for (const k in f) f[k].onchange = () => {
    sessionStorage.setItem('tenbin.filters', JSON.stringify(
      {state: f.state.value, project: f.project.value, site: f.site.value}));
    refresh();
  };
  view('Jobs', el('div', {className: 'filters'},
    el('label', {}, 'state', f.state), el('label', {}, 'project', f.project),
    el('label', {}, 'site', f.site), stamp), body);
  refresh = async () => {
    const r = await get('/v1/jobs' + q({state: f.state.value,
      project: f.project.value.trim(), site: f.site.value.trim(), limit: 200}));
    body.replaceChildren(table(
      ['id', 'name', 'project', 'state', 'site', 'GPUs', 'created',
        'predicted start', 'reason'],
      r.jobs.map((j) => [
        el('a', {href: '#/jobs/' + Number(j.id), className: 'job-link'}, String(j.id)),
        el('td', {className: 'job-name'}, j.name || ''), j.project || '',
        stateTag(j.state), j.site || '',
        num((j.gpus || 0) + (j.gpu_type ? ' ' + j.gpu_type : '')), ago(j.created_at),
        j.state === 'queued' ? ago(j.predicted_start) || 'unknown' : '',
        j.reason || '']), 'jobs-table'));
    stamp.textContent = 'updated ' + new Date().toLocaleTimeString() +
      ' (every 2 s)';
  };
  await every(POLL_MS, refresh);
}

// ---- one job ----

async function jobPage(id) {
  const alive = live();
  const head = el('div', {id: 'job-head'});
  const actions = el('div', {className: 'actions'},
    el('button', {id: 'cancel', type: 'button', onclick: () => act('cancel')}, 'Cancel'),
    el('button', {id: 'release', type: 'button', onclick: () => act('release')}, 'Release'),
    el('span', {id: 'action-result'}));
  const events = el('div', {id: 'events'});
  const placement = el('div', {id: 'placement'});
  const log = el('pre', {id: 'log'});
  const spec = el('pre', {className: 'spec', id: 'spec'});
  view('Job ' + id, head, actions, el('h2', {}, 'Log'), log,
    el('h2', {}, 'Events'), events, el('h2', {}, 'Placement'), placement,
    el('h2', {}, 'Spec'), spec);

  async function act(what) {
    const out = $('action-result');
    out.textContent = '';
    try {
      await call('/v1/jobs/' + id + '/' + what, {method: 'POST'});
      out.textContent = what === 'cancel' ? 'cancel requested' : 'released';
      await refresh();
    } catch (e) {
      out.textContent = e.message;
      if (!(e instanceof ApiError)) throw e;
    }
  }

  let state = '';
  async function refresh() {
    const j = await get('/v1/jobs/' + id);
    state = j.state;
    head.replaceChildren(table([], [
      ['name', el('td', {id: 'job-name'}, j.name || '')],
      ['project', j.project || ''], ['state', el('td', {id: 'job-state'}, stateTag(j.state))],
      ['site', j.site || ''], ['GPUs', (j.gpus || 0) + (j.gpu_type ? ' ' + j.gpu_type : '')],
      ['reason', j.reason || ''], ['created', when(j.created_at)],
      ['started', when(j.started_at)], ['ended', when(j.ended_at)],
      ['predicted start', when(j.predicted_start)],
      ['exit', j.exit_code !== null && j.exit_code !== undefined ? String(j.exit_code)
        : j.signal ? 'signal ' + j.signal : ''],
      ['cost', j.cost ? dollars(j.cost.total_micro ?? j.cost.billed_micro) : '']]));
    spec.textContent = JSON.stringify(j.spec, null, 2);
    const ev = await get('/v1/jobs/' + id + '/events');
    events.replaceChildren(table(['at', 'from', 'to', 'detail'],
      ev.events.map((e) => [when(e.at), e.from || '', stateTag(e.to), e.detail || ''])));
    try {
      placement.replaceChildren(placementView(await get('/v1/jobs/' + id + '/placement')));
    } catch (e) {
      if (!(e instanceof ApiError) || e.status !== 404) throw e;
      placement.replaceChildren(el('p', {className: 'hint'}, 'no placement decision yet'));
    }
  }

  // The log, followed: fetch from the next offset until the job is final
  // and the whole file is read (GET /v1/jobs/{id}/log's headers say both).
  let offset = 0;
  const dec = new TextDecoder('utf-8');
  async function follow() {
    for (;;) {
      if (!alive()) return;
      const r = await call('/v1/jobs/' + id + '/log?offset=' + offset);
      const chunk = dec.decode(await r.arrayBuffer(), {stream: true});
      const next = Number(r.headers.get('X-Log-Next-Offset') || offset);
      const size = Number(r.headers.get('X-Log-Size') || 0);
      const st = r.headers.get('X-Job-State') || state;
      if (chunk) {
        let t = log.textContent + chunk;
        if (t.length > LOG_MAX) t = t.slice(t.length - LOG_MAX);
        const atEnd = log.scrollTop + log.clientHeight >= log.scrollHeight - 4;
        log.textContent = t;
        if (atEnd) log.scrollTop = log.scrollHeight;
      }
      offset = next;
      if (FINAL.includes(st) && next >= size) {
        log.dataset.done = '1';
        return;
      }
      if (next >= size) await new Promise((res) => setTimeout(res, 1000));
    }
  }

  await refresh();
  follow().catch((e) => {
    if (alive()) log.append(document.createTextNode('\n[log: ' + e.message + ']'));
  });
  await every(POLL_MS, async () => { if (!FINAL.includes(state)) await refresh(); });
}

// Every candidate's terms, as columns: whichever keys the policy gave.
function placementView(p) {
  const keys = [];
  for (const c of p.candidates || [])
    for (const k of Object.keys(c)) if (!keys.includes(k)) keys.push(k);
  const cell = (k, v) => {
    if (v === undefined || v === null) return '';
    if (k.endsWith('_micro')) return num(dollars(v));
    if (k.endsWith('_ms')) return num(ms(v));
    if (k === 'start') return when(v);
    if (typeof v === 'object') return JSON.stringify(v);
    return typeof v === 'number' ? num(String(v)) : String(v);
  };
  return el('div', {},
    el('p', {}, 'verdict ', stateTag(p.verdict), p.site ? ' at ' + p.site : '',
      p.predicted_start ? '; predicted start ' + when(p.predicted_start) : '',
      ' (decided ' + when(p.at) + ')'),
    el('p', {}, p.reason || ''),
    table(keys, (p.candidates || []).map((c) => keys.map((k) => cell(k, c[k]))),
      'candidates'));
}

// ---- Sites ----

async function sitesPage() {
  const body = el('div', {id: 'sites'});
  view('Sites', body);
  const list = await get('/v1/sites');
  const cards = [];
  for (const s of list.sites) {
    const v = await get('/v1/sites/' + encodeURIComponent(s.name));
    cards.push(await siteCard(v));
  }
  body.replaceChildren(...cards);
}

async function siteCard(s) {
  const card = el('div', {className: 'card', 'data-site': s.name},
    el('h2', {}, s.name + ' (' + s.kind + ')'),
    el('p', {}, s.reachable ? 'reachable' : 'unreachable', s.detail ? ': ' + s.detail : '',
      '; ' + s.nodes + ' nodes, ' + s.nodes_down + ' down; pricing ' +
      (s.cost ? s.cost.pricing : 'unpriced')),
    table(['GPU type', 'total', 'in use', 'idle', 'down', 'pending', 'can grow'],
      s.gpus.map((g) => [g.type, num(g.total), num(g.in_use), num(g.idle ?? ''),
        num(g.down ?? ''), num(g.pending ?? ''), num(g.grow ?? '')])),
    el('p', {}, 'jobs: ' + Object.entries(s.jobs).filter(([, n]) => n)
      .map(([k, n]) => k + ' ' + n).join(', ')));
  if (s.nodes && Array.isArray(s.nodes)) {
    const by = {};
    for (const n of s.nodes) by[n.state] = (by[n.state] || 0) + 1;
    card.append(el('h3', {}, 'Nodes by state'),
      table(Object.keys(by), [Object.values(by).map(num)]));
  }
  if (s.autoscaler) {
    const a = s.autoscaler;
    card.append(el('p', {}, 'autoscaler: ' + (a.action || '') + ' (' + (a.reason || '') +
      ') wanted ' + a.nodes.wanted + ', live ' + a.nodes.live + ', spend ' +
      dollars(a.spend_micro_per_hour) + '/h'));
    const log = await get('/v1/autoscaler/log' + q({site: s.name, limit: 10}));
    card.append(el('h3', {}, 'Last autoscaler decisions'),
      table(['at', 'action', 'reason', 'live', 'wanted', 'demand GPUs', 'detail'],
        log.decisions.map((d) => [when(d.at), d.action, d.reason, num(d.live_nodes ?? ''),
          num(d.wanted_nodes ?? ''), num(d.demand_gpus ?? ''), d.detail])));
  }
  if (s.baseline) {
    const b = s.baseline;
    card.append(el('h3', {}, 'Baseline'), el('p', {}, stateTag(b.status),
      ' against ' + b.reference, b.reason ? ': ' + b.reason : '',
      b.probed ? '; probed ' + when(b.probed) : ''));
    try {
      const d = await get('/v1/sites/' + encodeURIComponent(s.name) + '/baseline');
      const rows = ((d.diff && d.diff.fingerprint) || []).filter((r) => r.differs)
        .map((r) => [r.key, String(r.reference ?? ''), String(r.site ?? ''), r.rule || '']);
      card.append(
        table(['rule', 'finding'], (d.findings || []).map((x) => [x.rule, x.message])),
        rows.length ? table(['key', 'reference', 'this site', 'rule'], rows) : '');
    } catch (e) { card.append(el('p', {className: 'hint'}, e.message)); }
  }
  return card;
}

// ---- Datasets ----

async function datasetsPage() {
  const body = el('div', {id: 'datasets'});
  view('Datasets', body);
  const list = await get('/v1/datasets');
  if (!list.datasets.length) body.append(el('p', {className: 'hint'}, 'no datasets'));
  for (const ds of list.datasets) {
    const d = await get('/v1/datasets/' + encodeURIComponent(ds.name));
    const short = (v) => v ? v.slice(0, 12) : '';
    body.append(el('div', {className: 'card'},
      el('h2', {}, d.name), el('p', {}, 'project ' + (d.project || '(admins)') +
        '; source ' + d.source_site + ':' + d.path),
      el('h3', {}, 'Versions'),
      table(['version', 'files', 'size', 'published'], (d.versions || []).map((v) =>
        [short(v.version), num(v.files), num(bytes(v.bytes)), when(v.published)])),
      el('h3', {}, 'Replicas'),
      table(['site', 'version', 'state', 'progress', 'moved', 'saved', 'error'],
        (d.replicas || []).map((r) => [r.site, short(r.version), stateTag(r.state),
          el('td', {}, el('progress', {max: r.bytes_total || 1, value: r.bytes_done}),
            ' ' + bytes(r.bytes_done) + ' / ' + bytes(r.bytes_total)),
          num(bytes(r.bytes_wire)), num(bytes(r.bytes_saved)), r.error || '']))));
  }
}

// ---- Cost ----

const KINDS = [['billed_micro', 'rented (billed)'], ['sunk_micro', 'owned sunk'],
  ['marginal_micro', 'owned marginal'], ['egress_micro', 'egress']];
const lineCost = (l) => l.billed_micro + l.sunk_micro + l.marginal_micro + l.egress_micro;
const COLORS = ['#3b6fd8', '#d8873b', '#3bb07a', '#a33bd8', '#d83b5a'];

// A uPlot chart; y values are micro-dollars, drawn as dollars.
function chart(title, id, x, series, opts) {
  const box = el('div', {className: 'chart', id});
  box.append(el('h3', {}, title));
  if (typeof uPlot === 'undefined') {
    box.append(el('p', {}, 'the chart library did not load'));
    return box;
  }
  const o = opts || {};
  // Categories sit at 0..n-1 with their names below; days are padded by
  // a day each side so that one day still shows.
  const xr = o.labels ? () => [-0.6, o.labels.length - 0.4]
    : (u, a, b) => [a - 86400, b + 86400];
  new uPlot({
    width: o.width || 460, height: 220,
    scales: {x: {time: !!o.time, range: xr},
      y: {range: (u, a, b) => [0, b > 0 ? b * 1.1 : 1]}},
    axes: [
      o.labels ? {splits: () => o.labels.map((_, i) => i),
        values: (u, splits) => splits.map((v) => o.labels[v] ?? '')} : {},
      {values: (u, splits) => splits.map((v) => '$' + (v / 1e6).toFixed(v < 1e7 ? 2 : 0)), size: 60}],
    series: [{label: o.xlabel || 'day',
      value: o.labels ? (u, v) => o.labels[v] ?? '' : undefined}].concat(series.map((s, i) => ({
      label: s.label, stroke: COLORS[i % COLORS.length],
      fill: o.bars ? COLORS[i % COLORS.length] + '99' : undefined,
      width: 2, value: (u, v) => v === null ? '' : dollars(v),
      points: {show: true},
      paths: o.bars ? uPlot.paths.bars({size: [0.7, 80], align: 0}) : undefined}))),
  }, [x].concat(series.map((s) => s.data)), box);
  return box;
}

function sum(lines, key, what) {
  const m = new Map();
  for (const l of lines) {
    const k = l[key] === '' ? '(egress)' : l[key];
    m.set(k, (m.get(k) || 0) + what(l));
  }
  return m;
}

function categoryChart(title, id, lines, key) {
  const m = sum(lines, key, lineCost);
  const labels = [...m.keys()];
  return chart(title, id, labels.map((_, i) => i),
    [{label: 'cost', data: labels.map((k) => m.get(k))}], {labels, bars: true, xlabel: key});
}

const dayTs = (d) => Date.parse(d + 'T00:00:00Z') / 1000;

async function costPage() {
  const body = el('div', {id: 'cost'});
  view('Cost', body);
  // The same request `tenbin report --by project,site,gpu-type,day` makes:
  // its default range is this month so far.
  const r = await get('/v1/reports/usage' + q({by: 'project,site,gpu_type,day'}));
  const lines = r.lines;
  const days = [...new Set(lines.map((l) => l.day))].sort();
  // Spend by day, one series per kind: the totals below are these series'
  // sums, so the numbers shown are the numbers drawn.
  const perKind = KINDS.map(([k, label]) => ({label, key: k,
    data: days.map((d) => lines.filter((l) => l.day === d).reduce((a, l) => a + l[k], 0))}));
  const total = (k) => perKind.find((s) => s.key === k).data.reduce((a, v) => a + v, 0);
  const hours = lines.reduce((a, l) => a + l.gpu_ms, 0) / 3.6e6;
  body.append(el('p', {}, 'From ' + r.from + ' to ' + r.to +
      ', the same numbers as ', el('code', {}, 'tenbin report'), ' (all amounts in USD).'),
  table(['GPU-hours', 'jobs', 'billed', 'sunk', 'marginal', 'egress', 'total'], [[
    el('td', {id: 'total-gpu-hours', className: 'num'}, hours.toFixed(1)),
    el('td', {id: 'total-jobs', className: 'num'}, String(r.total.jobs)),
    ...['billed_micro', 'sunk_micro', 'marginal_micro', 'egress_micro'].map((k) =>
      el('td', {id: 'total-' + k.replace('_micro', ''), className: 'num'}, dollars6(total(k)))),
    el('td', {id: 'total-all', className: 'num'},
      dollars6(KINDS.reduce((a, [k]) => a + total(k), 0)))]], 'cost-totals'));
  if (!lines.length) body.append(el('p', {className: 'hint'}, 'nothing in the ledger this month yet'));
  body.append(el('div', {className: 'charts'},
    chart('Spend by day: owned sunk vs marginal vs rented', 'chart-day',
      days.map((_, i) => i), perKind, {labels: days.map((d) => d.slice(5)), width: 640}),
    categoryChart('By project', 'chart-project', lines, 'project'),
    categoryChart('By site', 'chart-site', lines, 'site'),
    categoryChart('By GPU type', 'chart-gpu', lines, 'gpu_type')));

  const b = await get('/v1/budgets');
  body.append(el('h2', {}, 'Budgets'));
  if (!b.budgets.length) body.append(el('p', {className: 'hint'}, 'no budgets set'));
  for (const bud of b.budgets) body.append(burnDown(bud, lines));
}

// A budget's burn-down: spend so far this month, counted as the budget
// counts it, the month's limit, and the month-end forecast.
function burnDown(bud, lines) {
  const [y, m] = bud.month.split('-').map(Number);
  const ndays = new Date(Date.UTC(y, m, 0)).getUTCDate();
  const counted = (l) => l.billed_micro + l.egress_micro + (bud.counts === 'all' ? l.sunk_micro : 0);
  const byDay = sum(lines.filter((l) => l.project === bud.project && l.day.startsWith(bud.month)),
    'day', counted);
  const today = new Date().getUTCDate();
  const xs = [], spent = [], limit = [], pace = [];
  const forecast = bud.forecast_micro;
  let acc = 0;
  for (let d = 1; d <= ndays; d++) {
    const key = bud.month + '-' + String(d).padStart(2, '0');
    acc += byDay.get(key) || 0;
    xs.push(dayTs(key));
    spent.push(d <= today ? acc : null);
    limit.push(bud.monthly_micro);
    pace.push(Math.round(forecast * d / ndays));
  }
  return el('div', {className: 'card', 'data-budget': bud.project},
    el('p', {}, bud.project + ': spent ' + dollars(bud.spent_micro) + ' of ' +
      dollars(bud.monthly_micro) + ' (' + (bud.hard ? 'hard' : 'soft') + ', counts ' +
      bud.counts + '); month-end forecast ' + dollars(forecast) +
      ' (tenbind\'s, at this month\'s pace)'),
    chart('Burn-down ' + bud.month, 'burn-' + bud.project.replace(/[^A-Za-z0-9_-]/g, '_'), xs,
      [{label: 'spent', data: spent}, {label: 'budget', data: limit},
        {label: 'forecast', data: pace}], {time: true, width: 640}));
}

// ---- start ----

function whoami() {
  const tok = sessionStorage.getItem(TOKEN_KEY);
  // Never any of the token itself: screenshots travel.
  $('who').textContent = tok ? 'token set for this tab' : 'no token';
  $('signout').hidden = !tok;
}

document.addEventListener('DOMContentLoaded', () => {
  $('login').addEventListener('submit', (ev) => {
    ev.preventDefault();
    const t = $('token').value.trim();
    if (t) sessionStorage.setItem(TOKEN_KEY, t);
    $('token').value = '';
    whoami();
    render();
  });
  $('signout').onclick = () => {
    sessionStorage.removeItem(TOKEN_KEY);
    whoami();
    render();
  };
  window.addEventListener('hashchange', render);
  whoami();
  render();
});
