// troupe dashboard: the entry point (index.html loads it with <script type="module">; no build
// step). Polls the head's REST API and renders the cluster, actor, job-list and job views.
//
// One view is mounted at a time (hash routing, see route()); the poller (poller.js) calls its
// refresh() every POLL_MS and never overlaps two refreshes. Every string from the API reaches the
// page through textContent (el() in format.js), never through innerHTML.
//
// Modules: api.js (fetch), poller.js (polling, connection state), format.js (DOM and formatting
// helpers), actor_details.js (details panel, node names), cluster_view.js, actors_view.js,
// jobs_view.js, job_view.js (with graph.js and charts.js), logs_view.js, login.js (the token).
//
// Hooks for tests and scripting:
//   window.troupeGraph        the job view's cytoscape instance (actor vertices have data kind
//                             "actor"; the synthetic driver vertex has kind "driver")
//   window.troupeDashboard    {pollCount, view, lastError}
//   [data-metric]             chart containers; data-points = number of steps plotted,
//                             data-unit = y-axis label, data-jobs = jobs plotted
//   window.troupeCharts       the job view's JobCharts (charts: id -> {plot, spec, ...})
//   #details-panel            the job view's side panel (data-actor-id = the selected actor)
//   #job-log                  the driver log (data-offset = bytes read so far)
//   #worker-log               the logs view's worker log (data-offset, data-following = 1/0)

import {actorsView} from './actors_view.js';
import {clusterView} from './cluster_view.js';
import {$, el} from './format.js';
import {jobView} from './job_view.js';
import {jobsView} from './jobs_view.js';
import {installLogin} from './login.js';
import {logsView} from './logs_view.js';
import {app, poll, pollNow, stopPolling} from './poller.js';

const VIEWS = {
  cluster: clusterView,
  actors: actorsView,
  jobs: jobsView,
  job: jobView,
  logs: logsView,
};

function parseRoute() {
  const hash = location.hash.replace(/^#\/?/, '');
  const [path, query = ''] = hash.split('?');
  const parts = path
    .split('/')
    .filter(Boolean)
    .map((p) => {
      try {
        return decodeURIComponent(p);
      } catch (_) {
        return p;
      }
    });
  const params = new URLSearchParams(query);
  if (parts[0] === 'actors') return {view: 'actors', params};
  if (parts[0] === 'jobs' && parts[1]) return {view: 'job', jobId: parts[1], params};
  if (parts[0] === 'jobs') return {view: 'jobs', params};
  if (parts[0] === 'logs') return {view: 'logs', params};
  return {view: 'cluster', params};
}

function route() {
  const r = parseRoute();
  const next = VIEWS[r.view];
  stopPolling();
  if (app.view) app.view.unmount();
  for (const v of Object.values(VIEWS)) document.getElementById(v.section).hidden = v !== next;
  for (const a of document.querySelectorAll('#nav a')) {
    a.classList.toggle(
      'active',
      a.dataset.view === r.view || (r.view === 'job' && a.dataset.view === 'jobs'),
    );
  }
  app.view = next;
  app.viewName = r.view;
  document.title =
    r.view === 'job'
      ? `${r.jobId} · troupe`
      : `${r.view[0].toUpperCase()}${r.view.slice(1)} · troupe`;
  next.mount(r);
  poll(app.generation);
}

function init() {
  if (typeof cytoscape === 'undefined' || typeof uPlot === 'undefined') {
    document.body.prepend(
      el('div', {class: 'banner', text: "The dashboard's libraries (vendor/) failed to load."}),
    );
    return;
  }
  $('#actor-filter-state').addEventListener('change', () => actorsView.onFilterChange());
  $('#actor-filter-job').addEventListener('change', () => actorsView.onFilterChange());
  $('#actor-filter-text').addEventListener('input', () => actorsView.renderTable());
  window.addEventListener('hashchange', () => {
    // Filter edits rewrite the hash with replaceState (no event); a real navigation remounts.
    route();
  });
  document.addEventListener('visibilitychange', () => {
    if (!document.hidden) pollNow();
  });
  installLogin(() => route());
  route();
}

init();
