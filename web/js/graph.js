// The job view's actor graph (cytoscape with the dagre layout, loaded by index.html as plain
// scripts): vertices and edges from /api/graph, their style, the layout (data flow left to right
// or a star around the driver, feedback edges bowed around the vertices, edge labels placed off
// the middle) and the legend.
//
// Exports: createGraph (a cytoscape instance in a container), syncGraph (brings it to an
// /api/graph answer, laying it out again when vertices or edges came or went), placeEdgeLabels,
// renderLegend.

import {el, fmtNumber, fmtRate, isNum} from './format.js';

// Vertex colours by actor state: [fill, border].
const STATE_COLORS = {
  ALIVE: ['#dcfce7', '#16a34a'],
  PENDING: ['#fef3c7', '#d97706'],
  RESTARTING: ['#ffedd5', '#ea580c'],
  DEAD: ['#fee2e2', '#dc2626'],
};
const UNKNOWN_STATE_COLORS = ['#f3f4f6', '#6b7280'];
const EDGE_COLORS = {call: '#6b7280', samples: '#2563eb', weights: '#9333ea'};

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
    if (kind === 'samples' && isNum(e.staleness)) label += ` · stale ${fmtNumber(e.staleness, 2)}`;
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
export function placeEdgeLabels(edges) {
  edges.forEach((edge) => {
    const a = edge.source();
    const b = edge.target();
    const length = Math.hypot(b.position('x') - a.position('x'), b.position('y') - a.position('y'));
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
    minZoom: 0.2,
    maxZoom: 2.5,
    boxSelectionEnabled: false,
  });
}

// Brings `cy` to `graph` (an /api/graph answer): data of known elements is updated in place
// (keeping the bows and label offsets the last layout computed); when an element came or went the
// whole graph is laid out again and fitted.
export function syncGraph(cy, graph) {
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
  if (changed) layOut(cy);
}

// Lays the whole graph out again (dagre, with the driver and feedback edges placed by hand) and
// fits it to the view.
function layOut(cy) {
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
