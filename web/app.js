// troupe dashboard: polls the head's REST API and renders the cluster, actor, job-list and job
// views.
//
// One view is mounted at a time (hash routing, see route()); the poller calls its refresh() every
// POLL_MS and never overlaps two refreshes. Every string from the API reaches the page through
// textContent (el() below), never through innerHTML.
//
// Hooks for tests and scripting:
//   window.troupeGraph        the job view's cytoscape instance (actor vertices have data kind
//                             "actor"; the synthetic driver vertex has kind "driver")
//   window.troupeDashboard    {pollCount, view, lastError}
//   [data-metric]             chart containers; data-points = number of steps plotted
//   #details-panel            the job view's side panel (data-actor-id = the selected actor)
//   #job-log                  the driver log (data-offset = bytes read so far)
'use strict';

(() => {
  const POLL_MS = 1500;
  const POLL_FINISHED_MS = 5000; // A job that has ended changes rarely.
  const POLL_HIDDEN_MS = 10000; // Background tab.
  const REQUEST_TIMEOUT_MS = 10000;
  const LOG_KEEP_CHARS = 512 * 1024;
  const CHART_HEIGHT = 170;
  const TERMINAL_JOB_STATES = new Set(['SUCCEEDED', 'FAILED', 'STOPPED']);
  const ACTOR_STATES = ['ALIVE', 'PENDING', 'RESTARTING', 'DEAD'];

  // Vertex colours by actor state: [fill, border].
  const STATE_COLORS = {
    ALIVE: ['#dcfce7', '#16a34a'],
    PENDING: ['#fef3c7', '#d97706'],
    RESTARTING: ['#ffedd5', '#ea580c'],
    DEAD: ['#fee2e2', '#dc2626'],
  };
  const UNKNOWN_STATE_COLORS = ['#f3f4f6', '#6b7280'];
  const EDGE_COLORS = {call: '#6b7280', samples: '#2563eb', weights: '#9333ea'};
  const SERIES_COLORS = ['#2563eb', '#16a34a', '#d97706', '#9333ea', '#dc2626'];
  // Tick spacings of the step axis: whole steps only.
  const STEP_INCREMENTS = [
    1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1000, 2000, 2500, 5000, 10000, 20000, 25000, 50000,
    100000, 200000, 500000, 1000000,
  ];

  // The job view's charts. The first series' metric names the chart container (data-metric).
  const CHARTS = [
    {id: 'reward', title: 'Reward', series: [{metric: 'reward/mean', label: 'mean'}]},
    {
      id: 'accuracy',
      title: 'Accuracy',
      series: [
        {metric: 'reward/accuracy', label: 'train'},
        {metric: 'eval/accuracy', label: 'eval'},
      ],
    },
    {id: 'kl', title: 'KL to reference', series: [{metric: 'train/kl', label: 'KL'}]},
    {id: 'loss', title: 'Loss', series: [{metric: 'train/loss', label: 'loss'}]},
    {
      id: 'throughput',
      title: 'Throughput (tokens/s)',
      series: [
        {metric: 'throughput/generate_tokens_per_s', label: 'generate'},
        {metric: 'throughput/train_tokens_per_s', label: 'train'},
      ],
    },
    {
      id: 'staleness',
      title: 'Sample staleness (weight versions)',
      series: [{metric: 'rollout/staleness', label: 'mean'}],
    },
  ];

  // ---------------------------------------------------------------------------------------------
  // DOM and formatting helpers.

  // el('div', {class: 'x', dataset: {a: 1}, onclick: fn, text: 'hi'}, child, [children], 'text')
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    if (attrs) {
      for (const [key, value] of Object.entries(attrs)) {
        if (value === undefined || value === null || value === false) continue;
        if (key === 'class') node.className = value;
        else if (key === 'text') node.textContent = value;
        else if (key === 'dataset') Object.assign(node.dataset, value);
        else if (key.startsWith('on')) node.addEventListener(key.slice(2), value);
        else node.setAttribute(key, value === true ? '' : String(value));
      }
    }
    for (const child of children.flat()) {
      if (child === undefined || child === null || child === false) continue;
      node.append(child instanceof Node ? child : String(child));
    }
    return node;
  }

  const $ = (selector) => document.querySelector(selector);

  function isNum(v) {
    return typeof v === 'number' && Number.isFinite(v);
  }

  function fmtNumber(v, digits = 3) {
    if (v === null || v === undefined || Number.isNaN(v)) return '–';
    if (typeof v !== 'number') return String(v);
    if (!Number.isFinite(v)) return v > 0 ? '∞' : '−∞';
    const a = Math.abs(v);
    if (a >= 1e9) return `${+(v / 1e9).toFixed(2)}G`;
    if (a >= 1e6) return `${+(v / 1e6).toFixed(2)}M`;
    if (a >= 1e4) return `${+(v / 1e3).toFixed(1)}k`;
    if (Number.isInteger(v)) return String(v);
    if (a >= 100) return v.toFixed(0);
    if (a >= 1e-3) return String(+v.toPrecision(digits));
    return v.toExponential(1);
  }

  function fmtBytes(b) {
    if (!isNum(b)) return '–';
    const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    let i = 0;
    while (Math.abs(b) >= 1024 && i < units.length - 1) {
      b /= 1024;
      i++;
    }
    return `${i === 0 ? b : +b.toFixed(b >= 100 ? 0 : 1)} ${units[i]}`;
  }

  function fmtRate(perSecond) {
    return isNum(perSecond) ? `${fmtNumber(perSecond, 3)}/s` : '–';
  }

  function fmtDuration(seconds) {
    if (!isNum(seconds) || seconds < 0) return '–';
    if (seconds < 10) return `${+seconds.toFixed(1)} s`;
    if (seconds < 60) return `${Math.round(seconds)} s`;
    const s = Math.floor(seconds);
    const pad = (n) => String(n).padStart(2, '0');
    if (s < 3600) return `${Math.floor(s / 60)}m ${pad(s % 60)}s`;
    if (s < 86400) return `${Math.floor(s / 3600)}h ${pad(Math.floor((s % 3600) / 60))}m`;
    return `${Math.floor(s / 86400)}d ${Math.floor((s % 86400) / 3600)}h`;
  }

  function fmtTime(ms) {
    if (!isNum(ms) || ms <= 0) return '–';
    const d = new Date(ms);
    const today = new Date();
    const time = d.toLocaleTimeString([], {hour12: false});
    return d.toDateString() === today.toDateString() ? time : `${d.toLocaleDateString()} ${time}`;
  }

  function isBytesResource(name) {
    return /memory/i.test(name);
  }

  function fmtResourceAmount(name, v) {
    return isBytesResource(name) ? fmtBytes(v) : fmtNumber(v);
  }

  // {"CPU": 1, "GPU": 0.5} -> "CPU 1 · GPU 0.5" (zero amounts left out).
  function fmtResources(resources) {
    if (!resources || typeof resources !== 'object') return '–';
    const parts = Object.entries(resources)
      .filter(([, v]) => isNum(v) && v !== 0)
      .map(([k, v]) => `${k} ${fmtResourceAmount(k, v)}`);
    return parts.length ? parts.join(' · ') : '–';
  }

  // Long ids are shown shortened with the full id as a tooltip.
  function idCell(id, length = 10) {
    const text = id === undefined || id === null || id === '' ? '–' : String(id);
    const short = text.length > length + 2 ? `${text.slice(0, length)}…` : text;
    return el('span', {class: 'mono', title: text, text: short});
  }

  // Node ids -> hostnames, for showing actors' nodes by name. Refreshed by the cluster view and,
  // at most every NODE_NAMES_MAX_AGE_MS, by the views that show actors.
  const NODE_NAMES_MAX_AGE_MS = 10000;
  const nodeNames = {map: new Map(), fetchedMs: 0};

  function rememberNodes(nodes) {
    nodeNames.map = new Map(
      nodes.filter((n) => n.node_id).map((n) => [n.node_id, n.hostname || '']),
    );
    nodeNames.fetchedMs = Date.now();
  }

  async function refreshNodeNames() {
    if (Date.now() - nodeNames.fetchedMs < NODE_NAMES_MAX_AGE_MS) return;
    nodeNames.fetchedMs = Date.now(); // One attempt per period, even if it fails.
    rememberNodes((await getJson('api/nodes')).nodes || []);
  }

  // A node shown by hostname (full id as tooltip), or by its shortened id if the name is unknown.
  function nodeCell(nodeId, length = 8) {
    const name = nodeId ? nodeNames.map.get(nodeId) : '';
    return name ? el('span', {title: nodeId, text: name}) : idCell(nodeId, length);
  }

  function badge(state) {
    const s = state ? String(state) : 'UNKNOWN';
    return el('span', {class: `badge state-${s}`, text: s});
  }

  function kvTable(rows) {
    return el(
      'table',
      {class: 'kv'},
      el(
        'tbody',
        null,
        rows
          .filter((r) => r)
          .map(([k, v]) =>
            el(
              'tr',
              null,
              el('th', {text: k}),
              el('td', null, v instanceof Node ? v : String(v ?? '–')),
            ),
          ),
      ),
    );
  }

  function emptyRow(columns, text) {
    return el('tr', {class: 'empty-row'}, el('td', {colspan: columns, text}));
  }

  // Keeps a <pre>'s scroll position pinned to the bottom if it was there before `update` ran.
  function followBottom(pre, update) {
    const atBottom = pre.scrollHeight - pre.scrollTop - pre.clientHeight < 24;
    update();
    if (atBottom) pre.scrollTop = pre.scrollHeight;
  }

  // ---------------------------------------------------------------------------------------------
  // API access.

  class ApiError extends Error {
    constructor(path, status, message) {
      super(
        status
          ? `${path}: HTTP ${status}${message ? ` — ${message}` : ''}`
          : `${path}: ${message || 'request failed'}`,
      );
      this.path = path;
      this.status = status;
    }
  }

  // Fetches `path` (relative to the page, so a head behind a path prefix works too); throws
  // ApiError on a network error, a timeout or a non-2xx status.
  async function request(path) {
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), REQUEST_TIMEOUT_MS);
    try {
      const response = await fetch(path, {cache: 'no-store', signal: controller.signal});
      if (!response.ok) {
        let message = '';
        try {
          message = (await response.text()).trim();
          const parsed = JSON.parse(message);
          if (parsed && typeof parsed.error === 'string') message = parsed.error;
        } catch (_) {
          /* Plain-text body, or none. */
        }
        throw new ApiError(path, response.status, message.slice(0, 300));
      }
      return response;
    } catch (e) {
      if (e instanceof ApiError) throw e;
      throw new ApiError(path, 0, e.name === 'AbortError' ? 'timed out' : 'head unreachable');
    } finally {
      clearTimeout(timer);
    }
  }

  async function getJson(path) {
    const response = await request(path);
    try {
      return await response.json();
    } catch (e) {
      throw new ApiError(path, response.status, 'response is not JSON');
    }
  }

  const enc = encodeURIComponent;

  // Runs the fetches in `tasks` ({name: promise}) to completion; returns {name: value or
  // undefined}, `errors` ({name: error}) and `error`, the first error (so a view renders what it
  // got and still reports the failure).
  async function settle(tasks) {
    const names = Object.keys(tasks);
    const results = await Promise.allSettled(names.map((n) => tasks[n]));
    const out = {error: null, errors: {}};
    results.forEach((r, i) => {
      if (r.status === 'fulfilled') {
        out[names[i]] = r.value;
      } else {
        out.errors[names[i]] = r.reason;
        if (!out.error) out.error = r.reason;
      }
    });
    return out;
  }

  // ---------------------------------------------------------------------------------------------
  // Metrics: the head serves {"series": {name: {step, time, value}}} (histograms as {step,
  // points}); metrics/'s MetricsSeriesToJson shape {"scalars": {...}, "histograms": {name:
  // [{step, sum, num, ...}]}} is accepted too. Result: {name: {step: [...], value: [...]}} with
  // non-finite values as null (a gap in the chart) and histograms reduced to their mean.

  function toValue(v) {
    if (typeof v === 'number') return Number.isFinite(v) ? v : null;
    if (typeof v === 'string') {
      const n = Number(v); // "NaN" / "Infinity" become non-finite numbers, then null.
      return Number.isFinite(n) ? n : null;
    }
    return null;
  }

  function histogramMean(p) {
    if (typeof p === 'number' || typeof p === 'string') return toValue(p);
    if (Array.isArray(p)) return p.length ? toValue(p.reduce((a, b) => a + b, 0) / p.length) : null;
    if (!p || typeof p !== 'object') return null;
    if (p.mean !== undefined) return toValue(p.mean);
    const num = toValue(p.num ?? p.count);
    const sum = toValue(p.sum);
    return num && sum !== null ? sum / num : null;
  }

  function normalizeMetrics(body) {
    const out = {};
    const addScalar = (name, s) => {
      if (!s || !Array.isArray(s.step)) return;
      if (Array.isArray(s.value)) {
        out[name] = {step: s.step.slice(), value: s.value.map(toValue)};
      } else if (Array.isArray(s.points)) {
        out[name] = {step: s.step.slice(), value: s.points.map(histogramMean)};
      }
    };
    if (body && body.series && typeof body.series === 'object') {
      for (const [name, s] of Object.entries(body.series)) addScalar(name, s);
    }
    if (body && body.scalars && typeof body.scalars === 'object') {
      for (const [name, s] of Object.entries(body.scalars)) addScalar(name, s);
    }
    if (body && body.histograms && typeof body.histograms === 'object') {
      for (const [name, h] of Object.entries(body.histograms)) {
        if (Array.isArray(h)) {
          out[name] = {step: h.map((p) => p.step), value: h.map(histogramMean)};
        } else {
          addScalar(name, h);
        }
      }
    }
    return out;
  }

  // uPlot data for one chart: [steps, series1 values, ...] over the union of the series' steps.
  // A step a series did not log is undefined (uPlot draws the line across it, e.g. for sparse
  // eval/accuracy); a non-finite value it did log is null (a visible gap).
  function chartData(spec, metrics) {
    const columns = spec.series.map((s) => metrics[s.metric]);
    const steps = new Set();
    for (const c of columns) if (c) c.step.forEach((x) => steps.add(x));
    const xs = [...steps].filter(isNum).sort((a, b) => a - b);
    const index = new Map(xs.map((x, i) => [x, i]));
    const ys = columns.map((c) => {
      const y = new Array(xs.length).fill(undefined);
      if (c)
        c.step.forEach((x, i) => {
          if (index.has(x)) y[index.get(x)] = c.value[i];
        });
      return y;
    });
    return [xs, ...ys];
  }

  // ---------------------------------------------------------------------------------------------
  // Actor details (job view's graph panel and the actors view's panel share this).

  function renderActorDetails(panel, actor, extra) {
    const oldLog = panel.querySelector('.log-tail');
    const scroll = oldLog
      ? {
          top: oldLog.scrollTop,
          atBottom: oldLog.scrollHeight - oldLog.scrollTop - oldLog.clientHeight < 24,
        }
      : {atBottom: true};
    const log = el('pre', {class: 'log log-tail', text: actor.log_tail || '(no output yet)'});
    panel.dataset.actorId = actor.actor_id || '';
    panel.replaceChildren(
      el(
        'div',
        {class: 'panel-head'},
        el('h3', {class: 'details-name', text: actor.name || actor.class_name || actor.actor_id}),
        badge(actor.state),
      ),
      el('div', {class: 'details-class muted', text: actor.class_name || ''}),
      kvTable([
        ['Actor ID', el('span', {class: 'mono wrap', text: actor.actor_id || '–'})],
        ['Node', nodeCell(actor.node_id, 16)],
        ['Address', actor.address || '–'],
        ['PID', actor.pid ?? '–'],
        ['Resources', fmtResources(actor.resources)],
        ['Restarts', actor.num_restarts ?? 0],
        ['Uptime', fmtDuration(actor.uptime_s)],
        ['Job', actor.job_id || '–'],
        actor.status_message ? ['Status', actor.status_message] : null,
      ]),
      extra || null,
      el('h4', {text: 'Log tail'}),
      log,
    );
    if (scroll.atBottom) log.scrollTop = log.scrollHeight;
    else log.scrollTop = scroll.top;
  }

  function renderPanelMessage(panel, text, isError) {
    delete panel.dataset.actorId;
    panel.replaceChildren(el('p', {class: isError ? 'error-text' : 'muted', text}));
  }

  // ---------------------------------------------------------------------------------------------
  // Cluster view.

  const clusterView = {
    section: 'view-cluster',
    mount() {},
    unmount() {},
    async refresh() {
      const r = await settle({
        nodes: getJson('api/nodes'),
        actors: getJson('api/actors'),
        jobs: getJson('api/jobs/'),
        pgs: getJson('api/placement_groups'),
      });
      if (r.nodes) {
        rememberNodes(r.nodes.nodes || []);
        this.renderNodes(r.nodes.nodes || []);
      }
      this.renderSummary(
        r.nodes && r.nodes.nodes,
        r.actors && r.actors.actors,
        r.jobs && r.jobs.jobs,
      );
      if (r.pgs) this.renderPlacementGroups(r.pgs.placement_groups || []);
      if (r.error) throw r.error;
    },
    renderSummary(nodes, actors, jobs) {
      const cards = [];
      if (nodes) {
        const alive = nodes.filter((n) => n.state === 'ALIVE');
        cards.push(summaryCard('Nodes', `${alive.length}`, `of ${nodes.length} alive`));
        for (const resource of ['CPU', 'GPU']) {
          let used = 0;
          let total = 0;
          for (const n of alive) {
            total += (n.resources_total || {})[resource] || 0;
            used += (n.resources_used || {})[resource] || 0;
          }
          if (total > 0 || resource === 'CPU') {
            cards.push(
              summaryCard(`${resource} in use`, fmtNumber(used), `of ${fmtNumber(total)}`),
            );
          }
        }
      }
      if (actors) {
        const counts = Object.fromEntries(ACTOR_STATES.map((s) => [s, 0]));
        for (const a of actors) counts[a.state] = (counts[a.state] || 0) + 1;
        cards.push(
          el(
            'div',
            {class: 'card summary-card'},
            el('div', {class: 'summary-label', text: 'Actors'}),
            el(
              'div',
              {class: 'summary-states'},
              ACTOR_STATES.map((s) =>
                el(
                  'a',
                  {
                    class: 'summary-state',
                    href: `#/actors?state=${s}`,
                    title: `Show ${s} actors`,
                  },
                  el('span', {class: `dot state-${s}`}),
                  `${counts[s]} ${s.toLowerCase()}`,
                ),
              ),
            ),
          ),
        );
      }
      if (jobs) {
        const running = jobs.filter((j) => j.status === 'RUNNING').length;
        cards.push(summaryCard('Jobs running', `${running}`, `of ${jobs.length}`));
      }
      $('#cluster-summary').replaceChildren(...cards);
    },
    renderNodes(nodes) {
      const list = $('#node-list');
      if (!nodes.length) {
        list.replaceChildren(
          el('p', {class: 'muted', text: 'No nodes have registered with the head.'}),
        );
        return;
      }
      const sorted = nodes
        .slice()
        .sort(
          (a, b) =>
            (a.state === 'DEAD') - (b.state === 'DEAD') ||
            String(a.hostname).localeCompare(b.hostname),
        );
      list.replaceChildren(...sorted.map((n) => nodeCard(n)));
    },
    renderPlacementGroups(pgs) {
      const tbody = $('#pg-table tbody');
      if (!pgs.length) {
        tbody.replaceChildren(emptyRow(6, 'No placement groups.'));
        return;
      }
      tbody.replaceChildren(
        ...pgs.map((pg) =>
          el(
            'tr',
            null,
            el('td', null, idCell(pg.id)),
            el('td', {text: pg.name || '–'}),
            el('td', {text: pg.strategy || '–'}),
            el('td', null, badge(pg.state)),
            el(
              'td',
              null,
              (pg.bundles || []).map((b, i) =>
                el(
                  'div',
                  {class: 'bundle'},
                  el('span', {class: 'muted', text: `#${i} `}),
                  fmtResources(b.resources),
                  b.node_id ? el('span', {class: 'muted'}, ' on ', nodeCell(b.node_id)) : null,
                ),
              ),
            ),
            el('td', {class: 'wrap', text: pg.status_message || ''}),
          ),
        ),
      );
    },
  };

  function summaryCard(label, value, sub) {
    return el(
      'div',
      {class: 'card summary-card'},
      el('div', {class: 'summary-label', text: label}),
      el(
        'div',
        {class: 'summary-value'},
        value,
        el('span', {class: 'summary-sub', text: ` ${sub}`}),
      ),
    );
  }

  function nodeCard(n) {
    const total = n.resources_total || {};
    const used = n.resources_used || {};
    const names = Object.keys(total)
      .filter((k) => isNum(total[k]) && (total[k] > 0 || k === 'CPU'))
      .sort((a, b) => resourceOrder(a) - resourceOrder(b) || a.localeCompare(b));
    const age =
      isNum(n.last_heartbeat_ms) && n.last_heartbeat_ms > 0
        ? (Date.now() - n.last_heartbeat_ms) / 1000
        : null;
    return el(
      'div',
      {
        class: `card node-card${n.state === 'DEAD' ? ' node-dead' : ''}`,
        dataset: {nodeId: n.node_id || ''},
      },
      el(
        'div',
        {class: 'panel-head'},
        el('h3', {text: n.hostname || n.node_id || 'node'}),
        badge(n.state),
      ),
      el(
        'div',
        {class: 'node-meta muted'},
        idCell(n.node_id, 12),
        ' · ',
        el('span', {class: 'mono', text: n.address || '–'}),
        age !== null ? ` · heartbeat ${fmtDuration(Math.max(0, age))} ago` : '',
      ),
      el(
        'div',
        {class: 'bars'},
        names.length
          ? names.map((k) => resourceBar(k, used[k] || 0, total[k]))
          : el('p', {class: 'muted', text: 'No resources reported.'}),
      ),
    );
  }

  function resourceOrder(name) {
    const order = {CPU: 0, GPU: 1, memory: 2, object_store_memory: 3};
    return name in order ? order[name] : 10;
  }

  function resourceBar(name, used, total) {
    const fraction = total > 0 ? Math.min(1, Math.max(0, used / total)) : 0;
    const level = fraction >= 0.9 ? 'high' : fraction >= 0.6 ? 'mid' : 'low';
    return el(
      'div',
      {class: 'bar-row', dataset: {resource: name}},
      el('span', {class: 'bar-label', text: name}),
      el(
        'div',
        {
          'class': 'bar',
          'role': 'meter',
          'aria-valuemin': 0,
          'aria-valuemax': total,
          'aria-valuenow': used,
          'title':
            `${name}: ${fmtResourceAmount(name, used)} of ` +
            `${fmtResourceAmount(name, total)} in use`,
        },
        el('div', {class: `bar-fill bar-${level}`, style: `width:${(fraction * 100).toFixed(1)}%`}),
      ),
      el('span', {
        class: 'bar-value',
        text: `${fmtResourceAmount(name, used)} / ${fmtResourceAmount(name, total)}`,
      }),
    );
  }

  // ---------------------------------------------------------------------------------------------
  // Actors view.

  const actorsView = {
    section: 'view-actors',
    state: '',
    job: '',
    text: '',
    selected: null,
    actors: [],
    jobIds: '',
    mount(route) {
      this.token = {};
      this.state = route.params.get('state') || '';
      this.job = route.params.get('job') || '';
      this.selected = null;
      this.actors = [];
      $('#actor-filter-state').value = this.state;
      $('#actor-filter-text').value = this.text;
      const job = $('#actor-filter-job');
      if (this.job && ![...job.options].some((o) => o.value === this.job)) {
        job.append(el('option', {value: this.job, text: this.job}));
      }
      job.value = this.job;
      renderPanelMessage(
        $('#actor-details-panel'),
        'Select an actor to see its details and log tail.',
      );
    },
    unmount() {},
    // Filter changes re-query at once and keep the filters in the URL (shareable links).
    onFilterChange() {
      this.state = $('#actor-filter-state').value;
      this.job = $('#actor-filter-job').value;
      history.replaceState(null, '', `#/actors${this.query()}`);
      pollNow();
    },
    // The actor-table query for the current filters ("?job=...&state=..." or "").
    query() {
      const params = new URLSearchParams();
      if (this.job) params.set('job', this.job);
      if (this.state) params.set('state', this.state);
      const query = params.toString();
      return query ? `?${query}` : '';
    },
    async refresh() {
      const query = this.query();
      const token = this.token;
      const selected = this.selected;
      const r = await settle({
        actors: getJson(`api/actors${query}`),
        jobs: getJson('api/jobs/'),
        details: selected ? getJson(`api/actors/${enc(selected)}`) : undefined,
        nodes: refreshNodeNames(),
      });
      if (token !== this.token) return;
      if (r.jobs) this.renderJobOptions(r.jobs.jobs || []);
      // Answers for filters or a selection changed meanwhile are dropped; pollNow() re-asks.
      if (r.actors && query === this.query()) {
        this.actors = r.actors.actors || [];
        this.renderTable();
      }
      const panel = $('#actor-details-panel');
      if (selected && selected === this.selected) {
        if (r.details) renderActorDetails(panel, r.details);
        else if (r.errors.details && r.errors.details.status === 404) {
          renderPanelMessage(panel, `The head no longer knows actor ${selected}.`, true);
        }
      }
      if (r.error) throw r.error;
    },
    renderJobOptions(jobs) {
      const ids = jobs.map((j) => j.job_id).filter(Boolean);
      if (this.job && !ids.includes(this.job)) ids.push(this.job);
      const key = ids.join('\n');
      if (key === this.jobIds) return; // Leave an open <select> alone when nothing changed.
      this.jobIds = key;
      const select = $('#actor-filter-job');
      const names = new Map(jobs.map((j) => [j.job_id, j.name]));
      select.replaceChildren(
        el('option', {value: '', text: 'All'}),
        ...ids.map((id) =>
          el('option', {value: id, text: names.get(id) ? `${id} (${names.get(id)})` : id}),
        ),
      );
      select.value = this.job;
    },
    renderTable() {
      this.text = $('#actor-filter-text').value.trim().toLowerCase();
      const text = this.text;
      const rows = this.actors.filter(
        (a) =>
          !text ||
          [a.actor_id, a.class_name, a.name].some((f) =>
            String(f || '')
              .toLowerCase()
              .includes(text),
          ),
      );
      $('#actor-count').textContent = `${rows.length} actor${rows.length === 1 ? '' : 's'}`;
      const tbody = $('#actor-table tbody');
      if (!rows.length) {
        tbody.replaceChildren(emptyRow(10, 'No actors match.'));
        return;
      }
      tbody.replaceChildren(
        ...rows.map((a) =>
          el(
            'tr',
            {
              class: a.actor_id === this.selected ? 'selected' : null,
              dataset: {actorId: a.actor_id || '', state: a.state || ''},
              onclick: () => this.select(a.actor_id),
            },
            el('td', null, idCell(a.actor_id)),
            el('td', {text: a.class_name || '–'}),
            el('td', {text: a.name || '–'}),
            el('td', null, badge(a.state)),
            el('td', null, nodeCell(a.node_id)),
            el('td', {class: 'mono', text: a.pid ?? '–'}),
            el('td', {text: fmtResources(a.resources)}),
            el('td', {class: 'num', text: a.num_restarts ?? 0}),
            el('td', {class: 'num', text: fmtDuration(a.uptime_s)}),
            el(
              'td',
              null,
              a.job_id
                ? el('a', {
                    href: `#/jobs/${enc(a.job_id)}`,
                    text: a.job_id,
                    onclick: (e) => e.stopPropagation(),
                  })
                : '–',
            ),
          ),
        ),
      );
    },
    select(actorId) {
      this.selected = actorId;
      const actor = this.actors.find((a) => a.actor_id === actorId);
      if (actor) renderActorDetails($('#actor-details-panel'), actor);
      this.renderTable();
      pollNow();
    },
  };

  // ---------------------------------------------------------------------------------------------
  // Jobs list view.

  const jobsView = {
    section: 'view-jobs',
    mount() {},
    unmount() {},
    async refresh() {
      const body = await getJson('api/jobs/');
      const jobs = (body.jobs || [])
        .slice()
        .sort((a, b) => (b.submitted_ms || 0) - (a.submitted_ms || 0));
      const tbody = $('#job-table tbody');
      if (!jobs.length) {
        tbody.replaceChildren(
          emptyRow(6, 'No jobs yet. Submit one with `troupe job submit job.yaml`.'),
        );
        return;
      }
      tbody.replaceChildren(
        ...jobs.map((j) =>
          el(
            'tr',
            {
              dataset: {jobId: j.job_id || ''},
              onclick: () => {
                location.hash = `#/jobs/${enc(j.job_id)}`;
              },
            },
            el(
              'td',
              null,
              el('a', {class: 'mono', href: `#/jobs/${enc(j.job_id)}`, text: j.job_id}),
            ),
            el('td', {text: j.name || '–'}),
            el('td', null, badge(j.status)),
            el('td', {text: fmtTime(j.submitted_ms)}),
            el('td', {class: 'num', text: fmtDuration(jobDuration(j))}),
            el('td', {class: 'wrap', text: j.message || ''}),
          ),
        ),
      );
    },
  };

  function jobDuration(j) {
    if (!isNum(j.start_ms) || j.start_ms <= 0) return null;
    const end = isNum(j.end_ms) && j.end_ms > 0 ? j.end_ms : Date.now();
    return (end - j.start_ms) / 1000;
  }

  // ---------------------------------------------------------------------------------------------
  // Job view: header, actor graph, details panel, charts, driver log.

  const GRAPH_STYLE = [
    {
      selector: 'node',
      style: {
        'shape': 'round-rectangle',
        'width': 'data(width)',
        'height': 44,
        'background-color': 'data(fill)',
        'border-width': 2,
        'border-color': 'data(border)',
        'label': 'data(display)',
        'text-wrap': 'wrap',
        'text-valign': 'center',
        'text-halign': 'center',
        'font-size': 11,
        'font-family': 'system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif',
        'color': '#111827',
        'line-height': 1.35,
      },
    },
    {
      selector: 'node[kind = "driver"]',
      style: {'shape': 'ellipse', 'border-style': 'dashed', 'color': '#374151'},
    },
    {
      selector: 'node:selected',
      style: {'border-width': 4, 'border-color': '#1d4ed8', 'overlay-opacity': 0},
    },
    {
      selector: 'edge',
      style: {
        'curve-style': 'bezier',
        'width': 'data(lineWidth)',
        'line-color': 'data(color)',
        'target-arrow-color': 'data(color)',
        'target-arrow-shape': 'triangle',
        'arrow-scale': 0.9,
        // The label sits along the edge, ~1/4 of the way from its source (see placeEdgeLabels):
        // off the middle, where crossing edges would put their labels on top of each other.
        'source-label': 'data(label)',
        'source-text-offset': 'data(labelOffset)',
        'source-text-rotation': 'autorotate',
        'font-size': 10,
        'color': '#374151',
        'text-background-color': '#ffffff',
        'text-background-opacity': 0.9,
        'text-background-padding': 2,
        'text-background-shape': 'roundrectangle',
        'opacity': 0.9,
      },
    },
    {selector: 'edge[kind = "weights"]', style: {'line-style': 'dashed'}},
    {
      // Edges that run against the data flow (weights going back to the rollout workers) are left
      // out of the layout and drawn as arcs so they do not cut through the vertices in between.
      selector: 'edge.back',
      style: {
        'curve-style': 'unbundled-bezier',
        'control-point-distances': 'data(bow)',
        'control-point-weights': 0.5,
      },
    },
    {
      selector: 'edge:selected',
      style: {
        'opacity': 1,
        'overlay-opacity': 0,
        'color': '#111827',
        'underlay-color': '#93c5fd',
        'underlay-opacity': 0.6,
        'underlay-padding': 3,
      },
    },
  ];

  // Cytoscape elements for /api/graph: one vertex per actor, a "driver" vertex when an edge
  // starts or ends at the driver, edges whose endpoints are both known.
  function graphElements(graph) {
    const nodes = Array.isArray(graph.nodes) ? graph.nodes : [];
    const ids = new Set(nodes.map((n) => String(n.id)));
    const elements = [];
    for (const n of nodes) {
      const label = n.label || n.id;
      const cls = n.class || '';
      const [fill, border] = STATE_COLORS[n.state] || UNKNOWN_STATE_COLORS;
      const longest = Math.max(String(label).length, cls.length);
      elements.push({
        group: 'nodes',
        data: {
          id: String(n.id),
          kind: 'actor',
          label,
          cls,
          state: n.state || '',
          node_id: n.node_id || '',
          display: cls && cls !== label ? `${label}\n${cls}` : String(label),
          width: Math.max(96, Math.round(longest * 6.6 + 28)),
          fill,
          border,
        },
      });
    }
    let driver = false;
    const edges = [];
    for (const e of Array.isArray(graph.edges) ? graph.edges : []) {
      const source = String(e.source);
      const target = String(e.target);
      const known = (id) => ids.has(id) || id === 'driver';
      if (!known(source) || !known(target)) continue;
      if (source === 'driver' || target === 'driver') driver = true;
      const kind = e.kind || 'call';
      let label = fmtRate(e.rate);
      if (kind === 'samples' && isNum(e.staleness))
        label += ` · stale ${fmtNumber(e.staleness, 2)}`;
      const bytes = isNum(e.bytes_per_s) ? e.bytes_per_s : 0;
      edges.push({
        group: 'edges',
        data: {
          id: `${source}>${target}:${kind}:${e.method || ''}`,
          source,
          target,
          kind,
          method: e.method || '',
          rate: e.rate ?? null,
          bytes_per_s: e.bytes_per_s ?? null,
          staleness: e.staleness ?? null,
          label,
          color: EDGE_COLORS[kind] || EDGE_COLORS.call,
          bytes,
          lineWidth: 2,
          bow: 0,
          labelOffset: 40,
        },
      });
    }
    if (driver && !ids.has('driver')) {
      elements.push({
        group: 'nodes',
        data: {
          id: 'driver',
          kind: 'driver',
          label: 'driver',
          cls: '',
          state: '',
          display: 'driver',
          width: 90,
          fill: '#f9fafb',
          border: '#6b7280',
        },
      });
    }
    // Line width 1.5-4.5 px by bytes/s, on a log scale relative to the busiest edge.
    const maxBytes = Math.max(1, ...edges.map((e) => e.data.bytes));
    for (const e of edges) {
      e.data.lineWidth = +(1.5 + (3 * Math.log1p(e.data.bytes)) / Math.log1p(maxBytes)).toFixed(2);
    }
    return elements.concat(edges);
  }

  // Puts the driver vertex (outside the layout) below the actors it talks to.
  function placeDriver(cy) {
    const driver = cy.getElementById('driver');
    if (driver.empty()) return;
    const others = cy.nodes().not(driver);
    const peers = driver.neighborhood('node');
    if (others.empty()) {
      driver.position({x: 0, y: 0});
      return;
    }
    const box = others.boundingBox();
    const x = peers.nonempty()
      ? peers.toArray().reduce((sum, n) => sum + n.position('x'), 0) / peers.length
      : (box.x1 + box.x2) / 2;
    driver.position({x, y: box.y2 + 80});
  }

  // Sets each edge's label offset (from the source vertex's border) to ~1/4 of the free length
  // between its two vertices, but never so close to either end that the label covers a vertex.
  function placeEdgeLabels(edges) {
    edges.forEach((edge) => {
      const a = edge.source();
      const b = edge.target();
      const length = Math.hypot(
        b.position('x') - a.position('x'),
        b.position('y') - a.position('y'),
      );
      const free = Math.max(0, length - a.outerWidth() / 2 - b.outerWidth() / 2);
      const half = (String(edge.data('label') || '').length * 5.6) / 2 + 8; // ~10px font.
      edge.data('labelOffset', Math.round(Math.max(half, Math.min(0.28 * free, free - half))));
    });
  }

  // Bends each feedback edge into an arc that clears every other vertex: of the bends tried
  // (growing, to either side), the smallest whose curve misses all vertex boxes wins.
  function bowBackEdges(cy, back) {
    const PAD = 10;
    back.forEach((edge) => {
      const source = edge.source();
      const target = edge.target();
      const a = source.position();
      const b = target.position();
      const length = Math.hypot(b.x - a.x, b.y - a.y) || 1;
      // Cytoscape puts the control point at distance d along the normal (-dy, dx) of
      // source->target.
      const normal = {x: -(b.y - a.y) / length, y: (b.x - a.x) / length};
      const mid = {x: (a.x + b.x) / 2, y: (a.y + b.y) / 2};
      const boxes = cy
        .nodes()
        .not(source)
        .not(target)
        .map((n) => n.boundingBox());
      const clear = (d) => {
        const c = {x: mid.x + d * normal.x, y: mid.y + d * normal.y};
        for (let i = 1; i < 24; i++) {
          const t = i / 24;
          const x = (1 - t) ** 2 * a.x + 2 * (1 - t) * t * c.x + t ** 2 * b.x;
          const y = (1 - t) ** 2 * a.y + 2 * (1 - t) * t * c.y + t ** 2 * b.y;
          if (
            boxes.some(
              (box) => x > box.x1 - PAD && x < box.x2 + PAD && y > box.y1 - PAD && y < box.y2 + PAD,
            )
          ) {
            return false;
          }
        }
        return true;
      };
      let bow = null;
      for (let d = 40; d <= 600 && bow === null; d += 20) {
        if (clear(d)) bow = d;
        else if (clear(-d)) bow = -d;
      }
      edge.data('bow', bow === null ? 80 : bow);
    });
  }

  const jobView = {
    section: 'view-job',
    jobId: null,
    job: null,
    cy: null,
    charts: new Map(), // chart id -> {spec, container, plot}
    resizeObserver: null,
    selection: null, // {type: 'actor' | 'edge' | 'driver', id}
    logOffset: 0,
    logDecoder: null,
    logDone: false,
    metrics: {},
    notFound: false,

    mount(route) {
      this.token = {}; // Identifies this mount: late answers for an earlier mount are dropped.
      this.jobId = route.jobId;
      this.job = null;
      this.selection = null;
      this.logOffset = 0;
      this.logDecoder = new TextDecoder();
      this.logDone = false;
      this.metrics = {};
      this.notFound = false;
      $('#job-header').replaceChildren(el('h1', {class: 'job-title', text: `Job ${this.jobId}`}));
      const log = $('#job-log');
      log.textContent = '';
      log.dataset.offset = '0';
      $('#metrics-step').textContent = '';
      $('#metric-values tbody').replaceChildren();
      renderPanelMessage(
        $('#details-panel'),
        'Click an actor in the graph to see its details and log tail.',
      );
      this.mountGraph();
      this.mountCharts();
    },

    unmount() {
      if (this.cy) this.cy.destroy();
      this.cy = null;
      window.troupeGraph = null;
      for (const c of this.charts.values()) if (c.plot) c.plot.destroy();
      this.charts.clear();
      if (this.resizeObserver) this.resizeObserver.disconnect();
      this.resizeObserver = null;
    },

    pollMs() {
      return this.notFound || (this.job && TERMINAL_JOB_STATES.has(this.job.status) && this.logDone)
        ? POLL_FINISHED_MS
        : POLL_MS;
    },

    mountGraph() {
      $('#graph-legend').replaceChildren(
        ...Object.entries(STATE_COLORS).map(([state, [fill, border]]) =>
          el(
            'span',
            {class: 'legend-item'},
            el('span', {
              class: 'legend-swatch',
              style: `background:${fill};border-color:${border}`,
            }),
            state.toLowerCase(),
          ),
        ),
        ...Object.entries(EDGE_COLORS).map(([kind, color]) =>
          el(
            'span',
            {class: 'legend-item'},
            el('span', {class: `legend-line legend-${kind}`, style: `border-color:${color}`}),
            kind,
          ),
        ),
      );
      this.cy = cytoscape({
        container: $('#graph'),
        elements: [],
        style: GRAPH_STYLE,
        minZoom: 0.2,
        maxZoom: 2.5,
        boxSelectionEnabled: false,
      });
      window.troupeGraph = this.cy;
      this.cy.on('tap', 'node', (e) => this.selectVertex(e.target));
      this.cy.on('dragfree', 'node', (e) => placeEdgeLabels(e.target.connectedEdges()));
      this.cy.on('tap', 'edge', (e) => this.selectEdge(e.target));
      this.cy.on('tap', (e) => {
        if (e.target === this.cy) this.clearSelection();
      });
      $('#graph-fit').onclick = () => this.cy && this.cy.fit(undefined, 24);
    },

    mountCharts() {
      const grid = $('#chart-grid');
      grid.replaceChildren();
      this.charts.clear();
      for (const spec of CHARTS) {
        const container = el(
          'div',
          {
            class: 'chart',
            dataset: {
              metric: spec.series[0].metric,
              metrics: spec.series.map((s) => s.metric).join(' '),
              chart: spec.id,
              points: '0',
            },
          },
          el('div', {class: 'chart-empty muted', text: 'waiting for data…'}),
        );
        grid.append(
          el(
            'div',
            {class: 'card chart-card'},
            el('div', {class: 'chart-title', text: spec.title}),
            container,
          ),
        );
        this.charts.set(spec.id, {spec, container, plot: null});
      }
      this.resizeObserver = new ResizeObserver(() => {
        for (const c of this.charts.values()) {
          if (c.plot && c.container.clientWidth > 0) {
            c.plot.setSize({width: c.container.clientWidth, height: CHART_HEIGHT});
          }
        }
        if (this.cy) this.cy.resize();
      });
      this.resizeObserver.observe(grid);
      this.resizeObserver.observe($('#graph'));
    },

    async refresh() {
      const id = enc(this.jobId);
      const token = this.token;
      const selection = this.selection;
      const r = await settle({
        job: getJson(`api/jobs/${id}`),
        graph: getJson(`api/graph?job=${id}`),
        metrics: getJson(`api/jobs/${id}/metrics`),
        log: this.logDone ? undefined : this.fetchLog(token),
        actor:
          selection && selection.type === 'actor'
            ? getJson(`api/actors/${enc(selection.id)}`)
            : undefined,
        nodes: refreshNodeNames(),
      });
      if (token !== this.token) return;
      const {errors} = r;
      if (r.job) {
        this.job = r.job;
        this.renderHeader();
      } else if (errors.job && errors.job.status === 404) {
        this.notFound = true;
        $('#job-header').replaceChildren(
          el('h1', {class: 'job-title', text: `Job ${this.jobId}`}),
          el('p', {class: 'error-text', text: `The head knows no job with id "${this.jobId}".`}),
          el('a', {href: '#/jobs', text: '← all jobs'}),
        );
        return;
      }
      if (r.graph) this.updateGraph(r.graph);
      if (r.metrics) {
        this.metrics = normalizeMetrics(r.metrics);
        this.updateCharts();
      }
      if (this.selection === selection && selection && selection.type === 'actor') {
        if (r.actor) this.renderSelectedActor(r.actor);
        else if (errors.actor && errors.actor.status === 404) {
          renderPanelMessage(
            $('#details-panel'),
            `The head no longer knows actor ${selection.id}.`,
            true,
          );
        }
      }
      // A job that has not written metrics or log yet may answer 404 there: not an error.
      for (const name of ['metrics', 'log']) {
        if (errors[name] && errors[name].status === 404) delete errors[name];
      }
      const first = Object.values(errors)[0];
      if (first) throw first;
    },

    renderHeader() {
      const j = this.job;
      const facts = [
        el('span', {class: 'mono', text: j.job_id || this.jobId}),
        `submitted ${fmtTime(j.submitted_ms)}`,
      ];
      const duration = jobDuration(j);
      if (duration !== null) {
        facts.push(
          `${TERMINAL_JOB_STATES.has(j.status) ? 'ran' : 'running for'} ${fmtDuration(duration)}`,
        );
      }
      if (j.logging_dir)
        facts.push(el('span', {class: 'mono', title: 'logging directory', text: j.logging_dir}));
      const children = [
        el(
          'div',
          {class: 'job-title-row'},
          el('a', {class: 'back', href: '#/jobs', title: 'All jobs', text: '←'}),
          el('h1', {class: 'job-title', text: j.name || j.job_id || this.jobId}),
          badge(j.status),
        ),
        el(
          'div',
          {class: 'job-facts muted'},
          facts.flatMap((f, i) => (i ? [' · ', f] : [f])),
        ),
      ];
      if (j.message) {
        children.push(
          el('div', {
            class: `job-message${j.status === 'FAILED' ? ' error-text' : ''}`,
            text: j.message,
          }),
        );
      }
      if (j.summary && typeof j.summary === 'object' && Object.keys(j.summary).length) {
        children.push(
          el(
            'div',
            {class: 'job-summary'},
            Object.entries(j.summary).map(([k, v]) =>
              el(
                'span',
                {class: 'chip'},
                el('span', {class: 'muted', text: `${k} `}),
                typeof v === 'number'
                  ? fmtNumber(v, 4)
                  : typeof v === 'object'
                    ? JSON.stringify(v)
                    : String(v),
              ),
            ),
          ),
        );
      }
      $('#job-header').replaceChildren(...children);
    },

    updateGraph(graph) {
      const cy = this.cy;
      if (!cy) return;
      const elements = graphElements(graph);
      const wanted = new Set(elements.map((e) => e.data.id));
      let changed = false;
      cy.batch(() => {
        for (const ele of cy.elements().toArray()) {
          if (!ele.removed() && !wanted.has(ele.id())) {
            ele.remove();
            changed = true;
          }
        }
        for (const e of elements) {
          const existing = cy.getElementById(e.data.id);
          if (existing.nonempty()) {
            if (existing.isEdge()) {
              // Keep what the last layout computed.
              e.data.bow = existing.data('bow');
              e.data.labelOffset = existing.data('labelOffset');
            }
            existing.data(e.data);
          } else {
            cy.add(e);
            changed = true;
          }
        }
      });
      $('#graph-empty').hidden = cy.nodes().nonempty();
      if (changed) {
        // A weights edge into an actor that also has data edges is a feedback edge: ranking by
        // the data flow alone reads left to right (driver, rollouts, buffer, trainer, ...).
        cy.edges().removeClass('back');
        const back = cy.edges('[kind = "weights"]').filter((e) =>
          e
            .target()
            .connectedEdges()
            .some((o) => o.data('kind') !== 'weights'),
        );
        back.addClass('back');
        const driver = cy.getElementById('driver');
        // When every data edge runs through the driver (the GRPO recipe's driver calls each actor
        // and moves the data itself), the actors have no edges of their own: a star reads best,
        // the driver on top and its actors in a row below. Otherwise the actors' own data flow
        // sets the ranks and the driver is placed under its peers.
        const own = cy.edges().not(back).not(driver.connectedEdges());
        const star = driver.nonempty() && own.empty();
        const laidOut = star
          ? cy.elements().not(back)
          : cy.elements().not(back).not(driver).not(driver.connectedEdges());
        laidOut
          .layout({
            name: 'dagre',
            rankDir: star ? 'TB' : 'LR',
            nodeSep: star ? 24 : 40,
            rankSep: star ? 110 : 150,
            edgeSep: 16,
            padding: 24,
            fit: false,
            animate: false,
          })
          .run();
        if (!star) placeDriver(cy);
        bowBackEdges(cy, back);
        placeEdgeLabels(cy.edges());
        cy.fit(undefined, 24);
        if (cy.zoom() > 1.4) {
          cy.zoom(1.4);
          cy.center();
        }
      }
      // Keep an edge or driver selection's panel current (actors refresh through their own fetch).
      if (this.selection && this.selection.type !== 'actor') {
        const ele = cy.getElementById(this.selection.id);
        if (ele.nonempty()) {
          if (this.selection.type === 'edge') this.renderEdge(ele);
          else this.renderDriver();
        }
      }
    },

    selectVertex(node) {
      if (node.data('kind') === 'driver') {
        this.selection = {type: 'driver', id: node.id()};
        this.renderDriver();
        return;
      }
      this.selection = {type: 'actor', id: node.id()};
      const panel = $('#details-panel');
      // Show what the graph knows at once; the full record and log tail follow.
      renderActorDetails(
        panel,
        {
          actor_id: node.id(),
          name: node.data('label'),
          class_name: node.data('cls'),
          state: node.data('state'),
          node_id: node.data('node_id'),
          log_tail: 'loading…',
        },
        this.edgeSummary(node),
      );
      const selection = this.selection;
      getJson(`api/actors/${enc(node.id())}`)
        .then((actor) => {
          if (this.selection === selection) this.renderSelectedActor(actor);
        })
        .catch((e) => {
          if (this.selection === selection) renderPanelMessage(panel, e.message, true);
        });
    },

    renderSelectedActor(actor) {
      const node = this.cy ? this.cy.getElementById(this.selection.id) : null;
      renderActorDetails(
        $('#details-panel'),
        actor,
        node && node.nonempty() ? this.edgeSummary(node) : null,
      );
    },

    // The vertex's channels: one line per incoming and outgoing edge.
    edgeSummary(node) {
      const rows = [];
      const name = (ele) => ele.data('label') || ele.id();
      for (const e of node.connectedEdges().toArray()) {
        const outgoing = e.source().id() === node.id();
        const peer = outgoing ? e.target() : e.source();
        const parts = [fmtRate(e.data('rate'))];
        if (isNum(e.data('bytes_per_s'))) parts.push(`${fmtBytes(e.data('bytes_per_s'))}/s`);
        if (isNum(e.data('staleness')))
          parts.push(`staleness ${fmtNumber(e.data('staleness'), 2)}`);
        rows.push(
          el(
            'li',
            null,
            el('span', {class: `edge-kind edge-${e.data('kind')}`, text: e.data('kind')}),
            ` ${outgoing ? '→' : '←'} ${name(peer)}`,
            e.data('method')
              ? el('span', {class: 'mono muted', text: ` ${e.data('method')}`})
              : null,
            el('div', {class: 'muted small', text: parts.join(' · ')}),
          ),
        );
      }
      if (!rows.length) return null;
      return el('div', {class: 'edge-summary'}, el('h4', {text: 'Channels'}), el('ul', null, rows));
    },

    selectEdge(edge) {
      this.selection = {type: 'edge', id: edge.id()};
      this.renderEdge(edge);
    },

    renderEdge(edge) {
      const panel = $('#details-panel');
      delete panel.dataset.actorId;
      const d = edge.data();
      const name = (ele) => ele.data('label') || ele.id();
      panel.replaceChildren(
        el(
          'div',
          {class: 'panel-head'},
          el('h3', {
            class: 'details-name',
            text: `${name(edge.source())} → ${name(edge.target())}`,
          }),
          el('span', {class: `edge-kind edge-${d.kind}`, text: d.kind}),
        ),
        kvTable([
          ['Method', d.method || '–'],
          ['Rate', fmtRate(d.rate)],
          ['Bytes', isNum(d.bytes_per_s) ? `${fmtBytes(d.bytes_per_s)}/s` : '–'],
          d.kind === 'samples'
            ? ['Staleness', isNum(d.staleness) ? `${fmtNumber(d.staleness, 3)} versions` : '–']
            : null,
        ]),
      );
    },

    renderDriver() {
      const panel = $('#details-panel');
      delete panel.dataset.actorId;
      const j = this.job || {};
      panel.replaceChildren(
        el(
          'div',
          {class: 'panel-head'},
          el('h3', {class: 'details-name', text: 'Job driver'}),
          badge(j.status),
        ),
        el('p', {
          class: 'muted',
          text: 'The process the head runs for this job; its output is the driver log below.',
        }),
        kvTable([
          ['Job', j.job_id || this.jobId],
          ['Logging dir', j.logging_dir || '–'],
        ]),
      );
    },

    clearSelection() {
      this.selection = null;
      renderPanelMessage(
        $('#details-panel'),
        'Click an actor in the graph to see its details and log tail.',
      );
    },

    updateCharts() {
      let lastStep = null;
      for (const c of this.charts.values()) {
        const data = chartData(c.spec, this.metrics);
        const points = data[0].length;
        if (points) lastStep = Math.max(lastStep ?? -Infinity, data[0][points - 1]);
        if (!points && !c.plot) continue;
        if (!c.plot) {
          if (c.container.clientWidth === 0) continue; // Not laid out yet; next poll.
          c.container.replaceChildren();
          c.plot = new uPlot(chartOptions(c.spec, c.container.clientWidth), data, c.container);
        } else {
          c.plot.setData(data);
        }
        c.container.dataset.points = String(points); // What is plotted now.
      }
      $('#metrics-step').textContent = lastStep !== null ? `· step ${lastStep}` : '';
      this.renderMetricTable();
    },

    renderMetricTable() {
      const names = Object.keys(this.metrics).sort();
      const details = $('#metric-values');
      details.querySelector('summary').textContent = `All metrics (${names.length})`;
      details.querySelector('tbody').replaceChildren(
        ...names.map((name) => {
          const s = this.metrics[name];
          const i = s.step.length - 1;
          return el(
            'tr',
            null,
            el('td', {class: 'mono', text: name}),
            el('td', {class: 'num', text: i >= 0 ? s.step[i] : '–'}),
            el('td', {class: 'num', text: i >= 0 ? fmtNumber(s.value[i], 4) : '–'}),
          );
        }),
      );
    },

    // Reads the driver log from logOffset; the head answers with the bytes from there and the new
    // end in X-Log-Offset. Decoding streams so a UTF-8 character split between polls stays whole.
    async fetchLog(token) {
      const response = await request(`api/jobs/${enc(this.jobId)}/logs?offset=${this.logOffset}`);
      const buffer = await response.arrayBuffer();
      if (token !== this.token) return;
      const header = Number(response.headers.get('X-Log-Offset'));
      const next =
        Number.isFinite(header) && header >= this.logOffset
          ? header
          : this.logOffset + buffer.byteLength;
      const text = this.logDecoder.decode(new Uint8Array(buffer), {stream: true});
      this.logOffset = next;
      const pre = $('#job-log');
      pre.dataset.offset = String(next);
      if (text) {
        followBottom(pre, () => {
          pre.append(text);
          if (pre.textContent.length > LOG_KEEP_CHARS) {
            const kept = pre.textContent.slice(-LOG_KEEP_CHARS);
            const tail = kept.slice(kept.indexOf('\n') + 1);
            pre.textContent = `… (earlier output trimmed; the head keeps the full log)\n${tail}`;
          }
        });
      } else if (this.job && TERMINAL_JOB_STATES.has(this.job.status)) {
        this.logDone = true; // Ended and fully read.
      }
    },
  };

  function chartOptions(spec, width) {
    return {
      width,
      height: CHART_HEIGHT,
      cursor: {sync: {key: 'troupe-steps'}, drag: {x: true, y: false}},
      legend: {show: true, live: true},
      scales: {x: {time: false}},
      axes: [
        {
          stroke: '#6b7280',
          grid: {stroke: '#f1f5f9'},
          ticks: {stroke: '#e5e7eb'},
          font: '11px system-ui, sans-serif',
          label: 'step',
          labelSize: 16,
          labelFont: '11px system-ui, sans-serif',
          incrs: STEP_INCREMENTS,
        },
        {
          stroke: '#6b7280',
          grid: {stroke: '#f1f5f9'},
          ticks: {stroke: '#e5e7eb'},
          font: '11px system-ui, sans-serif',
          size: 52,
          values: (u, splits) => splits.map((v) => fmtNumber(v, 3)),
        },
      ],
      series: [
        {label: 'step'},
        ...spec.series.map((s, i) => ({
          label: s.label,
          stroke: SERIES_COLORS[i % SERIES_COLORS.length],
          width: 1.75,
          points: {size: 4},
          value: (u, v) => (v === null || v === undefined ? '–' : fmtNumber(v, 4)),
        })),
      ],
    };
  }

  // ---------------------------------------------------------------------------------------------
  // Routing and polling.

  const VIEWS = {cluster: clusterView, actors: actorsView, jobs: jobsView, job: jobView};

  function parseRoute() {
    const hash = location.hash.replace(/^#\/?/, '');
    const [path, query = ''] = hash.split('?');
    const parts = path
      .split('/')
      .filter(Boolean)
      .map((p) => {
        try {
          return decodeURIComponent(p);
        } catch (_) {
          return p;
        }
      });
    const params = new URLSearchParams(query);
    if (parts[0] === 'actors') return {view: 'actors', params};
    if (parts[0] === 'jobs' && parts[1]) return {view: 'job', jobId: parts[1], params};
    if (parts[0] === 'jobs') return {view: 'jobs', params};
    return {view: 'cluster', params};
  }

  const app = {
    view: null,
    viewName: '',
    timer: null,
    generation: 0,
    pollCount: 0,
    lastError: null,
    busy: false,
    pollAgain: false,
  };
  window.troupeDashboard = app;

  function setConnection(error) {
    const status = $('#conn-status');
    const banner = $('#banner');
    app.lastError = error ? error.message : null;
    if (!error) {
      status.dataset.state = 'live';
      status.querySelector('.conn-text').textContent =
        `live · ${new Date().toLocaleTimeString([], {hour12: false})}`;
      banner.hidden = true;
      return;
    }
    const unreachable = !error.status;
    status.dataset.state = unreachable ? 'down' : 'degraded';
    status.querySelector('.conn-text').textContent = unreachable
      ? 'head unreachable'
      : 'partial data';
    banner.textContent = unreachable
      ? `Cannot reach the head (${error.message}). Showing the last data received; retrying.`
      : `The head answered with an error: ${error.message}`;
    banner.hidden = false;
  }

  async function poll(generation) {
    if (generation !== app.generation || app.busy) return;
    app.busy = true;
    let error = null;
    try {
      await app.view.refresh();
    } catch (e) {
      error = e instanceof ApiError ? e : new ApiError('dashboard', 0, e && e.message);
      if (!(e instanceof ApiError)) console.error(e);
    } finally {
      app.busy = false;
    }
    if (generation !== app.generation) {
      // The route changed while this refresh was in flight; poll the new view.
      poll(app.generation);
      return;
    }
    setConnection(error);
    app.pollCount++;
    let delay = app.view.pollMs ? app.view.pollMs() : POLL_MS;
    if (document.hidden) delay = Math.max(delay, POLL_HIDDEN_MS);
    if (app.pollAgain) delay = 0;
    app.pollAgain = false;
    app.timer = setTimeout(() => poll(generation), delay);
  }

  // Refreshes the current view now (after a user action) instead of at the next tick.
  function pollNow() {
    if (app.busy) {
      app.pollAgain = true; // poll() re-polls as soon as the refresh in flight completes.
      return;
    }
    clearTimeout(app.timer);
    poll(app.generation);
  }

  function route() {
    const r = parseRoute();
    const next = VIEWS[r.view];
    clearTimeout(app.timer);
    app.generation++;
    if (app.view) app.view.unmount();
    for (const v of Object.values(VIEWS)) document.getElementById(v.section).hidden = v !== next;
    for (const a of document.querySelectorAll('#nav a')) {
      a.classList.toggle(
        'active',
        a.dataset.view === r.view || (r.view === 'job' && a.dataset.view === 'jobs'),
      );
    }
    app.view = next;
    app.viewName = r.view;
    document.title =
      r.view === 'job'
        ? `${r.jobId} · troupe`
        : `${r.view[0].toUpperCase()}${r.view.slice(1)} · troupe`;
    next.mount(r);
    poll(app.generation);
  }

  function init() {
    if (typeof cytoscape === 'undefined' || typeof uPlot === 'undefined') {
      document.body.prepend(
        el('div', {class: 'banner', text: "The dashboard's libraries (vendor/) failed to load."}),
      );
      return;
    }
    $('#actor-filter-state').addEventListener('change', () => actorsView.onFilterChange());
    $('#actor-filter-job').addEventListener('change', () => actorsView.onFilterChange());
    $('#actor-filter-text').addEventListener('input', () => actorsView.renderTable());
    window.addEventListener('hashchange', () => {
      // Filter edits rewrite the hash with replaceState (no event); a real navigation remounts.
      route();
    });
    document.addEventListener('visibilitychange', () => {
      if (!document.hidden) pollNow();
    });
    route();
  }

  init();
})();
