// The cluster view (#/): summary cards, a card per node with its reserved resources (the
// scheduler's view) and its measured CPU and memory use (the heartbeat's usage), placement groups.
//
// Exports: clusterView (a view: section, mount, unmount, refresh).

import {nodeCell, rememberNodes} from './actor_details.js';
import {getJson, settle} from './api.js';
import {
  $,
  badge,
  el,
  emptyRow,
  fmtBytes,
  fmtDuration,
  fmtNumber,
  fmtPercent,
  fmtResourceAmount,
  fmtResources,
  idCell,
  isNum,
} from './format.js';

const ACTOR_STATES = ['ALIVE', 'PENDING', 'RESTARTING', 'DEAD'];

export const clusterView = {
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
          cards.push(summaryCard(`${resource} in use`, fmtNumber(used), `of ${fmtNumber(total)}`));
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
    el('div', {class: 'summary-value'}, value, el('span', {class: 'summary-sub', text: ` ${sub}`})),
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
    el('div', {class: 'bars-title', text: 'Reserved by actors (scheduler)'}),
    el(
      'div',
      {class: 'bars', dataset: {kind: 'reserved'}},
      names.length
        ? names.map((k) => resourceBar(k, used[k] || 0, total[k]))
        : el('p', {class: 'muted', text: 'No resources reported.'}),
    ),
    usageBars(n.usage),
  );
}

// Measured use of the machine (the heartbeat's "usage"; null when unknown).
function usageBars(usage) {
  const rows = [];
  const u = usage && typeof usage === 'object' ? usage : null;
  const cpu = u && isNum(u.cpu_percent) ? u.cpu_percent : null;
  rows.push(
    meterRow(
      'CPU',
      'cpu',
      cpu === null ? null : cpu / 100,
      fmtPercent(cpu),
      cpu === null ? 'CPU use unknown' : `CPU: ${fmtPercent(cpu)} of the machine in use`,
    ),
  );
  const memUsed = u && isNum(u.memory_used_bytes) ? u.memory_used_bytes : null;
  const memTotal = u && isNum(u.memory_total_bytes) ? u.memory_total_bytes : null;
  const memFraction = memUsed !== null && memTotal > 0 ? memUsed / memTotal : null;
  rows.push(
    meterRow(
      'memory',
      'memory',
      memFraction,
      memUsed === null ? '–' : `${fmtBytes(memUsed)} / ${fmtBytes(memTotal)}`,
      memUsed === null
        ? 'memory use unknown'
        : `memory: ${fmtBytes(memUsed)} of ${fmtBytes(memTotal)} in use`,
    ),
  );
  return [
    el('div', {class: 'bars-title', text: 'Used (measured on the machine)'}),
    el('div', {class: 'bars', dataset: {kind: 'used'}}, rows),
  ];
}

// A bar row: fraction in [0, 1] (null: unknown, an empty bar and "–").
function meterRow(label, key, fraction, valueText, title) {
  const f = fraction === null ? 0 : Math.min(1, Math.max(0, fraction));
  const level = f >= 0.9 ? 'high' : f >= 0.6 ? 'mid' : 'low';
  return el(
    'div',
    {class: 'bar-row', dataset: {usage: key}},
    el('span', {class: 'bar-label', text: label}),
    el(
      'div',
      {
        'class': 'bar bar-used',
        'role': 'meter',
        'aria-valuemin': 0,
        'aria-valuemax': 100,
        'aria-valuenow': fraction === null ? null : +(f * 100).toFixed(1),
        title,
      },
      el('div', {class: `bar-fill bar-${level}`, style: `width:${(f * 100).toFixed(1)}%`}),
    ),
    el('span', {class: 'bar-value', text: valueText}),
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
