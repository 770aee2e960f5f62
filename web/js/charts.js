// The job view's metric charts (uPlot, loaded by index.html as a plain script): which charts there
// are, the head's metrics normalized to plottable columns, and the charts' DOM.
//
// Exports: DEFAULT_CHARTS, findMetricInfo (the catalog entry of a name), unitOf, normalizeMetrics,
// chartData, JobCharts (one card per chart in a grid: setSpecs, update, resize, destroy),
// renderMetricPicker (the "Add chart" list), renderMetricTable (the "All metrics" table).

import {el, fmtNumber, isNum} from './format.js';

const CHART_HEIGHT = 170;
const SERIES_COLORS = ['#2563eb', '#16a34a', '#d97706', '#9333ea', '#dc2626'];
// Tick spacings of the step axis: whole steps only.
const STEP_INCREMENTS = [
  1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1000, 2000, 2500, 5000, 10000, 20000, 25000, 50000,
  100000, 200000, 500000, 1000000,
];

// The job view's default charts (each may be removed; the user adds one chart per metric with
// the picker). Titles, units and descriptions come from the metric catalog (/api/metric_catalog).
export const DEFAULT_CHARTS = [
  {id: 'reward', metrics: ['critic/score/mean']},
  {id: 'accuracy', metrics: ['reward/correct', 'val/accuracy']},
  {id: 'kl', metrics: ['actor/kl_loss']},
  {id: 'loss', metrics: ['actor/loss']},
  {id: 'throughput', metrics: ['perf/gen_throughput', 'perf/throughput']},
  {id: 'staleness', metrics: ['rollout/staleness_mean']},
];

// The catalog entry `name` is an instance of, as metrics::FindMetric decides: an exact name
// first, then a pattern whose trailing "<placeholder>" stands for one or more segments
// ("reward/<component>" matches "reward/format" and "reward/a/b", not "reward/"). Null if none.
export function findMetricInfo(catalog, name) {
  if (!Array.isArray(catalog)) return null;
  const exact = catalog.find((m) => m.name === name);
  if (exact) return exact;
  return (
    catalog.find((m) => {
      const open = String(m.name).indexOf('<');
      return open >= 0 && name.length > open && name.startsWith(m.name.slice(0, open));
    }) || null
  );
}

// The y-axis label of a chart of `names`: their unit (the first one the catalog knows), else
// "value" (a plain number).
export function unitOf(catalog, names) {
  for (const name of names) {
    const info = findMetricInfo(catalog, name);
    if (info && info.unit) return info.unit;
  }
  return '';
}

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

export function normalizeMetrics(body) {
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

// uPlot data for one chart: [steps, series1 values, ...] over the union of the series' steps;
// each series is {metric, source} with source a normalizeMetrics result (one job's metrics).
// A step a series did not log is undefined (uPlot draws the line across it, e.g. for sparse
// val/accuracy); a non-finite value it did log is null (a visible gap).
export function chartData(series) {
  const columns = series.map((s) => s.source && s.source[s.metric]);
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

// The charts as cards in `grid` (#chart-grid), one per spec ({id, metrics}). Each container
// carries data-metric (its first metric), data-metrics, data-chart, data-unit (its y-axis
// label), data-points (the number of steps plotted), data-series (series plotted) and data-jobs
// (the jobs with data in it). onRemove(id) is called by a card's remove button.
export class JobCharts {
  constructor(grid, onRemove) {
    this.grid = grid;
    this.onRemove = onRemove;
    this.charts = new Map(); // chart id -> {spec, card, container, title, plot, key}
    grid.replaceChildren();
  }

  // Shows exactly `specs`, in order (cards of charts kept keep their plot).
  setSpecs(specs) {
    const wanted = new Set(specs.map((s) => s.id));
    for (const [id, c] of this.charts) {
      if (wanted.has(id)) continue;
      if (c.plot) c.plot.destroy();
      c.card.remove();
      this.charts.delete(id);
    }
    for (const spec of specs) {
      if (!this.charts.has(spec.id)) this.charts.set(spec.id, this.makeCard(spec));
    }
    this.grid.replaceChildren(...specs.map((s) => this.charts.get(s.id).card));
  }

  makeCard(spec) {
    const container = el(
      'div',
      {
        class: 'chart',
        dataset: {
          metric: spec.metrics[0],
          metrics: spec.metrics.join(' '),
          chart: spec.id,
          points: '0',
          series: '0',
          jobs: '',
          unit: '',
        },
      },
      el('div', {class: 'chart-empty muted', text: 'waiting for data…'}),
    );
    const title = el('div', {class: 'chart-title'});
    const card = el(
      'div',
      {class: 'card chart-card', dataset: {chart: spec.id}},
      el(
        'div',
        {class: 'chart-head'},
        title,
        el('button', {
          'class': 'chart-remove',
          'type': 'button',
          'title': 'Remove this chart',
          'aria-label': 'Remove this chart',
          'dataset': {removeChart: spec.id},
          'text': '×',
          'onclick': () => this.onRemove && this.onRemove(spec.id),
        }),
      ),
      container,
    );
    return {spec, card, container, title, plot: null, key: ''};
  }

  // Plots `runs` ([{jobId, metrics}], the job first, then an overlaid one) with units and
  // descriptions from `catalog`; returns the last step of the first run plotted, or null.
  update(runs, catalog) {
    let lastStep = null;
    const overlay = runs.length > 1;
    for (const c of this.charts.values()) {
      const unit = unitOf(catalog, c.spec.metrics);
      this.renderTitle(c, unit, catalog);
      const series = [];
      runs.forEach((run, r) =>
        c.spec.metrics.forEach((metric, m) =>
          series.push({
            metric,
            source: run.metrics,
            jobId: run.jobId,
            label: overlay ? `${metric} · ${run.jobId}` : metric,
            color: SERIES_COLORS[m % SERIES_COLORS.length],
            dash: r > 0 ? [6, 4] : undefined,
          }),
        ),
      );
      const data = chartData(series);
      const points = data[0].length;
      const first = runs[0] && runs[0].metrics;
      for (const metric of c.spec.metrics) {
        const s = first && first[metric];
        if (s && s.step.length) lastStep = Math.max(lastStep ?? -Infinity, s.step.at(-1));
      }
      const key = JSON.stringify([unit, series.map((s) => s.label)]);
      if (c.plot && key !== c.key) {
        c.plot.destroy(); // Other series (an overlay added or removed) or unit: a new plot.
        c.plot = null;
      }
      if (!points && !c.plot) continue;
      if (!c.plot) {
        if (c.container.clientWidth === 0) continue; // Not laid out yet; next poll.
        c.container.replaceChildren();
        c.plot = new uPlot(chartOptions(series, unit, c.container.clientWidth), data, c.container);
        c.key = key;
      } else {
        c.plot.setData(data);
      }
      const jobs = [
        ...new Set(series.filter((s, i) => data[i + 1].some(isNum)).map((s) => s.jobId)),
      ];
      Object.assign(c.container.dataset, {
        points: String(points), // What is plotted now.
        series: String(series.length),
        jobs: jobs.join(' '),
        unit: unit || 'value',
      });
    }
    return lastStep;
  }

  renderTitle(c, unit, catalog) {
    const key = `${unit}|${catalog ? catalog.length : 0}`;
    if (c.titleKey === key) return;
    c.titleKey = key;
    const descriptions = c.spec.metrics
      .map((m) => {
        const info = findMetricInfo(catalog, m);
        return info && info.description ? `${m}: ${info.description}` : m;
      })
      .join('\n');
    c.title.title = descriptions;
    c.title.replaceChildren(
      el('span', {class: 'mono', text: c.spec.metrics.join(' · ')}),
      el('span', {class: 'chart-unit muted', text: unit ? ` [${unit}]` : ''}),
    );
  }

  // Fits the plots to their containers' width.
  resize() {
    for (const c of this.charts.values()) {
      if (c.plot && c.container.clientWidth > 0) {
        c.plot.setSize({width: c.container.clientWidth, height: CHART_HEIGHT});
      }
    }
  }

  destroy() {
    for (const c of this.charts.values()) if (c.plot) c.plot.destroy();
    this.charts.clear();
  }
}

// The metric picker's list in `list`: every metric of `names` (what the job logged) grouped by
// prefix, with its unit and description from `catalog`, filtered by `query` (substring of the
// name or description). Metrics in `shown` are listed but disabled; clicking another calls
// onPick(name).
export function renderMetricPicker(list, {names, catalog, shown, query, onPick}) {
  const q = (query || '').trim().toLowerCase();
  const groups = new Map();
  for (const name of [...names].sort()) {
    const info = findMetricInfo(catalog, name);
    const description = (info && info.description) || '';
    if (q && !name.toLowerCase().includes(q) && !description.toLowerCase().includes(q)) continue;
    const prefix = name.includes('/') ? name.slice(0, name.indexOf('/')) : '(other)';
    if (!groups.has(prefix)) groups.set(prefix, []);
    groups.get(prefix).push({name, unit: (info && info.unit) || '', description, info});
  }
  if (!groups.size) {
    list.replaceChildren(
      el('p', {class: 'muted', text: names.length ? 'No metric matches.' : 'No metrics yet.'}),
    );
    return;
  }
  list.replaceChildren(
    ...[...groups].map(([prefix, items]) =>
      el(
        'div',
        {class: 'picker-group', dataset: {group: prefix}},
        el('div', {class: 'picker-group-name', text: `${prefix}/`}),
        items.map((m) =>
          el(
            'button',
            {
              class: 'picker-item',
              type: 'button',
              disabled: shown.has(m.name),
              title: m.info ? m.info.name : 'not in the metric catalog',
              dataset: {pickMetric: m.name},
              onclick: () => onPick(m.name),
            },
            el('span', {class: 'picker-name mono', text: m.name}),
            el('span', {class: 'picker-unit', text: m.unit || (m.info ? 'number' : '?')}),
            el('span', {
              class: 'picker-desc muted',
              text: m.description || "Not in the metric catalog (a recipe's own metric).",
            }),
          ),
        ),
      ),
    ),
  );
}

// Fills `details` (#metric-values: a <details> with a <summary> and a table) with every metric's
// last step and value.
export function renderMetricTable(details, metrics) {
  const names = Object.keys(metrics).sort();
  details.querySelector('summary').textContent = `All metrics (${names.length})`;
  details.querySelector('tbody').replaceChildren(
    ...names.map((name) => {
      const s = metrics[name];
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
}

function chartOptions(series, unit, width) {
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
        label: unit || 'value',
        labelSize: 16,
        labelFont: '11px system-ui, sans-serif',
        values: (u, splits) => splits.map((v) => fmtNumber(v, 3)),
      },
    ],
    series: [
      {label: 'step'},
      ...series.map((s) => ({
        label: s.label,
        stroke: s.color,
        dash: s.dash,
        width: 1.75,
        points: {size: 4},
        value: (u, v) => (v === null || v === undefined ? '–' : fmtNumber(v, 4)),
      })),
    ],
  };
}
