// A real finished run in `troupe dashboard RUN_DIR`, in headless Chromium (finished_run_test.sh
// runs the job and the viewer, then this): the job page shows when the run ran (as its files
// recorded it, not when the viewer opened it), its summary in the words `troupe run` printed at
// its end with the held-out curve as a chart, and the actor graph of every actor it ran with the
// calls its cluster recorded.
//
// Environment: TROUPE_DASHBOARD_URL (the viewer), TROUPE_DASHBOARD_LINK (the sign-in link it
// printed, token included), TROUPE_DASHBOARD_TOKEN (that token, for the test's own API reads),
// TROUPE_DASHBOARD_JOB (the run's job id),
// TROUPE_RUN_DIR (the run directory), TROUPE_RUN_OUTPUT (what `troupe run` printed),
// TROUPE_VIEWER_STARTED_MS (when the viewer was started), TROUPE_CHROMIUM (default
// /usr/bin/chromium). Screenshot: finished_run.png in $TEST_UNDECLARED_OUTPUTS_DIR (else
// tests/artifacts/).
import assert from 'node:assert/strict';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import {after, before, describe, test} from 'node:test';
import {fileURLToPath} from 'node:url';

import {chromium} from 'playwright-core';

import {checkFinishedRunPage} from './finished_run_checks.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`finished_run.test: ${name} is not set (run finished_run_test.sh)`);
  return v;
};
const BASE_URL = new URL(env('TROUPE_DASHBOARD_URL')).href;
const LINK = env('TROUPE_DASHBOARD_LINK');
const TOKEN = env('TROUPE_DASHBOARD_TOKEN');
const JOB = env('TROUPE_DASHBOARD_JOB');
const RUN_DIR = env('TROUPE_RUN_DIR');
const RUN_OUTPUT = env('TROUPE_RUN_OUTPUT');
const VIEWER_STARTED_MS = Number(env('TROUPE_VIEWER_STARTED_MS'));
const CHROMIUM = process.env.TROUPE_CHROMIUM || '/usr/bin/chromium';
const ARTIFACTS = process.env.TEST_UNDECLARED_OUTPUTS_DIR || path.resolve(here, '../artifacts');
const WAIT_MS = 15000;

let context = null;
let page = null;
let userDataDir = '';
const pageErrors = [];

async function api(pathAndQuery) {
  const response = await fetch(new URL(pathAndQuery, BASE_URL), {
    headers: {Authorization: `Bearer ${TOKEN}`},
    signal: AbortSignal.timeout(WAIT_MS),
  });
  assert.ok(response.ok, `GET ${pathAndQuery}: HTTP ${response.status}`);
  return response.json();
}

describe('a finished run in troupe dashboard RUN_DIR', {timeout: 120000}, () => {
  before(async () => {
    userDataDir = await fs.mkdtemp(
      path.join(process.env.TEST_TMPDIR || os.tmpdir(), 'troupe-chromium-'),
    );
    context = await chromium.launchPersistentContext(userDataDir, {
      executablePath: CHROMIUM,
      headless: true,
      args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run'],
      viewport: {width: 1440, height: 900},
      timeout: 60000,
    });
    context.setDefaultTimeout(WAIT_MS);
    page = context.pages()[0] || (await context.newPage());
    page.on('pageerror', (e) => pageErrors.push(`uncaught: ${e.message}`));
    page.on('console', (m) => {
      if (m.type() === 'error') pageErrors.push(`console.error: ${m.text()}`);
    });
  });

  after(async () => {
    if (context) await context.close().catch(() => {});
    if (userDataDir) await fs.rm(userDataDir, {recursive: true, force: true, maxRetries: 3});
  });

  test('its page shows when it ran, its summary as text and chart, and its actor graph', async () => {
    const summary = JSON.parse(await fs.readFile(path.join(RUN_DIR, 'summary.json'), 'utf8'));
    const records = (await fs.readFile(path.join(RUN_DIR, 'metrics.jsonl'), 'utf8'))
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l));
    const printed = await fs.readFile(RUN_OUTPUT, 'utf8');
    // The accounting line `troupe run` printed: "  samples: N generated = ...".
    const accounting = printed.match(/^ {2}samples: (.*)$/m);
    assert.ok(accounting, `troupe run printed no samples line:\n${printed}`);
    const pct = (a) => `${(100 * a).toFixed(1)}%`;
    const points = 100 * (summary.final_accuracy - summary.initial_accuracy);

    // As a user does: the link `troupe dashboard` printed signs the page in, and the token
    // leaves the address bar.
    await page.goto(LINK, {waitUntil: 'load', timeout: WAIT_MS});
    await page.waitForFunction(() => !window.location.hash.includes('token='), null, {
      timeout: WAIT_MS,
    });
    assert.equal(new URL(page.url()).hash, `#/jobs/${encodeURIComponent(JOB)}`);
    const job = await checkFinishedRunPage(page, api, JOB, {
      accuracy:
        `${pct(summary.initial_accuracy)} before training → ${pct(summary.final_accuracy)} after ` +
        `(${points >= 0 ? '+' : '−'}${Math.abs(points).toFixed(1)} points)`,
      samples: accounting[1],
      steps: `${summary.steps} of ${summary.total_steps} (${summary.ended})`,
      curvePoints: summary.curve.length,
    });
    // When it ran, as recorded: it ended before the viewer started, and its span holds every
    // metrics record.
    assert.equal(job.status, 'SUCCEEDED');
    assert.ok(job.end_ms < VIEWER_STARTED_MS, `end ${job.end_ms} vs viewer ${VIEWER_STARTED_MS}`);
    const times = records.map((r) => r.time * 1000).filter(Number.isFinite);
    assert.ok(job.start_ms <= Math.min(...times) + 1, `start ${job.start_ms}, metrics ${times[0]}`);
    assert.ok(job.end_ms >= Math.max(...times) - 1, `end ${job.end_ms}, metrics ${times.at(-1)}`);

    // Every actor the run recorded is a vertex (replicas grouped), all DEAD, and the calls drawn
    // are labelled with their totals.
    const actors = (await api(`api/actors?job=${encodeURIComponent(JOB)}`)).actors;
    assert.ok(actors.length >= 5, `the run recorded ${actors.length} actors`);
    await page.waitForFunction(
      (n) =>
        window.troupeGraph
          .nodes('[kind = "actor"], [kind = "group"]')
          .reduce((sum, v) => sum + v.data('members').length, 0) === n,
      actors.length,
      {timeout: WAIT_MS},
    );
    const graph = await page.evaluate(() => ({
      states: window.troupeGraph.nodes('[kind != "driver"]').map((n) => n.data('state')),
      labels: window.troupeGraph.edges('[kind != "weights"]').map((e) => e.data('label')),
    }));
    assert.ok(
      graph.states.every((s) => s === 'DEAD'),
      `states ${graph.states}`,
    );
    assert.ok(graph.labels.length > 0, 'no call edge drawn');
    for (const label of graph.labels) assert.match(label, /^\w+ · [1-9]\d* calls?\b/);

    await fs.mkdir(ARTIFACTS, {recursive: true});
    await page.evaluate(() => window.scrollTo(0, 0));
    await page.screenshot({path: path.join(ARTIFACTS, 'finished_run.png'), fullPage: true});
    assert.deepEqual(pageErrors, []);
  });
});
