// Fixture head for the dashboard test: serves web/ and deterministic answers for every endpoint of
// the dashboard's REST contract (see web/js/ and issue 7), so the browser test runs without a
// cluster. Each GET of a running job's metrics adds STEPS_PER_POLL training steps, and its driver
// log gains one line per step, so a test can watch charts and the log grow between polls.
//
// Library:    const head = await startFixtureServer({webDir}); ... head.url ... await head.close();
// Standalone: node tests/dashboard/fixture_server.mjs [--port 8265] [--web web/]   (for a look at
//             the dashboard by hand; Ctrl-C stops it)
//
// The cluster: three nodes (one DEAD); job-0002 is a RUNNING GRPO job with seven actors (two
// RolloutWorkers, RewardServer, Reference, Trainer, ReplayBuffer, Checkpointer) whose metrics come
// in the contract's {"series": ...} shape; job-0001 is a SUCCEEDED smoke run whose three actors are
// DEAD and whose metrics come in metrics/'s MetricsSeriesToJson shape ({"scalars",
// "histograms"}, non-finite values as "NaN" strings); job-0003 is PENDING with one PENDING actor.
import {createHash} from 'node:crypto';
import fsSync from 'node:fs';
import fs from 'node:fs/promises';
import http from 'node:http';
import path from 'node:path';
import {fileURLToPath} from 'node:url';

export const RUNNING_JOB = 'job-0002';
export const FINISHED_JOB = 'job-0001';
export const FINISHED_STEPS = 40;
// The finished job's summary.json, as an RL run writes it (recipes/rl/run_state.cc), with the
// figures of the demo's run (issue 30 §4), and a field the dashboard has no row for.
export const FINISHED_SUMMARY = {
  accounting: {added: 38912, buffered: 2048, dropped_stale: 0, duplicates: 0, used: 36864},
  call_retries: 0,
  checkpoints: {failures: [], retries: 0, written: 3},
  curve: [
    {accuracy: 0.388, seconds: 0, step: 0},
    {accuracy: 0.61, seconds: 71.2, step: 50},
    {accuracy: 0.745, seconds: 143.9, step: 100},
    {accuracy: 0.82, seconds: 216.4, step: 150},
  ],
  ended: 'completed',
  final_accuracy: 0.82,
  groups_filtered: 0,
  initial_accuracy: 0.388,
  max_staleness: 1,
  name: 'grpo_arith_smoke',
  prompts_drawn: 9728,
  prompts_filtered: 0,
  prompts_regenerated: 0,
  recipe: 'grpo',
  samples_filtered: 0,
  samples_generated: 38912,
  samples_lost: 0,
  seconds: 216.4,
  sft_accuracy: 0.388,
  steps: 150,
  total_steps: 150,
  critic: {restarts: 0, updates_lost: 0},
};
// What the demo prints for those figures (cli/run_command.cc), which the page must say.
export const FINISHED_ACCOUNTING =
  '38912 generated = 36864 used + 0 dropped as stale + 2048 buffered + 0 filtered (all-equal ' +
  'rewards) + 0 lost (0 prompts regenerated, 0 calls retried)';
export const STEPS_PER_POLL = 2;
const INITIAL_STEPS = 12;
const STEP_SECONDS = 1.8;

const CONTENT_TYPES = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json',
  '.map': 'application/json',
  '.png': 'image/png',
  '.svg': 'image/svg+xml',
  '.md': 'text/plain; charset=utf-8',
};

function hexId(seed, length) {
  return createHash('sha256').update(seed).digest('hex').slice(0, length);
}

const GiB = 1024 ** 3;

// Builds the fixture cluster; `now` is the wall clock in ms when the server starts.
function buildCluster(now) {
  const node = (name, hostname, address, state, total, used, heartbeatAgoMs) => ({
    node_id: hexId(`node:${name}`, 28),
    address,
    hostname,
    state,
    resources_total: total,
    resources_used: used,
    last_heartbeat_ms: now - heartbeatAgoMs,
  });
  const nodes = [
    node(
      'head',
      'head-0',
      '127.0.0.1:6380',
      'ALIVE',
      {CPU: 8, GPU: 0, memory: 32 * GiB},
      {CPU: 4.5, GPU: 0, memory: 11.5 * GiB},
      400,
    ),
    node(
      'worker-1',
      'worker-1',
      '127.0.0.1:6381',
      'ALIVE',
      {CPU: 16, GPU: 2, memory: 64 * GiB},
      {CPU: 3, GPU: 2, memory: 41 * GiB},
      700,
    ),
    node(
      'worker-2',
      'worker-2',
      '127.0.0.1:6382',
      'DEAD',
      {CPU: 16, GPU: 2, memory: 64 * GiB},
      {CPU: 0, GPU: 0, memory: 0},
      9 * 60 * 1000,
    ),
  ];
  const [head, worker1, worker2] = nodes;

  let pid = 41200;
  const actor = (job, name, cls, state, onNode, resources, startedAgoS, extra = {}) => ({
    actor_id: hexId(`actor:${job}:${name}`, 32),
    class_name: cls,
    name,
    state,
    node_id: onNode.node_id,
    address: `${onNode.address.split(':')[0]}:${(pid % 1000) + 20000}`,
    pid: pid++,
    resources,
    num_restarts: 0,
    started_ms: now - startedAgoS * 1000,
    job_id: job,
    status_message: '',
    ...extra,
  });
  const actors = [
    // job-0001: a finished smoke run.
    ...[
      ['rollout-0', 'RolloutWorker', {CPU: 1, GPU: 1}],
      ['reward', 'RewardServer', {CPU: 1}],
      ['trainer', 'Trainer', {CPU: 2, GPU: 1}],
    ].map(([name, cls, resources]) =>
      actor(FINISHED_JOB, name, cls, 'DEAD', worker2, resources, 3600, {
        status_message: 'exited normally after the job finished',
        uptime_override: 1312,
      }),
    ),
    // job-0002: the running GRPO job.
    actor(RUNNING_JOB, 'rollout-0', 'RolloutWorker', 'ALIVE', worker1, {CPU: 1, GPU: 1}, 430),
    actor(RUNNING_JOB, 'rollout-1', 'RolloutWorker', 'ALIVE', worker1, {CPU: 1, GPU: 1}, 118, {
      num_restarts: 1,
      status_message: 'restarted after worker exit code 137 (out of memory)',
    }),
    actor(RUNNING_JOB, 'reward', 'RewardServer', 'ALIVE', head, {CPU: 1}, 432),
    actor(RUNNING_JOB, 'reference', 'Reference', 'ALIVE', head, {CPU: 1, memory: 4 * GiB}, 431),
    actor(RUNNING_JOB, 'trainer', 'Trainer', 'ALIVE', head, {CPU: 2, memory: 6 * GiB}, 431),
    actor(
      RUNNING_JOB,
      'replay',
      'ReplayBuffer',
      'ALIVE',
      worker1,
      {CPU: 0.5, memory: 1.5 * GiB},
      430,
    ),
    actor(RUNNING_JOB, 'checkpointer', 'Checkpointer', 'ALIVE', worker1, {CPU: 0.5}, 430),
    // job-0003: waiting for a GPU.
    actor('job-0003', 'trainer', 'Trainer', 'PENDING', head, {CPU: 2, GPU: 1}, 0, {
      pid: null,
      address: '',
      node_id: '',
      status_message: 'infeasible right now: needs {CPU: 2, GPU: 1}; no alive node has a free GPU',
    }),
  ];

  const jobs = [
    {
      job_id: FINISHED_JOB,
      name: 'grpo_arith_smoke',
      status: 'SUCCEEDED',
      submitted_ms: now - 3605e3,
      start_ms: now - 3600e3,
      end_ms: now - 3528e3,
      message: `finished: ${FINISHED_STEPS} steps`,
      logging_dir: `runs/${FINISHED_JOB}`,
      type: 'DRIVER',
      summary: FINISHED_SUMMARY,
    },
    {
      job_id: RUNNING_JOB,
      name: 'grpo_arith',
      status: 'RUNNING',
      submitted_ms: now - 440e3,
      start_ms: now - 436e3,
      end_ms: 0,
      message: '',
      logging_dir: `runs/${RUNNING_JOB}`,
    },
    {
      job_id: 'job-0003',
      name: 'grpo_arith_large',
      status: 'PENDING',
      submitted_ms: now - 20e3,
      start_ms: 0,
      end_ms: 0,
      message: 'waiting for resources: 1 GPU',
      logging_dir: 'runs/job-0003',
    },
  ];

  const placementGroups = [
    {
      id: hexId('pg:rollout', 24),
      name: `${RUNNING_JOB}/rollout`,
      strategy: 'PACK',
      state: 'CREATED',
      bundles: [
        {resources: {CPU: 1, GPU: 1}, node_id: worker1.node_id},
        {resources: {CPU: 1, GPU: 1}, node_id: worker1.node_id},
      ],
      status_message: '',
    },
    {
      id: hexId('pg:large', 24),
      name: 'job-0003/train',
      strategy: 'STRICT_SPREAD',
      state: 'PENDING',
      bundles: [
        {resources: {CPU: 2, GPU: 1}, node_id: ''},
        {resources: {CPU: 2, GPU: 1}, node_id: ''},
      ],
      status_message: 'waiting: 2 bundles need 2 distinct nodes with a free GPU',
    },
  ];
  return {nodes, actors, jobs, placementGroups};
}

// Deterministic, smooth-with-noise training curves.
function metricValues(step) {
  const s = step;
  const wobble = (k, a) => a * Math.sin(s * k);
  return {
    'critic/score/mean': 0.15 + 0.65 * (1 - Math.exp(-s / 35)) + wobble(1.7, 0.04),
    'reward/correct': 0.1 + 0.7 * (1 - Math.exp(-s / 40)) + wobble(2.3, 0.03),
    'actor/kl_loss': 0.004 * (1 - Math.exp(-s / 20)) + 0.0004 * (1 + Math.sin(s)),
    'actor/loss': 0.1 + 0.9 * Math.exp(-s / 50) + wobble(1.3, 0.03),
    'actor/pg_clipfrac': 0.05 + wobble(0.8, 0.02),
    'perf/gen_throughput': 1850 + wobble(0.9, 120),
    'perf/throughput': 5200 + wobble(0.7, 300),
    'samples/dropped_stale': Math.floor(s * 0.3),
    'weights/version': s,
    'timing_s/step': STEP_SECONDS + wobble(1.1, 0.2),
  };
}

function metricsBody(steps, startSeconds) {
  const series = {};
  const push = (name, step, value) => {
    const s = series[name] || (series[name] = {step: [], time: [], value: []});
    s.step.push(step);
    s.time.push(startSeconds + step * STEP_SECONDS);
    s.value.push(value);
  };
  const staleness = {step: [], points: []};
  for (let step = 1; step <= steps; step++) {
    for (const [name, value] of Object.entries(metricValues(step))) push(name, step, value);
    if (step % 10 === 0) push('val/accuracy', step, 0.12 + 0.68 * (1 - Math.exp(-step / 45)));
    // The staleness (in weight versions) of the step's samples: its mean as metrics.jsonl holds
    // it, and the histogram that runs written before flat metrics also carried.
    const counts = [Math.round(20 + 10 * Math.sin(step)), 30, 10, 4];
    const buckets = [0, 1, 2, 3];
    const num = counts.reduce((a, b) => a + b, 0);
    const sum = counts.reduce((a, c, i) => a + c * buckets[i], 0);
    push('rollout/staleness_mean', step, sum / num);
    staleness.step.push(step);
    staleness.points.push({
      min: 0,
      max: 3,
      num,
      sum,
      sum_squares: counts.reduce((a, c, i) => a + c * buckets[i] ** 2, 0),
      buckets,
      counts,
    });
  }
  return {series, staleness: steps > 0 ? staleness : null};
}

// The same series in MetricsSeriesToJson's shape (metrics/metrics_reader.h), with the
// loss at step 7 non-finite ("NaN", as metrics.jsonl writes it).
function metricsReaderBody(steps, startSeconds) {
  const {series: scalars, staleness} = metricsBody(steps, startSeconds);
  if (scalars['actor/loss'] && scalars['actor/loss'].value.length >= 7) {
    scalars['actor/loss'].value[6] = 'NaN';
  }
  const histograms = {};
  if (staleness) {
    histograms['rollout/staleness'] = staleness.step.map((step, i) => ({
      step,
      time: startSeconds + step * STEP_SECONDS,
      ...staleness.points[i],
    }));
  }
  return {last_step: steps, records: steps, scalars, histograms};
}

function driverLog(job, steps, actorNames) {
  const lines = [`troupe job ${job.job_id}: ${job.name}`, `logging to ${job.logging_dir}`];
  if (job.status === 'PENDING') {
    lines.push('waiting for resources: {CPU: 2, GPU: 1} (no alive node has a free GPU)');
    return `${lines.join('\n')}\n`;
  }
  lines.push('connected to head 127.0.0.1:6380 (3 nodes, 2 alive)');
  lines.push(`created ${actorNames.length} actors: ${actorNames.join(' ')}`);
  lines.push('model: tiny-gpt 2x128 (0.41 M parameters), tokenizer: char (vocab 48)');
  lines.push('prompt template: «{a} + {b} =» — answers scored by exact match ✓');
  for (let step = 1; step <= steps; step++) {
    const m = metricValues(step);
    const generate = m['perf/gen_throughput'];
    lines.push(
      `step ${String(step).padStart(4)}  reward ${m['critic/score/mean'].toFixed(3)}  ` +
        `acc ${m['reward/correct'].toFixed(3)}  kl ${m['actor/kl_loss'].toFixed(5)}  ` +
        `loss ${m['actor/loss'].toFixed(3)}  gen ${generate.toFixed(0)} tok/s  ` +
        `(${m['timing_s/step'].toFixed(2)} s)`,
    );
  }
  if (job.status === 'SUCCEEDED') lines.push('job finished: SUCCEEDED');
  return `${lines.join('\n')}\n`;
}

function actorLogTail(actor) {
  const by = {
    RolloutWorker: [
      'generate: batch 32 prompts x 4 samples, 1842 tok/s',
      'weights: now version 57 (swap between decode steps)',
      'pushed 128 samples to replay (staleness mean 1.2)',
    ],
    RewardServer: [
      'scored 128 samples: 71 correct (55.5%)',
      'scored 128 samples: 74 correct (57.8%)',
    ],
    Reference: ['logprobs for 128 sequences (4096 tokens) in 0.21 s'],
    Trainer: [
      'step 57: loss 0.412 kl 0.0031 clip 0.052 (2.1 s)',
      'broadcast weights version 58 to 2 rollout workers (1.6 MiB)',
    ],
    ReplayBuffer: ['buffered 212 samples, dropped 17 stale (max staleness 4)'],
    Checkpointer: ['saved checkpoint step 50 to runs/job-0002/ckpt/step-50 (1.7 MiB)'],
  };
  if (actor.state === 'PENDING') return '';
  const lines = [
    `[${actor.class_name} ${actor.name} pid ${actor.pid}] started`,
    ...(by[actor.class_name] || []),
  ];
  if (actor.state === 'DEAD') lines.push('exiting: the job finished');
  return lines.join('\n');
}

// The RL loop's stages (the application's schema, runtime/dashboard/graph_schema.h).
const LOOP_STAGES = {RolloutWorker: 0, RewardServer: 1, ReplayBuffer: 2, Trainer: 3};

// The actor graph of a job, shaped like the real head's /api/graph (api_json.h GraphJson): the
// GRPO driver calls every actor (a star), sample edges carry samples/s and the staleness measured
// on that edge, weights edges (trainer -> each rollout worker) the version lag and last sync.
function graphBody(cluster, jobId, pollIndex) {
  const actors = cluster.actors.filter((a) => a.job_id === jobId);
  const byName = Object.fromEntries(actors.map((a) => [a.name, a.actor_id]));
  const version = 12 + Math.floor(pollIndex / 4);
  const loaded = {'rollout-0': version, 'rollout-1': version - 1};
  const nodes = actors.map((a) => ({
    id: a.actor_id,
    label: a.name,
    class: a.class_name,
    state: a.state,
    node_id: a.node_id,
    name: `${jobId}/${a.name}`,
    stage: LOOP_STAGES[a.class_name] ?? -1,
    version:
      jobId !== RUNNING_JOB
        ? null
        : a.class_name === 'Trainer'
          ? version
          : (loaded[a.name] ?? null),
  }));
  if (jobId === FINISHED_JOB) {
    // Channels of a finished job are idle; their totals stay (the head's /api/graph: calls,
    // bytes, samples, errors as the callee last counted them).
    const idle = (source, target, kind, method, calls, bytes, samples) => ({
      source: source === 'driver' ? 'driver' : byName[source],
      target: byName[target],
      kind,
      method,
      rate: 0,
      bytes_per_s: 0,
      samples_per_s: 0,
      staleness: null,
      calls,
      bytes,
      samples,
      errors: 0,
    });
    return {
      nodes,
      edges: [
        idle('driver', 'rollout-0', 'samples', 'Generate', 1216, 5.3e6, 38912),
        idle('driver', 'reward', 'samples', 'Score', 1216, 2.1e6, 38912),
        idle('driver', 'trainer', 'samples', 'Step', 150, 9.8e6, 36864),
      ],
    };
  }
  if (jobId !== RUNNING_JOB) return {nodes, edges: []};
  const jitter = (base, k) => +(base * (1 + 0.08 * Math.sin(pollIndex * 0.9 + k))).toFixed(2);
  const edge = (source, target, kind, method, rate, bytes, samples = null, staleness = null) => ({
    source: source === 'driver' ? 'driver' : byName[source],
    target: byName[target],
    kind,
    method,
    rate: jitter(rate, rate),
    bytes_per_s: jitter(bytes, bytes % 7),
    samples_per_s: samples === null ? null : jitter(samples, samples % 5),
    staleness,
  });
  // Staleness differs per edge: samples age as they go round the loop.
  const stale = (base) => +(base + 0.1 * Math.sin(pollIndex)).toFixed(2);
  const weights = (target, lag, syncedAgoMs) => ({
    source: byName.trainer,
    target: byName[target],
    kind: 'weights',
    method: 'weights',
    rate: 0.5,
    bytes_per_s: null,
    staleness: null,
    version,
    version_lag: lag,
    last_sync_ms: Date.now() - syncedAgoMs,
  });
  const edges = [
    edge('driver', 'rollout-0', 'samples', 'Generate', 1.5, 3.2e5, 48, stale(0.3)),
    edge('driver', 'rollout-1', 'samples', 'Generate', 1.4, 3.0e5, 44, stale(0.5)),
    edge('driver', 'reward', 'samples', 'Score', 2.9, 6.1e5, 92, stale(0.7)),
    edge('driver', 'replay', 'samples', 'Add', 2.9, 6.2e5, 92, stale(0.8)),
    edge('driver', 'replay', 'samples', 'Take', 0.5, 4.1e5, 64, stale(1.6)),
    edge('driver', 'trainer', 'samples', 'Step', 0.5, 4.0e5, 64, stale(1.7)),
    edge('driver', 'reference', 'call', 'LogProbs', 0.5, 2.1e5),
    edge('trainer', 'checkpointer', 'call', 'Save', 0.1, 1.7e5),
    weights('rollout-0', 0, 2000),
    weights('rollout-1', 1, 9000),
  ];
  return {nodes, edges};
}

// ---- Resource usage, the metric catalog and worker logs ------------------------------------
//
// Every node gets "usage": {cpu_percent, memory_used_bytes, memory_total_bytes} (null for the
// DEAD node: unknown; the CPU use moves with every GET of /api/nodes, see sampleNodes); every actor "usage": {cpu_percent (of one core, may exceed 100),
// rss_bytes} (null unless ALIVE). /api/metric_catalog is read from docs/metrics.md (generated
// from metrics/metric_catalog.cc, so the fixture serves the real catalog). Worker logs: each
// GET of an ALIVE actor's /api/actors/ID/logs appends a line to that stream first, so a client
// can watch it grow.

const DOCS_METRICS = path.resolve(
  path.dirname(fileURLToPath(import.meta.url)),
  '../../docs/metrics.md',
);

// docs/metrics.md's tables ("| `name` | unit or – | source | meaning |") as catalog entries.
export function parseMetricCatalog(markdown) {
  const metrics = [];
  for (const line of markdown.split('\n')) {
    const m = line.match(/^\| `([^`]+)` \| ([^|]*) \| ([^|]*) \| (.*) \|$/);
    if (!m) continue;
    const unit = m[2].trim();
    metrics.push({
      name: m[1],
      unit: unit === '–' ? '' : unit,
      source: m[3].trim(),
      description: m[4].trim().replace(/\\\|/g, '|'),
    });
  }
  return metrics;
}

function addUsage(cluster) {
  cluster.nodes.forEach((n, i) => {
    n.usage =
      n.state === 'ALIVE'
        ? {
            cpu_percent: [37.5, 81.25][i % 2],
            memory_used_bytes: Math.round(n.resources_total.memory * [0.42, 0.87][i % 2]),
            memory_total_bytes: n.resources_total.memory,
          }
        : null;
  });
  cluster.actors.forEach((a, i) => {
    a.usage =
      a.state === 'ALIVE'
        ? {
            cpu_percent: a.class_name === 'Trainer' ? 187.33333333333 : 12.5 + 3.1234567 * i,
            rss_bytes: Math.round((0.35 + 0.211 * i) * GiB) + 12345,
          }
        : null;
  });
}

// A worker's start-up output: enough lines that its log scrolls in the logs page.
function startupLines(actor) {
  if (actor.state === 'PENDING') return [];
  return Array.from({length: 60}, (_, i) => `[${actor.name}] loading shard ${i + 1}/60`);
}

function createWorkbench(cluster) {
  addUsage(cluster);
  // Each GET of /api/nodes is a new sample, as on a real head (a node's heartbeat measures its
  // use anew): the ALIVE nodes' CPU use moves by several points from one answer to the next.
  const CPU_STEPS = [0, 6.25, -6.25, 12.5, -12.5];
  let nodeSamples = 0;
  const sampleNodes = () => {
    nodeSamples++;
    return cluster.nodes.map((n, i) =>
      n.usage
        ? {
            ...n,
            usage: {
              ...n.usage,
              cpu_percent: n.usage.cpu_percent + CPU_STEPS[(nodeSamples + i) % CPU_STEPS.length],
            },
          }
        : n,
    );
  };
  let catalog = null;
  const logs = new Map(); // `${actor_id} ${stream}` -> Buffer
  const logOf = (actor, stream) => {
    const key = `${actor.actor_id} ${stream}`;
    if (!logs.has(key)) {
      const text =
        stream === 'stderr'
          ? [actorLogTail(actor), ...startupLines(actor)].filter(Boolean).join('\n')
          : actor.state === 'PENDING'
            ? ''
            : `${actor.name}: stdout of pid ${actor.pid}\n`;
      logs.set(key, Buffer.from(text ? `${text.replace(/\n?$/, '\n')}` : '', 'utf8'));
    }
    return logs.get(key);
  };
  let ticks = 0;
  return {
    // Serves the endpoints above; false for any other path.
    handle(parts, url, res, sendJson) {
      const [, resource, id, sub] = parts;
      if (resource === 'nodes' && !id) {
        sendJson(res, 200, {nodes: sampleNodes()});
        return true;
      }
      if (resource === 'metric_catalog' && !id) {
        if (!catalog) catalog = parseMetricCatalog(fsSync.readFileSync(DOCS_METRICS, 'utf8'));
        sendJson(res, 200, {metrics: catalog});
        return true;
      }
      if (resource !== 'actors' || !id || sub !== 'logs' || parts.length !== 4) return false;
      const stream = url.searchParams.get('stream') ?? 'stdout';
      if (stream !== 'stdout' && stream !== 'stderr') {
        sendJson(res, 400, {error: `stream must be stdout or stderr, got "${stream}"`});
        return true;
      }
      const offsetText = url.searchParams.get('offset') ?? '0';
      const offset = /^\d+$/.test(offsetText) ? Number(offsetText) : NaN;
      if (!Number.isSafeInteger(offset)) {
        sendJson(res, 400, {error: `offset must be a non-negative integer, got "${offsetText}"`});
        return true;
      }
      const actor = cluster.actors.find((a) => a.actor_id === id);
      if (!actor) {
        sendJson(res, 404, {error: `no actor with id ${id}`});
        return true;
      }
      let log = logOf(actor, stream);
      if (actor.state === 'ALIVE') {
        ticks++;
        const line = `[${actor.name}] ${stream} line ${ticks}: step ${ticks} ok ✓\n`;
        log = Buffer.concat([log, Buffer.from(line, 'utf8')]);
        logs.set(`${actor.actor_id} ${stream}`, log);
      }
      const chunk = log.subarray(Math.min(offset, log.length), offset + 256 * 1024);
      res.writeHead(200, {
        'Content-Type': 'text/plain; charset=utf-8',
        'Cache-Control': 'no-store',
        'X-Log-Offset': String(Math.min(offset, log.length) + chunk.length),
        'X-Log-Size': String(log.length),
        'X-Log-Found': actor.state === 'PENDING' ? '0' : '1',
      });
      res.end(chunk);
      return true;
    },
  };
}

// Starts the fixture on host:port (port 0 = any free port). Resolves to {url, close, state}.
export async function startFixtureServer({webDir, host = '127.0.0.1', port = 0} = {}) {
  if (!webDir) throw new Error('startFixtureServer: webDir is required');
  const root = await fs.realpath(webDir);
  await fs.access(path.join(root, 'index.html')).catch(() => {
    throw new Error(`startFixtureServer: ${path.join(root, 'index.html')} not found`);
  });
  const now = Date.now();
  const cluster = buildCluster(now);
  const workbench = createWorkbench(cluster);
  const state = {
    steps: {[FINISHED_JOB]: FINISHED_STEPS, [RUNNING_JOB]: INITIAL_STEPS, 'job-0003': 0},
    metricsPolls: 0,
    graphPolls: 0,
    requests: 0,
  };
  const jobStartSeconds = (job) => (job.start_ms || now) / 1000;

  const publicActor = (a) => {
    const {started_ms: started, uptime_override: uptimeOverride, ...rest} = a;
    const uptime = a.state === 'PENDING' ? 0 : (uptimeOverride ?? (Date.now() - started) / 1000);
    return {...rest, uptime_s: +uptime.toFixed(1)};
  };

  function sendJson(res, status, body) {
    const text = JSON.stringify(body);
    res.writeHead(status, {'Content-Type': 'application/json', 'Cache-Control': 'no-store'});
    res.end(text);
  }

  function findJob(id) {
    return cluster.jobs.find((j) => j.job_id === id);
  }

  function handleApi(req, res, url) {
    const parts = url.pathname.split('/').filter(Boolean).map(decodeURIComponent); // ['api', ...]
    const [, resource, id, sub] = parts;
    if (workbench.handle(parts, url, res, sendJson)) return;
    if (resource === 'nodes' && !id) return sendJson(res, 200, {nodes: cluster.nodes});
    if (resource === 'placement_groups' && !id) {
      return sendJson(res, 200, {placement_groups: cluster.placementGroups});
    }
    if (resource === 'actors' && !id) {
      const job = url.searchParams.get('job');
      const wantedState = url.searchParams.get('state');
      const actors = cluster.actors.filter(
        (a) => (!job || a.job_id === job) && (!wantedState || a.state === wantedState),
      );
      return sendJson(res, 200, {actors: actors.map(publicActor)});
    }
    if (resource === 'actors' && id && !sub) {
      const actor = cluster.actors.find((a) => a.actor_id === id);
      if (!actor) return sendJson(res, 404, {error: `no actor with id ${id}`});
      return sendJson(res, 200, {...publicActor(actor), log_tail: actorLogTail(actor)});
    }
    if (resource === 'graph' && !id) {
      const jobId = url.searchParams.get('job');
      if (!jobId) return sendJson(res, 400, {error: 'graph: the job query parameter is required'});
      if (!findJob(jobId)) return sendJson(res, 404, {error: `no job with id ${jobId}`});
      return sendJson(res, 200, graphBody(cluster, jobId, state.graphPolls++));
    }
    if (resource === 'jobs' && !id) return sendJson(res, 200, {jobs: cluster.jobs});
    if (resource === 'jobs' && id) {
      const job = findJob(id);
      if (!job) return sendJson(res, 404, {error: `no job with id ${id}`});
      if (!sub) return sendJson(res, 200, job);
      if (sub === 'metrics') {
        if (job.status === 'RUNNING') {
          state.metricsPolls++;
          state.steps[id] += STEPS_PER_POLL;
        }
        const start = jobStartSeconds(job);
        const body =
          id === FINISHED_JOB
            ? metricsReaderBody(state.steps[id], start)
            : {series: metricsBody(state.steps[id], start).series};
        return sendJson(res, 200, body);
      }
      if (sub === 'logs') {
        const offsetText = url.searchParams.get('offset') || '0';
        const offset = Number(offsetText);
        if (!Number.isInteger(offset) || offset < 0) {
          return sendJson(res, 400, {
            error: `logs: offset must be a non-negative integer, got "${offsetText}"`,
          });
        }
        const names = cluster.actors.filter((a) => a.job_id === id).map((a) => a.name);
        const log = Buffer.from(driverLog(job, state.steps[id], names), 'utf8');
        const chunk = log.subarray(Math.min(offset, log.length));
        res.writeHead(200, {
          'Content-Type': 'text/plain; charset=utf-8',
          'Cache-Control': 'no-store',
          'X-Log-Offset': String(Math.max(offset, log.length)),
        });
        return res.end(chunk);
      }
    }
    return sendJson(res, 404, {error: `no such endpoint: ${url.pathname}`});
  }

  async function handleStatic(res, url) {
    let rel = decodeURIComponent(url.pathname);
    if (rel === '/' || rel === '') rel = '/index.html';
    const file = path.resolve(root, `.${rel}`);
    if (file !== root && !file.startsWith(root + path.sep)) {
      res.writeHead(403);
      return res.end('forbidden');
    }
    try {
      const body = await fs.readFile(file);
      res.writeHead(200, {
        'Content-Type': CONTENT_TYPES[path.extname(file)] || 'application/octet-stream',
        'Cache-Control': 'no-store',
      });
      res.end(body);
    } catch (_) {
      res.writeHead(404, {'Content-Type': 'text/plain'});
      res.end(`not found: ${url.pathname}`);
    }
  }

  const server = http.createServer((req, res) => {
    state.requests++;
    let url;
    try {
      url = new URL(req.url, 'http://fixture');
    } catch (_) {
      res.writeHead(400);
      return res.end('bad url');
    }
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      if (!/^Bearer \S+/.test(req.headers.authorization || '')) {
        return sendJson(res, 401, {error: 'this endpoint changes state: send the cluster token'});
      }
      return sendJson(res, 405, {error: 'the fixture head is read-only'});
    }
    if (url.pathname === '/api' || url.pathname.startsWith('/api/')) {
      try {
        return handleApi(req, res, url);
      } catch (e) {
        return sendJson(res, 500, {error: String((e && e.stack) || e)});
      }
    }
    handleStatic(res, url);
  });
  // Keep-alive sockets would hold close() open; the browser is closed first anyway.
  server.keepAliveTimeout = 1000;
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, resolve);
  });
  const address = server.address();
  return {
    url: `http://${host}:${address.port}/`,
    state,
    cluster,
    close: () =>
      new Promise((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

// Standalone use: serve until interrupted.
if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  const flag = (name, fallback) => {
    const i = args.indexOf(name);
    return i >= 0 && args[i + 1] ? args[i + 1] : fallback;
  };
  const here = path.dirname(fileURLToPath(import.meta.url));
  const head = await startFixtureServer({
    webDir: flag('--web', path.resolve(here, '../../web')),
    port: Number(flag('--port', '8265')),
  });
  console.log(`fixture head serving the dashboard at ${head.url} (Ctrl-C stops it)`);
  const stop = async () => {
    await head.close();
    process.exit(0);
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
}
