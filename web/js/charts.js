// The job view's metric charts (uPlot, loaded by index.html as a plain script): which charts there
// are, the head's metrics normalized to plottable columns, and the charts' DOM.
//
// Exports: normalizeMetrics, chartData, JobCharts (one card per chart in a grid: update, resize,
// destroy), renderMetricTable (the "All metrics" table).

import {el, fmtNumber, isNum} from './format.js';

const CHART_HEIGHT = 170;
const SERIES_COLORS = ['#2563eb', '#16a34a', '#d97706', '#9333ea', '#dc2626'];
// Tick spacings of the step axis: whole steps only.
const STEP_INCREMENTS = [
  1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1000, 2000, 2500, 5000, 10000, 20000, 25000, 50000,
  100000, 200000, 500000, 1000000,
];

// The job view's charts. The first series' metric names the chart container (data-metric).
const CHARTS = [
  {id: 'reward', title: 'Reward', series: [{metric: 'critic/score/mean', label: 'mean'}]},
  {
    id: 'accuracy',
    title: 'Accuracy',
    series: [
      {metric: 'reward/correct', label: 'train'},
      {metric: 'val/accuracy', label: 'held-out'},
    ],
  },
  {id: 'kl', title: 'KL to reference', series: [{metric: 'actor/kl_loss', label: 'KL'}]},
  {id: 'loss', title: 'Loss', series: [{metric: 'actor/loss', label: 'loss'}]},
  {
    id: 'throughput',
    title: 'Throughput (tokens/s)',
    series: [
      {metric: 'perf/gen_throughput', label: 'generate'},
      {metric: 'perf/throughput', label: 'train'},
    ],
  },
  {
    id: 'staleness',
    title: 'Sample staleness (weight versions)',
    series: [{metric: 'rollout/staleness_mean', label: 'mean'}],
  },
];

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

// uPlot data for one chart: [steps, series1 values, ...] over the union of the series' steps.
// A step a series did not log is undefined (uPlot draws the line across it, e.g. for sparse
// val/accuracy); a non-finite value it did log is null (a visible gap).
export function chartData(spec, metrics) {
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

// The charts of CHARTS as cards in `grid` (#chart-grid). Each container carries data-metric (its
// first series' metric), data-metrics, data-chart and data-points (the number of steps plotted).
export class JobCharts {
  constructor(grid) {
    this.charts = new Map(); // chart id -> {spec, container, plot}
    grid.replaceChildren();
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
  }

  // Plots `metrics` (normalizeMetrics' shape); returns the last step plotted, or null.
  update(metrics) {
    let lastStep = null;
    for (const c of this.charts.values()) {
      const data = chartData(c.spec, metrics);
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
    return lastStep;
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
