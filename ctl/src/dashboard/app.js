// ringmq dashboard: polls the JSON API of the process that served this page and redraws.
// Every value is written with textContent (never as HTML); charts are SVG elements.
'use strict';

const $ = (id) => document.getElementById(id);
const SVG_NS = 'http://www.w3.org/2000/svg';
const state = { config: null, group: null, topic: null, broker: null, timer: null, groups: [] };

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

// Runs an action (a POST), after asking when `confirmText` is given; its outcome goes to
// `resultId` (done) or `errorId` (refused, with the broker's reason). Resolves to the answer
// or null.
async function act(path, body, resultId, errorId, confirmText, doneText) {
  if (confirmText && !window.confirm(confirmText)) return null;
  // The outcome stays until the next action (the refresh loop never clears it).
  $(resultId).textContent = '';
  showError(errorId, null);
  try {
    const j = await api(path, body);
    showError(errorId, null);
    const notes = (j.notes || []).length ? ' — ' + j.notes.join('; ') : '';
    $(resultId).textContent = doneText(j) + notes;
    return j;
  } catch (e) {
    if (e.notAllowed) {
      const el = $(errorId);
      el.textContent = 'not allowed: your account may not do this (' + e.message + ')';
      el.className = 'error denied';
    } else {
      showError(errorId, e);
    }
    return null;
  }
}

// A whole number from a form field: undefined when empty.
function whole(id) {
  const v = $(id).value.trim();
  return v === '' ? undefined : v;
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
      if (c instanceof Node) { td.appendChild(c); if (c.dataset && c.dataset.clip) td.className = 'clip'; }
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
    fill('brokers', j.brokers.map((b) => ({ key: b.address, cells: [
      b.cluster, b.broker, N(b.id), b.address, b.role, b.version,
      N(rate(b.sampled_in_per_s)), N(rate(b.sampled_out_per_s)), N(num(b.msgs_in)),
      N(bytes(b.store_bytes)), N(pct(b.disk_used_percent)),
      N(num(b.repl_lag_bytes)), N(num(b.repl_lag_ms)),
    ] })), pickBroker, state.broker);
    const s = j.sampler || {};
    $('status').textContent = 'last reading ' + time(s.sampled_at_ms) +
      (s.errors && s.errors.length ? ' — ' + s.errors.length + ' reading(s) failed: ' + s.errors[0] : '');
  } catch (e) { showError('cluster-error', e); }
}

function pickBroker(addr) {
  state.broker = addr;
  $('broker-config-result').textContent = '';
  loadCluster();
  loadBrokerConfig();
}

async function loadBrokerConfig() {
  $('broker-detail').hidden = false;
  $('broker-detail-name').textContent = state.broker;
  try {
    const j = await api('/api/broker/config?name=' + encodeURIComponent(state.broker));
    showError('broker-config-error', null);
    state.brokerConfig = j.config;
    const keys = $('broker-config-keys');
    keys.replaceChildren();
    for (const c of j.config) {
      const o = document.createElement('option');
      o.value = c.key;
      keys.appendChild(o);
    }
    fillBrokerConfig();
  } catch (e) { showError('broker-config-error', e); fill('broker-config', []); }
}

function fillBrokerConfig() {
  const f = $('broker-config-filter').value.trim().toLowerCase();
  fill('broker-config', (state.brokerConfig || [])
    .filter((c) => !f || c.key.toLowerCase().includes(f))
    .map((c) => ({ cells: [c.key, c.value] })));
}

async function setBrokerConfig() {
  const key = $('broker-config-key').value.trim();
  const value = $('broker-config-value').value.trim();
  const set = {}; set[key] = value;
  const j = await act('/api/broker/config', { broker: state.broker, set: set },
    'broker-config-result', 'broker-config-error', null,
    (j) => 'set ' + (j.config || []).map((c) => c.key + '=' + c.value).join(', ') + ' on ' + state.broker);
  if (j) loadBrokerConfig();
}

async function loadTopics() {
  try {
    const j = await api('/api/topics');
    showError('topics-error', null);
    fill('topic-table', j.topics.map((t) => ({ key: t.topic, cells: [
      t.topic, t.kind, N(num(t.queues)), N(num(t.stored_msgs)),
      N(rate(t.in_per_s)), N(rate(t.out_per_s)), t.error || '',
    ] })), pickTopic, state.topic);
    $('topics-hidden').textContent = j.hidden ?
      num(j.hidden) + ' topic(s) not shown: your account may not read them' : '';
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
    const h = j.history;
    $('topic-window').textContent = dur(h.history_ms);
    drawChart($('topic-chart'), [
      { name: 'in', cls: 'line', points: h.points.map((p) => ({ t: p.t_ms, v: p.in_per_s })) },
      { name: 'out', cls: 'line out', points: h.points.map((p) => ({ t: p.t_ms, v: p.out_per_s })) },
    ], h.history_ms, 'msg/s', 'messages per second over time');
  } catch (e) { showError('topic-detail-error', e); fill('topic-queues', []); $('topic-chart').replaceChildren(); }
}

async function createTopic() {
  const name = $('topic-create-name').value.trim();
  const j = await act('/api/topic/create', {
    topic: name, queues: whole('topic-create-queues'),
    perm: $('topic-create-perm').value || null, cluster: $('topic-create-cluster').value.trim() || null,
  }, 'topics-result', 'topics-action-error', null, (j) => 'created ' + name + ' on ' + brokersOf(j));
  if (j) { state.topic = name; loadTopics(); }
}

async function updateTopic() {
  const name = state.topic;
  const j = await act('/api/topic/update', {
    topic: name, queues: whole('topic-update-queues'), perm: $('topic-update-perm').value || null,
  }, 'topic-action-result', 'topic-action-error', null, (j) => 'updated ' + name + ' on ' + brokersOf(j));
  if (j) loadTopics();
}

async function deleteTopic() {
  const name = state.topic;
  const j = await act('/api/topic/delete', { topic: name }, 'topics-result', 'topic-action-error',
    'Delete topic ' + name + ' and every message in it?', (j) => 'deleted ' + name + ' on ' + brokersOf(j));
  if (j) { state.topic = null; $('topic-detail').hidden = true; loadTopics(); }
}

// The brokers an action's answer names.
function brokersOf(j) {
  const rows = j.brokers || j.topic || j.deleted || [];
  const names = rows.map((b) => b.broker || b.name || b.addr || b.address).filter((x) => x);
  return names.length ? names.join(', ') : 'no broker';
}

async function loadGroups() {
  try {
    const j = await api('/api/groups');
    showError('groups-error', null);
    state.groups = j.groups.map((g) => g.group);
    $('groups-hidden').textContent = (j.hidden ?
      num(j.hidden) + ' group(s) not shown: your account may not read them. ' : '') +
      (j.names_from_sampler ? 'Listing every group needs an admin account: the names shown are those the dashboard itself sees.' : '');
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
    const pts = j.history.points;
    drawChart($('lag-chart'), [{ name: 'lag', cls: 'line', points: pts.map((p) => ({ t: p.t_ms, v: p.lag })) }],
      j.history.history_ms, 'msg', 'total lag [msg] over time');
    drawChart($('consume-chart'), [{ name: 'consumed', cls: 'line', points: pts.map((p) => ({ t: p.t_ms, v: p.consume_per_s })) }],
      j.history.history_ms, 'msg/s', 'messages consumed per second over time');
    // The group's own topics first, then its retry and dead-letter topics.
    const own = (t) => t.startsWith('%RETRY%') || t.startsWith('%DLQ%') ? 1 : 0;
    const topics = [...new Set(j.queues.map((q) => q.topic))].sort((a, b) => own(a) - own(b) || a.localeCompare(b));
    const sel = $('group-reset-topic');
    const keep = sel.value;
    if (sel.options.length !== topics.length || topics.some((t, i) => sel.options[i].value !== t)) {
      sel.replaceChildren();
      for (const t of topics) { const o = document.createElement('option'); o.value = t; o.textContent = t; sel.appendChild(o); }
      if (topics.includes(keep)) sel.value = keep;
    }
    fill('group-queues', j.queues.map((q) => ({ cells: [
      q.topic, q.broker, N(q.queue), N(num(q.broker_offset)), N(num(q.consumer_offset)), N(num(q.lag)), N(secs(q.lag_age_s)), q.member,
    ] })));
    fill('group-members', j.members.map((m) => ({ cells: [m.member, N(m.queue_count), m.queues.join(', ')] })));
    loadConnections();
  } catch (e) {
    showError('group-detail-error', e);
    $('lag-chart').replaceChildren();
    fill('group-queues', []); fill('group-members', []);
  }
}

async function loadConnections() {
  try {
    const j = await api('/api/group/connections?group=' + encodeURIComponent(state.group));
    showError('group-connections-error', null);
    const row = (kind) => (c) => ({ cells: [kind, c.broker, c.client_id, c.client_host] });
    fill('group-connections', j.consumers.map(row('consumer')).concat(j.producers.map(row('producer'))));
  } catch (e) { showError('group-connections-error', e); fill('group-connections', []); }
}

async function saveGroup() {
  const name = $('group-create-name').value.trim();
  const body = { group: name, retry_max_times: whole('group-create-retries') };
  if ($('group-create-orderly').checked) body.orderly = true;
  const j = await act('/api/group/update', body, 'groups-result', 'groups-action-error', null,
    (j) => 'saved the settings of ' + name + ' on ' + brokersOf(j));
  if (j) loadGroups();
}

async function deleteGroup() {
  const name = state.group;
  await act('/api/group/delete', { group: name }, 'group-action-result', 'group-action-error',
    'Delete the settings of group ' + name + '? Its offsets stay.',
    (j) => 'deleted the settings of ' + name + ' on ' + brokersOf(j));
  loadGroups();
}

async function resetGroup() {
  const mode = $('group-reset-mode').value;
  const topic = $('group-reset-topic').value;
  const body = { group: state.group, topic: topic };
  if (mode === 'offset') {
    body.queue = whole('group-reset-queue'); body.offset = whole('group-reset-offset');
    body.broker = $('group-reset-broker').value.trim() || null;
  } else {
    body.to = mode === 'time' ? $('group-reset-time').value.trim() : mode;
  }
  const j = await act('/api/group/reset', body, 'group-action-result', 'group-action-error',
    'Reset the offsets of ' + state.group + ' on ' + topic + '?',
    (j) => 'reset ' + (j.offsets || []).slice().sort((a, b) => a.broker.localeCompare(b.broker) || a.queue - b.queue)
      .map((o) => o.broker + '#' + o.queue + ': ' + num(o.old_offset) +
      ' → ' + num(o.new_offset)).join(', '));
  if (j) loadGroups();
}

// A line chart of series [{name, cls, points: [{t, v}]}] over the window ending now; a
// point whose value is unknown (null) breaks its line.
function drawChart(box, series, windowMs, unit, title) {
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
  el('title', {}, title);
  const now = Date.now();
  const t0 = now - windowMs;
  const values = series.flatMap((s) => s.points.map((p) => p.v)).filter((v) => v !== null && v !== undefined);
  // A top a multiple of 4, so the 4 grid steps are whole numbers.
  const maxV = 4 * Math.max(1, Math.ceil(Math.max(0, ...values) / 4));
  const x = (t) => L + (W - L - R) * Math.max(0, (t - t0)) / windowMs;
  const y = (v) => H - B - (H - T - B) * v / maxV;
  for (let i = 0; i <= 4; i++) {
    const v = maxV * i / 4;
    el('line', { class: 'grid', x1: L, x2: W - R, y1: y(v), y2: y(v) });
    el('text', { x: L - 6, y: y(v) + 4, 'text-anchor': 'end' }, nf.format(Math.round(v)) + ' ' + unit);
  }
  el('line', { class: 'axis', x1: L, x2: L, y1: T, y2: H - B });
  el('line', { class: 'axis', x1: L, x2: W - R, y1: H - B, y2: H - B });
  for (let i = 0; i <= 4; i++) {
    const t = t0 + windowMs * i / 4;
    const label = i === 4 ? 'now' : '−' + dur(now - t);
    el('text', { x: x(t), y: H - 8, 'text-anchor': i === 0 ? 'start' : (i === 4 ? 'end' : 'middle') }, label);
  }
  let drawn = 0;
  series.forEach((s, k) => {
    const known = s.points.filter((p) => p.v !== null && p.v !== undefined);
    if (!known.length) return;
    let d = ''; let pen = 'M';
    for (const p of s.points) {
      if (p.v === null || p.v === undefined) { pen = 'M'; continue; }
      d += pen + x(p.t).toFixed(1) + ',' + y(p.v).toFixed(1) + ' ';
      pen = 'L';
    }
    el('path', { class: s.cls, d: d.trim(), 'data-points': known.length, 'data-series': s.name });
    const last = known[known.length - 1];
    el('circle', { class: 'dot', cx: x(last.t), cy: y(last.v), r: 3 });
    if (series.length > 1) el('text', { class: 'legend', x: W - R - 4, y: T + 12 + 14 * k, 'text-anchor': 'end' }, s.name + ': ' + rate(last.v) + ' ' + unit);
    drawn++;
  });
  if (!drawn) el('text', { x: L + 10, y: T + 20 }, 'no readings yet');
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
        m.resent, (m.keys || []).join(', '), N(num(m.body_bytes)), clipped(m.body), b] };
    }));
  } catch (e) { showError('dlq-error', e); fill('dlq-table', []); }
}

// A long body on one line, cut at the cell's width; a click shows all of it.
function clipped(text) {
  const span = document.createElement('span');
  span.textContent = text;
  span.title = 'click to show all';
  span.addEventListener('click', () => {
    const td = span.parentElement;
    td.classList.toggle('open');
  });
  span.dataset.clip = '1';
  return span;
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
    state.found = msgs;
    fill('msg-results', msgs.map((m, i) => ({ key: i, cells: [
      m.msg_id, m.topic, m.broker, N(m.queue), N(num(m.queue_offset)), time(m.store_time_ms), m.tag,
      (m.keys || []).join(', '), N(num(m.body_bytes)), clipped(m.body),
    ] })), (i) => showMessage(state.found[i]));
  } catch (e) { showError('lookup-error', e); $('lookup-note').textContent = ''; fill('msg-results', []); }
}

// One message: every field, then its trace (read by the producer's message id).
async function showMessage(m) {
  $('msg-detail').hidden = false;
  $('msg-detail-id').textContent = m.msg_id;
  const fields = [
    ['Message id (offset)', m.msg_id], ['Message id (producer, UNIQ_KEY)', m.unique_key], ['Topic', m.topic],
    ['Broker', m.broker], ['Queue', m.queue], ['Offset [msg]', num(m.queue_offset)],
    ['Physical offset [B]', num(m.physical_offset)], ['Born [UTC]', time(m.born_time_ms)],
    ['Stored [UTC]', time(m.store_time_ms)], ['Deliver at [UTC]', time(m.deliver_at_ms)],
    ['Born host', m.born_host], ['Store host', m.store_host], ['Tag', m.tag], ['Keys', (m.keys || []).join(', ')],
    ['Reconsume times', m.reconsume_times], ['Flag', m.flag], ['System flag', m.sys_flag],
    ['Properties', m.properties ? JSON.stringify(m.properties) : '–'], ['Body [B]', num(m.body_bytes)],
  ];
  fill('msg-fields', fields.map(([k, v]) => ({ cells: [{ v: k, cls: 'key' }, v === undefined ? '–' : v] }))
    .concat([{ cells: [{ v: 'Body', cls: 'key' }, clipped(m.body)] }]));
  const id = m.unique_key || m.msg_id;
  $('msg-trace-note').textContent = 'reading the trace of ' + id + '…';
  try {
    const j = await api('/api/msg/trace?id=' + encodeURIComponent(id));
    showError('msg-trace-error', null);
    const ev = j.trace || [];
    $('msg-trace-note').textContent = ev.length ? ev.length + ' trace event(s)' + ((j.notes || []).length ? ' — ' + j.notes.join('; ') : '') :
      ((j.notes || []).join('; ') || 'no trace events');
    fill('msg-trace', ev.map((e) => ({ cells: [
      time(e.time_ms), e.event, e.group, e.client_host, e.status, N(num(e.cost_ms)), N(num(e.reconsume_times)),
      e.broker, N(e.queue === null || e.queue === undefined ? '–' : e.queue), N(num(e.queue_offset)),
    ] })));
    drawTimeline($('trace-chart'), ev);
  } catch (e) {
    showError('msg-trace-error', e); $('msg-trace-note').textContent = '';
    fill('msg-trace', []); $('trace-chart').replaceChildren();
  }
}

// The trace as a timeline: one mark per event at its time (a bar as long as its cost),
// sends above, consumes below, failed ones red.
function drawTimeline(box, events) {
  if (!events.length) { box.replaceChildren(); return; }
  const W = 720; const L = 200; const R = 16; const row = 22;
  const H = 40 + row * events.length;
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
  el('title', {}, 'trace timeline');
  const t0 = Math.min(...events.map((e) => e.time_ms));
  const t1 = Math.max(...events.map((e) => e.time_ms + (e.cost_ms || 0)));
  const span = Math.max(1, t1 - t0);
  const x = (t) => L + (W - L - R) * (t - t0) / span;
  el('line', { class: 'axis', x1: L, x2: W - R, y1: H - 24, y2: H - 24 });
  el('text', { x: L, y: H - 8 }, time(t0));
  el('text', { x: W - R, y: H - 8, 'text-anchor': 'end' }, '+' + nf.format(span) + ' ms');
  events.forEach((e, i) => {
    const yy = 10 + row * i;
    el('text', { x: L - 6, y: yy + 12, 'text-anchor': 'end' }, e.event + (e.group ? ' ' + e.group : ''));
    const failed = e.status && e.status !== 'success';
    el('rect', {
      class: 'event ' + e.event + (failed ? ' failed' : ''), x: x(e.time_ms), y: yy,
      width: Math.max(3, x(e.time_ms + (e.cost_ms || 0)) - x(e.time_ms)), height: 14, 'data-event': e.event,
    });
  });
  box.replaceChildren(svg);
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
  $('broker-config-form').addEventListener('submit', (ev) => { ev.preventDefault(); setBrokerConfig(); });
  $('broker-config-filter').addEventListener('input', fillBrokerConfig);
  $('topic-create-form').addEventListener('submit', (ev) => { ev.preventDefault(); createTopic(); });
  $('topic-update-form').addEventListener('submit', (ev) => { ev.preventDefault(); updateTopic(); });
  $('topic-delete').addEventListener('click', deleteTopic);
  $('group-create-form').addEventListener('submit', (ev) => { ev.preventDefault(); saveGroup(); });
  $('group-reset-form').addEventListener('submit', (ev) => { ev.preventDefault(); resetGroup(); });
  $('group-delete').addEventListener('click', deleteGroup);
  $('group-reset-mode').addEventListener('change', () => {
    const m = $('group-reset-mode').value;
    $('group-reset-time').hidden = m !== 'time';
    $('group-reset-queue-fields').hidden = m !== 'offset';
  });
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
