// A finished run's summary (summary.json, served as the job's "summary") as a person reads it:
// the held-out accuracy before and after, the samples' accounting in the words `troupe run`
// prints at the end of a run (cli/run_command.cc), steps, time, checkpoints, and the held-out
// curve as a chart. Fields this page does not know are listed by name and value (nested objects
// as "a.b", lists of records counted), never as raw JSON.
//
// Exports: summaryRows (the rows, as [label, text, key] for tests and the card), RunSummary (the
// card in a container: update(summary), destroy()).

import {el, fmtDuration, fmtNumber, isNum} from './format.js';

const CURVE_HEIGHT = 170;

// Fields shown by the rows below (or deliberately left out: "name" is the page's title).
const KNOWN = new Set([
  'name',
  'recipe',
  'steps',
  'total_steps',
  'ended',
  'status',
  'error',
  'sft_accuracy',
  'initial_accuracy',
  'final_accuracy',
  'initial_pair_accuracy',
  'final_pair_accuracy',
  'seconds',
  'samples_generated',
  'samples_lost',
  'samples_filtered',
  'samples_discarded',
  'prompts_regenerated',
  'prompts_drawn',
  'prompts_filtered',
  'groups_filtered',
  'call_retries',
  'accounting',
  'checkpoints',
  'curve',
]);

const pct = (a) => `${(100 * a).toFixed(1)}%`;
const count = (n) => (isNum(n) ? String(n) : '–');
const plural = (n, one, many) => `${count(n)} ${n === 1 ? one : many}`;

// An accuracy recorded as a fraction; a negative one means "not measured".
const measured = (v) => isNum(v) && v >= 0;

// The samples' accounting as `troupe run` prints it:
//   "N generated = U used + S dropped as stale + B buffered + F filtered (all-equal rewards)
//    + L lost (P prompts regenerated, C calls retried)"
function accountingText(s) {
  const a = s.accounting && typeof s.accounting === 'object' ? s.accounting : {};
  const parts = [
    `${count(a.used)} used`,
    `${count(a.dropped_stale)} dropped as stale`,
    `${count(a.buffered)} buffered`,
    `${count(s.samples_filtered ?? 0)} filtered (all-equal rewards)`,
  ];
  if (isNum(s.samples_discarded) && s.samples_discarded > 0) {
    parts.push(`${s.samples_discarded} discarded with a dead replay buffer`);
  }
  parts.push(`${count(s.samples_lost ?? 0)} lost`);
  return (
    `${count(s.samples_generated)} generated = ${parts.join(' + ')} ` +
    `(${plural(s.prompts_regenerated ?? 0, 'prompt', 'prompts')} regenerated, ` +
    `${plural(s.call_retries ?? 0, 'call', 'calls')} retried)`
  );
}

// "key value" texts of a field this page does not know: scalars as they are, objects flattened
// ("critic.restarts 0"), lists of scalars joined, lists of records counted.
function otherField(key, v, out) {
  if (v === null || v === undefined) return;
  if (Array.isArray(v)) {
    if (v.every((x) => x === null || typeof x !== 'object')) {
      out.push([
        key,
        v.length ? v.map((x) => (isNum(x) ? fmtNumber(x, 4) : String(x))).join(', ') : 'none',
      ]);
    } else {
      out.push([key, plural(v.length, 'record', 'records')]);
    }
  } else if (typeof v === 'object') {
    for (const [k, x] of Object.entries(v)) otherField(`${key}.${k}`, x, out);
  } else if (typeof v === 'number') {
    out.push([key, Number.isInteger(v) ? String(v) : fmtNumber(v, 4)]);
  } else {
    out.push([key, String(v)]);
  }
}

// The summary's rows: [label, text, key] (key: a stable name for tests and styling).
export function summaryRows(s) {
  if (!s || typeof s !== 'object') return [];
  const rows = [];
  if (s.status === 'failed' || s.error) {
    rows.push(['Ended', `failed: ${s.error || 'see the driver log'}`, 'error']);
  }
  const pair = measured(s.initial_pair_accuracy) || measured(s.final_pair_accuracy);
  const before = pair ? s.initial_pair_accuracy : s.initial_accuracy;
  const after = pair ? s.final_pair_accuracy : s.final_accuracy;
  const label = pair ? 'Held-out pair accuracy' : 'Held-out exact match';
  if (measured(before) && measured(after)) {
    const points = 100 * (after - before);
    rows.push([
      label,
      `${pct(before)} before training → ${pct(after)} after ` +
        `(${points >= 0 ? '+' : '−'}${Math.abs(points).toFixed(1)} points)`,
      'accuracy',
    ]);
  } else if (measured(after)) {
    rows.push([label, `${pct(after)} after training`, 'accuracy']);
  }
  if (measured(s.sft_accuracy)) {
    rows.push(['SFT held-out exact match', pct(s.sft_accuracy), 'sft']);
  }
  if (isNum(s.samples_generated)) rows.push(['Samples', accountingText(s), 'samples']);
  if (isNum(s.prompts_drawn)) {
    let text = `${s.prompts_drawn} drawn`;
    if (isNum(s.prompts_filtered)) {
      text += ` · ${s.prompts_filtered} filtered`;
      if (isNum(s.groups_filtered)) text += ` (${plural(s.groups_filtered, 'group', 'groups')})`;
    }
    rows.push(['Prompts', text, 'prompts']);
  }
  if (isNum(s.steps)) {
    const of = isNum(s.total_steps) ? ` of ${s.total_steps}` : '';
    const ended = s.ended ? ` (${s.ended})` : '';
    rows.push(['Steps', `${s.steps}${of}${ended}`, 'steps']);
  }
  if (isNum(s.seconds)) {
    const used = s.accounting && s.accounting.used;
    const rate =
      isNum(used) && s.seconds > 0 ? ` · ${fmtNumber(used / s.seconds, 3)} samples/s trained` : '';
    const loop =
      s.recipe === 'rm' ? 'Training' : isNum(s.samples_generated) ? 'RL loop' : 'Training';
    rows.push([loop, `${fmtDuration(s.seconds)}${rate}`, 'seconds']);
  }
  const c = s.checkpoints;
  if (c && typeof c === 'object') {
    const failures = Array.isArray(c.failures) ? c.failures : [];
    let text = `${count(c.written)} written · ${plural(c.retries ?? 0, 'retry', 'retries')}`;
    if (failures.length) text += ` · NOT written: ${failures.join('; ')}`;
    rows.push(['Checkpoints', text, 'checkpoints']);
  }
  const others = [];
  for (const [k, v] of Object.entries(s)) if (!KNOWN.has(k)) otherField(k, v, others);
  const a = s.accounting;
  if (a && typeof a === 'object') {
    // What the accounting line does not say.
    for (const [k, v] of Object.entries(a)) {
      if (!['used', 'dropped_stale', 'buffered'].includes(k))
        otherField(`accounting.${k}`, v, others);
    }
  }
  if (others.length) {
    rows.push(['Also recorded', others.map(([k, v]) => `${k} ${v}`).join(' · '), 'other']);
  }
  return rows;
}

// The curve's points: [{step, value}] of its accuracy field (accuracy, or pair_accuracy).
function curvePoints(s) {
  if (!s || !Array.isArray(s.curve)) return [];
  return s.curve
    .map((p) => ({
      step: p && p.step,
      value: p && (isNum(p.accuracy) ? p.accuracy : p.pair_accuracy),
    }))
    .filter((p) => isNum(p.step) && isNum(p.value));
}

// The summary card in `container` (#job-summary): a table of summaryRows and the curve, whose
// container carries data-points (points plotted).
export class RunSummary {
  constructor(container) {
    this.container = container;
    this.plot = null;
    this.key = '';
  }

  update(summary) {
    const key = JSON.stringify(summary ?? null);
    if (key === this.key) return; // A finished run's summary does not change: no redraw.
    this.key = key;
    this.destroyPlot();
    const rows = summaryRows(summary);
    if (!rows.length) {
      this.container.hidden = true;
      this.container.replaceChildren();
      return;
    }
    const points = curvePoints(summary);
    const pair =
      summary &&
      Array.isArray(summary.curve) &&
      summary.curve.some((p) => p && isNum(p.pair_accuracy));
    const chart = el('div', {
      class: 'chart summary-curve',
      dataset: {points: String(points.length)},
    });
    this.container.hidden = false;
    this.container.replaceChildren(
      el('div', {class: 'card-head'}, el('h2', {text: 'Run summary'})),
      el(
        'div',
        {class: 'summary-body'},
        el(
          'table',
          {class: 'kv summary-table'},
          el(
            'tbody',
            null,
            rows.map(([label, text, k]) =>
              el(
                'tr',
                {dataset: {row: k}, class: k === 'error' ? 'error-text' : null},
                el('th', {text: label}),
                el('td', {text}),
              ),
            ),
          ),
        ),
        points.length
          ? el(
              'div',
              {class: 'summary-curve-card'},
              el('div', {
                class: 'chart-title',
                text: `held-out ${pair ? 'pair accuracy' : 'exact match'} by step`,
              }),
              chart,
            )
          : null,
      ),
    );
    if (points.length && chart.clientWidth > 0) {
      this.plot = new uPlot(
        curveOptions(chart.clientWidth, pair),
        [points.map((p) => p.step), points.map((p) => 100 * p.value)],
        chart,
      );
    }
  }

  resize() {
    const chart = this.container.querySelector('.summary-curve');
    if (this.plot && chart && chart.clientWidth > 0) {
      this.plot.setSize({width: chart.clientWidth, height: CURVE_HEIGHT});
    }
  }

  destroyPlot() {
    if (this.plot) this.plot.destroy();
    this.plot = null;
  }

  destroy() {
    this.destroyPlot();
    this.key = '';
  }
}

function curveOptions(width, pair) {
  const axis = {
    stroke: '#6b7280',
    grid: {stroke: '#f1f5f9'},
    ticks: {stroke: '#e5e7eb'},
    font: '11px system-ui, sans-serif',
    labelSize: 16,
    labelFont: '11px system-ui, sans-serif',
  };
  return {
    width,
    height: CURVE_HEIGHT,
    legend: {show: true, live: true},
    scales: {x: {time: false}, y: {range: [0, 100]}},
    axes: [
      {...axis, label: 'step'},
      {...axis, size: 52, label: '%', values: (u, splits) => splits.map((v) => `${v}%`)},
    ],
    series: [
      {label: 'step'},
      {
        label: pair ? 'held-out pair accuracy' : 'held-out exact match',
        stroke: '#16a34a',
        width: 1.75,
        points: {size: 5},
        value: (u, v) => (isNum(v) ? `${v.toFixed(1)}%` : '–'),
      },
    ],
  };
}
