// The job view (#/jobs/ID): header, the run's summary once it has one (run_summary.js), actor
// graph with its details panel (actor, channel or driver), metric charts and the driver log,
// refreshed by the poller. Once the job has ended its graph shows what crossed each edge in all.
//
// Exports: jobView (a view, with pollMs: slower once the job has ended and its log is read).
// Sets window.troupeGraph to the graph's cytoscape instance and window.troupeCharts to the
// JobCharts while mounted.

import {refreshNodeNames, renderActorDetails, renderPanelMessage} from './actor_details.js';
import {enc, getJson, request, settle} from './api.js';
import {
  DEFAULT_CHARTS,
  JobCharts,
  normalizeMetrics,
  renderMetricPicker,
  renderMetricTable,
} from './charts.js';
import {
  $,
  badge,
  el,
  fmtBytes,
  fmtBytesRate,
  fmtDuration,
  fmtNumber,
  fmtRate,
  fmtTime,
  followBottom,
  isNum,
  kvTable,
} from './format.js';
import {createGraph, fitGraph, placeEdgeLabels, renderLegend, syncGraph} from './graph.js';
import {jobDuration, TERMINAL_JOB_STATES} from './jobs_view.js';
import {POLL_FINISHED_MS, POLL_MS, pollNow} from './poller.js';
import {RunSummary} from './run_summary.js';

const LOG_KEEP_CHARS = 512 * 1024;

export const jobView = {
  section: 'view-job',
  jobId: null,
  job: null,
  cy: null,
  charts: null, // JobCharts
  summary: null, // RunSummary
  resizeObserver: null,
  selection: null, // {type: 'actor' | 'edge' | 'driver', id}
  logOffset: 0,
  logDecoder: null,
  logDone: false,
  metrics: {},
  notFound: false,
  // Charts (kept in the URL: ?charts=<added metrics>&hide=<default chart ids>&compare=<job>).
  added: [], // metrics charted on their own, beyond the defaults
  hidden: new Set(), // default chart ids removed
  compare: '', // the job overlaid on the charts ('' = none)
  compareMetrics: null, // its normalizeMetrics result
  compareDone: false, // it had ended before its metrics were last read: no more reads
  compareEnded: false, // it was seen ended
  catalog: null, // /api/metric_catalog's metrics (null until read; [] if the head has none)
  jobIds: '',
  pickerNames: '',

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
    const list = (name) => (route.params.get(name) || '').split(',').filter(Boolean);
    this.added = [...new Set(list('charts'))];
    this.hidden = new Set(list('hide'));
    this.compare = route.params.get('compare') || '';
    if (this.compare === this.jobId) this.compare = '';
    this.compareMetrics = null;
    this.compareDone = false;
    this.compareEnded = false;
    this.jobIds = '';
    this.pickerNames = '';
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
    this.summary = new RunSummary($('#job-summary'));
    this.summary.update(null);
    this.mountGraph();
    this.mountCharts();
  },

  unmount() {
    if (this.cy) this.cy.destroy();
    this.cy = null;
    window.troupeGraph = null;
    if (this.charts) this.charts.destroy();
    this.charts = null;
    window.troupeCharts = null;
    if (this.summary) this.summary.destroy();
    this.summary = null;
    if (this.resizeObserver) this.resizeObserver.disconnect();
    this.resizeObserver = null;
  },

  pollMs() {
    return this.notFound || (this.job && TERMINAL_JOB_STATES.has(this.job.status) && this.logDone)
      ? POLL_FINISHED_MS
      : POLL_MS;
  },

  mountGraph() {
    renderLegend($('#graph-legend'));
    this.cy = createGraph($('#graph'));
    window.troupeGraph = this.cy;
    this.cy.on('tap', 'node', (e) => this.selectVertex(e.target));
    this.cy.on('dragfree', 'node', () => placeEdgeLabels(this.cy));
    this.cy.on('tap', 'edge', (e) => this.selectEdge(e.target));
    this.cy.on('tap', (e) => {
      if (e.target === this.cy) this.clearSelection();
    });
    $('#graph-fit').onclick = () => this.cy && fitGraph(this.cy);
  },

  mountCharts() {
    const grid = $('#chart-grid');
    this.charts = new JobCharts(grid, (id) => this.removeChart(id));
    window.troupeCharts = this.charts;
    this.charts.setSpecs(this.chartSpecs());
    const search = $('#metric-picker-search');
    search.value = '';
    search.oninput = () => this.renderPicker(true);
    $('#metric-picker').open = false;
    $('#metric-picker').ontoggle = () => this.renderPicker(true);
    $('#charts-reset').onclick = () => {
      this.added = [];
      this.hidden = new Set();
      this.chartsChanged();
    };
    const compare = $('#compare-job');
    compare.replaceChildren(el('option', {value: '', text: '(no other job)'}));
    if (this.compare) compare.append(el('option', {value: this.compare, text: this.compare}));
    compare.value = this.compare;
    compare.onchange = () => {
      this.compare = compare.value;
      this.compareMetrics = null;
      this.compareDone = false;
      this.compareEnded = false;
      this.saveUrl();
      this.updateCharts();
      pollNow();
    };
    this.resizeObserver = new ResizeObserver(() => {
      if (this.charts) this.charts.resize();
      if (this.summary) this.summary.resize();
      if (this.cy) this.cy.resize();
    });
    this.resizeObserver.observe(grid);
    this.resizeObserver.observe($('#graph'));
  },

  async refresh() {
    const id = enc(this.jobId);
    const token = this.token;
    const selection = this.selection;
    const compare = this.compare;
    const compareEnded = this.compareEnded;
    const r = await settle({
      job: getJson(`api/jobs/${id}`),
      graph: getJson(`api/graph?job=${id}`),
      metrics: getJson(`api/jobs/${id}/metrics`),
      compareMetrics:
        this.compare && !this.compareDone
          ? getJson(`api/jobs/${enc(this.compare)}/metrics`)
          : undefined,
      compareJob:
        this.compare && !this.compareDone ? getJson(`api/jobs/${enc(this.compare)}`) : undefined,
      jobs: getJson('api/jobs/'),
      catalog: this.catalog ? undefined : getJson('api/metric_catalog'),
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
    if (r.catalog) this.catalog = Array.isArray(r.catalog.metrics) ? r.catalog.metrics : [];
    else if (errors.catalog && errors.catalog.status === 404) this.catalog = []; // An older head.
    if (r.jobs) this.renderCompareOptions(r.jobs.jobs || []);
    if (r.compareMetrics && compare === this.compare) {
      this.compareMetrics = normalizeMetrics(r.compareMetrics);
      // Seen ended before this read: these metrics are final.
      if (compareEnded) this.compareDone = true;
      if (r.compareJob && TERMINAL_JOB_STATES.has(r.compareJob.status)) this.compareEnded = true;
    }
    if (r.metrics) this.metrics = normalizeMetrics(r.metrics);
    if (r.metrics || r.compareMetrics || r.catalog) this.updateCharts();
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
    for (const name of ['metrics', 'log', 'catalog', 'compareMetrics']) {
      if (errors[name] && errors[name].status === 404) delete errors[name];
    }
    const first = Object.values(errors)[0];
    if (first) throw first;
  },

  renderHeader() {
    const j = this.job;
    // A job driven by `troupe run` (type DRIVER: an embedded cluster's, or a run directory's) was
    // never submitted: it started.
    const facts = [
      el('span', {class: 'mono', text: j.job_id || this.jobId}),
      j.type === 'DRIVER'
        ? `started ${fmtTime(j.start_ms || j.submitted_ms)}`
        : `submitted ${fmtTime(j.submitted_ms)}`,
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
    $('#job-header').replaceChildren(...children);
    if (this.summary) this.summary.update(j.summary);
  },

  updateGraph(graph) {
    const cy = this.cy;
    if (!cy) return;
    const ended = this.ended();
    syncGraph(cy, graph, ended);
    const empty = $('#graph-empty');
    empty.hidden = cy.nodes().nonempty();
    empty.textContent = ended ? 'This job recorded no actors.' : 'No actors in this job yet.';
    // Keep an edge or driver selection's panel current (actors refresh through their own fetch).
    if (this.selection && this.selection.type !== 'actor') {
      const ele = cy.getElementById(this.selection.id);
      if (ele.nonempty()) {
        if (this.selection.type === 'edge') this.renderEdge(ele);
        else if (this.selection.type === 'group') this.renderGroup(ele);
        else this.renderDriver();
      }
    }
  },

  // Whether the job has ended (its graph then shows totals, not rates).
  ended() {
    return Boolean(this.job && TERMINAL_JOB_STATES.has(this.job.status));
  },

  selectVertex(node) {
    if (node.data('kind') === 'driver') {
      this.selection = {type: 'driver', id: node.id()};
      this.renderDriver();
      return;
    }
    if (node.data('kind') === 'group') {
      this.selection = {type: 'group', id: node.id()};
      this.renderGroup(node);
      return;
    }
    this.showActor(node.id(), {
      name: node.data('label'),
      class_name: node.data('cls'),
      state: node.data('state'),
      node_id: node.data('node_id'),
    });
  },

  // Selects actor `id` (a vertex, or a replica of a group vertex): the panel shows `known` at once;
  // the full record and log tail follow.
  showActor(id, known) {
    this.selection = {type: 'actor', id};
    const panel = $('#details-panel');
    const node = this.cy ? this.cy.getElementById(id) : null;
    renderActorDetails(
      panel,
      {actor_id: id, ...known, log_tail: 'loading…'},
      node && node.nonempty() ? this.edgeSummary(node) : null,
    );
    const selection = this.selection;
    getJson(`api/actors/${enc(id)}`)
      .then((actor) => {
        if (this.selection === selection) this.renderSelectedActor(actor);
      })
      .catch((e) => {
        if (this.selection === selection) renderPanelMessage(panel, e.message, true);
      });
  },

  // A group vertex (replicas of one class): its channels and one row per replica, whose button
  // shows that replica's details and log tail.
  renderGroup(node) {
    const panel = $('#details-panel');
    delete panel.dataset.actorId;
    const replicas = node.data('replicas') || [];
    panel.replaceChildren(
      el(
        'div',
        {class: 'panel-head'},
        el('h3', {class: 'details-name', text: node.data('label')}),
        badge(node.data('state')),
      ),
      el('div', {class: 'details-class muted', text: node.data('cls')}),
      el(
        'table',
        {class: 'kv replica-table'},
        el(
          'tbody',
          null,
          replicas.map((r) =>
            el(
              'tr',
              {dataset: {replica: r.id}},
              el(
                'td',
                null,
                el('button', {
                  class: 'btn replica-button',
                  type: 'button',
                  text: r.label,
                  onclick: () =>
                    this.showActor(r.id, {name: r.label, ...r, class_name: node.data('cls')}),
                }),
              ),
              el('td', null, badge(r.state)),
              el('td', {class: 'muted', text: isNum(r.version) ? `weights v${r.version}` : ''}),
            ),
          ),
        ),
      ),
      this.edgeSummary(node),
    );
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
      const parts = this.ended() ? endedEdgeParts(e.data()) : [fmtRate(e.data('rate'))];
      if (this.ended()) {
        // Totals only (endedEdgeParts).
      } else if (isNum(e.data('samples_per_s'))) {
        parts.push(`${fmtNumber(e.data('samples_per_s'), 3)} samples/s`);
      }
      if (!this.ended()) {
        if (isNum(e.data('bytes_per_s'))) parts.push(fmtBytesRate(e.data('bytes_per_s')));
        if (isNum(e.data('staleness')))
          parts.push(`staleness ${fmtNumber(e.data('staleness'), 2)}`);
      }
      if (isNum(e.data('version_lag'))) parts.push(`lag ${fmtNumber(e.data('version_lag'), 2)}`);
      rows.push(
        el(
          'li',
          null,
          el('span', {class: `edge-kind edge-${e.data('kind')}`, text: e.data('kind')}),
          ` ${outgoing ? '→' : '←'} ${name(peer)}`,
          e.data('method') ? el('span', {class: 'mono muted', text: ` ${e.data('method')}`}) : null,
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
      this.ended() ? kvTable(endedEdgeRows(d)) : this.liveEdgeTable(d),
    );
  },

  liveEdgeTable(d) {
    return kvTable([
      ['Method', d.method || '–'],
      ['Rate', `${fmtNumber(d.rate, 3)} ${d.kind === 'weights' ? 'updates' : 'calls'}/s`],
      d.replicas > 1 ? ['Replicas', `${d.replicas} edges summed`] : null,
      d.kind === 'samples'
        ? ['Samples', isNum(d.samples_per_s) ? `${fmtNumber(d.samples_per_s, 3)}/s` : '–']
        : null,
      ['Bytes', isNum(d.bytes_per_s) ? fmtBytesRate(d.bytes_per_s) : '–'],
      d.kind === 'samples'
        ? [
            'Staleness',
            isNum(d.staleness)
              ? `${fmtNumber(d.staleness, 3)} versions (samples that crossed this edge)`
              : '–',
          ]
        : null,
      d.kind === 'weights' ? ['Version', isNum(d.version) ? `v${d.version}` : '–'] : null,
      d.kind === 'weights'
        ? [
            'Version lag',
            isNum(d.version_lag) ? `${d.version_lag} (largest of the receivers)` : '–',
          ]
        : null,
      d.kind === 'weights'
        ? [
            'Last sync',
            isNum(d.last_sync_ms)
              ? `${fmtDuration((Date.now() - d.last_sync_ms) / 1000)} ago (oldest of the receivers)`
              : '–',
          ]
        : null,
    ]);
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
    const runs = [{jobId: this.jobId, metrics: this.metrics}];
    if (this.compare && this.compareMetrics) {
      runs.push({jobId: this.compare, metrics: this.compareMetrics});
    }
    const lastStep = this.charts ? this.charts.update(runs, this.catalog || []) : null;
    $('#metrics-step').textContent = lastStep !== null ? `· step ${lastStep}` : '';
    renderMetricTable($('#metric-values'), this.metrics);
    this.renderPicker(false);
  },

  // The charts shown: the defaults not removed, then one per added metric.
  chartSpecs() {
    const shown = DEFAULT_CHARTS.filter((c) => !this.hidden.has(c.id));
    const inDefaults = new Set(shown.flatMap((c) => c.metrics));
    return [
      ...shown,
      ...this.added.filter((m) => !inDefaults.has(m)).map((m) => ({id: `m:${m}`, metrics: [m]})),
    ];
  },

  addChart(metric) {
    if (!this.added.includes(metric)) this.added.push(metric);
    this.chartsChanged();
  },

  removeChart(id) {
    if (id.startsWith('m:')) this.added = this.added.filter((m) => `m:${m}` !== id);
    else this.hidden.add(id);
    this.chartsChanged();
  },

  chartsChanged() {
    this.saveUrl();
    if (!this.charts) return;
    this.charts.setSpecs(this.chartSpecs());
    this.updateCharts();
    this.renderPicker(true);
  },

  // Keeps the charts and the overlay in the URL (shareable; replaceState: no remount).
  saveUrl() {
    const params = new URLSearchParams();
    if (this.added.length) params.set('charts', this.added.join(','));
    const hidden = DEFAULT_CHARTS.map((c) => c.id).filter((id) => this.hidden.has(id));
    if (hidden.length) params.set('hide', hidden.join(','));
    if (this.compare) params.set('compare', this.compare);
    const query = params.toString();
    history.replaceState(null, '', `#/jobs/${enc(this.jobId)}${query ? `?${query}` : ''}`);
  },

  // The picker lists what this job logged; redrawn when that set changes or on `force`.
  renderPicker(force) {
    const names = Object.keys(this.metrics);
    const key = names.join('\n');
    if (!force && key === this.pickerNames) return;
    this.pickerNames = key;
    const shown = new Set(this.chartSpecs().flatMap((c) => c.metrics));
    renderMetricPicker($('#metric-picker-list'), {
      names,
      catalog: this.catalog || [],
      shown,
      query: $('#metric-picker-search').value,
      onPick: (name) => this.addChart(name),
    });
  },

  // The "Compare with" choices: every other job, newest first.
  renderCompareOptions(jobs) {
    const others = jobs
      .filter((j) => j.job_id && j.job_id !== this.jobId)
      .sort((a, b) => (b.submitted_ms || 0) - (a.submitted_ms || 0));
    const key = others.map((j) => `${j.job_id} ${j.status}`).join('\n');
    if (key === this.jobIds) return; // Leave an open <select> alone when nothing changed.
    this.jobIds = key;
    const select = $('#compare-job');
    const options = others.map((j) =>
      el('option', {
        value: j.job_id,
        text: `${j.job_id}${j.name ? ` (${j.name})` : ''} · ${j.status || '?'}`,
      }),
    );
    if (this.compare && !others.some((j) => j.job_id === this.compare)) {
      options.push(el('option', {value: this.compare, text: this.compare}));
    }
    select.replaceChildren(el('option', {value: '', text: '(no other job)'}), ...options);
    select.value = this.compare;
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

// An ended job's edge, in the channel list: what crossed it in all.
function endedEdgeParts(d) {
  if (d.kind === 'weights') return [isNum(d.version) ? `last version v${d.version}` : 'weights'];
  const parts = [isNum(d.calls) ? `${d.calls} ${d.calls === 1 ? 'call' : 'calls'}` : '–'];
  if (isNum(d.samples) && d.samples > 0) parts.push(`${d.samples} samples`);
  if (isNum(d.bytes) && d.bytes > 0) parts.push(fmtBytes(d.bytes));
  return parts;
}

// An ended job's edge, in the panel: its totals (as its callee last counted them).
function endedEdgeRows(d) {
  if (d.kind === 'weights') {
    return [
      ['Method', 'weights'],
      ['Last version', isNum(d.version) ? `v${d.version}` : '–'],
      ['Version lag', isNum(d.version_lag) ? `${d.version_lag} (largest of the receivers)` : '–'],
    ];
  }
  return [
    ['Method', d.method || '–'],
    ['Calls', isNum(d.calls) ? String(d.calls) : '–'],
    d.replicas > 1 ? ['Replicas', `${d.replicas} edges summed`] : null,
    d.kind === 'samples' ? ['Samples', isNum(d.samples) ? String(d.samples) : '–'] : null,
    ['Bytes', isNum(d.bytes) ? fmtBytes(d.bytes) : '–'],
    ['Errors', isNum(d.errors) ? String(d.errors) : '–'],
    ['Counted', "by the callee's worker, as it last published them (about once a second)"],
  ];
}
