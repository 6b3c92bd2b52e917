// ringmq dashboard: polls the JSON API of the process that served this page and redraws.
// Every value is written with textContent (never as HTML); charts are SVG elements.
'use strict';

const $ = (id) => document.getElementById(id);
const SVG_NS = 'http://www.w3.org/2000/svg';
const state = { config: null, group: null, topic: null, timer: null, groups: [] };

// ---- API ---------------------------------------------------------------------------

class ApiError extends Error {
  constructor(status, body) {
    super(body.error || ('HTTP ' + status));
    this.status = status;
    this.notAllowed = !!body.not_allowed;
    this.login = !!body.login;
  }
}

async function api(path, body) {
  const opts = body === undefined ? {} : {
    method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body),
  };
  const r = await fetch(path, Object.assign({ credentials: 'same-origin' }, opts));
  let j = {};
  try { j = await r.json(); } catch (e) { j = { error: 'HTTP ' + r.status + ' (not JSON)' }; }
  if (!r.ok) {
    const e = new ApiError(r.status, j);
    if (e.login) showLogin();
    throw e;
  }
  return j;
}

// Shows an error in its place: "not allowed" for the brokers' NO_PERMISSION.
function showError(id, e) {
  const el = $(id);
  if (!e) { el.textContent = ''; return; }
  el.textContent = e.notAllowed ? 'not allowed: your account may not read this' : String(e.message);
  el.className = e.notAllowed ? 'error denied' : 'error';
}

// ---- formatting (every number with its unit) ---------------------------------------

const nf = new Intl.NumberFormat('en-US');
function num(v) { return v === null || v === undefined ? '–' : nf.format(v); }
function rate(v) { return v === null || v === undefined ? '–' : v.toFixed(1); }
// Seconds, one decimal ('–' when unknown).
function secs(v) { return v === null || v === undefined ? '–' : v.toFixed(1); }
function pct(v) { return v === null || v === undefined ? '–' : v.toFixed(1); }
function bytes(v) {
  if (v === null || v === undefined) return '–';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0; let x = v;
  while (x >= 1024 && i < units.length - 1) { x /= 1024; i++; }
  return (i === 0 ? String(x) : x.toFixed(1)) + ' ' + units[i];
}
function time(ms) {
  if (!ms) return '–';
  return new Date(ms).toISOString().replace('T', ' ').replace('Z', ' UTC');
}
function dur(ms) {
  if (ms < 60000) return Math.round(ms / 1000) + ' s';
  if (ms < 3600000) return Math.round(ms / 60000) + ' min';
  return (ms / 3600000).toFixed(1) + ' h';
}

// ---- tables --------------------------------------------------------------------------

// Fills tbody of table `id` with rows of cells; a cell is a value, or {v, cls}, or a Node.
function fill(id, rows, onPick, pickedKey) {
  const tb = $(id).tBodies[0];
  tb.replaceChildren();
  for (const row of rows) {
    const tr = document.createElement('tr');
    for (const c of row.cells) {
      const td = document.createElement('td');
      if (c instanceof Node) td.appendChild(c);
      else if (c !== null && typeof c === 'object') { td.textContent = c.v; if (c.cls) td.className = c.cls; }
      else td.textContent = c === null || c === undefined ? '–' : String(c);
      tr.appendChild(td);
    }
    if (onPick) {
      tr.className = 'pick' + (row.key === pickedKey ? ' picked' : '');
      tr.addEventListener('click', () => onPick(row.key));
    }
    tb.appendChild(tr);
  }
}
const N = (v) => ({ v: v, cls: 'n' });

// ---- sections ------------------------------------------------------------------------

async function loadCluster() {
  try {
    const j = await api('/api/cluster');
    showError('cluster-error', null);
    fill('brokers', j.brokers.map((b) => ({ cells: [
      b.cluster, b.broker, N(b.id), b.address, b.role, b.version,
      N(rate(b.sampled_in_per_s)), N(rate(b.sampled_out_per_s)), N(num(b.msgs_in)),
      N(bytes(b.store_bytes)), N(pct(b.disk_used_percent)),
      N(num(b.repl_lag_bytes)), N(num(b.repl_lag_ms)),
    ] })));
    const s = j.sampler || {};
    $('status').textContent = 'last reading ' + time(s.sampled_at_ms) +
      (s.errors && s.errors.length ? ' — ' + s.errors.length + ' reading(s) failed: ' + s.errors[0] : '');
  } catch (e) { showError('cluster-error', e); }
}

async function loadTopics() {
  try {
    const j = await api('/api/topics');
    showError('topics-error', null);
    fill('topic-table', j.topics.map((t) => ({ key: t.topic, cells: [
      t.topic, t.kind, N(num(t.queues)), N(num(t.stored_msgs)),
      N(rate(t.in_per_s)), N(rate(t.out_per_s)), t.error || '',
    ] })), pickTopic, state.topic);
  } catch (e) { showError('topics-error', e); }
  if (state.topic) loadTopic();
}

function pickTopic(t) { state.topic = t; loadTopics(); }

async function loadTopic() {
  $('topic-detail').hidden = false;
  $('topic-detail-name').textContent = state.topic;
  try {
    const j = await api('/api/topic?name=' + encodeURIComponent(state.topic));
    showError('topic-detail-error', null);
    fill('topic-queues', j.queues.map((q) => ({ cells: [
      q.broker, N(q.queue), N(q.shard), N(num(q.min_offset)), N(num(q.max_offset)), time(q.last_update_ms),
    ] })));
  } catch (e) { showError('topic-detail-error', e); fill('topic-queues', []); }
}

async function loadGroups() {
  try {
    const j = await api('/api/groups');
    showError('groups-error', null);
    state.groups = j.groups.map((g) => g.group);
    fill('group-table', j.groups.map((g) => ({ key: g.group, cells: [
      g.group, N(num(g.member_count)), (g.topics || []).join(', '),
      N(num(g.total_lag)), N(secs(g.max_lag_age_s)), N(num(g.retry_lag)), N(num(g.dlq_lag)), N(rate(g.consume_per_s)),
    ] })), pickGroup, state.group);
    if (!state.group && j.groups.length) state.group = j.groups[0].group;
    fillDlqGroups();
  } catch (e) { showError('groups-error', e); }
  if (state.group) loadGroup();
}

function pickGroup(g) { state.group = g; loadGroups(); }

async function loadGroup() {
  $('group-detail').hidden = false;
  $('group-detail-name').textContent = state.group;
  try {
    const j = await api('/api/group?group=' + encodeURIComponent(state.group));
    showError('group-detail-error', null);
    const s = j.summary;
    const sum = $('group-summary');
    sum.replaceChildren();
    for (const [label, v] of [
      ['lag', num(s.total_lag) + ' msg'], ['oldest waiting', secs(s.max_lag_age_s) + ' s'],
      ['retry lag', num(s.retry_lag) + ' msg'],
      ['DLQ not resent', num(s.dlq_lag) + ' msg'], ['members', num(s.member_count)],
      ['consumed', rate(j.consume_per_s) + ' msg/s'],
    ]) {
      const span = document.createElement('span');
      span.append(label + ': ');
      const b = document.createElement('b');
      b.textContent = v;
      b.id = 'sum-' + label.replace(/ /g, '-').toLowerCase();
      span.appendChild(b);
      sum.appendChild(span);
    }
    $('lag-window').textContent = dur(j.history.history_ms);
    $('lag-every').textContent = dur(j.history.refresh_ms);
    drawLag($('lag-chart'), j.history.points, j.history.history_ms);
    fill('group-queues', j.queues.map((q) => ({ cells: [
      q.topic, q.broker, N(q.queue), N(num(q.broker_offset)), N(num(q.consumer_offset)), N(num(q.lag)), N(secs(q.lag_age_s)), q.member,
    ] })));
    fill('group-members', j.members.map((m) => ({ cells: [m.member, N(m.queue_count), m.queues.join(', ')] })));
  } catch (e) {
    showError('group-detail-error', e);
    $('lag-chart').replaceChildren();
    fill('group-queues', []); fill('group-members', []);
  }
}

// A line chart of (t_ms, lag) points over the history window ending now.
function drawLag(box, points, windowMs) {
  const W = 640; const H = 220; const L = 64; const R = 12; const T = 12; const B = 28;
  const svg = document.createElementNS(SVG_NS, 'svg');
  svg.setAttribute('width', W); svg.setAttribute('height', H);
  svg.setAttribute('viewBox', '0 0 ' + W + ' ' + H);
  svg.setAttribute('role', 'img');
  const el = (name, attrs, text) => {
    const e = document.createElementNS(SVG_NS, name);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    svg.appendChild(e);
    return e;
  };
  el('title', {}, 'total lag [msg] over time');
  const now = Date.now();
  const t0 = now - windowMs;
  // A top a multiple of 4, so the 4 grid steps are whole messages.
  const maxLag = 4 * Math.max(1, Math.ceil(Math.max(0, ...points.map((p) => p.lag)) / 4));
  const x = (t) => L + (W - L - R) * Math.max(0, (t - t0)) / windowMs;
  const y = (v) => H - B - (H - T - B) * v / maxLag;
  for (let i = 0; i <= 4; i++) {
    const v = maxLag * i / 4;
    el('line', { class: 'grid', x1: L, x2: W - R, y1: y(v), y2: y(v) });
    el('text', { x: L - 6, y: y(v) + 4, 'text-anchor': 'end' }, nf.format(Math.round(v)) + ' msg');
  }
  el('line', { class: 'axis', x1: L, x2: L, y1: T, y2: H - B });
  el('line', { class: 'axis', x1: L, x2: W - R, y1: H - B, y2: H - B });
  for (let i = 0; i <= 4; i++) {
    const t = t0 + windowMs * i / 4;
    const label = i === 4 ? 'now' : '−' + dur(now - t);
    el('text', { x: x(t), y: H - 8, 'text-anchor': i === 0 ? 'start' : (i === 4 ? 'end' : 'middle') }, label);
  }
  if (points.length) {
    const d = points.map((p, i) => (i ? 'L' : 'M') + x(p.t_ms).toFixed(1) + ',' + y(p.lag).toFixed(1)).join(' ');
    el('path', { class: 'line', d: d, 'data-points': points.length });
    const last = points[points.length - 1];
    el('circle', { class: 'dot', cx: x(last.t_ms), cy: y(last.lag), r: 3 });
  } else {
    el('text', { x: L + 10, y: T + 20 }, 'no readings yet');
  }
  box.replaceChildren(svg);
}

async function loadDelay() {
  try {
    const j = await api('/api/delay');
    showError('delay-error', null);
    fill('delay-table', j.brokers.map((b) => ({ cells: [
      b.broker, N(num((b.levels || []).reduce((a, l) => a + l.pending, 0))), N(num(b.timer_pending)),
      b.next_due_ms ? time(b.next_due_ms) : 'none', N(num(b.delivered)),
      b.error ? b.error : (b.delivering ? 'delivering' : 'not delivering'),
    ] })));
  } catch (e) { showError('delay-error', e); fill('delay-table', []); }
}

async function loadTxn() {
  try {
    const j = await api('/api/txn');
    showError('txn-error', null);
    fill('txn-table', j.brokers.map((b) => ({ cells: [
      b.broker, N(num(b.pending)), N(num(b.checks_sent)), N(num(b.moved_to_check_max)),
      N(num(b.timeout_ms)), N(num(b.check_interval_ms)),
    ] })));
    fill('txn-groups', j.groups.map((g) => ({ cells: [
      g.broker, g.producer_group, N(num(g.pending)), N(num(g.oldest_age_ms)),
    ] })));
  } catch (e) { showError('txn-error', e); fill('txn-table', []); fill('txn-groups', []); }
}

function fillDlqGroups() {
  const list = $('dlq-groups');
  list.replaceChildren();
  for (const g of state.groups) {
    const o = document.createElement('option');
    o.value = g;
    list.appendChild(o);
  }
}

async function loadDlq() {
  const g = $('dlq-group').value.trim();
  if (!g) return;
  try {
    const j = await api('/api/dlq?group=' + encodeURIComponent(g));
    showError('dlq-error', null);
    const s = j.summary;
    $('dlq-summary').textContent = s.topic + ': ' + num(s.dead_letters) + ' msg stored, ' +
      num(s.not_resent) + ' msg not resent, ' + num(s.shown) + ' msg shown';
    fill('dlq-table', j.dead_letters.map((m) => {
      const b = document.createElement('button');
      b.type = 'button'; b.textContent = 'Resend';
      b.addEventListener('click', () => resend(g, m.msg_id));
      return { cells: [m.msg_id, m.original_topic, N(num(m.reconsume_times)), time(m.store_time_ms),
        m.resent, (m.keys || []).join(', '), N(num(m.body_bytes)), { v: m.body, cls: 'body' }, b] };
    }));
  } catch (e) { showError('dlq-error', e); fill('dlq-table', []); }
}

async function resend(group, id) {
  const what = id ? 'dead letter ' + id : 'every dead letter of ' + group + ' not resent yet';
  if (!window.confirm('Resend ' + what + ' to its original topic?')) return;
  try {
    const j = await api('/api/dlq/resend', { group: group, id: id || null });
    showError('dlq-error', null);
    $('dlq-result').textContent = 'resent ' + num(j.summary ? j.summary.resent : 0) + ' msg of ' + group;
  } catch (e) { $('dlq-result').textContent = ''; showError('dlq-error', e); }
  loadDlq();
}

async function lookup(path) {
  try {
    const j = await api(path);
    showError('lookup-error', null);
    const msgs = j.messages || (j.message ? [j.message] : []);
    $('lookup-note').textContent = msgs.length + ' message(s) found' + ((j.notes || []).length ? ' — ' + j.notes.join('; ') : '');
    fill('msg-results', msgs.map((m) => ({ cells: [
      m.msg_id, m.topic, m.broker, N(m.queue), N(num(m.queue_offset)), time(m.store_time_ms), m.tag,
      (m.keys || []).join(', '), N(num(m.body_bytes)), { v: m.body, cls: 'body' },
    ] })));
  } catch (e) { showError('lookup-error', e); $('lookup-note').textContent = ''; fill('msg-results', []); }
}

// ---- login and the refresh loop -------------------------------------------------------

function showLogin() {
  $('login').hidden = false;
  $('main').hidden = true;
  $('account').hidden = true;
  if (state.timer) { clearInterval(state.timer); state.timer = null; }
}

function showMain(accessKey) {
  $('login').hidden = true;
  $('main').hidden = false;
  $('account').hidden = !accessKey;
  $('account-key').textContent = accessKey || '';
  refreshAll();
  if (!state.timer) state.timer = setInterval(refreshAll, state.config.refresh_ms);
}

function refreshAll() {
  loadCluster(); loadTopics(); loadGroups(); loadDelay(); loadTxn();
}

async function start() {
  $('login-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    $('login-error').textContent = '';
    const secret = $('login-secret-key');
    try {
      const j = await api('/api/login', { access_key: $('login-access-key').value, secret_key: secret.value });
      secret.value = '';
      showMain(j.access_key);
    } catch (e) {
      secret.value = '';
      $('login-error').textContent = 'login refused: ' + e.message;
    }
  });
  $('logout').addEventListener('click', async () => {
    try { await api('/api/logout', {}); } catch (e) { /* shown by the login form */ }
    showLogin();
  });
  $('lookup-id').addEventListener('submit', (ev) => {
    ev.preventDefault();
    lookup('/api/msg/id?id=' + encodeURIComponent($('msg-id').value.trim()));
  });
  $('lookup-key').addEventListener('submit', (ev) => {
    ev.preventDefault();
    lookup('/api/msg/key?topic=' + encodeURIComponent($('msg-key-topic').value.trim()) +
      '&key=' + encodeURIComponent($('msg-key-key').value.trim()));
  });
  $('lookup-time').addEventListener('submit', (ev) => {
    ev.preventDefault();
    lookup('/api/msg/time?topic=' + encodeURIComponent($('msg-time-topic').value.trim()) +
      '&begin=' + encodeURIComponent($('msg-time-begin').value.trim()) +
      '&end=' + encodeURIComponent($('msg-time-end').value.trim()));
  });
  $('dlq-form').addEventListener('submit', (ev) => { ev.preventDefault(); loadDlq(); });
  $('dlq-resend-all').addEventListener('click', () => {
    const g = $('dlq-group').value.trim();
    if (g) resend(g, null);
  });
  try {
    state.config = await api('/api/config');
  } catch (e) {
    $('status').textContent = 'cannot reach the dashboard: ' + e.message;
    return;
  }
  $('status').textContent = 'refresh every ' + dur(state.config.refresh_ms);
  if (state.config.acl && !state.config.logged_in) showLogin();
  else showMain(state.config.access_key);
}

start();
