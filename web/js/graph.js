// The job view's actor graph (cytoscape, loaded by index.html as a plain script): vertices and
// edges from /api/graph, their style, the layout and the legend.
//
// Layout (deterministic: the same vertices always get the same positions, whatever the edges and
// rates; only a vertex coming or going moves anything):
//   - the RL data loop's stages (each vertex's `stage` from the application's schema: rollout,
//     reward, replay, trainer) in one row, left to right; the weights edges that close the loop
//     (trainer → rollout) are drawn as an arc below the row;
//   - the driver above the middle of the row, other actors (reference, checkpointer, ...) aside
//     in the top row, left and right of the driver;
//   - replicas (several actors of one class, e.g. 4 rollout workers) are one vertex "rollout ×4"
//     whose edges sum the replicas' rates; the side panel lists the replicas;
//   - an edge whose straight line would cross another vertex is bowed around it.
// Edge labels are 12 px and the view never zooms below 0.95 (≥ 11.4 px rendered).
//
// Exports: createGraph (a cytoscape instance in a container), syncGraph (brings it to an
// /api/graph answer), placeEdgeLabels (again, after a vertex was dragged), fitGraph,
// renderLegend, edgeLabel, graphElements, MIN_ZOOM.

import {el, fmtBytes, fmtDuration, fmtNumber, isNum} from './format.js';

// Vertex colours by actor state: [fill, border].
const STATE_COLORS = {
  ALIVE: ['#dcfce7', '#16a34a'],
  PENDING: ['#fef3c7', '#d97706'],
  RESTARTING: ['#ffedd5', '#ea580c'],
  DEAD: ['#fee2e2', '#dc2626'],
};
const UNKNOWN_STATE_COLORS = ['#f3f4f6', '#6b7280'];
const EDGE_COLORS = {call: '#6b7280', samples: '#2563eb', weights: '#9333ea'};
// Worst first: a group shows the worst state of its replicas.
const STATE_RANK = ['DEAD', 'RESTARTING', 'PENDING', 'ALIVE'];

// Layout grid (model px).
const COLUMN = 280; // between loop stages
const TOP_ROW = -240; // the driver and the actors aside
const ASIDE_STEP = 300; // between actors aside
const EDGE_FONT_PX = 12;
// The view never zooms out below this, so edge labels render at >= 11 px.
export const MIN_ZOOM = 0.95;

const FONT = 'system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif';

const GRAPH_STYLE = [
  {
    selector: 'node',
    style: {
      'shape': 'round-rectangle',
      'width': 'data(width)',
      'height': 46,
      'background-color': 'data(fill)',
      'border-width': 2,
      'border-color': 'data(border)',
      'label': 'data(display)',
      'text-wrap': 'wrap',
      'text-valign': 'center',
      'text-halign': 'center',
      'font-size': 12,
      'font-family': FONT,
      'color': '#111827',
      'line-height': 1.3,
    },
  },
  {selector: 'node[kind = "group"]', style: {'border-width': 3, 'border-style': 'double'}},
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
      'control-point-step-size': 56,
      'width': 'data(lineWidth)',
      'line-color': 'data(color)',
      'target-arrow-color': 'data(color)',
      'target-arrow-shape': 'triangle',
      'arrow-scale': 0.9,
      // The label sits along the edge at `labelOffset` px from its source (see placeEdgeLabels),
      // horizontal, so that labels of edges fanning out of one vertex do not pile up.
      'source-label': 'data(label)',
      'source-text-offset': 'data(labelOffset)',
      'text-wrap': 'wrap',
      'font-size': EDGE_FONT_PX,
      'font-family': FONT,
      'color': '#1f2937',
      'text-background-color': '#ffffff',
      'text-background-opacity': 0.92,
      'text-background-padding': 2,
      'text-background-shape': 'roundrectangle',
      'opacity': 0.9,
    },
  },
  {selector: 'edge[kind = "weights"]', style: {'line-style': 'dashed'}},
  {selector: 'edge[kind != "weights"][!active]', style: {opacity: 0.45, width: 1.5}},
  {
    // Edges bowed around the vertices in their way, and the weights arc closing the loop.
    selector: 'edge.bowed',
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

// "rollout-3" -> "rollout": the name replicas share.
function replicaBase(label) {
  return String(label).replace(/[-_.]?\d+$/, '') || String(label);
}

// The edge label: what crossed it and how fast (samples/s, bytes/s, staleness, calls/s), or for
// a weights edge the version, the receivers' lag and the last sync. Of a job that has ended
// (`ended`): what crossed it in all (calls, samples, bytes), and a weights edge's last version.
export function edgeLabel(d, nowMs = Date.now(), ended = false) {
  if (ended) return endedEdgeLabel(d);
  if (d.kind === 'weights') {
    const lines = [`weights v${isNum(d.version) ? d.version : '–'}`];
    if (isNum(d.version_lag)) lines.push(`lag ${fmtNumber(d.version_lag, 2)} versions`);
    lines.push(
      isNum(d.last_sync_ms)
        ? `synced ${fmtDuration(Math.max(0, nowMs - d.last_sync_ms) / 1000)} ago`
        : `${fmtNumber(d.rate, 2)} updates/s`,
    );
    return lines.join('\n');
  }
  // An idle edge (no calls over the window) says only what it is; the panel has its totals.
  if (!(d.rate > 0)) return `${d.method || d.kind} (idle)`;
  const lines = [`${d.method || d.kind} · ${fmtNumber(d.rate, 3)} calls/s`];
  const flow = [];
  if (d.kind === 'samples' && isNum(d.samples_per_s)) {
    flow.push(`${fmtNumber(d.samples_per_s, 3)} samples/s`);
  }
  if (isNum(d.bytes_per_s)) flow.push(`${fmtBytes(Math.round(d.bytes_per_s))}/s`);
  if (flow.length) lines.push(flow.join(' · '));
  if (d.kind === 'samples' && isNum(d.staleness)) {
    lines.push(`stale ${fmtNumber(d.staleness, 2)} versions`);
  }
  return lines.join('\n');
}

// An ended job's edge label: the totals its callees counted (the rates are 0 now).
function endedEdgeLabel(d) {
  if (d.kind === 'weights') {
    const lines = [`weights v${isNum(d.version) ? d.version : '–'}`];
    if (isNum(d.version_lag) && d.version_lag > 0) {
      lines.push(`lag ${fmtNumber(d.version_lag, 2)} versions`);
    }
    return lines.join('\n');
  }
  if (!isNum(d.calls)) return d.method || d.kind;
  const lines = [`${d.method || d.kind} · ${d.calls} ${d.calls === 1 ? 'call' : 'calls'}`];
  const flow = [];
  if (isNum(d.samples) && d.samples > 0) flow.push(`${d.samples} samples`);
  if (isNum(d.bytes) && d.bytes > 0) flow.push(fmtBytes(d.bytes));
  if (flow.length) lines.push(flow.join(' · '));
  if (isNum(d.errors) && d.errors > 0)
    lines.push(`${d.errors} ${d.errors === 1 ? 'error' : 'errors'}`);
  return lines.join('\n');
}

// Sums of the replicas' edges: rates and totals add up; staleness is the samples-weighted mean; a weights
// edge shows the largest lag and the oldest sync.
function mergeEdges(list) {
  const sum = (key) =>
    list.some((e) => isNum(e[key]))
      ? list.reduce((s, e) => s + (isNum(e[key]) ? e[key] : 0), 0)
      : null;
  const first = list[0];
  const merged = {
    kind: first.kind || 'call',
    method: first.method || '',
    rate: list.some((e) => isNum(e.rate)) ? sum('rate') : null,
    bytes_per_s: sum('bytes_per_s'),
    samples_per_s: sum('samples_per_s'),
    calls: sum('calls'),
    bytes: sum('bytes'),
    samples: sum('samples'),
    errors: sum('errors'),
    staleness: null,
    version: null,
    version_lag: null,
    last_sync_ms: null,
    replicas: list.length,
  };
  if (merged.kind === 'weights') {
    // The same broadcast reaches every receiver: its rate is not summed.
    merged.rate = isNum(first.rate) ? first.rate : null;
  }
  const stale = list.filter((e) => isNum(e.staleness));
  if (stale.length) {
    const weight = (e) => (isNum(e.samples_per_s) && e.samples_per_s > 0 ? e.samples_per_s : 0);
    const total = stale.reduce((s, e) => s + weight(e), 0);
    merged.staleness =
      total > 0
        ? stale.reduce((s, e) => s + weight(e) * e.staleness, 0) / total
        : stale.reduce((s, e) => s + e.staleness, 0) / stale.length;
  }
  const nums = (key) => list.map((e) => e[key]).filter(isNum);
  if (nums('version').length) merged.version = Math.max(...nums('version'));
  if (nums('version_lag').length) merged.version_lag = Math.max(...nums('version_lag'));
  if (nums('last_sync_ms').length) merged.last_sync_ms = Math.min(...nums('last_sync_ms'));
  return merged;
}

// Cytoscape elements for /api/graph: one vertex per actor, or per class with replicas; a
// "driver" vertex when an edge starts or ends at the driver; edges between known vertices,
// replicas' edges merged. `ended`: the job has ended (edges labelled and drawn by their totals).
export function graphElements(graph, nowMs = Date.now(), ended = false) {
  const nodes = (Array.isArray(graph.nodes) ? graph.nodes : [])
    .slice()
    .sort((a, b) => String(a.id).localeCompare(String(b.id)));
  const byClass = new Map();
  for (const n of nodes) {
    const cls = n.class || '';
    if (!byClass.has(cls)) byClass.set(cls, []);
    byClass.get(cls).push(n);
  }
  // actor id -> vertex id
  const vertexOf = new Map();
  const elements = [];
  const vertex = (data) => {
    const [fill, border] = STATE_COLORS[data.state] || UNKNOWN_STATE_COLORS;
    const longest = Math.max(
      ...String(data.display)
        .split('\n')
        .map((l) => l.length),
    );
    elements.push({
      group: 'nodes',
      data: {...data, fill, border, width: Math.max(104, Math.round(longest * 7.2 + 30))},
    });
  };
  for (const [cls, members] of byClass) {
    const stage = members.map((n) => (Number.isInteger(n.stage) ? n.stage : -1))[0];
    if (members.length === 1 || !cls) {
      for (const n of members) {
        const label = n.label || n.id;
        vertexOf.set(String(n.id), String(n.id));
        vertex({
          id: String(n.id),
          kind: 'actor',
          label,
          cls,
          state: n.state || '',
          node_id: n.node_id || '',
          version: isNum(n.version) ? n.version : null,
          stage: Number.isInteger(n.stage) ? n.stage : -1,
          members: [String(n.id)],
          display: cls && cls !== label ? `${label}\n${cls}` : String(label),
        });
      }
      continue;
    }
    const id = `group:${cls}`;
    const label = `${replicaBase(members[0].label || members[0].id)} ×${members.length}`;
    for (const n of members) vertexOf.set(String(n.id), id);
    const states = members.map((n) => n.state || '');
    vertex({
      id,
      kind: 'group',
      label,
      cls,
      state: STATE_RANK.find((s) => states.includes(s)) || states[0],
      node_id: '',
      stage,
      members: members.map((n) => String(n.id)),
      replicas: members.map((n) => ({
        id: String(n.id),
        label: n.label || String(n.id),
        state: n.state || '',
        node_id: n.node_id || '',
        version: isNum(n.version) ? n.version : null,
      })),
      display: `${label}\n${cls}`,
    });
  }
  let driver = false;
  const grouped = new Map();
  for (const e of Array.isArray(graph.edges) ? graph.edges : []) {
    const map = (id) => (String(id) === 'driver' ? 'driver' : vertexOf.get(String(id)));
    const source = map(e.source);
    const target = map(e.target);
    if (!source || !target) continue;
    if (source === 'driver' || target === 'driver') driver = true;
    const key = `${source}>${target}:${e.kind || 'call'}:${e.method || ''}`;
    if (!grouped.has(key)) grouped.set(key, {source, target, list: []});
    grouped.get(key).list.push(e);
  }
  const edges = [];
  for (const [id, {source, target, list}] of [...grouped].sort((a, b) =>
    a[0].localeCompare(b[0]),
  )) {
    const d = mergeEdges(list);
    edges.push({
      group: 'edges',
      data: {
        id,
        source,
        target,
        ...d,
        label: edgeLabel(d, nowMs, ended),
        active: ended ? d.calls > 0 || d.kind === 'weights' : d.rate > 0,
        color: EDGE_COLORS[d.kind] || EDGE_COLORS.call,
        widthBytes: ended
          ? isNum(d.bytes)
            ? d.bytes
            : 0
          : isNum(d.bytes_per_s)
            ? d.bytes_per_s
            : 0,
        lineWidth: 2,
        bow: 0,
        labelOffset: 40,
        bowed: false,
      },
    });
  }
  if (driver && !vertexOf.has('driver')) {
    vertex({
      id: 'driver',
      kind: 'driver',
      label: 'driver',
      cls: '',
      state: '',
      stage: -1,
      members: [],
      display: 'driver',
    });
    elements[elements.length - 1].data.fill = '#f9fafb';
    elements[elements.length - 1].data.border = '#6b7280';
  }
  // Line width 1.5-4.5 px by bytes/s (an ended job's: bytes), on a log scale relative to the
  // busiest edge.
  const maxBytes = Math.max(1, ...edges.map((e) => e.data.widthBytes));
  for (const e of edges) {
    e.data.lineWidth = +(1.5 + (3 * Math.log1p(e.data.widthBytes)) / Math.log1p(maxBytes)).toFixed(
      2,
    );
  }
  return elements.concat(edges);
}

// Positions of every vertex, from the vertices alone (see the file comment).
function positions(cy) {
  const out = new Map();
  const sortKey = (n) => `${n.data('cls')}\u0000${n.id()}`;
  const byKey = (a, b) => sortKey(a).localeCompare(sortKey(b));
  const all = cy.nodes().toArray();
  const loop = all.filter((n) => n.data('kind') !== 'driver' && n.data('stage') >= 0);
  const aside = all
    .filter((n) => n.data('kind') !== 'driver' && !(n.data('stage') >= 0))
    .sort(byKey);
  // Loop stages left to right (stage numbers may skip: columns follow their order).
  const stages = [...new Set(loop.map((n) => n.data('stage')))].sort((a, b) => a - b);
  stages.forEach((stage, column) => {
    loop
      .filter((n) => n.data('stage') === stage)
      .sort(byKey)
      .forEach((n, row) => out.set(n.id(), {x: column * COLUMN, y: row * 110}));
  });
  const middle = stages.length ? ((stages.length - 1) * COLUMN) / 2 : 0;
  out.set('driver', {x: middle, y: stages.length ? TOP_ROW : 0});
  // Aside: alternately right and left of the driver in the top row, further out each time and
  // stepping up a row every other pair (so that no straight edge from the driver crosses one).
  aside.forEach((n, i) => {
    const k = Math.floor(i / 2) + 1;
    const side = i % 2 === 0 ? 1 : -1;
    const x = middle + side * k * ASIDE_STEP;
    const y = (stages.length ? TOP_ROW : 0) - (k - 1) * 100;
    out.set(n.id(), {x, y});
  });
  return out;
}

// Where a quadratic bezier from a via c to b passes at t.
function quad(a, c, b, t) {
  return {
    x: (1 - t) ** 2 * a.x + 2 * (1 - t) * t * c.x + t ** 2 * b.x,
    y: (1 - t) ** 2 * a.y + 2 * (1 - t) * t * c.y + t ** 2 * b.y,
  };
}

// Bows the edges whose straight line would cross another vertex (the smallest bend, trying either
// side, that clears every vertex box), parallel edges apart, and the weights edges that run
// against the loop (to a lower stage) always below the row.
function bowEdges(cy) {
  const PAD = 12;
  // Parallel edges (same two vertices, e.g. the driver's Add and Take calls to the replay
  // buffer) fan out 60 px apart.
  const parallel = new Map();
  const pairs = new Map();
  cy.edges().forEach((e) => {
    const key = `${e.source().id()}>${e.target().id()}`;
    if (!pairs.has(key)) pairs.set(key, []);
    pairs.get(key).push(e.id());
  });
  for (const ids of pairs.values()) {
    if (ids.length < 2) continue;
    ids.sort().forEach((id, i) => parallel.set(id, (i - (ids.length - 1) / 2) * 60 || 1));
  }
  cy.edges().forEach((edge) => {
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
      .map((n) => {
        const w = n.data('width') / 2 + PAD;
        const p = n.position();
        return {x1: p.x - w, x2: p.x + w, y1: p.y - 23 - PAD, y2: p.y + 23 + PAD};
      });
    const clear = (d) => {
      const c = {x: mid.x + d * normal.x, y: mid.y + d * normal.y};
      for (let i = 1; i < 40; i++) {
        const p = quad(a, c, b, i / 40);
        if (boxes.some((box) => p.x > box.x1 && p.x < box.x2 && p.y > box.y1 && p.y < box.y2)) {
          return false;
        }
      }
      return true;
    };
    const back =
      edge.data('kind') === 'weights' &&
      source.data('stage') >= 0 &&
      target.data('stage') >= 0 &&
      target.data('stage') < source.data('stage');
    let bow = null;
    if (back) {
      // Below the row: the normal of a right-to-left edge points down for d < 0.
      const down = normal.y > 0 ? 1 : -1;
      for (let d = 120; d <= 600 && bow === null; d += 20) if (clear(down * d)) bow = down * d;
      if (bow === null) bow = down * 120;
    } else if (parallel.get(edge.id())) {
      bow = parallel.get(edge.id());
    } else if (!clear(0)) {
      for (let d = 30; d <= 600 && bow === null; d += 15) {
        if (clear(d)) bow = d;
        else if (clear(-d)) bow = -d;
      }
      if (bow === null) bow = 80;
    }
    edge.data('bow', bow === null ? 0 : bow);
    edge.toggleClass('bowed', bow !== null);
  });
}

// The drawn path of `edge` as points from its source's border to its target's border (a
// quadratic curve when bowed, else a line), with the distance along it at each point.
function edgePath(edge) {
  const a = edge.source().position();
  const b = edge.target().position();
  const length = Math.hypot(b.x - a.x, b.y - a.y) || 1;
  const normal = {x: -(b.y - a.y) / length, y: (b.x - a.x) / length};
  const bow = edge.hasClass('bowed') ? edge.data('bow') || 0 : 0;
  const c = {x: (a.x + b.x) / 2 + bow * normal.x, y: (a.y + b.y) / 2 + bow * normal.y};
  const inside = (p, n) => {
    const w = n.data('width') / 2;
    const q = n.position();
    return Math.abs(p.x - q.x) < w && Math.abs(p.y - q.y) < 23;
  };
  const points = [];
  let along = 0;
  let last = null;
  for (let i = 0; i <= 80; i++) {
    const p = quad(a, c, b, i / 80);
    if (inside(p, edge.source()) || inside(p, edge.target())) continue;
    if (last) along += Math.hypot(p.x - last.x, p.y - last.y);
    points.push({...p, along});
    last = p;
  }
  return points;
}

// The box (model px) an edge label of `text` centred at `p` covers.
function labelBox(text, p) {
  const lines = String(text || '').split('\n');
  const w = Math.max(...lines.map((l) => l.length)) * EDGE_FONT_PX * 0.56 + 8;
  const h = lines.length * EDGE_FONT_PX * 1.25 + 6;
  return {x1: p.x - w / 2, x2: p.x + w / 2, y1: p.y - h / 2, y2: p.y + h / 2};
}

// The area two boxes share.
function overlapArea(a, b) {
  const w = Math.min(a.x2, b.x2) - Math.max(a.x1, b.x1);
  const h = Math.min(a.y2, b.y2) - Math.max(a.y1, b.y1);
  return w > 0 && h > 0 ? w * h : 0;
}

// Spots tried for a label, as fractions of its edge's length: the middle first, then further out.
const LABEL_SPOTS = Array.from({length: 21}, (_, i) => 0.1 + i * 0.04).sort(
  (a, b) => Math.abs(a - 0.5) - Math.abs(b - 0.5),
);

// Sets each edge's label offset (px along the edge from its source's border): of the spots tried,
// the first whose label covers no vertex and no label placed before it, else the one covering
// least (edges in id order, so the result is the same on every refresh).
export function placeEdgeLabels(cy) {
  const vertexBoxes = cy.nodes().map((n) => {
    const w = n.data('width') / 2 + 4;
    const q = n.position();
    return {x1: q.x - w, x2: q.x + w, y1: q.y - 27, y2: q.y + 27};
  });
  const placed = [];
  cy.edges()
    .sort((x, y) => x.id().localeCompare(y.id()))
    .forEach((edge) => {
      const path = edgePath(edge);
      if (!path.length) return;
      const total = path[path.length - 1].along;
      let best = null;
      for (const f of LABEL_SPOTS) {
        const p = path.find((q) => q.along >= f * total) || path[path.length - 1];
        const box = labelBox(edge.data('label'), p);
        const cost =
          4 * vertexBoxes.reduce((sum, v) => sum + overlapArea(v, box), 0) +
          placed.reduce((sum, l) => sum + overlapArea(l, box), 0);
        if (best === null || cost < best.cost) best = {along: p.along, box, cost};
        if (cost === 0) break;
      }
      placed.push(best.box);
      edge.data('labelOffset', Math.round(best.along));
    });
}

// Fills `container` (#graph-legend) with the state colours and edge kinds.
export function renderLegend(container) {
  container.replaceChildren(
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
}

// An empty graph in `container` (#graph).
export function createGraph(container) {
  return cytoscape({
    container,
    elements: [],
    style: GRAPH_STYLE,
    minZoom: MIN_ZOOM,
    maxZoom: 2.5,
    boxSelectionEnabled: false,
  });
}

// Fits the graph to the view, never zooming out below MIN_ZOOM (nor in beyond 1.3): a graph
// wider than the view is centred and can be panned.
export function fitGraph(cy) {
  cy.fit(undefined, 24);
  const zoom = Math.min(1.3, Math.max(MIN_ZOOM, cy.zoom()));
  if (zoom !== cy.zoom()) {
    cy.zoom(zoom);
    cy.center();
  }
}

// Brings `cy` to `graph` (an /api/graph answer): data of known elements is updated in place.
// Vertex positions depend on the vertices alone, so they only move when a vertex came or went
// (then the view is fitted again); a new edge is bowed and labelled without moving anything.
export function syncGraph(cy, graph, ended = false) {
  const elements = graphElements(graph, Date.now(), ended);
  const wanted = new Set(elements.map((e) => e.data.id));
  let vertices = false;
  let edges = false;
  cy.batch(() => {
    for (const ele of cy.elements().toArray()) {
      if (!ele.removed() && !wanted.has(ele.id())) {
        if (ele.isNode()) vertices = true;
        else edges = true;
        ele.remove();
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
        if (e.group === 'nodes') vertices = true;
        else edges = true;
      }
    }
  });
  if (vertices) {
    const at = positions(cy);
    cy.nodes().forEach((n) => n.position(at.get(n.id()) || {x: 0, y: 0}));
  }
  if (vertices || edges) {
    bowEdges(cy);
    placeEdgeLabels(cy);
  }
  if (vertices) fitGraph(cy);
}
