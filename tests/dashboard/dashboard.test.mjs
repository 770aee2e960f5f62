// Browser test of the web dashboard (web/): Debian's Chromium, headless, driven by playwright-core.
//
// Target: the fixture head (fixture_server.mjs, serving web/ and canned API answers) unless
// TROUPE_DASHBOARD_URL names a real head's dashboard (e.g. http://127.0.0.1:8265/); then
// TROUPE_DASHBOARD_JOB picks the job to open (default: the newest RUNNING job, else the newest).
// Other settings: TROUPE_WEB_DIR (web/ to serve; default ../../web from here), TROUPE_CHROMIUM
// (default /usr/bin/chromium), TROUPE_GROWTH_TIMEOUT_S (how long to wait for a real job's charts
// to gain points; default 60). Screenshots go to $TEST_UNDECLARED_OUTPUTS_DIR under Bazel, else
// tests/artifacts/.
//
// Run: tests/dashboard/dashboard_test.sh [--url URL] [--job ID]
//      (or bazel test //tests/dashboard:dashboard_test)
import assert from 'node:assert/strict';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import {after, before, describe, test} from 'node:test';
import {fileURLToPath} from 'node:url';

import {chromium} from 'playwright-core';

import {checkFinishedRunPage, renderingProblems} from './finished_run_checks.mjs';
import {
  FINISHED_ACCOUNTING,
  FINISHED_JOB,
  FINISHED_STEPS,
  RUNNING_JOB,
  startFixtureServer,
} from './fixture_server.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const REAL_URL = process.env.TROUPE_DASHBOARD_URL || '';
// A real head's cluster token: jobs, logs and metrics need it (the page is signed in with it
// through its form, as a user would).
const TOKEN = process.env.TROUPE_DASHBOARD_TOKEN || '';
const CHROMIUM = process.env.TROUPE_CHROMIUM || '/usr/bin/chromium';
const WEB_DIR = process.env.TROUPE_WEB_DIR || path.resolve(here, '../../web');
const ARTIFACTS = process.env.TEST_UNDECLARED_OUTPUTS_DIR || path.resolve(here, '../artifacts');
const GROWTH_TIMEOUT_MS =
  1000 * Number(process.env.TROUPE_GROWTH_TIMEOUT_S || (REAL_URL ? 60 : 15));
const WAIT_MS = 15000; // Bound on every single wait for the page.
const CHROMIUM_FLAGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
  '--disable-quic',
  '--disable-dev-shm-usage',
];
// The fixture's running job and its actor classes (checked only against the fixture).
const FIXTURE_CLASSES = [
  'Checkpointer',
  'Reference',
  'ReplayBuffer',
  'RewardServer',
  'RolloutWorker',
  'RolloutWorker',
  'Trainer',
];

let fixture = null; // The fixture head, when no real URL is given.
let baseUrl = '';
let context = null; // Playwright persistent context (the browser, with its fresh profile).
let page = null;
let userDataDir = '';
let jobId = '';
const pageErrors = [];

// GET from the head under test, as JSON (the test's own view of the API, to compare with the page).
async function api(pathAndQuery) {
  const response = await fetch(new URL(pathAndQuery, baseUrl), {
    signal: AbortSignal.timeout(WAIT_MS),
    headers: TOKEN ? {Authorization: `Bearer ${TOKEN}`} : {},
  });
  assert.ok(response.ok, `GET ${pathAndQuery}: HTTP ${response.status}`);
  return response.json();
}

async function screenshot(name) {
  await fs.mkdir(ARTIFACTS, {recursive: true});
  const file = path.join(ARTIFACTS, name);
  await page.screenshot({path: file, fullPage: true, timeout: WAIT_MS});
  return file;
}

async function open(hash) {
  await page.goto(new URL(hash, baseUrl).href, {waitUntil: 'load', timeout: WAIT_MS});
}

// The actors the graph shows (the synthetic "driver" vertex excluded; a group vertex of replicas
// contributes each replica), as {id, vertex (the vertex showing it), label, cls}.
function graphVertices() {
  return page.evaluate(() => {
    const cy = window.troupeGraph;
    if (!cy) return null;
    return cy.nodes('[kind = "actor"], [kind = "group"]').flatMap((n) =>
      n.data('members').map((id) => ({
        id,
        vertex: n.id(),
        label: n.data('label'),
        cls: n.data('cls'),
      })),
    );
  });
}

// ---- The dashboard as a place to work (picker, overlay, usage, logs page, rendering) ---------

async function assertRendersCleanly(selectors) {
  assert.deepEqual(await renderingProblems(page, selectors), [], `rendered text of ${selectors}`);
}

// The catalog entry of `name` by metrics::FindMetric's rule (exact, then a trailing
// "<placeholder>" standing for one or more segments).
function catalogEntry(catalog, name) {
  return (
    catalog.find((m) => m.name === name) ||
    catalog.find((m) => {
      const open = m.name.indexOf('<');
      return open >= 0 && name.length > open && name.startsWith(m.name.slice(0, open));
    }) ||
    null
  );
}

const DEFAULT_CHART_METRICS = new Set([
  'critic/score/mean',
  'reward/correct',
  'val/accuracy',
  'actor/kl_loss',
  'actor/loss',
  'perf/gen_throughput',
  'perf/throughput',
  'rollout/staleness_mean',
]);

// The graph's geometry in model coordinates: vertices {id, kind, cls, stage, x, y, box} and edges
// {id, kind, method, source, target, label, fontPx (computed font size x zoom), data, path
// (points along the drawn curve)}.
function graphGeometry() {
  return page.evaluate(() => {
    const cy = window.troupeGraph;
    const vertices = cy.nodes().map((n) => ({
      id: n.id(),
      kind: n.data('kind'),
      cls: n.data('cls'),
      label: n.data('label'),
      stage: n.data('stage'),
      x: n.position('x'),
      y: n.position('y'),
      box: n.boundingBox({includeLabels: false, includeOverlays: false}),
    }));
    const edges = cy.edges().map((e) => {
      const a = e.sourceEndpoint();
      const b = e.targetEndpoint();
      const c = e.controlPoints();
      const path = [];
      for (let i = 0; i <= 40; i++) {
        const t = i / 40;
        if (c && c.length === 1) {
          path.push({
            x: (1 - t) ** 2 * a.x + 2 * (1 - t) * t * c[0].x + t ** 2 * b.x,
            y: (1 - t) ** 2 * a.y + 2 * (1 - t) * t * c[0].y + t ** 2 * b.y,
          });
        } else {
          path.push({x: a.x + t * (b.x - a.x), y: a.y + t * (b.y - a.y)});
        }
      }
      return {
        id: e.id(),
        kind: e.data('kind'),
        method: e.data('method'),
        source: e.source().id(),
        target: e.target().id(),
        label: e.data('label'),
        labelBox: e.boundingBox({
          includeNodes: false,
          includeEdges: false,
          includeLabels: true,
          includeMainLabels: false,
          includeSourceLabels: true,
          includeTargetLabels: false,
        }),
        fontPx: parseFloat(e.style('font-size')) * cy.zoom(),
        data: {
          staleness: e.data('staleness'),
          samples_per_s: e.data('samples_per_s'),
          version_lag: e.data('version_lag'),
          last_sync_ms: e.data('last_sync_ms'),
        },
        path,
      };
    });
    return {vertices, edges, zoom: cy.zoom()};
  });
}

// Vertex id -> [x, y], for comparing layouts.
async function graphPositions() {
  const g = await graphGeometry();
  return Object.fromEntries(g.vertices.map((v) => [v.id, [v.x, v.y]]).sort());
}

// Waits until the graph has vertices for every actor of the job (as /api/actors says).
async function waitForGraph() {
  const want = (await api(`api/actors?job=${encodeURIComponent(jobId)}`)).actors.length;
  await page.waitForFunction(
    (n) =>
      window.troupeGraph &&
      window.troupeGraph
        .nodes('[kind = "actor"], [kind = "group"]')
        .reduce((sum, v) => sum + v.data('members').length, 0) >= n,
    want,
    {timeout: WAIT_MS},
  );
}

function chartPoints(metric) {
  return page.$eval(`[data-metric="${metric}"]`, (e) => Number(e.dataset.points));
}

describe('web dashboard in headless Chromium', {timeout: 240000}, () => {
  before(async () => {
    if (REAL_URL) {
      baseUrl = new URL(REAL_URL).href;
    } else {
      fixture = await startFixtureServer({webDir: WEB_DIR});
      baseUrl = fixture.url;
    }
    await fs.access(CHROMIUM).catch(() => {
      throw new Error(
        `${CHROMIUM} not found: install Debian's chromium (tools/install_deps.sh does)`,
      );
    });
    // A fresh profile per run; playwright-core never downloads a browser (executablePath is set).
    userDataDir = await fs.mkdtemp(
      path.join(process.env.TEST_TMPDIR || os.tmpdir(), 'troupe-chromium-'),
    );
    context = await chromium.launchPersistentContext(userDataDir, {
      executablePath: CHROMIUM,
      headless: true,
      args: CHROMIUM_FLAGS,
      viewport: {width: 1440, height: 900},
      timeout: 60000,
    });
    context.setDefaultTimeout(WAIT_MS);
    page = context.pages()[0] || (await context.newPage());
    page.on('pageerror', (e) => pageErrors.push(`uncaught: ${e.message}`));
    page.on('console', (m) => {
      if (m.type() === 'error') pageErrors.push(`console.error: ${m.text()}`);
    });

    if (TOKEN) {
      // The head answers 401 to the jobs page: the sign-in form shows; the token entered is kept.
      await open('#/jobs');
      await page.waitForSelector('#token-form', {state: 'visible', timeout: WAIT_MS});
      // It says where the token is, as the head's 401 answer names it.
      assert.match(await page.textContent('#token-where'), /the token is in \/.*\/token/);
      await page.fill('#token-input', TOKEN);
      await page.click('#token-form button[type=submit]');
      await page.waitForSelector('#token-form', {state: 'hidden', timeout: WAIT_MS});
      await page.waitForFunction(() => localStorage.getItem('troupe.token'), null, {
        timeout: WAIT_MS,
      });
      // Chromium logs each 401 answered before signing in as a console error: expected here.
      const before = pageErrors.splice(0);
      pageErrors.push(...before.filter((e) => !e.includes('status of 401')));
    }
    if (process.env.TROUPE_DASHBOARD_JOB) {
      jobId = process.env.TROUPE_DASHBOARD_JOB;
    } else if (fixture) {
      jobId = RUNNING_JOB;
    } else {
      const jobs = (await api('api/jobs/')).jobs
        .slice()
        .sort((a, b) => (b.submitted_ms || 0) - (a.submitted_ms || 0));
      assert.ok(jobs.length > 0, `${baseUrl} has no jobs: submit one, or set TROUPE_DASHBOARD_JOB`);
      jobId = (jobs.find((j) => j.status === 'RUNNING') || jobs[0]).job_id;
    }
  });

  after(async () => {
    // Each step is bounded; a failure to close one thing must not leave the others running.
    if (context) {
      let timer;
      const limit = new Promise((resolve) => {
        timer = setTimeout(resolve, 10000);
      });
      await Promise.race([context.close().catch(() => {}), limit]);
      clearTimeout(timer);
    }
    if (fixture) await fixture.close();
    if (userDataDir) await fs.rm(userDataDir, {recursive: true, force: true, maxRetries: 3});
  });

  test('the cluster view shows every node with its resources used of total', async () => {
    const nodes = (await api('api/nodes')).nodes;
    await open('#/cluster');
    await page.waitForFunction(
      (n) => document.querySelectorAll('#node-list .node-card').length === n,
      nodes.length,
      {timeout: WAIT_MS},
    );
    for (const node of nodes) {
      const card = page.locator(`.node-card[data-node-id="${node.node_id}"]`);
      await card.waitFor({timeout: WAIT_MS});
      const bars = await card.locator('.bar-row').count();
      assert.ok(bars >= 1, `node ${node.hostname} shows no resource bar`);
      if ((node.resources_total || {}).CPU > 0) {
        const text = await card.locator('.bar-row[data-resource="CPU"] .bar-value').textContent();
        assert.match(text, /\//, `CPU bar of ${node.hostname} reads "${text}"`);
      }
    }
    await screenshot('dashboard_cluster.png');
  });

  test('the actors view filters the actor table by state and job', async () => {
    const all = (await api('api/actors')).actors;
    await open('#/actors');
    await page.waitForFunction(
      (n) => document.querySelectorAll('#actor-table tbody tr[data-actor-id]').length === n,
      all.length,
      {timeout: WAIT_MS},
    );
    const alive = (await api(`api/actors?job=${encodeURIComponent(jobId)}&state=ALIVE`)).actors;
    await page.waitForFunction(
      (id) =>
        [...document.querySelectorAll('#actor-filter-job option')].some((o) => o.value === id),
      jobId,
      {timeout: WAIT_MS},
    );
    await page.selectOption('#actor-filter-state', 'ALIVE');
    await page.selectOption('#actor-filter-job', jobId);
    await page.waitForFunction(
      (ids) => {
        const rows = [...document.querySelectorAll('#actor-table tbody tr[data-actor-id]')];
        return rows.length === ids.length && rows.every((r) => ids.includes(r.dataset.actorId));
      },
      alive.map((a) => a.actor_id),
      {timeout: WAIT_MS},
    );
    const states = await page.$$eval('#actor-table tbody tr[data-actor-id]', (rows) =>
      rows.map((r) => r.dataset.state),
    );
    assert.ok(
      states.every((s) => s === 'ALIVE'),
      `filtered rows have states ${states}`,
    );
    assert.match(page.url(), /state=ALIVE/, 'the filter is kept in the URL');
    await screenshot('dashboard_actors.png');
  });

  test('the job graph shows every actor of the job, replicas grouped', async () => {
    await open(`#/jobs/${encodeURIComponent(jobId)}`);
    // Compare the graph's vertices with the head's actor list of the job until they agree (a real
    // job may still be starting actors), for at most WAIT_MS.
    const deadline = Date.now() + WAIT_MS;
    let want = [];
    let got = [];
    for (;;) {
      want = (await api(`api/actors?job=${encodeURIComponent(jobId)}`)).actors
        .map((a) => a.actor_id)
        .sort();
      got = ((await graphVertices()) || []).map((v) => v.id).sort();
      if (want.length > 0 && JSON.stringify(want) === JSON.stringify(got)) break;
      if (Date.now() > deadline) break;
      await new Promise((resolve) => setTimeout(resolve, 300));
    }
    assert.deepEqual(got, want, 'graph vertices vs /api/actors?job=');
    assert.ok(want.length > 0, `job ${jobId} has no actors`);
    const vertices = await graphVertices();
    if (fixture) {
      assert.equal(vertices.length, 7);
      assert.deepEqual(vertices.map((v) => v.cls).sort(), FIXTURE_CLASSES);
      // The two rollout workers are one vertex "rollout ×2".
      const rollouts = vertices.filter((v) => v.cls === 'RolloutWorker');
      assert.deepEqual(
        rollouts.map((v) => [v.vertex, v.label]),
        [
          ['group:RolloutWorker', 'rollout ×2'],
          ['group:RolloutWorker', 'rollout ×2'],
        ],
      );
    }
    // Every class with several actors is one vertex.
    const perClass = {};
    for (const v of vertices) (perClass[v.cls] ||= new Set()).add(v.vertex);
    for (const [cls, set] of Object.entries(perClass)) {
      assert.equal(set.size, 1, `class ${cls} has ${set.size} vertices`);
    }
    // Laid out: the vertices do not all sit on one spot.
    const spread = await page.evaluate(() => {
      const box = window.troupeGraph.nodes().boundingBox();
      return box.w + box.h;
    });
    assert.ok(spread > 200, `graph bounding box ${spread}px: not laid out`);
  });

  test('the graph lays the RL loop out left to right, legibly and stably', async () => {
    await waitForGraph();
    const g = await graphGeometry();
    // No vertex overlaps another.
    for (let i = 0; i < g.vertices.length; i++) {
      for (let j = i + 1; j < g.vertices.length; j++) {
        const [a, b] = [g.vertices[i].box, g.vertices[j].box];
        const overlap = a.x1 < b.x2 && b.x1 < a.x2 && a.y1 < b.y2 && b.y1 < a.y2;
        assert.ok(!overlap, `vertices ${g.vertices[i].id} and ${g.vertices[j].id} overlap`);
      }
    }
    // Edge labels are legible at 100% page zoom: >= 11 px rendered.
    assert.ok(g.edges.length > 0, 'the graph has edges');
    for (const e of g.edges) {
      assert.ok(e.fontPx >= 11, `edge ${e.id}: label font ${e.fontPx.toFixed(1)} px rendered`);
      assert.ok(e.label && e.label.length > 0, `edge ${e.id} has no label`);
    }
    // No edge runs through a vertex other than its ends.
    for (const e of g.edges) {
      for (const v of g.vertices) {
        if (v.id === e.source || v.id === e.target) continue;
        const hit = e.path.find(
          (p) =>
            p.x > v.box.x1 + 2 && p.x < v.box.x2 - 2 && p.y > v.box.y1 + 2 && p.y < v.box.y2 - 2,
        );
        assert.ok(!hit, `edge ${e.id} crosses vertex ${v.id} at ${JSON.stringify(hit)}`);
      }
    }
    // The loop's stages read left to right, in one row; the driver and the others sit aside.
    const loop = g.vertices.filter((v) => v.stage >= 0).sort((a, b) => a.stage - b.stage);
    for (let i = 1; i < loop.length; i++) {
      assert.ok(
        loop[i].x > loop[i - 1].x,
        `stage ${loop[i].cls} (x ${loop[i].x}) is not right of ${loop[i - 1].cls} (x ${loop[i - 1].x})`,
      );
    }
    for (const v of g.vertices.filter((x) => !(x.stage >= 0))) {
      assert.ok(
        loop.every((l) => Math.abs(l.y - v.y) > 46),
        `${v.id} (aside) is in the loop's row`,
      );
    }
    if (fixture) {
      // Edge labels cover neither each other nor a vertex (a real job's graph may leave the
      // layout no room; the fixture's must not).
      const boxes = [
        ...g.edges.map((e) => ({id: `label of ${e.id}`, box: e.labelBox})),
        ...g.vertices.map((v) => ({id: v.id, box: v.box})),
      ];
      for (let i = 0; i < g.edges.length; i++) {
        for (let j = i + 1; j < boxes.length; j++) {
          const [a, b] = [boxes[i].box, boxes[j].box];
          const overlap = a.x1 + 1 < b.x2 && b.x1 + 1 < a.x2 && a.y1 + 1 < b.y2 && b.y1 + 1 < a.y2;
          assert.ok(!overlap, `${boxes[i].id} overlaps ${boxes[j].id}`);
        }
      }
      assert.deepEqual(
        loop.map((v) => v.cls),
        ['RolloutWorker', 'RewardServer', 'ReplayBuffer', 'Trainer'],
      );
      const edge = (method, target) =>
        g.edges.find((e) => e.method === method && (!target || e.target === target));
      // Staleness is per edge (samples age around the loop), and shown with samples/s, bytes/s.
      const take = edge('Take');
      const generate = edge('Generate');
      assert.ok(
        take.data.staleness > generate.data.staleness + 0.5,
        JSON.stringify([take, generate].map((e) => e.data)),
      );
      assert.match(take.label, /samples\/s/);
      assert.match(take.label, /[KMG]?i?B\/s/);
      assert.match(take.label, /stale 1\.\d+/);
      // Replicas' edges are summed: 48 + 44 samples/s into the rollout group (±8% jitter).
      assert.ok(Math.abs(generate.data.samples_per_s - 92) < 10, `${generate.data.samples_per_s}`);
      // The weights edge closes the loop, trainer -> rollout group, with the largest lag.
      const weights = g.edges.find((e) => e.kind === 'weights');
      assert.equal(weights.target, 'group:RolloutWorker');
      assert.equal(weights.data.version_lag, 1);
      assert.match(weights.label, /lag 1/);
      assert.match(weights.label, /synced .* ago/);
      // ... drawn below the row.
      const rowY = loop[0].y;
      assert.ok(
        Math.max(...weights.path.map((p) => p.y)) > rowY + 40,
        'weights arc below the loop',
      );
    }
    const el = page.locator('#graph');
    await fs.mkdir(ARTIFACTS, {recursive: true});
    await el.screenshot({path: path.join(ARTIFACTS, 'dashboard_graph.png'), timeout: WAIT_MS});

    // Stable: the same positions after a poll (rates change) and after reloading the page.
    const before = await graphPositions();
    const labels = await page.evaluate(() =>
      window.troupeGraph
        .edges()
        .map((e) => e.data('label'))
        .join('|'),
    );
    if (fixture) {
      await page.waitForFunction(
        (old) =>
          window.troupeGraph
            .edges()
            .map((e) => e.data('label'))
            .join('|') !== old,
        labels,
        {timeout: WAIT_MS},
      );
    } else {
      await new Promise((resolve) => setTimeout(resolve, 3000));
    }
    assert.deepEqual(await graphPositions(), before, 'positions after a poll');
    await page.reload({waitUntil: 'load', timeout: WAIT_MS});
    await waitForGraph();
    assert.deepEqual(await graphPositions(), before, 'positions after a reload');
    await el.screenshot({
      path: path.join(ARTIFACTS, 'dashboard_graph_reloaded.png'),
      timeout: WAIT_MS,
    });
  });

  test('a metric chart has points and gains more after a poll', async (t) => {
    const metric = 'critic/score/mean';
    await page.waitForFunction(
      (m) => Number(document.querySelector(`[data-metric="${m}"]`)?.dataset.points) > 0,
      metric,
      {timeout: WAIT_MS},
    );
    const first = await chartPoints(metric);
    assert.ok(
      (await page.locator(`[data-metric="${metric}"] canvas`).count()) > 0,
      'no chart canvas drawn',
    );
    const job = await api(`api/jobs/${encodeURIComponent(jobId)}`);
    if (!fixture && job.status !== 'RUNNING') {
      t.diagnostic(`job ${jobId} is ${job.status}: not waiting for new points`);
      return;
    }
    await page.waitForFunction(
      ([m, n]) => Number(document.querySelector(`[data-metric="${m}"]`).dataset.points) > n,
      [metric, first],
      {timeout: GROWTH_TIMEOUT_MS},
    );
    const second = await chartPoints(metric);
    assert.ok(second > first, `points ${first} -> ${second}`);
  });

  test('clicking a vertex shows its details and log tail', async () => {
    const vertices = (await graphVertices()).filter((v) => v.vertex === v.id);
    const target =
      vertices.find((v) => v.cls === 'RolloutWorker') ||
      vertices.find((v) => v.cls === 'RewardServer') ||
      vertices[0];
    const expected = await api(`api/actors/${encodeURIComponent(target.id)}`);
    // A real mouse click at the vertex's rendered position (exercises the page's event wiring).
    const box = await page.locator('#graph').boundingBox();
    const pos = await page.evaluate(
      (id) => window.troupeGraph.getElementById(id).renderedPosition(),
      target.id,
    );
    await page.mouse.click(box.x + pos.x, box.y + pos.y);
    const panel = page.locator('#details-panel');
    // The fixture's tail is fixed: its last line must show. A live actor's tail moves on, so
    // against a real head any loaded tail will do.
    const lastLine = fixture ? (expected.log_tail || '').split('\n').filter(Boolean).pop() : '';
    await page.waitForFunction(
      ([id, line]) => {
        const p = document.querySelector('#details-panel');
        const log = p.querySelector('.log-tail');
        return (
          p.dataset.actorId === id &&
          log &&
          log.textContent !== 'loading…' &&
          (!line || log.textContent.includes(line))
        );
      },
      [target.id, lastLine || ''],
      {timeout: WAIT_MS},
    );
    if (fixture) assert.ok(lastLine, 'the fixture actor has a log tail');
    assert.equal(
      await panel.locator('.details-name').textContent(),
      expected.name || expected.class_name,
    );
    const text = await panel.textContent();
    assert.ok(text.includes(expected.actor_id), 'the panel shows the actor id');
    assert.ok(text.includes(expected.class_name), 'the panel shows the class');
    const selected = await page.evaluate(() =>
      window.troupeGraph.$('node:selected').map((n) => n.id()),
    );
    assert.deepEqual(selected, [target.id], 'the clicked vertex is selected');
  });

  test("clicking a replica group lists its replicas and opens one's details", async (t) => {
    const groups = (await graphVertices()).filter((v) => v.vertex !== v.id);
    if (!groups.length) {
      assert.ok(!fixture, 'the fixture has a group of rollout workers');
      t.diagnostic('no class has replicas in this job');
      return;
    }
    const group = groups[0].vertex;
    const members = groups.filter((v) => v.vertex === group).map((v) => v.id);
    const box = await page.locator('#graph').boundingBox();
    const pos = await page.evaluate(
      (id) => window.troupeGraph.getElementById(id).renderedPosition(),
      group,
    );
    await page.mouse.click(box.x + pos.x, box.y + pos.y);
    const rows = page.locator('#details-panel .replica-table tr');
    await page.waitForFunction(
      (n) => document.querySelectorAll('#details-panel .replica-table tr').length === n,
      members.length,
      {timeout: WAIT_MS},
    );
    assert.deepEqual(await rows.evaluateAll((trs) => trs.map((tr) => tr.dataset.replica)), members);
    assert.deepEqual(
      await page.evaluate(() => window.troupeGraph.$('node:selected').map((n) => n.id())),
      [group],
      'the group vertex is selected',
    );
    await page.locator('#details-panel .replica-button').nth(1).click();
    await page.waitForFunction(
      (id) => {
        const p = document.querySelector('#details-panel');
        const log = p.querySelector('.log-tail');
        return p.dataset.actorId === id && log && log.textContent !== 'loading…';
      },
      members[1],
      {timeout: WAIT_MS},
    );
    const stray = await page.$eval(
      '#details-panel',
      (p) =>
        [...p.childNodes].filter((n) => n.nodeType === Node.TEXT_NODE && n.textContent.trim())
          .length,
    );
    assert.equal(stray, 0, 'the panel has no stray text (e.g. "null")');
  });

  test('the job log shows the driver output and follows it', async () => {
    await page.waitForFunction(
      () => document.querySelector('#job-log').textContent.length > 0,
      null,
      {timeout: WAIT_MS},
    );
    const first = await page.$eval('#job-log', (e) => Number(e.dataset.offset));
    assert.ok(first > 0, 'log offset advanced');
    if (fixture) {
      const text = await page.$eval('#job-log', (e) => e.textContent);
      assert.ok(text.includes(`troupe job ${jobId}`), 'log starts with the job banner');
      assert.ok(
        text.includes('«{a} + {b} =» — answers scored by exact match ✓'),
        'UTF-8 survives chunked reads',
      );
      await page.waitForFunction(
        (n) => Number(document.querySelector('#job-log').dataset.offset) > n,
        first,
        {timeout: WAIT_MS},
      );
      const steps = await page.$eval('#job-log', (e) => e.textContent.match(/^step /gm).length);
      assert.ok(steps > 1, 'step lines appended');
    }
    await page.evaluate(() => window.scrollTo(0, 0));
    const file = await screenshot('dashboard_job.png');
    const size = (await fs.stat(file)).size;
    assert.ok(size > 20000, `screenshot ${file} is only ${size} bytes`);
  });

  test(
    "a finished job's view reads metrics.jsonl-shaped series and shows its dead actors",
    {skip: REAL_URL ? 'fixture only (a real head serves one metrics shape)' : false},
    async () => {
      await open(`#/jobs/${FINISHED_JOB}`);
      await page.waitForFunction(
        () => window.troupeGraph && window.troupeGraph.nodes('[kind = "actor"]').length === 3,
        null,
        {timeout: WAIT_MS},
      );
      const states = await page.evaluate(() =>
        window.troupeGraph.nodes('[kind = "actor"]').map((n) => n.data('state')),
      );
      assert.deepEqual(states, ['DEAD', 'DEAD', 'DEAD']);
      // Scalars (one "NaN" loss among them), all FINISHED_STEPS long.
      for (const metric of ['critic/score/mean', 'actor/loss', 'rollout/staleness_mean']) {
        await page.waitForFunction(
          ([m, n]) => Number(document.querySelector(`[data-metric="${m}"]`)?.dataset.points) === n,
          [metric, FINISHED_STEPS],
          {timeout: WAIT_MS},
        );
      }
      assert.equal(await page.locator('#job-header .badge').textContent(), 'SUCCEEDED');
      await page.waitForFunction(
        () => document.querySelector('#job-log').textContent.includes('job finished: SUCCEEDED'),
        null,
        {timeout: WAIT_MS},
      );
      await checkFinishedRunPage(page, api, FINISHED_JOB, {
        accuracy: '38.8% before training → 82.0% after (+43.2 points)',
        samples: FINISHED_ACCOUNTING,
        steps: '150 of 150 (completed)',
        curvePoints: 4,
      });
      // The field the page has no row for is named, with its value.
      assert.match(
        await page.locator('#job-summary tr[data-row="other"] td').textContent(),
        /critic\.restarts 0/,
      );
      // Each channel says what crossed it in all (the fixture's totals), none "(idle)".
      const labels = await page.evaluate(() =>
        window.troupeGraph.edges().map((e) => e.data('label')),
      );
      assert.ok(
        labels.some((l) => l.startsWith('Generate · 1216 calls\n38912 samples')),
        `edge labels: ${JSON.stringify(labels)}`,
      );
      assert.ok(!labels.some((l) => /idle/.test(l)), `edge labels: ${JSON.stringify(labels)}`);
      await screenshot('dashboard_finished_job.png');
    },
  );

  test('the cluster view shows measured CPU and memory beside the reserved resources', async () => {
    // The usage moves between samples (on a busy machine by more than any tolerance), so the page
    // is checked against the api/nodes answers it received itself, not against one of the test's:
    // what a card shows must be, to the digit, what one of them said (the newest, unless another
    // arrived between rendering and reading).
    const isNodes = (r) => new URL(r.url()).pathname.endsWith('/api/nodes') && r.ok();
    const received = []; // the bodies of the page's api/nodes answers, in order
    const onResponse = (r) => {
      if (isNodes(r)) received.push(r.json().catch(() => null));
    };
    page.on('response', onResponse);
    let nodes;
    const shown = new Map(); // node id -> {cpu, memory} as the card reads
    try {
      const first = page.waitForResponse(isNodes, {timeout: WAIT_MS});
      await open('#/cluster');
      nodes = (await (await first).json()).nodes;
      for (const node of nodes) {
        const card = page.locator(`.node-card[data-node-id="${node.node_id}"]`);
        await card.locator('.bars[data-kind="used"] .bar-row[data-usage="cpu"]').waitFor();
        const text = await card.textContent();
        assert.match(text, /Reserved/, `${node.hostname}: the reservation bars are labelled`);
        assert.match(text, /Used/, `${node.hostname}: the usage bars are labelled`);
        const cpu = await card
          .locator('.bars[data-kind="used"] .bar-row[data-usage="cpu"] .bar-value')
          .textContent();
        const memory = await card
          .locator('.bars[data-kind="used"] .bar-row[data-usage="memory"] .bar-value')
          .textContent();
        shown.set(node.node_id, {cpu, memory});
      }
    } finally {
      page.off('response', onResponse);
    }
    const answers = (await Promise.all(received)).filter((b) => b && Array.isArray(b.nodes));
    assert.ok(answers.length > 0, 'the page received no api/nodes answer');
    for (const node of nodes) {
      const {cpu, memory} = shown.get(node.node_id);
      // What the page would show for each answer's usage of this node (format.js's own rule).
      const usages = answers.map(
        (b) => (b.nodes.find((n) => n.node_id === node.node_id) || {}).usage,
      );
      const renderings = await page.evaluate(async (list) => {
        const f = await import('./js/format.js');
        return list.map((u) =>
          u && typeof u.cpu_percent === 'number' ? f.fmtPercent(u.cpu_percent) : '–',
        );
      }, usages);
      assert.ok(
        renderings.includes(cpu),
        `${node.hostname} CPU used reads "${cpu}"; the page's answers said ${JSON.stringify(renderings)}`,
      );
      const usage = usages[renderings.lastIndexOf(cpu)];
      if (usage && typeof usage.cpu_percent === 'number') {
        assert.match(cpu, /^\d+(\.\d+)?%$/, `${node.hostname} CPU used reads "${cpu}"`);
      } else {
        assert.equal(cpu, '–', `${node.hostname} has no usage: CPU reads "${cpu}"`);
      }
      if (usage && typeof usage.memory_used_bytes === 'number') {
        assert.match(memory, /B \/ .*B$/, `${node.hostname} memory used reads "${memory}"`);
      } else {
        assert.equal(memory, '–');
      }
    }
    if (fixture) {
      assert.ok(
        nodes.some((n) => n.usage === null),
        'the fixture has a node with unknown usage',
      );
    }
    await assertRendersCleanly(['#cluster-summary', '#node-list']);
    await screenshot('dashboard_cluster.png');
  });

  test('the actors table and panel show CPU and RSS, and the Job column is not clipped', async () => {
    const actors = (await api('api/actors')).actors;
    await open('#/actors');
    await page.waitForFunction(
      (n) => document.querySelectorAll('#actor-table tbody tr[data-actor-id]').length === n,
      actors.length,
    );
    for (const a of actors) {
      const row = page.locator(`#actor-table tbody tr[data-actor-id="${a.actor_id}"]`);
      const cpu = await row.locator('td[data-col="cpu"]').textContent();
      const rss = await row.locator('td[data-col="rss"]').textContent();
      if (a.usage && typeof a.usage.cpu_percent === 'number') {
        assert.match(cpu, /^\d+(\.\d+)?%$/, `${a.name} CPU reads "${cpu}"`);
        assert.match(rss, /^\d+(\.\d+)? (B|KiB|MiB|GiB|TiB)$/, `${a.name} RSS reads "${rss}"`);
      } else {
        assert.equal(cpu, '–', `${a.name} has no usage: CPU reads "${cpu}"`);
        assert.equal(rss, '–');
      }
    }
    // The Job column is whole: no cell is wider than its box or cut off by the table's card,
    // on a wide screen and a laptop's.
    for (const width of [1440, 1200]) {
      await page.setViewportSize({width, height: 900});
      const clipped = await page.$$eval('#actor-table td[data-col="job"]', (cells) =>
        cells
          .filter((td) => {
            const card = td.closest('.table-card').getBoundingClientRect();
            return (
              td.scrollWidth > td.clientWidth || td.getBoundingClientRect().right > card.right + 1
            );
          })
          .map((td) => td.textContent),
      );
      assert.deepEqual(clipped, [], `clipped Job cells at ${width}px`);
    }
    await page.setViewportSize({width: 1440, height: 900});
    // Details of an actor with usage, and of one without (missing fields show "–").
    const withUsage = actors.find((a) => a.usage) || actors[0];
    const without = actors.find((a) => !a.usage);
    for (const a of [withUsage, without].filter(Boolean)) {
      await page.click(`#actor-table tbody tr[data-actor-id="${a.actor_id}"]`);
      await page.waitForFunction(
        (id) => document.querySelector('#actor-details-panel').dataset.actorId === id,
        a.actor_id,
      );
      const text = await page.locator('#actor-details-panel').textContent();
      assert.match(text, /CPU \(used\)/);
      assert.match(text, /Memory \(RSS\)/);
      await assertRendersCleanly(['#actor-table', '#actor-details-panel']);
    }
    await screenshot('dashboard_actors.png');
  });

  test('the metric picker adds a chart for a non-default metric with its unit on the y axis', async () => {
    const catalog = (await api('api/metric_catalog')).metrics;
    assert.ok(catalog.length > 0, 'the metric catalog is empty');
    await open(`#/jobs/${encodeURIComponent(jobId)}`);
    // The default charts' units come from the catalog.
    await page.waitForFunction(
      () => Number(document.querySelector('.chart[data-chart="throughput"]')?.dataset.points) > 0,
    );
    assert.equal(
      await page.$eval('.chart[data-chart="throughput"]', (e) => e.dataset.unit),
      catalogEntry(catalog, 'perf/throughput').unit,
    );
    // Pick a metric the job logged that no default chart shows (one with a unit if there is).
    const logged = Object.keys(
      ((m) => ({...(m.series || {}), ...(m.scalars || {})}))(
        await api(`api/jobs/${encodeURIComponent(jobId)}/metrics`),
      ),
    ).filter((n) => !DEFAULT_CHART_METRICS.has(n));
    assert.ok(logged.length > 0, `job ${jobId} logged no metric beyond the default charts`);
    const metric = fixture
      ? 'timing_s/step'
      : logged.find((n) => (catalogEntry(catalog, n) || {}).unit) || logged[0];
    const unit = (catalogEntry(catalog, metric) || {}).unit || '';
    if (fixture) assert.equal(unit, 's');
    await page.click('#metric-picker > summary');
    await page.fill('#metric-picker-search', metric.split('/').pop());
    const item = page.locator(`#metric-picker-list [data-pick-metric="${metric}"]`);
    await item.waitFor();
    const itemText = await item.textContent();
    if (unit) assert.ok(itemText.includes(unit), `picker item "${itemText}" shows the unit`);
    await item.click();
    const selector = `.chart[data-metric="${metric}"]`;
    await page.waitForFunction(
      (sel) => Number(document.querySelector(sel)?.dataset.points) > 0,
      selector,
    );
    assert.equal(await page.$eval(selector, (e) => e.dataset.unit), unit || 'value');
    const axisLabel = await page.evaluate(
      (m) => window.troupeCharts.charts.get(`m:${m}`).plot.axes[1].label,
      metric,
    );
    assert.equal(axisLabel, unit || 'value', 'the y axis is labelled with the unit');
    assert.ok((await page.locator(`${selector} canvas`).count()) > 0, 'the picked chart is drawn');
    assert.equal(new URL(page.url()).hash.includes(`charts=${encodeURIComponent(metric)}`), true);
    // The picked set survives a reload (it is in the URL), and the chart can be removed again.
    await page.reload({waitUntil: 'load'});
    await page.waitForFunction(
      (sel) => Number(document.querySelector(sel)?.dataset.points) > 0,
      selector,
    );
    await page.click(`.chart-card[data-chart="m:${metric}"] .chart-remove`);
    await page.waitForFunction((sel) => !document.querySelector(sel), selector);
    assert.ok(!page.url().includes('charts='), 'the removed chart left the URL');
    await page.click(`#metric-picker > summary`);
    await item.click();
    await page.waitForFunction(
      (sel) => Number(document.querySelector(sel)?.dataset.points) > 0,
      selector,
    );
    await page.click('#metric-picker > summary'); // Close the picker for the screenshots.
  });

  test('overlaying another job draws both jobs in every chart', async (t) => {
    const jobs = (await api('api/jobs/')).jobs.filter((j) => j.job_id !== jobId);
    if (!jobs.length) {
      t.skip('the head has a single job');
      return;
    }
    // Against a real head: the newest other job that logged the metric compared.
    const metric = 'critic/score/mean';
    let other = fixture ? FINISHED_JOB : '';
    for (const j of fixture ? [] : jobs.slice().reverse()) {
      const m = await api(`api/jobs/${encodeURIComponent(j.job_id)}/metrics`).catch(() => ({}));
      if ((m.series || m.scalars || {})[metric]) {
        other = j.job_id;
        break;
      }
    }
    if (!other) {
      t.skip(`no other job logged ${metric}`);
      return;
    }
    await page.waitForFunction(
      (id) => [...document.querySelectorAll('#compare-job option')].some((o) => o.value === id),
      other,
    );
    await page.selectOption('#compare-job', other);
    await page.waitForFunction(
      ([m, a, b]) => {
        const c = document.querySelector(`.chart[data-metric="${m}"]`);
        const jobs = (c?.dataset.jobs || '').split(' ');
        return jobs.includes(a) && jobs.includes(b) && c.dataset.series === '2';
      },
      [metric, jobId, other],
      {timeout: WAIT_MS},
    );
    const legend = await page.locator(`.chart[data-metric="${metric}"] .u-legend`).textContent();
    assert.ok(legend.includes(other), `legend "${legend}" names the overlaid job`);
    assert.ok(legend.includes(jobId), `legend "${legend}" names the job`);
    assert.match(page.url(), new RegExp(`compare=${other}`), 'the overlay is kept in the URL');
    if (fixture) {
      // The finished job has FINISHED_STEPS steps, the running one fewer: the union is plotted.
      await page.waitForFunction(
        ([m, n]) =>
          Number(document.querySelector(`.chart[data-metric="${m}"]`).dataset.points) >= n,
        [metric, FINISHED_STEPS],
      );
    }
    // Select an actor so the details panel is checked too.
    const vertices = await graphVertices();
    const target = vertices.find((v) => v.cls === 'Trainer') || vertices[0];
    await page.evaluate(() => window.scrollTo(0, 0));
    const box = await page.locator('#graph').boundingBox();
    const pos = await page.evaluate(
      (id) => window.troupeGraph.getElementById(id).renderedPosition(),
      target.id,
    );
    await page.mouse.click(box.x + pos.x, box.y + pos.y);
    await page.waitForFunction((id) => {
      const p = document.querySelector('#details-panel');
      return p.dataset.actorId === id && !p.textContent.includes('loading…');
    }, target.id);
    await assertRendersCleanly([
      '#job-header',
      '#details-panel',
      '#chart-grid',
      '#metric-values',
      '#metric-picker-list',
    ]);
    await page.evaluate(() => window.scrollTo(0, 0));
    await screenshot('dashboard_job_overlay.png');
  });

  test('the logs page lists every worker by node and follows the selected log', async (t) => {
    const actors = (await api('api/actors')).actors;
    await open('#/logs');
    await page.waitForFunction(
      (n) => document.querySelectorAll('#worker-list .worker-row').length === n,
      actors.length,
    );
    // Grouped by node: each worker sits under the node it runs on.
    const placement = await page.$$eval('#worker-list .worker-row', (rows) =>
      rows.map((r) => [r.dataset.actorId, r.closest('.worker-group').dataset.nodeId]),
    );
    for (const [id, nodeId] of placement) {
      const a = actors.find((x) => x.actor_id === id);
      assert.equal(nodeId, a.node_id || '', `${a.name} is listed under its node`);
    }
    const target = actors.find((a) => a.state === 'ALIVE');
    assert.ok(target, 'an ALIVE actor to follow');
    await page.click(
      `#worker-list .worker-row[data-actor-id="${target.actor_id}"] a[data-stream="stderr"]`,
    );
    assert.match(page.url(), /#\/logs\?actor=.*&stream=stderr/);
    const pre = page.locator('#worker-log');
    // A first read has been answered (a real worker may not have written to stderr yet).
    await page.waitForFunction(
      () => document.querySelector('#worker-log-status').textContent.length > 0,
    );
    if (fixture) {
      await page.waitForFunction(
        () => Number(document.querySelector('#worker-log').dataset.offset) > 0,
      );
    }
    const first = Number(await pre.getAttribute('data-offset'));
    // Following: new output is appended and the view stays at the bottom. (A real worker may
    // write nothing for minutes: against a real head only the first read is checked.)
    if (!fixture) {
      t.diagnostic('real head: not waiting for the worker to write more');
      await screenshot('dashboard_logs.png');
      return;
    }
    await page.waitForFunction(
      (n) => Number(document.querySelector('#worker-log').dataset.offset) > n,
      first,
      {timeout: GROWTH_TIMEOUT_MS},
    );
    const following = await page.evaluate(() => {
      const p = document.querySelector('#worker-log');
      return {
        flag: p.dataset.following,
        atBottom: p.scrollHeight - p.scrollTop - p.clientHeight < 24,
        scrollable: p.scrollHeight > p.clientHeight,
        text: p.textContent,
      };
    });
    assert.equal(following.flag, '1');
    assert.ok(following.atBottom, 'a followed log stays scrolled to the bottom');
    if (fixture) {
      assert.ok(following.text.includes('loading shard 60/60'), 'the log is read from its start');
      assert.match(following.text, /stderr line \d+: step \d+ ok ✓\n$/, 'appended lines are whole');
      assert.equal(following.text.match(/loading shard 1\/60\n/g).length, 1, 'no byte read twice');
    }
    if (following.scrollable) {
      // Scrolled up: following stops (output still arrives, the view stays put) ...
      await page.evaluate(() => {
        const p = document.querySelector('#worker-log');
        p.scrollTop = 0;
        p.dispatchEvent(new Event('scroll'));
      });
      await page.waitForFunction(
        () => document.querySelector('#worker-log').dataset.following === '0',
      );
      const paused = Number(await pre.getAttribute('data-offset'));
      await page.waitForFunction(
        (n) => Number(document.querySelector('#worker-log').dataset.offset) > n,
        paused,
        {timeout: GROWTH_TIMEOUT_MS},
      );
      assert.equal(await page.$eval('#worker-log', (p) => p.scrollTop), 0, 'the view stayed put');
      assert.ok(await page.locator('#worker-log-follow').isVisible(), 'a Follow button is offered');
      // ... and resumes at the bottom.
      await page.evaluate(() => {
        const p = document.querySelector('#worker-log');
        p.scrollTop = p.scrollHeight;
        p.dispatchEvent(new Event('scroll'));
      });
      await page.waitForFunction(
        () => document.querySelector('#worker-log').dataset.following === '1',
      );
    }
    await assertRendersCleanly(['#worker-list', '#worker-log-title']);
    await screenshot('dashboard_logs.png');
  });

  test('the page raised no script errors', () => {
    assert.deepEqual(pageErrors, []);
  });
});
